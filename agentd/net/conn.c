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
 * Admission.  With a token configured, a TCP connection is unproven until
 * a request on it carries the token.  One connection too many closes the
 * oldest unproven one instead of being refused (conn_evict), and one peer
 * holds at most --max-peer-unproven of them (conn_peer_add): idle peers
 * cannot lock the platform out.
 *
 * The gate (conn_gate, in gate.c).  Each request's head is held back from
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
 * Pipelining.  While a whole request waits behind the one evhttp answers,
 * the socket is not read (conn_pause): a half-close the client sent after
 * it would be read first, and evhttp drops the connection, the request
 * with it.
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
#include "conn_int.h"
#include "httpcore.h"
#include "log.h"
#include "outq.h"
#include "proto.h"
#include "stats.h"
#include "util.h"
#include "vsock.h"

#define CONN_INFLIGHT_MIN	(64u << 20) /* bytes of requests in flight, all
					   connections together, at least */
#define CONN_PEER_BUCKETS	4096	/* hash buckets of peers */
#define CONN_EVICT_SCAN		64	/* unproven connections looked at for
					   one that gives way, oldest first */
#define CONN_TRIM_BYTES		(8u << 20) /* in flight once, trim after */
#define CONN_TRIM_MS		200	/* trim this long after the drop */
#define CONN_POOLS_MAX		8	/* evhttps: APIs times transports */
#define CONN_PAUSE_TICK_S	3600	/* a paused socket is read again after
					   this long at the latest */
#define CONN_VSOCK_LOG_MAX	64	/* vsock connections logged ... */
#define CONN_VSOCK_LOG_MS	10000	/* ... per this long */

LIST_HEAD(conn_peers, conn_peer);

static struct event_base	*conn_base;	/* the loop (conn_start's) */
static const struct config	*conn_cfg;
static struct conn_pool		*conn_pools[CONN_POOLS_MAX];	/* every evhttp's */
static size_t			 npools;
/* Connections accepted but not yet set up (conn_setup_cb's work). */
static struct conns	 conn_pending = TAILQ_HEAD_INITIALIZER(conn_pending);
static struct event	*conn_setup_ev;
/* Connections to close for the pending budget (conn_shed_cb's work). */
static struct conns	 conn_shed = TAILQ_HEAD_INITIALIZER(conn_shed);
static struct event	*conn_shed_ev;
static uint64_t		 conn_inflight_max;
static uint64_t		 conn_request_max; /* bytes, evhttp's largest */
static uint64_t		 conn_shed_count;
static uint64_t		 conn_evicted;	/* unproven, for a new connection */
static struct conn_peers conn_peers[CONN_PEER_BUCKETS];
static uint64_t		 conn_inflight_high; /* bytes, since the last trim */
static struct event	*conn_trim_ev;
static struct ev_token_bucket_cfg *conn_pause_cfg; /* no limit: a pause
					   empties the read bucket by hand */
static uint64_t		 conn_paused_total;
/* Set-up connections by fd, to find a request's connection. */
static struct conn	**conn_by_fd;
static size_t		 conn_by_fd_len;

/* The real setter, and the wrapper every other caller in agentd reaches. */
void	__real_evhttp_connection_set_closecb(struct evhttp_connection *,
	    void (*)(struct evhttp_connection *, void *), void *);
void	__wrap_evhttp_connection_set_closecb(struct evhttp_connection *,
	    void (*)(struct evhttp_connection *, void *), void *);

static void		 conn_setup_cb(evutil_socket_t, short, void *);
static void		 conn_setup(struct conn *);
static void		 conn_closed(struct evhttp_connection *, void *);
static void		 conn_deadline(evutil_socket_t, short, void *);
static struct conn	*conn_of(struct evhttp_connection *);
static void		 conn_request_done(struct evhttp_request *, void *);
static void		 conn_reject(struct conn *);
static void		 conn_input(struct evbuffer *,
			    const struct evbuffer_cb_info *, void *);
static void		 conn_shed_cb(evutil_socket_t, short, void *);
static int		 conn_evict(struct conn *);
static int		 conn_silent(struct conn *, struct conn *);
static int		 conn_is_loopback(int fd);
static int64_t		 conn_timeout(struct conn *, int64_t ms);
static void		 conn_peer_add(struct conn *);
static void		 conn_peer_drop(struct conn *);
static void		 conn_trim_cb(evutil_socket_t, short, void *);
static char		*conn_peer_name(struct conn *, char *, size_t);
static void		 conn_log_vsock(struct conn *);
static void		 conn_prove(struct conn *);
static void		 conn_uncount(struct conn *);

/* Budgets and events, on the loop base. */
void
conn_start(struct event_base *base, const struct config *c)
{
	const struct timeval	pause_tick = { CONN_PAUSE_TICK_S, 0 };

	conn_base = base;
	conn_cfg = c;
	conn_gate_init(c, conn_prove, conn_uncount);
	if ((conn_setup_ev = event_new(conn_base, -1, 0, conn_setup_cb,
	    NULL)) == NULL || (conn_shed_ev = event_new(conn_base, -1, 0,
	    conn_shed_cb, NULL)) == NULL || (conn_trim_ev = evtimer_new(
	    conn_base, conn_trim_cb, NULL)) == NULL ||
	    (conn_pause_cfg = ev_token_bucket_cfg_new(EV_RATE_LIMIT_MAX,
	    EV_RATE_LIMIT_MAX, EV_RATE_LIMIT_MAX, EV_RATE_LIMIT_MAX,
	    &pause_tick)) == NULL)
		fatal("%s: out of memory", __func__);
	/* Two requests of evhttp's largest always fit. */
	conn_request_max = 2 * conn_cfg->max_body + HTTP_BODY_SLACK +
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
	conn_pools[npools++] = p;
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
		free(conn_pools[i]);
		conn_pools[i] = NULL;
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
		if (conn_cfg->token != NULL) {
			TAILQ_INSERT_TAIL(&c->pool->unproven, c, uentry);
			c->unproven = 1;
			conn_peer_add(c);
		}
	}
	if (c->pool->nconns > conn_cfg->max_connections && conn_evict(c) != 0) {
		conn_reject(c);
		return;
	}
	conn_arm(c, conn_timeout(c, conn_cfg->header_timeout_ms));
}

/* A deadline of ms, or the shorter pre-auth one while c is unproven. */
static int64_t
conn_timeout(struct conn *c, int64_t ms)
{
	if (c->unproven && conn_cfg->preauth_timeout_ms < ms)
		return (conn_cfg->preauth_timeout_ms);
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
		    (unsigned long long)conn_cfg->max_connections, v->fd,
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
	if (++p->n <= conn_cfg->max_peer_unproven)
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
		    (unsigned long long)conn_cfg->max_connections, c->fd,
		    conn_peer_name(c, name, sizeof name),
		    (unsigned long long)c->pool->rejected);
	conn_send_error(c, 503, "too_many_connections",
	    "--max-connections reached");
	evhttp_connection_free(c->evcon);	/* conn_closed runs */
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
		/* Pipelined: read on once this one is answered. */
		conn_pause(c, 1);
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
	conn_spool_drop(c);
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

/* The body the gate spooled for req's request, taken. */
struct spool *
conn_spool_take(struct evhttp_request *req)
{
	struct conn	*c;
	struct spool	*s;

	if ((c = conn_of(evhttp_request_get_connection(req))) == NULL ||
	    c->state != CONN_BODY)
		return (NULL);
	s = c->spool;
	c->spool = NULL;
	return (s);
}

/* An answer went out: the next request has the idle time plus its own. */
static void
conn_request_done(struct evhttp_request *req, void *arg)
{
	struct conn	*c = arg;

	struct evbuffer	*in;

	c->busy = 0;
	conn_uncount(c);
	conn_spool_drop(c);		/* not taken by a handler */
	/* What came pipelined is still in flight: it counts on. */
	in = bufferevent_get_input(evhttp_connection_get_bufferevent(c->evcon));
	c->pending = evbuffer_get_length(in) +
	    (c->held != NULL ? evbuffer_get_length(c->held) : 0);
	conn_inflight += c->pending;
	conn_arm(c, conn_timeout(c, conn_cfg->idle_timeout_ms +
	    conn_cfg->header_timeout_ms));
	if (c->state == CONN_DRAIN) {
		conn_pause(c, 0);
		return;
	}
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
	/*
	 * A whole request came pipelined: evhttp reads it from its buffer in
	 * the next loop turn, and the socket is not read before it is
	 * answered.  A client that sent it and then shut its side (a
	 * half-close, RFC 9112 9.6) would otherwise be read to its end
	 * first, and evhttp drops a connection whose client ended, the
	 * request it did not parse yet with it.
	 */
	conn_pause(c, c->state == CONN_BODY &&
	    evbuffer_get_length(in) >= c->head_bytes + c->body_bytes);
}

/*
 * Stop (on) or resume reading c's socket.  evhttp enables reading itself
 * whenever it reads a request or writes an answer; a bufferevent whose
 * read bucket (rate limiting, unlimited but for this) is empty reads
 * nothing whatever is enabled, until the bucket is filled again: at
 * resume, or after CONN_PAUSE_TICK_S at the latest.
 */
void
conn_pause(struct conn *c, int on)
{
	struct bufferevent	*bev;

	if (on == c->paused)
		return;
	c->paused = on;
	bev = evhttp_connection_get_bufferevent(c->evcon);
	if (!on) {
		bufferevent_set_rate_limit(bev, NULL);
		return;
	}
	conn_paused_total++;
	if (bufferevent_set_rate_limit(bev, conn_pause_cfg) != 0 ||
	    bufferevent_decrement_read_limit(bev,
	    bufferevent_get_read_limit(bev)) != 0)
		fatal("%s: out of memory", __func__);
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
	    "agentd_http_inflight_bytes %llu\n"
	    "# TYPE agentd_http_pipelined_pauses_total counter\n"
	    "agentd_http_pipelined_pauses_total %llu\n",
	    (unsigned long long)conn_gate_refused(),
	    (unsigned long long)conn_evicted,
	    (unsigned long long)conn_shed_count,
	    (unsigned long long)conn_inflight,
	    (unsigned long long)conn_paused_total);
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
	    c->vsock_trusted || conn_cfg->token != NULL ? "" :
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
			if (conn_pools[i]->transport == t)
				n += conn_pools[i]->nconns;
		}
		proto_buf_printf(b, "%s\"%s\": %zu", t > 0 ? ", " : "",
		    conn_transport_name(t), n);
	}
	proto_buf_printf(b, "}");
}
