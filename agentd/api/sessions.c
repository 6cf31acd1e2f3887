/*
 * sessions.c -- /v1/sessions of API.md: create, list, read (output windows,
 * raw reads, Server-Sent Events), stdin, resize, signal, delete; and the
 * waiters of their long-polls.  The handlers here are named sessions_*;
 * session_* (session.h) is the session itself.
 */
#include <sys/queue.h>
#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "cast.h"
#include "config.h"
#include "conn.h"
#include "hold.h"
#include "http.h"
#include "log.h"
#include "outq.h"
#include "proto.h"
#include "ringbuf.h"
#include "session.h"
#include "sessions.h"
#include "sse.h"
#include "util.h"
#include "window.h"
#include "winstream.h"

#define SESSIONS_DELETE_GRACE_MS 2000	/* DELETE's default grace_ms */
#define SESSIONS_DELETE_SLACK_MS 5000	/* DELETE answers at most this after
					   the grace */
#define SESSIONS_SCRATCH_KEEP	(4u << 20) /* bytes of read buffer kept
					   between reads */
#define SESSIONS_CLOSE_EXIT_MS	100	/* a long-poll that saw the output
					   close waits this long at most for
					   the exit */
#define SESSIONS_OBJECT_BYTES	4096	/* bytes of a session object around its
					   window, most of the time */
#define SESSIONS_HEADTAIL_BATCH	(256u << 10) /* bytes of chunks read at a
					   time for a head_tail window */
#define SESSIONS_SESSION_BYTES	1024	/* bytes of a session object without a
					   window, most of the time (~350) */
#define SESSIONS_ADMIT_MIN	(64 * 1024) /* bytes: smaller windows are
					   always answered (outq.h) */

/* What a waiter waits for. */
#define WAIT_OUTPUT	0x1	/* a chunk after cursor, exit, or output close */
#define WAIT_EXIT	0x2	/* the session exits */
#define WAIT_IDLE	0x4	/* no new output for idle_ms, or exit */
#define WAIT_GONE	0x8	/* a DELETE: exited, no process left */

/* What one answer about a session carries. */
struct sessions_answer {
	int		 status;
	int		 window;	/* with an output window */
	uint64_t	 cursor;
	struct window_opts o;		/* max_bytes, head_tail, strip_ansi */
	int64_t		 written;	/* -1: none */
	int		 duplicate;	/* stdin: a write seen before */
	int64_t		 idle_ms;	/* a WAIT_IDLE's quiet time */
	int64_t		 idle_left_ms;	/* of it, still to come (0: all) */
};

/* A request waiting on a session. */
struct waiter {
	TAILQ_ENTRY(waiter)	 entry;
	struct evhttp_request	*req;
	struct session		*s;
	int			 flags;		/* WAIT_* */
	int			 delete;	/* remove the session once
						   answered */
	struct sessions_answer	 a;		/* what the answer carries */
	struct hold		*hold;		/* the deadline, the client */
	struct event		*idle;		/* WAIT_IDLE: quiet for idle_ms */
	sessions_wait_fn	 fn;		/* answers instead of
						   sessions_answer() */
	void			*arg;		/* fn's */
};
TAILQ_HEAD(waiters, waiter);

/* A create waiting for its spawn (session_create()'s fn). */
struct sessions_creating {
	struct evhttp_request	*req;
	struct proto_create	 pc;
	struct event		*closed;	/* the client went away */
};


static struct event_base	*sessions_base;	/* the loop */
static const struct config	*sessions_cfg;

static struct waiters	*sessions_waiters(struct session *);
static int	sessions_cursor_bad(struct session *, uint64_t);
static int	sessions_encoding(int);
static void	sessions_answer(struct evhttp_request *, struct session *,
		    const struct sessions_answer *);
static int	sessions_stream(struct evhttp_request *, struct session *,
		    const struct proto_session *,
		    const struct sessions_answer *);
static int	sessions_window_into(struct session *, uint64_t, size_t,
		    struct proto_buf *, struct proto_window *,
		    struct proto_err *);
static size_t	sessions_window_need(struct ring *, size_t, size_t *);
static int	sessions_scratch(size_t, struct proto_err *);
static size_t	sessions_window_budget(const struct window_opts *);
static size_t	sessions_worst(const struct proto_session *);
static int	sessions_window_read(struct session *, uint64_t, size_t, size_t,
		    uint8_t *, size_t, struct proto_window *,
		    struct proto_err *);
static size_t	sessions_window_bytes(const struct proto_window *);
static int	sessions_wait_flags(int64_t wait_ms, int64_t yield_ms,
		    int64_t idle_ms, int64_t *ms);
static void	sessions_waiter_idle(evutil_socket_t, short, void *);
static void	sessions_wake(struct session *, int);
static struct waiter *sessions_wait(struct evhttp_request *, struct session *,
		    int flags, int64_t ms, const struct sessions_answer *,
		    int delete);
static int	sessions_waiter_done(struct waiter *, int answer);
static void	sessions_waiter_deadline(void *);
static void	sessions_waiter_gone(void *);
static int	sessions_ready(struct session *, uint64_t cursor);
static void	sessions_create(struct http_req *);
static void	sessions_created(struct session *, const struct proto_err *,
		    void *);
static void	sessions_create_closed(evutil_socket_t, short, void *);
static void	sessions_create_gone(struct evhttp_connection *, void *);
static void	sessions_creating_free(struct sessions_creating *);
static void	sessions_list(struct http_req *);
static void	sessions_read(struct http_req *, struct session *);
static void	sessions_stdin(struct http_req *, struct session *);
static void	sessions_resize(struct http_req *, struct session *);
static void	sessions_signal(struct http_req *, struct session *);
static void	sessions_delete(struct http_req *, struct session *);
static void	sessions_id_route(struct http_req *, const char *);
static int	sessions_path_id(const char *, size_t, char [PROTO_ID_MAX + 1]);

static const struct proto_limits	*sessions_limits(void);

static const struct hold_ops	sessions_hold_ops = {
	sessions_waiter_deadline, sessions_waiter_gone
};

/* A growing read buffer and chunk arrays, reused by every window. */
static uint8_t			*scratch;
static size_t			 scratch_len;
static struct ring_chunk	 rchunks[SESSION_WINDOW_CHUNKS];
static struct proto_chunk	 pchunks[SESSION_WINDOW_CHUNKS];

/* The parsers' limits, from the configuration. */
static const struct proto_limits *
sessions_limits(void)
{
	static struct proto_limits	l;

	l.ring_bytes_default = sessions_cfg->ring_bytes;
	l.ring_bytes_min = RING_CAPACITY_MIN;
	l.ring_bytes_max = sessions_cfg->max_ring_bytes;
	return (&l);
}

/* Set the loop and the configuration (the rings' sizes), at the start. */
void
sessions_init(struct event_base *base, const struct config *cfg)
{
	sessions_base = base;
	sessions_cfg = cfg;
}

/* /v1/sessions and /v1/sessions/{id}[/stdin|/resize|/signal] */
void
sessions_route(struct http_req *hr)
{
	const char	*rest = hr->path + 12;	/* after "/v1/sessions" */

	if (*rest == '\0' || strcmp(rest, "/") == 0) {
		if (http_method(hr, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
		    EVHTTP_REQ_POST) != 0)
			return;
		if (hr->method == EVHTTP_REQ_POST)
			sessions_create(hr);
		else
			sessions_list(hr);
	} else
		sessions_id_route(hr, rest + 1);
}

/*
 * The session id a path segment names, percent-decoded into id (a client
 * may escape any byte, "s%2E1" is "s.1": RFC 3986 2.3).  0, or -1 when it
 * cannot name one (empty, too long, a bad byte).
 */
static int
sessions_path_id(const char *seg, size_t len, char id[PROTO_ID_MAX + 1])
{
	static const char	hex[] = "0123456789abcdef";
	const char		*hi, *lo;
	size_t			 i, n = 0;
	char			 c;

	for (i = 0; i < len; i++) {
		c = seg[i];
		if (c == '%' && len - i >= 3 && seg[i + 1] != '\0' &&
		    seg[i + 2] != '\0' &&
		    (hi = strchr(hex, tolower((unsigned char)seg[i + 1]))) &&
		    (lo = strchr(hex, tolower((unsigned char)seg[i + 2])))) {
			c = (char)((hi - hex) << 4 | (lo - hex));
			i += 2;
		}
		if (n == PROTO_ID_MAX || c == '\0' || c == '/')
			return (-1);
		id[n++] = c;
	}
	id[n] = '\0';
	return (n == 0 ? -1 : 0);
}

/* /v1/sessions/{id}[/stdin|/resize|/signal|/cast] */
static void
sessions_id_route(struct http_req *hr, const char *rest)
{
	char		 id[PROTO_ID_MAX + 1];
	const char	*slash = strchr(rest, '/'), *action;
	struct session	*s;
	size_t		 len;

	len = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
	action = slash != NULL ? slash + 1 : "";
	if (sessions_path_id(rest, len, id) != 0) {
		http_fail(hr->req, 404, "not_found", "no session '%.*s'",
		    (int)(len > PROTO_ID_MAX ? PROTO_ID_MAX : len), rest);
		return;
	}
	if (*action != '\0' && strcmp(action, "stdin") != 0 &&
	    strcmp(action, "resize") != 0 && strcmp(action, "signal") != 0 &&
	    strcmp(action, "cast") != 0) {
		http_fail(hr->req, 404, "not_found", "no route %s", hr->path);
		return;
	}
	if (http_method(hr, *action == '\0' ? EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_DELETE : strcmp(action, "cast") == 0 ? EVHTTP_REQ_GET | EVHTTP_REQ_HEAD :
	    EVHTTP_REQ_POST) != 0)
		return;
	if ((s = session_find(id)) == NULL) {
		http_fail(hr->req, 404, "not_found", "no session '%s'", id);
		return;
	}
	if (*action == '\0')
		(hr->method == EVHTTP_REQ_DELETE ? sessions_delete :
		    sessions_read)(hr, s);
	else if (strcmp(action, "stdin") == 0)
		sessions_stdin(hr, s);
	else if (strcmp(action, "resize") == 0)
		sessions_resize(hr, s);
	else if (strcmp(action, "cast") == 0)
		cast_answer(hr, s);
	else
		sessions_signal(hr, s);
}


/* Bytes of buffer a window read needs; *lim, the bytes of chunks it takes. */
static size_t
sessions_window_need(struct ring *r, size_t max_bytes, size_t *lim)
{
	size_t	need;

	*lim = max_bytes;
	need = *lim < SESSION_READ_MAX ? SESSION_READ_MAX : *lim;
	if (need > ring_chunk_max(r) && ring_chunk_max(r) >= SESSION_READ_MAX)
		need = ring_chunk_max(r);
	return (need);
}

/* Grow the shared scratch buffer to need bytes; -1 with err (503). */
static int
sessions_scratch(size_t need, struct proto_err *err)
{
	if (scratch_len >= need)
		return (0);
	free(scratch);
	scratch_len = 0;
	/* Up to 64 MiB a client asks for: no memory is 503, not fatal. */
	if ((scratch = malloc(need)) == NULL)
		return (proto_fail(err, 503, "out_of_memory", "no memory "
		    "for a window of %zu bytes; ask for less", need));
	scratch_len = need;
	return (0);
}

/* The bytes a head_tail window holds at most: every stream's budget. */
static size_t
sessions_window_budget(const struct window_opts *o)
{
	size_t	out, err;

	out = o->max_bytes_stdout != PROTO_MAX_BYTES_UNSET ?
	    o->max_bytes_stdout : o->max_bytes;
	err = o->max_bytes_stderr != PROTO_MAX_BYTES_UNSET ?
	    o->max_bytes_stderr : o->max_bytes;
	/* A tty has one stream, a pipe session two: the larger sum. */
	return (out + err > o->max_bytes ? out + err : o->max_bytes);
}

/* sessions_window() with max_bytes and head_tail only (api.h). */
int
sessions_window(struct session *s, uint64_t cursor, size_t max_bytes,
    int head_tail, struct proto_window *w, struct proto_err *err)
{
	struct window_opts	o = {
		.max_bytes = max_bytes,
		.max_bytes_stdout = PROTO_MAX_BYTES_UNSET,
		.max_bytes_stderr = PROTO_MAX_BYTES_UNSET,
		.head_tail = head_tail,
	};

	return (sessions_window_opts(s, cursor, &o, w, err));
}

/*
 * Read the window of chunks after cursor into w (pointing into the shared
 * scratch buffers, valid until the next window): whole chunks up to
 * max_bytes, or with head_tail each stream's head and tail (window.h);
 * strip_ansi then leaves escape sequences out.  Returns 0, or -1 with err.
 */
int
sessions_window_opts(struct session *s, uint64_t cursor,
    const struct window_opts *o, struct proto_window *w,
    struct proto_err *err)
{
	struct ring		*r = session_ring(s);
	struct proto_session	 v;
	size_t			 need, lim;

	if (o->head_tail) {
		/* Its answer: each stream's budget at most, in base64. */
		need = sessions_window_budget(o);
		if (need > SESSIONS_ADMIT_MIN &&
		    outq_admit(need / 3 * 4 + SESSIONS_OBJECT_BYTES, err) != 0)
			return (-1);
		session_view(s, &v);
		if (sessions_scratch(SESSIONS_HEADTAIL_BATCH, err) != 0 ||
		    window_headtail(r, cursor, o, v.tty, scratch, scratch_len,
		    pchunks, nitems(pchunks), w, err) != 0)
			return (-1);
		w->eof = session_exited(s) && session_output_closed(s) &&
		    w->cursor == ring_newest(r);
	} else {
		need = sessions_window_need(r, o->max_bytes, &lim);
		/* Its answer: the bytes in base64, 4 for 3. */
		if (need > SESSIONS_ADMIT_MIN &&
		    outq_admit(need / 3 * 4 + SESSIONS_OBJECT_BYTES, err) != 0)
			return (-1);
		if (sessions_scratch(need, err) != 0 ||
		    sessions_window_read(s, cursor, o->max_bytes, lim, scratch,
		    scratch_len, w, err) != 0)
			return (-1);
	}
	if (o->strip_ansi && window_strip(r, w, err) != 0)
		return (-1);
	w->encoding = o->encoding;
	return (0);
}

/*
 * Read the window of chunks after cursor (no head_tail, no strip_ansi)
 * straight into b,
 * their bytes back to back after b's end, which grows by them: a raw
 * answer's body without a copy through the scratch buffer.  The room asked
 * is at most the bytes the ring holds (the capture runs on this thread, so
 * none arrive meanwhile), and at least a chunk's largest size.  Returns 0,
 * or -1 with err.
 */
static int
sessions_window_into(struct session *s, uint64_t cursor, size_t max_bytes,
    struct proto_buf *b, struct proto_window *w, struct proto_err *err)
{
	struct ring		*r = session_ring(s);
	struct ring_stats	 st;
	size_t			 need, lim, i;
	char			*p;

	need = sessions_window_need(r, max_bytes, &lim);
	if (need > SESSIONS_ADMIT_MIN && outq_admit(need, err) != 0)
		return (-1);
	ring_stats(r, &st);
	if (need > st.bytes_held && st.bytes_held >= SESSION_READ_MAX)
		need = st.bytes_held;
	else if (need > SESSION_READ_MAX && st.bytes_held < SESSION_READ_MAX)
		need = SESSION_READ_MAX;
	http_buf_take(b, need);
	if (proto_buf_reserve(b, b->len + need) != 0 ||
	    (p = proto_buf_space(b, need)) == NULL)
		return (proto_fail(err, 503, "out_of_memory", "no memory "
		    "for a window of %zu bytes; ask for less", need));
	if (sessions_window_read(s, cursor, max_bytes, lim, (uint8_t *)p, need,
	    w, err) != 0)
		return (-1);
	/* A cursor inside the first chunk: its bytes before go. */
	if (w->skip > 0) {
		memmove(p, p + w->skip, sessions_window_bytes(w));
		for (i = 0; i < w->n; i++)
			pchunks[i].data -= w->skip;
	}
	b->len += sessions_window_bytes(w);
	return (0);
}

/*
 * The chunks after cursor into buf[0..buflen), lim bytes of them: whole
 * chunks, but for the first when the cursor points inside it (its bytes
 * before are left out) and the last when the first alone passes max_bytes
 * (cut there, on a UTF-8 boundary when one is near, and the cursor points
 * inside it).  Their bytes stay back to back from the first one's data.
 */
static int
sessions_window_read(struct session *s, uint64_t cursor, size_t max_bytes,
    size_t lim, uint8_t *buf, size_t buflen, struct proto_window *w,
    struct proto_err *err)
{
	struct ring		*r = session_ring(s);
	struct ring_read_result	 res;
	uint64_t		 after, newest = ring_newest(r), next;
	size_t			 i, skip, cut, total;
	int			 error;

	proto_cursor_split(cursor, newest, &after, &skip);
	if (skip > 0 && lim <= SIZE_MAX - skip)
		lim += skip;
	error = ring_read(r, after, buf, buflen, lim, rchunks,
	    nitems(rchunks), &res);
	if (error == -ERANGE)
		return (proto_fail(err, 400, "invalid_cursor",
		    "cursor %" PRIu64 " is after the last chunk %" PRIu64,
		    cursor, newest));
	if (error != 0)
		return (proto_fail(err, 500, "internal_error", "ring_read: %s",
		    strerror(-error)));
	for (i = 0; i < res.nchunks; i++) {
		pchunks[i].id = rchunks[i].id;
		pchunks[i].offset = rchunks[i].offset;
		pchunks[i].data = rchunks[i].data;
		pchunks[i].len = rchunks[i].len;
		pchunks[i].stream = rchunks[i].stream;
	}
	memset(w, 0, sizeof *w);
	w->chunks = pchunks;
	w->n = res.nchunks;
	w->cursor = res.nchunks > 0 ? rchunks[res.nchunks - 1].id : cursor;
	w->dropped = res.dropped;
	w->more = res.more;
	/* The cursor's chunk was evicted: the gap says so, start afresh. */
	if (w->n == 0 || res.dropped > 0)
		skip = 0;
	if (skip > 0) {
		if (skip >= pchunks[0].len)
			return (proto_fail(err, 400, "invalid_cursor",
			    "cursor %" PRIu64 " points past the end of chunk %"
			    PRIu64, cursor, pchunks[0].id));
		pchunks[0].data += skip;
		pchunks[0].len -= (uint32_t)skip;
		pchunks[0].offset += skip;
		w->skip = skip;
	}
	/* Taken with the skip counted, but the skip's chunk was gone. */
	for (total = 0, i = 0; i < w->n; i++)
		total += pchunks[i].len;
	while (w->n > 1 && max_bytes > 0 && total > max_bytes) {
		total -= pchunks[--w->n].len;
		w->cursor = pchunks[w->n - 1].id;
		w->more = 1;
	}
	/* The first chunk alone passes max_bytes: its first max_bytes. */
	if (w->n == 1 && max_bytes > 0 && pchunks[0].len > max_bytes) {
		cut = proto_utf8_cut(pchunks[0].data, max_bytes);
		if (cut == 0)
			cut = max_bytes;
		next = proto_cursor_make(pchunks[0].id, skip + cut);
		if (next != 0) {
			pchunks[0].len = (uint32_t)cut;
			w->cursor = next;
			w->more = 1;
		}
	}
	w->eof = session_exited(s) && session_output_closed(s) &&
	    w->cursor == newest && !w->more;
	return (0);
}

/* Bytes of data in a window. */
static size_t
sessions_window_bytes(const struct proto_window *w)
{
	size_t	i, n = 0;

	for (i = 0; i < w->n; i++)
		n += w->chunks[i].len;
	return (n);
}

/*
 * The most bytes a session object renders to: its fields, and its argv,
 * cwd and user JSON-escaped at the worst, 6 bytes a byte (\u001f).
 */
static size_t
sessions_worst(const struct proto_session *v)
{
	size_t	n = SESSIONS_SESSION_BYTES, i;

	for (i = 0; v->argv != NULL && v->argv[i] != NULL; i++)
		n += 6 * strlen(v->argv[i]) + 4;
	if (v->cwd != NULL)
		n += 6 * strlen(v->cwd);
	if (v->user != NULL)
		n += 6 * strlen(v->user);
	return (n);
}

/*
 * A plain window that may be big: sent as it is rendered (winstream.h).
 * Returns whether req was answered.
 */
static int
sessions_stream(struct evhttp_request *req, struct session *s,
    const struct proto_session *v, const struct sessions_answer *a)
{
	struct winstream_ask	ask = {
		.status = a->status,
		.cursor = a->cursor,
		.max_bytes = a->o.max_bytes,
		.encoding = a->o.encoding,
		.written = a->written,
		.duplicate = a->duplicate,
		.object_bytes = sessions_worst(v),
	};

	if (a->o.head_tail || a->o.strip_ansi)
		return (0);
	return (winstream_answer(req, s, v, &ask));
}

/* Answer with the session object, and its output window if asked. */
static void
sessions_answer(struct evhttp_request *req, struct session *s,
    const struct sessions_answer *a)
{
	struct proto_session	 v;
	struct proto_window	 w;
	struct proto_err	 err;
	struct proto_buf	 b = { 0 };
	size_t			 want;

	session_view(s, &v);
	if (a->window && sessions_stream(req, s, &v, a))
		return;
	if (a->window) {
		if (sessions_window_opts(s, a->cursor, &a->o, &w, &err) != 0) {
			http_reply_error(req, &err, NULL);
			return;
		}
		/* The object's last_chunk must not be older than the window. */
		if (w.n > 0 && w.chunks[w.n - 1].id > v.last_chunk)
			v.last_chunk = w.chunks[w.n - 1].id;
	}
	/* Admitted at its rendered size: the escaped argv too. */
	want = sessions_worst(&v) + (a->window ? proto_window_len(&w) : 0);
	if (want > SESSIONS_ADMIT_MIN && outq_admit(want, &err) != 0) {
		http_reply_error(req, &err, NULL);
		return;
	}
	if (a->window && w.n > 0) {
		/*
		 * One buffer of the answer's size (doubling made a 4 MiB
		 * window's 5.6 MB take 8 MiB, too big to be kept, so each
		 * answer faulted in fresh pages).
		 */
		want = proto_window_len(&w) + SESSIONS_OBJECT_BYTES;
		/* Text is admitted at its exact escaped size (up to 6x). */
		if (w.encoding == PROTO_ENC_TEXT && want > SESSIONS_ADMIT_MIN &&
		    outq_admit(want, &err) != 0) {
			http_reply_error(req, &err, NULL);
			return;
		}
		http_buf_take(&b, want);
		(void)proto_buf_reserve(&b, want);
	} else	/* not 256 bytes, then a realloc to 512 */
		(void)proto_buf_reserve(&b, SESSIONS_SESSION_BYTES);
	proto_render_stdin(&b, &v, a->window ? &w : NULL, a->written,
	    a->duplicate);
	if (scratch_len > SESSIONS_SCRATCH_KEEP) {
		free(scratch);
		scratch = NULL;
		scratch_len = 0;
	}
	window_trim(SESSIONS_SCRATCH_KEEP);
	http_reply(req, a->status, &b);
}

/* The encoding a request asked, or --encoding's. */
static int
sessions_encoding(int asked)
{
	return (asked != PROTO_ENC_UNSET ? asked : sessions_cfg->encoding);
}

/* Whether cursor points after the newest chunk (or inside no chunk). */
static int
sessions_cursor_bad(struct session *s, uint64_t cursor)
{
	uint64_t	after, newest = ring_newest(session_ring(s));
	size_t		skip;

	proto_cursor_split(cursor, newest, &after, &skip);
	return (after > newest || (skip > 0 && after >= newest));
}

/*
 * Whether a reader at cursor has something to be answered with now: a
 * chunk after it, or the end (the output closed and the process exited).
 * Output closed while the process runs on is an answer too, but up to
 * SESSIONS_CLOSE_EXIT_MS later, for the exit status that mostly follows
 * (sessions_wait(), sessions_event()).
 */
static int
sessions_ready(struct session *s, uint64_t cursor)
{
	uint64_t	after, newest = ring_newest(session_ring(s));
	size_t		skip;

	/* A cursor inside a chunk: the rest of it is there. */
	proto_cursor_split(cursor, newest, &after, &skip);
	return (newest > after || skip > 0 ||
	    (session_output_closed(s) && session_exited(s)));
}

/* The waiters of a session, created on first use. */
static struct waiters *
sessions_waiters(struct session *s)
{
	struct waiters	**slot = (struct waiters **)session_user(s);

	if (*slot == NULL) {
		*slot = xmalloc(sizeof **slot);
		TAILQ_INIT(*slot);
	}
	return (*slot);
}

/* Park a request on a session until flags happen or ms pass. */
static struct waiter *
sessions_wait(struct evhttp_request *req, struct session *s, int flags,
    int64_t ms, const struct sessions_answer *a, int delete)
{
	struct waiter	*w;
	struct timeval	 tv;
	int64_t		 idle;

	w = xcalloc(1, sizeof *w);
	w->req = req;
	w->s = s;
	w->flags = flags;
	w->a = *a;
	w->delete = delete;
	/*
	 * The output closed before, the process runs on: the close is the
	 * answer (API.md), after the exit status's grace.  A client polling
	 * a process that closed its output ("exec >&-") polls at that pace.
	 */
	if (flags == WAIT_OUTPUT && session_output_closed(s) &&
	    ms > SESSIONS_CLOSE_EXIT_MS)
		ms = SESSIONS_CLOSE_EXIT_MS;
	w->hold = hold_new(req, ms, &sessions_hold_ops, w);
	if (flags & WAIT_IDLE) {
		if ((w->idle = evtimer_new(sessions_base, sessions_waiter_idle,
		    w)) == NULL)
			fatal("%s: out of memory", __func__);
		idle = a->idle_left_ms > 0 ? a->idle_left_ms : a->idle_ms;
		evtimer_add(w->idle, timeval_ms(&tv, idle));
	}
	/* The client's close is watched by the hold (hold.h). */
	TAILQ_INSERT_TAIL(sessions_waiters(s), w, entry);
	if (flags & (WAIT_OUTPUT | WAIT_IDLE))
		session_watch(s, 1);
	return (w);
}

/*
 * Park req on s for another front end until s exits or ms pass; then fn
 * answers it (see api.h).
 */
void
sessions_wait_call(struct evhttp_request *req, struct session *s, int64_t ms,
    int delete, sessions_wait_fn fn, void *arg)
{
	struct sessions_answer	a = { .written = -1 };
	struct waiter		*w;

	w = sessions_wait(req, s, delete ? WAIT_GONE : WAIT_EXIT, ms, &a,
	    delete);
	w->fn = fn;
	w->arg = arg;
}

/*
 * Unlink and free a waiter, answering it first if asked.  Returns whether it
 * was a DELETE, whose session the caller must now remove.
 */
static int
sessions_waiter_done(struct waiter *w, int answer)
{
	int			 delete = w->delete;

	TAILQ_REMOVE(sessions_waiters(w->s), w, entry);
	if (w->flags & (WAIT_OUTPUT | WAIT_IDLE))
		session_watch(w->s, 0);
	hold_free(w->hold);
	if (w->idle != NULL)
		event_free(w->idle);
	if (w->fn != NULL)
		w->fn(answer ? w->req : NULL, w->s, w->arg);
	else if (answer)
		sessions_answer(w->req, w->s, &w->a);
	free(w);
	return (delete);
}

/* A waiter's deadline: answer it (a DELETE removes its session then). */
static void
sessions_waiter_deadline(void *arg)
{
	struct waiter	*w = arg;
	struct session	*s = w->s;

	if (w->delete)
		log_warn("%s: session %s did not end in time; removing it",
		    __func__, session_id(s));
	if (sessions_waiter_done(w, 1))
		session_remove(s);
}

/* A WAIT_IDLE waiter's session was quiet for idle_ms: answer it. */
static void
sessions_waiter_idle(evutil_socket_t fd, short events, void *arg)
{
	struct waiter	*w = arg;

	log_debug("%s: session %s quiet for %lld ms", __func__,
	    session_id(w->s), (long long)w->a.idle_ms);
	sessions_waiter_done(w, 1);
}

/* A waiter's client went away: free it (the hold frees the connection). */
static void
sessions_waiter_gone(void *arg)
{
	struct waiter	*w = arg;

	log_debug("%s: session %s: client went away", __func__,
	    session_id(w->s));
	/* A DELETE still happens: the session is removed when it ends. */
	if (w->delete)
		session_set_remove_on_exit(w->s);
	sessions_waiter_done(w, 0);
}

/*
 * The session observer: wake the waiters that what happened concerns; a
 * removed session's windows being sent end (those answers too).
 */
void
sessions_event(struct session *s, int events)
{
	sessions_wake(s, events);
	winstream_session_event(s, events);
	cast_session_event(s, events);
}

/* Wake the waiters that what happened concerns. */
static void
sessions_wake(struct session *s, int events)
{
	struct waiters	**slot = (struct waiters **)session_user(s);
	struct waiter	 *w, *next;
	struct timeval	  tv;
	int		  remove = 0;

	if (*slot == NULL)
		return;
	for (w = TAILQ_FIRST(*slot); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if ((events & SESSION_EV_REMOVED) ||
		    ((events & SESSION_EV_EXITED) &&
		    (w->flags & ~WAIT_GONE) != 0) ||
		    ((events & SESSION_EV_GONE) && (w->flags & WAIT_GONE)) ||
		    ((w->flags & WAIT_OUTPUT) &&
		    sessions_ready(s, w->a.cursor))) {
			if (events & SESSION_EV_REMOVED)
				w->delete = 0;
			remove |= sessions_waiter_done(w, 1);
		} else if ((w->flags & WAIT_OUTPUT) &&
		    (events & SESSION_EV_CLOSED)) {
			/*
			 * The output closed with nothing new, the exit status
			 * not in yet: it mostly follows at once, and one
			 * answer then carries it.  The close is still an
			 * answer (API.md), SESSIONS_CLOSE_EXIT_MS later at
			 * most.
			 */
			if (hold_left_ms(w->hold) > SESSIONS_CLOSE_EXIT_MS)
				hold_set_deadline(w->hold,
				    SESSIONS_CLOSE_EXIT_MS);
		} else if ((w->flags & WAIT_IDLE) &&
		    (events & SESSION_EV_OUTPUT)) {
			/* quiet from now on */
			evtimer_add(w->idle, timeval_ms(&tv, w->a.idle_ms));
		}
	}
	if (events & SESSION_EV_REMOVED) {
		free(*slot);
		*slot = NULL;
	} else if (remove)
		session_set_remove_on_exit(s);	/* done once notified */
}

/* Requests parked on a session (long-polls, yields, DELETEs). */
size_t
sessions_waiter_count(struct session *s)
{
	struct waiters	**slot = (struct waiters **)session_user(s);
	struct waiter	 *w;
	size_t		  n = 0;

	if (*slot != NULL) {
		TAILQ_FOREACH(w, *slot, entry)
			n++;
	}
	return (n);
}

/* Answer every waiter of every session now. */
void
sessions_flush_waiters(void)
{
	struct session	*s, *next;
	struct waiters	**slot;
	struct waiter	 *w;
	int		  remove;

	for (s = session_first(); s != NULL; s = next) {
		next = session_next(s);
		slot = (struct waiters **)session_user(s);
		remove = 0;
		while (*slot != NULL && (w = TAILQ_FIRST(*slot)) != NULL)
			remove |= sessions_waiter_done(w, 1);
		if (remove)
			session_remove(s);
	}
}

/*
 * What a create or stdin waits for, and *ms how long at most: idle_ms
 * (answer once the output was quiet that long) replaces wait_ms's "the
 * first output", and without wait_ms or yield_ms is capped at
 * PROTO_WAIT_MAX_MS; yield_ms waits for the exit.
 */
static int
sessions_wait_flags(int64_t wait_ms, int64_t yield_ms, int64_t idle_ms,
    int64_t *ms)
{
	int	flags = 0;

	if (idle_ms > 0)
		flags |= WAIT_IDLE;
	else if (wait_ms > 0)
		flags |= WAIT_OUTPUT;
	if (yield_ms > 0)
		flags |= WAIT_EXIT;
	*ms = wait_ms > yield_ms ? wait_ms : yield_ms;
	if (idle_ms > 0 && *ms == 0)
		*ms = PROTO_WAIT_MAX_MS;
	return (flags);
}

/*
 * POST /v1/sessions: parse, reserve, and spawn on a thread
 * (sessions_created()).
 */
static void
sessions_create(struct http_req *hr)
{
	struct sessions_creating	*c;
	struct proto_err	 err;
	struct proto_session	 v;
	struct session		*s;

	c = xcalloc(1, sizeof *c);
	if (proto_parse_create(hr->body, hr->body_len, sessions_limits(),
	    &c->pc, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		free(c);
		return;
	}
	c->req = hr->req;
	/* Its answer, the object with argv escaped, must fit before it runs. */
	memset(&v, 0, sizeof v);
	v.argv = c->pc.argv;
	v.cwd = c->pc.cwd;
	v.user = c->pc.user;
	if (sessions_worst(&v) > SESSIONS_ADMIT_MIN &&
	    outq_admit(sessions_worst(&v), &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		sessions_creating_free(c);
		return;
	}
	if (session_create(&c->pc, sessions_created, c, &s, &err) != 0) {
		if (s != NULL)
			session_view(s, &v);
		http_reply_error(hr->req, &err, s != NULL ? &v : NULL);
		sessions_creating_free(c);
		return;
	}
	/* evhttp stops reading while a request is out: watch for the close. */
	c->closed = http_watch_client(c->req, sessions_create_closed, c);
	evhttp_connection_set_closecb(evhttp_request_get_connection(c->req),
	    sessions_create_gone, c);
}

/* A create's spawn ended: answer it, now or after its wait. */
static void
sessions_created(struct session *s, const struct proto_err *err, void *arg)
{
	struct sessions_creating	*c = arg;
	struct proto_create	*pc = &c->pc;
	struct evhttp_request	*req = c->req;
	struct sessions_answer	 a;
	char			*loc;
	int			 flags;
	int64_t			 ms;

	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
	    NULL, NULL);
	if (s == NULL) {
		http_reply_error(req, err, NULL);
		sessions_creating_free(c);
		return;
	}
	xasprintf(&loc, "/v1/sessions/%s", session_id(s));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Location",
	    loc);
	free(loc);

	memset(&a, 0, sizeof a);
	a.status = 201;
	a.window = 1;
	a.cursor = 0;
	a.o.max_bytes = pc->max_bytes;
	a.o.max_bytes_stdout = pc->max_bytes_stdout;
	a.o.max_bytes_stderr = pc->max_bytes_stderr;
	a.o.head_tail = pc->head_tail;
	a.o.strip_ansi = pc->strip_ansi;
	a.o.encoding = sessions_encoding(pc->encoding);
	a.written = -1;
	a.idle_ms = pc->idle_ms;
	flags = sessions_wait_flags(pc->wait_ms, pc->yield_ms, pc->idle_ms,
	    &ms);
	sessions_creating_free(c);
	if (flags == 0 || session_exited(s) ||
	    ((flags & WAIT_OUTPUT) && sessions_ready(s, 0)))
		sessions_answer(req, s, &a);
	else
		sessions_wait(req, s, flags, ms, &a, 0);
}

/* The client of a create that is spawning closed: give the create up. */
static void
sessions_create_closed(evutil_socket_t fd, short events, void *arg)
{
	struct sessions_creating	*c = arg;

	if (!http_client_gone(fd, events))
		return;		/* a pipelined request, not a close */
	log_debug("%s: client fd %d went away", __func__, (int)fd);
	evhttp_connection_free(evhttp_request_get_connection(c->req));
	/* sessions_create_gone() ran */
}

/* The connection of a spawning create is going away: give it up. */
static void
sessions_create_gone(struct evhttp_connection *evcon, void *arg)
{
	struct sessions_creating	*c = arg;

	session_create_cancel(c);
	sessions_creating_free(c);
}

/* Free a create's holder. */
static void
sessions_creating_free(struct sessions_creating *c)
{
	if (c->closed != NULL)
		event_free(c->closed);
	proto_create_free(&c->pc);
	free(c);
}

/*
 * GET /v1/sessions[?limit=N&after=NEXT]: the sessions in the order of
 * creation, all of them, or N after the one NEXT names with "next" for the
 * rest; the answer counts against the budget of answers held (outq.h).
 */
static void
sessions_list(struct http_req *hr)
{
	struct proto_session	*views;
	struct proto_query	 q;
	struct proto_err	 err;
	struct proto_buf	 b = { 0 };
	struct session		*s, *last = NULL;
	size_t			 n = 0, cap, worst = 64;
	char			 next[24];
	int			 more = 0;

	if (proto_parse_query(hr->query, &q, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	cap = session_count();
	if (q.limit > 0 && q.limit < cap)
		cap = (size_t)q.limit;
	for (s = session_first(); s != NULL; s = session_next(s)) {
		if (session_seq(s) <= q.after)
			continue;
		if (n == cap) {
			more = 1;
			break;
		}
		n++;
	}
	views = xcalloc(n + 1, sizeof *views);
	n = 0;
	for (s = session_first(); s != NULL && n < cap; s = session_next(s)) {
		if (session_seq(s) > q.after) {
			session_view(s, &views[n]);
			worst += sessions_worst(&views[n++]);
			last = s;
		}
	}
	/* Its size at the worst: each object, its argv escaped. */
	if (outq_admit(worst, &err) != 0) {
		free(views);
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	if (more && last != NULL)
		snprintf(next, sizeof next, "%llu",
		    (unsigned long long)session_seq(last));
	proto_render_session_page(&b, views, n, more ? next : NULL);
	free(views);
	http_reply(hr->req, 200, &b);
}

/* Whether the client asked for raw output bytes. */
static int
sessions_wants_raw(struct http_req *hr)
{
	const char	*accept;

	accept = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "Accept");
	/* Media types are case-insensitive (RFC 9110 8.3.1). */
	return (accept != NULL &&
	    strcasestr(accept, "application/octet-stream") != NULL &&
	    strcasestr(accept, "application/json") == NULL);
}

/*
 * Answer with the window's bytes as they are, the session's state and the
 * window's figures in X-Agentd-* headers.
 */
static void
sessions_answer_raw(struct evhttp_request *req, struct session *s,
    uint64_t cursor, const struct window_opts *o)
{
	struct evkeyvalq	*h = evhttp_request_get_output_headers(req);
	struct proto_session	 v;
	struct proto_window	 w;
	struct proto_err	 err;
	struct proto_buf	 b = { 0 };
	char			 num[32], at[64];
	size_t			 i, k;

	session_view(s, &v);
	if (!o->head_tail && !o->strip_ansi) {
		/* Whole chunks, back to back: read them into the body. */
		if (sessions_window_into(s, cursor, o->max_bytes, &b, &w,
		    &err) != 0) {
			proto_buf_free(&b);
			http_reply_error(req, &err, NULL);
			return;
		}
	} else if (sessions_window_opts(s, cursor, o, &w, &err) != 0) {
		http_reply_error(req, &err, NULL);
		return;
	} else if (w.n > 0)
		http_buf_take(&b, sessions_window_bytes(&w));
	/* Each stream's gap: where in the body its left-out bytes belong. */
	at[0] = '\0';
	for (i = 0; (o->head_tail || o->strip_ansi) && i <= w.n; i++) {
		for (k = 0; o->head_tail && k < nitems(w.gap_at); k++) {
			if (w.gap_at[k] != i || w.truncated_stream[k] == 0 ||
			    (k > 0 && w.gap_at[k - 1] == i &&
			    w.truncated_stream[k - 1] > 0))
				continue;
			snprintf(at + strlen(at), sizeof at - strlen(at),
			    "%s%zu", at[0] != '\0' ? "," : "", b.len);
		}
		if (i < w.n)
			proto_buf_append(&b, w.chunks[i].data,
			    w.chunks[i].len);
	}
	if (o->head_tail) {
		snprintf(num, sizeof num, "%" PRIu64, w.truncated_bytes);
		evhttp_add_header(h, "X-Agentd-Truncated-Bytes", num);
		if (w.per_stream) {
			snprintf(num, sizeof num, "%" PRIu64,
			    w.truncated_stream[PROTO_STREAM_STDOUT]);
			evhttp_add_header(h, "X-Agentd-Truncated-Bytes-Stdout",
			    num);
			snprintf(num, sizeof num, "%" PRIu64,
			    w.truncated_stream[PROTO_STREAM_STDERR]);
			evhttp_add_header(h, "X-Agentd-Truncated-Bytes-Stderr",
			    num);
		}
		if (w.truncated_bytes > 0) {
			snprintf(num, sizeof num, "%" PRIu64,
			    w.truncated_cursor);
			evhttp_add_header(h, "X-Agentd-Truncated-Cursor", num);
			evhttp_add_header(h, "X-Agentd-Truncated-At", at);
		}
	}
	snprintf(num, sizeof num, "%" PRIu64, w.cursor);
	evhttp_add_header(h, "X-Agentd-Cursor", num);
	snprintf(num, sizeof num, "%" PRIu64, w.dropped);
	evhttp_add_header(h, "X-Agentd-Dropped-Chunks", num);
	snprintf(num, sizeof num, "%" PRIu64,
	    w.n > 0 ? w.chunks[0].offset : v.bytes_out);
	evhttp_add_header(h, "X-Agentd-Offset", num);
	evhttp_add_header(h, "X-Agentd-More", w.more ? "true" : "false");
	evhttp_add_header(h, "X-Agentd-Eof", w.eof ? "true" : "false");
	evhttp_add_header(h, "X-Agentd-State", v.exited ? "exited" : "running");
	if (v.exited) {
		snprintf(num, sizeof num, "%d", v.exit_code);
		evhttp_add_header(h, "X-Agentd-Exit-Code", num);
	}
	http_reply_raw(req, 200, "application/octet-stream", &b);
}

/* GET /v1/sessions/{id}?cursor=N&wait_ms=W&max_bytes=B */
static void
sessions_read(struct http_req *hr, struct session *s)
{
	struct proto_query	 q;
	struct proto_err	 err;
	struct sessions_answer	 a;
	int64_t			 quiet;

	if (sse_wanted(hr)) {
		sse_session(hr, s);
		return;
	}
	if (proto_parse_query(hr->query, &q, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	if (sessions_cursor_bad(s, q.cursor)) {
		http_fail(hr->req, 400, "invalid_cursor", "cursor %" PRIu64
		    " is after the last chunk %" PRIu64, q.cursor,
		    ring_newest(session_ring(s)));
		return;
	}
	memset(&a, 0, sizeof a);
	a.status = 200;
	a.window = 1;
	a.cursor = q.cursor;
	a.o.max_bytes = q.max_bytes;
	a.o.max_bytes_stdout = q.max_bytes_stdout;
	a.o.max_bytes_stderr = q.max_bytes_stderr;
	a.o.head_tail = q.head_tail;
	a.o.strip_ansi = q.strip_ansi;
	a.o.encoding = sessions_encoding(q.encoding);
	a.written = -1;
	a.idle_ms = q.idle_ms;
	/* A GET's quiet time counts from the last output read. */
	if (q.idle_ms > 0 && !session_exited(s) && !sessions_wants_raw(hr) &&
	    (quiet = session_quiet_ms(s)) < q.idle_ms) {
		a.idle_left_ms = q.idle_ms - quiet;
		sessions_wait(hr->req, s, WAIT_IDLE, q.wait_ms > 0 ? q.wait_ms :
		    PROTO_WAIT_MAX_MS, &a, 0);
		return;
	}
	/* idle_ms replaces wait_ms's first output: quiet already, answer. */
	if (q.wait_ms > 0 && q.idle_ms == 0 && !sessions_ready(s, q.cursor) &&
	    !sessions_wants_raw(hr)) {
		sessions_wait(hr->req, s, WAIT_OUTPUT, q.wait_ms, &a, 0);
		return;
	}
	if (sessions_wants_raw(hr))
		sessions_answer_raw(hr->req, s, q.cursor, &a.o);
	else
		sessions_answer(hr->req, s, &a);
}

/* POST /v1/sessions/{id}/stdin, JSON or raw bytes. */
static void
sessions_stdin(struct http_req *hr, struct session *s)
{
	struct proto_stdin	 in;
	struct proto_query	 q;
	struct proto_err	 err;
	struct sessions_answer	 a;
	struct proto_buf	 b = { 0 };
	ssize_t			 n;
	int			 flags = 0;
	int64_t			 ms;

	memset(&in, 0, sizeof in);
	if (strncasecmp(hr->content_type, "application/octet-stream", 24) == 0) {
		if (proto_parse_query(hr->query, &q, &err) != 0) {
			http_reply_error(hr->req, &err, NULL);
			return;
		}
		in.data = (uint8_t *)hr->body;	/* not freed: evhttp's */
		in.len = hr->body_len;
		in.eof = q.eof;
		in.yield_ms = q.yield_ms;
		in.wait_ms = q.wait_ms;
		in.idle_ms = q.idle_ms;
		in.max_bytes = q.max_bytes;
		in.head_tail = q.head_tail;
		in.max_bytes_stdout = q.max_bytes_stdout;
		in.max_bytes_stderr = q.max_bytes_stderr;
		in.strip_ansi = q.strip_ansi;
		in.encoding = q.encoding;
		in.offset = q.offset;
	} else if (proto_parse_stdin(hr->body, hr->body_len, &in, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}

	memset(&a, 0, sizeof a);
	a.status = 200;
	a.window = 1;
	a.cursor = ring_newest(session_ring(s));
	a.o.max_bytes = in.max_bytes;
	a.o.max_bytes_stdout = in.max_bytes_stdout;
	a.o.max_bytes_stderr = in.max_bytes_stderr;
	a.o.head_tail = in.head_tail;
	a.o.strip_ansi = in.strip_ansi;
	a.o.encoding = sessions_encoding(in.encoding);
	a.idle_ms = in.idle_ms;
	n = session_write_stdin_at(s, in.data, in.len, in.eof, in.offset,
	    &a.duplicate, &err);
	if (in.data != (const uint8_t *)hr->body)
		proto_stdin_free(&in);
	if (n < 0 && strcmp(err.code, "stdin_offset_mismatch") == 0) {
		/* The client resends from the count it is told. */
		proto_render_error_count(&b, &err, "stdin_bytes",
		    session_stdin_bytes(s));
		http_reply(hr->req, err.status, &b);
		return;
	}
	if (n < 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	a.written = n;
	flags = sessions_wait_flags(in.wait_ms, in.yield_ms, in.idle_ms, &ms);
	if (flags == 0 || session_exited(s) ||
	    ((flags & WAIT_OUTPUT) && sessions_ready(s, a.cursor)))
		sessions_answer(hr->req, s, &a);
	else
		sessions_wait(hr->req, s, flags, ms, &a, 0);
}

/* POST /v1/sessions/{id}/resize */
static void
sessions_resize(struct http_req *hr, struct session *s)
{
	struct proto_err	 err;
	struct sessions_answer	 a = { .status = 200, .written = -1 };
	unsigned		 rows, cols;

	if (proto_parse_resize(hr->body, hr->body_len, &rows, &cols,
	    &err) != 0 || session_resize(s, rows, cols, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	sessions_answer(hr->req, s, &a);
}

/* POST /v1/sessions/{id}/signal */
static void
sessions_signal(struct http_req *hr, struct session *s)
{
	struct proto_err	 err;
	struct sessions_answer	 a = { .status = 200, .written = -1 };
	int			 signo, target;

	if (proto_parse_signal(hr->body, hr->body_len, &signo, &target,
	    &err) != 0 || session_signal(s, signo, target, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	sessions_answer(hr->req, s, &a);
}

/* DELETE /v1/sessions/{id}?grace_ms=G */
static void
sessions_delete(struct http_req *hr, struct session *s)
{
	struct proto_query	 q;
	struct proto_err	 err;
	struct sessions_answer	 a = { .status = 200, .written = -1 };
	int64_t			 grace;

	if (proto_parse_query(hr->query, &q, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	grace = q.grace_ms >= 0 ? q.grace_ms : SESSIONS_DELETE_GRACE_MS;
	/*
	 * The answer waits until nothing of the session is left and its
	 * leader is reaped (SESSION_EV_GONE): leftovers of an exited one get
	 * SIGTERM and the grace too.
	 */
	session_terminate(s, grace);
	if (session_gone(s)) {
		sessions_answer(hr->req, s, &a);
		session_remove(s);
		return;
	}
	sessions_wait(hr->req, s, WAIT_GONE, grace + SESSION_DRAIN_CAP_MS +
	    SESSIONS_DELETE_SLACK_MS, &a, 1);
}
