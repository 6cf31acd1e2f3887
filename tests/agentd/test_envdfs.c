/*
 * test_envdfs.c -- Check unit tests of the pure parts of agentd's envd
 * files: multipart.c (multipart/form-data read in place) and fsentry.c
 * (envd's path rules, Go's FileMode strings, protojson timestamps).
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "../checkmain.h"

#include "fsentry.h"
#include "multipart.h"

static Suite	*envdfs_suite(void);

#define CT	"multipart/form-data; boundary=XyZ"

/* Two parts, the first without a filename, then the end. */
START_TEST(multipart_two)
{
	static const char	body[] = "preamble\r\n--XyZ\r\n"
	    "Content-Disposition: form-data; name=\"a\"\r\n\r\nhello\r\n"
	    "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
	    "filename=\"/tmp/q \\\"x\\\".txt\"\r\nContent-Type: text/plain\r\n"
	    "\r\nline1\r\nline2\r\n--XyZ--\r\nepilogue";
	struct multipart	 m;
	struct multipart_part	 p;
	char			 cause[128];

	ck_assert_int_eq(multipart_init(&m, CT, body, sizeof body - 1, cause,
	    sizeof cause), 0);
	ck_assert_int_eq(multipart_next(&m, &p, cause, sizeof cause), 1);
	ck_assert_str_eq(p.name, "a");
	ck_assert_int_eq(p.has_filename, 0);
	ck_assert_uint_eq(p.len, 5);
	ck_assert(memcmp(p.data, "hello", 5) == 0);
	ck_assert_int_eq(multipart_next(&m, &p, cause, sizeof cause), 1);
	ck_assert_str_eq(p.name, "file");
	ck_assert_int_eq(p.has_filename, 1);
	ck_assert_str_eq(p.filename, "/tmp/q \"x\".txt");
	ck_assert_uint_eq(p.len, 12);
	ck_assert(memcmp(p.data, "line1\r\nline2", 12) == 0);
	ck_assert_int_eq(multipart_next(&m, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(multipart_next(&m, &p, cause, sizeof cause), 0);
}
END_TEST

/* A body that opens with its boundary; an empty part; a quoted boundary. */
START_TEST(multipart_edges)
{
	static const char	body[] = "--a b\r\n"
	    "Content-Disposition: form-data; name=file; filename=x\r\n\r\n"
	    "\r\n--a b--";
	struct multipart	 m;
	struct multipart_part	 p;
	char			 cause[128];

	ck_assert_int_eq(multipart_init(&m, "multipart/form-data; "
	    "boundary=\"a b\"", body, sizeof body - 1, cause, sizeof cause), 0);
	ck_assert_int_eq(multipart_next(&m, &p, cause, sizeof cause), 1);
	ck_assert_str_eq(p.name, "file");
	ck_assert_str_eq(p.filename, "x");
	ck_assert_uint_eq(p.len, 0);
	ck_assert_int_eq(multipart_next(&m, &p, cause, sizeof cause), 0);
}
END_TEST

/* Malformed bodies and content types are refused with a cause. */
START_TEST(multipart_bad)
{
	static const char	*bodies[] = {
		"no boundary here",
		"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx",
		"--XyZ\r\nContent-Disposition: attachment\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\nno colon\r\n\r\nx\r\n--XyZ--",
		"--XyZ\r\nContent-Disposition: form-data; name=\"a\"",
		"--XyZjunk",
	};
	struct multipart	 m;
	struct multipart_part	 p;
	char			 cause[128];
	size_t			 i;
	int			 r;

	for (i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		ck_assert_int_eq(multipart_init(&m, CT, bodies[i],
		    strlen(bodies[i]), cause, sizeof cause), 0);
		cause[0] = '\0';
		while ((r = multipart_next(&m, &p, cause, sizeof cause)) == 1)
			;
		ck_assert_msg(r == -1 && cause[0] != '\0', "body %zu: %d",
		    i, r);
	}
	ck_assert_int_eq(multipart_init(&m, "application/json", "", 0, cause,
	    sizeof cause), -1);
	ck_assert_int_eq(multipart_init(&m, "multipart/form-data", "", 0,
	    cause, sizeof cause), -1);
	ck_assert_int_eq(multipart_init(&m, "multipart/form-data; boundary=",
	    "", 0, cause, sizeof cause), -1);
	ck_assert_int_eq(multipart_init(&m, "multipart/form-data; boundary="
	    "a\x01", "", 0, cause, sizeof cause), -1);
	ck_assert_int_eq(multipart_init(&m, "multipart/form-data; boundary="
	    "\"unterminated", "", 0, cause, sizeof cause), -1);
}
END_TEST

/* envd's ExpandAndResolve. */
START_TEST(fsentry_paths)
{
	char	 cause[128], *p;

	p = fsentry_resolve("/abs/../x", "/home/u", NULL, cause, sizeof cause);
	ck_assert_str_eq(p, "/abs/../x");
	free(p);
	p = fsentry_resolve("rel/./a/../b//", "/home/u", NULL, cause,
	    sizeof cause);
	ck_assert_str_eq(p, "/home/u/rel/b");
	free(p);
	p = fsentry_resolve("~", "/home/u", NULL, cause, sizeof cause);
	ck_assert_str_eq(p, "/home/u");
	free(p);
	p = fsentry_resolve("~/x", "/home/u", NULL, cause, sizeof cause);
	ck_assert_str_eq(p, "/home/u/x");
	free(p);
	p = fsentry_resolve("../../..", "/home/u", NULL, cause, sizeof cause);
	ck_assert_str_eq(p, "/");
	free(p);
	p = fsentry_resolve("", "/home/u", "/work", cause, sizeof cause);
	ck_assert_str_eq(p, "/work");
	free(p);
	p = fsentry_resolve("", "/home/u", NULL, cause, sizeof cause);
	ck_assert_str_eq(p, "/home/u");
	free(p);
	ck_assert_ptr_null(fsentry_resolve("~root/x", "/home/u", NULL, cause,
	    sizeof cause));
}
END_TEST

/* Go's FileMode.String() and protojson's timestamps. */
START_TEST(fsentry_strings)
{
	char	b[FSENTRY_PERM_MAX], t[FSENTRY_TIME_MAX];

	ck_assert_str_eq(fsentry_perm(S_IFREG | 0644, b), "-rw-r--r--");
	ck_assert_str_eq(fsentry_perm(S_IFDIR | 0755, b), "drwxr-xr-x");
	ck_assert_str_eq(fsentry_perm(S_IFLNK | 0777, b), "Lrwxrwxrwx");
	ck_assert_str_eq(fsentry_perm(S_IFDIR | 01777, b), "dtrwxrwxrwx");
	ck_assert_str_eq(fsentry_perm(S_IFREG | 04755, b), "urwxr-xr-x");
	ck_assert_str_eq(fsentry_perm(S_IFCHR | 0666, b), "Dcrw-rw-rw-");
	ck_assert_str_eq(fsentry_perm(S_IFIFO | 0600, b), "prw-------");
	ck_assert_str_eq(fsentry_time(0, 0, t), "1970-01-01T00:00:00Z");
	ck_assert_str_eq(fsentry_time(1700000000, 5000000, t),
	    "2023-11-14T22:13:20.005Z");
	ck_assert_str_eq(fsentry_time(1700000000, 5000, t),
	    "2023-11-14T22:13:20.000005Z");
	ck_assert_str_eq(fsentry_time(1700000000, 123456789, t),
	    "2023-11-14T22:13:20.123456789Z");
}
END_TEST

/* Names that are not UTF-8: each bad byte is U+FFFD, the rest kept. */
START_TEST(fsentry_names)
{
	json_t	*v;

	v = fsentry_string("a\xff\xfe\xc3\xa9" "b\xe2\x82");
	ck_assert_ptr_nonnull(v);
	ck_assert_str_eq(json_string_value(v),
	    "a\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9" "b\xef\xbf\xbd\xef\xbf\xbd");
	json_decref(v);
	v = fsentry_string("plain");
	ck_assert_str_eq(json_string_value(v), "plain");
	json_decref(v);
}
END_TEST

/* The suite. */
static Suite *
envdfs_suite(void)
{
	Suite	*s = suite_create("envdfs");
	TCase	*tc = tcase_create("pure");

	tcase_add_test(tc, multipart_two);
	tcase_add_test(tc, multipart_edges);
	tcase_add_test(tc, multipart_bad);
	tcase_add_test(tc, fsentry_paths);
	tcase_add_test(tc, fsentry_strings);
	tcase_add_test(tc, fsentry_names);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(envdfs_suite()));
}
