/*
 * test_output.c -- Check unit tests of proto's output windows: the escape
 * stripper (ansi.c) and the per-stream head and tail (headtail.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "../checkmain.h"

#include "ansi.h"
#include "headtail.h"
#include "proto.h"

#define MAXPIECES	4096

static size_t	strip_all(const char *, size_t, char *);
static size_t	strip_split(const char *, size_t, size_t, char *);

/* Strip s in one call; the result NUL-terminated in out. */
static size_t
strip_all(const char *s, size_t len, char *out)
{
	struct proto_ansi	a;
	size_t			n;

	proto_ansi_init(&a);
	n = proto_ansi_strip(&a, (const uint8_t *)s, len, (uint8_t *)out);
	out[n] = '\0';
	return (n);
}

/* Strip s fed in two parts, cut at at. */
static size_t
strip_split(const char *s, size_t len, size_t at, char *out)
{
	struct proto_ansi	a;
	size_t			n;

	proto_ansi_init(&a);
	n = proto_ansi_strip(&a, (const uint8_t *)s, at, (uint8_t *)out);
	n += proto_ansi_strip(&a, (const uint8_t *)s + at, len - at,
	    (uint8_t *)out + n);
	out[n] = '\0';
	return (n);
}

START_TEST(ansi_sequences)
{
	static const struct {
		const char	*in, *out;
	} cases[] = {
		{ "plain text\n", "plain text\n" },
		{ "\033[1;31merror\033[0m: x\n", "error: x\n" },
		{ "\033[?25l\033[2J\033[Hok", "ok" },
		{ "a\033]0;title\007b", "ab" },			/* OSC, BEL */
		{ "a\033]8;;http://x/\033\\link\033]8;;\033\\b", "alinkb" },
		{ "a\033Pq#0;2;0;0;0\033\\b", "ab" },		/* DCS */
		{ "a\033Xsos\033\\b\033^pm\033\\c\033_apc\033\\d", "abcd" },
		{ "a\0337b\0338c\033=d\033Me", "abcde" },	/* two bytes */
		{ "a\033(Bb\033#8c", "abc" },			/* intermediates */
		{ "a\033[31\030b", "ab" },			/* CAN aborts */
		{ "a\033[1\nm b", "a\n b" },			/* C0 inside CSI */
		{ "a\033]0;t\033[32mb", "ab" },		/* ESC aborts OSC */
		{ "caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93" },
		{ "\xc2\x9b" "31m", "\xc2\x9b" "31m" },	/* no 8-bit CSI */
		{ "a\033\033[0mb", "ab" },
	};
	char	out[256];
	size_t	i, at, len, want;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		len = strlen(cases[i].in);
		want = strlen(cases[i].out);
		ck_assert_uint_eq(strip_all(cases[i].in, len, out), want);
		ck_assert_str_eq(out, cases[i].out);
		/* Split anywhere, across two reads: the same. */
		for (at = 0; at <= len; at++) {
			ck_assert_uint_eq(strip_split(cases[i].in, len, at,
			    out), want);
			ck_assert_msg(strcmp(out, cases[i].out) == 0,
			    "case %zu split at %zu: '%s'", i, at, out);
		}
	}
}
END_TEST

START_TEST(ansi_in_place_and_state)
{
	struct proto_ansi	a;
	char			buf[] = "x\033[1mbold\033[0m\033]0;t";
	size_t			n;

	proto_ansi_init(&a);
	n = proto_ansi_strip(&a, (uint8_t *)buf, strlen(buf), (uint8_t *)buf);
	ck_assert_uint_eq(n, 5);
	ck_assert_int_eq(memcmp(buf, "xbold", 5), 0);
	ck_assert_int_eq(proto_ansi_inside(&a), 1);	/* the OSC is open */
	n = proto_ansi_strip(&a, (const uint8_t *)"itle\007y", 6,
	    (uint8_t *)buf);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(buf[0], 'y');
	ck_assert_int_eq(proto_ansi_inside(&a), 0);
}
END_TEST

/* A made-up session output: chunks of streams, all bytes by offset. */
struct feed {
	uint8_t		 bytes[1 << 16];
	size_t		 len;
	struct proto_chunk c[2048];
	size_t		 n;
};

/* Append a chunk of stream s holding data. */
static void
feed_add(struct feed *f, int s, const void *data, size_t len)
{
	struct proto_chunk	*c = &f->c[f->n];

	ck_assert_uint_lt(f->n, 2048);
	ck_assert_uint_le(f->len + len, sizeof f->bytes);
	memcpy(f->bytes + f->len, data, len);
	c->id = f->n + 1;
	c->offset = f->len;
	c->data = f->bytes + f->len;
	c->len = (uint32_t)len;
	c->stream = s;
	f->len += len;
	f->n++;
}

/* Run a head/tail over f with these budgets. */
static void
feed_run(struct proto_headtail *ht, const struct feed *f,
    const size_t budget[3], struct proto_chunk *out,
    struct proto_headtail_result *res)
{
	static uint8_t		scratch[1 << 16];
	struct proto_chunk	c;
	size_t			i;

	proto_headtail_start(ht, budget, MAXPIECES);
	for (i = 0; i < f->n; i++) {
		/* The caller's buffer is reused: the object must copy. */
		c = f->c[i];
		memcpy(scratch, c.data, c.len);
		c.data = scratch;
		ck_assert_int_eq(proto_headtail_feed(ht, &c), 0);
		memset(scratch, 0xee, c.len);
	}
	proto_headtail_finish(ht, out, res);
}

START_TEST(headtail_per_stream)
{
	static struct feed	 f;
	static struct proto_chunk out[MAXPIECES];
	struct proto_headtail	*ht = proto_headtail_new();
	struct proto_headtail_result res;
	size_t			 budget[3] = { 0, 100, 100 };
	char			 line[64];
	size_t			 i, err_bytes = 0;

	/* A chatty stdout, and stderr's last lines in between. */
	f.len = f.n = 0;
	for (i = 0; i < 200; i++) {
		snprintf(line, sizeof line, "compiling unit %03zu\n", i);
		feed_add(&f, PROTO_STREAM_STDOUT, line, strlen(line));
		if (i == 150) {
			feed_add(&f, PROTO_STREAM_STDERR, "error: x.c:1\n", 13);
			err_bytes += 13;
		}
	}
	feed_add(&f, PROTO_STREAM_STDERR, "FAILED\n", 7);
	feed_run(ht, &f, budget, out, &res);

	/* stderr fits: both its chunks whole. */
	ck_assert_uint_eq(res.truncated[PROTO_STREAM_STDERR], 0);
	ck_assert_uint_eq(res.gap_at[PROTO_STREAM_STDERR], SIZE_MAX);
	ck_assert_uint_eq(res.truncated[PROTO_STREAM_STDOUT], 200 * 19 - 100);
	ck_assert_uint_eq(res.truncated_total, 200 * 19 - 100);
	ck_assert_uint_eq(res.last_id, f.n);
	for (i = 0, err_bytes = 0; i < res.n; i++) {
		if (out[i].stream == PROTO_STREAM_STDERR) {
			ck_assert_uint_eq(out[i].len, f.c[out[i].id - 1].len);
			err_bytes += out[i].len;
		}
		if (i > 0)
			ck_assert(out[i].id > out[i - 1].id ||
			    (out[i].id == out[i - 1].id &&
			    out[i].offset > out[i - 1].offset));
		ck_assert_int_eq(memcmp(out[i].data, f.bytes + out[i].offset,
		    out[i].len), 0);
	}
	ck_assert_uint_eq(err_bytes, 20);
	/* stdout: the head is unit 000..002 (50 bytes), the cut in unit 002. */
	ck_assert_uint_eq(out[0].id, 1);
	ck_assert_uint_eq(res.cut_id, 3);
	/* its tail: the last 12 bytes of unit 197 (id 199), 198 and 199. */
	i = res.gap_at[PROTO_STREAM_STDOUT];
	ck_assert_uint_eq(i, 3);	/* after the head's 3 pieces */
	ck_assert_uint_eq(out[i - 1].len, 12);
	ck_assert_uint_eq(out[i].id, 152);	/* stderr's first line */
	ck_assert_int_eq(out[++i].stream, PROTO_STREAM_STDOUT);
	ck_assert_uint_eq(out[i].id, 199);
	ck_assert_uint_eq(out[i].len, 12);
	proto_headtail_free(ht);
}
END_TEST

START_TEST(headtail_fits_whole)
{
	static struct feed	 f;
	static struct proto_chunk out[MAXPIECES];
	struct proto_headtail	*ht = proto_headtail_new();
	struct proto_headtail_result res;
	size_t			 budget[3] = { 0, 40, 40 };
	size_t			 i;

	/* 40 bytes exactly, the head's last chunk crossing its half. */
	f.len = f.n = 0;
	feed_add(&f, PROTO_STREAM_STDOUT, "0123456789abcdefghijklmnopqrstu", 31);
	feed_add(&f, PROTO_STREAM_STDERR, "e", 1);
	feed_add(&f, PROTO_STREAM_STDOUT, "vwxyz1234", 9);
	feed_run(ht, &f, budget, out, &res);
	ck_assert_uint_eq(res.n, 3);
	ck_assert_uint_eq(res.truncated_total, 0);
	ck_assert_uint_eq(res.cut_id, 0);
	for (i = 0; i < 3; i++) {
		ck_assert_uint_eq(out[i].id, i + 1);
		ck_assert_uint_eq(out[i].len, f.c[i].len);
		ck_assert_int_eq(memcmp(out[i].data, f.c[i].data,
		    f.c[i].len), 0);
	}
	/* One byte more: cut, 20 + 20 kept. */
	feed_add(&f, PROTO_STREAM_STDOUT, "!", 1);
	feed_run(ht, &f, budget, out, &res);
	ck_assert_uint_eq(res.truncated[PROTO_STREAM_STDOUT], 1);
	ck_assert_uint_eq(res.cut_id, 1);
	ck_assert_uint_eq(out[0].len, 20);
	ck_assert_uint_eq(out[1].id, 1);
	ck_assert_uint_eq(out[1].offset, 21);
	ck_assert_uint_eq(res.gap_at[PROTO_STREAM_STDOUT], 1);
	proto_headtail_free(ht);
}
END_TEST

START_TEST(headtail_utf8_cuts)
{
	static struct feed	 f;
	static struct proto_chunk out[MAXPIECES];
	struct proto_headtail	*ht = proto_headtail_new();
	struct proto_headtail_result res;
	size_t			 budget[3] = { 11, 0, 0 };
	size_t			 i, kept = 0;

	/* "é" is 2 bytes, "✓" 3: any cut at 5 or 6 bytes splits one. */
	f.len = f.n = 0;
	for (i = 0; i < 10; i++)
		feed_add(&f, PROTO_STREAM_PTY, "\xc3\xa9\xe2\x9c\x93", 5);
	feed_run(ht, &f, budget, out, &res);
	/* The head (5 bytes) is whole characters; the tail (6) too. */
	for (i = 0; i < res.n; i++) {
		kept += out[i].len;
		ck_assert((out[i].data[0] & 0xc0) != 0x80);
	}
	ck_assert_uint_eq(kept + res.truncated[PROTO_STREAM_PTY], 50);
	ck_assert_uint_eq(res.truncated_total, res.truncated[PROTO_STREAM_PTY]);
	/* head "é✓"; the tail's 6 bytes start with the end of a "✓":
	   skipped, "é✓" stays. */
	ck_assert_uint_eq(out[0].len, 5);
	ck_assert_uint_eq(kept, 5 + 5);
	ck_assert_uint_eq(res.truncated[PROTO_STREAM_PTY], 40);
	proto_headtail_free(ht);
}
END_TEST

/* A random stream of valid UTF-8 into two streams, checked against a model. */
START_TEST(headtail_random)
{
	static struct feed	 f;
	static struct proto_chunk out[MAXPIECES];
	static const char *const chars[] = { "a", "\n", "\xc3\xa9",
	    "\xe2\x9c\x93", "\xf0\x9f\x98\x80" };
	struct proto_headtail	*ht = proto_headtail_new();
	struct proto_headtail_result res;
	uint8_t			 sbytes[3][1 << 16], got[1 << 16];
	size_t			 slen[3], budget[3], i, j, len, round, s;
	size_t			 nh, nt, k;
	char			 buf[600];
	const char		*ch;

	srandom(7);
	for (round = 0; round < 300; round++) {
		f.len = f.n = 0;
		memset(slen, 0, sizeof slen);
		for (i = 0; i < 1 + (size_t)random() % 120; i++) {
			s = 1 + (size_t)random() % 2;
			len = 0;
			for (j = (size_t)random() % 60; j > 0; j--) {
				ch = chars[random() % 5];
				memcpy(buf + len, ch, strlen(ch));
				len += strlen(ch);
			}
			/* Reads do not keep characters whole either. */
			if (len > 2 && random() % 4 == 0)
				len -= 1 + (size_t)random() % 2;
			if (len == 0)
				continue;
			feed_add(&f, (int)s, buf, len);
			memcpy(sbytes[s] + slen[s], buf, len);
			slen[s] += len;
		}
		budget[0] = 0;
		budget[1] = (size_t)random() % 700;
		budget[2] = (size_t)random() % 700;
		feed_run(ht, &f, budget, out, &res);
		ck_assert_uint_le(res.n, MAXPIECES);
		for (s = 1; s <= 2; s++) {
			/* The stream's pieces in order, and their bytes. */
			len = 0;
			for (i = 0; i < res.n; i++) {
				if (out[i].stream != (int)s)
					continue;
				ck_assert_int_eq(memcmp(out[i].data,
				    f.bytes + out[i].offset, out[i].len), 0);
				memcpy(got + len, out[i].data, out[i].len);
				len += out[i].len;
			}
			ck_assert_uint_eq(len + res.truncated[s], slen[s]);
			if (slen[s] <= budget[s]) {
				ck_assert_uint_eq(res.truncated[s], 0);
				ck_assert_int_eq(memcmp(got, sbytes[s], len), 0);
				continue;
			}
			/* head: a prefix of at most budget/2, at least that - 3. */
			ck_assert_uint_ne(res.gap_at[s], SIZE_MAX);
			for (i = 0, nh = 0; i < res.gap_at[s]; i++)
				if (out[i].stream == (int)s)
					nh += out[i].len;
			nt = len - nh;
			ck_assert_uint_le(nh, budget[s] / 2);
			ck_assert_uint_ge(nh + 3, budget[s] / 2);
			ck_assert_uint_le(nt, budget[s] - budget[s] / 2);
			ck_assert_uint_ge(nt + 3, budget[s] - budget[s] / 2);
			ck_assert_int_eq(memcmp(got, sbytes[s], nh), 0);
			ck_assert_int_eq(memcmp(got + nh, sbytes[s] + slen[s] -
			    nt, nt), 0);
			/* No cut inside a character the stream had whole. */
			k = nh;
			if (k > 0 && k < slen[s] && (sbytes[s][k] & 0xc0) == 0x80)
				ck_assert_msg((sbytes[s][k - 1] & 0x80) == 0 ||
				    0, "head cut inside a sequence");
			k = slen[s] - nt;
			if (nt > 0)
				ck_assert((sbytes[s][k] & 0xc0) != 0x80 ||
				    nt + 3 <= budget[s] - budget[s] / 2);
		}
		if (round % 50 == 0)
			proto_headtail_trim(ht, 0);
	}
	proto_headtail_free(ht);
}
END_TEST

START_TEST(headtail_piece_cap)
{
	static struct feed	 f;
	static struct proto_chunk out[MAXPIECES];
	struct proto_headtail	*ht = proto_headtail_new();
	struct proto_headtail_result res;
	size_t			 budget[3] = { 1 << 20, 0, 0 };
	size_t			 i, kept = 0;

	/* 2000 one-byte chunks over a cap of 12 pieces: 2 + 2 kept. */
	f.len = f.n = 0;
	for (i = 0; i < 2000; i++)
		feed_add(&f, PROTO_STREAM_PTY, "x", 1);
	proto_headtail_start(ht, budget, 12);
	for (i = 0; i < f.n; i++)
		ck_assert_int_eq(proto_headtail_feed(ht, &f.c[i]), 0);
	proto_headtail_finish(ht, out, &res);
	ck_assert_uint_eq(res.n, 4);
	for (i = 0; i < res.n; i++)
		kept += out[i].len;
	ck_assert_uint_eq(kept + res.truncated_total, 2000);
	ck_assert_uint_eq(out[0].id, 1);
	ck_assert_uint_eq(out[3].id, 2000);
	ck_assert_uint_eq(res.cut_id, 3);
	proto_headtail_free(ht);
}
END_TEST

static Suite *
output_suite(void)
{
	Suite	*s = suite_create("output");
	TCase	*t;

	t = tcase_create("ansi");
	tcase_add_test(t, ansi_sequences);
	tcase_add_test(t, ansi_in_place_and_state);
	suite_add_tcase(s, t);
	t = tcase_create("headtail");
	tcase_add_test(t, headtail_per_stream);
	tcase_add_test(t, headtail_fits_whole);
	tcase_add_test(t, headtail_utf8_cuts);
	tcase_add_test(t, headtail_random);
	tcase_add_test(t, headtail_piece_cap);
	suite_add_tcase(s, t);
	return (s);
}

int
main(void)
{
	return (check_main(output_suite()));
}
