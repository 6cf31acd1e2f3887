/*
 * debug.h -- the debug endpoints behind `agentctl stat` and `agentctl logs`,
 * served on the unix socket only (api_route() sends /debug/ here only for
 * unix-socket requests; over TCP the paths are 404 like any unknown route).
 *
 *   GET /debug/stat   agentd's figures as JSON: pid, uptime, fds, RSS,
 *                     event-loop lag, companion restarts, connections, and
 *                     per session its ring (held, dropped, oldest/newest id)
 *                     and readers (requests parked on it).
 *   GET /debug/logs   agentd's recent log lines (the in-memory ring of
 *                     log.h), oldest first: {"lines": [...]} as JSON, or
 *                     text/plain with ?format=text.
 *
 * Event-loop lag is measured by a timer that should fire every
 * DEBUG_LAG_INTERVAL_MS: how late it fires is how long the loop was busy.
 * The timer starts with the first /debug/ request.  Event loop thread only.
 */
#ifndef AGENTD_DEBUG_H
#define AGENTD_DEBUG_H

#include <stdint.h>

#define DEBUG_LAG_INTERVAL_MS	100	/* ms between two lag samples */

struct config;
struct event_base;
struct http_req;

/* Set the loop, the configuration and agentd's start (monotonic ms). */
void	debug_init(struct event_base *, const struct config *,
	    int64_t start_ms);
/* Answer a /debug/ request; every path answers it. */
void	debug_route(struct http_req *);
/* Stop the timer and free everything (after shutdown). */
void	debug_free(void);

#endif /* AGENTD_DEBUG_H */
