/*
 * sessions.h -- /v1/sessions (sessions.c): the routes of a session, and the
 * long-poll waiters behind them, which mcp.c shares.
 *
 * A request that must wait (wait_ms, yield_ms, DELETE's grace) becomes a
 * waiter on its session: it is answered when the session produces output,
 * exits or closes its output, when its deadline passes, or when the session
 * is removed; and it is freed at once when its client goes away.
 * Event loop thread only.
 */
#ifndef AGENTD_SESSIONS_H
#define AGENTD_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

struct config;
struct event_base;
struct evhttp_request;
struct http_req;
struct proto_err;
struct proto_window;
struct session;
struct window_opts;

/* /v1/sessions and /v1/sessions/{id}[/stdin|/resize|/signal]. */
void	sessions_init(struct event_base *, const struct config *);
/* Answer a request for /v1/sessions. */
void	sessions_route(struct http_req *);

/* The session observer (see session_init()). */
void	sessions_event(struct session *, int events);

/* Requests waiting on a session now, for GET /debug/stat. */
size_t	sessions_waiter_count(struct session *);

/*
 * Read the output window of the chunks after cursor, at most max_bytes of
 * data (head_tail: its head and tail, API.md), into w, which points into
 * buffers shared by every window: valid until the next window is read.
 * Returns 0, or -1 with err (400 invalid_cursor, 503 out_of_memory).
 */
int	sessions_window(struct session *, uint64_t cursor, size_t max_bytes,
	    int head_tail, struct proto_window *w, struct proto_err *err);
/*
 * The same with every option of a window (window.h): per-stream budgets,
 * strip_ansi.
 */
int	sessions_window_opts(struct session *, uint64_t cursor,
	    const struct window_opts *, struct proto_window *w,
	    struct proto_err *err);

/*
 * How another front end (mcp.c) answers a request parked by
 * sessions_wait_call(): fn(req, s, arg) with the session valid during the
 * call, which must answer req; or fn(NULL, s, arg) when the client went
 * away first (free arg only; the connection is freed after the call).
 */
typedef void (*sessions_wait_fn)(struct evhttp_request *, struct session *,
	    void *arg);

/*
 * Park req on s until s exits, ms pass, s is removed or agentd stops, as
 * a yield_ms does, watching for its client's close; then call fn.  With
 * delete, as a DELETE's waiter after a session_terminate(): until nothing
 * of s is left and its leader is reaped, and s is removed once fn answered
 * (or when it ends, if the client went away).
 */
void	sessions_wait_call(struct evhttp_request *, struct session *,
	    int64_t ms, int delete, sessions_wait_fn fn, void *arg);

/* Answer every waiter now (shutdown). */
void	sessions_flush_waiters(void);

#endif /* AGENTD_SESSIONS_H */
