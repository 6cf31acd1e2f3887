/*
 * ringbuf.h -- a bounded, lock-free ring of output chunks with monotonic ids.
 *
 * One producer appends chunks; any number of readers, on any threads, copy
 * chunks out after a cursor.  The producer never waits for a reader and a
 * reader never blocks the producer: when the ring is full the producer evicts
 * the oldest chunks, and a reader that raced with an eviction reports the
 * evicted chunks as a gap instead of returning torn bytes.
 *
 * Ids start at the ring's first id (1 outside tests), grow by 1 per chunk and
 * are never reused; 0 means "no chunk".  A chunk's offset is the number of
 * bytes appended before it.  Ids never wrap: once id UINT64_MAX is used (only
 * tests get there), appends fail with EOVERFLOW.
 *
 * Capacity.  The byte arena holds `capacity` bytes (RING_CAPACITY_MIN ..
 * RING_CAPACITY_MAX, rounded up to 8).  Each chunk is stored contiguously,
 * starting on an 8-byte boundary; a chunk that does not fit before the end of
 * the arena starts again at 0 (the bytes skipped count as held by nobody).
 * The chunk index has ring_slots() entries (capacity / RING_BYTES_PER_SLOT
 * rounded up to a power of two, at least RING_SLOTS_MIN), so a ring of many
 * tiny chunks evicts on a full index before its arena is full.
 *
 * Chunk size rule.  A chunk holds at most ring_chunk_max() bytes, which is the
 * arena size: one chunk may fill the ring.  ring_append() splits longer data
 * into several chunks of ring_chunk_max() bytes (the last one shorter);
 * ring_reserve() caps the length it hands out.
 *
 * Time.  Each chunk carries a uint32 time the producer gives (ring_set_time;
 * agentd: milliseconds since the session's start), 4 bytes per index slot
 * beside the slot's 16.
 *
 * Memory.  The arena and index are anonymous mappings, only touched as
 * chunks are written, so an idle ring costs little resident memory (with
 * any malloc), and a freed one gives its memory back.
 *
 * Threads.  Functions marked [producer] must be called by one thread at a
 * time (the owner of the ring).  Functions marked [any] may be called from
 * any thread concurrently with the producer.  ring_free() must not race with
 * anything.
 *
 * Errors: functions returning int return -errno; those returning a pointer
 * or an id return NULL or 0 with errno set.  Nothing here logs or exits.
 */
#ifndef RINGBUF_H
#define RINGBUF_H

#include <stddef.h>
#include <stdint.h>

#define RING_CAPACITY_MIN	4096u			/* bytes */
#define RING_CAPACITY_MAX	(64u * 1024 * 1024)	/* bytes */
#define RING_BYTES_PER_SLOT	128u			/* bytes of arena per index slot */
#define RING_SLOTS_MIN		64u			/* index slots */

/* The stream a chunk came from. */
enum ring_stream {
	RING_STREAM_PTY = 0,
	RING_STREAM_STDOUT = 1,
	RING_STREAM_STDERR = 2,
};

struct ring;

/* One chunk as returned by ring_read(): data points into the caller's buffer. */
struct ring_chunk {
	uint64_t	 id;
	uint64_t	 offset;	/* bytes of the ring before this chunk */
	const uint8_t	*data;
	uint32_t	 len;
	uint8_t		 stream;	/* enum ring_stream */
	uint32_t	 time;		/* ring_set_time()'s when it was
					   reserved or appended */
};

/* What a read found, besides the chunks themselves. */
struct ring_read_result {
	size_t		 nchunks;	/* chunks copied into the caller's arrays */
	size_t		 nbytes;	/* bytes copied into the caller's buffer */
	uint64_t	 dropped;	/* ids after the cursor evicted before they were read */
	uint64_t	 newest;	/* newest id at the time of the read (0: none) */
	int		 more;		/* chunks after the last one returned exist */
};

/* A snapshot of the ring's counters. [any] */
struct ring_stats {
	uint64_t	 newest;	/* newest id appended, 0 when none */
	uint64_t	 oldest;	/* oldest id still held; newest + 1 when empty
					   (first_id before the first chunk) */
	uint64_t	 bytes_held;	/* data bytes of the chunks held */
	uint64_t	 bytes_total;	/* every byte ever appended */
	uint64_t	 bytes_dropped;	/* bytes of evicted chunks */
	uint64_t	 chunks_dropped;/* evicted chunks */
	size_t		 capacity;	/* arena bytes */
	size_t		 slots;		/* index entries */
};

/*
 * Called by the producer, on the producer's thread, after every ring_commit(),
 * once after each ring_append() (however many chunks it made), and on
 * ring_close().  It must not call producer functions.
 */
typedef void (*ring_notify_fn)(struct ring *, void *arg);

/*
 * Create a ring of capacity bytes whose first chunk gets first_id (1 in
 * production; tests pass ids near 2^64).  Returns NULL with errno set: EINVAL
 * for a capacity out of range or first_id 0, ENOMEM.
 */
struct ring	*ring_create(size_t capacity, uint64_t first_id);

/*
 * Make a new ring continue another one (an upgrade hands rings over to a
 * new agentd): before its first chunk, set the bytes appended before it
 * (the next chunk's offset, and bytes_total) and the eviction counters.
 * Create it with first_id the old ring's oldest id held, resume it, then
 * append the chunks held, oldest first: ids, offsets and the counters of
 * ring_stats() are the old ring's.  -EBUSY once a chunk was appended.
 * [producer]
 */
int		 ring_resume(struct ring *, uint64_t offset,
		     uint64_t bytes_dropped, uint64_t chunks_dropped);

/* Free a ring.  No reader or producer may use it any more. */
void		 ring_free(struct ring *);

/* Set the hook called after each commit, or NULL for none. [producer] */
void		 ring_set_notify(struct ring *, ring_notify_fn, void *arg);

/*
 * The time the chunks reserved or appended from now on carry (0 until
 * set).  The ring keeps it as given: the producer keeps it from going
 * backwards. [producer]
 */
void		 ring_set_time(struct ring *, uint32_t time);

/* Largest chunk the ring stores, in bytes. [any] */
size_t		 ring_chunk_max(const struct ring *);

/* Number of index slots. [any] */
size_t		 ring_slots(const struct ring *);

/*
 * Zero-copy append, step 1: return a pointer to *len contiguous writable
 * bytes for the next chunk; *len is capped to ring_chunk_max().  Room is made
 * by evicting the oldest chunks now (for all of *len, however little is
 * committed), so the caller may read(2) straight into the returned memory.
 * Only the producer writes there; readers never see it before ring_commit().
 * A reserve without a commit is abandoned by the next reserve or append.
 * Returns NULL with errno EOVERFLOW when the ids are used up.
 *
 * Write the reservation with read(2) (the kernel's writes are outside the C
 * memory model) or with relaxed atomic 8-byte stores: a plain C store there
 * formally races with a lapped reader still copying the evicted chunk (the
 * reader discards what it copied, but TSan reports it).  Built with TSan, the
 * pointer is a private bounce buffer that ring_commit() copies in, so
 * read(2)'s interceptor stays quiet; otherwise it points into the arena.
 * [producer]
 */
void		*ring_reserve(struct ring *, size_t *len);

/*
 * Zero-copy append, step 2: publish the first len bytes of the last
 * reservation as the next chunk (len may be 0), then notify.  Returns the
 * chunk's id, or 0 if len exceeds the reservation (nothing is published and
 * the reservation stays pending) or no reservation is pending. [producer]
 */
uint64_t	 ring_commit(struct ring *, size_t len, enum ring_stream);

/*
 * Copy data into the ring as one chunk (len 0 makes one empty chunk), or
 * several when len exceeds ring_chunk_max(), then notify once.  Returns the
 * id of the last chunk appended, or 0 with errno EOVERFLOW when the ids
 * left are too few (nothing is appended then). [producer]
 */
uint64_t	 ring_append(struct ring *, const void *data, size_t len,
		     enum ring_stream);

/*
 * Mark the ring closed (the output ended) and call the notify hook.  Appends
 * after close are still accepted; closed is only a flag for readers. [producer]
 */
void		 ring_close(struct ring *);

/* Whether ring_close() was called. [any] */
int		 ring_closed(const struct ring *);

/* Newest id appended, 0 when none. [any] */
uint64_t	 ring_newest(const struct ring *);

/*
 * Copy the chunks after cursor, in id order, into the caller's buffer.
 *
 * Whole chunks are copied while their total stays within max_bytes; the
 * first chunk is copied even when it alone exceeds max_bytes, as long as it
 * fits in bufsize.  At most maxchunks descriptors are filled.  The window is
 * contiguous: when the oldest chunks after cursor were evicted (before or
 * during the read) the window starts at the oldest chunk still held and
 * res->dropped counts the ids skipped, so chunks[0].id == cursor + 1 +
 * dropped whenever a chunk is returned.  res->more says chunks after the
 * window exist.
 *
 * The chunks' bytes lie back to back from buf[0]: chunks[i].data points
 * into buf and res->nbytes is their total, so buf can be sent as is.
 *
 * When no chunk is returned, res->dropped is 0 and the cursor stays good.
 * That happens when nothing follows cursor, when maxchunks is 0 (res->more
 * still tells whether chunks follow), and when the producer evicted every
 * chunk of the window while it was being copied, several times in a row (a
 * reader much slower than the producer on a small ring): then res->more is 1
 * and the caller should read again rather than wait for a notification.
 *
 * A cursor greater than the newest id (first_id - 1 before the first chunk)
 * returns -ERANGE; a cursor below first_id - 1 (tests only) counts the ids
 * below first_id as dropped.  -EMSGSIZE: the first chunk does not fit in
 * bufsize; res->nbytes is then its length, the bufsize a read again needs
 * (ringread.h does so; ring_chunk_max() bytes always do).  Returns 0
 * otherwise, also when no chunk is returned.  res must not be NULL. [any]
 */
int		 ring_read(const struct ring *, uint64_t cursor, uint8_t *buf,
		     size_t bufsize, size_t max_bytes, struct ring_chunk *chunks,
		     size_t maxchunks, struct ring_read_result *res);

/* Fill *st with a consistent-enough snapshot of the counters. [any] */
void		 ring_stats(const struct ring *, struct ring_stats *st);

#endif /* RINGBUF_H */
