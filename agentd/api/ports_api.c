/*
 * ports_api.c -- GET /v1/ports and its long-poll on one port.
 */
#include <sys/queue.h>

#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "config.h"
#include "forward.h"
#include "hold.h"
#include "http.h"
#include "ports.h"
#include "ports_api.h"
#include "proto.h"
#include "stop.h"
#include "util.h"

/* A request waiting for something to listen on a port. */
struct ports_waiter {
	TAILQ_ENTRY(ports_waiter)	 entry;
	struct evhttp_request		*req;
	struct hold			*hold;
	int				 port;
};
static TAILQ_HEAD(, ports_waiter) ports_waiters =
    TAILQ_HEAD_INITIALIZER(ports_waiters);
static int	ports_started;		/* ports_init() done */
static struct event_base	*ports_base;	/* the loop */
static const struct config	*ports_cfg;
static int64_t			 ports_feed_ms;	/* the feed's refresh: at most
						   FORWARD_INTERVAL_MS while
						   forwarding */

static void	ports_api_start(void);
static int	ports_api_held(int port);
static void	ports_api_answer(struct evhttp_request *, int port);
static void	ports_api_done(struct ports_waiter *, int answer);
static void	ports_api_changed(void);
static void	ports_api_deadline(void *);
static void	ports_api_gone(void *);

static const struct hold_ops	ports_hold_ops = {
	ports_api_deadline, ports_api_gone
};

/* Start the event feed's refreshes (nothing is read yet). */
void
ports_api_init(struct event_base *base, const struct config *cfg)
{
	ports_base = base;
	ports_cfg = cfg;
	ports_api_start();
}

/* Start what ports_api_init() starts, again after ports_api_stop(). */
static void
ports_api_start(void)
{
	if (ports_started)
		return;
	ports_started = 1;
	ports_init(ports_base, ports_cfg->ports_interval_ms,
	    ports_cfg->pid1);
	ports_set_changed(ports_api_changed);
	ports_feed_ms = ports_cfg->ports_feed_interval_ms;
	if (ports_cfg->forward_localhost &&
	    forward_init(ports_base, ports_cfg->forward_address,
	    ports_cfg->forward_max, ports_cfg->forward_max_conns,
	    ports_cfg->forward_total_conns, ports_cfg->forward_buffer) == 0 &&
	    (ports_feed_ms == 0 || ports_feed_ms > FORWARD_INTERVAL_MS))
		ports_feed_ms = FORWARD_INTERVAL_MS; /* forwards within a second */
	if (ports_feed_ms > 0)
		ports_feed(ports_feed_ms);
}

/* The feed's baseline, before agentd starts a process (ports_api.h). */
void
ports_api_prime(void)
{
	if (ports_cfg == NULL)
		return;
	ports_api_start();
	if (ports_feed_ms > 0)
		ports_prime();
}

/* GET /v1/ports[?port=P[&wait_ms=W]] */
void
ports_route(struct http_req *hr)
{
	struct ports_waiter	*w;
	struct proto_query	 q;
	struct proto_err	 err;
	int			 error;

	if (strcmp(hr->path, "/v1/ports") != 0 &&
	    strcmp(hr->path, "/v1/ports/") != 0) {
		http_fail(hr->req, 404, "not_found", "no route %s", hr->path);
		return;
	}
	if (http_method(hr, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD) != 0)
		return;
	if (proto_parse_query(hr->query, &q, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	ports_api_start();
	if ((error = ports_refresh()) != 0) {
		http_fail(hr->req, 503, "ports_unavailable", "reading the "
		    "sockets with sock_diag netlink failed: %s",
		    strerror(-error));
		return;
	}
	if (q.port > 0 && q.wait_ms > 0 && !ports_api_held(q.port)) {
		if (agentd_stopping()) {
			http_fail(hr->req, 503, "shutting_down",
			    "agentd is shutting down");
			return;
		}
		w = xcalloc(1, sizeof *w);
		w->req = hr->req;
		w->port = q.port;
		w->hold = hold_new(hr->req, q.wait_ms, &ports_hold_ops, w);
		TAILQ_INSERT_TAIL(&ports_waiters, w, entry);
		ports_watch(1);
		return;
	}
	ports_api_answer(hr->req, q.port);
}

/* Whether some socket is on port, its pid looked up. */
static int
ports_api_held(int port)
{
	const struct ports_set	*set = ports_current();
	size_t			 i;

	for (i = 0; i < set->n; i++) {
		if (set->e[i].port == port && set->e[i].resolved)
			return (1);
	}
	return (0);
}

/* Answer with the list, or the entries of port (> 0) only. */
static void
ports_api_answer(struct evhttp_request *req, int port)
{
	const struct ports_set		*set = ports_current();
	const struct ports_entry	*e;
	struct proto_buf		 b = { 0 };
	const char			*sid, *sep = "", *on;
	size_t				 i, conns;

	proto_buf_printf(&b, "{\"ports\": [");
	for (i = 0; i < set->n; i++) {
		e = &set->e[i];
		if (port > 0 && e->port != port)
			continue;
		proto_buf_printf(&b, "%s{\"address\": \"%s\", \"port\": %u, "
		    "\"protocol\": \"%s\", \"pid\": ", sep, e->address,
		    (unsigned)e->port, ports_proto_name(e->proto));
		if (e->pid > 0)
			proto_buf_printf(&b, "%ld", (long)e->pid);
		else
			proto_buf_printf(&b, "null");
		proto_buf_printf(&b, ", \"session\": ");
		if ((sid = ports_session(e)) != NULL)
			proto_buf_json_string(&b, sid, strlen(sid));
		else
			proto_buf_printf(&b, "null");
		proto_buf_printf(&b, ", \"forward\": ");
		if ((on = forward_of(e, &conns)) != NULL)
			proto_buf_printf(&b, "{\"forwarded_on\": \"%s\", "
			    "\"connections\": %zu}", on, conns);
		else
			proto_buf_printf(&b, "null");
		proto_buf_printf(&b, "}");
		sep = ", ";
	}
	proto_buf_printf(&b, "]}");
	http_reply(req, 200, &b);
}

/* Unlink and free a waiter, answering it first if asked. */
static void
ports_api_done(struct ports_waiter *w, int answer)
{
	TAILQ_REMOVE(&ports_waiters, w, entry);
	hold_free(w->hold);
	ports_watch(0);
	if (answer)
		ports_api_answer(w->req, w->port);
	free(w);
}

/* After a refresh: answer the waiters whose port is now listened on. */
static void
ports_api_changed(void)
{
	struct ports_waiter	*w, *next;

	forward_sync(ports_current());
	for (w = TAILQ_FIRST(&ports_waiters); w != NULL; w = next) {
		next = TAILQ_NEXT(w, entry);
		if (ports_api_held(w->port))
			ports_api_done(w, 1);
	}
}

/* A waiter's deadline: look once more, then answer whatever is there. */
static void
ports_api_deadline(void *arg)
{
	struct ports_waiter	*w = arg;

	/* Out of the list while the refresh answers the others. */
	TAILQ_REMOVE(&ports_waiters, w, entry);
	ports_refresh();
	TAILQ_INSERT_HEAD(&ports_waiters, w, entry);
	ports_api_done(w, 1);
}

/* A waiter's client went away. */
static void
ports_api_gone(void *arg)
{
	ports_api_done(arg, 0);
}

/* The shutdown began: end every wait with 503 shutting_down. */
void
ports_api_stop(void)
{
	struct ports_waiter	*w;

	while ((w = TAILQ_FIRST(&ports_waiters)) != NULL) {
		http_fail(w->req, 503, "shutting_down",
		    "agentd is shutting down");
		ports_api_done(w, 0);
	}
}

/* Answer every waiter and close the netlink socket. */
void
ports_api_free(void)
{
	struct ports_waiter	*w;

	while ((w = TAILQ_FIRST(&ports_waiters)) != NULL)
		ports_api_done(w, 1);
	if (ports_started) {
		forward_free();
		ports_free();
	}
	ports_started = 0;
}
