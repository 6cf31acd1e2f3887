/*
 * hold.h -- a request a handler keeps to answer later (a long-poll): its
 * deadline, and its client's going away.
 *
 * evhttp stops reading a connection while one of its requests is out, so
 * a client that closes is not noticed by evhttp: a hold watches the fd
 * with an event of its own (http_watch_client()), added only once the
 * wait has lasted HOLD_WATCH_AFTER_MS, since most waits (a keystroke's
 * echo, a short command) end before and skip its two epoll_ctl().
 * Event loop thread only.
 */
#ifndef AGENTD_HOLD_H
#define AGENTD_HOLD_H

#include <stdint.h>

#define HOLD_WATCH_AFTER_MS	10	/* watch the client's close from then on */

struct event_base;
struct evhttp_request;
struct hold;

/* What happens to a held request; arg is hold_new()'s. */
struct hold_ops {
	/* The deadline passed: answer the request and hold_free() it. */
	void	(*deadline)(void *arg);
	/*
	 * The client went away: hold_free() it without answering; the hold
	 * frees the connection once this returns.
	 */
	void	(*gone)(void *arg);
};

/* Set the loop the deadlines run on (at the start). */
void		 hold_init(struct event_base *);

/* Hold req for ms at most. */
struct hold	*hold_new(struct evhttp_request *req, int64_t ms,
		    const struct hold_ops *ops, void *arg);
/* Milliseconds left until the deadline (<= 0: passed). */
int64_t		 hold_left_ms(const struct hold *);
/* Move the deadline to ms from now. */
void		 hold_set_deadline(struct hold *, int64_t ms);
/* Stop holding (the caller answers the request, or not, itself). */
void		 hold_free(struct hold *);

#endif /* AGENTD_HOLD_H */
