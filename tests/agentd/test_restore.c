/*
 * test_restore.c -- Check unit tests of the pure parts of a restore:
 * restorecheck.c (vmgenid's uevent, the RTC's move, the window of one
 * restore, the RTC's time) and proto_parse_resumed (the body of POST
 * /v1/sandbox/resumed: unix_ms, and the entropy's bounds).
 */
#include <linux/rtc.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "../checkmain.h"

#include "proto.h"
#include "restorecheck.h"

static Suite	*restore_suite(void);

/* The body parses, or fails with 400 invalid_request naming needle. */
static int
resumed(const char *body, struct proto_resumed *r, const char *needle)
{
	struct proto_err	err;
	int			rc;

	memset(&err, 0, sizeof err);
	rc = proto_parse_resumed(body, body != NULL ? strlen(body) : 0, r,
	    &err);
	if (rc != 0 && needle != NULL) {
		ck_assert_int_eq(err.status, 400);
		ck_assert_msg(strstr(err.message, needle) != NULL, "%s: %s",
		    body, err.message);
	}
	return (rc);
}

/* A body with "entropy" of n bytes (standard base64 of 'A's). */
static char *
entropy_body(size_t n)
{
	static const char	abc[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char			*b = malloc(4 * n / 3 + 64), *p;
	size_t			 i;
	uint32_t		 v;

	p = b + sprintf(b, "{\"entropy\": \"");
	for (i = 0; i + 3 <= n; i += 3) {
		v = 0x41u << 16 | 0x41u << 8 | 0x41u;
		*p++ = abc[v >> 18 & 63];
		*p++ = abc[v >> 12 & 63];
		*p++ = abc[v >> 6 & 63];
		*p++ = abc[v & 63];
	}
	if (n - i == 1) {
		*p++ = abc[0x41 >> 2];
		*p++ = abc[(0x41 & 3) << 4];
		*p++ = '=';
		*p++ = '=';
	} else if (n - i == 2) {
		v = 0x41u << 8 | 0x41u;
		*p++ = abc[v >> 10 & 63];
		*p++ = abc[v >> 4 & 63];
		*p++ = abc[(v & 15) << 2];
		*p++ = '=';
	}
	strcpy(p, "\"}");
	return (b);
}

START_TEST(test_entropy_bounds)
{
	struct proto_resumed	r;
	static const size_t	ok[] = { 32, 33, 34, 100, 511, 512 };
	static const size_t	bad[] = { 1, 2, 31, 513, 514, 4096 };
	char			*b;
	size_t			 i;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		b = entropy_body(ok[i]);
		ck_assert_msg(resumed(b, &r, NULL) == 0, "%zu refused", ok[i]);
		ck_assert_uint_eq(r.entropy_len, ok[i]);
		ck_assert_int_eq(r.entropy[0], 'A');
		ck_assert_int_eq(r.entropy[ok[i] - 1], 'A');
		ck_assert_int_eq(r.unix_ms, -1);
		free(b);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		b = entropy_body(bad[i]);
		ck_assert_msg(resumed(b, &r, "32 to 512") == -1, "%zu taken",
		    bad[i]);
		free(b);
	}
	ck_assert_int_eq(resumed("{\"entropy\": \"\"}", &r, "32 to 512"), -1);
	ck_assert_int_eq(resumed("{\"entropy\": \"QUFB QUFB\"}", &r,
	    "standard base64"), -1);
	ck_assert_int_eq(resumed("{\"entropy\": \"QQ=\"}", &r,
	    "standard base64"), -1);
	ck_assert_int_eq(resumed("{\"entropy\": null}", &r, "entropy"), -1);
}
END_TEST

START_TEST(test_unix_ms)
{
	struct proto_resumed	r;

	ck_assert_int_eq(resumed("{\"unix_ms\": 1764849600000}", &r, NULL), 0);
	ck_assert_int_eq(r.unix_ms, 1764849600000LL);
	ck_assert_uint_eq(r.entropy_len, 0);
	ck_assert_int_eq(resumed("{\"unix_ms\": 0}", &r, NULL), 0);
	ck_assert_int_eq(r.unix_ms, 0);
	ck_assert_int_eq(resumed("{\"unix_ms\": 253402300799999}", &r, NULL),
	    0);
	ck_assert_int_eq(resumed("{\"unix_ms\": 253402300800000}", &r,
	    "unix_ms"), -1);
	ck_assert_int_eq(resumed("{\"unix_ms\": -1}", &r, "unix_ms"), -1);
	ck_assert_int_eq(resumed("{\"unix_ms\": 1.0}", &r, "unix_ms"), -1);
	ck_assert_int_eq(resumed("{\"unix_ms\": \"1\"}", &r, "unix_ms"), -1);
	ck_assert_int_eq(resumed("{\"unix\": 1}", &r, "unknown field"), -1);
	ck_assert_int_eq(resumed("[]", &r, "JSON object"), -1);
	/* Both fields optional: no body, blanks, {}. */
	ck_assert_int_eq(resumed(NULL, &r, NULL), 0);
	ck_assert_int_eq(r.unix_ms, -1);
	ck_assert_int_eq(resumed(" \r\n\t", &r, NULL), 0);
	ck_assert_int_eq(resumed("{}", &r, NULL), 0);
	ck_assert_int_eq(r.unix_ms, -1);
	ck_assert_uint_eq(r.entropy_len, 0);
}
END_TEST

START_TEST(test_same_window)
{
	ck_assert_int_eq(restorecheck_same(-1, 0, 10000), 0);	/* none yet */
	ck_assert_int_eq(restorecheck_same(-1, 5000, 10000), 0);
	ck_assert_int_eq(restorecheck_same(1000, 1000, 10000), 1);
	ck_assert_int_eq(restorecheck_same(1000, 11000, 10000), 1);
	ck_assert_int_eq(restorecheck_same(1000, 11001, 10000), 0);
	ck_assert_int_eq(restorecheck_same(1000, 999, 10000), 0);
	ck_assert_int_eq(restorecheck_same(0, 0, 0), 1);
	ck_assert_int_eq(restorecheck_same(0, 1, 0), 0);
}
END_TEST

START_TEST(test_rtc_moved)
{
	/* The RTC's whole seconds: a steady drift reads up to 999 ms apart. */
	ck_assert_int_eq(restorecheck_rtc_moved(-999, 0, 2000), 0);
	ck_assert_int_eq(restorecheck_rtc_moved(0, -999, 2000), 0);
	ck_assert_int_eq(restorecheck_rtc_moved(-300, -2300, 2000), 0);
	ck_assert_int_eq(restorecheck_rtc_moved(-300, -2301, 2000), 1);
	/* Stopped 7 s: CLOCK_REALTIME 7 s behind the RTC. */
	ck_assert_int_eq(restorecheck_rtc_moved(-400, 6600, 2000), 1);
	/* A clone restored into the past. */
	ck_assert_int_eq(restorecheck_rtc_moved(0, -60000, 2000), 1);
	/* An RTC that is off from the start but steady: no restore. */
	ck_assert_int_eq(restorecheck_rtc_moved(3600000, 3600500, 2000), 0);
}
END_TEST

START_TEST(test_rtc_ms)
{
	struct rtc_time	tm;

	memset(&tm, 0, sizeof tm);
	tm.tm_year = 70;
	tm.tm_mday = 1;
	ck_assert_int_eq(restorecheck_rtc_ms(&tm), 0);
	/* 2026-12-04T16:24:02Z */
	tm.tm_year = 126;
	tm.tm_mon = 11;
	tm.tm_mday = 4;
	tm.tm_hour = 16;
	tm.tm_min = 24;
	tm.tm_sec = 2;
	ck_assert_int_eq(restorecheck_rtc_ms(&tm), 1796401442000LL);
	/* 2024-02-29T00:00:00Z, a leap day */
	memset(&tm, 0, sizeof tm);
	tm.tm_year = 124;
	tm.tm_mon = 1;
	tm.tm_mday = 29;
	ck_assert_int_eq(restorecheck_rtc_ms(&tm), 1709164800000LL);
	tm.tm_mon = 12;
	ck_assert_int_eq(restorecheck_rtc_ms(&tm), -1);
	tm.tm_mon = 0;
	tm.tm_year = 69;
	ck_assert_int_eq(restorecheck_rtc_ms(&tm), -1);
	tm.tm_year = 124;
	tm.tm_hour = 24;
	ck_assert_int_eq(restorecheck_rtc_ms(&tm), -1);
}
END_TEST

START_TEST(test_uevent)
{
	static const char	vmgenid[] =
	    "change@/devices/platform/QEMUVGID:00\0ACTION=change\0"
	    "DEVPATH=/devices/platform/QEMUVGID:00\0SUBSYSTEM=platform\0"
	    "NEW_VMGENID=1\0SEQNUM=2001";
	static const char	other[] =
	    "add@/devices/virtual/net/lo\0ACTION=add\0NEW_VMGENID=10\0"
	    "XNEW_VMGENID=1\0SEQNUM=7";
	static const char	last[] = "change@/x\0NEW_VMGENID=1";

	ck_assert_int_eq(restorecheck_uevent(vmgenid, sizeof vmgenid - 1), 1);
	ck_assert_int_eq(restorecheck_uevent(other, sizeof other - 1), 0);
	/* Unterminated at the end: still a line. */
	ck_assert_int_eq(restorecheck_uevent(last, sizeof last - 1), 1);
	/* Cut inside the key: not it. */
	ck_assert_int_eq(restorecheck_uevent(last, sizeof last - 2), 0);
	ck_assert_int_eq(restorecheck_uevent("", 0), 0);
}
END_TEST

/* The suite. */
static Suite *
restore_suite(void)
{
	Suite	*s = suite_create("restore");
	TCase	*tc = tcase_create("pure");

	tcase_add_test(tc, test_entropy_bounds);
	tcase_add_test(tc, test_unix_ms);
	tcase_add_test(tc, test_same_window);
	tcase_add_test(tc, test_rtc_moved);
	tcase_add_test(tc, test_rtc_ms);
	tcase_add_test(tc, test_uevent);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(restore_suite()));
}
