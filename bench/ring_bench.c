/*
 * ring_bench.c -- ring throughput against memcpy of the same sizes.
 *
 * For each chunk size: memcpy of chunk-sized pieces into an arena-sized
 * buffer (the producer's baseline), ring_append() with 0, 1 and 4 reader
 * threads following it, memcpy out of an arena-sized buffer in 64 KiB
 * windows (the reader's baseline) and ring_read() of a full ring with no
 * producer.  Ratios are to the baseline measured in the same run.
 *
 * With readers, "GB/s" is the producer's wall-clock rate and "cpu GB/s" its
 * rate per second of its own CPU time: on a machine with fewer cores than
 * threads the first includes time the producer did not get to run, the
 * second only the cost of sharing the ring (cache lines and bandwidth).
 * Ratios use the CPU-time rates, which hold up on a shared machine; each
 * line is the best of BENCH_RUNS runs (one with --quick).
 *
 * Readers that have caught up call sched_yield() and read again (the worst
 * case for the producer: they poll its cache lines non-stop), or with
 * --poll-us N sleep N microseconds first, like long-poll waiters woken by a
 * coalesced notification.
 *
 * --rate R caps the producer at R GB/s (it sleeps when ahead), which is what
 * a PTY or a pipe does to agentd's producer: readers keep up, and "cpu GB/s"
 * then shows what sharing the ring costs the producer per byte.
 *
 * usage: ring_bench [--quick] [--capacity BYTES] [--seconds S] [--poll-us N]
 *	  [--rate GBPS]
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ringbuf.h"

#define BENCH_CAPACITY		(1024u * 1024)	/* bytes: agentd's default ring */
#define BENCH_WINDOW		(64u * 1024)	/* bytes: agentd's default max_bytes */
#define BENCH_MAXCHUNKS		4096		/* descriptors per read */
#define BENCH_SECONDS		0.5		/* seconds per measurement */
#define BENCH_QUICK_SECONDS	0.02		/* seconds per measurement, --quick */
#define BENCH_CLOCK_EVERY	64		/* operations between clock reads */
#define BENCH_READERS_MAX	4
#define BENCH_RUNS		3		/* runs per line, the best kept */

struct bench_reader {
	pthread_t	 thread;
	struct ring	*ring;
	uint64_t	 bytes;
	uint64_t	 dropped;
	uint64_t	 chunks;
};

struct result {
	double		 gbps;		/* bytes per ns */
	double		 cpu_gbps;	/* bytes per ns of the thread's CPU time */
	double		 reader_gbps;	/* all readers together */
	double		 dropped;	/* share of chunks the readers missed */
};

static double		 seconds = BENCH_SECONDS;
static int		 runs = BENCH_RUNS;
static long		 poll_us;		/* 0: sched_yield() */
static double		 rate;			/* producer cap, GB/s; 0: none */
static size_t		 capacity = BENCH_CAPACITY;
static _Atomic int	 running;

static double	wall(void);
static void	pace(uint64_t, double);
static double	cpu(void);
static void	sink(void *);
static struct result bench_memcpy_in(const uint8_t *, uint8_t *, size_t);
static struct result bench_memcpy_out(const uint8_t *, uint8_t *, size_t);
static void	*reader_loop(void *);
static struct result bench_append(const uint8_t *, size_t, int);
static struct result bench_read(const uint8_t *, size_t);
static struct result best(struct result, struct result);
static void	row(size_t, const char *, const struct result *,
		    const struct result *, int);
static void	usage(void);

/* Monotonic time in ns. */
static double
wall(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Sleep while bytes since t0 are ahead of --rate. */
static void
pace(uint64_t bytes, double t0)
{
	struct timespec	ts;
	double		ahead;

	if (rate <= 0)
		return;
	ahead = (double)bytes / rate - (wall() - t0);
	if (ahead < 20e3)
		return;
	ts.tv_sec = (time_t)(ahead / 1e9);
	ts.tv_nsec = (long)(ahead - (double)ts.tv_sec * 1e9);
	nanosleep(&ts, NULL);
}

/* This thread's CPU time in ns. */
static double
cpu(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Keep the compiler from dropping stores to p. */
static void
sink(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

/* memcpy chunk-sized pieces into an arena-sized buffer, round and round. */
static struct result
bench_memcpy_in(const uint8_t *src, uint8_t *arena, size_t chunk)
{
	struct result	r = { 0, 0, 0, 0 };
	size_t		pos = 0, step = (chunk + 7) & ~(size_t)7;
	uint64_t	bytes = 0, n = 0;
	double		t0 = wall(), c0 = cpu(), t = t0;

	do {
		if (pos + chunk > capacity)
			pos = 0;
		memcpy(arena + pos, src, chunk);
		sink(arena);
		pos += step;
		bytes += chunk;
		n++;
	} while (n % BENCH_CLOCK_EVERY != 0 || (t = wall()) - t0 < seconds * 1e9);
	r.gbps = (double)bytes / (t - t0);
	r.cpu_gbps = (double)bytes / (cpu() - c0);
	return r;
}

/* memcpy an arena-sized buffer out in BENCH_WINDOW pieces, round and round. */
static struct result
bench_memcpy_out(const uint8_t *arena, uint8_t *buf, size_t chunk)
{
	struct result	r = { 0, 0, 0, 0 };
	size_t		pos = 0, len = BENCH_WINDOW - BENCH_WINDOW % chunk;
	uint64_t	bytes = 0, n = 0;
	double		t0 = wall(), c0 = cpu(), t = t0;

	if (len == 0)
		len = chunk;
	do {
		if (pos + len > capacity)
			pos = 0;
		memcpy(buf, arena + pos, len);
		sink(buf);
		pos += len;
		bytes += len;
		n++;
	} while (n % BENCH_CLOCK_EVERY != 0 || (t = wall()) - t0 < seconds * 1e9);
	r.gbps = (double)bytes / (t - t0);
	r.cpu_gbps = (double)bytes / (cpu() - c0);
	return r;
}

/* A reader thread: follow the newest chunks in 64 KiB windows. */
static void *
reader_loop(void *arg)
{
	struct bench_reader	*rd = arg;
	struct ring_read_result	 res;
	struct ring_chunk	*chunks;
	uint8_t			*buf;
	uint64_t		 cursor = 0;
	size_t			 bufsize = ring_chunk_max(rd->ring);

	buf = malloc(bufsize);
	chunks = malloc(BENCH_MAXCHUNKS * sizeof *chunks);
	if (buf == NULL || chunks == NULL)
		abort();
	while (atomic_load_explicit(&running, memory_order_relaxed)) {
		if (ring_read(rd->ring, cursor, buf, bufsize, BENCH_WINDOW,
		    chunks, BENCH_MAXCHUNKS, &res) != 0)
			abort();
		if (res.nchunks == 0) {
			if (poll_us > 0) {
				struct timespec	ts = { poll_us / 1000000,
						    poll_us % 1000000 * 1000 };

				nanosleep(&ts, NULL);
			} else
				sched_yield();
			continue;
		}
		sink(buf);
		cursor = chunks[res.nchunks - 1].id;
		rd->bytes += res.nbytes;
		rd->dropped += res.dropped;
		rd->chunks += res.nchunks;
	}
	free(chunks);
	free(buf);
	return NULL;
}

/* ring_append() chunk-sized pieces with nreaders threads reading along. */
static struct result
bench_append(const uint8_t *src, size_t chunk, int nreaders)
{
	struct bench_reader	 readers[BENCH_READERS_MAX];
	struct result		 r = { 0, 0, 0, 0 };
	struct ring		*ring;
	uint64_t		 bytes = 0, n = 0, rbytes = 0, seen = 0, lost = 0;
	double			 t0, c0, t = 0;
	int			 i;

	if ((ring = ring_create(capacity, 1)) == NULL) {
		fprintf(stderr, "ring_bench: ring_create: %s\n",
		    strerror(errno));
		exit(1);
	}
	/* Touch the arena once, as a long-lived session's ring is. */
	while (bytes < capacity) {
		ring_append(ring, src, chunk, RING_STREAM_PTY);
		bytes += chunk;
	}
	bytes = 0;

	atomic_store(&running, 1);
	for (i = 0; i < nreaders; i++) {
		memset(&readers[i], 0, sizeof readers[i]);
		readers[i].ring = ring;
		if (pthread_create(&readers[i].thread, NULL, reader_loop,
		    &readers[i]) != 0)
			abort();
	}

	t0 = wall();
	c0 = cpu();
	do {
		ring_append(ring, src, chunk, RING_STREAM_PTY);
		bytes += chunk;
		n++;
		if (n % BENCH_CLOCK_EVERY == 0)
			pace(bytes, t0);
	} while (n % BENCH_CLOCK_EVERY != 0 || (t = wall()) - t0 < seconds * 1e9);
	r.gbps = (double)bytes / (t - t0);
	r.cpu_gbps = (double)bytes / (cpu() - c0);

	atomic_store(&running, 0);
	for (i = 0; i < nreaders; i++) {
		pthread_join(readers[i].thread, NULL);
		rbytes += readers[i].bytes;
		seen += readers[i].chunks;
		lost += readers[i].dropped;
	}
	r.reader_gbps = (double)rbytes / (wall() - t0);
	r.dropped = seen + lost ? (double)lost / (double)(seen + lost) : 0;
	ring_free(ring);
	return r;
}

/* ring_read() a full ring in 64 KiB windows, over and over, no producer. */
static struct result
bench_read(const uint8_t *src, size_t chunk)
{
	struct ring_read_result	 res;
	struct result		 r = { 0, 0, 0, 0 };
	struct ring_chunk	*chunks;
	struct ring_stats	 st;
	struct ring		*ring;
	uint8_t			*buf;
	uint64_t		 bytes = 0, n = 0, cursor;
	double			 t0, c0, t = 0;

	if ((ring = ring_create(capacity, 1)) == NULL) {
		fprintf(stderr, "ring_bench: ring_create: %s\n",
		    strerror(errno));
		exit(1);
	}
	while (bytes < 2 * capacity) {
		ring_append(ring, src, chunk, RING_STREAM_PTY);
		bytes += chunk;
	}
	ring_stats(ring, &st);
	buf = malloc(ring_chunk_max(ring));
	chunks = malloc(BENCH_MAXCHUNKS * sizeof *chunks);
	if (buf == NULL || chunks == NULL)
		abort();

	bytes = 0;
	cursor = st.oldest - 1;
	t0 = wall();
	c0 = cpu();
	do {
		if (ring_read(ring, cursor, buf, ring_chunk_max(ring),
		    BENCH_WINDOW, chunks, BENCH_MAXCHUNKS, &res) != 0)
			abort();
		sink(buf);
		bytes += res.nbytes;
		cursor = res.more ? chunks[res.nchunks - 1].id : st.oldest - 1;
		n++;
	} while (n % BENCH_CLOCK_EVERY != 0 || (t = wall()) - t0 < seconds * 1e9);
	r.gbps = (double)bytes / (t - t0);
	r.cpu_gbps = (double)bytes / (cpu() - c0);
	free(chunks);
	free(buf);
	ring_free(ring);
	return r;
}

/* The better of two runs, by CPU-time rate. */
static struct result
best(struct result a, struct result b)
{
	return a.cpu_gbps >= b.cpu_gbps ? a : b;
}

/* Print one line of the table. */
static void
row(size_t chunk, const char *what, const struct result *r,
    const struct result *base, int readers)
{
	printf("%7zu  %-20s %7.2f %7.2f %6.2f", chunk, what, r->gbps,
	    r->cpu_gbps, r->cpu_gbps / base->cpu_gbps);
	if (readers)
		printf("   %7.2f %6.1f%%", r->reader_gbps, 100 * r->dropped);
	printf("\n");
}

/* Print usage and exit 2. */
static void
usage(void)
{
	fprintf(stderr, "usage: ring_bench [--quick] [--capacity BYTES] "
	    "[--seconds S] [--poll-us N] [--rate GBPS]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const size_t	 all_sizes[] = { 64, 4096, 65536 };
	static const size_t	 quick_sizes[] = { 4096 };
	const size_t		*sizes = all_sizes;
	size_t			 nsizes = 3, i, chunk;
	uint8_t			*src, *arena, *buf;
	struct result		 in, out, app[3], rd;
	static const int	 nreaders[3] = { 0, 1, 4 };
	char			 label[32];
	double			 load[3] = { 0, 0, 0 };
	FILE			*f;
	int			 k, n;

	for (k = 1; k < argc; k++) {
		if (strcmp(argv[k], "--quick") == 0) {
			sizes = quick_sizes;
			nsizes = 1;
			seconds = BENCH_QUICK_SECONDS;
			runs = 1;
		} else if (strcmp(argv[k], "--capacity") == 0 && k + 1 < argc)
			capacity = strtoull(argv[++k], NULL, 0);
		else if (strcmp(argv[k], "--seconds") == 0 && k + 1 < argc)
			seconds = strtod(argv[++k], NULL);
		else if (strcmp(argv[k], "--poll-us") == 0 && k + 1 < argc)
			poll_us = strtol(argv[++k], NULL, 0);
		else if (strcmp(argv[k], "--rate") == 0 && k + 1 < argc)
			rate = strtod(argv[++k], NULL);
		else
			usage();
	}
	if (capacity < RING_CAPACITY_MIN || capacity > RING_CAPACITY_MAX ||
	    seconds <= 0 || poll_us < 0 || rate < 0)
		usage();

	src = malloc(65536);
	arena = malloc(capacity);
	buf = malloc(capacity);
	if (src == NULL || arena == NULL || buf == NULL)
		abort();
	for (i = 0; i < 65536; i++)
		src[i] = (uint8_t)(i * 131 + 7);
	memset(arena, 1, capacity);
	memset(buf, 2, capacity);

	if ((f = fopen("/proc/loadavg", "r")) != NULL) {
		if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
			load[0] = -1;
		fclose(f);
	}
	printf("ring %zu bytes, best of %d x %.2f s per line, idle readers "
	    "sleep %ld us, producer cap %.2f GB/s (0: none), %ld cpus, "
	    "load %.2f\nGB/s = 10^9 bytes/s; ratio by cpu GB/s; missed: "
	    "chunks the readers saw as dropped\n", capacity, runs, seconds,
	    poll_us, rate, sysconf(_SC_NPROCESSORS_ONLN), load[0]);
	printf("%7s  %-20s %7s %7s %6s   %7s %7s\n", "chunk", "test", "GB/s",
	    "cpuGB/s", "ratio", "readers", "missed");
	for (i = 0; i < nsizes; i++) {
		chunk = sizes[i] < capacity ? sizes[i] : capacity;
		in = bench_memcpy_in(src, arena, chunk);
		for (n = 1; n < runs; n++)
			in = best(in, bench_memcpy_in(src, arena, chunk));
		row(chunk, "memcpy in", &in, &in, 0);
		for (k = 0; k < 3; k++) {
			app[k] = bench_append(src, chunk, nreaders[k]);
			for (n = 1; n < runs; n++)
				app[k] = best(app[k],
				    bench_append(src, chunk, nreaders[k]));
			snprintf(label, sizeof label, "append, %d reader%s",
			    nreaders[k], nreaders[k] == 1 ? "" : "s");
			row(chunk, label, &app[k], &in, nreaders[k]);
		}
		out = bench_memcpy_out(arena, buf, chunk);
		for (n = 1; n < runs; n++)
			out = best(out, bench_memcpy_out(arena, buf, chunk));
		row(chunk, "memcpy out", &out, &out, 0);
		rd = bench_read(src, chunk);
		for (n = 1; n < runs; n++)
			rd = best(rd, bench_read(src, chunk));
		row(chunk, "read", &rd, &out, 0);
		printf("%7zu  4 readers cost the producer %.0f%% wall, %.0f%% "
		    "cpu\n", chunk, 100 * (1 - app[2].gbps / app[0].gbps),
		    100 * (1 - app[2].cpu_gbps / app[0].cpu_gbps));
	}
	free(buf);
	free(arena);
	free(src);
	return 0;
}
