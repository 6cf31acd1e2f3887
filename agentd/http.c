/*
 * http.c -- listeners, connections, auth and the shape of answers; routing
 * is api.c's.
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
 * a 413, and past one budget for all (HTTP_INFLIGHT_MIN, or two of the
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "agentd.h"
#include "api.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "util.h"

#define HTTP_BACKLOG		1024	/* connections waiting for accept */
#define HTTP_WRITE_MAX		(1024 * 1024) /* bytes of one write to a client */
#define HTTP_SPARE_MIN		(128 * 1024) /* bytes: an answer buffer kept ... */
#define HTTP_SPARE_MAX		(6 << 20) /* ... up to this size (musl only) */
#define HTTP_SPARES		2	/* answer buffers kept at most */
#define HTTP_ACCEPT_PAUSE_MS	100	/* accept rests this long on EMFILE */
#define HTTP_ACCEPT_LOG_MS	10000	/* log accept failures at most this often */
#define HTTP_CODES_MAX		32	/* distinct status codes counted */
#define HTTP_BODY_SLACK		65536	/* bytes evhttp reads past --max-body */
#define HTTP_HEADERS_MAX	(64 * 1024) /* bytes of request line and headers */
#define HTTP_FDS_SPARE		256	/* fds besides connections and sessions */
#define HTTP_INFLIGHT_MIN	(64u << 20) /* bytes of requests in flight, all
					   connections together, at least */

/* One listening socket. */
struct http_listener {
	struct evhttp_bound_socket	*bound;
	struct evconnlistener		*lev;
	struct event			*resume;	/* after EMFILE */
	char				*name;
	int				 unix_socket;
};

/* An evhttp and its connections: one for TCP, one for the unix socket. */
struct http_server {
	struct evhttp	*h;
	int		 unix_socket;
	size_t		 nconns;	/* counted against --max-connections */
	uint64_t	 rejected;	/* closed at once: one too many */
};

/* One accepted connection. */
struct http_conn {
	TAILQ_ENTRY(http_conn)	 entry;		/* on http_pending, then http_shed */
	struct http_server	*srv;
	struct bufferevent	*bev;
	struct evhttp_connection *evcon;	/* NULL until set up */
	int			 fd;
	struct event		*deadline;	/* header timeout */
	struct evbuffer_cb_entry *incb;		/* counts what arrives */
	size_t			 pending;	/* bytes read since the last answer */
	int			 busy;		/* a handler holds its request */
	int			 shed;		/* on http_shed: 413 or 503 */
	/* Another close callback set on this connection (files.c's). */
	void			(*closecb)(struct evhttp_connection *, void *);
	void			*closecb_arg;
};
TAILQ_HEAD(http_conns, http_conn);

static struct http_server	 http_tcp;
static struct http_server	 http_unix;
static struct http_listener	*listeners;
static size_t			 nlisteners;
static const struct config	*cfg;
static char			*unix_path;	/* to unlink at the end */
static struct http_code_count	 codes[HTTP_CODES_MAX];
static size_t			 ncodes;
static int64_t			 accept_logged_ms = -HTTP_ACCEPT_LOG_MS;
static uint64_t			 accept_failures;

/* Connections accepted but not yet set up (http_setup_cb's work). */
static struct http_conns	 http_pending = TAILQ_HEAD_INITIALIZER(http_pending);
static struct event		*http_setup_ev;
/* Connections to close for the pending budget (http_shed_cb's work). */
static struct http_conns	 http_shed = TAILQ_HEAD_INITIALIZER(http_shed);
static struct event		*http_shed_ev;
static uint64_t			 http_inflight;	/* bytes, every connection's */
static uint64_t			 http_inflight_max;
static uint64_t			 http_request_max; /* bytes, evhttp's largest */
static uint64_t			 http_shed_count;
/* Set-up connections by fd, to find a request's connection. */
static struct http_conn		**http_by_fd;
static size_t			 http_by_fd_len;

/* The real setter, and the wrapper every other caller in agentd reaches. */
void	__real_evhttp_connection_set_closecb(struct evhttp_connection *,
	    void (*)(struct evhttp_connection *, void *), void *);
void	__wrap_evhttp_connection_set_closecb(struct evhttp_connection *,
	    void (*)(struct evhttp_connection *, void *), void *);

static void		 http_new(struct http_server *, int unix_socket);
static struct bufferevent *http_bevcb(struct event_base *, void *);
static void		 http_setup_cb(evutil_socket_t, short, void *);
static void		 http_setup(struct http_conn *);
static void		 http_conn_closed(struct evhttp_connection *, void *);
static void		 http_conn_deadline(evutil_socket_t, short, void *);
static void		 http_conn_arm(struct http_conn *, int64_t ms);
static struct http_conn	*http_conn_of(struct evhttp_connection *);
static void		 http_request_done(struct evhttp_request *, void *);
static void		 http_reject(struct http_conn *);
static void		 http_conn_input(struct evbuffer *,
			    const struct evbuffer_cb_info *, void *);
static void		 http_shed_cb(evutil_socket_t, short, void *);
static void		 http_send_error(struct http_conn *, int status,
			    const char *code, const char *message);
static void		 http_dispatch(struct evhttp_request *, void *);
static int		 http_authorized(struct http_req *);
static int		 http_peer_ok(struct evhttp_request *);
static int		 http_listen_tcp(const char *);
static int		 http_listen_unix(const char *);
static void		 http_add_listener(struct evhttp *, int fd,
			     const char *name, int unix_socket);
static void		 http_accept_error(struct evconnlistener *, void *);
static void		 http_accept_resume(evutil_socket_t, short, void *);
static void		 http_count(int code);
static void		 http_free_buf(const void *, size_t, void *);
static void		 http_spares_free(void);
static void		 http_reply_oom(struct evhttp_request *);

/* Create an evhttp serving the API. */
static void
http_new(struct http_server *srv, int unix_socket)
{
	struct timeval	 tv;
	struct evhttp	*h;

	if ((h = evhttp_new(agentd_base)) == NULL)
		fatal("%s: evhttp_new failed", __func__);
	srv->h = h;
	srv->unix_socket = unix_socket;
	evhttp_set_gencb(h, http_dispatch, srv);
	evhttp_set_bevcb(h, http_bevcb, srv);
	/*
	 * Every method, unknown ones too (evhttp's internal bit 15): evhttp
	 * would answer a method it does not allow with 501; the routes answer
	 * 405 (a client error is never a 5xx).
	 */
	evhttp_set_allowed_methods(h, 0xffff);
	/*
	 * evhttp answers bodies over its own limit with an HTML page; agentd
	 * checks --max-body itself to answer in the API's shape, and leaves
	 * evhttp a limit twice as high as the memory bound.
	 */
	evhttp_set_max_body_size(h, (ev_ssize_t)(2 * cfg->max_body +
	    HTTP_BODY_SLACK));
	/* Without a limit evhttp buffers headers without end. */
	evhttp_set_max_headers_size(h, HTTP_HEADERS_MAX);
	tv.tv_sec = cfg->idle_timeout_ms / 1000;
	tv.tv_usec = (cfg->idle_timeout_ms % 1000) * 1000;
	evhttp_set_timeout_tv(h, &tv);
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_default_content_type(h, "application/json");
}

/*
 * evhttp accepted a connection: make its bufferevent, count it and queue it
 * for http_setup_cb, which runs before the loop polls the new fd.  The extra
 * reference keeps the bufferevent's memory until then, whatever evhttp does.
 */
static struct bufferevent *
http_bevcb(struct event_base *base, void *arg)
{
	struct http_server	*srv = arg;
	struct http_conn	*c;

	c = xcalloc(1, sizeof *c);
	c->srv = srv;
	c->fd = -1;
	if ((c->bev = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL)
		fatal("%s: out of memory", __func__);
	bufferevent_incref(c->bev);
	srv->nconns++;
	agentd_stats.connections_open++;
	agentd_stats.connections_total++;
	TAILQ_INSERT_TAIL(&http_pending, c, entry);
	event_active(http_setup_ev, EV_TIMEOUT, 0);
	return (c->bev);
}

/* Set up the connections accepted since the last time. */
static void
http_setup_cb(evutil_socket_t fd, short events, void *arg)
{
	struct http_conn	*c;

	while ((c = TAILQ_FIRST(&http_pending)) != NULL) {
		TAILQ_REMOVE(&http_pending, c, entry);
		http_setup(c);
	}
}

/*
 * Find the connection's evhttp_connection, take over its close callback,
 * arm its deadline; or close it now when it is one too many.
 */
static void
http_setup(struct http_conn *c)
{
	struct bufferevent	*bev = c->bev;
	void			*cbarg = NULL;
	size_t			 n;

	bufferevent_getcb(bev, NULL, NULL, NULL, &cbarg);
	c->bev = NULL;
	if (cbarg == NULL) {
		/* evhttp failed to set it up and freed it already. */
		c->srv->nconns--;
		agentd_stats.connections_open--;
		free(c);
		bufferevent_decref(bev);
		return;
	}
	c->evcon = cbarg;
	c->fd = bufferevent_getfd(bev);
	if ((c->deadline = evtimer_new(agentd_base, http_conn_deadline,
	    c)) == NULL)
		fatal("%s: out of memory", __func__);
	__real_evhttp_connection_set_closecb(c->evcon, http_conn_closed, c);
	c->incb = evbuffer_add_cb(bufferevent_get_input(bev), http_conn_input, c);
	if (c->incb == NULL)
		fatal("%s: out of memory", __func__);
	bufferevent_decref(bev);	/* evhttp holds its own */
	if (c->fd >= 0) {
		if ((size_t)c->fd >= http_by_fd_len) {
			n = http_by_fd_len == 0 ? 1024 : http_by_fd_len;
			while (n <= (size_t)c->fd)
				n *= 2;
			http_by_fd = xrealloc(http_by_fd, n * sizeof *http_by_fd);
			memset(http_by_fd + http_by_fd_len, 0,
			    (n - http_by_fd_len) * sizeof *http_by_fd);
			http_by_fd_len = n;
		}
		http_by_fd[c->fd] = c;
	}
	if (c->srv->nconns > cfg->max_connections) {
		http_reject(c);
		return;
	}
	http_conn_arm(c, cfg->header_timeout_ms);
}

/*
 * One connection too many: answer 503 without reading, and close.  The
 * answer is best effort (a full socket buffer or a request already sent
 * may lose it); the close is certain.
 */
static void
http_reject(struct http_conn *c)
{
	if (c->srv->rejected++ == 0 || c->srv->rejected % 1000 == 0)
		log_warn("%s: %zu connections (--max-connections %llu): "
		    "closing new ones (%llu so far)", __func__, c->srv->nconns - 1,
		    (unsigned long long)cfg->max_connections,
		    (unsigned long long)c->srv->rejected);
	http_send_error(c, 503, "too_many_connections",
	    "--max-connections reached");
	evhttp_connection_free(c->evcon);	/* http_conn_closed runs */
}

/*
 * Write an error straight to a connection that is about to be closed,
 * unless evhttp has an answer of its own under way; best effort: a full
 * socket buffer, or unread bytes that make the close a reset, may lose it.
 */
static void
http_send_error(struct http_conn *c, int status, const char *code,
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
http_conn_input(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct http_conn	*c = arg;

	if (info->n_added == 0)
		return;
	c->pending += info->n_added;
	http_inflight += info->n_added;
	if (c->busy || c->shed)
		return;
	if (c->pending > http_request_max)
		c->shed = 413;
	else if (http_inflight > http_inflight_max)
		c->shed = 503;
	if (c->shed) {
		TAILQ_INSERT_TAIL(&http_shed, c, entry);
		event_active(http_shed_ev, EV_TIMEOUT, 0);
	}
}

/* Close the connections that went past the budget. */
static void
http_shed_cb(evutil_socket_t fd, short events, void *arg)
{
	struct http_conn	*c;
	int			 status;

	while ((c = TAILQ_FIRST(&http_shed)) != NULL) {
		TAILQ_REMOVE(&http_shed, c, entry);
		status = c->shed;
		c->shed = 0;
		if (c->busy)
			continue;	/* whole after all: a handler has it */
		if (status == 413) {
			http_send_error(c, 413, "body_too_large", "the request "
			    "is larger than --max-body allows");
			evhttp_connection_free(c->evcon);
			continue;
		}
		if (http_shed_count++ % 1000 == 0)
			log_warn("%s: %llu bytes of requests in flight (at most "
			    "%llu): closing fd %d (%llu so far)", __func__,
			    (unsigned long long)http_inflight,
			    (unsigned long long)http_inflight_max, c->fd,
			    (unsigned long long)http_shed_count);
		http_send_error(c, 503, "too_busy", "too many request bytes in "
		    "flight; try again");
		evhttp_connection_free(c->evcon);	/* http_conn_closed runs */
	}
}

/* Start (or restart) the connection's deadline. */
static void
http_conn_arm(struct http_conn *c, int64_t ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(c->deadline, &tv);
}

/* No whole request arrived in time: close the connection. */
static void
http_conn_deadline(evutil_socket_t fd, short events, void *arg)
{
	struct http_conn	*c = arg;

	log_debug("%s: fd %d: no request within the deadline; closing",
	    __func__, c->fd);
	evhttp_connection_free(c->evcon);	/* http_conn_closed runs */
}

/* The set-up connection of an evhttp_connection, or NULL. */
static struct http_conn *
http_conn_of(struct evhttp_connection *evcon)
{
	struct http_conn	*c;
	int			 fd;

	fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
	if (fd < 0 || (size_t)fd >= http_by_fd_len)
		return (NULL);
	c = http_by_fd[fd];
	return (c != NULL && c->evcon == evcon ? c : NULL);
}

/* evhttp frees a connection: tell whoever else asked, uncount it. */
static void
http_conn_closed(struct evhttp_connection *evcon, void *arg)
{
	struct http_conn	*c = arg;

	if (c->closecb != NULL)
		c->closecb(evcon, c->closecb_arg);
	c->srv->nconns--;
	agentd_stats.connections_open--;
	http_inflight -= c->pending;
	if (c->shed)
		TAILQ_REMOVE(&http_shed, c, entry);
	evbuffer_remove_cb_entry(bufferevent_get_input(
	    evhttp_connection_get_bufferevent(evcon)), c->incb);
	if (c->fd >= 0 && (size_t)c->fd < http_by_fd_len &&
	    http_by_fd[c->fd] == c)
		http_by_fd[c->fd] = NULL;
	event_free(c->deadline);
	free(c);
}

/*
 * Every evhttp_connection_set_closecb() of agentd but http.c's own comes
 * here (-Wl,--wrap): on a connection of ours the callback is kept and
 * called by http_conn_closed(); elsewhere it is set as usual.
 */
void
__wrap_evhttp_connection_set_closecb(struct evhttp_connection *evcon,
    void (*cb)(struct evhttp_connection *, void *), void *arg)
{
	struct http_conn	*c;

	if ((c = http_conn_of(evcon)) == NULL) {
		__real_evhttp_connection_set_closecb(evcon, cb, arg);
		return;
	}
	c->closecb = cb;
	c->closecb_arg = arg;
}

/* An answer went out: the next request has the idle time plus its own. */
static void
http_request_done(struct evhttp_request *req, void *arg)
{
	struct http_conn	*c = arg;

	c->busy = 0;
	http_inflight -= c->pending;
	c->pending = 0;
	http_conn_arm(c, cfg->idle_timeout_ms + cfg->header_timeout_ms);
}

/* Split "ADDR:PORT" or "[V6]:PORT", bind, listen and serve. */
static int
http_listen_tcp(const char *spec)
{
	struct addrinfo	 hints, *res;
	char		 host[256], *colon;
	const char	*port;
	int		 fd, one = 1, error;

	if (strlen(spec) >= sizeof host ||
	    (colon = strrchr(spec, ':')) == NULL) {
		log_error("%s: --listen %s: want ADDR:PORT", __func__, spec);
		return (-1);
	}
	memcpy(host, spec, colon - spec);
	host[colon - spec] = '\0';
	port = colon + 1;
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}

	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((error = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints,
	    &res)) != 0) {
		log_error("%s: --listen %s: %s", __func__, spec,
		    gai_strerror(error));
		return (-1);
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd == -1)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	/*
	 * No Nagle: an answer's last small segment would wait for the ACK
	 * of the one before, which a client delays 40 ms (bench/, scenario
	 * 3: every 4 MiB read stalled 40 ms).  Accepted sockets inherit it.
	 */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (res->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, res->ai_addr, res->ai_addrlen) == -1 ||
	    listen(fd, HTTP_BACKLOG) == -1)
		goto fail;
	freeaddrinfo(res);
	http_add_listener(http_tcp.h, fd, spec, 0);
	log_info("%s: listening on %s", __func__, spec);
	return (0);
fail:
	log_error("%s: --listen %s: %s", __func__, spec, strerror(errno));
	if (fd != -1)
		close(fd);
	freeaddrinfo(res);
	return (-1);
}

/* Create the unix socket, mode 0600, and serve. */
static int
http_listen_unix(const char *path)
{
	struct sockaddr_un	 sun;
	mode_t			 mask;
	int			 fd;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sun.sun_path) {
		log_error("%s: --socket %s: path too long", __func__, path);
		return (-1);
	}
	strcpy(sun.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		goto fail;
	/* A stale socket of an earlier agentd is in the way; nothing else. */
	if (unlink(path) == -1 && errno != ENOENT)
		goto fail;
	mask = umask(0177);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) == -1) {
		umask(mask);
		goto fail;
	}
	umask(mask);
	if (chmod(path, 0600) == -1 || listen(fd, HTTP_BACKLOG) == -1)
		goto fail;
	unix_path = xstrdup(path);
	http_add_listener(http_unix.h, fd, path, 1);
	log_info("%s: listening on %s", __func__, path);
	return (0);
fail:
	log_error("%s: --socket %s: %s", __func__, path, strerror(errno));
	if (fd != -1)
		close(fd);
	return (-1);
}

/* Hand a listening fd to evhttp; accept backs off on EMFILE. */
static void
http_add_listener(struct evhttp *h, int fd, const char *name,
    int unix_socket)
{
	struct http_listener	*l;

	listeners = xrealloc(listeners, (nlisteners + 1) * sizeof *listeners);
	l = &listeners[nlisteners++];
	memset(l, 0, sizeof *l);
	if ((l->bound = evhttp_accept_socket_with_handle(h, fd)) == NULL)
		fatal("%s: evhttp_accept_socket_with_handle failed", __func__);
	l->lev = evhttp_bound_socket_get_listener(l->bound);
	l->name = xstrdup(name);
	l->unix_socket = unix_socket;
	l->resume = evtimer_new(agentd_base, http_accept_resume, l->lev);
	evconnlistener_set_error_cb(l->lev, http_accept_error);
}

/* accept failed: on EMFILE/ENFILE/ENOMEM rest, instead of spinning. */
static void
http_accept_error(struct evconnlistener *lev, void *arg)
{
	struct timeval	 tv = { 0, HTTP_ACCEPT_PAUSE_MS * 1000 };
	int		 error = EVUTIL_SOCKET_ERROR();
	int64_t		 now;
	size_t		 i;

	if (error == EINTR || error == EAGAIN || error == ECONNABORTED)
		return;
	accept_failures++;
	now = clock_mono_ms();
	if (now - accept_logged_ms >= HTTP_ACCEPT_LOG_MS) {
		log_warn("%s: accept: %s; pausing %d ms (%llu failures so far)",
		    __func__, strerror(error), HTTP_ACCEPT_PAUSE_MS,
		    (unsigned long long)accept_failures);
		accept_logged_ms = now;
	}
	for (i = 0; i < nlisteners; i++) {
		if (listeners[i].lev == lev) {
			evconnlistener_disable(lev);
			event_add(listeners[i].resume, &tv);
		}
	}
}

/* Accept again after a pause. */
static void
http_accept_resume(evutil_socket_t fd, short events, void *arg)
{
	if (!agentd_stopping())
		evconnlistener_enable(arg);
}

/*
 * Make room for --max-connections on both listeners and the sessions' fds:
 * the soft limit goes up to the hard one; as PID 1 (whose hard limit is the
 * kernel's 4096) the hard one too, up to fs.nr_open.  A supervisor's hard
 * limit is respected: past it, accept backs off on EMFILE.
 */
static void
http_raise_nofile(void)
{
	struct rlimit	 rl;
	rlim_t		 want, nr_open = 0;
	FILE		*f;
	unsigned long	 v;

	want = (rlim_t)(2 * cfg->max_connections + 4 * cfg->max_sessions +
	    HTTP_FDS_SPARE);
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	if (cfg->pid1 && rl.rlim_max < want &&
	    (f = fopen("/proc/sys/fs/nr_open", "re")) != NULL) {
		if (fscanf(f, "%lu", &v) == 1)
			nr_open = (rlim_t)v;
		fclose(f);
		rl.rlim_max = want < nr_open ? want : nr_open;
	}
	rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE,
	    &rl) != 0)
		return;
	if (rl.rlim_cur < want)
		log_info("%s: %llu fds allowed, %llu would hold every "
		    "connection (--max-connections %llu); accept waits past it",
		    __func__, (unsigned long long)rl.rlim_cur,
		    (unsigned long long)want,
		    (unsigned long long)cfg->max_connections);
}

/* Open every listener. */
int
http_start(const struct config *c)
{
	size_t	i;

	cfg = c;
	http_raise_nofile();
	if ((http_setup_ev = event_new(agentd_base, -1, 0, http_setup_cb,
	    NULL)) == NULL || (http_shed_ev = event_new(agentd_base, -1, 0,
	    http_shed_cb, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	/* Two requests of evhttp's largest always fit. */
	http_request_max = 2 * cfg->max_body + HTTP_BODY_SLACK +
	    HTTP_HEADERS_MAX;
	http_inflight_max = 2 * http_request_max;
	if (http_inflight_max < HTTP_INFLIGHT_MIN)
		http_inflight_max = HTTP_INFLIGHT_MIN;
	http_new(&http_tcp, 0);
	http_new(&http_unix, 1);
	for (i = 0; cfg->listen[i] != NULL; i++) {
		if (http_listen_tcp(cfg->listen[i]) != 0)
			return (-1);
	}
	if (*cfg->socket_path != '\0' && http_listen_unix(cfg->socket_path) != 0)
		return (-1);
	if (cfg->token == NULL && cfg->listen[0] != NULL)
		log_warn("%s: no token configured: TCP requests are not "
		    "authenticated (--token-file or AGENTD_TOKEN)", __func__);
	return (0);
}

/* Stop accepting new connections. */
void
http_stop_accepting(void)
{
	size_t	i;

	for (i = 0; i < nlisteners; i++) {
		evconnlistener_disable(listeners[i].lev);
		event_del(listeners[i].resume);
	}
}

/* Close every listener and connection. */
void
http_free(void)
{
	size_t	i;

	for (i = 0; i < nlisteners; i++) {
		event_free(listeners[i].resume);
		free(listeners[i].name);
	}
	free(listeners);
	listeners = NULL;
	nlisteners = 0;
	http_setup_cb(-1, 0, NULL);	/* accepted, not yet set up */
	if (http_tcp.h != NULL)
		evhttp_free(http_tcp.h);	/* each http_conn_closed runs */
	if (http_unix.h != NULL)
		evhttp_free(http_unix.h);
	http_tcp.h = http_unix.h = NULL;
	http_spares_free();	/* after the answers still queued */
	if (http_setup_ev != NULL)
		event_free(http_setup_ev);
	if (http_shed_ev != NULL)
		event_free(http_shed_ev);
	http_setup_ev = http_shed_ev = NULL;
	free(http_by_fd);
	http_by_fd = NULL;
	http_by_fd_len = 0;
	if (unix_path != NULL) {
		unlink(unix_path);
		free(unix_path);
		unix_path = NULL;
	}
}

/* Whether the unix-socket peer is root or agentd's own uid. */
static int
http_peer_ok(struct evhttp_request *req)
{
	struct evhttp_connection	*evcon;
	struct ucred			 cred;
	socklen_t			 len = sizeof cred;
	int				 fd;

	evcon = evhttp_request_get_connection(req);
	fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1)
		return (0);
	return (cred.uid == 0 || cred.uid == geteuid());
}

/* Whether a TCP request carries the token (always, when there is none). */
static int
http_authorized(struct http_req *hr)
{
	struct evkeyvalq	*h = evhttp_request_get_input_headers(hr->req);
	const char		*v;

	if (hr->unix_peer)
		return (http_peer_ok(hr->req));
	if (cfg->token == NULL)
		return (1);
	if ((v = evhttp_find_header(h, "Authorization")) != NULL) {
		if (strncasecmp(v, "Bearer ", 7) != 0)
			return (0);
		for (v += 7; *v == ' '; v++)
			;
		return (ct_equal(v, strlen(v), cfg->token, cfg->token_len));
	}
	if ((v = evhttp_find_header(h, "X-Access-Token")) != NULL)
		return (ct_equal(v, strlen(v), cfg->token, cfg->token_len));
	return (0);
}

/* Every request comes here: take it apart, check auth, route it. */
static void
http_dispatch(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri	*uri = evhttp_request_get_evhttp_uri(req);
	struct evbuffer		*in = evhttp_request_get_input_buffer(req);
	struct http_conn	*c;
	struct http_req		 hr;
	const char		*ct;
	size_t			 len;

	agentd_stats.http_requests++;
	/* libevent writes 16 KiB per turn of the loop unless told. */
	bufferevent_set_max_single_write(evhttp_connection_get_bufferevent(
	    evhttp_request_get_connection(req)), HTTP_WRITE_MAX);
	/* The request is whole: no deadline while a handler holds it. */
	if ((c = http_conn_of(evhttp_request_get_connection(req))) != NULL) {
		evtimer_del(c->deadline);
		c->busy = 1;
		evhttp_request_set_on_complete_cb(req, http_request_done, c);
	}
	memset(&hr, 0, sizeof hr);
	hr.req = req;
	hr.method = evhttp_request_get_command(req);
	hr.unix_peer = ((struct http_server *)arg)->unix_socket;
	hr.path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
	hr.query = uri != NULL ? evhttp_uri_get_query(uri) : NULL;
	if (hr.path == NULL || *hr.path == '\0')
		hr.path = "/";
	if (hr.query == NULL)
		hr.query = "";
	ct = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Content-Type");
	hr.content_type = ct != NULL ? ct : "";

	len = evbuffer_get_length(in);
	if (len > cfg->max_body) {
		http_fail(req, 413, "body_too_large", "the body has %zu bytes; "
		    "--max-body is %llu", len, (unsigned long long)cfg->max_body);
		return;
	}
	/* A NUL after the body, so parsers may treat it as a string. */
	evbuffer_add(in, "", 1);
	hr.body = (const char *)evbuffer_pullup(in, -1);
	hr.body_len = len;
	if (hr.body == NULL) {		/* a client-sized copy */
		http_reply_oom(req);
		return;
	}

	if (!hr.unix_peer && strcmp(hr.path, "/healthz") == 0) {
		api_route(&hr);
		return;
	}
	if (!http_authorized(&hr)) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "WWW-Authenticate", "Bearer");
		http_fail(req, 401, "unauthorized", hr.unix_peer ?
		    "peer is not root or agentd's user" :
		    "missing or wrong token");
		return;
	}
	api_route(&hr);
}

/* Count an answer by its status code. */
static void
http_count(int code)
{
	size_t	i;

	for (i = 0; i < ncodes; i++) {
		if (codes[i].code == code) {
			codes[i].count++;
			return;
		}
	}
	if (ncodes < HTTP_CODES_MAX) {
		codes[ncodes].code = code;
		codes[ncodes++].count = 1;
	}
}

/* The status codes answered so far. */
size_t
http_code_counts(const struct http_code_count **out)
{
	*out = codes;
	return (ncodes);
}

/*
 * Large answer buffers, kept for the next large answer: musl's malloc
 * unmaps a freed large block at once, and the next answer faults every page
 * of a new one in again (a 4 MiB window: 1,024 faults, ~40 ms on the bench
 * machine; bench/, scenario 3).
 */
static void	*http_spares[HTTP_SPARES];
static size_t	 http_nspares;

/* Start an empty b with a kept buffer, if one is kept and want is large. */
void
http_buf_take(struct proto_buf *b, size_t want)
{
	size_t	i, cap;

	if (b->data != NULL || want < HTTP_SPARE_MIN / 2)
		return;
	for (i = 0; i < http_nspares; i++) {
		cap = malloc_usable_size(http_spares[i]);
		if (cap < want && i + 1 < http_nspares)
			continue;
		b->data = http_spares[i];
		b->cap = cap;
		b->len = 0;
		http_spares[i] = http_spares[--http_nspares];
		return;
	}
}

/*
 * Free a proto_buf's memory once evbuffer is done with it, or keep it.
 * Only with musl: glibc reuses freed blocks by itself, and a kept block in
 * the middle of its heap would pin the memory above it (the soak's RSS).
 */
static void
http_free_buf(const void *data, size_t len, void *arg)
{
#ifndef __GLIBC__
	size_t	size = malloc_usable_size(arg);

	if (http_nspares < HTTP_SPARES && size >= HTTP_SPARE_MIN &&
	    size <= HTTP_SPARE_MAX) {
		http_spares[http_nspares++] = arg;
		return;
	}
#endif
	free(arg);
}

/* Free the kept answer buffers. */
static void
http_spares_free(void)
{
	while (http_nspares > 0)
		free(http_spares[--http_nspares]);
}

/*
 * Answer 503 out_of_memory without allocating an answer: a client-sized
 * allocation failed, and the fatal path (as PID 1: the machine's power-off)
 * is not the client's to choose.
 */
static void
http_reply_oom(struct evhttp_request *req)
{
	static const char	 body[] = "{\"error\":{\"code\":\"out_of_memory\","
	    "\"message\":\"agentd is out of memory for this request; try "
	    "again later or ask for less\"}}\n";
	struct evbuffer		*out;

	log_warn("%s: out of memory for an answer", __func__);
	if ((out = evbuffer_new()) != NULL &&
	    evbuffer_add_reference(out, body, sizeof body - 1, NULL, NULL) != 0) {
		evbuffer_free(out);
		out = NULL;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "application/json");
	http_count(503);
	evhttp_send_reply(req, 503, "Service Unavailable", out);
	if (out != NULL)
		evbuffer_free(out);
}

/* Answer with raw bytes of a content type. */
void
http_reply_raw(struct evhttp_request *req, int status, const char *type,
    struct proto_buf *b)
{
	struct evbuffer	*out;

	if (b->oom || (out = evbuffer_new()) == NULL) {
		proto_buf_free(b);
		http_reply_oom(req);
		return;
	}
	if (b->len > 0) {
		if (evbuffer_add_reference(out, b->data, b->len, http_free_buf,
		    b->data) != 0) {
			evbuffer_free(out);
			proto_buf_free(b);
			http_reply_oom(req);
			return;
		}
	} else
		free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", type);
	http_count(status);
	evhttp_send_reply(req, status, NULL, out);
	evbuffer_free(out);
}

/* Answer with a JSON body. */
void
http_reply(struct evhttp_request *req, int status, struct proto_buf *b)
{
	proto_buf_append(b, "\n", 1);
	http_reply_raw(req, status, "application/json", b);
}

/* Answer with an error. */
void
http_reply_error(struct evhttp_request *req, const struct proto_err *err,
    const struct proto_session *s)
{
	struct proto_buf	b = { 0 };

	proto_render_error(&b, err, s);
	http_reply(req, err->status, &b);
}

/* Answer with an error built from a format. */
void
http_fail(struct evhttp_request *req, int status, const char *code,
    const char *fmt, ...)
{
	struct proto_err	err;
	va_list			ap;

	err.status = status;
	err.code = code;
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof err.message, fmt, ap);
	va_end(ap);
	http_reply_error(req, &err, NULL);
}

/* Answer 405 unless the method is among allowed; 0 when it is. */
int
http_method(struct http_req *hr, int allowed)
{
	if (hr->method & allowed)
		return (0);
	http_fail(hr->req, 405, "method_not_allowed",
	    "method not allowed on %s", hr->path);
	return (-1);
}

/*
 * Watch the client of a held request.  EV_READ too, edge-triggered: epoll
 * reports a reset (EPOLLERR) as EV_READ|EV_WRITE, never EV_CLOSED, and an
 * error nobody takes spins the loop.
 */
struct event *
http_watch_client(struct evhttp_request *req,
    void (*fn)(evutil_socket_t, short, void *), void *arg)
{
	struct evhttp_connection	*evcon;
	struct event			*ev;
	int				 fd;

	evcon = evhttp_request_get_connection(req);
	fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
	ev = event_new(agentd_base, fd, EV_CLOSED | EV_READ | EV_ET |
	    EV_PERSIST, fn, arg);
	if (ev == NULL || event_add(ev, NULL) != 0)
		fatal("%s: out of memory", __func__);
	return (ev);
}

/* Whether a watched client went away, or only sent a pipelined request. */
int
http_client_gone(evutil_socket_t fd, short events)
{
	ssize_t	n;
	char	c;

	if (events & EV_CLOSED)
		return (1);
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return (!(n > 0 || (n == -1 && (errno == EAGAIN || errno == EINTR))));
}
