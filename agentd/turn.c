/*
 * turn.c -- a loop turn's share (see turn.h).
 */
#include <stdlib.h>

#include <event2/event.h>

#include "turn.h"
#include "util.h"

struct turn {
	struct event	*ev;		/* ends the turn */
	int		 open;		/* ev is active */
};

static void	turn_end_cb(evutil_socket_t, short, void *);

/* A turn of base's loop. */
struct turn *
turn_new(struct event_base *base)
{
	struct turn	*t = xcalloc(1, sizeof *t);

	if ((t->ev = event_new(base, -1, 0, turn_end_cb, t)) == NULL)
		fatal("%s: out of memory", __func__);
	return (t);
}

/* Free a turn. */
void
turn_free(struct turn *t)
{
	if (t == NULL)
		return;
	event_free(t->ev);
	free(t);
}

/*
 * Look at the turn; the first look activates the event, which runs after
 * the callbacks already queued in this turn and ends it.
 */
int
turn_look(struct turn *t)
{
	if (t->open)
		return (0);
	t->open = 1;
	event_active(t->ev, EV_TIMEOUT, 1);
	return (1);
}

/* Whether the turn is open. */
int
turn_open(const struct turn *t)
{
	return (t->open);
}

/* The turn's queued callbacks ran: the next look starts another. */
static void
turn_end_cb(evutil_socket_t fd, short events, void *arg)
{
	struct turn	*t = arg;

	t->open = 0;
}
