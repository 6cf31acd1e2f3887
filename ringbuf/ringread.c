/*
 * ringread.c -- ring_read() into a buffer that grows on demand (ringread.h).
 */

#include <errno.h>
#include <stdlib.h>

#include "ringread.h"

#define RING_READER_ROUND	4096u	/* bytes: a grown buffer's multiple */

static int	ring_reader_grow(struct ring_reader *, size_t);

/* Make the buffer at least need bytes (base at the least).  0 or -ENOMEM. */
static int
ring_reader_grow(struct ring_reader *rd, size_t need)
{
	uint8_t	*p;

	if (need < rd->base)
		need = rd->base;
	if (need <= SIZE_MAX - RING_READER_ROUND)
		need = (need + RING_READER_ROUND - 1) & ~(size_t)
		    (RING_READER_ROUND - 1);
	if (rd->buf != NULL && rd->size >= need)
		return 0;
	/* Nothing in the old buffer is kept: no copy, as realloc would. */
	if ((p = malloc(need)) == NULL)
		return -ENOMEM;
	free(rd->buf);
	rd->buf = p;
	rd->size = need;
	return 0;
}

/* ring_read() through the reader's buffer, grown for a chunk too long. */
int
ring_reader_read(struct ring_reader *rd, const struct ring *r,
    uint64_t cursor, size_t max_bytes, struct ring_chunk *chunks,
    size_t maxchunks, struct ring_read_result *res)
{
	int	error;

	if (rd->buf == NULL && ring_reader_grow(rd, 0) != 0)
		return -ENOMEM;
	/*
	 * Each -EMSGSIZE names a chunk longer than the buffer, at most
	 * ring_chunk_max(): the buffer grows each time, so this ends.
	 */
	while ((error = ring_read(r, cursor, rd->buf, rd->size, max_bytes,
	    chunks, maxchunks, res)) == -EMSGSIZE) {
		if (ring_reader_grow(rd, res->nbytes > rd->size ? res->nbytes :
		    rd->size + 1) != 0)
			return -ENOMEM;
	}
	return error;
}

/* Bytes of the buffer now. */
size_t
ring_reader_size(const struct ring_reader *rd)
{
	return rd->size;
}

/* Free the buffer. */
void
ring_reader_free(struct ring_reader *rd)
{
	free(rd->buf);
	rd->buf = NULL;
	rd->size = 0;
}
