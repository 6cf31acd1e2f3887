/*
 * http.h -- the HTTP side of agentd: listeners (TCP and the unix socket),
 * auth, routing, and the one shape of answers.
 *
 * What happens to a connection before a handler sees its request (limits,
 * the checks of a request's head, deadlines) is conn.h's.
 *
 * Both transports serve the same routes.  TCP requests carry the token when
 * one is configured; unix-socket requests are checked by the peer's uid
 * (SO_PEERCRED: root or agentd's own uid) and need no token.
 * Event loop thread only.
 */
#ifndef AGENTD_HTTP_H
#define AGENTD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

#include "httpcore.h"	/* the limits, the token, the date, the counters */
#include "proto.h"


struct event;
struct event_base;
struct evhttp_request;
struct config;

/* A request on its way through a handler. */
struct http_req {
	struct evhttp_request	*req;
	int			 method;	/* EVHTTP_REQ_* */
	int			 unix_peer;	/* came over the unix socket */
	const char		*path;
	const char		*query;		/* raw, "" when none */
	const char		*body;		/* contiguous, NUL-terminated */
	size_t			 body_len;
	const char		*content_type;	/* "" when none */
};

/* A request's handler: answers it now, or keeps it and answers later. */
typedef void (*http_route_fn)(struct http_req *);

/*
 * Open the listeners on base and serve every request through route.
 * Returns 0, or -1 after logging why.
 */
int	http_start(struct event_base *, const struct config *, http_route_fn);
/*
 * Listen on "ADDR:PORT" (and its twin, as --listen) for requests that go
 * to route, not the API's: no --max-body check and no token check here
 * (route does its own; the connection's admission, conn.h, still applies).
 * After http_start(); every call shares one route (envd's).  Returns 0, or
 * -1 after logging why.
 */
int	http_listen_routes(const char *spec, http_route_fn route);
/* Stop accepting (shutdown); requests that still come get 503. */
void	http_stop_accepting(void);
/* Free everything (after shutdown). */
void	http_free(void);

/*
 * Answer 405 unless the method is among allowed, or 415 for a POST body
 * that is not application/json (on .../stdin, application/octet-stream
 * too); 0 when neither.
 */
int	http_method(struct http_req *, int allowed);

/*
 * Watch the client of a request a handler holds (evhttp stops reading
 * then): fn(fd, events, arg) runs when the client closes or resets, and on
 * pipelined data too, which http_client_gone() tells apart.  The event is
 * the caller's to event_free().
 */
struct event *http_watch_client(struct evhttp_request *,
	    void (*fn)(evutil_socket_t, short, void *), void *arg);
/*
 * The same for a request whose answer is written while it is watched (a
 * stream, once its head went: evhttp reads the connection again then, so
 * pipelined bytes do not keep the fd readable).  Level-triggered, where
 * http_watch_client() is edge-triggered: libevent's epoll cannot mix the
 * two on one fd, and the connection's writes would wait for an edge that
 * never comes once a write was cut short (a stream stalled with its client
 * idle and 350 KB unsent).
 */
struct event *http_watch_stream(struct evhttp_request *,
	    void (*fn)(evutil_socket_t, short, void *), void *arg);
/* In a watcher's callback: whether the client went away. */
int	http_client_gone(evutil_socket_t fd, short events);

/* Answer with a JSON body; takes the buffer's memory. */
void	http_reply(struct evhttp_request *, int status, struct proto_buf *);
/* Answer with an error, and the session beside it if s is set. */
void	http_reply_error(struct evhttp_request *, const struct proto_err *,
	    const struct proto_session *s);
/* Answer with an error built here. */
void	http_fail(struct evhttp_request *, int status, const char *code,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Start an empty b with a kept large buffer (want bytes), if there is one. */
void	http_buf_take(struct proto_buf *b, size_t want);
/* Answer with raw bytes of a content type; takes the buffer's memory. */
void	http_reply_raw(struct evhttp_request *, int status, const char *type,
	    struct proto_buf *);

#endif /* AGENTD_HTTP_H */
