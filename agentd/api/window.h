/*
 * window.h -- what an output window becomes beyond "whole chunks up to
 * max_bytes" (API.md, Output budgets): head_tail's head and tail of each
 * stream, read from the ring through proto/headtail.h, and strip_ansi's
 * escape sequences left out of the chunks' bytes (proto/ansi.h).
 *
 * Runs on the event loop thread (it keeps buffers between windows).
 */
#ifndef AGENTD_WINDOW_H
#define AGENTD_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct ring;
struct ring_chunk;
struct ring_read_result;

/* How an answer's window is cut and shown: a request's options. */
struct window_opts {
	size_t		 max_bytes;
	size_t		 max_bytes_stdout;	/* PROTO_MAX_BYTES_UNSET: */
	size_t		 max_bytes_stderr;	/* max_bytes */
	int		 head_tail;
	int		 strip_ansi;
	int		 encoding;	/* PROTO_ENC_*: how chunks render */
};

/*
 * A cursor checked against the first ring_read() after it (error, res and
 * its chunks, first the cursor's own): 400 invalid_cursor when it is after
 * the newest chunk (-ERANGE) or when *skip, the bytes of its chunk read
 * before, reach that chunk's end.  *skip becomes 0 when the read found no
 * chunk or the cursor's chunk was evicted (the gap says so).  Another
 * error is the caller's.  Returns 0, or -1 with err.
 */
int	 window_cursor(uint64_t cursor, uint64_t newest, int error,
	    const struct ring_read_result *res, const struct ring_chunk *first,
	    size_t *skip, struct proto_err *err);

/*
 * head_tail: read every chunk after cursor up to the newest (through
 * buf[0..buflen), at least one chunk's largest size), and fill w with each
 * stream's head and tail (a tty's single stream under max_bytes, a pipe
 * session's stdout and stderr under theirs), at most nout pieces written
 * to out.  w->cursor is the newest chunk read, more is 0; truncated_bytes,
 * the per-stream counts (per_stream for pipes), truncated_cursor and the
 * gaps are set.  w->eof is left to the caller.  Returns 0, or -1 with err
 * (503 out_of_memory, 400 invalid_cursor, 500).
 */
int	 window_headtail(struct ring *, uint64_t cursor,
	    const struct window_opts *, int tty, uint8_t *buf, size_t buflen,
	    struct proto_chunk *out, size_t nout, struct proto_window *w,
	    struct proto_err *err);

/*
 * strip_ansi: leave escape sequences out of the window's chunks, in place
 * (their data must be writable: the caller's buffers), each stream's
 * machine primed with up to WINDOW_ANSI_LOOKBACK chunks before the window
 * and started afresh after a head_tail gap.  ids, offsets and counts stay
 * those of the ring's bytes.  Returns 0, or -1 with err (503).
 */
#define WINDOW_ANSI_LOOKBACK	4	/* chunks read before a window */
int	 window_strip(struct ring *, struct proto_window *,
	    struct proto_err *err);

/* Free the buffers kept between windows that are over keep bytes. */
void	 window_trim(size_t keep);

#endif /* AGENTD_WINDOW_H */
