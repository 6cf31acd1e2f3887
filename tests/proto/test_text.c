/*
 * test_text.c -- Check tests of proto/text.c (encoding=text): UTF-8
 * validity, escaping, cuts on UTF-8 boundaries, cursors inside a chunk,
 * and a randomized differential: a window rendered in text and in base64
 * decodes to the same bytes, chunk for chunk (the fuzz_proto harness does
 * the same with libFuzzer's inputs, selector 'x'); the same window rendered
 * in three parts (open, chunks, close) as agentd/api/winstream.c sends a
 * big one is the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <jansson.h>

#include "proto.h"

#define EMOJI	"\xf0\x9f\x98\x80"	/* U+1F600, 4 bytes */

/* Decode a base64 string of a parsed chunk. */
static uint8_t *
b64(const char *s, size_t *len)
{
	uint8_t	*out = NULL;

	ck_assert_int_eq(proto_b64_decode(s, strlen(s), &out, len), 0);
	return (out);
}

/* Render chunks as a window in enc and check each decodes to its bytes. */
static void
check_window(const struct proto_chunk *c, size_t n, int enc, size_t *ntext)
{
	struct proto_window	 w;
	struct proto_session	 s;
	struct proto_buf	 b = { 0 }, p = { 0 };
	json_error_t		 jerr;
	json_t			*o, *out, *ch, *v;
	const char		*argv[] = { "x", NULL };
	uint8_t			*d;
	size_t			 i, k, at, len;

	memset(&w, 0, sizeof w);
	memset(&s, 0, sizeof s);
	s.id = "s";
	s.argv = (char **)(uintptr_t)argv;
	w.chunks = c;
	w.n = n;
	w.encoding = enc;
	proto_render_session(&b, &s, &w, -1);
	ck_assert(!b.oom);
	ck_assert_uint_le(b.len, proto_window_len(&w) + 4096);
	/* In three parts, as a window sent as it is rendered: the same. */
	proto_render_window_open(&p, &s, -1, 0);
	for (i = 0; i < n; i++)
		proto_render_window_chunk(&p, &c[i], enc, i == 0);
	proto_render_window_close(&p, &w);
	ck_assert(!p.oom);
	ck_assert_uint_eq(p.len, b.len);
	ck_assert(memcmp(p.data, b.data, b.len) == 0);
	proto_buf_free(&p);
	o = json_loadb(b.data, b.len, JSON_ALLOW_NUL, &jerr);
	ck_assert_msg(o != NULL, "%s", jerr.text);
	out = json_object_get(o, "output");
	/* Objects in order: each chunk whole, or its pieces (text only). */
	for (i = 0, k = 0, at = 0; k < json_array_size(out); k++) {
		ch = json_array_get(out, k);
		ck_assert_uint_lt(i, n);
		ck_assert_uint_eq(json_integer_value(json_object_get(ch, "id")),
		    c[i].id);
		ck_assert_uint_eq(json_integer_value(json_object_get(ch,
		    "offset")), c[i].offset + at);
		if ((v = json_object_get(ch, "text")) != NULL) {
			ck_assert_int_eq(enc, PROTO_ENC_TEXT);
			ck_assert_ptr_null(json_object_get(ch, "data"));
			len = json_string_length(v);
			d = malloc(len + 1);
			memcpy(d, json_string_value(v), len);
			(*ntext)++;
		} else {
			v = json_object_get(ch, "data");
			ck_assert_ptr_nonnull(v);
			d = b64(json_string_value(v), &len);
			/* In text only bytes that are not UTF-8 go as data. */
			if (enc == PROTO_ENC_TEXT)
				ck_assert(len <= 3 || proto_text_len(
				    c[i].data, c[i].len) == SIZE_MAX);
		}
		ck_assert_uint_le(at + len, c[i].len);
		ck_assert(len == 0 || memcmp(d, c[i].data + at, len) == 0);
		free(d);
		if (enc == PROTO_ENC_BASE64 || len == 0)
			ck_assert_uint_eq(len, c[i].len);
		if ((at += len) == c[i].len) {
			i++;
			at = 0;
		}
	}
	ck_assert_uint_eq(i, n);
	json_decref(o);
	proto_buf_free(&b);
}

START_TEST(utf8_validity)
{
	static const struct { const char *s; size_t len; int ok; } v[] = {
		{ "hello", 5, 1 }, { "h\xc3\xa9", 3, 1 }, { EMOJI, 4, 1 },
		{ "\xe2\x9c\x93", 3, 1 }, { "\xef\xbf\xbd", 3, 1 },
		{ "\xf4\x8f\xbf\xbf", 4, 1 }, { "\0\x01\x1b[0m", 6, 1 },
		{ "\xff", 1, 0 }, { "\xc0\xaf", 2, 0 }, { "\xe0\x80\xaf", 3, 0 },
		{ "\xed\xa0\x80", 3, 0 }, { "\xf4\x90\x80\x80", 4, 0 },
		{ "\xf0\x9f\x98", 3, 0 }, { "\x80", 1, 0 }, { "a\xc3", 2, 0 },
		{ "\xf8\x88\x80\x80\x80", 5, 0 },
	};
	size_t	i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++)
		ck_assert_msg((proto_text_len((const uint8_t *)v[i].s,
		    v[i].len) != SIZE_MAX) == v[i].ok, "vector %zu", i);
}
END_TEST

START_TEST(text_escapes)
{
	static const char	 in[] = "a\0b\x01\x1f\"\\\n\r\t\b\f\x7f/" EMOJI;
	struct proto_buf	 b = { 0 };
	size_t			 len = sizeof in - 1;

	ck_assert_int_eq(proto_text_encode(&b, (const uint8_t *)in, len), 0);
	ck_assert_uint_eq(b.len, proto_text_len((const uint8_t *)in, len));
	ck_assert(memcmp(b.data, "a\\u0000b\\u0001\\u001f\\\"\\\\\\n\\r\\t\\b"
	    "\\f\x7f/" EMOJI, b.len) == 0);
	/* A control byte takes 6: the worst case. */
	ck_assert_uint_eq(proto_text_len((const uint8_t *)"\x01\x02", 2), 12);
	b.len = 0;
	ck_assert_int_eq(proto_text_encode(&b, (const uint8_t *)"\xff", 1), -1);
	ck_assert_uint_eq(b.len, 0);
	proto_buf_free(&b);
}
END_TEST

START_TEST(utf8_cut_every_position)
{
	static const char	 s[] = "ab" EMOJI "c" EMOJI EMOJI "\xc3\xa9" "d";
	const uint8_t		*p = (const uint8_t *)s;
	size_t			 end, cut, len = sizeof s - 1;

	for (end = 0; end <= len; end++) {
		cut = proto_utf8_cut(p, end);
		ck_assert_uint_le(cut, end);
		ck_assert_uint_ge(cut + 3, end);
		/* What is kept is text, and the cut splits nothing. */
		ck_assert_uint_ne(proto_text_len(p, cut), SIZE_MAX);
		ck_assert_uint_ne(proto_text_len(p + cut, len - cut), SIZE_MAX);
	}
	/* Not UTF-8 around the cut: the cut stays. */
	ck_assert_uint_eq(proto_utf8_cut((const uint8_t *)"\x80\x80\x80\x80",
	    4), 4);
}
END_TEST

START_TEST(utf8_valid_prefix)
{
	static const struct {
		const char	*s;
		size_t		 len, valid;
	} t[] = {
		{ "", 0, 0 },
		{ "plain ascii, more than 8 bytes", 30, 30 },
		{ "caf\xc3\xa9 \xe2\x82\xac\n", 10, 10 },
		{ "h\xc3\xa9llo\xff x", 9, 6 },
		{ "\xff\xfe bad", 6, 0 },
		{ "abcdefgh\xe2\x82", 10, 8 },	/* cut short */
		{ "abcdefghij\xed\xa0\x80", 13, 10 },	/* a surrogate */
		{ "\xf0\x9f\x98\x80\xc0\xaf", 6, 4 },	/* overlong */
	};
	size_t	i;

	for (i = 0; i < sizeof t / sizeof t[0]; i++)
		ck_assert_uint_eq(proto_utf8_valid((const uint8_t *)t[i].s,
		    t[i].len), t[i].valid);
}
END_TEST

START_TEST(cursor_round_trip)
{
	uint64_t	after, c;
	size_t		skip;

	proto_cursor_split(17, 20, &after, &skip);
	ck_assert_uint_eq(after, 17);
	ck_assert_uint_eq(skip, 0);
	c = proto_cursor_make(18, 100);
	ck_assert_uint_eq(c, (100ull << 32) | 18);
	ck_assert_uint_lt(c, 1ull << 53);
	proto_cursor_split(c, 20, &after, &skip);
	ck_assert_uint_eq(after, 17);
	ck_assert_uint_eq(skip, 100);
	/* Out of range: no cursor inside the chunk. */
	ck_assert_uint_eq(proto_cursor_make(1ull << 32, 1), 0);
	ck_assert_uint_eq(proto_cursor_make(5, 1u << 21), 0);
	ck_assert_uint_eq(proto_cursor_make(5, 0), 0);
	/* Ids past 2^32: every cursor is an id. */
	proto_cursor_split(c, 1ull << 32, &after, &skip);
	ck_assert_uint_eq(after, c);
	ck_assert_uint_eq(skip, 0);
	/* Id 0 with bytes: no chunk; taken as the number it is. */
	proto_cursor_split(5ull << 32, 20, &after, &skip);
	ck_assert_uint_eq(skip, 0);
	ck_assert_int_eq(proto_encoding("text", 4), PROTO_ENC_TEXT);
	ck_assert_int_eq(proto_encoding("base64", 6), PROTO_ENC_BASE64);
	ck_assert_int_eq(proto_encoding("utf8", 4), -1);
	ck_assert_int_eq(proto_encoding("tex", 3), -1);
}
END_TEST

START_TEST(text_and_base64_same_bytes)
{
	static const char *const frag[] = {
		"a", "Line 12\n", EMOJI, "\xc3\xa9", "\xe2\x9c\x93", "\0",
		"\x1b[31m", "\"", "\\", "\x7f", "\xff", "\xf0\x9f", "\x98\x80",
		"\r\n", "\xed\xa0\x80", "\t",
	};
	struct proto_chunk	 c[16];
	uint8_t			 buf[4096];
	size_t			 len, n, i, at, k, ntext = 0, nb64 = 0, f;
	unsigned		 seed = 33;
	int			 iter;

	for (iter = 0; iter < 20000; iter++) {
		len = 0;
		k = (size_t)rand_r(&seed) % 60;
		for (i = 0; i < k; i++) {
			f = (size_t)rand_r(&seed) % (sizeof frag / sizeof frag[0]);
			n = f == 5 ? 1 : strlen(frag[f]);
			if (rand_r(&seed) % 8 == 0) {	/* a random byte */
				buf[len++] = (uint8_t)rand_r(&seed);
				continue;
			}
			memcpy(buf + len, frag[f], n);
			len += n;
		}
		/* Random cuts into chunks, some on UTF-8 boundaries. */
		n = 0;
		at = 0;
		while (at < len && n < 15) {
			k = 1 + (size_t)rand_r(&seed) % (len - at);
			if (rand_r(&seed) % 2)
				k = proto_utf8_cut(buf + at, k) > 0 ?
				    proto_utf8_cut(buf + at, k) : k;
			c[n].id = n + 1;
			c[n].offset = at;
			c[n].data = buf + at;
			c[n].len = (uint32_t)k;
			c[n].stream = PROTO_STREAM_STDOUT;
			n++;
			at += k;
		}
		if (at < len) {
			c[n].id = n + 1;
			c[n].offset = at;
			c[n].data = buf + at;
			c[n].len = (uint32_t)(len - at);
			c[n].stream = PROTO_STREAM_STDERR;
			n++;
		}
		check_window(c, n, PROTO_ENC_BASE64, &nb64);
		ck_assert_uint_eq(nb64, 0);
		check_window(c, n, PROTO_ENC_TEXT, &ntext);
	}
	ck_assert_uint_gt(ntext, 1000);	/* text was exercised */
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("text");
	TCase	*t = tcase_create("text");
	SRunner	*sr;
	int	 failed;

	tcase_set_timeout(t, 60);
	tcase_add_test(t, utf8_validity);
	tcase_add_test(t, text_escapes);
	tcase_add_test(t, utf8_cut_every_position);
	tcase_add_test(t, utf8_valid_prefix);
	tcase_add_test(t, cursor_round_trip);
	tcase_add_test(t, text_and_base64_same_bytes);
	suite_add_tcase(s, t);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
