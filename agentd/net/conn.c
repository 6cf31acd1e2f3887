/*
 * conn.c -- HTTP connections under evhttp: admission, the budget of request
 * bytes in flight, deadlines (see conn.h).
 *
 * Connections.  libevent 2.1 has no public hook when evhttp accepts a
 * connection or frees one.  What it has: the bevcb (evhttp_set_bevcb), called
 * for each accepted connection before its evhttp_connection exists, and the
 * connection's close callback, called from evhttp_connection_free().  So the
 * bevcb creates the socket bufferevent, counts the connection and queues it;
 * an event made active there runs before any I/O on the new fd and finds the
 * evhttp_connection (the cbarg evhttp gave the bufferevent), sets the close
 * callback that uncounts it, arms its header deadline, and closes it at once
 * with a 503 when the connection is one too many (--max-connections).  Other
 * code may set a connection's close callback too (files.c does): agentd links
 * with -Wl,--wrap=evhttp_connection_set_closecb, and on connections of ours
 * the wrapper records theirs, which ours calls first.
 *
 * Admission.  With a token configured, a TCP or vsock connection is
 * unproven until a request on it carries the token; without one, vsock
 * serves only the host's and this machine's CIDs (vsock.h).  One
 * connection too many closes the oldest unproven one instead of being
 * refused (conn_evict), and one peer
 * holds at most --max-peer-unproven of them (conn_peer_add): idle peers
 * cannot lock the platform out.
 *
 * The gate (conn_gate, below).  Each request's head is held back from
 * evhttp until it is whole, and checked: refusals are JSON, and no body
 * byte is read before the token.
 *
 * Memory.  Heads (64 KiB and --max-headers lines at most) and bodies are
 * read before any handler sees them.  Every connection's bytes since its
 * last answer count, and each header line its parsed cost: one that sends
 * more than a request may hold is closed with a 413, and past one budget
 * for all (CONN_INFLIGHT_MIN, or two of the largest requests) the
 * connection adding bytes is closed with a 503.
 *
 * Timeouts.  A request must arrive whole within --header-timeout of the
 * connection's start; after an answer on a keep-alive connection the next
 * one has --idle-timeout plus --header-timeout; an unproven connection
 * --preauth-timeout when that is shorter; while a handler holds a request
 * (a long-poll) no deadline runs.  evhttp's own timeout (--idle-timeout)
 * cuts a connection that stays silent, or that stops reading an answer.
 */
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <linux/vm_sockets.h>

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "config.h"
#include "conn.h"
#include "httpcore.h"
#include "log.h"
#include "outq.h"
#include "proto.h"
#include "stats.h"
#include "util.h"
#include "vsock.h"

#define CONN_INFLIGHT_MIN	(64u << 20) /* bytes of requests in flight, all
					   connections together, at least */
#define CONN_LINGER_MS		2000	/* a refused connection's input is
					   read and dropped this long */
#define CONN_HEADER_COST	128	/* bytes evhttp allocates for a header
					   line besides its text */
#define CONN_CHUNK_LINE_MAX	1024	/* bytes of a chunk-size line */
#define CONN_PEER_BUCKETS	4096	/* hash buckets of peers */
#define CONN_EVICT_SCAN		64	/* unproven connections looked at for
					   one that gives way, oldest first */
#define CONN_TRIM_BYTES		(8u << 20) /* in flight once, trim after */
#define CONN_TRIM_MS		200	/* trim this long after the drop */
#define CONN_URI_STACK		256	/* bytes of a request target checked
					   without a malloc */
#define CONN_POOLS_MAX		8	/* evhttps: APIs times transports */
#define CONN_VSOCK_LOG_MAX	64	/* vsock connections logged ... */
#define CONN_VSOCK_LOG_MS	10000	/* ... per this long */
#define CONN_HOLD_COPY_MAX	4096	/* bytes of a read copied into the held
					   bytes; larger reads move whole */

/* Where a connection is in its request, for the gate (conn_gate). */
enum conn_state {
	CONN_HEAD,		/* a request's head, held back from evhttp */
	CONN_BODY,		/* what follows goes to evhttp as it is */
	CONN_CHUNK_SIZE,	/* a chunk-size line, held until whole */
	CONN_CHUNK_DATA,	/* chunk_left bytes of a chunk pass */
	CONN_CHUNK_END,		/* the line end after a chunk's data */
	CONN_TRAILER,		/* trailer lines pass, up to an empty one */
	CONN_DRAIN,		/* refused: input is dropped until the close */
};

/* What the gate takes from a request's head. */
struct conn_head {
	int		 minor;		/* HTTP/1.minor (a higher one: 1) */
	size_t		 version_at;	/* the minor digit to rewrite to '1'
					   (HTTP/1.2 and up), or 0 */
	int		 nhost;
	const char	*host;		/* not NUL-terminated */
	size_t		 host_len;
	const char	*origin;
	size_t		 origin_len;
	const char	*fetch_site;
	size_t		 fetch_site_len;
	const char	*auth;		/* Authorization */
	size_t		 auth_len;
	const char	*xtoken;	/* X-Access-Token */
	size_t		 xtoken_len;
	int64_t		 content_length; /* -1: none */
	int		 chunked;
	int		 nte;		/* Transfer-Encoding headers */
	int		 expect;	/* 0; 1: 100-continue; 2: another */
};

/* Why the gate refuses a request. */
struct conn_refusal {
	int	 status;
	char	 code[32];
	char	 message[160];
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
LIST_HEAD(conn_peers, conn_peer);

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
	int			 releasing;	/* the gate adds to the input */
	/* Another close callback set on this connection (files.c's). */
	void			(*closecb)(struct evhttp_connection *, void *);
	void			*closecb_arg;
};
TAILQ_HEAD(conns, conn);

static struct event_base	*conn_base;	/* the loop (conn_start's) */
static const struct config	*cfg;
static struct conn_pool		*pools[CONN_POOLS_MAX];	/* every evhttp's */
static size_t			 npools;
/* Connections accepted but not yet set up (conn_setup_cb's work). */
static struct conns	 conn_pending = TAILQ_HEAD_INITIALIZER(conn_pending);
static struct event	*conn_setup_ev;
/* Connections to close for the pending budget (conn_shed_cb's work). */
static struct conns	 conn_shed = TAILQ_HEAD_INITIALIZER(conn_shed);
static struct event	*conn_shed_ev;
static uint64_t		 conn_inflight;	/* bytes, every connection's */
static uint64_t		 conn_inflight_max;
static uint64_t		 conn_request_max; /* bytes, evhttp's largest */
static uint64_t		 conn_shed_count;
static uint64_t		 conn_refused;	/* by the gate */
static uint64_t		 conn_evicted;	/* unproven, for a new connection */
static struct conn_peers conn_peers[CONN_PEER_BUCKETS];
static uint64_t		 conn_inflight_high; /* bytes, since the last trim */
static struct event	*conn_trim_ev;
/* Set-up connections by fd, to find a request's connection. */
static struct conn	**conn_by_fd;
static size_t		 conn_by_fd_len;

/* The real setter, and the wrapper every other caller in agentd reaches. */
void	__real_evhttp_connection_set_closecb(struct evhttp_connection *,
	    void (*)(struct evhttp_connection *, void *), void *);
void	__wrap_evhttp_connection_set_closecb(struct evhttp_connection *,
	    void (*)(struct evhttp_connection *, void *), void *);

static void		 conn_setup_cb(evutil_socket_t, short, void *);
static void		 conn_hold(struct conn *, struct evbuffer *);
static void		 conn_setup(struct conn *);
static void		 conn_closed(struct evhttp_connection *, void *);
static void		 conn_deadline(evutil_socket_t, short, void *);
static void		 conn_arm(struct conn *, int64_t ms);
static struct conn	*conn_of(struct evhttp_connection *);
static void		 conn_request_done(struct evhttp_request *, void *);
static void		 conn_reject(struct conn *);
static void		 conn_input(struct evbuffer *,
			    const struct evbuffer_cb_info *, void *);
static void		 conn_shed_cb(evutil_socket_t, short, void *);
static void		 conn_send_error(struct conn *, int status,
			    const char *code, const char *message);
static void		 conn_gate(struct conn *, struct evbuffer *,
			    size_t keep);
static int		 conn_head_step(struct conn *, struct evbuffer *);
static int		 conn_chunk_step(struct conn *, struct evbuffer *);
static int		 conn_trailer_ok(const char *, size_t);
static void		 conn_admit(struct conn *, struct evbuffer *,
			    size_t len);
static int		 conn_parse(const char *, size_t, struct conn_head *,
			    struct conn_refusal *);
static int		 conn_policy(struct conn *, const struct conn_head *,
			    struct conn_refusal *);
static void		 conn_release(struct conn *, struct evbuffer *,
			    size_t len);
static void		 conn_refuse(struct conn *, const struct conn_refusal *);
static void		 conn_prove(struct conn *);
static int		 conn_evict(struct conn *);
static int		 conn_silent(struct conn *, struct conn *);
static int		 conn_is_loopback(int fd);
static int64_t		 conn_timeout(struct conn *, int64_t ms);
static void		 conn_peer_add(struct conn *);
static void		 conn_peer_drop(struct conn *);
static void		 conn_uncount(struct conn *);
static void		 conn_trim_cb(evutil_socket_t, short, void *);
static int		 conn_refusal(struct conn_refusal *, int status,
			    const char *code, const char *fmt, ...)
			    __attribute__((format(printf, 4, 5)));
static int		 conn_tchar(int);
static int		 conn_is(const char *, size_t, const char *);
static int		 conn_host_local(const char *, size_t);
static int		 conn_origin_same(const struct conn_head *);
static char		*conn_peer_name(struct conn *, char *, size_t);
static void		 conn_log_vsock(struct conn *);

/* Budgets and events, on the loop base. */
void
conn_start(struct event_base *base, const struct config *c)
{
	conn_base = base;
	cfg = c;
	if ((conn_setup_ev = event_new(conn_base, -1, 0, conn_setup_cb,
	    NULL)) == NULL || (conn_shed_ev = event_new(conn_base, -1, 0,
	    conn_shed_cb, NULL)) == NULL || (conn_trim_ev = evtimer_new(
	    conn_base, conn_trim_cb, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	/* Two requests of evhttp's largest always fit. */
	conn_request_max = 2 * cfg->max_body + HTTP_BODY_SLACK +
	    HTTP_HEADERS_MAX;
	conn_inflight_max = 2 * conn_request_max;
	if (conn_inflight_max < CONN_INFLIGHT_MIN)
		conn_inflight_max = CONN_INFLIGHT_MIN;
}

/* A pool for one evhttp. */
struct conn_pool *
conn_pool_new(enum conn_transport transport, int own_auth)
{
	struct conn_pool	*p;

	if (npools == CONN_POOLS_MAX)
		fatal("%s: more than %d pools", __func__, CONN_POOLS_MAX);
	p = xcalloc(1, sizeof *p);
	p->transport = transport;
	p->unix_socket = transport == CONN_UNIX;
	p->own_auth = own_auth;
	TAILQ_INIT(&p->unproven);
	pools[npools++] = p;
	return (p);
}

/* A transport's name, for logs and /debug/stat. */
const char *
conn_transport_name(enum conn_transport transport)
{
	switch (transport) {
	case CONN_UNIX:
		return ("unix");
	case CONN_VSOCK:
		return ("vsock");
	default:
		return ("tcp");
	}
}

/* Set up what was accepted (before evhttp_free). */
void
conn_flush(void)
{
	conn_setup_cb(-1, 0, NULL);
}

/* Free the pools and events (after evhttp_free). */
void
conn_stop(void)
{
	size_t	i;

	if (conn_setup_ev != NULL)
		event_free(conn_setup_ev);
	if (conn_shed_ev != NULL)
		event_free(conn_shed_ev);
	if (conn_trim_ev != NULL)
		event_free(conn_trim_ev);
	conn_setup_ev = conn_shed_ev = conn_trim_ev = NULL;
	free(conn_by_fd);
	conn_by_fd = NULL;
	conn_by_fd_len = 0;
	for (i = 0; i < npools; i++) {
		free(pools[i]);
		pools[i] = NULL;
	}
	npools = 0;
}

/* A request is whole: no deadline while a handler holds it. */
void
conn_request_whole(struct evhttp_request *req)
{
	struct conn	*c;

	if ((c = conn_of(evhttp_request_get_connection(req))) == NULL)
		return;
	evtimer_del(c->deadline);
	c->busy = 1;
	evhttp_request_set_on_complete_cb(req, conn_request_done, c);
}

/*
 * evhttp accepted a connection: make its bufferevent, count it and queue it
 * for conn_setup_cb, which runs before the loop polls the new fd.  The extra
 * reference keeps the bufferevent's memory until then, whatever evhttp does.
 */
struct bufferevent *
conn_bevcb(struct event_base *base, void *arg)
{
	struct conn_pool	*pool = arg;
	struct conn		*c;

	c = xcalloc(1, sizeof *c);
	c->pool = pool;
	c->fd = -1;
	if ((c->bev = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		fatal("%s: out of memory", __func__);
	bufferevent_incref(c->bev);
	pool->nconns++;
	agentd_stats.connections_open++;
	agentd_stats.connections_total++;
	TAILQ_INSERT_TAIL(&conn_pending, c, entry);
	event_active(conn_setup_ev, EV_TIMEOUT, 0);
	return (c->bev);
}

/* Set up the connections accepted since the last time. */
static void
conn_setup_cb(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c;

	while ((c = TAILQ_FIRST(&conn_pending)) != NULL) {
		TAILQ_REMOVE(&conn_pending, c, entry);
		conn_setup(c);
	}
}

/*
 * Find the connection's evhttp_connection, take over its close callback,
 * arm its deadline; or close it now when it is one too many.
 */
static void
conn_setup(struct conn *c)
{
	struct bufferevent	*bev = c->bev;
	void			*cbarg = NULL;
	size_t			 n;

	bufferevent_getcb(bev, NULL, NULL, NULL, &cbarg);
	c->bev = NULL;
	if (cbarg == NULL) {
		/* evhttp failed to set it up and freed it already. */
		c->pool->nconns--;
		agentd_stats.connections_open--;
		free(c);
		bufferevent_decref(bev);
		return;
	}
	c->evcon = cbarg;
	c->fd = bufferevent_getfd(bev);
	if ((c->deadline = evtimer_new(conn_base, conn_deadline,
	    c)) == NULL)
		fatal("%s: out of memory", __func__);
	__real_evhttp_connection_set_closecb(c->evcon, conn_closed, c);
	c->incb = evbuffer_add_cb(bufferevent_get_input(bev), conn_input, c);
	if (c->incb == NULL)
		fatal("%s: out of memory", __func__);
	c->outcb = outq_watch(bev);
	bufferevent_decref(bev);	/* evhttp holds its own */
	if (c->fd >= 0) {
		if ((size_t)c->fd >= conn_by_fd_len) {
			n = conn_by_fd_len == 0 ? 1024 : conn_by_fd_len;
			while (n <= (size_t)c->fd)
				n *= 2;
			conn_by_fd = xrealloc(conn_by_fd, n * sizeof *conn_by_fd);
			memset(conn_by_fd + conn_by_fd_len, 0,
			    (n - conn_by_fd_len) * sizeof *conn_by_fd);
			conn_by_fd_len = n;
		}
		conn_by_fd[c->fd] = c;
	}
	if (c->pool->transport == CONN_VSOCK) {
		c->vsock_trusted = vsock_peer_local_or_host(c->fd);
		conn_log_vsock(c);
	}
	if (!c->pool->unix_socket) {
		c->loopback = conn_is_loopback(c->fd);
		if (cfg->token != NULL) {
			TAILQ_INSERT_TAIL(&c->pool->unproven, c, uentry);
			c->unproven = 1;
			conn_peer_add(c);
		}
	}
	if (c->pool->nconns > cfg->max_connections && conn_evict(c) != 0) {
		conn_reject(c);
		return;
	}
	conn_arm(c, conn_timeout(c, cfg->header_timeout_ms));
}

/* A deadline of ms, or the shorter pre-auth one while c is unproven. */
static int64_t
conn_timeout(struct conn *c, int64_t ms)
{
	if (c->unproven && cfg->preauth_timeout_ms < ms)
		return (cfg->preauth_timeout_ms);
	return (ms);
}

/*
 * One connection too many: close the oldest that has not yet sent the
 * token and holds no request, so that a platform's connection always gets
 * in; one with bytes not read yet (conn_silent()) only when none of the
 * CONN_EVICT_SCAN oldest is silent.  Returns 0, or -1 when there is none.
 */
static int
conn_evict(struct conn *c)
{
	struct conn	*v, *old = NULL;
	char		 name[INET6_ADDRSTRLEN + 16];
	int		 n = 0;

	TAILQ_FOREACH(v, &c->pool->unproven, uentry) {
		if (v == c || v->busy)
			continue;
		if (old == NULL)
			old = v;
		if (conn_silent(v, c))
			break;
		if (++n == CONN_EVICT_SCAN) {
			v = NULL;
			break;
		}
	}
	if (v == NULL && (v = old) == NULL)
		return (-1);
	if (conn_evicted++ % 1000 == 0)
		log_warn("%s: %zu %s connections (--max-connections %llu): "
		    "closing fd %d (%s), which sent no token yet (%llu so far)",
		    __func__, c->pool->nconns - 1,
		    conn_transport_name(c->pool->transport),
		    (unsigned long long)cfg->max_connections, v->fd,
		    conn_peer_name(v, name, sizeof name),
		    (unsigned long long)conn_evicted);
	conn_send_error(v, 503, "too_many_connections", "--max-connections "
	    "reached; a connection without the token gave way");
	evhttp_connection_free(v->evcon);	/* conn_closed runs */
	return (0);
}

/*
 * Whether v, an unproven connection, may give way to c: it holds no request
 * and has nothing waiting to be read.  A connection whose request arrived
 * in the same burst as c (many clients connecting at once, each sending its
 * token at once) has not been read yet, and is not one that sent nothing.
 */
static int
conn_silent(struct conn *v, struct conn *c)
{
	int	n;

	if (v == c || v->busy)
		return (0);
	return (ioctl(v->fd, FIONREAD, &n) == 0 && n == 0);
}

/* Whether a socket's local address is a loopback one. */
static int
conn_is_loopback(int fd)
{
	struct sockaddr_storage	 ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss;
	socklen_t		 len = sizeof ss;
	const uint8_t		*a;

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return (0);
	if (ss.ss_family == AF_INET)
		return ((ntohl(sin->sin_addr.s_addr) >> 24) == 127);
	if (ss.ss_family != AF_INET6)
		return (0);
	if (IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
		return (1);
	a = sin6->sin6_addr.s6_addr;
	return (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && a[12] == 127);
}

/* A request came with the token: the connection is never evicted. */
static void
conn_prove(struct conn *c)
{
	if (!c->unproven)
		return;
	TAILQ_REMOVE(&c->pool->unproven, c, uentry);
	c->unproven = 0;
	conn_peer_drop(c);
}

/*
 * Count an unproven connection against its peer; past --max-peer-unproven
 * the peer's oldest silent one gives way, so that one peer's flood only
 * closes its own connections.  None silent among the CONN_EVICT_SCAN oldest
 * is a burst whose requests are not read yet: they prove themselves or are
 * refused in a moment, and the next connection past the limit looks again.
 */
static void
conn_peer_add(struct conn *c)
{
	struct sockaddr_storage	 ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss;
	socklen_t		 len = sizeof ss;
	struct conn_peers	*bucket;
	struct conn_peer	*p;
	struct conn		*v;
	uint8_t			 key[16];
	uint32_t		 h = 2166136261u;
	size_t			 i;
	int			 n = 0;

	memset(key, 0, sizeof key);
	if (getpeername(c->fd, (struct sockaddr *)&ss, &len) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &sin->sin_addr, 4);
	} else if (ss.ss_family == AF_INET6 &&
	    IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr))
		memcpy(key, &sin6->sin6_addr, 16);
	else if (ss.ss_family == AF_INET6)
		memcpy(key, &sin6->sin6_addr, 8);	/* the /64 */
	else if (ss.ss_family == AF_VSOCK) {
		key[8] = 0x76;		/* no IPv6 /64 has bytes 8..15 set */
		memcpy(key + 12, &((struct sockaddr_vm *)&ss)->svm_cid, 4);
	} else
		return;
	for (i = 0; i < sizeof key; i++)
		h = (h ^ key[i]) * 16777619u;	/* FNV-1a */
	bucket = &conn_peers[h % CONN_PEER_BUCKETS];
	LIST_FOREACH(p, bucket, entry) {
		if (memcmp(p->key, key, sizeof key) == 0)
			break;
	}
	if (p == NULL) {
		p = xcalloc(1, sizeof *p);
		memcpy(p->key, key, sizeof key);
		TAILQ_INIT(&p->conns);
		LIST_INSERT_HEAD(bucket, p, entry);
	}
	c->peer = p;
	TAILQ_INSERT_TAIL(&p->conns, c, pentry);
	if (++p->n <= cfg->max_peer_unproven)
		return;
	TAILQ_FOREACH(v, &p->conns, pentry) {
		if (conn_silent(v, c))
			break;
		if (++n == CONN_EVICT_SCAN) {
			v = NULL;
			break;
		}
	}
	if (v == NULL)
		return;		/* a burst: the limit holds once it is read */
	conn_evicted++;
	log_debug("%s: fd %d: its peer has %zu connections without the token; "
	    "closing fd %d", __func__, c->fd, p->n, v->fd);
	conn_send_error(v, 503, "too_many_connections", "--max-peer-unproven "
	    "reached; this peer's oldest connection without the token gave "
	    "way");
	evhttp_connection_free(v->evcon);	/* conn_closed runs */
}

/* Uncount a connection from its peer; free the peer with its last. */
static void
conn_peer_drop(struct conn *c)
{
	struct conn_peer	*p = c->peer;

	if (p == NULL)
		return;
	TAILQ_REMOVE(&p->conns, c, pentry);
	c->peer = NULL;
	if (--p->n == 0) {
		LIST_REMOVE(p, entry);
		free(p);
	}
}

/*
 * One connection too many: answer 503 without reading, and close.  The
 * answer is best effort (a full socket buffer or a request already sent
 * may lose it); the close is certain.
 */
static void
conn_reject(struct conn *c)
{
	char	name[INET6_ADDRSTRLEN + 16];

	if (c->pool->rejected++ == 0 || c->pool->rejected % 1000 == 0)
		log_warn("%s: %zu %s connections (--max-connections %llu): "
		    "closing new ones, fd %d (%s) now (%llu so far)", __func__,
		    c->pool->nconns - 1, conn_transport_name(c->pool->transport),
		    (unsigned long long)cfg->max_connections, c->fd,
		    conn_peer_name(c, name, sizeof name),
		    (unsigned long long)c->pool->rejected);
	conn_send_error(c, 503, "too_many_connections",
	    "--max-connections reached");
	evhttp_connection_free(c->evcon);	/* conn_closed runs */
}

/*
 * Write an error straight to a connection that is about to be closed,
 * unless evhttp has an answer of its own under way; best effort: a full
 * socket buffer, or unread bytes that make the close a reset, may lose it.
 */
static void
conn_send_error(struct conn *c, int status, const char *code,
    const char *message)
{
	static const struct {
		int		 status;
		const char	*reason;
	} reasons[] = {
		{ 400, "Bad Request" }, { 401, "Unauthorized" },
		{ 403, "Forbidden" }, { 413, "Payload Too Large" },
		{ 417, "Expectation Failed" },
		{ 431, "Request Header Fields Too Large" },
		{ 503, "Service Unavailable" },
		{ 505, "HTTP Version Not Supported" },
	};
	struct iovec	 iov[2];
	struct msghdr	 msg;
	char		 head[320], body[320], date[40];
	const char	*reason = "Error";
	ssize_t		 n;
	size_t		 i;

	http_count(status);
	if (c->fd < 0 || evbuffer_get_length(bufferevent_get_output(
	    evhttp_connection_get_bufferevent(c->evcon))) > 0)
		return;
	iov[1].iov_base = body;
	iov[1].iov_len = (size_t)snprintf(body, sizeof body,
	    "{\"error\": {\"code\": \"%s\", \"message\": \"%s\"}}\n", code,
	    message);
	for (i = 0; i < nitems(reasons); i++) {
		if (reasons[i].status == status)
			reason = reasons[i].reason;
	}
	http_date(date, sizeof date);
	iov[0].iov_base = head;
	iov[0].iov_len = (size_t)snprintf(head, sizeof head,
	    "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "Date: %s\r\n"
	    "%s"
	    "Connection: close\r\n\r\n", status, reason, iov[1].iov_len, date,
	    status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = iov;
	msg.msg_iovlen = 2;
	n = sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)n;
}

/*
 * Bytes arrived on a connection: count them until its answer.  A connection
 * that sends more than any request may hold (evhttp would read and drop
 * an oversized body to its declared end before answering) is closed with a
 * 413; past the budget of every connection's bytes in flight, the one that
 * adds more is closed with a 503 (at once, but outside evhttp's read).
 * Headers and bodies are read before any handler, or the token check, sees
 * them: without a budget enough connections could buffer agentd out of
 * memory.
 */
static void
conn_input(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct conn	*c = arg;

	if (info->n_added == 0 || c->releasing)
		return;
	if (c->state == CONN_DRAIN) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		return;
	}
	c->pending += info->n_added;
	conn_inflight += info->n_added;
	if (conn_inflight > conn_inflight_high)
		conn_inflight_high = conn_inflight;
	if (c->busy) {
		/*
		 * evhttp reads on while it writes an answer, only to see a
		 * close, and keeps what comes: a client that never reads its
		 * answers could pile up pipelined requests without end (each
		 * answer let one more read in).  Past a request's worth, the
		 * connection goes.
		 */
		if (evbuffer_get_length(buf) > conn_request_max && !c->shed) {
			c->shed = 413;
			TAILQ_INSERT_TAIL(&conn_shed, c, entry);
			event_active(conn_shed_ev, EV_TIMEOUT, 0);
		}
		return;
	}
	if (!c->shed) {
		if (c->pending > conn_request_max)
			c->shed = 413;
		else if (conn_inflight > conn_inflight_max)
			c->shed = 503;
		if (c->shed) {
			TAILQ_INSERT_TAIL(&conn_shed, c, entry);
			event_active(conn_shed_ev, EV_TIMEOUT, 0);
		}
	}
	conn_gate(c, buf, info->orig_size);
}

/* Close the connections that went past the budget. */
static void
conn_shed_cb(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c;
	int			 status;

	while ((c = TAILQ_FIRST(&conn_shed)) != NULL) {
		TAILQ_REMOVE(&conn_shed, c, entry);
		status = c->shed;
		c->shed = 0;
		/* Whole after all, a handler has it; unless it piles up. */
		if (c->busy && evbuffer_get_length(bufferevent_get_input(
		    evhttp_connection_get_bufferevent(c->evcon))) <=
		    conn_request_max)
			continue;
		if (c->state == CONN_DRAIN) {
			evhttp_connection_free(c->evcon);	/* answered */
			continue;
		}
		if (status == 413) {
			conn_send_error(c, 413, "body_too_large", "the request "
			    "is larger than --max-body allows");
			evhttp_connection_free(c->evcon);
			continue;
		}
		if (conn_shed_count++ % 1000 == 0)
			log_warn("%s: %llu bytes of requests in flight (at most "
			    "%llu): closing fd %d (%llu so far)", __func__,
			    (unsigned long long)conn_inflight,
			    (unsigned long long)conn_inflight_max, c->fd,
			    (unsigned long long)conn_shed_count);
		conn_send_error(c, 503, "too_busy", "too many request bytes in "
		    "flight; try again");
		evhttp_connection_free(c->evcon);	/* conn_closed runs */
	}
}

/*
 * A connection's bytes are answered, dropped or gone.  When what was in
 * flight falls from much to little, glibc keeps the freed heap (48 MiB of
 * 60 connections' bodies stayed after they closed): trim it a moment
 * later, once for a burst of closes.  musl gives it back by itself.
 */
static void
conn_uncount(struct conn *c)
{
	struct timeval	tv = { 0, CONN_TRIM_MS * 1000 };

	conn_inflight -= c->pending;
	c->pending = 0;
	if (conn_inflight_high >= CONN_TRIM_BYTES &&
	    conn_inflight < CONN_TRIM_BYTES / 8 && conn_trim_ev != NULL &&
	    !evtimer_pending(conn_trim_ev, NULL))
		evtimer_add(conn_trim_ev, &tv);
}

/* Give freed heap back to the kernel (glibc). */
static void
conn_trim_cb(evutil_socket_t fd, short events, void *arg)
{
	conn_inflight_high = conn_inflight;
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* Start (or restart) the connection's deadline. */
static void
conn_arm(struct conn *c, int64_t ms)
{
	struct timeval	tv;

	evtimer_add(c->deadline, timeval_ms(&tv, ms));
}

/* No whole request arrived in time: close the connection. */
static void
conn_deadline(evutil_socket_t fd, short events, void *arg)
{
	struct conn	*c = arg;

	log_debug("%s: fd %d: no request within the deadline; closing",
	    __func__, c->fd);
	evhttp_connection_free(c->evcon);	/* conn_closed runs */
}

/* The set-up connection of an evhttp_connection, or NULL. */
static struct conn *
conn_of(struct evhttp_connection *evcon)
{
	struct conn	*c;
	int			 fd;

	fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
	if (fd < 0 || (size_t)fd >= conn_by_fd_len)
		return (NULL);
	c = conn_by_fd[fd];
	return (c != NULL && c->evcon == evcon ? c : NULL);
}

/* evhttp frees a connection: tell whoever else asked, uncount it. */
static void
conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct conn	*c = arg;

	if (c->closecb != NULL)
		c->closecb(evcon, c->closecb_arg);
	c->pool->nconns--;
	agentd_stats.connections_open--;
	conn_uncount(c);
	if (c->shed)
		TAILQ_REMOVE(&conn_shed, c, entry);
	if (c->unproven)
		TAILQ_REMOVE(&c->pool->unproven, c, uentry);
	conn_peer_drop(c);
	if (c->held != NULL)
		evbuffer_free(c->held);
	evbuffer_remove_cb_entry(bufferevent_get_input(
	    evhttp_connection_get_bufferevent(evcon)), c->incb);
	outq_unwatch(evhttp_connection_get_bufferevent(evcon), c->outcb);
	if (c->fd >= 0 && (size_t)c->fd < conn_by_fd_len &&
	    conn_by_fd[c->fd] == c)
		conn_by_fd[c->fd] = NULL;
	event_free(c->deadline);
	free(c);
}

/*
 * Every evhttp_connection_set_closecb() of agentd but http.c's own comes
 * here (-Wl,--wrap): on a connection of ours the callback is kept and
 * called by conn_closed(); elsewhere it is set as usual.
 */
void
__wrap_evhttp_connection_set_closecb(struct evhttp_connection *evcon,
    void (*cb)(struct evhttp_connection *, void *), void *arg)
{
	struct conn	*c;

	if ((c = conn_of(evcon)) == NULL) {
		__real_evhttp_connection_set_closecb(evcon, cb, arg);
		return;
	}
	c->closecb = cb;
	c->closecb_arg = arg;
}

/* An answer went out: the next request has the idle time plus its own. */
static void
conn_request_done(struct evhttp_request *req, void *arg)
{
	struct conn	*c = arg;

	struct evbuffer	*in;

	c->busy = 0;
	conn_uncount(c);
	/* What came pipelined is still in flight: it counts on. */
	in = bufferevent_get_input(evhttp_connection_get_bufferevent(c->evcon));
	c->pending = evbuffer_get_length(in) +
	    (c->held != NULL ? evbuffer_get_length(c->held) : 0);
	conn_inflight += c->pending;
	conn_arm(c, conn_timeout(c, cfg->idle_timeout_ms +
	    cfg->header_timeout_ms));
	if (c->state == CONN_DRAIN)
		return;
	/*
	 * The next request's head goes through the gate too: what came
	 * pipelined is taken back before evhttp looks at it (it does right
	 * after this callback).
	 */
	c->state = CONN_HEAD;
	c->scanned = c->searched = 0;
	c->nlines = 0;
	if (evbuffer_get_length(in) > 0)
		conn_gate(c, in, 0);
}

/*
 * Move what is in in to the held bytes.  Small reads are copied into the
 * free room of held's last chain: moving them would keep a chain of at
 * least 1 KiB per read, and a head sent a byte at a time would cost a
 * kilobyte a byte where the budget counts one.
 */
static void
conn_hold(struct conn *c, struct evbuffer *in)
{
	size_t		 n = evbuffer_get_length(in);
	unsigned char	*p;

	if (n >= CONN_HOLD_COPY_MAX) {
		evbuffer_add_buffer(c->held, in);
		return;
	}
	if (n == 0)
		return;
	if ((p = evbuffer_pullup(in, n)) == NULL ||
	    evbuffer_add(c->held, p, n) != 0)
		fatal("%s: out of memory", __func__);
	evbuffer_drain(in, n);
}

/*
 * The gate.  evhttp parses a head as it arrives and keeps every header line
 * it reads (~110 bytes of heap each, whatever the line's size), answers
 * 100 Continue before anyone saw the request, and its own errors are HTML.
 * So a request's head is held back here until it is whole: it is checked
 * (syntax, header count, Host, Origin, the token if it has a body, the body's
 * size, Expect) and refused with a JSON answer, or handed to evhttp.  A
 * chunked body passes through the gate too, a chunk-size line at a time
 * (extensions are dropped; evhttp does not parse them).  Runs in the input
 * buffer's callback, before evhttp's read callback sees the bytes; keep
 * bytes at the front of in were handed on already.
 */
static void
conn_gate(struct conn *c, struct evbuffer *in, size_t keep)
{
	struct evbuffer	*front;
	size_t		 len;

	if (c->state == CONN_BODY)
		return;
	if (c->held == NULL && (c->held = evbuffer_new()) == NULL)
		fatal("%s: out of memory", __func__);
	if (keep == 0)
		conn_hold(c, in);
	else {
		/* What was handed on before and evhttp has not read stays. */
		if ((front = evbuffer_new()) == NULL)
			fatal("%s: out of memory", __func__);
		evbuffer_remove_buffer(in, front, keep);
		conn_hold(c, in);
		c->releasing = 1;
		evbuffer_prepend_buffer(in, front);
		c->releasing = 0;
		evbuffer_free(front);
	}
	while ((len = evbuffer_get_length(c->held)) > 0) {
		switch (c->state) {
		case CONN_BODY:
			conn_release(c, in, len);
			return;
		case CONN_DRAIN:
			evbuffer_drain(c->held, len);
			return;
		case CONN_HEAD:
			if (conn_head_step(c, in) == 0)
				return;
			break;
		default:
			if (conn_chunk_step(c, in) == 0)
				return;
			break;
		}
	}
}

/*
 * Hand len bytes held to evhttp.  A socket bufferevent's input is frozen
 * at its end but while it reads: when the gate runs after an answer
 * (conn_request_done), it is thawed for the move.
 */
static void
conn_release(struct conn *c, struct evbuffer *in, size_t len)
{
	c->releasing = 1;
	if (evbuffer_remove_buffer(c->held, in, len) == -1) {
		evbuffer_unfreeze(in, 0);
		evbuffer_remove_buffer(c->held, in, len);
		evbuffer_freeze(in, 0);
	}
	c->releasing = 0;
}

/*
 * Refuse a request: answer it, stop writing, and drop what the client
 * still sends until it closes or CONN_LINGER_MS pass (a close with unread
 * bytes would reset the connection, and the answer with it).
 */
static void
conn_refuse(struct conn *c, const struct conn_refusal *r)
{
	conn_refused++;
	log_debug("%s: fd %d: %d %s", __func__, c->fd, r->status, r->code);
	conn_send_error(c, r->status, r->code, r->message);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_WR);
	c->state = CONN_DRAIN;
	evbuffer_drain(c->held, evbuffer_get_length(c->held));
	conn_uncount(c);
	conn_arm(c, CONN_LINGER_MS);
}

/* Fill a refusal. */
static int
conn_refusal(struct conn_refusal *r, int status, const char *code,
    const char *fmt, ...)
{
	va_list	ap;

	r->status = status;
	snprintf(r->code, sizeof r->code, "%s", code);
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof r->message, fmt, ap);
	va_end(ap);
	return (-1);
}

/*
 * One more line of a head: count it; at the empty line that ends it,
 * admit or refuse the request.  Returns 0 when more bytes are needed.
 */
static int
conn_head_step(struct conn *c, struct evbuffer *in)
{
	struct conn_refusal	 r;
	struct evbuffer_ptr	 p;
	size_t			 len = evbuffer_get_length(c->held);
	char			 cr = '\0', first;

	/*
	 * A request starts with a method (a token) or an empty line: anything
	 * else (a TLS handshake of an https:// client) is refused at once,
	 * not left to wait for a line end until the header timeout.
	 */
	if (c->scanned == 0 && len > 0 &&
	    evbuffer_copyout(c->held, &first, 1) == 1 && first != '\r' &&
	    first != '\n' && !conn_tchar((unsigned char)first)) {
		conn_refusal(&r, 400, "invalid_request", "not an HTTP request "
		    "(TLS? agentd speaks plain HTTP)");
		conn_refuse(c, &r);
		return (1);
	}

	/* Search each byte once, whatever the size of the reads. */
	if (c->searched < c->scanned)
		c->searched = c->scanned;
	if (evbuffer_ptr_set(c->held, &p, c->searched, EVBUFFER_PTR_SET) == 0)
		p = evbuffer_search(c->held, "\n", 1, &p);
	else
		p.pos = -1;
	if (p.pos == -1) {
		c->searched = len;
		if (len <= HTTP_HEADERS_MAX)
			return (0);
		conn_refusal(&r, 431, "headers_too_large", "the request line "
		    "and headers are over %d bytes", HTTP_HEADERS_MAX);
		conn_refuse(c, &r);
		return (1);
	}
	if ((size_t)p.pos == c->scanned + 1) {
		evbuffer_ptr_set(c->held, &p, c->scanned, EVBUFFER_PTR_SET);
		evbuffer_copyout_from(c->held, &p, &cr, 1);
		evbuffer_ptr_set(c->held, &p, c->scanned + 1, EVBUFFER_PTR_SET);
	}
	if ((size_t)p.pos == c->scanned || cr == '\r') {
		if (c->nlines == 0) {	/* an empty line before a request */
			evbuffer_drain(c->held, (size_t)p.pos + 1);
			c->scanned = c->searched = 0;
		} else
			conn_admit(c, in, (size_t)p.pos + 1);
		return (1);
	}
	c->scanned = (size_t)p.pos + 1;
	if (++c->nlines > cfg->max_headers + 1)
		conn_refusal(&r, 431, "headers_too_large", "more than %llu "
		    "header lines (--max-headers)",
		    (unsigned long long)cfg->max_headers);
	else if (c->scanned > HTTP_HEADERS_MAX)
		conn_refusal(&r, 431, "headers_too_large", "the request line "
		    "and headers are over %d bytes", HTTP_HEADERS_MAX);
	else
		return (1);
	conn_refuse(c, &r);
	return (1);
}

/* A whole head of len bytes is held: check it, then hand it to evhttp. */
static void
conn_admit(struct conn *c, struct evbuffer *in, size_t len)
{
	struct conn_head	 h;
	struct conn_refusal	 r;
	const char		*p;

	if ((p = (const char *)evbuffer_pullup(c->held, len)) == NULL)
		fatal("%s: out of memory", __func__);
	if (conn_parse(p, len, &h, &r) != 0 || conn_policy(c, &h, &r) != 0) {
		conn_refuse(c, &r);
		return;
	}
	if (h.version_at != 0)
		((char *)(uintptr_t)p)[h.version_at] = '1';	/* held: ours */
	/* What evhttp will allocate for the lines counts, not their bytes. */
	c->pending += c->nlines * CONN_HEADER_COST;
	conn_inflight += c->nlines * CONN_HEADER_COST;
	c->state = h.chunked ? CONN_CHUNK_SIZE : CONN_BODY;
	c->scanned = c->searched = 0;
	c->nlines = 0;
	c->chunked_total = 0;
	c->head_bytes = len;
	conn_release(c, in, len);
}

/* Whether c is a character of an HTTP token (a method, a header name). */
static int
conn_tchar(int ch)
{
	return ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || (ch != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", ch) != NULL));
}

/* Whether a header's name is name. */
static int
conn_is(const char *p, size_t len, const char *name)
{
	return (len == strlen(name) && strncasecmp(p, name, len) == 0);
}

/* Take a request's head apart; -1 with a refusal when it is malformed. */
static int
conn_parse(const char *p, size_t len, struct conn_head *h,
    struct conn_refusal *r)
{
	const char	*end = p + len, *eol, *le, *sp1, *sp2, *colon, *v, *ve;
	const char	*q;
	char		 uri_stack[CONN_URI_STACK], *uri = uri_stack;
	struct evhttp_uri *u;
	int64_t		 n;

	memset(h, 0, sizeof *h);
	h->content_length = -1;

	/* METHOD SP request-target SP HTTP/1.x */
	eol = memchr(p, '\n', end - p);
	le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
	sp1 = memchr(p, ' ', le - p);
	sp2 = memrchr(p, ' ', le - p);
	if (sp1 == NULL || sp1 == p || sp2 == sp1 || sp2 == sp1 + 1)
		return (conn_refusal(r, 400, "invalid_request",
		    "malformed request line"));
	for (q = p; q < sp1; q++) {
		if (!conn_tchar((unsigned char)*q))
			return (conn_refusal(r, 400, "invalid_request",
			    "malformed method"));
	}
	/*
	 * HTTP/1.x with x > 1 is served as HTTP/1.1, the highest minor
	 * version known (RFC 9110 2.5): conn_admit() rewrites the digit, and
	 * evhttp answers in 1.1.  Another major version is 505.
	 */
	if (le - sp2 - 1 == 8 && strncmp(sp2 + 1, "HTTP/1.", 7) == 0 &&
	    sp2[8] >= '0' && sp2[8] <= '9') {
		h->minor = sp2[8] - '0';
		h->version_at = sp2[8] > '1' ? (size_t)(sp2 + 8 - p) : 0;
		if (h->minor > 1)
			h->minor = 1;
	} else if (le - sp2 - 1 == 8 && strncmp(sp2 + 1, "HTTP/", 5) == 0 &&
	    sp2[6] >= '0' && sp2[6] <= '9' && sp2[7] == '.' &&
	    sp2[8] >= '0' && sp2[8] <= '9')
		return (conn_refusal(r, 505, "http_version_not_supported",
		    "HTTP/%c.%c: only HTTP/1.x is served", sp2[6], sp2[8]));
	else
		return (conn_refusal(r, 400, "invalid_request",
		    "malformed request line"));
	for (q = sp1 + 1; q < sp2; q++) {
		if ((unsigned char)*q <= ' ' || *q == 0x7f)
			return (conn_refusal(r, 400, "invalid_request",
			    "malformed request target"));
	}
	/* evhttp answers a target it cannot parse with HTML. */
	if (sp2 - sp1 > CONN_URI_STACK)
		uri = xmalloc(sp2 - sp1);
	memcpy(uri, sp1 + 1, sp2 - sp1 - 1);
	uri[sp2 - sp1 - 1] = '\0';
	u = strlen(uri) == (size_t)(sp2 - sp1 - 1) ?
	    evhttp_uri_parse_with_flags(uri, EVHTTP_URI_NONCONFORMANT) : NULL;
	if (uri != uri_stack)
		free(uri);
	if (u == NULL)
		return (conn_refusal(r, 400, "invalid_request",
		    "malformed request target"));
	evhttp_uri_free(u);

	for (p = eol + 1; p < end; p = eol + 1) {
		eol = memchr(p, '\n', end - p);
		le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
		if (le == p)
			break;		/* the empty line */
		if (*p == ' ' || *p == '\t')
			return (conn_refusal(r, 400, "invalid_request",
			    "a folded header line"));
		/* RFC 9112 2.2, 5: evhttp would cut a value at a NUL. */
		if (memchr(p, '\0', le - p) != NULL ||
		    memchr(p, '\r', le - p) != NULL)
			return (conn_refusal(r, 400, "invalid_request",
			    "a NUL or bare CR in a header line"));
		if ((colon = memchr(p, ':', le - p)) == NULL || colon == p)
			return (conn_refusal(r, 400, "invalid_request",
			    "a header line without a name"));
		for (q = p; q < colon; q++) {
			if (!conn_tchar((unsigned char)*q))
				return (conn_refusal(r, 400, "invalid_request",
				    "a malformed header name"));
		}
		for (v = colon + 1; v < le && (*v == ' ' || *v == '\t'); v++)
			;
		/* evhttp skips only spaces: a tab there would frame apart. */
		if (memchr(colon + 1, '\t', v - (colon + 1)) != NULL &&
		    (conn_is(p, colon - p, "Content-Length") ||
		    conn_is(p, colon - p, "Transfer-Encoding")))
			return (conn_refusal(r, 400, "invalid_request",
			    "a tab before a framing header's value"));
		for (ve = le; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;
		if (conn_is(p, colon - p, "Host")) {
			h->nhost++;
			h->host = v;
			h->host_len = ve - v;
		} else if (conn_is(p, colon - p, "Content-Length")) {
			for (n = 0, q = v; q < ve && *q >= '0' && *q <= '9' &&
			    n < (INT64_MAX - 9) / 10; q++)
				n = n * 10 + (*q - '0');
			if (q == v || q != ve || (h->content_length != -1 &&
			    h->content_length != n))
				return (conn_refusal(r, 400, "invalid_request",
				    "a malformed Content-Length"));
			h->content_length = n;
		} else if (conn_is(p, colon - p, "Transfer-Encoding")) {
			h->nte++;
			h->chunked = conn_is(v, ve - v, "chunked");
		} else if (conn_is(p, colon - p, "Expect"))
			h->expect = conn_is(v, ve - v, "100-continue") ? 1 : 2;
		else if (conn_is(p, colon - p, "Origin")) {
			h->origin = v;
			h->origin_len = ve - v;
		} else if (conn_is(p, colon - p, "Sec-Fetch-Site")) {
			h->fetch_site = v;
			h->fetch_site_len = ve - v;
		} else if (conn_is(p, colon - p, "Authorization") &&
		    h->auth == NULL) {
			h->auth = v;
			h->auth_len = ve - v;
		} else if (conn_is(p, colon - p, "X-Access-Token") &&
		    h->xtoken == NULL) {
			h->xtoken = v;
			h->xtoken_len = ve - v;
		}
	}
	if (h->nte > 1 || (h->nte == 1 && !h->chunked))
		return (conn_refusal(r, 400, "invalid_request", "only "
		    "Transfer-Encoding: chunked"));
	if (h->nte == 1 && h->content_length != -1)
		return (conn_refusal(r, 400, "invalid_request",
		    "both Transfer-Encoding and Content-Length"));
	return (0);
}

/*
 * Whether a Host names this machine by a loopback name or an address: a
 * browser tricked by DNS rebinding sends the attacker's name.
 */
static int
conn_host_local(const char *v, size_t len)
{
	char		 name[256];
	struct in_addr	 a;
	const char	*colon;

	if (len > 0 && v[0] == '[')
		return (1);	/* an IPv6 literal */
	if ((colon = memrchr(v, ':', len)) != NULL)
		len = colon - v;
	if (len == 0 || len >= sizeof name)
		return (0);
	memcpy(name, v, len);
	name[len] = '\0';
	if (name[len - 1] == '.')
		name[--len] = '\0';
	if (strcasecmp(name, "localhost") == 0 || (len > 10 &&
	    strcasecmp(name + len - 10, ".localhost") == 0))
		return (1);
	return (inet_pton(AF_INET, name, &a) == 1);
}

/* Whether an Origin is the request's own Host, over http or https. */
static int
conn_origin_same(const struct conn_head *h)
{
	const char	*o = h->origin;
	size_t		 len = h->origin_len, skip;

	if (h->host == NULL)
		return (0);
	if (len > 7 && strncasecmp(o, "http://", 7) == 0)
		skip = 7;
	else if (len > 8 && strncasecmp(o, "https://", 8) == 0)
		skip = 8;
	else
		return (0);
	return (len - skip == h->host_len &&
	    strncasecmp(o + skip, h->host, h->host_len) == 0);
}

/*
 * What agentd wants of a request before reading its body: one Host (on
 * HTTP/1.1), without a token configured a Host that is a loopback name
 * or an address (TCP, vsock), from vsock without a token the host or
 * this machine (CID 2, 1), no cross-site
 * browser origin, the token before a body, a body within --max-body, and
 * no Expect but 100-continue.  Returns 0, or -1 with a refusal.
 */
static int
conn_policy(struct conn *c, const struct conn_head *h,
    struct conn_refusal *r)
{
	int	authorized;

	if (h->nhost > 1 || (h->minor == 1 && h->nhost == 0))
		return (conn_refusal(r, 400, "invalid_request", "HTTP/1.1 "
		    "needs one Host header; this request has %d", h->nhost));
	/*
	 * Without a token a page rebound to 127.0.0.1 could read answers,
	 * and so could one rebound to the host's own 127.0.0.1 that qemu or
	 * Docker forward to any of our addresses: every TCP listener.  With
	 * a token it can do nothing, and a sidecar proxy that connects over
	 * loopback may pass the platform's own Host on.
	 */
	if (c->pool->transport == CONN_VSOCK && cfg->token == NULL &&
	    !c->vsock_trusted)
		return (conn_refusal(r, 403, "forbidden_peer", "without a "
		    "token, vsock peers other than the host (CID 2) and this "
		    "machine (CID 1) are refused"));
	/*
	 * On vsock too: a host-side proxy (socat, Firecracker's unix socket)
	 * may carry a browser's request as well as the platform's.
	 */
	if (!c->pool->unix_socket && cfg->token == NULL && h->host != NULL &&
	    !conn_host_local(h->host, h->host_len))
		return (conn_refusal(r, 403, "forbidden_host", "without a "
		    "token, a request must name this machine in its Host (a "
		    "loopback name or an address)"));
	if ((h->origin != NULL && !conn_origin_same(h)) ||
	    (h->fetch_site != NULL &&
	    !conn_is(h->fetch_site, h->fetch_site_len, "same-origin") &&
	    !conn_is(h->fetch_site, h->fetch_site_len, "none")))
		return (conn_refusal(r, 403, "forbidden_origin", "requests from "
		    "another site's pages are refused"));
	authorized = c->pool->unix_socket || http_token_ok(h->auth,
	    h->auth_len, h->xtoken, h->xtoken_len);
	if (!authorized && !c->pool->own_auth &&
	    (h->chunked || h->content_length > 0))
		return (conn_refusal(r, 401, "unauthorized", "missing or wrong "
		    "token (a body is read only after it)"));
	if (h->content_length > 0 &&
	    (uint64_t)h->content_length > cfg->max_body)
		return (conn_refusal(r, 413, "body_too_large", "the body has "
		    "%lld bytes; --max-body is %llu",
		    (long long)h->content_length,
		    (unsigned long long)cfg->max_body));
	if (h->expect == 2)
		return (conn_refusal(r, 417, "expectation_failed", "only "
		    "Expect: 100-continue"));
	if (authorized)
		conn_prove(c);
	return (0);
}

/*
 * A chunked body, a step at a time: size lines are held until whole and
 * handed on without extensions, data and trailers pass.  Returns 0 when
 * more bytes are needed.
 */
static int
conn_chunk_step(struct conn *c, struct evbuffer *in)
{
	struct conn_refusal	 r;
	struct evbuffer_ptr	 p;
	char			 line[CONN_CHUNK_LINE_MAX + 3], *end;
	size_t			 eol = 0, len, n;
	uint64_t		 size;

	len = evbuffer_get_length(c->held);
	if (c->state == CONN_CHUNK_DATA) {
		n = len < c->chunk_left ? len : (size_t)c->chunk_left;
		conn_release(c, in, n);
		if ((c->chunk_left -= n) == 0)
			c->state = CONN_CHUNK_END;
		return (1);
	}
	p = evbuffer_search_eol(c->held, NULL, &eol, EVBUFFER_EOL_CRLF);
	if (p.pos == -1) {
		if (c->state == CONN_CHUNK_END && len > 1)
			goto bad;
		if ((c->state == CONN_CHUNK_SIZE && len > CONN_CHUNK_LINE_MAX) ||
		    (c->state == CONN_TRAILER && len > HTTP_HEADERS_MAX))
			goto bad;
		return (0);
	}
	switch (c->state) {
	case CONN_CHUNK_END:
		if (p.pos != 0)
			goto bad;
		conn_release(c, in, eol);
		c->state = CONN_CHUNK_SIZE;
		return (1);
	case CONN_TRAILER:
		if ((c->head_bytes += (size_t)p.pos + eol) > HTTP_HEADERS_MAX) {
			conn_refusal(&r, 431, "headers_too_large", "the request "
			    "line, headers and trailer are over %d bytes",
			    HTTP_HEADERS_MAX);
			conn_refuse(c, &r);
			return (1);
		}
		if (p.pos != 0 && (++c->nlines > cfg->max_headers ||
		    !conn_trailer_ok((const char *)evbuffer_pullup(c->held,
		    p.pos), (size_t)p.pos)))
			goto bad;
		conn_release(c, in, (size_t)p.pos + eol);
		if (p.pos == 0) {
			c->state = CONN_BODY;	/* the request is whole */
			c->nlines = 0;
		}
		return (1);
	default:
		break;
	}
	if ((size_t)p.pos > CONN_CHUNK_LINE_MAX)
		goto bad;
	evbuffer_remove(c->held, line, (size_t)p.pos + eol);
	line[p.pos] = '\0';
	errno = 0;
	size = strtoull(line, &end, 16);
	if (end == line || errno != 0 || line[0] == '-' || line[0] == '+' ||
	    line[strspn(line, "0123456789abcdefABCDEF")] != *end)
		goto bad;
	end += strspn(end, " \t");
	if (*end != '\0' && *end != ';')
		goto bad;
	if (size > cfg->max_body || (c->chunked_total += size) > cfg->max_body) {
		conn_refusal(&r, 413, "body_too_large", "the body is larger "
		    "than --max-body (%llu bytes)",
		    (unsigned long long)cfg->max_body);
		conn_refuse(c, &r);
		return (1);
	}
	n = (size_t)snprintf(line, sizeof line, "%llx\r\n",
	    (unsigned long long)size);
	evbuffer_prepend(c->held, line, n);
	conn_release(c, in, n);
	c->chunk_left = size;
	c->state = size == 0 ? CONN_TRAILER : CONN_CHUNK_DATA;
	return (1);
bad:
	conn_refusal(&r, 400, "invalid_request", "malformed chunked body");
	conn_refuse(c, &r);
	return (1);
}

/*
 * Whether a trailer line is a header line evhttp takes: a name, a colon, no
 * NUL or bare CR (else evhttp answers a text/html 413 of its own).
 */
static int
conn_trailer_ok(const char *line, size_t len)
{
	const char	*colon;
	size_t		 i;

	if (line == NULL || memchr(line, '\0', len) != NULL ||
	    memchr(line, '\r', len) != NULL ||
	    (colon = memchr(line, ':', len)) == NULL || colon == line)
		return (0);
	for (i = 0; line + i < colon; i++) {
		if (!conn_tchar((unsigned char)line[i]))
			return (0);
	}
	return (1);
}

/* Counters of the gate and admission, for /metrics. */
void
conn_metrics(struct proto_buf *b)
{
	proto_buf_printf(b,
	    "# TYPE agentd_http_refused_total counter\n"
	    "agentd_http_refused_total %llu\n"
	    "# TYPE agentd_http_evicted_total counter\n"
	    "agentd_http_evicted_total %llu\n"
	    "# TYPE agentd_http_shed_total counter\n"
	    "agentd_http_shed_total %llu\n"
	    "# TYPE agentd_http_inflight_bytes gauge\n"
	    "agentd_http_inflight_bytes %llu\n",
	    (unsigned long long)conn_refused,
	    (unsigned long long)conn_evicted,
	    (unsigned long long)conn_shed_count,
	    (unsigned long long)conn_inflight);
}

/*
 * Turn TCP keepalive on (every secs seconds, count probes) or off (secs 0)
 * on every TCP connection set up now (restore.c, after a restore).
 */
size_t
conn_probe(int secs, int count)
{
	struct conn	*c;
	size_t		 i, n = 0;
	int		 on = secs > 0;

	for (i = 0; i < conn_by_fd_len; i++) {
		if ((c = conn_by_fd[i]) == NULL ||
		    c->pool->transport != CONN_TCP)
			continue;
		if (on && (setsockopt(c->fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs,
		    sizeof secs) == -1 || setsockopt(c->fd, IPPROTO_TCP,
		    TCP_KEEPINTVL, &secs, sizeof secs) == -1 ||
		    setsockopt(c->fd, IPPROTO_TCP, TCP_KEEPCNT, &count,
		    sizeof count) == -1)) {
			log_warn("%s: fd %d: %s", __func__, c->fd,
			    strerror(errno));
			continue;
		}
		if (setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &on,
		    sizeof on) == -1) {
			log_warn("%s: fd %d: SO_KEEPALIVE: %s", __func__, c->fd,
			    strerror(errno));
			continue;
		}
		n++;
	}
	return (n);
}

/*
 * A connection's peer for logs and /debug/stat: ADDR:PORT on TCP ([V6]:PORT),
 * vsock:CID:PORT, "uid N" on the unix socket, "?" when it cannot be had.
 */
static char *
conn_peer_name(struct conn *c, char *buf, size_t len)
{
	struct sockaddr_storage	 ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)&ss;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ss;
	struct sockaddr_vm	*svm = (struct sockaddr_vm *)&ss;
	struct ucred		 cred;
	socklen_t		 sslen = sizeof ss, clen = sizeof cred;
	char			 a[INET6_ADDRSTRLEN];

	snprintf(buf, len, "?");
	if (c->fd < 0)
		return (buf);
	if (c->pool->unix_socket) {
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred,
		    &clen) == 0)
			snprintf(buf, len, "uid %u", (unsigned)cred.uid);
		return (buf);
	}
	memset(&ss, 0, sizeof ss);
	if (getpeername(c->fd, (struct sockaddr *)&ss, &sslen) != 0)
		return (buf);
	if (ss.ss_family == AF_VSOCK)
		vsock_name(buf, len, svm->svm_cid, svm->svm_port);
	else if (ss.ss_family == AF_INET && inet_ntop(AF_INET,
	    &sin->sin_addr, a, sizeof a) != NULL)
		snprintf(buf, len, "%s:%u", a, ntohs(sin->sin_port));
	else if (ss.ss_family == AF_INET6 && inet_ntop(AF_INET6,
	    &sin6->sin6_addr, a, sizeof a) != NULL)
		snprintf(buf, len, "[%s]:%u", a, ntohs(sin6->sin6_port));
	return (buf);
}

/*
 * Log a vsock connection with its peer (vsock:CID:PORT): few come (the
 * platform's), but a peer that floods does not flood the console, which as
 * PID 1 is a serial line: CONN_VSOCK_LOG_MAX lines per CONN_VSOCK_LOG_MS,
 * then how many went unlogged.
 */
static void
conn_log_vsock(struct conn *c)
{
	static int64_t	 since_ms = INT64_MIN;
	static unsigned	 logged;
	static uint64_t	 quiet;
	char		 name[INET6_ADDRSTRLEN + 16];
	int64_t		 now = clock_mono_ms();

	if (since_ms == INT64_MIN || now - since_ms >= CONN_VSOCK_LOG_MS) {
		if (quiet > 0)
			log_info("%s: %llu vsock connections not logged in "
			    "%d ms", __func__, (unsigned long long)quiet,
			    CONN_VSOCK_LOG_MS);
		since_ms = now;
		logged = 0;
		quiet = 0;
	}
	if (logged++ >= CONN_VSOCK_LOG_MAX) {
		quiet++;
		return;
	}
	log_info("%s: fd %d: %s%s", __func__, c->fd,
	    conn_peer_name(c, name, sizeof name),
	    c->vsock_trusted || cfg->token != NULL ? "" :
	    " (neither the host nor local: refused without a token)");
}

/* The connections set up now, for /debug/stat. */
void
conn_stat(struct proto_buf *b)
{
	struct conn	*c;
	char		 name[INET6_ADDRSTRLEN + 16];
	size_t		 i, listed = 0, t, n;
	const char	*sep = "";

	proto_buf_printf(b, "\"connections\": [");
	for (i = 0; i < conn_by_fd_len && listed < CONN_STAT_MAX; i++) {
		if ((c = conn_by_fd[i]) == NULL)
			continue;
		proto_buf_printf(b, "%s{\"fd\": %d, \"transport\": \"%s\", "
		    "\"peer\": ", sep, c->fd,
		    conn_transport_name(c->pool->transport));
		conn_peer_name(c, name, sizeof name);
		proto_buf_json_string(b, name, strlen(name));
		proto_buf_printf(b, ", \"busy\": %s, \"unproven\": %s}",
		    c->busy ? "true" : "false", c->unproven ? "true" : "false");
		sep = ", ";
		listed++;
	}
	proto_buf_printf(b, "], \"connections_listed\": %zu, "
	    "\"connections_by_transport\": {", listed);
	for (t = 0; t < CONN_TRANSPORTS; t++) {
		for (n = 0, i = 0; i < npools; i++) {
			if (pools[i]->transport == t)
				n += pools[i]->nconns;
		}
		proto_buf_printf(b, "%s\"%s\": %zu", t > 0 ? ", " : "",
		    conn_transport_name(t), n);
	}
	proto_buf_printf(b, "}");
}
