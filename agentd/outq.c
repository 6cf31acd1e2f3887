/*
 * outq.c -- the budget of answers waiting to be written; see outq.h.
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "log.h"
#include "outq.h"
#include "proto.h"
#include "util.h"

static uint64_t	outq_held;			/* bytes, every connection's */
static uint64_t	outq_limit = OUTQ_MAX_DEFAULT;

static void	outq_cb(struct evbuffer *, const struct evbuffer_cb_info *,
		    void *);

/* Set the budget. */
void
outq_set_max(uint64_t max)
{
	outq_limit = max > 0 ? max : OUTQ_MAX_DEFAULT;
}

/* An output buffer grew or drained: follow it. */
static void
outq_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	outq_held += info->n_added;
	outq_held -= info->n_deleted < outq_held ? info->n_deleted : outq_held;
}

/* Count a connection's output from now on. */
struct evbuffer_cb_entry *
outq_watch(struct bufferevent *bev)
{
	struct evbuffer_cb_entry	*e;

	if ((e = evbuffer_add_cb(bufferevent_get_output(bev), outq_cb,
	    NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	return (e);
}

/* Forget a connection's output, what it still holds too. */
void
outq_unwatch(struct bufferevent *bev, struct evbuffer_cb_entry *e)
{
	struct evbuffer	*out = bufferevent_get_output(bev);
	size_t		 len = evbuffer_get_length(out);

	evbuffer_remove_cb_entry(out, e);
	outq_held -= len < outq_held ? len : outq_held;
}

/* Whether an answer of want bytes fits the budget now. */
int
outq_admit(size_t want, struct proto_err *err)
{
	if (outq_held + want <= outq_limit)
		return (0);
	log_info("%s: %zu bytes refused: %llu held by clients that do not "
	    "read, budget %llu", __func__, want,
	    (unsigned long long)outq_held, (unsigned long long)outq_limit);
	return (proto_fail(err, 503, "too_busy", "answers waiting to be read "
	    "by clients hold %llu bytes; one of %zu more would pass "
	    "--max-answer-bytes %llu: read them, or ask for less",
	    (unsigned long long)outq_held, want,
	    (unsigned long long)outq_limit));
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
