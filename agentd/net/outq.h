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
struct outq_conn;
struct proto_err;

#define OUTQ_MAX_DEFAULT	(128ull << 20)	/* bytes of all answers held */
#define OUTQ_SMALL		(64 * 1024) /* bytes: an answer this small (an
					   error, /healthz) may use the reserve */
#define OUTQ_RESERVE_SHARE	32	/* the reserve: 1/32 of the budget */

/* The budget, in bytes (0: the default). */
void	 outq_set_max(uint64_t);
/* Count bev's output from now on (it must be empty); the handle unwatches. */
struct outq_conn *outq_watch(struct bufferevent *);
/* Stop counting bev's output and forget what it still holds. */
void	 outq_unwatch(struct bufferevent *, struct outq_conn *);
/*
 * Leave the next n bytes added to any connection's output uncounted, until
 * outq_skip(0): around an answer whose body is a file segment sent from the
 * disk (sendfile), which holds no memory.  The answer's head is taken out
 * of n first: an error of a few hundred bytes at most.
 */
void	 outq_skip(size_t n);
/*
 * Whether an answer of want bytes may be made now: 0, or -1 with err
 * filled (503 too_busy) when the answers held and it would pass the budget.
 * Answers larger than OUTQ_SMALL must leave the reserve (1/32 of the
 * budget) free, so that small answers and the 503s themselves still go
 * out when big ones fill the rest.
 */
int	 outq_admit(size_t want, struct proto_err *err);
/* outq_admit() without the error and the log line. */
int	 outq_fits(size_t want);
/*
 * The same for a stream (sse.h) whatever want: its bytes always leave the
 * reserve free, since a stream takes budget again and again.
 */
int	 outq_fits_stream(size_t want);
int	 outq_admit_stream(size_t want, struct proto_err *err);
/*
 * Count n bytes more as held (reserve), or n fewer (release): an answer
 * admitted whole but rendered as it is sent (sse.h's sse_promise()), whose
 * bytes not rendered yet are counted until its output takes them; a
 * stream's share of the budget while it is open (sse.c).
 */
void	 outq_reserve(size_t n);
void	 outq_release(size_t n);
/* Bytes held now, and the budget. */
uint64_t outq_bytes(void);
uint64_t outq_max(void);

#endif /* AGENTD_OUTQ_H */
