/*
 * sse.c -- Server-Sent Events streams, and the streams of session output
 * (see sse.h).
 *
 * A stream is a chunked answer (evhttp_send_reply_start/chunk/end).  Frames
 * are gathered in the stream's own buffer during a pull and handed to evhttp
 * as one chunk after it, with a callback that runs when the connection's
 * output has drained: then the stream is pulled again.  evhttp reads the
 * connection again once the head went, to see a close, with the read
 * timeout of --idle-timeout: a silent SSE client would be cut by it, so a
 * stream keeps only the write timeout (a reader that stops reading for
 * --idle-timeout is cut).  The close is also watched for with EV_CLOSED
 * (http_watch_stream(), level-triggered since the stream writes), as
 * long-polls do: a client that goes away without a byte to be written is
 * seen at once.
 */
#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http.h"
#include "log.h"
#include "outq.h"
#include "proto.h"
#include "ringbuf.h"
#include "session.h"
#include "sse.h"
#include "turn.h"
#include "util.h"

#define SSE_READ_CHUNKS		64	/* chunks read from a ring at a time */
#define SSE_READ_BYTES		(256 * 1024) /* bytes read from a ring at a time */
#define SSE_ESCAPE_WORST	6	/* rendered bytes of an output byte */
#define SSE_BUDGET_RETRY_MS	100	/* a stream waiting for the budget of
					   answers held looks again */
#define SSE_TURN_US		4000	/* µs of pulls into all streams in
					   one loop turn (and one ring read),
					   past which the next pulls wait for
					   the next turn */

/* A stream. */
struct sse {
	TAILQ_ENTRY(sse)	 entry;
	struct evhttp_request	*req;
	struct evhttp_connection *evcon;
	struct evbuffer		*frames;	/* queued, not handed to evhttp */
	struct event		*closed;	/* the client went away */
	struct event		*keepalive;
	sse_pull_fn		 pull;
	sse_gone_fn		 gone;
	void			*arg;
	int			 pulling;	/* in pull() now */
	int			 ending;	/* sse_end() during the pull */
	int			 starved;	/* waits for the answers' budget */
	int			 deferred;	/* waits for the next loop turn */
	size_t			 promised;	/* bytes reserved in the budget,
						   not queued yet */
	size_t			 reserved;	/* its buffer's bytes not taken
						   by unsent ones, counted */
	TAILQ_ENTRY(sse)	 dentry;	/* in sse_deferred */
};
TAILQ_HEAD(sses, sse);

/* A stream of a session's output. */
struct sse_session {
	TAILQ_ENTRY(sse_session) entry;
	struct sse		*sse;
	struct session		*s;
	uint64_t		 cursor;	/* the last chunk sent */
	size_t			 skip;		/* bytes of the next chunk
						   read before (a cursor
						   inside it) */
	int			 encoding;	/* PROTO_ENC_* */
};
TAILQ_HEAD(sse_sessions, sse_session);

static struct sses		 sse_streams = TAILQ_HEAD_INITIALIZER(sse_streams);
static TAILQ_HEAD(, sse)	 sse_deferred =
				    TAILQ_HEAD_INITIALIZER(sse_deferred);
static struct sse_sessions	 sse_sessions =
				    TAILQ_HEAD_INITIALIZER(sse_sessions);
static size_t			 sse_count;
static uint64_t			 sse_started;
static uint64_t			 sse_gaps;
static size_t			 sse_buffer_bytes;
static int64_t			 sse_keepalive_ms;
static int			 sse_encoding;	/* --encoding */
static int64_t			 sse_idle_ms;
static struct event		*sse_budget_ev;	/* wakes starved streams */
static uint64_t			 sse_starved_total;
static int64_t			 sse_turn_us;	/* the turn's first pull */
static struct turn		*sse_turn;	/* the pulls' loop turn */
static struct event		*sse_next_ev;	/* the next turn's pulls */
static uint64_t			 sse_deferred_total;
static uint8_t			*sse_buf;	/* a ring read's bytes */
static size_t			 sse_buf_len;
static struct ring_chunk	 sse_chunks[SSE_READ_CHUNKS];
static struct event_base	*sse_base;	/* the loop */

static struct sse *sse_open(struct http_req *, int, const char *, sse_pull_fn,
		    sse_gone_fn, void *);
static void	sse_run(struct sse *);
static void	sse_flush(struct sse *);
static void	sse_finish(struct sse *);
static void	sse_drained(struct evhttp_connection *, void *);
static void	sse_conn_gone(struct evhttp_connection *, void *);
static void	sse_client_closed(evutil_socket_t, short, void *);
static void	sse_keepalive_cb(evutil_socket_t, short, void *);
static void	sse_timeouts(struct sse *);
static size_t	sse_unsent(const struct sse *);
static int	sse_budget_ok(const struct sse *);
static size_t	sse_budget_want(void);
static void	sse_starve(struct sse *);
static void	sse_budget_cb(evutil_socket_t, short, void *);
static void	sse_forget(struct sse *);
static void	sse_session_pull(struct sse *, void *);
static void	sse_session_gone(void *);
static void	sse_session_exit(struct sse_session *);
static int	sse_turn_spent(void);
static void	sse_keep_promise(struct sse *, size_t);
static void	sse_reserve(struct sse *);
static int	sse_room_own(const struct sse *);
static void	sse_defer(struct sse *);
static void	sse_next_cb(evutil_socket_t, short, void *);

/* Set the bounds. */
void
sse_init(struct event_base *base, size_t buffer_bytes, int64_t keepalive_ms,
    int64_t idle_timeout_ms)
{
	sse_base = base;
	sse_turn = turn_new(base);
	if ((sse_next_ev = evtimer_new(base, sse_next_cb, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	sse_buffer_bytes = buffer_bytes;
	sse_keepalive_ms = keepalive_ms;
	sse_idle_ms = idle_timeout_ms;
}

/* Set how chunks render when a stream names no encoding: --encoding. */
void
sse_set_encoding(int encoding)
{
	sse_encoding = encoding;
}

/* Whether the request is a GET accepting text/event-stream. */
int
sse_wanted(const struct http_req *hr)
{
	const char	*accept;

	if (hr->method != EVHTTP_REQ_GET)
		return (0);
	accept = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "Accept");
	/* Media types are case-insensitive (RFC 9110 8.3.1). */
	return (accept != NULL && strcasestr(accept, "text/event-stream") !=
	    NULL);
}

/* The Last-Event-ID header as an id. */
int
sse_last_event_id(const struct http_req *hr, uint64_t *id)
{
	const char	*v;
	uint64_t	 n = 0;

	v = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "Last-Event-ID");
	if (v == NULL)
		return (0);
	if (*v == '\0' || strlen(v) > 20)
		return (-1);
	for (; *v != '\0'; v++) {
		if (*v < '0' || *v > '9' ||
		    n > (UINT64_MAX - (uint64_t)(*v - '0')) / 10)
			return (-1);
		n = n * 10 + (uint64_t)(*v - '0');
	}
	*id = n;
	return (1);
}

/* Whether the query string has key (with a value or not). */
int
sse_query_has(const struct http_req *hr, const char *key)
{
	struct evkeyvalq	 kv;
	int			 has;

	TAILQ_INIT(&kv);
	has = evhttp_parse_query_str(hr->query, &kv) == 0 &&
	    evhttp_find_header(&kv, key) != NULL;
	evhttp_clear_headers(&kv);
	return (has);
}

/* Answer with a stream (its first frames come with the first kick). */
struct sse *
sse_start(struct http_req *hr, sse_pull_fn pull, sse_gone_fn gone, void *arg)
{
	return (sse_open(hr, 200, NULL, pull, gone, arg));
}

/* A stream of raw bytes of a content type, without keepalive lines. */
struct sse *
sse_start_raw(struct http_req *hr, int status, const char *type,
    sse_pull_fn pull, sse_gone_fn gone, void *arg)
{
	return (sse_open(hr, status, type, pull, gone, arg));
}

/* Queue raw bytes (a stream of sse_start_raw()). */
void
sse_send_raw(struct sse *st, const void *data, size_t len)
{
	if (evbuffer_add(st->frames, data, len) != 0)
		fatal("%s: out of memory", __func__);
}

/* Start a stream: SSE (type NULL), or raw bytes of type. */
static struct sse *
sse_open(struct http_req *hr, int status, const char *type, sse_pull_fn pull,
    sse_gone_fn gone, void *arg)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(hr->req);
	struct sse		*st;
	struct timeval		 tv;

	st = xcalloc(1, sizeof *st);
	st->req = hr->req;
	st->evcon = evhttp_request_get_connection(hr->req);
	st->pull = pull;
	st->gone = gone;
	st->arg = arg;
	if ((st->frames = evbuffer_new()) == NULL ||
	    (st->keepalive = event_new(sse_base, -1, EV_PERSIST,
	    sse_keepalive_cb, st)) == NULL)
		fatal("%s: out of memory", __func__);
	evhttp_add_header(h, "Content-Type", type != NULL ? type :
	    "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "X-Accel-Buffering", "no");
	http_count(status);
	evhttp_send_reply_start(hr->req, status, NULL);
	sse_timeouts(st);	/* a silent stream is not cut before a frame */
	evhttp_connection_set_closecb(st->evcon, sse_conn_gone, st);
	st->closed = http_watch_stream(hr->req, sse_client_closed, st);
	if (type == NULL)	/* a comment line is SSE's own */
		evtimer_add(st->keepalive, timeval_ms(&tv, sse_keepalive_ms));
	TAILQ_INSERT_TAIL(&sse_streams, st, entry);
	sse_reserve(st);
	sse_count++;
	sse_started++;
	log_debug("%s: stream %p on %s", __func__, (void *)st, hr->path);
	return (st);
}

/* The stream's unsent bytes: its connection's output, its frames. */
static size_t
sse_unsent(const struct sse *st)
{
	struct bufferevent	*bev;

	bev = evhttp_connection_get_bufferevent(st->evcon);
	return (evbuffer_get_length(bufferevent_get_output(bev)) +
	    evbuffer_get_length(st->frames));
}

/*
 * Whether the budget of answers held (outq.h) takes the stream's frames
 * not handed over yet and --sse-buffer more: the bytes a pull may add.
 */
static int
sse_budget_ok(const struct sse *st)
{
	size_t	n = evbuffer_get_length(st->frames) + sse_budget_want();

	/* Its bytes to come are counted already, or its share of them. */
	if (st->promised > 0)
		return (1);
	return (outq_fits_stream(n > st->reserved ? n - st->reserved : 0));
}

/* The stream will queue about n bytes more, admitted already. */
void
sse_promise(struct sse *st, size_t n)
{
	st->promised += n;
	outq_reserve(n);
}

/*
 * Count what the stream was admitted for as long as it is open: its
 * --sse-buffer share of the budget (sse_budget_want()), its unsent bytes
 * when they are more.  So the streams open at once are bounded by the
 * budget, whether their bytes wait here, in the kernel or were read (a
 * stream whose next pull waits for a later loop turn still counts); and
 * a stream's pulls within its share never wait for the budget.  Looked at
 * after each pull, and when its output drained.
 */
static void
sse_reserve(struct sse *st)
{
	size_t	want = sse_budget_want(), unsent = sse_unsent(st), n;

	n = unsent < want ? want - unsent : 0;
	if (n > st->reserved)
		outq_reserve(n - st->reserved);
	else
		outq_release(st->reserved - n);
	st->reserved = n;
}

/* n bytes were queued: as many of the promised ones are. */
static void
sse_keep_promise(struct sse *st, size_t n)
{
	if (n > st->promised)
		n = st->promised;
	st->promised -= n;
	outq_release(n);
}

/*
 * The budget a stream asks for: --sse-buffer, but an eighth of the budget
 * at most, so that a --sse-buffer near --max-answer-bytes still streams.
 */
static size_t
sse_budget_want(void)
{
	uint64_t	max = outq_max() / 8;

	return (sse_buffer_bytes < max ? sse_buffer_bytes : (size_t)max);
}

/*
 * Whether the unsent bytes are under --sse-buffer, and the budget of
 * answers held has room for more.
 */
int
sse_room(const struct sse *st)
{
	return (sse_room_own(st) && !(turn_open(sse_turn) &&
	    clock_mono_us() - sse_turn_us >= SSE_TURN_US));
}

/* The same but for the loop turn's share: its buffer, the budget. */
static int
sse_room_own(const struct sse *st)
{
	return (!st->ending && sse_unsent(st) < sse_buffer_bytes &&
	    sse_budget_ok(st));
}

/* Bytes the stream may take before sse_room() says no. */
size_t
sse_room_bytes(const struct sse *st)
{
	size_t	n = sse_unsent(st);

	return (n < sse_buffer_bytes ? sse_buffer_bytes - n : 0);
}

/*
 * A stream with room of its own but none in the budget: look again in
 * SSE_BUDGET_RETRY_MS (nothing else would pull it: its own output is
 * sent).
 */
static void
sse_starve(struct sse *st)
{
	struct timeval	tv;

	if (st->ending || st->starved || sse_budget_ok(st) ||
	    sse_unsent(st) >= sse_buffer_bytes)
		return;
	st->starved = 1;
	sse_starved_total++;
	if (sse_budget_ev == NULL && (sse_budget_ev = evtimer_new(sse_base,
	    sse_budget_cb, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	if (!evtimer_pending(sse_budget_ev, NULL))
		evtimer_add(sse_budget_ev, timeval_ms(&tv,
		    SSE_BUDGET_RETRY_MS));
}

/* The budget's retry: pull the starved streams that have room now. */
static void
sse_budget_cb(evutil_socket_t fd, short events, void *arg)
{
	struct sse	*st, *next;

	for (st = TAILQ_FIRST(&sse_streams); st != NULL; st = next) {
		next = TAILQ_NEXT(st, entry);
		if (!st->starved)
			continue;
		st->starved = 0;
		sse_kick(st);	/* may end it, or starve it again */
	}
}

/*
 * Whether a new stream may start: the budget of answers held has room for
 * its --sse-buffer; else 503 too_busy is answered and -1 returned.
 */
int
sse_admit(struct http_req *hr)
{
	struct proto_err	err;

	if (outq_admit_stream(sse_budget_want(), &err) == 0)
		return (0);
	http_reply_error(hr->req, &err, NULL);
	return (-1);
}

/* Queue a frame. */
void
sse_send(struct sse *st, uint64_t id, const char *event, const char *data,
    size_t len)
{
	if (evbuffer_add_printf(st->frames, "id: %" PRIu64 "\nevent: %s\n"
	    "data: ", id, event) < 0 || evbuffer_add(st->frames, data,
	    len) != 0 || evbuffer_add(st->frames, "\n\n", 2) != 0)
		fatal("%s: out of memory", __func__);
	if (strcmp(event, "gap") == 0)
		sse_gaps++;
}

/* The producer has news. */
void
sse_kick(struct sse *st)
{
	if (!st->pulling && sse_room_own(st))
		sse_run(st);	/* or in the next loop turn */
	else if (!st->pulling)
		sse_starve(st);
}

/* End the stream now, or after the pull that asks it. */
void
sse_end(struct sse *st)
{
	if (st->pulling) {
		st->ending = 1;
		return;
	}
	sse_flush(st);
	sse_finish(st);
}

/*
 * Pull frames, hand them to evhttp, and end the stream if asked; or, when
 * the pulls of this loop turn took SSE_TURN_US, wait for the next.
 */
static void
sse_run(struct sse *st)
{
	size_t	base;

	if (st->deferred)
		return;
	if (sse_turn_spent()) {
		sse_defer(st);
		return;
	}
	base = evbuffer_get_length(st->frames);
	st->pulling = 1;
	st->pull(st, st->arg);
	st->pulling = 0;
	sse_keep_promise(st, evbuffer_get_length(st->frames) - base);
	sse_reserve(st);
	sse_flush(st);
	if (st->ending)
		sse_finish(st);
	else
		sse_starve(st);
}

/* Hand the queued frames to evhttp as one chunk. */
static void
sse_flush(struct sse *st)
{
	if (evbuffer_get_length(st->frames) == 0)
		return;
	evhttp_send_reply_chunk_with_cb(st->req, st->frames, sse_drained, st);
	sse_timeouts(st);
}

/*
 * Keep the connection's write timeout only: evhttp reads again during a
 * stream, to see a close, and its read timeout would cut a silent client.
 */
static void
sse_timeouts(struct sse *st)
{
	struct timeval	tv;

	bufferevent_set_timeouts(evhttp_connection_get_bufferevent(st->evcon),
	    NULL, timeval_ms(&tv, sse_idle_ms));
}

/* The end of the answer: unlink and free the stream. */
static void
sse_finish(struct sse *st)
{
	sse_forget(st);
	evhttp_connection_set_closecb(st->evcon, NULL, NULL);
	event_free(st->closed);
	event_free(st->keepalive);
	evbuffer_free(st->frames);
	evhttp_send_reply_end(st->req);
	log_debug("%s: stream %p ended", __func__, (void *)st);
	free(st);
}

/*
 * Whether the pulls of this loop turn took SSE_TURN_US.  Many streams that
 * drain at once would otherwise render --sse-buffer each in one turn,
 * while requests wait behind them (400 streams read through qemu's
 * network kept /healthz at 200 ms under TCG); time, not bytes, so that a
 * fast CPU still fills a reader's connection in few turns.  The turn's
 * first look starts the clock again (turn.h).
 */
static int
sse_turn_spent(void)
{
	if (turn_look(sse_turn))
		sse_turn_us = clock_mono_us();
	return (clock_mono_us() - sse_turn_us >= SSE_TURN_US);
}

/* Pull the stream in the next loop turn, after the ones waiting before. */
static void
sse_defer(struct sse *st)
{
	struct timeval	tv = { 0, 0 };

	st->deferred = 1;
	TAILQ_INSERT_TAIL(&sse_deferred, st, dentry);
	sse_deferred_total++;
	/* A timer: it runs after the loop looked at the fds again. */
	if (!evtimer_pending(sse_next_ev, NULL))
		evtimer_add(sse_next_ev, &tv);
}

/* A new loop turn: pull the waiting streams, first come first. */
static void
sse_next_cb(evutil_socket_t fd, short events, void *arg)
{
	struct timeval	 tv = { 0, 0 };
	struct sse	*st;

	while ((st = TAILQ_FIRST(&sse_deferred)) != NULL &&
	    !sse_turn_spent()) {
		TAILQ_REMOVE(&sse_deferred, st, dentry);
		st->deferred = 0;
		sse_kick(st);	/* may end it, or starve it */
	}
	if (!TAILQ_EMPTY(&sse_deferred))
		evtimer_add(sse_next_ev, &tv);
}

/* Unlink a stream; the budget's timer goes with the last one. */
static void
sse_forget(struct sse *st)
{
	TAILQ_REMOVE(&sse_streams, st, entry);
	sse_keep_promise(st, st->promised);	/* never to come */
	outq_release(st->reserved);
	st->reserved = 0;
	if (st->deferred)
		TAILQ_REMOVE(&sse_deferred, st, dentry);
	if (--sse_count == 0 && sse_budget_ev != NULL) {
		event_free(sse_budget_ev);
		sse_budget_ev = NULL;
	}
}

/* The connection's output drained: pull again. */
static void
sse_drained(struct evhttp_connection *evcon, void *arg)
{
	struct sse	*st = arg;

	sse_reserve(st);
	if (!st->pulling)
		sse_run(st);
}

/* A comment line, so that proxies and clients see the stream alive. */
static void
sse_keepalive_cb(evutil_socket_t fd, short events, void *arg)
{
	struct sse	*st = arg;

	if (!sse_room_own(st))
		return;		/* bytes are waiting: it is alive */
	if (evbuffer_add(st->frames, ": keepalive\n\n", 13) != 0)
		fatal("%s: out of memory", __func__);
	sse_flush(st);
}

/* The stream's client closed its connection: free it. */
static void
sse_client_closed(evutil_socket_t fd, short events, void *arg)
{
	struct sse	*st = arg;

	if (!http_client_gone(fd, events))
		return;		/* bytes from the client, not a close */
	log_debug("%s: stream %p: client fd %d went away", __func__,
	    (void *)st, (int)fd);
	evhttp_connection_free(st->evcon);	/* sse_conn_gone runs */
}

/* evhttp frees the stream's connection: free the stream. */
static void
sse_conn_gone(struct evhttp_connection *evcon, void *arg)
{
	struct sse	*st = arg;

	sse_forget(st);
	event_free(st->closed);
	event_free(st->keepalive);
	evbuffer_free(st->frames);
	/*
	 * evhttp, seeing the close itself, leaves the request to its
	 * handler, detached: free it.
	 */
	if (evhttp_request_get_connection(st->req) == NULL)
		evhttp_request_free(st->req);
	st->gone(st->arg);
	free(st);
}

/* The streams' gauges and counters, for /metrics. */
void
sse_metrics(struct proto_buf *b)
{
	proto_buf_printf(b,
	    "# TYPE agentd_sse_streams gauge\n"
	    "agentd_sse_streams %zu\n"
	    "# TYPE agentd_sse_streams_total counter\n"
	    "agentd_sse_streams_total %" PRIu64 "\n"
	    "# TYPE agentd_sse_gaps_total counter\n"
	    "agentd_sse_gaps_total %" PRIu64 "\n"
	    "# TYPE agentd_sse_buffer_bytes gauge\n"
	    "agentd_sse_buffer_bytes %zu\n"
	    "# TYPE agentd_sse_budget_waits_total counter\n"
	    "agentd_sse_budget_waits_total %" PRIu64 "\n"
	    "# TYPE agentd_sse_turn_waits_total counter\n"
	    "agentd_sse_turn_waits_total %" PRIu64 "\n",
	    sse_count, sse_started, sse_gaps, sse_buffer_bytes,
	    sse_starved_total, sse_deferred_total);
}

/* ---- session output ---------------------------------------------------- */

/* GET /v1/sessions/{id} as a stream: from ?cursor= or Last-Event-ID. */
void
sse_session(struct http_req *hr, struct session *s)
{
	struct sse_session	*ss;
	struct proto_query	 q;
	struct proto_err	 err;
	struct ring_stats	 st;
	uint64_t		 id;
	size_t			 skip;
	int			 given;

	if (proto_parse_query(hr->query, &q, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	ring_stats(session_ring(s), &st);
	given = sse_query_has(hr, "cursor");
	switch (sse_last_event_id(hr, &id)) {
	case -1:
		http_fail(hr->req, 400, "invalid_cursor", "Last-Event-ID must "
		    "be a chunk id, a decimal integer");
		return;
	case 1:
		q.cursor = id;
		given = 1;
		break;
	}
	proto_cursor_split(q.cursor, st.newest, &id, &skip);
	if (id > st.newest || (skip > 0 && id >= st.newest)) {
		http_fail(hr->req, 400, "invalid_cursor", "cursor %" PRIu64
		    " is after the last chunk %" PRIu64, q.cursor, st.newest);
		return;
	}
	if (sse_admit(hr) != 0)
		return;
	ss = xcalloc(1, sizeof *ss);
	ss->s = s;
	ss->encoding = q.encoding != PROTO_ENC_UNSET ? q.encoding :
	    sse_encoding;
	/* No cursor: from the oldest chunk held, without a gap. */
	ss->cursor = given ? id : st.oldest - 1;
	ss->skip = given ? skip : 0;
	TAILQ_INSERT_TAIL(&sse_sessions, ss, entry);
	session_watch(s, 1);
	ss->sse = sse_start(hr, sse_session_pull, sse_session_gone, ss);
	sse_kick(ss->sse);	/* may end it, and free ss */
}

/* Free a session stream's state (its stream is gone or ended). */
static void
sse_session_free(struct sse_session *ss)
{
	TAILQ_REMOVE(&sse_sessions, ss, entry);
	session_watch(ss->s, 0);
	free(ss);
}

/*
 * Send the output after the cursor while the stream has room: a gap first
 * when the ring dropped chunks after it; then, once the session exited and
 * everything was sent, the exit event, and the end.
 */
static void
sse_session_pull(struct sse *sse, void *arg)
{
	struct sse_session	*ss = arg;
	struct ring		*r = session_ring(ss->s);
	struct ring_read_result	 res;
	struct proto_chunk	 c;
	struct proto_buf	 b = { 0 };
	size_t			 i, need;
	char			 gap[64];
	int			 n;

	need = ring_chunk_max(r) > SSE_READ_BYTES ? ring_chunk_max(r) :
	    SSE_READ_BYTES;
	if (sse_buf_len < need) {
		free(sse_buf);
		sse_buf = xmalloc(need);
		sse_buf_len = need;
	}
	while (sse_room(sse)) {
		/*
		 * What the room takes rendered at the worst (a first chunk
		 * goes whole): --sse-buffer and one frame at most.
		 */
		if (ring_read(r, ss->cursor, sse_buf, sse_buf_len,
		    sse_room_bytes(sse) / SSE_ESCAPE_WORST, sse_chunks,
		    nitems(sse_chunks), &res) != 0)
			break;
		if (res.dropped > 0) {
			ss->skip = 0;
			ss->cursor += res.dropped;
			n = snprintf(gap, sizeof gap, "{\"dropped_chunks\":%"
			    PRIu64 "}", res.dropped);
			sse_send(sse, ss->cursor, "gap", gap, (size_t)n);
		}
		for (i = 0; i < res.nchunks; i++) {
			c.id = sse_chunks[i].id;
			c.offset = sse_chunks[i].offset;
			c.data = sse_chunks[i].data;
			c.len = sse_chunks[i].len;
			c.stream = sse_chunks[i].stream;
			if (ss->skip >= c.len) {
				/* A crafted cursor past the chunk's end: it
				   was read whole; never send it again. */
				ss->skip = 0;
				ss->cursor = c.id;
				continue;
			}
			if (ss->skip > 0) {
				c.data += ss->skip;
				c.offset += ss->skip;
				c.len -= (uint32_t)ss->skip;
			}
			ss->skip = 0;
			b.len = 0;
			proto_render_chunk_enc(&b, &c, ss->encoding);
			sse_send(sse, c.id, "output", b.data, b.len);
			ss->cursor = c.id;
		}
		if (res.nchunks == 0 && !res.more)
			break;
	}
	proto_buf_free(&b);
	if (sse_room(sse) && session_exited(ss->s) &&
	    ss->cursor == ring_newest(r))
		sse_session_exit(ss);
}

/* Send the exit event and end the stream. */
static void
sse_session_exit(struct sse_session *ss)
{
	struct proto_session	 v;
	struct proto_buf	 b = { 0 };
	struct sse		*sse = ss->sse;

	session_view(ss->s, &v);
	proto_render_session(&b, &v, NULL, -1);
	sse_send(sse, ss->cursor, "exit", b.data, b.len);
	proto_buf_free(&b);
	sse_session_free(ss);
	sse_end(sse);
}

/* A session stream's client went away. */
static void
sse_session_gone(void *arg)
{
	sse_session_free(arg);
}

/* The session observer's part: pull its streams, or end them. */
void
sse_session_event(struct session *s, int events)
{
	struct sse_session	*ss, *next;

	for (ss = TAILQ_FIRST(&sse_sessions); ss != NULL; ss = next) {
		next = TAILQ_NEXT(ss, entry);
		if (ss->s != s)
			continue;
		if (!(events & SESSION_EV_REMOVED)) {
			sse_kick(ss->sse);
			continue;
		}
		/*
		 * Removed (an exited session's stream mostly ended before):
		 * a reader behind misses the rest, and gets the exit.
		 */
		if (session_exited(s))
			sse_session_exit(ss);
		else {
			sse_end(ss->sse);
			sse_session_free(ss);
		}
	}
}
