/*
 * turn.h -- a loop turn's share: "the first look in a turn arms an event
 * that ends the turn".  Work that a turn may do only so much of (capture.c's
 * bytes read, sse.c's time pulling) asks turn_look() before each step; the
 * first look of a turn activates an event that runs after the callbacks
 * already queued in that turn, and the next look after it starts a new
 * turn.  A leaf: libevent only.  One owner thread: the loop's.
 */
#ifndef AGENTD_TURN_H
#define AGENTD_TURN_H

struct event_base;
struct turn;

/* A turn of base's loop; never NULL (fatal on exhaustion). */
struct turn	*turn_new(struct event_base *);
void		 turn_free(struct turn *);

/*
 * Look at the turn: 1 when this look starts it (the caller starts its count
 * again), 0 when the turn was already open.
 */
int		 turn_look(struct turn *);

/* Whether the turn is open: looked at, and its event has not run yet. */
int		 turn_open(const struct turn *);

#endif
