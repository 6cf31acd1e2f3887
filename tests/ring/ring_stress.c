/*
 * ring_stress.c -- one producer, many readers, every byte checked.
 *
 * The producer appends --chunks chunks whose length, stream and bytes are
 * functions of the id (some through ring_reserve()/ring_commit(), some of
 * those reserved longer than committed, some reservations abandoned), and
 * records each chunk's offset in a table before publishing it.  Each reader
 * follows its own cursor with random limits and checks every read: ids
 * contiguous from cursor + 1 + dropped, each chunk's length, stream, offset
 * and bytes, the buffer layout, nbytes, more and the limits.  Across the run
 * every id must be seen or reported dropped exactly once per reader.
 *
 * A quarter of the reads are probes from a cursor two rings back: they start
 * at the oldest chunk, the one the producer evicts next, so copies race with
 * evictions all the time.  Probes are checked like any read but do not move
 * the reader's cursor.
 *
 * The producer alternates, block by block, between bursts at full speed
 * (readers get lapped and race with evictions at the tail) and paced
 * stretches where it lets the slowest reader come within half a ring
 * (readers race with the producer at the head and check most chunks).  The
 * pacing is the harness's; the ring itself never waits for anyone.
 *
 * Exit status: 0 clean, 1 a violation (or, with --expect-violation, none
 * found), 2 usage or setup error.  --expect-violation is for the mutant
 * ring built without read-side validation: the run stops at the first
 * violation and succeeds only if there was one.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ringbuf.h"

#define STRESS_CHUNKS		1000000u	/* chunks by default */
#define STRESS_READERS		4		/* reader threads by default */
#define STRESS_CAPACITY		(16u * 1024)	/* bytes by default */
#define STRESS_MAX_LEN		(6u * 1024)	/* bytes: longest chunk */
#define STRESS_MAX_CHUNKS	256		/* descriptors per read, at most */
#define STRESS_SMALL_BUF	1024u		/* bytes: a read buffer that may be short */
#define STRESS_REPORTS		10		/* violations printed */
#define STRESS_READERS_MAX	64
#define STRESS_BLOCK		8192u		/* chunks per burst or paced stretch */

struct reader {
	pthread_t	 thread;
	int		 index;
	_Atomic uint64_t cursor;	/* UINT64_MAX once finished */
	uint64_t	 rng;
	uint64_t	 reads;
	uint64_t	 empty;		/* reads that returned no chunk */
	uint64_t	 seen;		/* chunks returned */
	uint64_t	 dropped;	/* ids reported as dropped */
	uint64_t	 gaps;		/* reads with dropped > 0 */
	uint64_t	 bytes;		/* bytes checked */
	uint64_t	 msgsize;	/* -EMSGSIZE results */
	uint64_t	 probes;	/* reads from a stale cursor */
};

static struct reader	 readers[STRESS_READERS_MAX];
static int		 nreaders = STRESS_READERS;
static struct ring	*ring;
static uint64_t		 first_id, last_id, nchunks, seed = 1;
static size_t		 chunk_max, max_len = STRESS_MAX_LEN;
static uint64_t		*offsets;		/* by id - first_id */
static int		 expect_violation, quiet;
static _Atomic int	 stop;
static _Atomic uint64_t	 violations;

static uint64_t	mix(uint64_t);
static uint64_t	next_rand(uint64_t *);
static size_t	chunk_len(uint64_t);
static enum ring_stream chunk_stream(uint64_t);
static void	fill(uint8_t *, uint64_t, size_t);
static int	same(const uint8_t *, uint64_t, size_t);
static void	violation(const struct reader *, const char *, ...)
		    __attribute__((format(printf, 2, 3)));
static void	wait_for_readers(uint64_t);
static void	produce(void);
static int	check_read(struct reader *, uint64_t, size_t, size_t, size_t,
		    const uint8_t *, const struct ring_chunk *,
		    const struct ring_read_result *, int);
static int	probe(struct reader *, uint8_t *, struct ring_chunk *);
static void	check_msgsize(struct reader *, uint64_t, size_t);
static void	*read_loop(void *);
static double	now(void);
static void	usage(void);

/* splitmix64's finaliser. */
static uint64_t
mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Next number of a per-thread generator. */
static uint64_t
next_rand(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return mix(*state);
}

/* Chunk id's length: mostly tiny, some up to max_len. */
static size_t
chunk_len(uint64_t id)
{
	uint64_t	h = mix(id ^ seed), pick = h % 100, v = h >> 16;
	size_t		len;

	if (pick < 50)
		len = v % 17;
	else if (pick < 80)
		len = 17 + v % 240;
	else if (pick < 95)
		len = v % 2049;
	else
		len = v % (max_len + 1);
	return len < chunk_max ? len : chunk_max;
}

/* Chunk id's stream. */
static enum ring_stream
chunk_stream(uint64_t id)
{
	return (enum ring_stream)((mix(id ^ seed) >> 8) % 3);
}

/* Write chunk id's len bytes. */
static void
fill(uint8_t *p, uint64_t id, size_t len)
{
	uint64_t	w, base = mix(id + seed * 0x2545f4914f6cdd1dull);
	size_t		i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = mix(base + i);
		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		w = mix(base + i);
		memcpy(p + i, &w, len - i);
	}
}

/* Whether p holds chunk id's len bytes (word loads: no memcmp under TSan). */
static int
same(const uint8_t *p, uint64_t id, size_t len)
{
	uint64_t	w, got, base = mix(id + seed * 0x2545f4914f6cdd1dull);
	size_t		i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&got, p + i, 8);
		if (got != mix(base + i))
			return 0;
	}
	if (i < len) {
		w = mix(base + i);
		got = 0;
		memcpy(&got, p + i, len - i);
		memset((uint8_t *)&w + (len - i), 0, 8 - (len - i));
		if (got != w)
			return 0;
	}
	return 1;
}

/* Count a violation, print the first few, stop the run when asked to. */
static void
violation(const struct reader *rd, const char *fmt, ...)
{
	va_list		ap;
	uint64_t	n = atomic_fetch_add(&violations, 1);

	if (n < STRESS_REPORTS) {
		va_start(ap, fmt);
		fprintf(stderr, "ring_stress: reader %d: ", rd ? rd->index : -1);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
	if (expect_violation || n + 1 >= STRESS_REPORTS)
		atomic_store(&stop, 1);
}

/* Yield until the slowest reader is within half a ring of total bytes. */
static void
wait_for_readers(uint64_t total)
{
	uint64_t	c, slowest, done;
	int		i;

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		slowest = UINT64_MAX;
		for (i = 0; i < nreaders; i++) {
			c = atomic_load_explicit(&readers[i].cursor,
			    memory_order_relaxed);
			if (c < slowest)
				slowest = c;
		}
		if (slowest == UINT64_MAX)
			return;
		done = slowest < first_id ? 0 : offsets[slowest - first_id] +
		    chunk_len(slowest);
		if (total - done <= chunk_max / 2)
			return;
		sched_yield();
	}
}

/* Append every chunk, a quarter of the time through a reservation. */
static void
produce(void)
{
	uint8_t		*src, *p;
	uint64_t	 i, id, got, h, total = 0;
	size_t		 len, want;
	int		 paced = 0;

	if ((src = malloc(chunk_max)) == NULL)
		abort();
	for (i = 0; i < nchunks && !atomic_load_explicit(&stop,
	    memory_order_relaxed); i++) {
		id = first_id + i;
		len = chunk_len(id);
		h = mix(id * 31 + seed);
		if (i % STRESS_BLOCK == 0)
			paced = mix(i / STRESS_BLOCK + seed) & 1;
		if (paced && i % 8 == 0)
			wait_for_readers(total);
		offsets[i] = total;

		if (h % 4 == 0) {
			/* Zero-copy, sometimes reserving more than used. */
			want = len + (h >> 8) % 64;
			if (h & 0x10000) {
				/* Abandon one reservation first. */
				want = len;
				if ((p = ring_reserve(ring, &want)) == NULL)
					goto fail;
				memset(p, 0xee, want);
				want = len + (h >> 8) % 64;
			}
			if ((p = ring_reserve(ring, &want)) == NULL)
				goto fail;
			if (want < len) {
				violation(NULL, "reserve gave %zu < %zu", want,
				    len);
				break;
			}
			fill(p, id, len);
			memset(p + len, 0xaa, want - len);
			got = ring_commit(ring, len, chunk_stream(id));
		} else {
			fill(src, id, len);
			got = ring_append(ring, src, len, chunk_stream(id));
		}
		if (got != id) {
			violation(NULL, "append/commit gave id %" PRIu64
			    ", not %" PRIu64, got, id);
			break;
		}
		total += len;
	}
	free(src);
	return;

fail:
	violation(NULL, "reserve failed: %s", strerror(errno));
	free(src);
}

/* Check one successful read, counted if count; -1 when too broken to go on. */
static int
check_read(struct reader *rd, uint64_t cursor, size_t bufsize,
    size_t max_bytes, size_t maxchunks, const uint8_t *buf,
    const struct ring_chunk *chunks, const struct ring_read_result *res,
    int count)
{
	size_t		 i, total = 0, len;
	uint64_t	 id;

	if (res->nchunks > maxchunks) {
		violation(rd, "%zu chunks > maxchunks %zu", res->nchunks,
		    maxchunks);
		return -1;
	}
	if (res->nchunks == 0) {
		if (res->dropped != 0)
			violation(rd, "no chunk but dropped %" PRIu64,
			    res->dropped);
		if (res->more != (res->newest > cursor &&
		    res->newest != 0))
			violation(rd, "no chunk, more %d, newest %" PRIu64
			    ", cursor %" PRIu64, res->more, res->newest,
			    cursor);
		return 0;
	}

	if (chunks[0].id != cursor + 1 + res->dropped) {
		violation(rd, "first id %" PRIu64 " != cursor %" PRIu64
		    " + 1 + dropped %" PRIu64, chunks[0].id, cursor,
		    res->dropped);
		return -1;
	}
	for (i = 0; i < res->nchunks; i++) {
		id = chunks[0].id + i;
		len = chunk_len(id);
		if (chunks[i].id != id) {
			violation(rd, "chunk %zu has id %" PRIu64 ", not %"
			    PRIu64, i, chunks[i].id, id);
			return -1;
		}
		if (id > last_id || id < first_id) {
			violation(rd, "id %" PRIu64 " out of range", id);
			return -1;
		}
		if (chunks[i].len != len) {
			violation(rd, "id %" PRIu64 ": len %" PRIu32
			    ", not %zu", id, chunks[i].len, len);
			return -1;
		}
		if (chunks[i].stream != chunk_stream(id)) {
			violation(rd, "id %" PRIu64 ": stream %u, not %u", id,
			    chunks[i].stream, chunk_stream(id));
			return -1;
		}
		if (chunks[i].offset != offsets[id - first_id]) {
			violation(rd, "id %" PRIu64 ": offset %" PRIu64
			    ", not %" PRIu64, id, chunks[i].offset,
			    offsets[id - first_id]);
			return -1;
		}
		if (chunks[i].data != buf + total) {
			violation(rd, "id %" PRIu64 ": data at +%td, not +%zu",
			    id, chunks[i].data - buf, total);
			return -1;
		}
		if (!same(chunks[i].data, id, len)) {
			violation(rd, "id %" PRIu64 ": wrong bytes (len %zu)",
			    id, len);
			return -1;
		}
		total += len;
	}
	if (total != res->nbytes)
		violation(rd, "nbytes %zu, chunks hold %zu", res->nbytes,
		    total);
	if (chunks[0].len > bufsize)
		violation(rd, "first chunk %" PRIu32 " > bufsize %zu",
		    chunks[0].len, bufsize);
	if (res->nchunks > 1 && total > max_bytes)
		violation(rd, "%zu bytes > max_bytes %zu", total, max_bytes);
	if (res->more != (chunks[res->nchunks - 1].id < res->newest))
		violation(rd, "more %d, last %" PRIu64 ", newest %" PRIu64,
		    res->more, chunks[res->nchunks - 1].id, res->newest);
	if (res->newest > ring_newest(ring) && ring_newest(ring) != 0)
		violation(rd, "newest %" PRIu64 " from the future",
		    res->newest);

	if (count) {
		rd->seen += res->nchunks;
		rd->dropped += res->dropped;
		rd->gaps += res->dropped != 0;
	}
	rd->bytes += total;
	return 0;
}

/* Read the whole ring from two rings back and check it; -1 on violation. */
static int
probe(struct reader *rd, uint8_t *buf, struct ring_chunk *chunks)
{
	struct ring_read_result	 res;
	uint64_t		 newest = ring_newest(ring), back, cursor;
	int			 rc;

	back = 2 * ring_slots(ring);
	if (newest == 0)
		return 0;
	cursor = newest - first_id + 1 > back ? newest - back : first_id - 1;
	rc = ring_read(ring, cursor, buf, chunk_max, SIZE_MAX, chunks,
	    STRESS_MAX_CHUNKS, &res);
	rd->probes++;
	if (rc != 0) {
		violation(rd, "probe ring_read(%" PRIu64 ") = %d", cursor, rc);
		return -1;
	}
	return check_read(rd, cursor, chunk_max, chunk_max, STRESS_MAX_CHUNKS,
	    buf, chunks, &res, 0);
}

/* -EMSGSIZE: some chunk after cursor must be longer than bufsize. */
static void
check_msgsize(struct reader *rd, uint64_t cursor, size_t bufsize)
{
	uint64_t	id, newest = ring_newest(ring);

	rd->msgsize++;
	for (id = cursor + 1; id <= newest && id != 0; id++)
		if (chunk_len(id) > bufsize)
			return;
	violation(rd, "-EMSGSIZE after %" PRIu64 " but no chunk up to %"
	    PRIu64 " exceeds %zu", cursor, newest, bufsize);
}

/* A reader: follow a cursor to the last id with random limits. */
static void *
read_loop(void *arg)
{
	struct reader			*rd = arg;
	struct ring_read_result		 res;
	struct ring_chunk		*chunks;
	uint8_t				*buf;
	uint64_t			 cursor = first_id - 1, x;
	size_t				 bufsize, max_bytes, maxchunks;
	int				 rc, small_ok = 1;

	buf = malloc(chunk_max);
	chunks = calloc(STRESS_MAX_CHUNKS, sizeof *chunks);
	if (buf == NULL || chunks == NULL)
		abort();

	while (cursor != last_id &&
	    !atomic_load_explicit(&stop, memory_order_relaxed)) {
		x = next_rand(&rd->rng);
		if ((x >> 56) % 4 == 0) {
			if (probe(rd, buf, chunks) != 0)
				break;
			continue;
		}
		bufsize = chunk_max;
		if (small_ok && x % 16 == 0)
			bufsize = STRESS_SMALL_BUF;
		switch ((x >> 8) % 4) {
		case 0:
			max_bytes = 0;			/* one chunk */
			break;
		case 1:
			max_bytes = (x >> 16) % 8192;
			break;
		default:
			max_bytes = SIZE_MAX;
			break;
		}
		maxchunks = (x >> 32) % 4 == 0 ? 1 :
		    1 + (x >> 40) % STRESS_MAX_CHUNKS;

		rc = ring_read(ring, cursor, buf, bufsize, max_bytes, chunks,
		    maxchunks, &res);
		rd->reads++;
		small_ok = 1;
		if (rc == -EMSGSIZE && bufsize < chunk_max) {
			check_msgsize(rd, cursor, bufsize);
			small_ok = 0;
			continue;
		}
		if (rc != 0) {
			violation(rd, "ring_read(%" PRIu64 ") = %d", cursor,
			    rc);
			break;
		}
		if (check_read(rd, cursor, bufsize,
		    max_bytes < bufsize ? max_bytes : bufsize, maxchunks, buf,
		    chunks, &res, 1) != 0)
			break;
		if (res.nchunks == 0) {
			rd->empty++;
			sched_yield();
			continue;
		}
		cursor = chunks[res.nchunks - 1].id;
		atomic_store_explicit(&rd->cursor, cursor,
		    memory_order_relaxed);
	}
	atomic_store_explicit(&rd->cursor, UINT64_MAX, memory_order_relaxed);

	if (cursor == last_id && rd->seen + rd->dropped != nchunks)
		violation(rd, "saw %" PRIu64 " + dropped %" PRIu64 " != %"
		    PRIu64 " chunks", rd->seen, rd->dropped, nchunks);
	free(chunks);
	free(buf);
	return NULL;
}

/* Monotonic seconds. */
static double
now(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Print usage and exit 2. */
static void
usage(void)
{
	fprintf(stderr, "usage: ring_stress [--chunks N] [--readers N] "
	    "[--capacity BYTES] [--max-len BYTES] [--first-id N|max] "
	    "[--seed N] [--expect-violation] [--quiet]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct ring_stats	 st;
	size_t			 capacity = STRESS_CAPACITY;
	int			 i, first_max = 0;
	uint64_t		 seen = 0, dropped = 0, gaps = 0, empty = 0;
	uint64_t		 reads = 0, msgsize = 0, probes = 0, v;
	double			 t0, t1;
	const char		*arg;

	nchunks = STRESS_CHUNKS;
	first_id = 1;
	for (i = 1; i < argc; i++) {
		arg = argv[i];
		if (strcmp(arg, "--expect-violation") == 0)
			expect_violation = 1;
		else if (strcmp(arg, "--quiet") == 0)
			quiet = 1;
		else if (i + 1 >= argc)
			usage();
		else if (strcmp(arg, "--chunks") == 0)
			nchunks = strtoull(argv[++i], NULL, 0);
		else if (strcmp(arg, "--readers") == 0)
			nreaders = atoi(argv[++i]);
		else if (strcmp(arg, "--capacity") == 0)
			capacity = strtoull(argv[++i], NULL, 0);
		else if (strcmp(arg, "--max-len") == 0)
			max_len = strtoull(argv[++i], NULL, 0);
		else if (strcmp(arg, "--seed") == 0)
			seed = strtoull(argv[++i], NULL, 0);
		else if (strcmp(arg, "--first-id") == 0) {
			i++;
			if (strcmp(argv[i], "max") == 0)
				first_max = 1;
			else
				first_id = strtoull(argv[i], NULL, 0);
		} else
			usage();
	}
	if (nchunks == 0 || nreaders < 1 || nreaders > STRESS_READERS_MAX)
		usage();
	if (first_max)
		first_id = UINT64_MAX - nchunks + 1;	/* last id: 2^64 - 1 */
	if (first_id == 0 || UINT64_MAX - first_id < nchunks - 1)
		usage();
	last_id = first_id + nchunks - 1;

	if ((ring = ring_create(capacity, first_id)) == NULL) {
		fprintf(stderr, "ring_stress: ring_create: %s\n",
		    strerror(errno));
		return 2;
	}
	chunk_max = ring_chunk_max(ring);
	if ((offsets = calloc(nchunks, sizeof *offsets)) == NULL) {
		fprintf(stderr, "ring_stress: out of memory\n");
		return 2;
	}

	t0 = now();
	for (i = 0; i < nreaders; i++) {
		memset(&readers[i], 0, sizeof readers[i]);
		readers[i].index = i;
		readers[i].rng = seed * 1000 + (uint64_t)i;
		atomic_init(&readers[i].cursor, first_id - 1);
		if (pthread_create(&readers[i].thread, NULL, read_loop,
		    &readers[i]) != 0) {
			fprintf(stderr, "ring_stress: pthread_create failed\n");
			return 2;
		}
	}
	produce();
	for (i = 0; i < nreaders; i++) {
		pthread_join(readers[i].thread, NULL);
		seen += readers[i].seen;
		dropped += readers[i].dropped;
		gaps += readers[i].gaps;
		empty += readers[i].empty;
		reads += readers[i].reads;
		msgsize += readers[i].msgsize;
		probes += readers[i].probes;
	}
	t1 = now();

	ring_stats(ring, &st);
	if (!atomic_load(&stop) && (st.newest != last_id ||
	    st.chunks_dropped != st.oldest - first_id ||
	    st.bytes_held + st.bytes_dropped != st.bytes_total ||
	    st.bytes_total != offsets[nchunks - 1] + chunk_len(last_id)))
		violation(NULL, "final stats do not add up");

	v = atomic_load(&violations);
	if (!quiet || v != 0)
		printf("ring_stress: %" PRIu64 " chunks (%" PRIu64 " bytes) "
		    "in %.2f s, ring %zu bytes / %zu slots, %d readers: %"
		    PRIu64 " reads (%" PRIu64 " empty, %" PRIu64
		    " -EMSGSIZE), %" PRIu64 " probes; %" PRIu64 " chunks "
		    "checked, %" PRIu64 " dropped in %" PRIu64 " gaps; %"
		    PRIu64 " violations\n", nchunks, st.bytes_total, t1 - t0,
		    st.capacity, st.slots, nreaders, reads, empty, msgsize,
		    probes, seen, dropped, gaps, v);
	ring_free(ring);
	free(offsets);

	if (expect_violation) {
		if (v == 0) {
			fprintf(stderr, "ring_stress: expected a violation, "
			    "found none\n");
			return 1;
		}
		printf("ring_stress: caught, as expected\n");
		return 0;
	}
	return v == 0 ? 0 : 1;
}
