/*
 * test_gzenc.c -- Check unit tests of gzenc.c, the small gzip encoder:
 * what it writes, in one call or many, inflates back with zlib to the
 * input (random bytes, runs, text, every length near a match's limits),
 * and compresses what repeats.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <zlib.h>

#include "../checkmain.h"

#include "gzenc.h"

static size_t	 encode(const uint8_t *, size_t, size_t, uint8_t **);
static void	 roundtrip(const uint8_t *, size_t, size_t);
static Suite	*gzenc_suite(void);

/* Encode n bytes, step at a time; the gzip stream in *out, its length. */
static size_t
encode(const uint8_t *in, size_t n, size_t step, uint8_t **out)
{
	struct gzenc	*z = gzenc_new();
	size_t		 off = 0, len = 0, k;

	ck_assert_ptr_nonnull(z);
	*out = malloc(GZENC_BOUND(n) + 64 * (n / step + 2));
	do {
		k = n - off < step ? n - off : step;
		len += gzenc_write(z, in + off, k, 0, *out + len);
		off += k;
	} while (off < n);
	len += gzenc_write(z, NULL, 0, 1, *out + len);
	gzenc_free(z);
	return (len);
}

/* n bytes, written step at a time, inflate back to themselves. */
static void
roundtrip(const uint8_t *in, size_t n, size_t step)
{
	z_stream	 s;
	uint8_t		*gz, *back = malloc(n + 1);
	size_t		 len = encode(in, n, step, &gz);

	memset(&s, 0, sizeof s);
	ck_assert_int_eq(inflateInit2(&s, 16 + MAX_WBITS), Z_OK);
	s.next_in = gz;
	s.avail_in = (uInt)len;
	s.next_out = back;
	s.avail_out = (uInt)n + 1;
	ck_assert_int_eq(inflate(&s, Z_FINISH), Z_STREAM_END);
	ck_assert_uint_eq(s.total_out, n);
	ck_assert_uint_eq(s.avail_in, 0);
	ck_assert(memcmp(in, back, n) == 0);
	inflateEnd(&s);
	free(gz);
	free(back);
}

START_TEST(test_roundtrip)
{
	uint8_t	*b = malloc(1 << 20);
	size_t	 i, n;

	roundtrip((const uint8_t *)"", 0, 1);
	roundtrip((const uint8_t *)"a", 1, 1);
	roundtrip((const uint8_t *)"abcabcabcabc", 12, 5);
	srandom(7);
	for (i = 0; i < (1 << 20); i++)
		b[i] = (uint8_t)random();
	roundtrip(b, 1 << 20, 1 << 18);
	memset(b, 'z', 1 << 20);
	roundtrip(b, 1 << 20, 1 << 18);
	/* Runs of every length near 3 and 258, and far matches. */
	for (n = 0, i = 0; n + 600 < (1 << 20); i++) {
		memset(b + n, (int)(i & 0xff), i % 300);
		n += i % 300;
		b[n++] = (uint8_t)random();
	}
	roundtrip(b, n, 1 << 18);
	roundtrip(b, n, 1000);
	free(b);
}
END_TEST

START_TEST(test_compresses)
{
	uint8_t	*b = malloc(256 << 10), *gz;
	size_t	 n = 0, len;
	int	 i = 0;

	while (n + 64 < (256 << 10))
		n += (size_t)snprintf((char *)b + n, 64, "line %d of a log "
		    "file, level=info\n", i++ % 1000);
	len = encode(b, n, n, &gz);
	ck_assert_msg(len < n / 3, "%zu of %zu", len, n);
	free(gz);
	free(b);
}
END_TEST

static Suite *
gzenc_suite(void)
{
	Suite	*s = suite_create("gzenc");
	TCase	*tc = tcase_create("encoder");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_compresses);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(gzenc_suite()));
}
