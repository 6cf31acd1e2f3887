/*
 * events.c -- the sandbox's event feed (see events.h): the ring, the
 * session events, and GET /v1/events with its long-poll waiters.
 *
 * A long-poll waits on the feed, not on a session: each new event is
 * matched against each waiter's filter, and only a waiter whose filter
 * keeps it is answered, so an event outside the filter never wakes one.
 * Its client going away is watched for as api.c's waiters do
 * (http_watch_client()).
 */
#include <sys/queue.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "events.h"
#include "evring.h"
#include "http.h"
#include "log.h"
#include "outq.h"
#include "proto.h"
#include "session.h"
#include "sse.h"
#include "stop.h"
#include "util.h"

#define EVENTS_READ_MAX		256	/* events rendered per ring read */
#define EVENTS_ERR_MAX		256	/* bytes of a filter's error */
#define EVENTS_ADMIT_MIN	(64 * 1024) /* bytes: smaller answers are
					   always given (outq.h) */

/* A GET /v1/events waiting for an event its filter keeps. */
struct events_waiter {
	TAILQ_ENTRY(events_waiter) entry;
	struct evhttp_request	*req;
	uint64_t		 cursor;
	struct evring_filter	 filter;
	struct event		*timer;		/* the deadline */
	struct event		*closed;	/* the client went away */
};
TAILQ_HEAD(events_waiters, events_waiter);

/* A GET /v1/events as Server-Sent Events. */
struct events_stream {
	TAILQ_ENTRY(events_stream) entry;
	struct sse		*sse;
	uint64_t		 cursor;	/* the last event looked at */
	struct evring_filter	 filter;
};
TAILQ_HEAD(events_streams, events_stream);

static struct evring		*events_ring;
static struct events_waiters	 events_waiters =
				    TAILQ_HEAD_INITIALIZER(events_waiters);
static size_t			 events_nwaiters;
static struct events_streams	 events_streams =
				    TAILQ_HEAD_INITIALIZER(events_streams);
static struct evring_event	 events_out[EVENTS_READ_MAX];
static struct event_base	*events_base;	/* the loop */

static void	events_answer(struct evhttp_request *, uint64_t,
		    const struct evring_filter *);
static void	events_waiter_done(struct events_waiter *, int answer);
static void	events_waiter_timeout(evutil_socket_t, short, void *);
static void	events_waiter_closed(evutil_socket_t, short, void *);
static void	events_stream_start(struct http_req *, uint64_t,
		    struct evring_filter *);
static void	events_stream_pull(struct sse *, void *);
static void	events_stream_gone(void *);

/* Make the ring. */
void
events_init(struct event_base *base, size_t max_events, size_t max_bytes)
{
	events_base = base;
	events_ring = evring_new(max_events, max_bytes);
}

/* Answer every waiter and free the ring. */
void
events_free(void)
{
	struct events_waiter	*w;
	struct events_stream	*es;

	while ((w = TAILQ_FIRST(&events_waiters)) != NULL)
		events_waiter_done(w, 1);
	while ((es = TAILQ_FIRST(&events_streams)) != NULL) {
		sse_end(es->sse);
		events_stream_gone(es);
	}
	evring_free(events_ring);
	events_ring = NULL;
}

/* The feed's ring. */
struct evring *
events_evring(void)
{
	return (events_ring);
}

/* Post an event: render it once, hold it, wake who waits for it. */
uint64_t
events_post(const char *type, const char *session, json_t *fields)
{
	struct events_waiter	*w, *next;
	struct events_stream	*es, *esnext;
	const char		*key;
	json_t			*ev, *value;
	char			 at[25], *json;
	uint64_t		 id;

	if (events_ring == NULL) {	/* after events_free() */
		if (fields != NULL)
			json_decref(fields);
		return (0);
	}
	id = evring_newest(events_ring) + 1;
	proto_format_time(clock_wall_ms(), at);
	ev = json_pack("{sIssssso}", "id", (json_int_t)id, "type", type,
	    "at", at, "session", session != NULL ? json_string(session) :
	    json_null());
	if (ev == NULL)
		fatal("%s: out of memory", __func__);
	if (fields != NULL) {
		json_object_foreach(fields, key, value) {
			if (strcmp(key, "id") != 0 && strcmp(key, "type") != 0 &&
			    strcmp(key, "at") != 0 && strcmp(key, "session") != 0)
				json_object_set(ev, key, value);
		}
		json_decref(fields);
	}
	if ((json = json_dumps(ev, JSON_COMPACT)) == NULL)
		fatal("%s: out of memory", __func__);
	json_decref(ev);
	id = evring_push(events_ring, type, session, json, strlen(json));
	log_debug("%s: event %" PRIu64 " %s %s", __func__, id, type,
	    session != NULL ? session : "-");

	for (w = TAILQ_FIRST(&events_waiters); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (evring_match(&w->filter, type, session))
			events_waiter_done(w, 1);
	}
	for (es = TAILQ_FIRST(&events_streams); es != NULL; es = esnext) {
		esnext = TAILQ_NEXT(es, entry);
		if (evring_match(&es->filter, type, session))
			sse_kick(es->sse);
	}
	return (id);
}

/* The session observer's part: a session was created, exited, removed. */
void
events_session_event(struct session *s, int events)
{
	struct proto_session	 v;
	const char		*sig;

	if (events & SESSION_EV_CREATED) {
		session_view(s, &v);
		events_post("session.created", v.id, json_pack("{sIsb}",
		    "pid", (json_int_t)v.pid, "tty", v.tty));
	}
	if (events & SESSION_EV_EXITED) {
		session_view(s, &v);
		sig = v.signo > 0 ? proto_signal_name(v.signo) : NULL;
		events_post("session.exited", v.id, json_pack("{sisosbsb}",
		    "exit_code", v.exit_code, "signal", v.signo == 0 ?
		    json_null() : sig != NULL ? json_string(sig) :
		    json_sprintf("SIG%d", v.signo), "timed_out", v.timed_out,
		    "oom_killed", v.oom_killed));
	}
	if (events & SESSION_EV_REMOVED)
		events_post("session.removed", session_id(s), NULL);
}

/*
 * Parse the feed's query: cursor and wait_ms (proto_parse_query()'s rules),
 * session and types into f.  Returns 0, or -1 with err.
 */
static int
events_query(const char *query, struct proto_query *q,
    struct evring_filter *f, struct proto_err *err)
{
	struct evkeyvalq	 kv;
	const char		*session, *types;
	char			 msg[EVENTS_ERR_MAX];

	memset(f, 0, sizeof *f);
	if (proto_parse_query(query, q, err) != 0)
		return (-1);
	TAILQ_INIT(&kv);
	if (evhttp_parse_query_str(query, &kv) != 0) {
		evhttp_clear_headers(&kv);
		return (proto_fail(err, 400, "invalid_request",
		    "malformed query string"));
	}
	session = evhttp_find_header(&kv, "session");
	types = evhttp_find_header(&kv, "types");
	if (session != NULL && *session != '\0' && !proto_id_valid(session)) {
		evhttp_clear_headers(&kv);
		return (proto_fail(err, 400, "invalid_request",
		    "session: not a session id ([A-Za-z0-9._-]{1,64})"));
	}
	if (evring_filter_set(f, session, types, msg, sizeof msg) != 0) {
		evhttp_clear_headers(&kv);
		return (proto_fail(err, 400, "invalid_request", "%s", msg));
	}
	evhttp_clear_headers(&kv);
	return (0);
}

/* GET /v1/events */
void
events_route(struct http_req *hr)
{
	struct events_waiter	*w;
	struct evring_filter	 f;
	struct evring_result	 res;
	struct proto_query	 q;
	struct proto_err	 err;
	struct timeval		 tv;
	uint64_t		 id;
	int			 last = 0;

	if (strcmp(hr->path, "/v1/events") != 0) {
		http_fail(hr->req, 404, "not_found", "no route %s", hr->path);
		return;
	}
	if (http_method(hr, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD) != 0)
		return;
	if (events_query(hr->query, &q, &f, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	if (sse_wanted(hr) && (last = sse_last_event_id(hr, &id)) != 0) {
		if (last < 0) {
			evring_filter_free(&f);
			http_fail(hr->req, 400, "invalid_cursor", "Last-Event-ID "
			    "must be an event id, a decimal integer");
			return;
		}
		q.cursor = id;
	}
	if (evring_read(events_ring, q.cursor, &f, events_out, 1, &res) != 0) {
		evring_filter_free(&f);
		http_fail(hr->req, 400, "invalid_cursor", "cursor %" PRIu64
		    " is after the last event %" PRIu64, q.cursor,
		    evring_newest(events_ring));
		return;
	}
	if (sse_wanted(hr)) {
		events_stream_start(hr, last != 0 || sse_query_has(hr,
		    "cursor") ? q.cursor : UINT64_MAX, &f);
		return;
	}
	if (res.n > 0 || res.dropped > 0 || q.wait_ms == 0 ||
	    agentd_stopping()) {
		events_answer(hr->req, q.cursor, &f);
		evring_filter_free(&f);
		return;
	}

	/* Nothing it wants yet: wait from the last event looked at. */
	w = xcalloc(1, sizeof *w);
	w->req = hr->req;
	w->cursor = res.cursor;
	w->filter = f;
	if ((w->timer = evtimer_new(events_base, events_waiter_timeout,
	    w)) == NULL)
		fatal("%s: out of memory", __func__);
	evtimer_add(w->timer, timeval_ms(&tv, q.wait_ms));
	w->closed = http_watch_client(w->req, events_waiter_closed, w);
	TAILQ_INSERT_TAIL(&events_waiters, w, entry);
	events_nwaiters++;
}

/*
 * Answer {"events": [...], "cursor": N, "dropped_events": N} with what
 * follows cursor and f keeps.
 */
static void
events_answer(struct evhttp_request *req, uint64_t cursor,
    const struct evring_filter *f)
{
	struct evring_result	 res;
	struct proto_buf	 b = { 0 };
	struct proto_err	 err;
	uint64_t		 dropped = 0;
	size_t			 i, n = 0;

	proto_buf_append(&b, "{\"events\":[", 11);
	do {
		if (evring_read(events_ring, cursor, f, events_out,
		    nitems(events_out), &res) != 0)
			break;	/* not after a check: the ring only grows */
		dropped += res.dropped;
		for (i = 0; i < res.n; i++) {
			if (n++ > 0)
				proto_buf_append(&b, ",", 1);
			proto_buf_append(&b, events_out[i].json,
			    events_out[i].json_len);
		}
		cursor = res.cursor;
	} while (res.n == nitems(events_out));
	proto_buf_append(&b, "],\"cursor\":", 11);
	proto_buf_u64(&b, cursor);
	proto_buf_append(&b, ",\"dropped_events\":", 18);
	proto_buf_u64(&b, dropped);
	proto_buf_append(&b, "}", 1);
	/* Held until its client reads it: a large one counts first. */
	if (b.len > EVENTS_ADMIT_MIN && outq_admit(b.len, &err) != 0) {
		proto_buf_free(&b);
		http_reply_error(req, &err, NULL);
		return;
	}
	http_reply(req, 200, &b);
}

/* Unlink and free a waiter, answering it first if asked. */
static void
events_waiter_done(struct events_waiter *w, int answer)
{
	TAILQ_REMOVE(&events_waiters, w, entry);
	events_nwaiters--;
	event_free(w->timer);
	event_free(w->closed);
	if (answer)
		events_answer(w->req, w->cursor, &w->filter);
	evring_filter_free(&w->filter);
	free(w);
}

/* Answer every long-poll now, with what it has (an upgrade's hand-over). */
void
events_flush_waiters(void)
{
	struct events_waiter	*w;

	while ((w = TAILQ_FIRST(&events_waiters)) != NULL)
		events_waiter_done(w, 1);
}

/* A waiter's deadline: answer with nothing, and the cursor looked at. */
static void
events_waiter_timeout(evutil_socket_t fd, short events, void *arg)
{
	events_waiter_done(arg, 1);
}

/* A waiter's client closed its connection: free both at once. */
static void
events_waiter_closed(evutil_socket_t fd, short events, void *arg)
{
	struct events_waiter		*w = arg;
	struct evhttp_connection	*evcon;

	if (!http_client_gone(fd, events))
		return;		/* a pipelined request, not a close */
	evcon = evhttp_request_get_connection(w->req);
	log_debug("%s: client fd %d went away", __func__, (int)fd);
	events_waiter_done(w, 0);
	evhttp_connection_free(evcon);
}

/*
 * Stream the events after cursor (UINT64_MAX: from the oldest held, without
 * a gap) that f keeps; f becomes the stream's.
 */
static void
events_stream_start(struct http_req *hr, uint64_t cursor,
    struct evring_filter *f)
{
	struct events_stream	*es;
	struct evring_stats	 st;

	if (sse_admit(hr) != 0) {
		evring_filter_free(f);
		return;
	}
	if (cursor == UINT64_MAX) {
		evring_stats(events_ring, &st);
		cursor = st.newest - st.held;
	}
	es = xcalloc(1, sizeof *es);
	es->cursor = cursor;
	es->filter = *f;
	TAILQ_INSERT_TAIL(&events_streams, es, entry);
	es->sse = sse_start(hr, events_stream_pull, events_stream_gone, es);
	sse_kick(es->sse);
}

/*
 * Send the events after the stream's cursor while it has room: a gap first
 * when the ring dropped events after it.
 */
static void
events_stream_pull(struct sse *sse, void *arg)
{
	struct events_stream	*es = arg;
	struct evring_result	 res;
	char			 gap[64];
	size_t			 i;
	int			 n;

	while (sse_room(sse)) {
		if (evring_read(events_ring, es->cursor, &es->filter,
		    events_out, nitems(events_out), &res) != 0)
			break;
		if (res.dropped > 0) {
			n = snprintf(gap, sizeof gap, "{\"dropped_events\":%"
			    PRIu64 "}", res.dropped);
			sse_send(sse, es->cursor + res.dropped, "gap", gap,
			    (size_t)n);
		}
		for (i = 0; i < res.n; i++)
			sse_send(sse, events_out[i].id, events_out[i].type,
			    events_out[i].json, events_out[i].json_len);
		es->cursor = res.cursor;
		if (res.n < nitems(events_out))
			break;
	}
}

/* A stream ended or its client went away: free its state. */
static void
events_stream_gone(void *arg)
{
	struct events_stream	*es = arg;

	TAILQ_REMOVE(&events_streams, es, entry);
	evring_filter_free(&es->filter);
	free(es);
}

/* The feed's gauges and counters, for /metrics. */
void
events_metrics(struct proto_buf *b)
{
	struct evring_stats	st;

	evring_stats(events_ring, &st);
	proto_buf_printf(b,
	    "# TYPE agentd_events_total counter\n"
	    "agentd_events_total %" PRIu64 "\n"
	    "# TYPE agentd_events_held gauge\n"
	    "agentd_events_held %" PRIu64 "\n"
	    "# TYPE agentd_events_held_bytes gauge\n"
	    "agentd_events_held_bytes %" PRIu64 "\n"
	    "# TYPE agentd_events_dropped_total counter\n"
	    "agentd_events_dropped_total %" PRIu64 "\n"
	    "# TYPE agentd_events_max gauge\n"
	    "agentd_events_max %" PRIu64 "\n"
	    "# TYPE agentd_events_bytes_max gauge\n"
	    "agentd_events_bytes_max %" PRIu64 "\n"
	    "# TYPE agentd_event_waiters gauge\n"
	    "agentd_event_waiters %zu\n",
	    st.newest, st.held, st.bytes, st.dropped, st.max_events,
	    st.max_bytes, events_nwaiters);
}
