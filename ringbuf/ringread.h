/*
 * ringread.h -- ring_read() into a buffer that grows on demand.
 *
 * ring_read() copies whole chunks, so its buffer must hold the first chunk
 * after the cursor, which may be as long as ring_chunk_max(): the ring's
 * capacity, up to RING_CAPACITY_MAX.  A buffer of that size for every reader
 * is that much address space (and the pages a read touches) for a stream of
 * ordinary chunks a few KiB long.  A reader starts with `base` bytes,
 * allocated at its first read, and grows only when a chunk does not fit,
 * to that chunk's length; ring_reader_free() gives the buffer back (a
 * reader may be used again after it).
 *
 * Usage: static struct ring_reader rd = RING_READER_INIT(256 * 1024);
 * then ring_reader_read() as ring_read(); the chunks point into the
 * reader's buffer until its next read or free.  The fields are the
 * reader's own.
 *
 * A reader belongs to one thread; the ring may be any.  Errors are
 * ring_read()'s (-ERANGE, ...) and -ENOMEM when the buffer cannot be
 * allocated or grown (the old one is kept).  Nothing here logs or exits.
 */
#ifndef RINGREAD_H
#define RINGREAD_H

#include <stddef.h>
#include <stdint.h>

#include "ringbuf.h"

/* A read buffer; see above. */
struct ring_reader {
	uint8_t		*buf;
	size_t		 size;	/* bytes of buf, 0 before the first read */
	size_t		 base;	/* bytes allocated first */
};

#define RING_READER_INIT(base)	{ NULL, 0, (base) }

/*
 * ring_read() of the chunks after cursor, whole chunks up to max_bytes
 * (and the reader's size), the first one whole however long.  Returns 0 or
 * -errno as ring_read(), never -EMSGSIZE.
 */
int	 ring_reader_read(struct ring_reader *, const struct ring *,
	    uint64_t cursor, size_t max_bytes, struct ring_chunk *,
	    size_t maxchunks, struct ring_read_result *);

/* Bytes of the reader's buffer now (0: none). */
size_t	 ring_reader_size(const struct ring_reader *);

/* Free the buffer; the next read allocates base bytes again. */
void	 ring_reader_free(struct ring_reader *);

#endif /* RINGREAD_H */
