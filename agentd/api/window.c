/*
 * window.c -- head_tail per stream and strip_ansi over the ring (window.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ansi.h"
#include "headtail.h"
#include "proto.h"
#include "ringbuf.h"
#include "session.h"
#include "util.h"
#include "window.h"

#define WINDOW_BATCH_CHUNKS	1024	/* chunk descriptors per ring read */
#define WINDOW_LOOK_BYTES	(WINDOW_ANSI_LOOKBACK * SESSION_READ_MAX)

static struct proto_headtail	*ht;		/* kept between windows */
static uint8_t			*lookbuf;	/* strip_ansi's look back */
static struct ring_chunk	 batch[WINDOW_BATCH_CHUNKS];

/* Check a cursor against the first read after it (window.h). */
int
window_cursor(uint64_t cursor, uint64_t newest, int error,
    const struct ring_read_result *res, const struct ring_chunk *first,
    size_t *skip, struct proto_err *err)
{
	if (error == -ERANGE)
		return (proto_fail(err, 400, "invalid_cursor", "cursor %"
		    PRIu64 " is after the last chunk %" PRIu64, cursor,
		    newest));
	if (error != 0 || res->nchunks == 0 || res->dropped > 0)
		*skip = 0;
	else if (*skip >= first->len)
		return (proto_fail(err, 400, "invalid_cursor", "cursor %"
		    PRIu64 " points past the end of chunk %" PRIu64, cursor,
		    first->id));
	return (0);
}

/* Each stream's head and tail of the chunks after cursor. */
int
window_headtail(struct ring *r, uint64_t cursor, const struct window_opts *o,
    int tty, uint8_t *buf, size_t buflen, struct proto_chunk *out,
    size_t nout, struct proto_window *w, struct proto_err *err)
{
	struct ring_read_result		 res;
	struct proto_headtail_result	 hr;
	struct proto_chunk		 c;
	size_t				 budget[PROTO_HEADTAIL_STREAMS], i, skip;
	uint64_t			 at, newest, start;
	int				 error, first = 1, s;

	if (ht == NULL && (ht = proto_headtail_new()) == NULL)
		return (proto_fail(err, 503, "out_of_memory",
		    "no memory for a head_tail window"));
	budget[PROTO_STREAM_PTY] = o->max_bytes;
	budget[PROTO_STREAM_STDOUT] = o->max_bytes_stdout !=
	    PROTO_MAX_BYTES_UNSET ? o->max_bytes_stdout : o->max_bytes;
	budget[PROTO_STREAM_STDERR] = o->max_bytes_stderr !=
	    PROTO_MAX_BYTES_UNSET ? o->max_bytes_stderr : o->max_bytes;
	proto_headtail_start(ht, budget, nout);

	memset(w, 0, sizeof *w);
	newest = ring_newest(r);
	/* A cursor inside a chunk: that chunk's bytes before are seen. */
	proto_cursor_split(cursor, newest, &at, &skip);
	start = at;
	/* The capture runs on this thread: nothing arrives meanwhile. */
	while (at < newest) {
		error = ring_read(r, at, buf, buflen, buflen, batch,
		    nitems(batch), &res);
		if (first && window_cursor(cursor, newest, error, &res, batch,
		    &skip, err) != 0)
			return (-1);
		if (error != 0)
			return (proto_fail(err, 500, "internal_error",
			    "ring_read: %s", strerror(-error)));
		if (first) {
			w->dropped = res.dropped;
			w->skip = skip;
		}
		if (res.nchunks == 0)
			break;
		for (i = 0; i < res.nchunks; i++) {
			c.id = batch[i].id;
			c.offset = batch[i].offset;
			c.data = batch[i].data;
			c.len = batch[i].len;
			c.stream = batch[i].stream;
			if (first && i == 0 && skip > 0) {
				c.offset += skip;
				c.data += skip;
				c.len -= (uint32_t)skip;
			}
			if (proto_headtail_feed(ht, &c) != 0)
				return (proto_fail(err, 503, "out_of_memory",
				    "no memory for the head and tail of a "
				    "window of %zu bytes; ask for less",
				    o->max_bytes));
		}
		first = 0;
		at = batch[res.nchunks - 1].id;
	}
	proto_headtail_finish(ht, out, &hr);

	w->chunks = out;
	w->n = hr.n;
	w->cursor = hr.last_id != 0 ? hr.last_id : cursor;
	w->more = 0;
	w->head_tail = 1;
	w->per_stream = !tty;
	w->truncated_bytes = hr.truncated_total;
	w->truncated_cursor = hr.cut_id != 0 ? hr.cut_id - 1 : 0;
	/* Cut in the chunk the cursor pointed inside: from there again. */
	if (w->skip > 0 && hr.cut_id == start + 1)
		w->truncated_cursor = cursor;
	w->truncated_at = hr.n;
	/* No budget at all: nothing to show, go on from the left-out bytes. */
	if (budget[0] == 0 && budget[1] == 0 && budget[2] == 0 &&
	    hr.truncated_total > 0) {
		w->cursor = w->truncated_cursor;
		w->more = 1;
	}
	for (s = 0; s < PROTO_HEADTAIL_STREAMS; s++) {
		w->truncated_stream[s] = hr.truncated[s];
		w->gap_at[s] = hr.gap_at[s];
		if (hr.gap_at[s] < w->truncated_at)
			w->truncated_at = hr.gap_at[s];
	}
	return (0);
}

/* Leave escape sequences out of the window's chunks. */
int
window_strip(struct ring *r, struct proto_window *w, struct proto_err *err)
{
	struct proto_ansi	 a[PROTO_HEADTAIL_STREAMS];
	struct ring_read_result	 res;
	struct ring_chunk	 look[WINDOW_ANSI_LOOKBACK];
	struct proto_chunk	*c;
	uint64_t		 first, end;
	size_t			 i, n, gap[PROTO_HEADTAIL_STREAMS];
	int			 s;

	for (s = 0; s < PROTO_HEADTAIL_STREAMS; s++)
		proto_ansi_init(&a[s]);
	if (w->n == 0)
		return (0);

	/* A sequence may have begun in the chunks before the window. */
	first = w->chunks[0].id;
	if (first > 1 || w->skip > 0) {
		if (lookbuf == NULL &&
		    (lookbuf = malloc(WINDOW_LOOK_BYTES)) == NULL)
			return (proto_fail(err, 503, "out_of_memory",
			    "no memory for strip_ansi"));
		/* Up to the first chunk itself when the cursor is inside. */
		end = w->skip > 0 ? first : first - 1;
		if (ring_read(r, end > WINDOW_ANSI_LOOKBACK ?
		    end - WINDOW_ANSI_LOOKBACK : 0, lookbuf,
		    WINDOW_LOOK_BYTES, WINDOW_LOOK_BYTES, look, nitems(look),
		    &res) != 0)
			res.nchunks = 0;	/* no look back: start afresh */
		for (i = 0; i < res.nchunks && look[i].id <= first; i++) {
			s = look[i].stream < PROTO_HEADTAIL_STREAMS ?
			    look[i].stream : PROTO_STREAM_PTY;
			/* The window's first chunk: the bytes before it. */
			n = look[i].id < first ? look[i].len :
			    w->skip < look[i].len ? w->skip : look[i].len;
			/* In place in lookbuf: only the state matters. */
			(void)proto_ansi_strip(&a[s], look[i].data, n,
			    (uint8_t *)(uintptr_t)look[i].data);
		}
	}

	for (s = 0; s < PROTO_HEADTAIL_STREAMS; s++)
		gap[s] = w->head_tail ? w->gap_at[s] : SIZE_MAX;
	for (i = 0; i < w->n; i++) {
		c = (struct proto_chunk *)(uintptr_t)&w->chunks[i];
		s = c->stream >= 0 && c->stream < PROTO_HEADTAIL_STREAMS ?
		    c->stream : PROTO_STREAM_PTY;
		/* After a gap the stream goes on elsewhere: start afresh. */
		if (i >= gap[s]) {
			proto_ansi_init(&a[s]);
			gap[s] = SIZE_MAX;
		}
		c->len = (uint32_t)proto_ansi_strip(&a[s], c->data, c->len,
		    (uint8_t *)(uintptr_t)c->data);
	}
	return (0);
}

/* Free what is kept over keep bytes. */
void
window_trim(size_t keep)
{
	if (ht != NULL)
		proto_headtail_trim(ht, keep);
	if (keep < WINDOW_LOOK_BYTES) {
		free(lookbuf);
		lookbuf = NULL;
	}
}
