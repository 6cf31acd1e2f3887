/*
 * test_serve.c -- Check unit tests of serve.c, the decisions of Go's
 * http.ServeContent and envd's Accept-Encoding rules for GET /files:
 * encodings and q-values, byte ranges, preconditions.
 */
#include <sys/queue.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "../checkmain.h"

#include "serve.h"

#define MTIME	1700000000	/* Tue, 14 Nov 2023 22:13:20 GMT */

static void	 req(struct serve_req *, int, ...);
static Suite	*serve_suite(void);

/* A serve_req from name, value pairs (NULL-terminated). */
static void
req(struct serve_req *r, int gzip_ok, ...)
{
	struct evkeyvalq	 h;
	const char		*k, *v;
	va_list			 ap;

	TAILQ_INIT(&h);
	va_start(ap, gzip_ok);
	while ((k = va_arg(ap, const char *)) != NULL) {
		v = va_arg(ap, const char *);
		evhttp_add_header(&h, k, v);
	}
	va_end(ap);
	serve_read(r, &h, gzip_ok);
	evhttp_clear_headers(&h);
}

/* Accept-Encoding ae gives enc (without a Range). */
static void
enc_is(const char *ae, int want)
{
	struct serve_req	r;

	req(&r, 1, "Accept-Encoding", ae, NULL);
	ck_assert_msg(r.enc == want, "%s: %d, not %d", ae, r.enc, want);
	serve_free(&r);
}

START_TEST(test_encoding)
{
	struct serve_req	r;

	enc_is("", SERVE_IDENTITY);
	enc_is("gzip", SERVE_GZIP);
	enc_is("x-gzip, GZip;Q=0.9", SERVE_GZIP);
	enc_is("br;q=1, gzip;q=0.5", SERVE_GZIP);
	enc_is("gzip;q=0.5, identity", SERVE_IDENTITY);
	enc_is("identity;q=0.5, gzip", SERVE_GZIP);
	enc_is("gzip;q=0", SERVE_IDENTITY);
	enc_is("gzip;q=abc", SERVE_GZIP);	/* Go keeps q at 1 */
	enc_is("gzip ; q=0.001", SERVE_GZIP);
	enc_is("*", SERVE_IDENTITY);
	enc_is("*;q=0", SERVE_REFUSE);
	enc_is("*;q=0, identity;q=0.1", SERVE_IDENTITY);
	enc_is("identity;q=0", SERVE_REFUSE);
	enc_is("identity;q=0, *", SERVE_GZIP);
	enc_is("br, identity;q=0", SERVE_REFUSE);
	enc_is(",,;;q=,", SERVE_IDENTITY);
	/* Without zlib gzip is not offered. */
	req(&r, 0, "Accept-Encoding", "gzip", NULL);
	ck_assert_int_eq(r.enc, SERVE_IDENTITY);
	serve_free(&r);
	req(&r, 0, "Accept-Encoding", "gzip, identity;q=0", NULL);
	ck_assert_int_eq(r.enc, SERVE_REFUSE);
	serve_free(&r);
	/* A Range or conditional request: identity, or refused. */
	req(&r, 1, "Accept-Encoding", "gzip", "Range", "bytes=0-1", NULL);
	ck_assert_int_eq(r.enc, SERVE_IDENTITY);
	serve_free(&r);
	req(&r, 1, "Accept-Encoding", "gzip, *;q=0", "If-None-Match", "*",
	    NULL);
	ck_assert_int_eq(r.enc, SERVE_REFUSE);
	serve_free(&r);
}
END_TEST

/* Range rng on a file of size bytes: status, and the ranges "a-b,..". */
static void
range_is(const char *rng, uint64_t size, int status, const char *want)
{
	struct serve_req	r;
	struct serve_ans	a;
	char			got[256] = "";
	size_t			i;

	req(&r, 1, "Range", rng, NULL);
	ck_assert_int_eq(serve_eval(&r, size, MTIME, &a), 0);
	ck_assert_msg(a.status == status, "%s: %d", rng, a.status);
	for (i = 0; i < a.nranges; i++)
		snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu-"
		    "%llu", i > 0 ? "," : "", (unsigned long long)a.ranges[i].off,
		    (unsigned long long)(a.ranges[i].off + a.ranges[i].len - 1));
	ck_assert_msg(strcmp(got, want) == 0, "%s: %s", rng, got);
	serve_ans_free(&a);
	serve_free(&r);
}

START_TEST(test_ranges)
{
	range_is("bytes=0-9", 100, 206, "0-9");
	range_is("bytes=90-", 100, 206, "90-99");
	range_is("bytes=-10", 100, 206, "90-99");
	range_is("bytes=-1000", 100, 206, "0-99");
	range_is("bytes=+5-6", 100, 206, "5-6");
	range_is("bytes= 1 - 2 ,, 4-4", 100, 206, "1-2,4-4");
	range_is("bytes=0-,0-", 100, 200, "");		/* more than the file */
	range_is("bytes=100-", 100, 416, "");
	range_is("bytes=0-0,100-", 100, 206, "0-0");
	range_is("bytes=5-1", 100, 416, "");
	range_is("bytes=--1", 100, 416, "");
	range_is("bytes=-", 100, 416, "");
	range_is("bytes=1", 100, 416, "");
	range_is("bytes=99999999999999999999-", 100, 416, "");
	range_is("items=0-1", 100, 416, "");
	range_is("bytes=", 100, 200, "");
	range_is("bytes=0-", 0, 416, "");
}
END_TEST

/* The status of a request with headers (pairs, NULL-terminated). */
static int
status_of(const char *k1, const char *v1, const char *k2, const char *v2)
{
	struct serve_req	r;
	struct serve_ans	a;
	int			s;

	req(&r, 1, k1, v1, k2, v2, NULL);
	ck_assert_int_eq(serve_eval(&r, 100, MTIME, &a), 0);
	s = a.status;
	serve_ans_free(&a);
	serve_free(&r);
	return (s);
}

START_TEST(test_preconditions)
{
	const char	*at = "Tue, 14 Nov 2023 22:13:20 GMT";
	const char	*before = "Tue, 14 Nov 2023 22:13:19 GMT";

	ck_assert_int_eq(status_of("If-Modified-Since", at, NULL, NULL), 304);
	ck_assert_int_eq(status_of("If-Modified-Since", before, NULL, NULL),
	    200);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Tuesday, 14-Nov-23 22:13:20 GMT", NULL, NULL), 304);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Tue Nov 14 22:13:20 2023", NULL, NULL), 304);
	ck_assert_int_eq(status_of("If-Modified-Since", "yesterday", NULL,
	    NULL), 200);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Wednesday, 15-Nov-23 00:00:00 GMT", NULL, NULL), 304);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Tue, 14 Nov 2023 22:13:20 UTC", NULL, NULL), 200);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Tue, 14 Nov 2023 22:13:20 GMTx", NULL, NULL), 200);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Tue, 14 Foo 2023 22:13:20 GMT", NULL, NULL), 200);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Thu, 29 Feb 2024 00:00:00 GMT", NULL, NULL), 304);
	ck_assert_int_eq(status_of("If-Modified-Since",
	    "Sat, 01 Jan 2000 00:00:00 GMT", NULL, NULL), 200);
	ck_assert_int_eq(status_of("If-None-Match", "\"a\", *", NULL, NULL),
	    304);
	ck_assert_int_eq(status_of("If-None-Match", "\"a\"",
	    "If-Modified-Since", at), 200);
	ck_assert_int_eq(status_of("If-Unmodified-Since", before, NULL, NULL),
	    412);
	ck_assert_int_eq(status_of("If-Unmodified-Since", at, NULL, NULL), 200);
	ck_assert_int_eq(status_of("If-Match", "W/\"a\"", NULL, NULL), 412);
	ck_assert_int_eq(status_of("If-Match", "*", "If-Unmodified-Since",
	    before), 200);
	ck_assert_int_eq(status_of("Range", "bytes=0-1", "If-Range", at), 206);
	ck_assert_int_eq(status_of("Range", "bytes=0-1", "If-Range", before),
	    200);
	ck_assert_int_eq(status_of("Range", "bytes=0-1", "If-Range", "\"e\""),
	    200);
}
END_TEST

START_TEST(test_multipart)
{
	struct serve_req	r;
	struct serve_ans	a;
	char			buf[SERVE_PART_HEAD_MAX], type[SERVE_TYPE_MAX];
	uint64_t		total = 0;
	size_t			i;

	req(&r, 1, "Range", "bytes=0-1,-2", NULL);
	ck_assert_int_eq(serve_eval(&r, 10, MTIME, &a), 0);
	ck_assert_int_eq(a.status, 206);
	for (i = 0; i <= a.nranges; i++)
		total += serve_part(&r, &a, i, buf) +
		    (i < a.nranges ? a.ranges[i].len : 0);
	ck_assert_uint_eq(a.body, total);
	serve_part(&r, &a, 1, buf);
	ck_assert_ptr_nonnull(strstr(buf, "\r\n--"));
	ck_assert_ptr_nonnull(strstr(buf, "Content-Range: bytes 8-9/10\r\n"));
	ck_assert_ptr_nonnull(strstr(serve_type(&r, &a, type), r.boundary));
	ck_assert_uint_eq(strlen(r.boundary), SERVE_BOUNDARY_LEN);
	serve_ans_free(&a);
	serve_free(&r);
}
END_TEST

static Suite *
serve_suite(void)
{
	Suite	*s = suite_create("serve");
	TCase	*tc = tcase_create("decisions");

	tcase_add_test(tc, test_encoding);
	tcase_add_test(tc, test_ranges);
	tcase_add_test(tc, test_preconditions);
	tcase_add_test(tc, test_multipart);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(serve_suite()));
}
