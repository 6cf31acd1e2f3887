/*
 * http.c -- listeners, auth, dispatch and the shape of answers; routing is
 * api.c's, and what happens to a connection before its request is whole
 * (admission, budget, deadlines) is conn.c's.
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "config.h"
#include "conn.h"
#include "http.h"
#include "httpcore.h"
#include "log.h"
#include "outq.h"
#include "stats.h"
#include "stop.h"
#include "util.h"
#include "vsock.h"

#define HTTP_BACKLOG		1024	/* connections waiting for accept */
#define HTTP_WRITE_MAX		(1024 * 1024) /* bytes of one write to a client */
#define HTTP_SPARE_MIN		(128 * 1024) /* bytes: an answer buffer kept ... */
#define HTTP_SPARE_MAX		(6 << 20) /* ... up to this size (musl only) */
#define HTTP_SPARES		2	/* answer buffers kept at most */
#define HTTP_ACCEPT_PAUSE_MS	100	/* accept rests this long on EMFILE */
#define HTTP_ACCEPT_LOG_MS	10000	/* log accept failures at most this often */
#define HTTP_FDS_SPARE		256	/* fds besides connections and sessions */

/*
 * Which API a listener serves: agentd's own (API.md), or envd's, whose
 * routes check the token themselves (http_listen_routes()).  Another
 * protocol is one more value and its routes in http_routes[].
 */
enum http_api {
	HTTP_API_AGENTD,
	HTTP_API_ENVD,		/* its own routes and auth (envd.h) */
	HTTP_APIS
};

/* One listening socket. */
struct http_listener {
	struct evhttp_bound_socket	*bound;
	struct evconnlistener		*lev;
	struct event			*resume;	/* after EMFILE */
	char				*name;
	enum conn_transport		 transport;
};

/*
 * An evhttp and its connections: one per API and transport (TCP, the unix
 * socket, vsock), made with its first listener; each counts its own
 * --max-connections.
 */
struct http_server {
	struct evhttp		*h;
	struct conn_pool	*pool;
	enum conn_transport	 transport;
	int			 unix_socket;
	int			 own_auth;	/* its routes check the token
						   and limits (envd) */
	http_route_fn		 route;
};

static struct http_server	 http_servers[HTTP_APIS][CONN_TRANSPORTS];
static http_route_fn		 http_routes[HTTP_APIS];
static struct http_listener	*listeners;
static size_t			 nlisteners;
static const struct config	*cfg;
static struct event_base	*http_base;	/* the loop (http_start's) */
static char			*unix_path;	/* to unlink at the end */
static int64_t			 accept_logged_ms = -HTTP_ACCEPT_LOG_MS;
static uint64_t			 accept_failures;
static int			 http_closing;	/* the loop is over: 503 */
static struct http_inherit {		/* listeners an upgrade handed over */
	char		*name;
	int		 fd;
}			*inherits;
static size_t		 ninherits;
static int		 handing_over;	/* an upgrade's: answers close */

static struct http_server *http_server(enum http_api, enum conn_transport);
static void		 http_dispatch(struct evhttp_request *, void *);
static int		 http_authorized(struct http_req *);
static int		 http_page(const struct http_req *);
static int		 http_peer_ok(struct evhttp_request *);
static int		 http_type_is(const char *, const char *);
static int		 http_ends_with(const char *, const char *);
static int		 http_from_browser(const struct http_req *);
static int		 http_listen_tcp(struct http_server *, const char *);
static const char	*http_twin(const char *);
static int		 http_listed(const char *, const char *);
static int		 http_bind_tcp(struct http_server *, const char *,
			     const char *, const char *, int twin);
static int		 http_listen_unix(const char *);
static int		 http_listen_vsock(const char *, enum http_api,
			     const char *flag);
static int		 http_inherited(const char *);
static int		 http_unix_clear(const struct sockaddr_un *);
static void		 http_add_listener(struct http_server *, int fd,
			     const char *name);
static void		 http_accept_error(struct evconnlistener *, void *);
static void		 http_accept_resume(evutil_socket_t, short, void *);
static void		 http_free_buf(const void *, size_t, void *);
static void		 http_spares_free(void);
static void		 http_reply_oom(struct evhttp_request *);
static void		 http_send_raw(struct evhttp_request *, int,
			    const char *, struct proto_buf *);
static const char	*http_reason(int);
static struct event	*http_watch(struct evhttp_request *, short,
			    void (*)(evutil_socket_t, short, void *), void *);

/* The evhttp serving api over transport, made the first time. */
static struct http_server *
http_server(enum http_api api, enum conn_transport transport)
{
	struct http_server	*srv = &http_servers[api][transport];
	struct timeval		 tv;
	struct evhttp		*h;

	if (srv->h != NULL)
		return (srv);
	if ((h = evhttp_new(http_base)) == NULL)
		fatal("%s: evhttp_new failed", __func__);
	srv->h = h;
	srv->transport = transport;
	srv->unix_socket = transport == CONN_UNIX;
	srv->route = http_routes[api];
	srv->own_auth = api != HTTP_API_AGENTD;
	evhttp_set_gencb(h, http_dispatch, srv);
	srv->pool = conn_pool_new(transport, srv->own_auth);
	evhttp_set_bevcb(h, conn_bevcb, srv->pool);
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
	evhttp_set_timeout_tv(h, timeval_ms(&tv, cfg->idle_timeout_ms));
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_default_content_type(h, "application/json");
	return (srv);
}

/*
 * The same port on the other family's wildcard or loopback address:
 * without it a user could bind [::1]:PORT beside 127.0.0.1:PORT and take
 * the requests (and the token) of clients that resolve localhost to ::1.
 */
static const char *
http_twin(const char *host)
{
	if (*host == '\0' || strcmp(host, "0.0.0.0") == 0)
		return ("::");
	if (strcmp(host, "::") == 0)
		return ("0.0.0.0");
	if (strcmp(host, "127.0.0.1") == 0)
		return ("::1");
	if (strcmp(host, "::1") == 0)
		return ("127.0.0.1");
	return (NULL);
}

/* Whether --listen names host:port itself (then it is no twin). */
static int
http_listed(const char *host, const char *port)
{
	char	spec[300], v6[300];
	size_t	i;

	snprintf(spec, sizeof spec, "%s:%s", host, port);
	snprintf(v6, sizeof v6, "[%s]:%s", host, port);
	for (i = 0; cfg->listen[i] != NULL; i++) {
		if (strcmp(cfg->listen[i], spec) == 0 ||
		    strcmp(cfg->listen[i], v6) == 0)
			return (1);
	}
	return (0);
}

/* Split "ADDR:PORT" or "[V6]:PORT"; listen there, and on its twin. */
static int
http_listen_tcp(struct http_server *srv, const char *spec)
{
	char		 host[256], *colon;
	const char	*port, *twin;

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
	if (http_bind_tcp(srv, host, port, spec, 0) != 0)
		return (-1);
	if (!cfg->dual_stack || (twin = http_twin(host)) == NULL ||
	    http_listed(twin, port))
		return (0);
	return (http_bind_tcp(srv, twin, port, spec, 1));
}

/*
 * Bind host:port, listen and serve.  A twin (of spec) that cannot be had
 * because the machine lacks its family is skipped; one that is taken
 * fails the start.
 */
static int
http_bind_tcp(struct http_server *srv, const char *host, const char *port,
    const char *spec, int twin)
{
	struct addrinfo	 hints, *res;
	char		 name[300];
	int		 fd, one = 1, error;

	if (strchr(host, ':') != NULL)
		snprintf(name, sizeof name, "[%s]:%s", host, port);
	else
		snprintf(name, sizeof name, "%s:%s", host, port);
	if ((fd = http_inherited(name)) != -1) {	/* an upgrade's */
		http_add_listener(srv, fd, name);
		return (0);
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((error = getaddrinfo(host[0] != '\0' ? host : NULL, port, &hints,
	    &res)) != 0) {
		if (twin)
			return (0);	/* no such family here */
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
	http_add_listener(srv, fd, name);
	log_info("%s: listening on %s", __func__, name);
	return (0);
fail:
	error = errno;
	if (fd != -1)
		close(fd);
	freeaddrinfo(res);
	if (twin && (error == EAFNOSUPPORT || error == EADDRNOTAVAIL ||
	    error == EPROTONOSUPPORT)) {
		log_info("%s: not listening on %s beside --listen %s: %s",
		    __func__, name, spec, strerror(error));
		return (0);
	}
	if (twin && error == EADDRINUSE) {
		log_error("%s: %s is in use, beside --listen %s: another process "
		    "would get the requests (and the token) of clients that "
		    "reach it there; not starting (--dual-stack 0 allows it)",
		    __func__, name, spec);
		return (-1);
	}
	log_error("%s: --listen %s: %s: %s", __func__, spec, name,
	    strerror(error));
	return (-1);
}

/*
 * Remove a stale socket of an earlier agentd from the path; nothing else:
 * not a file that is no socket, not a socket something still listens on.
 * Returns 0, or -1 after logging why.
 */
static int
http_unix_clear(const struct sockaddr_un *sun)
{
	struct stat	 st;
	const char	*path = sun->sun_path;
	int		 fd, live;

	if (lstat(path, &st) == -1)
		return (0);
	if (!S_ISSOCK(st.st_mode)) {
		log_error("%s: --socket %s: exists and is no socket; not "
		    "removing it", __func__, path);
		return (-1);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
		return (0);
	live = connect(fd, (const struct sockaddr *)sun, sizeof *sun) == 0 ||
	    errno == EAGAIN;
	close(fd);
	if (live) {
		log_error("%s: --socket %s: in use by a running process "
		    "(another agentd?)", __func__, path);
		return (-1);
	}
	if (unlink(path) == -1 && errno != ENOENT) {
		log_error("%s: --socket %s: a stale socket of uid %u that agentd "
		    "cannot remove: %s%s", __func__, path, (unsigned)st.st_uid,
		    strerror(errno), errno == EPERM || errno == EACCES ?
		    " (in a sticky directory only its owner or root can; or "
		    "choose another --socket)" : "");
		return (-1);
	}
	return (0);
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
	if ((fd = http_inherited(path)) != -1) {	/* an upgrade's */
		unix_path = xstrdup(path);
		http_add_listener(http_server(HTTP_API_AGENTD, CONN_UNIX), fd,
		    path);
		return (0);
	}
	if (http_unix_clear(&sun) != 0)
		return (-1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0)) == -1)
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
	http_add_listener(http_server(HTTP_API_AGENTD, CONN_UNIX), fd, path);
	log_info("%s: listening on %s", __func__, path);
	return (0);
fail:
	log_error("%s: --socket %s: %s", __func__, path, strerror(errno));
	if (fd != -1)
		close(fd);
	return (-1);
}

/*
 * Listen on a vsock port, any CID, and serve api there (flag: the option
 * that asked, for the log).  Without the vsock module (a kernel that lacks
 * it, or a container) agentd does not start: the platform asked for it.
 */
static int
http_listen_vsock(const char *spec, enum http_api api, const char *flag)
{
	const char	*cause;
	char		 name[VSOCK_NAME_MAX];
	uint32_t	 port;
	int		 fd;

	if (vsock_parse_port(spec, &port, &cause) != 0) {
		log_error("%s: %s %s: %s", __func__, flag, spec, cause);
		return (-1);
	}
	snprintf(name, sizeof name, "vsock:*:%u", port);
	if ((fd = http_inherited(name)) != -1) {	/* an upgrade's */
		http_add_listener(http_server(api, CONN_VSOCK), fd, name);
		return (0);
	}
	if ((fd = vsock_listen(port, HTTP_BACKLOG)) == -1) {
		log_error("%s: %s %s: %s%s", __func__, flag, spec,
		    strerror(errno), errno == EAFNOSUPPORT ? " (no vsock in "
		    "this kernel: the vsock module is not loaded)" : "");
		return (-1);
	}
	http_add_listener(http_server(api, CONN_VSOCK), fd, name);
	log_info("%s: listening on vsock port %u (any CID)", __func__, port);
	return (0);
}

/* Hand a listening fd to srv; accept backs off on EMFILE. */
static void
http_add_listener(struct http_server *srv, int fd, const char *name)
{
	struct http_listener	*l;

	listeners = xrealloc(listeners, (nlisteners + 1) * sizeof *listeners);
	l = &listeners[nlisteners++];
	memset(l, 0, sizeof *l);
	if ((l->bound = evhttp_accept_socket_with_handle(srv->h, fd)) == NULL)
		fatal("%s: evhttp_accept_socket_with_handle failed", __func__);
	l->lev = evhttp_bound_socket_get_listener(l->bound);
	l->name = xstrdup(name);
	l->transport = srv->transport;
	l->resume = evtimer_new(http_base, http_accept_resume, l->lev);
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
	int64_t	want, got;

	want = (int64_t)((2 + (cfg->vsock_listen[0] != NULL) +
	    (cfg->envd_listen[0] != NULL) +
	    (cfg->envd_vsock_listen[0] != NULL)) * cfg->max_connections + 4 * cfg->max_sessions +
	    (cfg->forward_localhost != 0 ? (int64_t)(2 * cfg->forward_total_conns +
	    cfg->forward_max) : 0) + HTTP_FDS_SPARE);
	if ((got = nofile_raise((uint64_t)want, cfg->pid1)) >= 0 && got < want)
		log_info("%s: %lld fds allowed, %lld would hold every "
		    "connection (--max-connections %llu); accept waits past it",
		    __func__, (long long)got, (long long)want,
		    (unsigned long long)cfg->max_connections);
}

/* Open every listener. */
int
http_start(struct event_base *base, const struct config *c,
    http_route_fn route)
{
	size_t	i;

	http_base = base;
	http_routes[HTTP_API_AGENTD] = route;
	cfg = c;
	httpcore_token(cfg->token, cfg->token_len);
	http_raise_nofile();
	conn_start(base, cfg);
	/* Made now, so that a request over either is answered at once. */
	http_server(HTTP_API_AGENTD, CONN_TCP);
	http_server(HTTP_API_AGENTD, CONN_UNIX);
	for (i = 0; cfg->listen[i] != NULL; i++) {
		if (http_listen_tcp(http_server(HTTP_API_AGENTD, CONN_TCP),
		    cfg->listen[i]) != 0)
			return (-1);
	}
	if (*cfg->socket_path != '\0' && http_listen_unix(cfg->socket_path) != 0)
		return (-1);
	for (i = 0; cfg->vsock_listen[i] != NULL; i++) {
		if (http_listen_vsock(cfg->vsock_listen[i], HTTP_API_AGENTD,
		    "--vsock-listen") != 0)
			return (-1);
	}
	if (cfg->token == NULL && cfg->listen[0] != NULL)
		log_warn("%s: no token configured: TCP requests are not "
		    "authenticated (--token-file or AGENTD_TOKEN)", __func__);
	if (cfg->token == NULL && cfg->vsock_listen[0] != NULL)
		log_warn("%s: no token configured: vsock requests from the host "
		    "(CID 2) and this machine (CID 1) are not authenticated, "
		    "other CIDs are refused", __func__);
	return (0);
}

/* Listen on spec for envd's routes, after http_start(). */
int
http_listen_routes(const char *spec, http_route_fn route)
{
	http_routes[HTTP_API_ENVD] = route;
	return (http_listen_tcp(http_server(HTTP_API_ENVD, CONN_TCP), spec));
}

/* Listen on a vsock port for envd's routes, after http_start(). */
int
http_listen_routes_vsock(const char *port, http_route_fn route)
{
	http_routes[HTTP_API_ENVD] = route;
	return (http_listen_vsock(port, HTTP_API_ENVD, "--envd-vsock-listen"));
}

/* An upgrade handed over the listener name on fd: take it, not bind. */
void
http_inherit(const char *name, int fd)
{
	inherits = xrealloc(inherits, (ninherits + 1) * sizeof *inherits);
	inherits[ninherits].name = xstrdup(name);
	inherits[ninherits++].fd = fd;
}

/* The fd handed over for the listener name (now ours), or -1. */
static int
http_inherited(const char *name)
{
	size_t	i;
	int	fd;

	for (i = 0; i < ninherits; i++) {
		if (inherits[i].fd == -1 || strcmp(inherits[i].name, name) != 0)
			continue;
		fd = inherits[i].fd;
		inherits[i].fd = -1;
		log_info("%s: listening on %s (handed over, fd %d)", __func__,
		    name, fd);
		return (fd);
	}
	return (-1);
}

/* Close the handed-over listeners no --listen or --socket took. */
void
http_inherit_done(void)
{
	size_t	i;

	for (i = 0; i < ninherits; i++) {
		if (inherits[i].fd != -1) {
			log_info("%s: %s no longer listened on: closed",
			    __func__, inherits[i].name);
			close(inherits[i].fd);
		}
		free(inherits[i].name);
	}
	free(inherits);
	inherits = NULL;
	ninherits = 0;
}

/* The listeners' fds and names, for an upgrade; how many. */
size_t
http_listener_fds(int *fds, const char **names, size_t max)
{
	size_t	i;

	for (i = 0; i < nlisteners && i < max; i++) {
		fds[i] = evconnlistener_get_fd(listeners[i].lev);
		names[i] = listeners[i].name;
	}
	return (i);
}

/* Pause accepting (new connections wait in the backlog) or go on. */
void
http_accept_pause(int pause)
{
	size_t	i;

	handing_over = pause;
	for (i = 0; i < nlisteners; i++) {
		if (pause) {
			evconnlistener_disable(listeners[i].lev);
			event_del(listeners[i].resume);
		} else
			evconnlistener_enable(listeners[i].lev);
	}
}

/* Stop accepting new connections, and answer new requests 503. */
void
http_stop_accepting(void)
{
	size_t	i;

	http_closing = 1;
	for (i = 0; i < nlisteners; i++) {
		evconnlistener_disable(listeners[i].lev);
		event_del(listeners[i].resume);
	}
}

/* Close every listener and connection. */
void
http_free(void)
{
	struct http_server	*srv;
	size_t			 i;

	for (i = 0; i < nlisteners; i++) {
		event_free(listeners[i].resume);
		free(listeners[i].name);
	}
	free(listeners);
	listeners = NULL;
	nlisteners = 0;
	conn_flush();	/* accepted, not yet set up */
	for (i = 0; i < HTTP_APIS * CONN_TRANSPORTS; i++) {
		srv = &http_servers[i / CONN_TRANSPORTS][i % CONN_TRANSPORTS];
		if (srv->h != NULL)
			evhttp_free(srv->h);	/* each http_conn_closed runs */
		srv->h = NULL;
	}
	http_spares_free();	/* after the answers still queued */
	conn_stop();
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
	const char		*v, *x;

	if (hr->unix_peer)
		return (http_peer_ok(hr->req));
	v = evhttp_find_header(h, "Authorization");
	x = evhttp_find_header(h, "X-Access-Token");
	return (http_token_ok(v, v != NULL ? strlen(v) : 0, x,
	    x != NULL ? strlen(x) : 0));
}

/*
 * Whether a request is for the web terminal's files (GET or HEAD of /term,
 * /term/...; api/webdir.c): they hold no data, and go without the token.
 */
static int
http_page(const struct http_req *hr)
{
	return ((hr->method == EVHTTP_REQ_GET ||
	    hr->method == EVHTTP_REQ_HEAD) &&
	    strncmp(hr->path, "/term", 5) == 0 &&
	    (hr->path[5] == '\0' || hr->path[5] == '/'));
}

/* Every request comes here: take it apart, check auth, route it. */
static void
http_dispatch(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri	*uri = evhttp_request_get_evhttp_uri(req);
	struct evbuffer		*in = evhttp_request_get_input_buffer(req);
	struct http_server	*srv = arg;
	struct http_req		 hr;
	const char		*ct;
	size_t			 len;

	agentd_stats.http_requests++;
	/* libevent writes 16 KiB per turn of the loop unless told. */
	bufferevent_set_max_single_write(evhttp_connection_get_bufferevent(
	    evhttp_request_get_connection(req)), HTTP_WRITE_MAX);
	conn_request_whole(req);
	if (http_closing) {
		/* The routes' state is being freed (agentd_drain()). */
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Connection", "close");
		http_fail(req, 503, "shutting_down", "agentd is shutting down");
		return;
	}
	memset(&hr, 0, sizeof hr);
	hr.req = req;
	hr.method = evhttp_request_get_command(req);
	hr.unix_peer = srv->unix_socket;
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
	if (srv->own_auth) {		/* its own limits and auth */
		if (evbuffer_add(in, "", 1) != 0 ||
		    (hr.body = (const char *)evbuffer_pullup(in, -1)) == NULL) {
			http_reply_oom(req);
			return;
		}
		hr.body_len = len;
		srv->route(&hr);
		return;
	}
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

	if ((!hr.unix_peer && strcmp(hr.path, "/healthz") == 0) ||
	    http_page(&hr)) {
		srv->route(&hr);
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
	srv->route(&hr);
}

/* Whether a Content-Type is type, parameters aside. */
static int
http_type_is(const char *ct, const char *type)
{
	size_t	len = strlen(type);

	while (*ct == ' ')
		ct++;
	return (strncasecmp(ct, type, len) == 0 && (ct[len] == '\0' ||
	    ct[len] == ';' || ct[len] == ' ' || ct[len] == '\t'));
}

/*
 * Whether a request comes from a web browser: it names an Origin or a
 * Sec-Fetch-Site, or its User-Agent is a browser's ("Mozilla/...", which
 * every browser sends and no HTTP library does by default).
 */
static int
http_from_browser(const struct http_req *hr)
{
	struct evkeyvalq	*h = evhttp_request_get_input_headers(hr->req);
	const char		*ua;

	if (evhttp_find_header(h, "Origin") != NULL ||
	    evhttp_find_header(h, "Sec-Fetch-Site") != NULL)
		return (1);
	ua = evhttp_find_header(h, "User-Agent");
	return (ua != NULL && strncmp(ua, "Mozilla/", 8) == 0);
}

/* Whether s ends with suffix. */
static int
http_ends_with(const char *s, const char *suffix)
{
	size_t	len = strlen(s), slen = strlen(suffix);

	return (len >= slen && strcmp(s + len - slen, suffix) == 0);
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

/*
 * Answer with raw bytes of a content type, when they fit the budget of
 * answers held (outq.h) at their real size, whatever the route estimated
 * before; else 503 too_busy.
 */
void
http_reply_raw(struct evhttp_request *req, int status, const char *type,
    struct proto_buf *b)
{
	struct proto_err	 err;
	struct proto_buf	 eb = { 0 };

	if (b->oom || outq_admit(b->len, &err) == 0) {
		http_send_raw(req, status, type, b);
		return;
	}
	proto_buf_free(b);
	proto_render_error(&eb, &err, NULL);
	proto_buf_append(&eb, "\n", 1);
	http_send_raw(req, err.status, "application/json", &eb);
}

/* Answer with raw bytes of a content type, as they are. */
static void
http_send_raw(struct evhttp_request *req, int status, const char *type,
    struct proto_buf *b)
{
	struct evkeyvalq	*h;
	struct evbuffer		*out;
	char			 date[40], num[32];

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
	h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Content-Type", type);
	/* evhttp dates HTTP/1.1 answers only. */
	http_date(date, sizeof date);
	evhttp_add_header(h, "Date", date);
	/*
	 * evhttp sends a HEAD answer's body: only say how long it is.  It
	 * gives an HTTP/1.0 answer that is not kept alive no length (the
	 * close ends it): say it all the same.
	 */
	if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD ||
	    req->minor == 0) {
		snprintf(num, sizeof num, "%zu", evbuffer_get_length(out));
		evhttp_add_header(h, "Content-Length", num);
	}
	if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD)
		evbuffer_drain(out, evbuffer_get_length(out));
	if (handing_over)	/* the connection ends with the execve */
		evhttp_add_header(h, "Connection", "close");
	http_count(status);
	evhttp_send_reply(req, status, http_reason(status), out);
	evbuffer_free(out);
}

/*
 * The reason phrase of a status evhttp's tables lack (they stop at 417 and
 * 505: 422 would be "Client Error"), else NULL for evhttp's own.
 */
static const char *
http_reason(int status)
{
	switch (status) {
	case 413:
		return ("Payload Too Large");
	case 415:
		return ("Unsupported Media Type");
	case 422:
		return ("Unprocessable Entity");
	case 429:
		return ("Too Many Requests");
	case 431:
		return ("Request Header Fields Too Large");
	case 507:
		return ("Insufficient Storage");
	}
	return (NULL);
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
	static const struct {
		int		 method;
		const char	*name;
	} names[] = {
		{ EVHTTP_REQ_GET, "GET" }, { EVHTTP_REQ_HEAD, "HEAD" },
		{ EVHTTP_REQ_POST, "POST" }, { EVHTTP_REQ_PUT, "PUT" },
		{ EVHTTP_REQ_DELETE, "DELETE" },
	};
	char	allow[64];
	size_t	i, off = 0;

	/*
	 * A page in a browser may POST text/plain or a form to any site
	 * without asking first; application/json needs a preflight that
	 * agentd never grants.  So a browser's POST must be JSON (stdin's may
	 * be raw bytes); other clients (curl -d, a string body in Node's fetch)
	 * are not browsers and keep working.
	 */
	if ((hr->method & allowed) && hr->method == EVHTTP_REQ_POST &&
	    hr->body_len > 0 && http_from_browser(hr) &&
	    !http_type_is(hr->content_type, "application/json") &&
	    !(http_type_is(hr->content_type, "application/octet-stream") &&
	    http_ends_with(hr->path, "/stdin"))) {
		http_fail(hr->req, 415, "unsupported_media_type", "a browser's "
		    "POST body is application/json (stdin: or "
		    "application/octet-stream), not '%.64s'", hr->content_type);
		return (-1);
	}
	if (hr->method & allowed)
		return (0);
	allow[0] = '\0';
	for (i = 0; i < nitems(names); i++) {
		if (allowed & names[i].method)
			off += snprintf(allow + off, sizeof allow - off, "%s%s",
			    off > 0 ? ", " : "", names[i].name);
	}
	evhttp_add_header(evhttp_request_get_output_headers(hr->req), "Allow",
	    allow);
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
	return (http_watch(req, EV_ET, fn, arg));
}

/* Watch the client of a stream (level-triggered); see http.h. */
struct event *
http_watch_stream(struct evhttp_request *req,
    void (*fn)(evutil_socket_t, short, void *), void *arg)
{
	return (http_watch(req, 0, fn, arg));
}

/* A close watch on req's connection, with the flags et (EV_ET or 0). */
static struct event *
http_watch(struct evhttp_request *req, short et,
    void (*fn)(evutil_socket_t, short, void *), void *arg)
{
	struct evhttp_connection	*evcon;
	struct event			*ev;
	int				 fd;

	evcon = evhttp_request_get_connection(req);
	fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
	ev = event_new(http_base, fd, EV_CLOSED | EV_READ | et | EV_PERSIST,
	    fn, arg);
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
