/*
 * hold.c -- a request held for a long-poll: its deadline timer and the
 * watch of its client's close.
 */
#include <stdlib.h>

#include <event2/event.h>
#include <event2/http.h>

#include "hold.h"
#include "http.h"
#include "log.h"
#include "util.h"

struct hold {
	struct evhttp_request	*req;
	const struct hold_ops	*ops;
	void			*arg;
	int64_t			 deadline_ms;	/* monotonic */
	struct event		*timer;		/* the watch's start, then the
						   deadline */
	struct event		*closed;	/* the client's close, or NULL
						   before HOLD_WATCH_AFTER_MS */
};

static struct event_base	*hold_base;	/* the loop */

static void	hold_timer(evutil_socket_t, short, void *);
static void	hold_closed(evutil_socket_t, short, void *);

/* Set the loop the deadlines run on. */
void
hold_init(struct event_base *base)
{
	hold_base = base;
}

/* Hold a request (see hold.h). */
struct hold *
hold_new(struct evhttp_request *req, int64_t ms, const struct hold_ops *ops,
    void *arg)
{
	struct hold	*h;
	struct timeval	 tv;

	h = xcalloc(1, sizeof *h);
	h->req = req;
	h->ops = ops;
	h->arg = arg;
	h->deadline_ms = clock_mono_ms() + ms;
	if ((h->timer = evtimer_new(hold_base, hold_timer, h)) == NULL)
		fatal("%s: out of memory", __func__);
	evtimer_add(h->timer, timeval_ms(&tv, ms < HOLD_WATCH_AFTER_MS ? ms :
	    HOLD_WATCH_AFTER_MS));
	return (h);
}

/* Milliseconds until the deadline. */
int64_t
hold_left_ms(const struct hold *h)
{
	return (h->deadline_ms - clock_mono_ms());
}

/* Move the deadline. */
void
hold_set_deadline(struct hold *h, int64_t ms)
{
	struct timeval	tv;

	h->deadline_ms = clock_mono_ms() + ms;
	if (h->closed != NULL || ms < HOLD_WATCH_AFTER_MS)
		evtimer_add(h->timer, timeval_ms(&tv, ms));
}

/* Stop holding. */
void
hold_free(struct hold *h)
{
	event_free(h->timer);
	if (h->closed != NULL)
		event_free(h->closed);
	free(h);
}

/*
 * The timer: HOLD_WATCH_AFTER_MS into the wait, watch for the client's
 * close and wait on; at the deadline, hand over.
 */
static void
hold_timer(evutil_socket_t fd, short events, void *arg)
{
	struct hold	*h = arg;
	struct timeval	 tv;
	int64_t		 left = hold_left_ms(h);

	if (h->closed == NULL && left > 0) {
		h->closed = http_watch_client(h->req, hold_closed, h);
		evtimer_add(h->timer, timeval_ms(&tv, left));
		return;
	}
	h->ops->deadline(h->arg);
}

/* The client's fd is readable or closed: free the connection if gone. */
static void
hold_closed(evutil_socket_t fd, short events, void *arg)
{
	struct hold			*h = arg;
	struct evhttp_connection	*evcon;

	if (!http_client_gone(fd, events))
		return;		/* a pipelined request, not a close */
	evcon = evhttp_request_get_connection(h->req);
	log_debug("%s: client fd %d went away", __func__, (int)fd);
	h->ops->gone(h->arg);
	evhttp_connection_free(evcon);
}
