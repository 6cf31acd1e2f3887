/*
 * test_fetchparse.c -- Check unit tests of fetchparse.c, the pure parsers
 * of fetch.c's HTTP client: URLs, Location resolution, status lines,
 * header lines, chunk sizes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "../checkmain.h"

#include "fetchparse.h"

static void	 url_ok(const char *, int, const char *, const char *,
		    const char *, const char *);
static void	 url_bad(const char *, const char *);
static void	 resolve_is(const char *, const char *, const char *);
static Suite	*fetchparse_suite(void);

/* url parses to this host, port, Host: and target. */
static void
url_ok(const char *url, int tls, const char *host, const char *port,
    const char *hostport, const char *target)
{
	struct fetch_url	u;
	char			cause[256] = "";

	ck_assert_msg(fetchparse_url(url, &u, cause, sizeof cause) == 0,
	    "%s: %s", url, cause);
	ck_assert_int_eq(u.tls, tls);
	ck_assert_str_eq(u.host, host);
	ck_assert_str_eq(u.port, port);
	ck_assert_str_eq(u.hostport, hostport);
	ck_assert_str_eq(u.target, target);
	free(u.target);
}

/* url is refused with errno EINVAL and a cause holding needle. */
static void
url_bad(const char *url, const char *needle)
{
	struct fetch_url	u;
	char			cause[256] = "";

	errno = 0;
	ck_assert_msg(fetchparse_url(url, &u, cause, sizeof cause) == -1,
	    "%s parsed", url);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(u.target);
	ck_assert_msg(strstr(cause, needle) != NULL, "%s: %s", url, cause);
}

/* loc, relative to base, is want. */
static void
resolve_is(const char *base, const char *loc, const char *want)
{
	struct fetch_url	 u;
	char			 cause[256] = "", *out;

	ck_assert_int_eq(fetchparse_url(base, &u, cause, sizeof cause), 0);
	out = fetchparse_resolve(base, &u, loc, cause, sizeof cause);
	ck_assert_msg(out != NULL, "%s + %s: %s", base, loc, cause);
	ck_assert_str_eq(out, want);
	free(out);
	free(u.target);
}

START_TEST(test_url)
{
	url_ok("http://example.com", 0, "example.com", "80", "example.com",
	    "/");
	url_ok("HTTPS://Example.com/a/b?c=d#frag", 1, "Example.com", "443",
	    "Example.com", "/a/b?c=d");
	url_ok("http://h:8080/x", 0, "h", "8080", "h:8080", "/x");
	url_ok("https://h:443/", 1, "h", "443", "h", "/");
	url_ok("http://h?q=1", 0, "h", "80", "h", "/?q=1");
	url_ok("http://h#f", 0, "h", "80", "h", "/");
	url_ok("http://h:/p", 0, "h", "80", "h", "/p");
	url_ok("http://[::1]:9/p", 0, "::1", "9", "[::1]:9", "/p");
	url_ok("https://[2001:db8::1]/", 1, "2001:db8::1", "443",
	    "[2001:db8::1]", "/");
	url_ok("http://10.0.0.1:65535/", 0, "10.0.0.1", "65535",
	    "10.0.0.1:65535", "/");
}
END_TEST

START_TEST(test_url_ip_flag)
{
	struct fetch_url	u;
	char			cause[64];

	ck_assert_int_eq(fetchparse_url("http://127.0.0.1/", &u, cause,
	    sizeof cause), 0);
	ck_assert_int_eq(u.ip, 1);
	free(u.target);
	ck_assert_int_eq(fetchparse_url("http://localhost/", &u, cause,
	    sizeof cause), 0);
	ck_assert_int_eq(u.ip, 0);
	free(u.target);
}
END_TEST

START_TEST(test_url_refused)
{
	url_bad("ftp://h/", "only http:// and https://");
	url_bad("h/x", "only http:// and https://");
	url_bad("", "only http:// and https://");
	url_bad("http://h/a b", "spaces or control bytes");
	url_bad("http://h/a\tb", "spaces or control bytes");
	url_bad("http://h/\x7f", "spaces or control bytes");
	url_bad("http://user:pw@h/", "credentials");
	url_bad("http:///x", "bad host or port");
	url_bad("http://h:0/", "bad host or port");
	url_bad("http://h:65536/", "bad host or port");
	url_bad("http://h:-1/", "bad host or port");
	url_bad("http://h:+80/", "bad host or port");
	url_bad("http://h:80x/", "bad host or port");
	url_bad("http://h_%41/", "bad host or port");
	url_bad("http://[::1/", "bad host or port");
	url_bad("http://[]/", "bad host or port");
	url_bad("http://[nothex]/", "bad host or port");
	url_bad("http://[::1]x/", "bad host or port");
}
END_TEST

START_TEST(test_url_host_length)
{
	char	url[512], host[300];

	/* 255 bytes of host: fine; 256: refused. */
	snprintf(host, sizeof host, "%0255d", 0);
	snprintf(url, sizeof url, "http://%s/", host);
	url_ok(url, 0, host, "80", host, "/");
	snprintf(url, sizeof url, "http://%0256d/", 0);
	url_bad(url, "bad host or port");
}
END_TEST

START_TEST(test_resolve)
{
	resolve_is("http://a/b/c?d", "https://x/y", "https://x/y");
	resolve_is("https://a/b", "//x/y", "https://x/y");
	resolve_is("http://a:8/b/c", "/z", "http://a:8/z");
	resolve_is("http://a/b/c?d", "e", "http://a/b/e");
	resolve_is("http://a/b/c?d", "?e", "http://a/b/c?e");
	resolve_is("http://a", "e", "http://a/e");
	resolve_is("http://a/b/", "e/f", "http://a/b/e/f");
	resolve_is("http://a/b", "y/x:z", "http://a/y/x:z");
}
END_TEST

START_TEST(test_resolve_refused)
{
	struct fetch_url	 u;
	char			 cause[256] = "";

	ck_assert_int_eq(fetchparse_url("http://a/b", &u, cause, sizeof cause),
	    0);
	errno = 0;
	ck_assert_ptr_null(fetchparse_resolve("http://a/b", &u, "ftp://x/",
	    cause, sizeof cause));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "unsupported"));
	ck_assert_ptr_null(fetchparse_resolve("http://a/b", &u,
	    "javascript:alert(1)", cause, sizeof cause));
	ck_assert_ptr_null(fetchparse_resolve("http://a/b", &u, "x:y/z",
	    cause, sizeof cause));
	free(u.target);
}
END_TEST

START_TEST(test_status)
{
	struct fetch_head	h;

	ck_assert_int_eq(fetchparse_status("HTTP/1.1 200 OK", &h), 0);
	ck_assert_int_eq(h.status, 200);
	ck_assert_str_eq(h.reason, "OK");
	ck_assert_int_eq(fetchparse_status("HTTP/1.0 404", &h), 0);
	ck_assert_int_eq(h.status, 404);
	ck_assert_str_eq(h.reason, "");
	ck_assert_int_eq(fetchparse_status("HTTP/1.1 999 Odd but three", &h),
	    0);
	ck_assert_int_eq(h.status, 999);
	ck_assert_int_eq(fetchparse_status("HTTP/2 200 OK", &h), -1);
	ck_assert_int_eq(fetchparse_status("HTTP/1.1 20 OK", &h), -1);
	ck_assert_int_eq(fetchparse_status("HTTP/1.1 2000 OK", &h), -1);
	ck_assert_int_eq(fetchparse_status("HTTP/1.1  200 OK", &h), -1);
	ck_assert_int_eq(fetchparse_status("HTTP/1.", &h), -1);
	ck_assert_int_eq(fetchparse_status("HTTP/1.1 -20 OK", &h), -1);
	ck_assert_int_eq(fetchparse_status("", &h), -1);
	ck_assert_int_eq(fetchparse_status("SSH-2.0-x", &h), -1);
}
END_TEST

START_TEST(test_header)
{
	struct fetch_head	h;
	char			line[128], cause[128];

	memset(&h, 0, sizeof h);
	strcpy(line, "Content-Length:  42 \t");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	ck_assert_int_eq(h.has_length, 1);
	ck_assert_uint_eq(h.length, 42);
	/* A second, equal one is fine; a different one is not. */
	strcpy(line, "content-length: 42");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	strcpy(line, "Content-Length: 43");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "Content-Length"));
	memset(&h, 0, sizeof h);
	strcpy(line, "Content-Length: -1");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), -1);
	strcpy(line, "Content-Length: 1 2");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), -1);
	strcpy(line, "Content-Length: 18446744073709551616");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), -1);
	strcpy(line, "Content-Length:");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), -1);
	ck_assert_int_eq(h.has_length, 0);

	strcpy(line, "Transfer-Encoding: gzip, chunked");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	ck_assert_int_eq(h.chunked, 1);
	strcpy(line, "Transfer-Encoding: chunked, gzip");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	ck_assert_int_eq(h.chunked, 0);

	strcpy(line, "Location: /a");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	strcpy(line, "LOCATION:  /b  ");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	ck_assert_str_eq(h.location, "/b");	/* the last one */
	free(h.location);
	h.location = NULL;

	strcpy(line, "no colon here");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	strcpy(line, "X-Other: 1");
	ck_assert_int_eq(fetchparse_header(line, &h, cause, sizeof cause), 0);
	ck_assert_int_eq(h.has_length, 0);
	ck_assert_ptr_null(h.location);
}
END_TEST

START_TEST(test_chunk_size)
{
	uint64_t	n = 7;

	ck_assert_int_eq(fetchparse_chunk_size("0", &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(fetchparse_chunk_size("1a", &n), 0);
	ck_assert_uint_eq(n, 26);
	ck_assert_int_eq(fetchparse_chunk_size("FF;ext=1", &n), 0);
	ck_assert_uint_eq(n, 255);
	ck_assert_int_eq(fetchparse_chunk_size("10 ", &n), 0);
	ck_assert_uint_eq(n, 16);
	ck_assert_int_eq(fetchparse_chunk_size("ffffffffffffffff", &n), 0);
	ck_assert_uint_eq(n, UINT64_MAX);
	ck_assert_int_eq(fetchparse_chunk_size("0000000000000000001", &n), 0);
	ck_assert_uint_eq(n, 1);
	n = 7;
	/* strtoull would take these; HTTP does not. */
	ck_assert_int_eq(fetchparse_chunk_size("-1", &n), -1);
	ck_assert_int_eq(fetchparse_chunk_size("+1", &n), -1);
	ck_assert_int_eq(fetchparse_chunk_size(" 1", &n), -1);
	ck_assert_int_eq(fetchparse_chunk_size("0x10", &n), -1);
	ck_assert_int_eq(fetchparse_chunk_size("", &n), -1);
	ck_assert_int_eq(fetchparse_chunk_size("g", &n), -1);
	ck_assert_int_eq(fetchparse_chunk_size("10000000000000000", &n), -1);
	ck_assert_uint_eq(n, 7);
}
END_TEST

static Suite *
fetchparse_suite(void)
{
	Suite	*s = suite_create("fetchparse");
	TCase	*tc = tcase_create("parsers");

	tcase_add_test(tc, test_url);
	tcase_add_test(tc, test_url_ip_flag);
	tcase_add_test(tc, test_url_refused);
	tcase_add_test(tc, test_url_host_length);
	tcase_add_test(tc, test_resolve);
	tcase_add_test(tc, test_resolve_refused);
	tcase_add_test(tc, test_status);
	tcase_add_test(tc, test_header);
	tcase_add_test(tc, test_chunk_size);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(fetchparse_suite()));
}
