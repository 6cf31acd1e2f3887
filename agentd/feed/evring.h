/*
 * evring.h -- a bounded ring of sandbox events with monotonic ids, and the
 * filter and cursor rules of the event feed (GET /v1/events, API.md).
 *
 * Ids start at 1 and grow by exactly 1.  The ring holds at most max_events
 * events and max_bytes bytes of them (an event costs its JSON, its type and
 * session strings and EVRING_ENTRY_BYTES); a push beyond either bound drops
 * the oldest events first.  A reader asks for what follows its cursor (the
 * id of the last event it saw, 0 for none): the events still held after it,
 * those a filter keeps, and how many were dropped between (dropped).
 *
 * No libevent, no I/O: pure data, one thread (the caller's).
 */
#ifndef AGENTD_EVRING_H
#define AGENTD_EVRING_H

#include <stddef.h>
#include <stdint.h>

#define EVRING_ENTRY_BYTES	64	/* bytes an event costs beside its text */
#define EVRING_TYPES_MAX	32	/* types in one filter */
#define EVRING_TYPE_MAX		64	/* bytes of one type name */

struct evring;

/* An event as a reader sees it; valid until the next evring_push(). */
struct evring_event {
	uint64_t	 id;
	const char	*type;
	const char	*session;	/* NULL: not about a session */
	const char	*json;		/* the whole event object */
	size_t		 json_len;
};

/* Which events a reader wants: NULL members match any. */
struct evring_filter {
	char		*session;
	char		*types[EVRING_TYPES_MAX + 1];	/* NULL-terminated */
	size_t		 ntypes;			/* 0: any type */
};

/* What a read found. */
struct evring_result {
	size_t		 n;		/* events returned */
	uint64_t	 cursor;	/* the id of the last event looked at */
	uint64_t	 dropped;	/* events after the cursor no longer held */
};

/* Counters for /metrics. */
struct evring_stats {
	uint64_t	 newest;	/* id of the newest event, 0: none yet */
	uint64_t	 held;		/* events held */
	uint64_t	 bytes;		/* bytes they cost */
	uint64_t	 dropped;	/* events dropped so far */
	uint64_t	 max_events;
	uint64_t	 max_bytes;
};

/* A ring of max_events (>= 1) events and max_bytes bytes at most. */
struct evring	*evring_new(size_t max_events, size_t max_bytes);
void		 evring_free(struct evring *);

/*
 * Append an event: its type and session (NULL for none) are copied, json
 * (malloc'd, len bytes, the whole object) is taken.  Returns its id.
 */
uint64_t	 evring_push(struct evring *, const char *type,
		    const char *session, char *json, size_t len);

/*
 * Continue another ring (an upgrade): before the first push, the next
 * event gets id newest + 1 and dropped counts as given.  Push the events
 * held, oldest first, after it.  -EBUSY once an event was pushed.
 */
int		 evring_resume(struct evring *, uint64_t newest,
		    uint64_t dropped);
/* The newest event's id (0 before the first). */
uint64_t	 evring_newest(const struct evring *);
void		 evring_stats(const struct evring *, struct evring_stats *);

/*
 * The events after cursor that f (NULL: none) keeps, oldest first, at most
 * max of them, into out.  res->cursor is the id of the last event looked
 * at: the newest one, or the last one returned when max stopped the read
 * early (one more is then kept and not returned); the cursor when nothing
 * was looked at.  Returns 0, or -ERANGE when cursor is after the newest id.
 */
int		 evring_read(const struct evring *, uint64_t cursor,
		    const struct evring_filter *f, struct evring_event *out,
		    size_t max, struct evring_result *res);

/* Whether f (NULL: none) keeps an event of type about session. */
int		 evring_match(const struct evring_filter *, const char *type,
		    const char *session);

/*
 * Fill f from a session id and a comma-separated list of types (either
 * NULL or "" for any).  Returns 0, or -1 with a message in err (a type that
 * is empty, too long, not made of [a-z0-9._-], or one too many).
 */
int		 evring_filter_set(struct evring_filter *, const char *session,
		    const char *types, char *err, size_t errlen);
void		 evring_filter_free(struct evring_filter *);

#endif /* AGENTD_EVRING_H */
