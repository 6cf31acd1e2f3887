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
 * Memory.  Headers (64 KiB at most) and bodies are read before any handler,
 * or the token check, sees them.  Every connection's bytes since its last
 * answer count: one that sends more than a request may hold is closed with
 * a 413, and past one budget for all (CONN_INFLIGHT_MIN, or two of the
 * largest requests) the connection adding bytes is closed with a 503.
 *
 * Timeouts.  A request must arrive whole within --header-timeout of the
 * connection's start; after an answer on a keep-alive connection the next
 * one has --idle-timeout plus --header-timeout; while a handler holds a
 * request (a long-poll) no deadline runs.  evhttp's own timeout
 * (--idle-timeout) cuts a connection that stays silent, or that stops
 * reading an answer.
 */
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "agentd.h"
#include "config.h"
#include "conn.h"
#include "http.h"
#include "log.h"
#include "util.h"

#define CONN_INFLIGHT_MIN	(64u << 20) /* bytes of requests in flight, all
					   connections together, at least */

/* The connections of one evhttp. */
struct conn_pool {
	int		 unix_socket;
	size_t		 nconns;	/* counted against --max-connections */
	uint64_t	 rejected;	/* closed at once: one too many */
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
	size_t			 pending;	/* bytes read since the last answer */
	int			 busy;		/* a handler holds its request */
	int			 shed;		/* on conn_shed: 413 or 503 */
	/* Another close callback set on this connection (files.c's). */
	void			(*closecb)(struct evhttp_connection *, void *);
	void			*closecb_arg;
};
TAILQ_HEAD(conns, conn);

static const struct config	*cfg;
static struct conn_pool		*pools[2];
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
static void		 conn_arm(struct conn *, int64_t ms);
static struct conn	*conn_of(struct evhttp_connection *);
static void		 conn_request_done(struct evhttp_request *, void *);
static void		 conn_reject(struct conn *);
static void		 conn_input(struct evbuffer *,
			    const struct evbuffer_cb_info *, void *);
static void		 conn_shed_cb(evutil_socket_t, short, void *);
static void		 conn_send_error(struct conn *, int status,
			    const char *code, const char *message);

/* Budgets and events. */
void
conn_start(const struct config *c)
{
	cfg = c;
	if ((conn_setup_ev = event_new(agentd_base, -1, 0, conn_setup_cb,
	    NULL)) == NULL || (conn_shed_ev = event_new(agentd_base, -1, 0,
	    conn_shed_cb, NULL)) == NULL)
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
conn_pool_new(int unix_socket)
{
	struct conn_pool	*p;

	p = xcalloc(1, sizeof *p);
	p->unix_socket = unix_socket;
	pools[unix_socket ? 1 : 0] = p;
	return (p);
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
	if (conn_setup_ev != NULL)
		event_free(conn_setup_ev);
	if (conn_shed_ev != NULL)
		event_free(conn_shed_ev);
	conn_setup_ev = conn_shed_ev = NULL;
	free(conn_by_fd);
	conn_by_fd = NULL;
	conn_by_fd_len = 0;
	free(pools[0]);
	free(pools[1]);
	pools[0] = pools[1] = NULL;
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
	if ((c->deadline = evtimer_new(agentd_base, conn_deadline,
	    c)) == NULL)
		fatal("%s: out of memory", __func__);
	__real_evhttp_connection_set_closecb(c->evcon, conn_closed, c);
	c->incb = evbuffer_add_cb(bufferevent_get_input(bev), conn_input, c);
	if (c->incb == NULL)
		fatal("%s: out of memory", __func__);
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
	if (c->pool->nconns > cfg->max_connections) {
		conn_reject(c);
		return;
	}
	conn_arm(c, cfg->header_timeout_ms);
}

/*
 * One connection too many: answer 503 without reading, and close.  The
 * answer is best effort (a full socket buffer or a request already sent
 * may lose it); the close is certain.
 */
static void
conn_reject(struct conn *c)
{
	if (c->pool->rejected++ == 0 || c->pool->rejected % 1000 == 0)
		log_warn("%s: %zu connections (--max-connections %llu): "
		    "closing new ones (%llu so far)", __func__, c->pool->nconns - 1,
		    (unsigned long long)cfg->max_connections,
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
	struct iovec	 iov[2];
	struct msghdr	 msg;
	char		 head[160], body[256];
	ssize_t		 n;

	http_count(status);
	if (c->fd < 0 || evbuffer_get_length(bufferevent_get_output(
	    evhttp_connection_get_bufferevent(c->evcon))) > 0)
		return;
	iov[1].iov_base = body;
	iov[1].iov_len = (size_t)snprintf(body, sizeof body,
	    "{\"error\": {\"code\": \"%s\", \"message\": \"%s\"}}\n", code,
	    message);
	iov[0].iov_base = head;
	iov[0].iov_len = (size_t)snprintf(head, sizeof head,
	    "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "Connection: close\r\n\r\n", status, status == 413 ?
	    "Payload Too Large" : "Service Unavailable", iov[1].iov_len);
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

	if (info->n_added == 0)
		return;
	c->pending += info->n_added;
	conn_inflight += info->n_added;
	if (c->busy || c->shed)
		return;
	if (c->pending > conn_request_max)
		c->shed = 413;
	else if (conn_inflight > conn_inflight_max)
		c->shed = 503;
	if (c->shed) {
		TAILQ_INSERT_TAIL(&conn_shed, c, entry);
		event_active(conn_shed_ev, EV_TIMEOUT, 0);
	}
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
		if (c->busy)
			continue;	/* whole after all: a handler has it */
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

/* Start (or restart) the connection's deadline. */
static void
conn_arm(struct conn *c, int64_t ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(c->deadline, &tv);
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
	conn_inflight -= c->pending;
	if (c->shed)
		TAILQ_REMOVE(&conn_shed, c, entry);
	evbuffer_remove_cb_entry(bufferevent_get_input(
	    evhttp_connection_get_bufferevent(evcon)), c->incb);
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

	c->busy = 0;
	conn_inflight -= c->pending;
	c->pending = 0;
	conn_arm(c, cfg->idle_timeout_ms + cfg->header_timeout_ms);
}
