/*
 * ring_unit.c -- Check unit tests for ringbuf: one thread, every edge.
 */

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringbuf.h"
#include "ringread.h"

#define CAP		4096u			/* bytes: the smallest ring */
#define BUFSIZE		(256u * 1024)		/* bytes: read buffer */
#define NCHUNKS		1024			/* read descriptors */

/* ck_assert() records every pass through a pipe; hot loops use this. */
#define CHECK(e)	do {						\
	if (!(e))							\
		ck_abort_msg("line %d: %s", __LINE__, #e);		\
} while (0)
#define CHECK_eq(a, b)	CHECK((a) == (b))
#define CHECK_le(a, b)	CHECK((a) <= (b))

static uint8_t			 rbuf[BUFSIZE];
static struct ring_chunk	 rchunks[NCHUNKS];
static struct ring_read_result	 rres;

static uint8_t	 pattern_byte(uint64_t, size_t);
static void	 pattern(uint8_t *, uint64_t, size_t);
static uint64_t	 put(struct ring *, uint64_t, size_t);
static int	 get(struct ring *, uint64_t, size_t, size_t);
static void	 check_chunk(size_t, uint64_t, uint64_t, size_t,
		     enum ring_stream);
static void	 count_notify(struct ring *, void *);
static struct ring *mkring(size_t, uint64_t);

/* The n-th byte of the test pattern seeded by seed. */
static uint8_t
pattern_byte(uint64_t seed, size_t n)
{
	uint64_t	x = seed * 0x9e3779b97f4a7c15ull + n * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	return (uint8_t)(x >> 29);
}

/* Fill len bytes with the pattern seeded by seed. */
static void
pattern(uint8_t *p, uint64_t seed, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

/* Append len pattern bytes seeded by seed as one chunk; return its id. */
static uint64_t
put(struct ring *r, uint64_t seed, size_t len)
{
	static uint8_t	src[RING_CAPACITY_MAX / 64];

	ck_assert_uint_le(len, sizeof src);
	pattern(src, seed, len);
	return ring_append(r, src, len, RING_STREAM_PTY);
}

/* Read after cursor into the shared buffers; returns ring_read()'s result. */
static int
get(struct ring *r, uint64_t cursor, size_t max_bytes, size_t maxchunks)
{
	size_t	i, total = 0;
	int	rc;

	memset(&rres, 0xa5, sizeof rres);
	rc = ring_read(r, cursor, rbuf, sizeof rbuf, max_bytes, rchunks,
	    maxchunks, &rres);
	if (rc != 0)
		return rc;

	/* Contract checks that hold for every successful read. */
	CHECK(rres.nchunks <= maxchunks);
	for (i = 0; i < rres.nchunks; i++) {
		CHECK(rchunks[i].data == rbuf + total);
		CHECK(rchunks[i].id == cursor + 1 + rres.dropped + i);
		total += rchunks[i].len;
	}
	CHECK(rres.nbytes == total);
	if (rres.nchunks == 0)
		CHECK(rres.dropped == 0);
	else
		CHECK(rres.more == (rchunks[rres.nchunks - 1].id < rres.newest));
	return 0;
}

/* Check returned chunk i: id, offset, len, stream and the pattern seeded by id. */
static void
check_chunk(size_t i, uint64_t id, uint64_t offset, size_t len,
    enum ring_stream stream)
{
	static uint8_t	want[RING_CAPACITY_MAX / 64];

	CHECK(i < rres.nchunks);
	CHECK(rchunks[i].id == id);
	CHECK(rchunks[i].offset == offset);
	CHECK(rchunks[i].len == len);
	CHECK(rchunks[i].stream == stream);
	pattern(want, id, len);
	CHECK(memcmp(rchunks[i].data, want, len) == 0);
}

/* Notify hook: count the calls. */
static void
count_notify(struct ring *r, void *arg)
{
	(void)r;
	(*(int *)arg)++;
}

/* Create a ring or fail the test. */
static struct ring *
mkring(size_t capacity, uint64_t first_id)
{
	struct ring	*r = ring_create(capacity, first_id);

	ck_assert_ptr_nonnull(r);
	return r;
}

START_TEST(test_create_limits)
{
	struct ring	*r;

	errno = 0;
	ck_assert_ptr_null(ring_create(RING_CAPACITY_MIN - 1, 1));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(ring_create(RING_CAPACITY_MAX + 1, 1));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(ring_create(CAP, 0));
	ck_assert_int_eq(errno, EINVAL);

	r = mkring(RING_CAPACITY_MIN, 1);
	ck_assert_uint_eq(ring_chunk_max(r), RING_CAPACITY_MIN);
	ck_assert_uint_eq(ring_slots(r), RING_SLOTS_MIN);
	ring_free(r);

	r = mkring(4097, 1);			/* rounded up to 8 */
	ck_assert_uint_eq(ring_chunk_max(r), 4104);
	ring_free(r);

	r = mkring(1024 * 1024, 1);
	ck_assert_uint_eq(ring_slots(r), 1024 * 1024 / RING_BYTES_PER_SLOT);
	ring_free(r);

	r = mkring(100000, 1);			/* 781.25 slots -> 1024 */
	ck_assert_uint_eq(ring_slots(r), 1024);
	ck_assert_uint_eq(ring_chunk_max(r), 100000);
	ring_free(r);

	r = mkring(RING_CAPACITY_MAX, 1);
	ck_assert_uint_eq(ring_chunk_max(r), RING_CAPACITY_MAX);
	ck_assert_uint_eq(ring_slots(r),
	    RING_CAPACITY_MAX / RING_BYTES_PER_SLOT);
	ring_free(r);

	ring_free(NULL);
}
END_TEST

START_TEST(test_empty)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;

	ck_assert_uint_eq(ring_newest(r), 0);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 0);
	ck_assert_uint_eq(rres.nbytes, 0);
	ck_assert_uint_eq(rres.newest, 0);
	ck_assert_int_eq(rres.more, 0);
	ck_assert_int_eq(get(r, 1, BUFSIZE, NCHUNKS), -ERANGE);

	ring_stats(r, &st);
	ck_assert_uint_eq(st.newest, 0);
	ck_assert_uint_eq(st.oldest, 1);
	ck_assert_uint_eq(st.bytes_held, 0);
	ck_assert_uint_eq(st.bytes_total, 0);
	ck_assert_uint_eq(st.bytes_dropped, 0);
	ck_assert_uint_eq(st.chunks_dropped, 0);
	ck_assert_uint_eq(st.capacity, CAP);
	ck_assert_uint_eq(st.slots, RING_SLOTS_MIN);
	ck_assert_int_eq(ring_closed(r), 0);
	ring_free(r);
}
END_TEST

START_TEST(test_cursor_range)
{
	struct ring	*r = mkring(CAP, 1);

	ck_assert_uint_eq(put(r, 1, 10), 1);
	ck_assert_uint_eq(put(r, 2, 10), 2);
	ck_assert_uint_eq(put(r, 3, 10), 3);
	ck_assert_uint_eq(ring_newest(r), 3);

	ck_assert_int_eq(get(r, 3, BUFSIZE, NCHUNKS), 0);	/* at newest */
	ck_assert_uint_eq(rres.nchunks, 0);
	ck_assert_int_eq(rres.more, 0);
	ck_assert_uint_eq(rres.newest, 3);
	ck_assert_int_eq(get(r, 4, BUFSIZE, NCHUNKS), -ERANGE);
	ck_assert_int_eq(get(r, UINT64_MAX, BUFSIZE, NCHUNKS), -ERANGE);

	ck_assert_int_eq(get(r, 1, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 2);
	check_chunk(0, 2, 10, 10, RING_STREAM_PTY);
	check_chunk(1, 3, 20, 10, RING_STREAM_PTY);
	ring_free(r);
}
END_TEST

static const size_t sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000,
    CAP - 9, CAP - 8, CAP - 7, CAP - 1, CAP };

START_TEST(test_sizes)
{
	struct ring	*r = mkring(CAP, 1);
	size_t		 len = sizes[_i];
	uint64_t	 id, i;

	/* Several in a row, so the size also meets the arena end. */
	for (i = 1; i <= 12; i++) {
		id = put(r, i, len);
		ck_assert_uint_eq(id, i);
		ck_assert_int_eq(get(r, id - 1, BUFSIZE, NCHUNKS), 0);
		ck_assert_uint_eq(rres.nchunks, 1);
		check_chunk(0, id, (i - 1) * len, len, RING_STREAM_PTY);
		ck_assert_uint_eq(rres.nbytes, len);
	}
	ring_free(r);
}
END_TEST

START_TEST(test_exact_fit)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;
	uint64_t		 i;

	for (i = 1; i <= 4; i++)
		ck_assert_uint_eq(put(r, i, CAP / 4), i);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 0);
	ck_assert_uint_eq(st.bytes_held, CAP);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 4);
	ck_assert_uint_eq(rres.dropped, 0);
	for (i = 0; i < 4; i++)
		check_chunk(i, i + 1, i * (CAP / 4), CAP / 4, RING_STREAM_PTY);

	/* One more evicts exactly one. */
	ck_assert_uint_eq(put(r, 5, CAP / 4), 5);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 1);
	ck_assert_uint_eq(st.oldest, 2);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 1);
	ck_assert_uint_eq(rres.nchunks, 4);
	for (i = 0; i < 4; i++)
		check_chunk(i, i + 2, (i + 1) * (CAP / 4), CAP / 4,
		    RING_STREAM_PTY);
	ring_free(r);
}
END_TEST

START_TEST(test_wrap)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;
	uint64_t		 i;

	/* 4 x 1000 bytes end at 4000; the 5th skips 96 bytes, starts at 0. */
	for (i = 1; i <= 4; i++)
		put(r, i, 1000);
	ck_assert_uint_eq(put(r, 5, 1000), 5);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 1);	/* only chunk 1 */
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 1);
	ck_assert_uint_eq(rres.nchunks, 4);
	for (i = 0; i < 4; i++)
		check_chunk(i, i + 2, (i + 1) * 1000, 1000, RING_STREAM_PTY);

	/* Chunk 6 goes to 1000: chunk 2 must go, no more. */
	ck_assert_uint_eq(put(r, 6, 1000), 6);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 2);

	/* Odd sizes across the end: every held chunk stays intact. */
	for (i = 7; i < 200; i++) {
		put(r, i, 1 + (i * 37) % 1500);
		ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
		ck_assert_uint_ge(rres.nchunks, 1);
		ck_assert_uint_eq(rchunks[rres.nchunks - 1].id, i);
		for (size_t k = 0; k < rres.nchunks; k++)
			check_chunk(k, rchunks[k].id, rchunks[k].offset,
			    rchunks[k].id < 7 ? 1000 :
			    1 + (rchunks[k].id * 37) % 1500, RING_STREAM_PTY);
	}
	ring_free(r);
}
END_TEST

START_TEST(test_fill_ring)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;
	uint64_t		 i;

	for (i = 1; i <= 5; i++)
		put(r, i, 100);
	ck_assert_uint_eq(put(r, 6, CAP), 6);		/* the whole arena */
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 5);
	ck_assert_uint_eq(st.bytes_dropped, 500);
	ck_assert_uint_eq(st.bytes_held, CAP);
	ck_assert_uint_eq(st.oldest, 6);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 5);
	ck_assert_uint_eq(rres.nchunks, 1);
	check_chunk(0, 6, 500, CAP, RING_STREAM_PTY);

	/* A second full chunk evicts it; one byte more evicts that one. */
	ck_assert_uint_eq(put(r, 7, CAP), 7);
	ck_assert_uint_eq(put(r, 8, 1), 8);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.oldest, 8);
	ck_assert_int_eq(get(r, 5, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 2);
	check_chunk(0, 8, 500 + 2 * CAP, 1, RING_STREAM_PTY);
	ring_free(r);
}
END_TEST

START_TEST(test_index_full)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;
	uint64_t		 i;

	/* 100 one-byte chunks use 800 arena bytes but need 100 > 64 slots. */
	for (i = 1; i <= 100; i++)
		put(r, i, 1);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 100 - RING_SLOTS_MIN);
	ck_assert_uint_eq(st.oldest, 100 - RING_SLOTS_MIN + 1);
	ck_assert_uint_eq(st.bytes_held, RING_SLOTS_MIN);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 100 - RING_SLOTS_MIN);
	ck_assert_uint_eq(rres.nchunks, RING_SLOTS_MIN);
	for (i = 0; i < RING_SLOTS_MIN; i++)
		check_chunk(i, 100 - RING_SLOTS_MIN + 1 + i,
		    100 - RING_SLOTS_MIN + i, 1, RING_STREAM_PTY);

	/* Empty chunks take a slot each and no arena. */
	for (i = 101; i <= 200; i++)
		put(r, i, 0);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.oldest, 200 - RING_SLOTS_MIN + 1);
	ck_assert_uint_eq(st.bytes_held, 0);
	ring_free(r);
}
END_TEST

START_TEST(test_arena_full)
{
	struct ring		*r = mkring(2 * CAP, 1);
	struct ring_stats	 st;
	uint64_t		 i;

	/* 8 x 1000 fit in 8192; the 9th skips 192 bytes and evicts one. */
	for (i = 1; i <= 8; i++)
		put(r, i, 1000);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 0);
	put(r, 9, 1000);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.chunks_dropped, 1);
	ck_assert_uint_lt(9 - st.oldest + 1, ring_slots(r));
	ring_free(r);
}
END_TEST

START_TEST(test_dropped)
{
	struct ring	*r = mkring(CAP, 1);
	uint64_t	 i;

	for (i = 1; i <= 10; i++)
		put(r, i, 1000);			/* 4 held: 7..10 */
	ck_assert_int_eq(get(r, 2, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 4);		/* 3, 4, 5, 6 */
	ck_assert_uint_eq(rchunks[0].id, 7);
	ck_assert_int_eq(get(r, 6, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 0);
	ck_assert_int_eq(get(r, 0, BUFSIZE, 2), 0);
	ck_assert_uint_eq(rres.dropped, 6);
	ck_assert_uint_eq(rres.nchunks, 2);
	ck_assert_int_eq(rres.more, 1);
	ck_assert_int_eq(get(r, 9, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	ring_free(r);
}
END_TEST

START_TEST(test_limits)
{
	struct ring	*r = mkring(CAP, 1);
	uint64_t	 i;

	for (i = 1; i <= 10; i++)
		put(r, i, 100);

	ck_assert_int_eq(get(r, 0, 250, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 2);
	ck_assert_int_eq(rres.more, 1);
	ck_assert_int_eq(get(r, 0, 300, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 3);
	ck_assert_int_eq(get(r, 0, 1000, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 10);
	ck_assert_int_eq(rres.more, 0);
	ck_assert_int_eq(get(r, 0, 999, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 9);
	ck_assert_int_eq(rres.more, 1);

	/* The first chunk always comes, even beyond max_bytes. */
	ck_assert_int_eq(get(r, 0, 0, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	ck_assert_int_eq(rres.more, 1);
	ck_assert_int_eq(get(r, 4, 50, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	check_chunk(0, 5, 400, 100, RING_STREAM_PTY);

	/* maxchunks. */
	ck_assert_int_eq(get(r, 0, BUFSIZE, 3), 0);
	ck_assert_uint_eq(rres.nchunks, 3);
	ck_assert_int_eq(rres.more, 1);
	ck_assert_int_eq(get(r, 7, BUFSIZE, 3), 0);
	ck_assert_uint_eq(rres.nchunks, 3);
	ck_assert_int_eq(rres.more, 0);
	ck_assert_int_eq(ring_read(r, 0, rbuf, BUFSIZE, BUFSIZE, NULL, 0,
	    &rres), 0);
	ck_assert_uint_eq(rres.nchunks, 0);
	ck_assert_uint_eq(rres.dropped, 0);
	ck_assert_int_eq(rres.more, 1);
	ck_assert_uint_eq(rres.newest, 10);
	ck_assert_int_eq(ring_read(r, 10, rbuf, BUFSIZE, BUFSIZE, NULL, 0,
	    &rres), 0);
	ck_assert_int_eq(rres.more, 0);
	ring_free(r);
}
END_TEST

START_TEST(test_bufsize)
{
	struct ring	*r = mkring(CAP, 1);
	uint64_t	 i;
	int		 rc;

	put(r, 1, 2000);
	for (i = 2; i <= 5; i++)
		put(r, i, 100);

	/* The first chunk must fit in bufsize, whatever max_bytes says. */
	rc = ring_read(r, 0, rbuf, 2000, 10, rchunks, NCHUNKS, &rres);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	check_chunk(0, 1, 0, 2000, RING_STREAM_PTY);
	rc = ring_read(r, 0, rbuf, 1999, BUFSIZE, rchunks, NCHUNKS, &rres);
	ck_assert_int_eq(rc, -EMSGSIZE);
	ck_assert_uint_eq(rres.nbytes, 2000);	/* the bufsize it needs */
	rc = ring_read(r, 0, rbuf, 0, 0, rchunks, NCHUNKS, &rres);
	ck_assert_int_eq(rc, -EMSGSIZE);

	/* Later chunks stop at the smaller of bufsize and max_bytes. */
	rc = ring_read(r, 1, rbuf, 250, BUFSIZE, rchunks, NCHUNKS, &rres);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rres.nchunks, 2);
	ck_assert_uint_eq(rres.nbytes, 200);
	ck_assert_int_eq(rres.more, 1);
	rc = ring_read(r, 0, rbuf, 2100, BUFSIZE, rchunks, NCHUNKS, &rres);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rres.nchunks, 2);

	/* An empty first chunk fits in an empty buffer. */
	put(r, 6, 0);
	rc = ring_read(r, 5, rbuf, 0, 0, rchunks, NCHUNKS, &rres);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	ck_assert_uint_eq(rchunks[0].len, 0);
	ring_free(r);
}
END_TEST

/*
 * A reader's buffer is its base size while the chunks fit, and grows to a
 * longer chunk's length (rounded to 4 KiB), never to the ring's capacity.
 */
START_TEST(test_reader_grows)
{
	struct ring		*r = mkring(4u << 20, 1);
	struct ring_reader	 rd = RING_READER_INIT(4096);
	uint64_t		 i;

	ck_assert_uint_eq(ring_reader_size(&rd), 0);
	for (i = 1; i <= 100; i++)
		put(r, i, 100);
	/* 100 chunks of 100 bytes, max_bytes far more: the base's worth. */
	ck_assert_int_eq(ring_reader_read(&rd, r, 0, SIZE_MAX, rchunks,
	    NCHUNKS, &rres), 0);
	ck_assert_uint_eq(ring_reader_size(&rd), 4096);
	ck_assert_uint_eq(rres.nchunks, 40);
	ck_assert_uint_eq(rres.nbytes, 4000);
	ck_assert_int_eq(rres.more, 1);
	ck_assert_uint_eq(rchunks[0].id, 1);
	pattern(rbuf, 40, 100);
	ck_assert_int_eq(memcmp(rchunks[39].data, rbuf, 100), 0);

	/* A chunk of 200,000 bytes after them: read whole, alone. */
	put(r, 101, 200000);
	put(r, 102, 100);
	ck_assert_int_eq(ring_reader_read(&rd, r, 100, 10, rchunks, NCHUNKS,
	    &rres), 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	ck_assert_uint_eq(rchunks[0].id, 101);
	ck_assert_uint_eq(rchunks[0].len, 200000);
	pattern(rbuf, 101, 200000);
	ck_assert_int_eq(memcmp(rchunks[0].data, rbuf, 200000), 0);
	ck_assert_uint_eq(ring_reader_size(&rd), 200704);

	/* A cursor after the newest chunk is ring_read()'s -ERANGE. */
	ck_assert_int_eq(ring_reader_read(&rd, r, 103, 10, rchunks, NCHUNKS,
	    &rres), -ERANGE);

	/* Freed, it starts again at its base. */
	ring_reader_free(&rd);
	ck_assert_uint_eq(ring_reader_size(&rd), 0);
	ck_assert_int_eq(ring_reader_read(&rd, r, 101, SIZE_MAX, rchunks,
	    NCHUNKS, &rres), 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	ck_assert_uint_eq(rchunks[0].id, 102);
	ck_assert_uint_eq(ring_reader_size(&rd), 4096);
	ring_reader_free(&rd);
	ring_free(r);
}
END_TEST

START_TEST(test_append_split)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;
	static uint8_t		 src[3 * CAP];
	size_t			 n;

	for (n = 0; n < sizeof src; n++)
		src[n] = (uint8_t)(n * 7 + n / 251);

	/* 10000 bytes: 4096 + 4096 + 1808; only the last one stays. */
	ck_assert_uint_eq(ring_append(r, src, 10000, RING_STREAM_STDOUT), 3);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.bytes_total, 10000);
	ck_assert_uint_eq(st.chunks_dropped, 2);
	ck_assert_uint_eq(st.bytes_dropped, 2 * CAP);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 2);
	ck_assert_uint_eq(rchunks[0].offset, 2 * CAP);
	ck_assert_uint_eq(rchunks[0].len, 10000 - 2 * CAP);
	ck_assert_uint_eq(rchunks[0].stream, RING_STREAM_STDOUT);
	ck_assert_mem_eq(rchunks[0].data, src + 2 * CAP, 10000 - 2 * CAP);

	/* Exact multiples make no empty tail chunk. */
	ck_assert_uint_eq(ring_append(r, src, 2 * CAP, RING_STREAM_STDERR), 5);
	ck_assert_int_eq(get(r, 4, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rchunks[0].len, CAP);
	ck_assert_uint_eq(rchunks[0].offset, 10000 + CAP);
	ck_assert_mem_eq(rchunks[0].data, src + CAP, CAP);

	/* Length 0 makes one empty chunk. */
	ck_assert_uint_eq(ring_append(r, src, 0, RING_STREAM_PTY), 6);
	ck_assert_uint_eq(ring_append(r, NULL, 0, RING_STREAM_PTY), 7);
	ck_assert_int_eq(get(r, 5, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 2);
	ck_assert_uint_eq(rres.nbytes, 0);
	ck_assert_uint_eq(rchunks[1].offset, 10000 + 2 * CAP);
	ring_free(r);
}
END_TEST

START_TEST(test_reserve_commit)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;
	uint8_t			*p;
	size_t			 len;

	/* No reservation: commit publishes nothing. */
	ck_assert_uint_eq(ring_commit(r, 0, RING_STREAM_PTY), 0);

	len = 100;
	p = ring_reserve(r, &len);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(len, 100);
	pattern(p, 1, 100);
	ck_assert_uint_eq(ring_commit(r, 101, RING_STREAM_PTY), 0);
	ck_assert_uint_eq(ring_newest(r), 0);
	ck_assert_uint_eq(ring_commit(r, 50, RING_STREAM_STDERR), 1);
	ck_assert_uint_eq(ring_commit(r, 0, RING_STREAM_PTY), 0);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	check_chunk(0, 1, 0, 50, RING_STREAM_STDERR);

	/* Capped to the chunk size. */
	len = SIZE_MAX;
	p = ring_reserve(r, &len);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(len, CAP);
	ring_stats(r, &st);				/* room made now */
	ck_assert_uint_eq(st.oldest, st.newest + 1);

	/* Abandoned by the next reserve; len 0 is a chunk. */
	memset(p, 0xee, CAP);
	len = 0;
	p = ring_reserve(r, &len);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(ring_commit(r, 0, RING_STREAM_PTY), 2);

	/* Abandoned by an append. */
	len = 10;
	p = ring_reserve(r, &len);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(put(r, 3, 10), 3);
	ck_assert_uint_eq(ring_commit(r, 10, RING_STREAM_PTY), 0);

	/* Reservations that meet the arena end start again at 0. */
	for (uint64_t id = 4; id < 100; id++) {
		len = 1 + (id * 53) % 1800;
		p = ring_reserve(r, &len);
		ck_assert_ptr_nonnull(p);
		pattern(p, id, len);
		ck_assert_uint_eq(ring_commit(r, len - len / 3,
		    RING_STREAM_PTY), id);
		ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
		for (size_t k = 0; k < rres.nchunks; k++) {
			if (rchunks[k].id < 4)
				continue;
			len = 1 + (rchunks[k].id * 53) % 1800;
			check_chunk(k, rchunks[k].id, rchunks[k].offset,
			    len - len / 3, RING_STREAM_PTY);
		}
	}
	ring_free(r);
}
END_TEST

START_TEST(test_stats)
{
	struct ring		*r = mkring(CAP, 1);
	struct ring_stats	 st;
	uint64_t		 i, total = 0;

	for (i = 1; i <= 50; i++) {
		put(r, i, (size_t)(i * 13));
		total += i * 13;
	}
	ring_stats(r, &st);
	ck_assert_uint_eq(st.newest, 50);
	ck_assert_uint_eq(st.bytes_total, total);
	ck_assert_uint_eq(st.chunks_dropped, st.oldest - 1);
	ck_assert_uint_eq(st.bytes_held + st.bytes_dropped, total);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nbytes, st.bytes_held);
	ck_assert_uint_eq(rres.dropped, st.chunks_dropped);
	ck_assert_uint_eq(rchunks[0].offset, st.bytes_dropped);
	ck_assert_uint_le(st.bytes_held, st.capacity);
	ring_free(r);
}
END_TEST

START_TEST(test_close_notify)
{
	struct ring	*r = mkring(CAP, 1);
	static uint8_t	 src[3 * CAP];
	size_t		 len;
	int		 calls = 0;

	put(r, 1, 10);					/* no hook yet */
	ring_set_notify(r, count_notify, &calls);
	put(r, 2, 10);
	ck_assert_int_eq(calls, 1);
	ring_append(r, src, sizeof src, RING_STREAM_PTY);	/* 3 chunks */
	ck_assert_int_eq(calls, 2);
	len = 10;
	ck_assert_ptr_nonnull(ring_reserve(r, &len));
	ck_assert_int_eq(calls, 2);
	ck_assert_uint_eq(ring_commit(r, 11, RING_STREAM_PTY), 0);
	ck_assert_int_eq(calls, 2);
	ck_assert_uint_ne(ring_commit(r, 10, RING_STREAM_PTY), 0);
	ck_assert_int_eq(calls, 3);

	ck_assert_int_eq(ring_closed(r), 0);
	ring_close(r);
	ck_assert_int_eq(ring_closed(r), 1);
	ck_assert_int_eq(calls, 4);
	ck_assert_uint_eq(put(r, 9, 10), 7);		/* still accepted */
	ck_assert_int_eq(calls, 5);

	ring_set_notify(r, NULL, NULL);
	put(r, 10, 10);
	ring_close(r);
	ck_assert_int_eq(calls, 5);
	ck_assert_int_eq(ring_closed(r), 1);
	ring_free(r);
}
END_TEST

START_TEST(test_ids_near_max)
{
	uint64_t		 first = UINT64_MAX - 100, i, id;
	struct ring		*r = mkring(CAP, first);
	struct ring_stats	 st;
	size_t			 len;

	ck_assert_uint_eq(ring_newest(r), 0);
	ring_stats(r, &st);
	ck_assert_uint_eq(st.oldest, first);
	ck_assert_int_eq(get(r, first - 1, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 0);
	ck_assert_int_eq(get(r, first, BUFSIZE, NCHUNKS), -ERANGE);

	for (i = 0; i <= 100; i++) {
		id = put(r, first + i, 5);
		ck_assert_uint_eq(id, first + i);
		ck_assert_int_eq(get(r, id - 1, BUFSIZE, NCHUNKS), 0);
		check_chunk(0, id, i * 5, 5, RING_STREAM_PTY);
	}
	ck_assert_uint_eq(ring_newest(r), UINT64_MAX);

	/* 101 chunks in 64 slots: the window straddles id % 64 == 0. */
	ck_assert_int_eq(get(r, first - 1, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, 101 - RING_SLOTS_MIN);
	ck_assert_uint_eq(rres.nchunks, RING_SLOTS_MIN);
	ck_assert_uint_eq(rchunks[RING_SLOTS_MIN - 1].id, UINT64_MAX);
	ck_assert_int_eq(rres.more, 0);
	ck_assert_int_eq(get(r, UINT64_MAX - 1, BUFSIZE, NCHUNKS), 0);
	check_chunk(0, UINT64_MAX, 500, 5, RING_STREAM_PTY);
	ck_assert_int_eq(get(r, UINT64_MAX, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 0);
	ck_assert_uint_eq(rres.newest, UINT64_MAX);

	/* The ids are used up. */
	errno = 0;
	ck_assert_uint_eq(put(r, 0, 5), 0);
	ck_assert_int_eq(errno, EOVERFLOW);
	len = 5;
	errno = 0;
	ck_assert_ptr_null(ring_reserve(r, &len));
	ck_assert_int_eq(errno, EOVERFLOW);
	ck_assert_uint_eq(ring_commit(r, 0, RING_STREAM_PTY), 0);
	ck_assert_uint_eq(ring_newest(r), UINT64_MAX);
	ring_free(r);

	/* A split that needs more ids than are left appends nothing. */
	r = mkring(CAP, UINT64_MAX - 1);
	errno = 0;
	ck_assert_uint_eq(ring_append(r, rbuf, 2 * CAP + 1, RING_STREAM_PTY),
	    0);
	ck_assert_int_eq(errno, EOVERFLOW);
	ck_assert_uint_eq(ring_newest(r), 0);
	ck_assert_uint_eq(ring_append(r, rbuf, 2 * CAP, RING_STREAM_PTY),
	    UINT64_MAX);
	ring_free(r);

	/* first_id UINT64_MAX: exactly one chunk. */
	r = mkring(CAP, UINT64_MAX);
	ck_assert_uint_eq(put(r, 1, 1), UINT64_MAX);
	ck_assert_uint_eq(put(r, 2, 1), 0);
	ck_assert_int_eq(get(r, UINT64_MAX - 1, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 1);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.dropped, UINT64_MAX - 1);	/* never existed */
	ring_free(r);
}
END_TEST

START_TEST(test_random_model)
{
	struct ring		*r = mkring(CAP + 8 * _i, 1);
	struct ring_stats	 st;
	static uint64_t		 lens[20001];
	uint64_t		 x = 0x1234567 + _i, id, total = 0, held;
	size_t			 len, k;
	uint8_t			*p;

	for (id = 1; id <= 20000; id++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		switch (x % 4) {
		case 0:
			len = x >> 40 & 15;
			break;
		case 1:
			len = x >> 40 & 255;
			break;
		default:
			len = (x >> 40) % (ring_chunk_max(r) + 1);
			break;
		}
		lens[id] = len;
		if (x & 0x10000) {
			size_t	want = len + ((x >> 20) & 63);

			p = ring_reserve(r, &want);
			CHECK(p != NULL);
			if (len > want)
				lens[id] = len = want;
			pattern(p, id, len);
			CHECK_eq(ring_commit(r, len,
			    (enum ring_stream)(id % 3)), id);
		} else {
			pattern(rbuf, id, len);
			CHECK_eq(ring_append(r, rbuf, len,
			    (enum ring_stream)(id % 3)), id);
		}
		total += len;

		/* Everything held is intact and the accounts add up. */
		CHECK_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
		ring_stats(r, &st);
		CHECK_eq(rres.dropped, st.oldest - 1);
		CHECK_eq(rchunks[rres.nchunks - 1].id, id);
		CHECK_le(rres.nchunks, ring_slots(r));
		held = 0;
		for (k = 0; k < rres.nchunks; k++) {
			uint64_t	cid = rchunks[k].id;

			if (k > 0)
				CHECK_eq(rchunks[k].offset,
				    rchunks[k - 1].offset + lens[cid - 1]);
			check_chunk(k, cid, rchunks[k].offset, lens[cid],
			    (enum ring_stream)(cid % 3));
			held += (lens[cid] + 7) & ~(uint64_t)7;
		}
		CHECK_le(held, ring_chunk_max(r));
		CHECK_eq(rchunks[rres.nchunks - 1].offset + len, total);
		CHECK_eq(st.bytes_total, total);
		CHECK_eq(st.bytes_held, rres.nbytes);
		CHECK_eq(st.bytes_dropped, total - rres.nbytes);
	}
	ring_free(r);
}
END_TEST

/* A ring handed over: a new ring resumed and fed the chunks held. */
START_TEST(test_resume)
{
	struct ring		*a, *b;
	struct ring_stats	 sa, sb;
	struct ring_chunk	 ca[NCHUNKS];
	static uint8_t		 abuf[BUFSIZE];
	struct ring_read_result	 res;
	uint64_t		 i;
	uint8_t			 data[2000];

	a = ring_create(4096, 1);
	ck_assert_ptr_nonnull(a);
	for (i = 0; i < 20; i++) {
		memset(data, (int)i, sizeof data);
		ck_assert_uint_ne(ring_append(a, data, 100 + i * 50,
		    i % 2 ? RING_STREAM_STDERR : RING_STREAM_STDOUT), 0);
	}
	ring_stats(a, &sa);
	ck_assert_uint_gt(sa.chunks_dropped, 0);
	ck_assert_int_eq(ring_read(a, sa.oldest - 1, abuf, sizeof abuf,
	    sizeof abuf, ca, NCHUNKS, &res), 0);
	ck_assert_uint_eq(res.dropped, 0);

	b = ring_create(4096, sa.oldest);
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(ring_resume(b, ca[0].offset, sa.bytes_dropped,
	    sa.chunks_dropped), 0);
	for (i = 0; i < res.nchunks; i++)
		ck_assert_uint_eq(ring_append(b, ca[i].data, ca[i].len,
		    (enum ring_stream)ca[i].stream), ca[i].id);
	ck_assert_int_eq(ring_resume(b, 0, 0, 0), -EBUSY);
	ring_stats(b, &sb);
	ck_assert_uint_eq(sb.newest, sa.newest);
	ck_assert_uint_eq(sb.oldest, sa.oldest);
	ck_assert_uint_eq(sb.bytes_held, sa.bytes_held);
	ck_assert_uint_eq(sb.bytes_total, sa.bytes_total);
	ck_assert_uint_eq(sb.bytes_dropped, sa.bytes_dropped);
	ck_assert_uint_eq(sb.chunks_dropped, sa.chunks_dropped);
	/* The same chunks at the same ids and offsets, a gap before them. */
	ck_assert_int_eq(ring_read(b, 0, rbuf, BUFSIZE, BUFSIZE, rchunks,
	    NCHUNKS, &rres), 0);
	ck_assert_uint_eq(rres.dropped, sa.oldest - 1);
	ck_assert_uint_eq(rres.nchunks, res.nchunks);
	for (i = 0; i < res.nchunks; i++) {
		ck_assert_uint_eq(rchunks[i].id, ca[i].id);
		ck_assert_uint_eq(rchunks[i].offset, ca[i].offset);
		ck_assert_uint_eq(rchunks[i].stream, ca[i].stream);
		ck_assert_uint_eq(rchunks[i].len, ca[i].len);
		ck_assert(memcmp(rchunks[i].data, ca[i].data, ca[i].len) == 0);
	}
	/* And it goes on from there. */
	ck_assert_uint_eq(ring_append(b, "x", 1, RING_STREAM_STDOUT),
	    sa.newest + 1);
	ring_free(a);
	ring_free(b);
}
END_TEST

/*
 * Each chunk keeps the time set when it was reserved or appended, through
 * evictions, wraps and a read of the slots it reuses.
 */
START_TEST(test_times)
{
	struct ring	*r = mkring(CAP, 1);
	uint8_t		*p;
	size_t		 len, i;
	uint64_t	 id;

	/* 0 until set. */
	ck_assert_uint_ne(ring_append(r, "a", 1, RING_STREAM_PTY), 0);
	/* A reservation takes the time of its reserve, not of its commit. */
	ring_set_time(r, 7);
	len = 10;
	p = ring_reserve(r, &len);
	ck_assert_ptr_nonnull(p);
	memcpy(p, "bbbbbbbbbb", 10);
	ring_set_time(r, 9);
	ck_assert_uint_eq(ring_commit(r, 10, RING_STREAM_PTY), 2);
	ck_assert_uint_eq(ring_append(r, "c", 1, RING_STREAM_PTY), 3);
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_eq(rres.nchunks, 3);
	ck_assert_uint_eq(rchunks[0].time, 0);
	ck_assert_uint_eq(rchunks[1].time, 7);
	ck_assert_uint_eq(rchunks[2].time, 9);
	/* Many more than the slots: every chunk read has its own. */
	for (i = 0; i < 5 * ring_slots(r); i++) {
		ring_set_time(r, (uint32_t)(1000 + i));
		id = ring_append(r, "xy", 2, RING_STREAM_STDOUT);
		ck_assert_uint_eq(id, 4 + i);
	}
	ck_assert_int_eq(get(r, 0, BUFSIZE, NCHUNKS), 0);
	ck_assert_uint_gt(rres.dropped, 0);
	for (i = 0; i < rres.nchunks; i++)
		CHECK_eq(rchunks[i].time, 1000 + (rchunks[i].id - 4));
	ring_free(r);
}
END_TEST

/* Build the suite. */
static Suite *
ring_suite(void)
{
	Suite	*s = suite_create("ring");
	TCase	*tc = tcase_create("unit");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_create_limits);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_cursor_range);
	tcase_add_loop_test(tc, test_sizes, 0, sizeof sizes / sizeof sizes[0]);
	tcase_add_test(tc, test_exact_fit);
	tcase_add_test(tc, test_wrap);
	tcase_add_test(tc, test_fill_ring);
	tcase_add_test(tc, test_index_full);
	tcase_add_test(tc, test_arena_full);
	tcase_add_test(tc, test_dropped);
	tcase_add_test(tc, test_limits);
	tcase_add_test(tc, test_bufsize);
	tcase_add_test(tc, test_reader_grows);
	tcase_add_test(tc, test_append_split);
	tcase_add_test(tc, test_reserve_commit);
	tcase_add_test(tc, test_stats);
	tcase_add_test(tc, test_close_notify);
	tcase_add_test(tc, test_ids_near_max);
	tcase_add_test(tc, test_resume);
	tcase_add_test(tc, test_times);
	tcase_add_loop_test(tc, test_random_model, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner	*sr = srunner_create(ring_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
