/*
 * conn.h -- agentd's HTTP connections, under evhttp: admission (how many,
 * and what a request must look like before evhttp reads it), the budget of
 * request bytes in flight, and the deadlines.  http.c owns the listeners,
 * auth, routing and answers; it hands each evhttp to a pool of this file.
 * Event loop thread only.
 */
#ifndef AGENTD_CONN_H
#define AGENTD_CONN_H

#include <stdint.h>

struct bufferevent;
struct config;
struct event_base;
struct evhttp_request;
struct proto_buf;

/* The connections of one evhttp: TCP, or the unix socket. */
struct conn_pool;

/* Start: budgets and events from the configuration. */
void	 conn_start(struct event_base *, const struct config *);
/* A pool for an evhttp; unix_socket: its peers are checked by uid. */
struct conn_pool *conn_pool_new(int unix_socket);
/*
 * A pool for the envd listeners (envd.h): TCP, whose routes check the
 * token themselves, so a body is read without one (envd's POST /init and
 * signed /files URLs need none).
 */
struct conn_pool *conn_pool_new_envd(void);
/* For evhttp_set_bevcb(h, conn_bevcb, pool). */
struct bufferevent *conn_bevcb(struct event_base *, void *pool);
/* Set up what was accepted; call before evhttp_free(). */
void	 conn_flush(void);
/* Free the pools and events; after every evhttp_free(). */
void	 conn_stop(void);

/*
 * A request is whole and goes to a handler: no deadline runs until it is
 * answered, and its bytes count until then.
 */
void	 conn_request_whole(struct evhttp_request *);

/*
 * After a restore: TCP keepalive on every TCP connection open now, a probe
 * after secs idle seconds and every secs seconds, count unanswered close it
 * (a peer that is gone answers the first with a reset); secs 0 turns it off
 * again.  Returns how many connections it set.
 */
size_t	 conn_probe(int secs, int count);

/* Append the counters of admission to a /metrics answer. */
void	 conn_metrics(struct proto_buf *);

#endif /* AGENTD_CONN_H */
