/*
 * events.h -- the sandbox's event feed: events_post() by any part of agentd,
 * GET /v1/events (a long-poll, or Server-Sent Events) for clients.
 *
 * Events live in a ring (evring.h) of --max-events events and
 * --events-bytes bytes: ids start at 1 and grow by exactly 1; the oldest
 * are dropped first, and a reader behind them is told how many it missed
 * (dropped_events).  Each event is a JSON object {"id", "type", "at",
 * "session", ...} with its own fields at the top level.
 *
 * The session events (session.created, session.exited, session.removed)
 * come from the session observer, events_session_event(); other producers
 * call events_post() (port.opened, sandbox.resumed, ...).
 * Event loop thread only.
 */
#ifndef AGENTD_EVENTS_H
#define AGENTD_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define EVENTS_MAX_DEFAULT	16384		/* events held */
#define EVENTS_BYTES_DEFAULT	(4u << 20)	/* bytes of events held */

struct http_req;
struct proto_buf;
struct session;
struct evring;

/* Make the ring: max_events events and max_bytes bytes at most. */
void	 events_init(struct event_base *, size_t max_events,
	    size_t max_bytes);
/* Answer every long-poll, end every stream, free the ring (shutdown). */
void	 events_free(void);

/*
 * Post an event of type ("session.exited", "port.opened", ...) about
 * session (NULL: none), with fields, a JSON object whose top-level members
 * join the event's (its reference is stolen; NULL for none; members named
 * id, type, at or session are ignored).  Wakes the long-polls and streams
 * whose filter keeps it.  Returns the event's id (0 after events_free()).
 */
uint64_t events_post(const char *type, const char *session, json_t *fields);

/* The session observer's part: post session.created/exited/removed. */
void	 events_session_event(struct session *, int events);

/* GET /v1/events?cursor=N&wait_ms=W&session=ID&types=a,b */
void	 events_route(struct http_req *);

/* Answer every long-poll now with what it has (an upgrade's hand-over). */
void	 events_flush_waiters(void);
/* The feed's ring (an upgrade hands it over; evring.h), NULL after
   events_free(). */
struct evring *events_evring(void);

/* Append the feed's gauges and counters to a /metrics answer. */
void	 events_metrics(struct proto_buf *);

#endif /* AGENTD_EVENTS_H */
