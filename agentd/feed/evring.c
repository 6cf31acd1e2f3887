/*
 * evring.c -- the bounded ring of sandbox events (see evring.h).
 *
 * Events are held in a circular array of max_events slots: the oldest at
 * slot head, ids contiguous from there, so the slot of an id is found by
 * arithmetic.  Each event's JSON is rendered once, when it is pushed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evring.h"
#include "util.h"

/* One held event. */
struct evring_entry {
	uint64_t	 id;
	char		*type;
	char		*session;
	char		*json;
	size_t		 len;
	size_t		 cost;		/* bytes it counts for */
};

struct evring {
	struct evring_entry	*slots;
	size_t			 cap;		/* max_events */
	size_t			 head;		/* slot of the oldest */
	size_t			 count;
	size_t			 max_bytes;
	size_t			 bytes;
	uint64_t		 newest;
	uint64_t		 dropped;
};

static void	evring_drop_oldest(struct evring *);

/* A ring of max_events events and max_bytes bytes at most. */
struct evring *
evring_new(size_t max_events, size_t max_bytes)
{
	struct evring	*r;

	r = xcalloc(1, sizeof *r);
	r->cap = max_events > 0 ? max_events : 1;
	r->slots = xcalloc(r->cap, sizeof *r->slots);
	r->max_bytes = max_bytes;
	return (r);
}

/* Free the ring and its events. */
void
evring_free(struct evring *r)
{
	if (r == NULL)
		return;
	while (r->count > 0)
		evring_drop_oldest(r);
	free(r->slots);
	free(r);
}

/* Drop the oldest event. */
static void
evring_drop_oldest(struct evring *r)
{
	struct evring_entry	*e = &r->slots[r->head];

	r->bytes -= e->cost;
	free(e->type);
	free(e->session);
	free(e->json);
	memset(e, 0, sizeof *e);
	r->head = (r->head + 1) % r->cap;
	r->count--;
	r->dropped++;
}

/* Append an event, dropping the oldest ones it needs room from. */
uint64_t
evring_push(struct evring *r, const char *type, const char *session,
    char *json, size_t len)
{
	struct evring_entry	*e;
	size_t			 cost;

	cost = len + strlen(type) + 1 + EVRING_ENTRY_BYTES +
	    (session != NULL ? strlen(session) + 1 : 0);
	while (r->count > 0 &&
	    (r->count == r->cap || r->bytes + cost > r->max_bytes))
		evring_drop_oldest(r);
	e = &r->slots[(r->head + r->count) % r->cap];
	e->id = ++r->newest;
	e->type = xstrdup(type);
	e->session = session != NULL ? xstrdup(session) : NULL;
	e->json = json;
	e->len = len;
	e->cost = cost;
	r->bytes += cost;
	r->count++;
	return (e->id);
}

/* Continue another ring: the ids and the drops so far. */
int
evring_resume(struct evring *r, uint64_t newest, uint64_t dropped)
{
	if (r->count > 0 || r->newest != 0)
		return (-EBUSY);
	r->newest = newest;
	r->dropped = dropped;
	return (0);
}

/* The newest id, 0 before the first event. */
uint64_t
evring_newest(const struct evring *r)
{
	return (r->newest);
}

/* Counters for /metrics. */
void
evring_stats(const struct evring *r, struct evring_stats *st)
{
	st->newest = r->newest;
	st->held = r->count;
	st->bytes = r->bytes;
	st->dropped = r->dropped;
	st->max_events = r->cap;
	st->max_bytes = r->max_bytes;
}

/* Whether f keeps an event of type about session. */
int
evring_match(const struct evring_filter *f, const char *type,
    const char *session)
{
	size_t	i;

	if (f == NULL)
		return (1);
	if (f->session != NULL &&
	    (session == NULL || strcmp(f->session, session) != 0))
		return (0);
	if (f->ntypes == 0)
		return (1);
	for (i = 0; i < f->ntypes; i++)
		if (strcmp(f->types[i], type) == 0)
			return (1);
	return (0);
}

/* Read the events after cursor that f keeps. */
int
evring_read(const struct evring *r, uint64_t cursor,
    const struct evring_filter *f, struct evring_event *out, size_t max,
    struct evring_result *res)
{
	const struct evring_entry	*e;
	uint64_t			 oldest, id;

	memset(res, 0, sizeof *res);
	if (cursor > r->newest)
		return (-ERANGE);
	oldest = r->newest - r->count + 1;	/* newest + 1 when empty */
	res->cursor = cursor;
	if (cursor + 1 < oldest) {
		res->dropped = oldest - 1 - cursor;
		res->cursor = oldest - 1;
	}
	for (id = res->cursor + 1; id <= r->newest; id++) {
		e = &r->slots[(r->head + (id - oldest)) % r->cap];
		if (evring_match(f, e->type, e->session)) {
			if (res->n == max)
				break;
			out[res->n].id = e->id;
			out[res->n].type = e->type;
			out[res->n].session = e->session;
			out[res->n].json = e->json;
			out[res->n].json_len = e->len;
			res->n++;
		}
		res->cursor = id;
	}
	return (0);
}

/* Whether a type name is well formed. */
static int
evring_type_ok(const char *t, size_t len)
{
	size_t	i;

	if (len == 0 || len > EVRING_TYPE_MAX)
		return (0);
	for (i = 0; i < len; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyz0123456789._-",
		    t[i]) == NULL || t[i] == '\0')
			return (0);
	return (1);
}

/* Fill f from a session id and a comma-separated list of types. */
int
evring_filter_set(struct evring_filter *f, const char *session,
    const char *types, char *err, size_t errlen)
{
	const char	*p, *comma;
	size_t		 len;

	memset(f, 0, sizeof *f);
	if (session != NULL && *session != '\0')
		f->session = xstrdup(session);
	if (types == NULL || *types == '\0')
		return (0);
	for (p = types;; p = comma + 1) {
		comma = strchr(p, ',');
		len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (!evring_type_ok(p, len)) {
			snprintf(err, errlen, "types: '%.*s' is not an event "
			    "type (lowercase letters, digits and . _ -, %d "
			    "bytes at most)", (int)(len > EVRING_TYPE_MAX ?
			    EVRING_TYPE_MAX : len), p, EVRING_TYPE_MAX);
			evring_filter_free(f);
			return (-1);
		}
		if (f->ntypes == EVRING_TYPES_MAX) {
			snprintf(err, errlen, "types: %d types at most",
			    EVRING_TYPES_MAX);
			evring_filter_free(f);
			return (-1);
		}
		f->types[f->ntypes] = xmalloc(len + 1);
		memcpy(f->types[f->ntypes], p, len);
		f->types[f->ntypes++][len] = '\0';
		if (comma == NULL)
			break;
	}
	return (0);
}

/* Free what evring_filter_set() allocated. */
void
evring_filter_free(struct evring_filter *f)
{
	size_t	i;

	free(f->session);
	for (i = 0; i < f->ntypes; i++)
		free(f->types[i]);
	memset(f, 0, sizeof *f);
}
