/*
 * conn_int.h -- what conn.c (connections, admission, budgets, deadlines)
 * and gate.c (each request's head held back and checked) share: the
 * connection's struct, and the gate's calls.  Private: nobody else
 * includes it (conn.h is the contract).  conn.c calls gate.c, never the
 * other way.
 */
#ifndef AGENTD_CONN_INT_H
#define AGENTD_CONN_INT_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

#include "conn.h"

/* Where a connection is in its request, for the gate (conn_gate). */
enum conn_state {
	CONN_HEAD,		/* a request's head, held back from evhttp */
	CONN_BODY,		/* what follows goes to evhttp as it is */
	CONN_CHUNK_SIZE,	/* a chunk-size line, held until whole */
	CONN_CHUNK_DATA,	/* chunk_left bytes of a chunk pass */
	CONN_CHUNK_END,		/* the line end after a chunk's data */
	CONN_TRAILER,		/* trailer lines pass, up to an empty one */
	CONN_DRAIN,		/* refused: input is dropped until the close */
	CONN_SPOOL,		/* spool_left bytes of a body go to the spool */
};

/* The connections of one evhttp. */
struct conn_pool {
	enum conn_transport transport;
	int		 unix_socket;	/* transport == CONN_UNIX */
	int		 own_auth;	/* its routes check the token (envd) */
	size_t		 nconns;	/* counted against --max-connections */
	uint64_t	 rejected;	/* closed at once: one too many */
	/* TCP with a token: connections no request with it came on yet. */
	TAILQ_HEAD(, conn) unproven;
};

/* A peer address (IPv6: a /64) and its connections without the token. */
struct conn_peer {
	LIST_ENTRY(conn_peer)	 entry;
	uint8_t			 key[16];
	size_t			 n;
	TAILQ_HEAD(, conn)	 conns;		/* oldest first */
};

/* One accepted connection. */
struct conn {
	TAILQ_ENTRY(conn)	 entry;		/* on conn_pending, then conn_shed */
	struct conn_pool	*pool;
	struct bufferevent	*bev;
	struct evhttp_connection *evcon;	/* NULL until set up */
	int			 fd;
	struct event		*deadline;	/* header timeout */
	struct evbuffer_cb_entry *incb;		/* counts what arrives */
	struct outq_conn	*outcb;		/* counts answers held (outq) */
	size_t			 pending;	/* bytes read since the last answer */
	int			 busy;		/* a handler holds its request */
	int			 shed;		/* on conn_shed: 413 or 503 */
	int			 loopback;	/* its local address is */
	int			 vsock_trusted;	/* vsock: the host or local */
	int			 unproven;	/* on the pool's unproven list */
	TAILQ_ENTRY(conn)	 uentry;	/* on the pool's unproven list */
	struct conn_peer	*peer;		/* while unproven */
	TAILQ_ENTRY(conn)	 pentry;	/* on the peer's list */
	enum conn_state		 state;
	struct evbuffer		*held;		/* bytes held back from evhttp */
	size_t			 scanned;	/* of held, whole lines */
	size_t			 searched;	/* of held, no line end in it */
	uint64_t		 nlines;	/* of the head, or trailer */
	uint64_t		 chunk_left;	/* bytes of the chunk to pass */
	uint64_t		 chunked_total;	/* bytes of the chunked body */
	size_t			 head_bytes;	/* of the head and trailer: evhttp
						   takes HTTP_HEADERS_MAX in all */
	uint64_t		 body_bytes;	/* the request's Content-Length */
	int			 paused;	/* its socket is not read (conn_pause) */
	int			 releasing;	/* the gate adds to the input */
	/* envd's POST /files over --max-body: its body on disk (spool.h). */
	struct spool		*spool;
	struct evbuffer		*spool_head;	/* handed on once it is whole */
	uint64_t		 spool_left;	/* CONN_SPOOL: bytes to come */
	/* Another close callback set on this connection (files.c's). */
	void			(*closecb)(struct evhttp_connection *, void *);
	void			*closecb_arg;
};
TAILQ_HEAD(conns, conn);

/*
 * gate.c's, for conn.c (the arrow runs one way: the gate never names
 * conn.c; what it needs of it comes in at conn_gate_init()).
 */
/* Bytes of requests in flight, every connection's (the gate adds the
   heads' cost and takes out what it spooled; conn.c the rest). */
extern uint64_t		 conn_inflight;
/*
 * Take the configuration, and conn.c's prove (a request came with the
 * token) and uncount (a connection's bytes in flight are done with).
 */
void		 conn_gate_init(const struct config *,
			    void (*prove)(struct conn *),
			    void (*uncount)(struct conn *));
/* Requests refused by the gate so far. */
uint64_t	 conn_gate_refused(void);
/* Start (or restart) a connection's deadline. */
void		 conn_arm(struct conn *, int64_t ms);
/* Write an error to a connection about to close (code NULL: envd's shape). */
void		 conn_send_error(struct conn *, int status,
			    const char *code, const char *message);
/* Hold a request's head back, check it, hand it on (see gate.c). */
void		 conn_gate(struct conn *, struct evbuffer *,
			    size_t keep);
/* Free a connection's spool, unless a handler took it. */
void		 conn_spool_drop(struct conn *);
void		 conn_pause(struct conn *, int);

#endif /* AGENTD_CONN_INT_H */
