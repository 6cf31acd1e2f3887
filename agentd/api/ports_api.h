/*
 * ports_api.h -- GET /v1/ports: the listening sockets (ports.h), and
 * ?port=P&wait_ms=W, a long-poll answered when something listens on P.
 * Event loop thread only.
 */
#ifndef AGENTD_PORTS_API_H
#define AGENTD_PORTS_API_H

struct config;
struct event_base;
struct http_req;

/*
 * Start the event feed's refreshes every --ports-feed-interval
 * (agentd_start(); the first request does it too).  Nothing is read at the
 * start: the first read is the feed's baseline (what listens then is not
 * posted), taken when first needed: at the first GET /v1/ports, the feed's
 * first refresh, or ports_api_prime(), whichever comes first.
 */
void	ports_api_init(struct event_base *, const struct config *);
/*
 * Take the feed's baseline now if it was not (and the feed is on): called
 * before agentd starts a process of its own (a session's spawn, the
 * companion) and once it adopted an upgrade's sessions, so that their
 * ports are posted as they open, as if the baseline had been read at the
 * start.
 */
void	ports_api_prime(void);
/* Answer a request for /v1/ports (any method, any path under it). */
void	ports_route(struct http_req *);

/* The shutdown began: every wait ends with 503 shutting_down. */
void	ports_api_stop(void);
/* Answer every waiter now and free the list (after the loop). */
void	ports_api_free(void);

#endif /* AGENTD_PORTS_API_H */
