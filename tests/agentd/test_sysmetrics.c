/*
 * test_sysmetrics.c -- Check unit tests of sysmetrics.c: envd's GET
 * /metrics, its parsers of /proc/stat and /proc/meminfo (gopsutil's
 * formulas), the CPU share's edges and rounding, and one real rendering.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <jansson.h>

#include "../checkmain.h"

#include "proto.h"
#include "sysmetrics.h"

static Suite	*sysmetrics_suite(void);

START_TEST(test_stat)
{
	struct sysmetrics_cpu	c;
	const char		*text =
	    "cpu  100 20 30 400 50 6 7 8 90 10\n"
	    "cpu0 50 10 15 200 25 3 3 4 45 5\n"
	    "cpu1 50 10 15 200 25 3 4 4 45 5\n"
	    "intr 12345 0 0\n"
	    "ctxt 999\n";

	ck_assert_int_eq(sysmetrics_parse_stat(text, &c), 0);
	/* guest (90) and guest_nice (10) are in user and nice already */
	ck_assert_uint_eq(c.total, 100 + 20 + 30 + 400 + 50 + 6 + 7 + 8);
	ck_assert_uint_eq(c.busy, c.total - 400 - 50);
	ck_assert_uint_eq(c.count, 2);
	/* an old kernel's four fields */
	ck_assert_int_eq(sysmetrics_parse_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\n",
	    &c), 0);
	ck_assert_uint_eq(c.total, 10);
	ck_assert_uint_eq(c.busy, 6);
	ck_assert_uint_eq(c.count, 1);
	ck_assert_int_eq(sysmetrics_parse_stat("intr 1\n", &c), -1);
	ck_assert_int_eq(sysmetrics_parse_stat("cpu x\n", &c), -1);
}
END_TEST

START_TEST(test_meminfo)
{
	struct sysmetrics_mem	m;

	ck_assert_int_eq(sysmetrics_parse_meminfo(
	    "MemTotal:        2048000 kB\n"
	    "MemFree:          100000 kB\n"
	    "MemAvailable:    1024000 kB\n"
	    "Buffers:            1000 kB\n"
	    "Cached:           300000 kB\n"
	    "SwapCached:        77777 kB\n"
	    "SReclaimable:      20000 kB\n", &m), 0);
	ck_assert_uint_eq(m.total, 2048000ull * 1024);
	ck_assert_uint_eq(m.used, (2048000ull - 1024000) * 1024);
	/* Cached, not SwapCached, with SReclaimable */
	ck_assert_uint_eq(m.cache, 320000ull * 1024);
	/* before MemAvailable: total less cache and free */
	ck_assert_int_eq(sysmetrics_parse_meminfo(
	    "MemTotal: 1000 kB\nMemFree: 100 kB\nCached: 200 kB\n", &m), 0);
	ck_assert_uint_eq(m.used, 700ull * 1024);
	ck_assert_int_eq(sysmetrics_parse_meminfo("MemFree: 1 kB\n", &m), -1);
}
END_TEST

START_TEST(test_cpu_pct)
{
	struct sysmetrics_cpu	a = { 1000, 200, 2 }, b = a;

	ck_assert(sysmetrics_cpu_pct(&a, &b) == 0);	/* nothing ran */
	b.total = 1300;
	b.busy = 300;			/* 100 of 300 ticks: 33.33 */
	ck_assert(sysmetrics_cpu_pct(&a, &b) == 33.33);
	b.busy = 400;			/* 66.666...: 66.67 */
	ck_assert(sysmetrics_cpu_pct(&a, &b) == 66.67);
	b.total = 1000;			/* busy moved, total did not */
	ck_assert(sysmetrics_cpu_pct(&a, &b) == 100);
	b.total = 1100;
	b.busy = 190;			/* a counter that went back */
	ck_assert(sysmetrics_cpu_pct(&a, &b) == 0);
}
END_TEST

START_TEST(test_render)
{
	struct sysmetrics_cpu	 last = { 0 };
	struct proto_buf	 b = { 0 };
	json_error_t		 e;
	json_t			*o;
	const char		*keys[] = { "ts", "cpu_count", "cpu_used_pct",
	    "mem_total_mib", "mem_used_mib", "mem_total", "mem_used",
	    "mem_cache", "disk_used", "disk_total" };
	size_t			 i;

	ck_assert_int_eq(sysmetrics_render(&last, &b), 0);
	ck_assert(b.len > 0 && b.data[b.len - 1] == '\n');
	o = json_loadb(b.data, b.len, 0, &e);
	ck_assert_msg(o != NULL, "%s: %.*s", e.text, (int)b.len, b.data);
	ck_assert_uint_eq(json_object_size(o), 10);
	for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
		ck_assert_msg(json_is_number(json_object_get(o, keys[i])),
		    "%s", keys[i]);
	ck_assert_int_gt(json_integer_value(json_object_get(o, "cpu_count")),
	    0);
	ck_assert_int_gt(json_integer_value(json_object_get(o, "mem_total")),
	    json_integer_value(json_object_get(o, "mem_used")));
	ck_assert_int_eq(json_integer_value(json_object_get(o,
	    "mem_total_mib")), json_integer_value(json_object_get(o,
	    "mem_total")) >> 20);
	ck_assert_int_ge(json_integer_value(json_object_get(o, "disk_total")),
	    json_integer_value(json_object_get(o, "disk_used")));
	ck_assert_uint_gt(last.total, 0);	/* the next call's base */
	json_decref(o);
	free(b.data);
}
END_TEST

static Suite *
sysmetrics_suite(void)
{
	Suite	*s = suite_create("sysmetrics");
	TCase	*tc = tcase_create("core");

	tcase_add_test(tc, test_stat);
	tcase_add_test(tc, test_meminfo);
	tcase_add_test(tc, test_cpu_pct);
	tcase_add_test(tc, test_render);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(sysmetrics_suite()));
}
