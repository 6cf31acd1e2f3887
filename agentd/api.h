/*
 * api.h -- the routes of API.md and the long-poll waiters behind them.
 *
 * A request that must wait (wait_ms, yield_ms, DELETE's grace) becomes a
 * waiter on its session: it is answered when the session produces output,
 * exits or closes its output, when its deadline passes, or when the session
 * is removed; and it is freed at once when its client goes away.
 * Event loop thread only.
 */
#ifndef AGENTD_API_H
#define AGENTD_API_H

#include <stddef.h>

struct http_req;
struct session;

/* Route a request to its handler; every path answers it. */
void	api_route(struct http_req *);

/* The session observer (see session_init()). */
void	api_session_event(struct session *, int events);

/* Requests waiting on a session now, for GET /debug/stat. */
size_t	api_waiter_count(struct session *);

/* Answer every waiter now (shutdown). */
void	api_flush_waiters(void);

#endif /* AGENTD_API_H */
