/*
 * http.c -- listeners, auth and the shape of answers; routing is api.c's.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
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
#define HTTP_ACCEPT_PAUSE_MS	100	/* accept rests this long on EMFILE */
#define HTTP_CODES_MAX		32	/* distinct status codes counted */
#define HTTP_BODY_SLACK		65536	/* bytes evhttp reads past --max-body */

/* One listening socket. */
struct http_listener {
	struct evhttp_bound_socket	*bound;
	struct evconnlistener		*lev;
	struct event			*resume;	/* after EMFILE */
	char				*name;
	int				 unix_socket;
};

static struct evhttp		*http_tcp;
static struct evhttp		*http_unix;
static struct http_listener	*listeners;
static size_t			 nlisteners;
static const struct config	*cfg;
static char			*unix_path;	/* to unlink at the end */
static struct http_code_count	 codes[HTTP_CODES_MAX];
static size_t			 ncodes;

static struct evhttp	*http_new(int unix_socket);
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

/* Create an evhttp serving the API. */
static struct evhttp *
http_new(int unix_socket)
{
	struct evhttp	*h;

	if ((h = evhttp_new(agentd_base)) == NULL)
		fatal("%s: evhttp_new failed", __func__);
	evhttp_set_gencb(h, http_dispatch, unix_socket ? &http_unix : NULL);
	evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
	    EVHTTP_REQ_PATCH);
	/*
	 * evhttp answers bodies over its own limit with an HTML page; agentd
	 * checks --max-body itself to answer in the API's shape, and leaves
	 * evhttp a limit twice as high as the memory bound.
	 */
	evhttp_set_max_body_size(h, (ev_ssize_t)(2 * cfg->max_body +
	    HTTP_BODY_SLACK));
	evhttp_set_timeout(h, (int)((cfg->idle_timeout_ms + 999) / 1000));
	evhttp_set_flags(h, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_default_content_type(h, "application/json");
	return (h);
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
	if (res->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, res->ai_addr, res->ai_addrlen) == -1 ||
	    listen(fd, HTTP_BACKLOG) == -1)
		goto fail;
	freeaddrinfo(res);
	http_add_listener(http_tcp, fd, spec, 0);
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
	http_add_listener(http_unix, fd, path, 1);
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
	size_t		 i;

	if (error == EINTR || error == EAGAIN || error == ECONNABORTED)
		return;
	log_warn("%s: accept: %s; pausing %d ms", __func__, strerror(error),
	    HTTP_ACCEPT_PAUSE_MS);
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

/* Open every listener. */
int
http_start(const struct config *c)
{
	size_t	i;

	cfg = c;
	http_tcp = http_new(0);
	http_unix = http_new(1);
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
	if (http_tcp != NULL)
		evhttp_free(http_tcp);
	if (http_unix != NULL)
		evhttp_free(http_unix);
	http_tcp = http_unix = NULL;
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
	struct http_req		 hr;
	const char		*ct;
	size_t			 len;

	agentd_stats.http_requests++;
	memset(&hr, 0, sizeof hr);
	hr.req = req;
	hr.method = evhttp_request_get_command(req);
	hr.unix_peer = arg != NULL;
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
	if (hr.body == NULL)
		fatal("%s: out of memory", __func__);

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

/* Free a proto_buf's memory once evbuffer is done with it. */
static void
http_free_buf(const void *data, size_t len, void *arg)
{
	free(arg);
}

/* Answer with raw bytes of a content type. */
void
http_reply_raw(struct evhttp_request *req, int status, const char *type,
    struct proto_buf *b)
{
	struct evbuffer	*out;

	if (b->oom) {
		proto_buf_free(b);
		fatal("%s: out of memory", __func__);
	}
	if ((out = evbuffer_new()) == NULL)
		fatal("%s: out of memory", __func__);
	if (b->len > 0) {
		if (evbuffer_add_reference(out, b->data, b->len, http_free_buf,
		    b->data) != 0)
			fatal("%s: out of memory", __func__);
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
