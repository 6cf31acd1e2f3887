/*
 * outq.h -- bytes of answers waiting to be written to clients: every
 * connection's output buffer, counted as it grows and drains, against one
 * budget (--max-answer-bytes).  A client that asks for big answers and never
 * reads them holds their memory; past the budget a new big answer is
 * refused (503 too_busy) instead of taking the machine's memory.  Event
 * loop thread only.
 */
#ifndef AGENTD_OUTQ_H
#define AGENTD_OUTQ_H

#include <stddef.h>
#include <stdint.h>

struct bufferevent;
struct evbuffer_cb_entry;
struct proto_err;

#define OUTQ_MAX_DEFAULT	(128ull << 20)	/* bytes of all answers held */

/* The budget, in bytes (0: the default). */
void	 outq_set_max(uint64_t);
/* Count bev's output from now on (it must be empty); the handle unwatches. */
struct evbuffer_cb_entry *outq_watch(struct bufferevent *);
/* Stop counting bev's output and forget what it still holds. */
void	 outq_unwatch(struct bufferevent *, struct evbuffer_cb_entry *);
/*
 * Whether an answer of want bytes may be made now: 0, or -1 with err
 * filled (503 too_busy) when the answers held and it would pass the budget.
 */
int	 outq_admit(size_t want, struct proto_err *err);
/* Bytes held now, and the budget. */
uint64_t outq_bytes(void);
uint64_t outq_max(void);

#endif /* AGENTD_OUTQ_H */
