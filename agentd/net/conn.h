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
struct spool;

/* The connections of one evhttp: TCP, the unix socket, or vsock. */
struct conn_pool;

/* What a pool's connections come over; each has its --max-connections. */
enum conn_transport {
	CONN_TCP,	/* the token when one is set; a loopback or address Host
			   without one */
	CONN_UNIX,	/* checked by uid (http.c), no token */
	CONN_VSOCK,	/* as TCP; without a token, the host's and this
			   machine's CIDs only (vsock.h) */
	CONN_TRANSPORTS
};

/* Start: budgets and events from the configuration. */
void	 conn_start(struct event_base *, const struct config *);
/*
 * A pool for an evhttp of a transport; own_auth: its routes check the
 * token themselves, so a body is read without one (envd's POST /init and
 * signed /files URLs need none).  Each pool counts its --max-connections.
 */
struct conn_pool *conn_pool_new(enum conn_transport, int own_auth);
/* "tcp", "unix" or "vsock". */
const char *conn_transport_name(enum conn_transport);
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
 * The body of req when the gate spooled it to disk (envd's POST /files
 * over --max-body; the request evhttp has says Content-Length: 0), now the
 * caller's to spool_free(); NULL when it was not spooled.
 */
struct spool *conn_spool_take(struct evhttp_request *);

/*
 * After a restore: TCP keepalive on every TCP connection open now, a probe
 * after secs idle seconds and every secs seconds, count unanswered close it
 * (a peer that is gone answers the first with a reset); secs 0 turns it off
 * again.  Returns how many connections it set.
 */
size_t	 conn_probe(int secs, int count);

/* Append the counters of admission to a /metrics answer. */
void	 conn_metrics(struct proto_buf *);

/*
 * Append "connections": [...] to a JSON object being built (/debug/stat):
 * each set-up connection's fd, transport, peer (ADDR:PORT, vsock:CID:PORT,
 * or uid N on the unix socket) and state, CONN_STAT_MAX at most, then
 * "connections_listed" and per-transport counts.
 */
void	 conn_stat(struct proto_buf *);
#define CONN_STAT_MAX	256	/* connections listed by conn_stat() */

#endif /* AGENTD_CONN_H */
