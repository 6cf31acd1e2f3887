/*
 * headtail.h -- the head and tail of each output stream, for "head_tail"
 * windows (API.md): fed the chunks after a cursor in id order, it keeps,
 * per stream, the stream's first budget/2 bytes and its last budget - that,
 * and counts the bytes left out between them, exactly.
 *
 * Rules:
 *  - A stream whose bytes fit its budget is kept whole, chunk by chunk.
 *  - Otherwise its head is its first budget/2 bytes, its tail its last
 *    budget - budget/2 bytes; the head's last chunk and the tail's first
 *    may be parts of chunks (offset: the piece's first byte).
 *  - No cut falls inside a UTF-8 sequence: the head ends before a sequence
 *    the cut would split, the tail starts after continuation bytes (at most
 *    3); those bytes are counted as left out.
 *  - At most max_pieces pieces in all: each stream's head and tail take at
 *    most max_pieces / (2 * PROTO_HEADTAIL_STREAMS) each; a head so capped
 *    ends early, a tail so capped loses its oldest pieces, their bytes
 *    counted as left out.
 *
 * The bytes are copied (the caller's chunk buffers may be reused between
 * feeds); the pieces of proto_headtail_finish() point into the object's
 * buffers and stay valid until the next proto_headtail_start(),
 * proto_headtail_trim() or proto_headtail_free().  Pure: no I/O; memory
 * only through malloc, whose failure is reported.
 */
#ifndef PROTO_HEADTAIL_H
#define PROTO_HEADTAIL_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

#define PROTO_HEADTAIL_STREAMS	3	/* PROTO_STREAM_PTY .. _STDERR */

struct proto_headtail;

/* What a finished window holds besides its pieces. */
struct proto_headtail_result {
	size_t		 n;		/* pieces written to out */
	uint64_t	 truncated[PROTO_HEADTAIL_STREAMS]; /* bytes left out */
	uint64_t	 truncated_total;
	uint64_t	 cut_id;	/* the first chunk not returned whole
					   (id), 0 when none */
	/* The gap of each stream: out[gap_at[s]] is the first piece after it
	   (n: at the end); SIZE_MAX when nothing of s was left out. */
	size_t		 gap_at[PROTO_HEADTAIL_STREAMS];
	uint64_t	 last_id;	/* the newest chunk fed, 0 when none */
};

/* A new object with no buffers yet; NULL when out of memory. */
struct proto_headtail	*proto_headtail_new(void);
void	 proto_headtail_free(struct proto_headtail *);

/*
 * Begin a window: budget[s] bytes for stream s (PROTO_STREAM_*), at most
 * max_pieces pieces in all (at least 2 * PROTO_HEADTAIL_STREAMS).
 */
void	 proto_headtail_start(struct proto_headtail *,
	    const size_t budget[PROTO_HEADTAIL_STREAMS], size_t max_pieces);

/*
 * The next chunk after the last one fed (ids ascending; a stream outside
 * PROTO_STREAM_* counts as PROTO_STREAM_PTY).  Returns 0, or -1 when out
 * of memory (the window is then unusable: start again).
 */
int	 proto_headtail_feed(struct proto_headtail *,
	    const struct proto_chunk *);

/*
 * The window: pieces in id order (pieces of one chunk by offset) into
 * out[0..max_pieces), the figures into res.
 */
void	 proto_headtail_finish(struct proto_headtail *,
	    struct proto_chunk *out, struct proto_headtail_result *res);

/* Free the buffers larger than keep bytes (between windows). */
void	 proto_headtail_trim(struct proto_headtail *, size_t keep);

#endif /* PROTO_HEADTAIL_H */
