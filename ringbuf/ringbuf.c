/*
 * ringbuf.c -- a bounded, lock-free ring of output chunks (see ringbuf.h).
 *
 * Shape.  head_id (newest id published) and tail_id (oldest id held) are
 * 64-bit counters that never wrap, each on its own cache line.  Chunk id
 * lives in index slot id % nslots: two atomic words, the packed meta
 * (len, arena position, stream) and the chunk's byte offset; its time is
 * in a third array, times[] (after the slots, in the index's mapping).  The data lives
 * in an arena of atomic 64-bit words; a chunk starts on a word boundary and
 * is contiguous, so one that does not fit before the arena end starts at 0.
 *
 * Producer.  Evict the oldest chunks until the new chunk's arena range and
 * its index slot are free, store tail_id once for the whole batch, issue a
 * release fence, write data and slot with relaxed stores, then publish
 * head_id with a release store.
 *
 * Readers.  Load tail_id and head_id with acquire, copy slots and data with
 * relaxed loads into the caller's buffer, issue an acquire fence and load
 * tail_id again.  A chunk below the new tail may have been overwritten while
 * it was copied: the fence pairs with the producer's release fence (Boehm's
 * seqlock argument), so a copy that saw any overwriting store also sees the
 * tail that evicted the chunk.  Evicted chunks are reported as a gap, never
 * as data.  Eviction goes in id order, so the invalid chunks of a window
 * are always a prefix of it.  A slot read during a race may describe a newer
 * chunk: every length and position is clamped to the arena and the caller's
 * buffer before use, and validation throws the chunk away.
 *
 * Every access to memory shared with readers is atomic, so ThreadSanitizer
 * can check the whole protocol.  The one exception is by contract: the
 * caller of ring_reserve() writes the reservation with read(2).  Under TSan
 * that reservation is a private bounce buffer copied in by ring_commit(),
 * because TSan's read(2) interceptor would report the (benign) race with a
 * reader still copying the evicted chunk that lived there.
 *
 * Build with -DRING_MUTANT_NO_VALIDATE to drop the read-side re-check: the
 * stress checker in tests/ring must then fail.
 */

#include <sys/mman.h>

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ringbuf.h"

#if defined(__SANITIZE_THREAD__)
#define RING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RING_TSAN 1
#endif
#endif

#define RING_CACHELINE	64u	/* bytes */
#define RING_WORD	8u	/* bytes per arena word */
#define RING_READ_TRIES	16	/* copies a lapped reader tries before giving up */

/* Slot meta: len in bits 0-31, position / RING_WORD in 32-55, stream in 56-63. */
#define RING_META(pos, len, stream)					\
	((uint64_t)(len) | ((uint64_t)((pos) / RING_WORD) << 32) |	\
	    ((uint64_t)(stream) << 56))
#define RING_META_LEN(m)	((size_t)((m) & 0xffffffffu))
#define RING_META_POS(m)	((size_t)(((m) >> 32) & 0xffffffu) * RING_WORD)
#define RING_META_STREAM(m)	((uint8_t)((m) >> 56))

/* One index entry; both words are written by the producer only. */
struct ring_slot {
	_Atomic uint64_t	 meta;		/* RING_META() */
	_Atomic uint64_t	 offset;	/* bytes appended before the chunk */
};

struct ring {
	/* Set by ring_create(), read-only afterwards. */
	_Atomic uint64_t	*arena;		/* capacity / RING_WORD words */
	struct ring_slot	*index;		/* nslots entries */
	_Atomic uint32_t	*times;		/* nslots entries: chunk times */
	void			*arena_mem;	/* mapped; arena is it */
	void			*index_mem;	/* mapped; index is it */
	size_t			 capacity;	/* bytes, a multiple of RING_WORD */
	size_t			 nslots;	/* a power of two */
	uint64_t		 first_id;

	/* Newest id published; first_id - 1 before the first chunk. */
	alignas(RING_CACHELINE) _Atomic uint64_t head_id;

	/* Oldest id held; head_id + 1 when nothing is held. */
	alignas(RING_CACHELINE) _Atomic uint64_t tail_id;

	/* Producer only, apart from the counters and the closed flag. */
	alignas(RING_CACHELINE) uint64_t head;	/* copy of head_id */
	uint64_t		 tail;		/* copy of tail_id */
	size_t			 wpos;		/* where the next chunk may start */
	size_t			 tpos;		/* where the oldest chunk's room starts */
	size_t			 used;		/* arena bytes held, skipped ends included */
	uint64_t		 offset;	/* bytes appended so far */
	uint32_t		 now;		/* ring_set_time() */
	ring_notify_fn		 notify;
	void			*notify_arg;

	int			 reserved;	/* a reservation is pending */
	size_t			 res_pos;	/* its arena position */
	size_t			 res_skip;	/* bytes skipped at the arena end for it */
	size_t			 res_len;	/* its length */
	uint32_t		 res_time;	/* the time when reserved */
#ifdef RING_TSAN
	uint8_t			*bounce;	/* the reservation handed out under TSan */
#endif

	_Atomic uint64_t	 bytes_held;
	_Atomic uint64_t	 bytes_total;
	_Atomic uint64_t	 bytes_dropped;
	_Atomic uint64_t	 chunks_dropped;
	_Atomic int		 closed;
};

static size_t	ring_round(size_t);
static void	*ring_map(size_t, void **);
static void	ring_add(_Atomic uint64_t *, uint64_t);
static void	ring_copy_in(_Atomic uint64_t *, const uint8_t *, size_t);
static void	ring_copy_out(uint8_t *, const _Atomic uint64_t *, size_t);
static void	ring_make_room(struct ring *, size_t, size_t *, size_t *);
static uint64_t	ring_publish(struct ring *, size_t, size_t, size_t,
		    enum ring_stream, uint32_t);
static size_t	ring_index_size(size_t);
static size_t	ring_copy_window(const struct ring *, uint64_t, uint64_t,
		    uint8_t *, size_t, size_t, struct ring_chunk *, size_t,
		    size_t *, int *);
static size_t	ring_drop_prefix(struct ring_chunk *, size_t, size_t,
		    uint8_t *, size_t);

/* Round a length up to whole arena words. */
static size_t
ring_round(size_t len)
{
	return (len + RING_WORD - 1) & ~(size_t)(RING_WORD - 1);
}

/*
 * Map size zeroed bytes, page-aligned (so chunks and slots share cache lines
 * with their neighbours only where they must); *mem gets the mapping, or
 * NULL.  Fresh anonymous pages cost no resident memory until written.
 * calloc promised that only for blocks it mapped itself, and glibc's malloc
 * stops mapping blocks of a size it has seen freed (its dynamic mmap
 * threshold): every ring made after one was freed came from the heap,
 * zeroed by hand, all of it resident, and stayed so once freed.
 */
static void *
ring_map(size_t size, void **mem)
{
	void	*p;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	*mem = p == MAP_FAILED ? NULL : p;
	return *mem;
}

/* Add to a counter only the producer writes (no read-modify-write needed). */
static void
ring_add(_Atomic uint64_t *counter, uint64_t n)
{
	uint64_t	v = atomic_load_explicit(counter, memory_order_relaxed);

	atomic_store_explicit(counter, v + n, memory_order_relaxed);
}

/* Copy len bytes into the arena from word dst on, with relaxed stores. */
static void
ring_copy_in(_Atomic uint64_t *dst, const uint8_t *src, size_t len)
{
	size_t		 i, nwords = len / RING_WORD;
	uint64_t	 w0, w1, w2, w3, last = 0;

	/* Relaxed stores are plain movs on x86-64 and arm64; unroll by 4. */
	for (i = 0; i + 4 <= nwords; i += 4) {
		memcpy(&w0, src + (i + 0) * RING_WORD, RING_WORD);
		memcpy(&w1, src + (i + 1) * RING_WORD, RING_WORD);
		memcpy(&w2, src + (i + 2) * RING_WORD, RING_WORD);
		memcpy(&w3, src + (i + 3) * RING_WORD, RING_WORD);
		atomic_store_explicit(&dst[i + 0], w0, memory_order_relaxed);
		atomic_store_explicit(&dst[i + 1], w1, memory_order_relaxed);
		atomic_store_explicit(&dst[i + 2], w2, memory_order_relaxed);
		atomic_store_explicit(&dst[i + 3], w3, memory_order_relaxed);
	}
	for (; i < nwords; i++) {
		memcpy(&w0, src + i * RING_WORD, RING_WORD);
		atomic_store_explicit(&dst[i], w0, memory_order_relaxed);
	}
	if (len % RING_WORD != 0) {
		memcpy(&last, src + i * RING_WORD, len % RING_WORD);
		atomic_store_explicit(&dst[i], last, memory_order_relaxed);
	}
}

/* Copy len bytes out of the arena from word src on, with relaxed loads. */
static void
ring_copy_out(uint8_t *dst, const _Atomic uint64_t *src, size_t len)
{
	size_t		 i, nwords = len / RING_WORD;
	uint64_t	 w0, w1, w2, w3, last;

	for (i = 0; i + 4 <= nwords; i += 4) {
		w0 = atomic_load_explicit(&src[i + 0], memory_order_relaxed);
		w1 = atomic_load_explicit(&src[i + 1], memory_order_relaxed);
		w2 = atomic_load_explicit(&src[i + 2], memory_order_relaxed);
		w3 = atomic_load_explicit(&src[i + 3], memory_order_relaxed);
		memcpy(dst + (i + 0) * RING_WORD, &w0, RING_WORD);
		memcpy(dst + (i + 1) * RING_WORD, &w1, RING_WORD);
		memcpy(dst + (i + 2) * RING_WORD, &w2, RING_WORD);
		memcpy(dst + (i + 3) * RING_WORD, &w3, RING_WORD);
	}
	for (; i < nwords; i++) {
		w0 = atomic_load_explicit(&src[i], memory_order_relaxed);
		memcpy(dst + i * RING_WORD, &w0, RING_WORD);
	}
	if (len % RING_WORD != 0) {
		last = atomic_load_explicit(&src[i], memory_order_relaxed);
		memcpy(dst + i * RING_WORD, &last, len % RING_WORD);
	}
}

/*
 * Evict the oldest chunks until need bytes (a multiple of RING_WORD, at most
 * the capacity) and the next id's slot are free; return where the chunk goes
 * and how many bytes at the arena end it skips.  Ends with the release fence
 * that orders the eviction before any write to the freed memory.
 */
static void
ring_make_room(struct ring *r, size_t need, size_t *pos, size_t *skip)
{
	uint64_t	 id = r->head + 1, tail = r->tail, m;
	uint64_t	 nbytes = 0;
	size_t		 p, s, cpos, clen;

	for (;;) {
		p = r->wpos;
		s = 0;
		if (need > r->capacity - p) {
			s = r->capacity - p;
			p = 0;
		}
		if (r->used + s + need <= r->capacity &&
		    id - tail < r->nslots)
			break;
		if (tail == id) {
			/* Nothing held: start again at the arena's start. */
			r->wpos = r->tpos = r->used = 0;
			continue;
		}

		/*
		 * The oldest chunk's room is its words plus the arena end it
		 * skipped: it starts at tpos, or at 0 if it did not fit there.
		 */
		m = atomic_load_explicit(&r->index[tail & (r->nslots - 1)].meta,
		    memory_order_relaxed);
		cpos = RING_META_POS(m);
		clen = RING_META_LEN(m);
		if (cpos != r->tpos)
			r->used -= r->capacity - r->tpos;
		r->used -= ring_round(clen);
		r->tpos = cpos + ring_round(clen);
		if (r->tpos == r->capacity)
			r->tpos = 0;
		nbytes += clen;
		tail++;
	}

	if (tail != r->tail) {
		ring_add(&r->chunks_dropped, tail - r->tail);
		ring_add(&r->bytes_dropped, nbytes);
		atomic_store_explicit(&r->bytes_held,
		    atomic_load_explicit(&r->bytes_held, memory_order_relaxed) -
		    nbytes, memory_order_relaxed);
		r->tail = tail;
		atomic_store_explicit(&r->tail_id, tail, memory_order_release);
	}
	atomic_thread_fence(memory_order_release);

	*pos = p;
	*skip = s;
}

/* Bytes of the index's mapping: the slots, then the times. */
static size_t
ring_index_size(size_t nslots)
{
	return (nslots * (sizeof(struct ring_slot) + sizeof(uint32_t)));
}

/* Publish the next chunk, whose len bytes are already at pos. */
static uint64_t
ring_publish(struct ring *r, size_t pos, size_t skip, size_t len,
    enum ring_stream stream, uint32_t time)
{
	uint64_t		 id = r->head + 1;
	struct ring_slot	*slot = &r->index[id & (r->nslots - 1)];

	atomic_store_explicit(&slot->meta, RING_META(pos, len, stream & 0xff),
	    memory_order_relaxed);
	atomic_store_explicit(&slot->offset, r->offset, memory_order_relaxed);
	atomic_store_explicit(&r->times[id & (r->nslots - 1)], time,
	    memory_order_relaxed);

	r->used += skip + ring_round(len);
	r->wpos = pos + ring_round(len);
	if (r->wpos == r->capacity)
		r->wpos = 0;
	r->offset += len;
	ring_add(&r->bytes_total, len);
	ring_add(&r->bytes_held, len);

	r->head = id;
	atomic_store_explicit(&r->head_id, id, memory_order_release);
	return id;
}

/* Create a ring of capacity bytes whose first chunk gets first_id. */
struct ring *
ring_create(size_t capacity, uint64_t first_id)
{
	struct ring	*r;
	size_t		 nslots;

	if (capacity < RING_CAPACITY_MIN || capacity > RING_CAPACITY_MAX ||
	    first_id == 0) {
		errno = EINVAL;
		return NULL;
	}
	capacity = ring_round(capacity);
	for (nslots = RING_SLOTS_MIN; nslots < capacity / RING_BYTES_PER_SLOT;)
		nslots *= 2;

	if ((r = aligned_alloc(RING_CACHELINE, sizeof *r)) == NULL)
		return NULL;
	memset(r, 0, sizeof *r);
	r->capacity = capacity;
	r->nslots = nslots;
	r->first_id = first_id;
	r->arena = ring_map(capacity, &r->arena_mem);
	r->index = ring_map(ring_index_size(nslots), &r->index_mem);
	if (r->index != NULL)
		r->times = (_Atomic uint32_t *)(r->index + nslots);
#ifdef RING_TSAN
	r->bounce = calloc(1, capacity);
	if (r->bounce == NULL)
		goto fail;
#endif
	if (r->arena == NULL || r->index == NULL)
		goto fail;

	r->head = first_id - 1;
	r->tail = first_id;
	atomic_init(&r->head_id, r->head);
	atomic_init(&r->tail_id, r->tail);
	atomic_init(&r->bytes_held, 0);
	atomic_init(&r->bytes_total, 0);
	atomic_init(&r->bytes_dropped, 0);
	atomic_init(&r->chunks_dropped, 0);
	atomic_init(&r->closed, 0);
	return r;

fail:
	ring_free(r);
	errno = ENOMEM;
	return NULL;
}

/* Continue another ring: the bytes before the first chunk, the drops. */
int
ring_resume(struct ring *r, uint64_t offset, uint64_t bytes_dropped,
    uint64_t chunks_dropped)
{
	if (r->head != r->first_id - 1 || r->reserved)
		return -EBUSY;
	r->offset = offset;
	atomic_store_explicit(&r->bytes_total, offset, memory_order_relaxed);
	atomic_store_explicit(&r->bytes_dropped, bytes_dropped,
	    memory_order_relaxed);
	atomic_store_explicit(&r->chunks_dropped, chunks_dropped,
	    memory_order_relaxed);
	return 0;
}

/* Free a ring and everything it holds. */
void
ring_free(struct ring *r)
{
	if (r == NULL)
		return;
#ifdef RING_TSAN
	free(r->bounce);
#endif
	if (r->index_mem != NULL)
		munmap(r->index_mem, ring_index_size(r->nslots));
	if (r->arena_mem != NULL)
		munmap(r->arena_mem, r->capacity);
	free(r);
}

/* Set the hook called after each commit. */
void
ring_set_notify(struct ring *r, ring_notify_fn fn, void *arg)
{
	r->notify = fn;
	r->notify_arg = arg;
}

/* The time of the chunks reserved or appended from now on. */
void
ring_set_time(struct ring *r, uint32_t time)
{
	r->now = time;
}

/* Largest chunk the ring stores, in bytes. */
size_t
ring_chunk_max(const struct ring *r)
{
	return r->capacity;
}

/* Number of index slots. */
size_t
ring_slots(const struct ring *r)
{
	return r->nslots;
}

/* Make room for the next chunk and hand out its memory. */
void *
ring_reserve(struct ring *r, size_t *len)
{
	size_t	n = *len < r->capacity ? *len : r->capacity;

	r->reserved = 0;
	if (r->head == UINT64_MAX) {
		errno = EOVERFLOW;
		return NULL;
	}
	ring_make_room(r, ring_round(n), &r->res_pos, &r->res_skip);
	r->res_len = n;
	r->res_time = r->now;
	r->reserved = 1;
	*len = n;
#ifdef RING_TSAN
	return r->bounce;
#else
	return (uint8_t *)r->arena + r->res_pos;
#endif
}

/* Publish the first len bytes of the pending reservation. */
uint64_t
ring_commit(struct ring *r, size_t len, enum ring_stream stream)
{
	uint64_t	id;

	if (!r->reserved || len > r->res_len)
		return 0;
	r->reserved = 0;
#ifdef RING_TSAN
	ring_copy_in(&r->arena[r->res_pos / RING_WORD], r->bounce, len);
#endif
	id = ring_publish(r, r->res_pos, r->res_skip, len, stream,
	    r->res_time);
	if (r->notify != NULL)
		r->notify(r, r->notify_arg);
	return id;
}

/* Copy data into the ring as one chunk or several of ring_chunk_max(). */
uint64_t
ring_append(struct ring *r, const void *data, size_t len,
    enum ring_stream stream)
{
	const uint8_t	*p = data;
	uint64_t	 id = 0, nchunks;
	size_t		 n, pos, skip;

	r->reserved = 0;
	nchunks = len == 0 ? 1 : (len - 1) / r->capacity + 1;
	if (UINT64_MAX - r->head < nchunks) {
		errno = EOVERFLOW;
		return 0;
	}
	do {
		n = len < r->capacity ? len : r->capacity;
		ring_make_room(r, ring_round(n), &pos, &skip);
		if (n > 0) {
			ring_copy_in(&r->arena[pos / RING_WORD], p, n);
			p += n;
		}
		id = ring_publish(r, pos, skip, n, stream, r->now);
		len -= n;
	} while (len > 0);

	if (r->notify != NULL)
		r->notify(r, r->notify_arg);
	return id;
}

/* Mark the ring closed and wake whoever waits on it. */
void
ring_close(struct ring *r)
{
	atomic_store_explicit(&r->closed, 1, memory_order_release);
	if (r->notify != NULL)
		r->notify(r, r->notify_arg);
}

/* Whether ring_close() was called. */
int
ring_closed(const struct ring *r)
{
	return atomic_load_explicit(&r->closed, memory_order_acquire);
}

/* Newest id appended, 0 when none. */
uint64_t
ring_newest(const struct ring *r)
{
	uint64_t	head = atomic_load_explicit(&r->head_id,
			    memory_order_acquire);

	return head == r->first_id - 1 ? 0 : head;
}

/*
 * Copy up to avail chunks from id start on into buf, back to back, within
 * the limits of ring_read(); set *toobig when the first chunk exceeds
 * bufsize (then *nbytesp is its length).  Returns the number of chunks
 * copied, none of them validated.
 */
static size_t
ring_copy_window(const struct ring *r, uint64_t start, uint64_t avail,
    uint8_t *buf, size_t bufsize, size_t max_bytes, struct ring_chunk *chunks,
    size_t maxchunks, size_t *nbytesp, int *toobig)
{
	const struct ring_slot	*slot;
	size_t			 n, pos, len, nbytes = 0;
	size_t			 limit = max_bytes < bufsize ? max_bytes : bufsize;
	uint64_t		 m;

	*toobig = 0;
	for (n = 0; n < avail && n < maxchunks; n++) {
		slot = &r->index[(start + n) & (r->nslots - 1)];
		m = atomic_load_explicit(&slot->meta, memory_order_relaxed);

		/* A racing slot may describe any chunk: stay in bounds. */
		pos = RING_META_POS(m);
		len = RING_META_LEN(m);
		if (pos > r->capacity)
			pos = r->capacity;
		if (len > r->capacity - pos)
			len = r->capacity - pos;

		if (n == 0) {
			if (len > bufsize) {
				*toobig = 1;
				nbytes = len;	/* what the buffer must hold */
				break;
			}
		} else if (nbytes >= limit || len > limit - nbytes)
			break;

		ring_copy_out(buf + nbytes, &r->arena[pos / RING_WORD], len);
		chunks[n].id = start + n;
		chunks[n].offset = atomic_load_explicit(&slot->offset,
		    memory_order_relaxed);
		chunks[n].data = buf + nbytes;
		chunks[n].len = (uint32_t)len;
		chunks[n].stream = RING_META_STREAM(m);
		chunks[n].time = atomic_load_explicit(
		    &r->times[(start + n) & (r->nslots - 1)],
		    memory_order_relaxed);
		nbytes += len;
	}
	*nbytesp = nbytes;
	return n;
}

/* Drop the first skip of n copied chunks; move the rest to buf's start. */
static size_t
ring_drop_prefix(struct ring_chunk *chunks, size_t n, size_t skip,
    uint8_t *buf, size_t nbytes)
{
	size_t	i, shift = (size_t)(chunks[skip].data - buf);

	memmove(buf, buf + shift, nbytes - shift);
	for (i = 0; i + skip < n; i++) {
		chunks[i] = chunks[i + skip];
		chunks[i].data -= shift;
	}
	return nbytes - shift;
}

/* Copy the chunks after cursor into the caller's buffer. */
int
ring_read(const struct ring *r, uint64_t cursor, uint8_t *buf, size_t bufsize,
    size_t max_bytes, struct ring_chunk *chunks, size_t maxchunks,
    struct ring_read_result *res)
{
	uint64_t	 head, tail, start, avail, skip;
	size_t		 n, nbytes;
	int		 try, toobig;

	memset(res, 0, sizeof *res);
	for (try = 0; try < RING_READ_TRIES; try++) {
		tail = atomic_load_explicit(&r->tail_id, memory_order_acquire);
		head = atomic_load_explicit(&r->head_id, memory_order_acquire);
		if (cursor > head)
			return -ERANGE;
		res->newest = head == r->first_id - 1 ? 0 : head;
		if (cursor == head || maxchunks == 0) {
			res->more = cursor < head;
			return 0;
		}

		/* tail <= head + 1: it was loaded first, with acquire. */
		start = cursor + 1 > tail ? cursor + 1 : tail;
		avail = start <= head ? head - start + 1 : 0;
		n = ring_copy_window(r, start, avail, buf, bufsize, max_bytes,
		    chunks, maxchunks, &nbytes, &toobig);

#ifdef RING_MUTANT_NO_VALIDATE
		skip = 0;
#else
		/* Chunks evicted while they were copied are a gap. */
		atomic_thread_fence(memory_order_acquire);
		tail = atomic_load_explicit(&r->tail_id, memory_order_relaxed);
		skip = tail > start ? tail - start : 0;
#endif
		if (toobig) {
			if (skip == 0) {
				res->nbytes = nbytes;	/* the chunk's length */
				return -EMSGSIZE;
			}
			continue;
		}
		if (skip >= n)
			continue;
		if (skip > 0) {
			nbytes = ring_drop_prefix(chunks, n, skip, buf, nbytes);
			n -= skip;
		}

		res->nchunks = n;
		res->nbytes = nbytes;
		res->dropped = chunks[0].id - cursor - 1;
		res->more = chunks[n - 1].id < head;
		return 0;
	}

	/* Lapped on every try: nothing returned, the cursor stays good. */
	res->more = 1;
	return 0;
}

/* Fill *st with the ring's counters. */
void
ring_stats(const struct ring *r, struct ring_stats *st)
{
	uint64_t	tail, head;

	tail = atomic_load_explicit(&r->tail_id, memory_order_acquire);
	head = atomic_load_explicit(&r->head_id, memory_order_acquire);
	memset(st, 0, sizeof *st);
	st->newest = head == r->first_id - 1 ? 0 : head;
	st->oldest = tail;
	st->bytes_held = atomic_load_explicit(&r->bytes_held,
	    memory_order_relaxed);
	st->bytes_total = atomic_load_explicit(&r->bytes_total,
	    memory_order_relaxed);
	st->bytes_dropped = atomic_load_explicit(&r->bytes_dropped,
	    memory_order_relaxed);
	st->chunks_dropped = atomic_load_explicit(&r->chunks_dropped,
	    memory_order_relaxed);
	st->capacity = r->capacity;
	st->slots = r->nslots;
}
