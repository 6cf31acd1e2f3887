/*
 * outq.c -- the budget of answers waiting to be written; see outq.h.
 */
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "log.h"
#include "outq.h"
#include "proto.h"
#include "util.h"

/* One connection's output, as counted. */
struct outq_conn {
	struct evbuffer_cb_entry *cb;
	uint64_t		  held;		/* bytes counted, of outq_held */
};

static uint64_t	outq_held;			/* bytes, every connection's */
static uint64_t	outq_limit = OUTQ_MAX_DEFAULT;
static size_t	outq_skipping;			/* bytes of the next adds not
						   counted (outq_skip()) */

static void	outq_cb(struct evbuffer *, const struct evbuffer_cb_info *,
		    void *);

/* Set the budget. */
void
outq_set_max(uint64_t max)
{
	outq_limit = max > 0 ? max : OUTQ_MAX_DEFAULT;
}

/*
 * An output buffer grew or drained: follow it.  Bytes skipped (a file sent
 * from the disk) are not counted; what drains comes off what was counted,
 * never below 0, so a skip's error stays within its connection.
 */
static void
outq_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct outq_conn	*c = arg;
	size_t			 add = info->n_added, del = info->n_deleted;
	size_t			 skip;

	skip = add < outq_skipping ? add : outq_skipping;
	outq_skipping -= skip;
	add -= skip;
	if (del > c->held)
		del = (size_t)c->held;
	c->held += add - del;
	outq_held += add;
	outq_held -= del;
}

/* Count a connection's output from now on. */
struct outq_conn *
outq_watch(struct bufferevent *bev)
{
	struct outq_conn	*c;

	c = xcalloc(1, sizeof *c);
	if ((c->cb = evbuffer_add_cb(bufferevent_get_output(bev), outq_cb,
	    c)) == NULL)
		fatal("%s: out of memory", __func__);
	return (c);
}

/* Forget a connection's output, what it still holds too. */
void
outq_unwatch(struct bufferevent *bev, struct outq_conn *c)
{
	evbuffer_remove_cb_entry(bufferevent_get_output(bev), c->cb);
	outq_held -= c->held;
	free(c);
}

/* Leave the next n bytes added to any output uncounted (0: stop). */
void
outq_skip(size_t n)
{
	outq_skipping = n;
}

/* Whether want bytes fit now, leaving the reserve free if reserve. */
static int
outq_room(size_t want, int reserve)
{
	uint64_t	limit = outq_limit;

	if (reserve)
		limit -= outq_limit / OUTQ_RESERVE_SHARE;
	return (want <= limit && outq_held <= limit - want);
}

/* Whether an answer of want bytes fits the budget now (see outq.h). */
int
outq_fits(size_t want)
{
	return (outq_room(want, want > OUTQ_SMALL));
}

/* Whether a stream's want bytes fit, leaving the reserve free. */
int
outq_fits_stream(size_t want)
{
	return (outq_room(want, 1));
}

/* 503 too_busy into err, for want bytes that do not fit. */
static int
outq_refuse(size_t want, struct proto_err *err)
{
	static int64_t	last_ms;
	static uint64_t	quiet;
	int64_t		now = clock_mono_ms();

	/* Once a second at most: a console under qemu is slow to write. */
	if (now - last_ms >= 1000) {
		log_info("%s: %zu bytes refused: %llu held by clients that do "
		    "not read, budget %llu (and %llu more refused)", __func__,
		    want, (unsigned long long)outq_held,
		    (unsigned long long)outq_limit, (unsigned long long)quiet);
		last_ms = now;
		quiet = 0;
	} else
		quiet++;
	return (proto_fail(err, 503, "too_busy", "answers waiting to be read "
	    "by clients hold %llu bytes; one of %zu more would pass "
	    "--max-answer-bytes %llu: read them, or ask for less",
	    (unsigned long long)outq_held, want,
	    (unsigned long long)outq_limit));
}

/* Whether an answer of want bytes fits the budget now, else 503. */
int
outq_admit(size_t want, struct proto_err *err)
{
	return (outq_fits(want) ? 0 : outq_refuse(want, err));
}

/* Whether a new stream of want bytes fits the budget now, else 503. */
int
outq_admit_stream(size_t want, struct proto_err *err)
{
	return (outq_fits_stream(want) ? 0 : outq_refuse(want, err));
}

/* Count n bytes more as held: promised, not rendered yet. */
void
outq_reserve(size_t n)
{
	outq_held += n;
}

/* Count n bytes fewer: rendered (and counted as output), or never. */
void
outq_release(size_t n)
{
	outq_held -= n < outq_held ? n : outq_held;
}

/* Bytes held now. */
uint64_t
outq_bytes(void)
{
	return (outq_held);
}

/* The budget. */
uint64_t
outq_max(void)
{
	return (outq_limit);
}
