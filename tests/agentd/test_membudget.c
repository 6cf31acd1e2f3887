/*
 * test_membudget.c -- membudget.c's pure parts: the shares of memory the
 * budgets default to, and the parsers of /proc/meminfo, /proc/self/cgroup,
 * /proc/self/mountinfo and the limit files.
 */
#include <stdint.h>
#include <string.h>

#include <check.h>

#include "config.h"
#include "membudget.h"
#include "../checkmain.h"

#define MiB	(1ull << 20)

START_TEST(test_shares)
{
	/* A 512 MiB sandbox: 64 MiB of answers, 128 of rings, 32 of argv. */
	ck_assert_uint_eq(membudget_share(512 * MiB, MEMBUDGET_ANSWERS_SHARE,
	    CONFIG_MAX_ANSWER_BYTES_DEFAULT), 64 * MiB);
	ck_assert_uint_eq(membudget_share(512 * MiB, MEMBUDGET_RINGS_SHARE,
	    CONFIG_MAX_TOTAL_RING_DEFAULT), 128 * MiB);
	ck_assert_uint_eq(membudget_share(512 * MiB, MEMBUDGET_SESSION_SHARE,
	    CONFIG_MAX_SESSION_BYTES_DEFAULT), 32 * MiB);
	/* A big host: today's fixed values, the caps. */
	ck_assert_uint_eq(membudget_share(64ull << 30, MEMBUDGET_ANSWERS_SHARE,
	    CONFIG_MAX_ANSWER_BYTES_DEFAULT), CONFIG_MAX_ANSWER_BYTES_DEFAULT);
	ck_assert_uint_eq(membudget_share(64ull << 30, MEMBUDGET_RINGS_SHARE,
	    CONFIG_MAX_TOTAL_RING_DEFAULT), CONFIG_MAX_TOTAL_RING_DEFAULT);
	/* A tiny one: the floor.  Unknown memory: the cap. */
	ck_assert_uint_eq(membudget_share(4 * MiB, MEMBUDGET_SESSION_SHARE,
	    CONFIG_MAX_SESSION_BYTES_DEFAULT), MEMBUDGET_FLOOR);
	ck_assert_uint_eq(membudget_share(0, MEMBUDGET_SESSION_SHARE,
	    CONFIG_MAX_SESSION_BYTES_DEFAULT), CONFIG_MAX_SESSION_BYTES_DEFAULT);
}
END_TEST

START_TEST(test_meminfo_and_limits)
{
	ck_assert_uint_eq(membudget_meminfo("MemTotal:         524288 kB\n"
	    "MemFree:  1000 kB\n"), 512 * MiB);
	ck_assert_uint_eq(membudget_meminfo("MemFree:  1000 kB\n"
	    "MemTotal:  1024 kB\n"), MiB);
	ck_assert_uint_eq(membudget_meminfo("nothing\n"), 0);
	ck_assert_uint_eq(membudget_meminfo(NULL), 0);
	ck_assert_uint_eq(membudget_limit("536870912\n"), 512 * MiB);
	ck_assert_uint_eq(membudget_limit("max\n"), 0);
	ck_assert_uint_eq(membudget_limit("12x\n"), 0);
	ck_assert_uint_eq(membudget_limit(""), 0);
	/* v1's "no limit" is a number, and larger than any memory. */
	ck_assert_uint_eq(membudget_limit("9223372036854771712\n"),
	    9223372036854771712ull);
}
END_TEST

START_TEST(test_cgroup_paths)
{
	char	p[256];

	ck_assert_int_eq(membudget_cgroup_path("0::/sandbox/agentd\n", 0, p,
	    sizeof p), 0);
	ck_assert_str_eq(p, "/sandbox/agentd");
	ck_assert_int_eq(membudget_cgroup_path("0::/sandbox/agentd\n", 1, p,
	    sizeof p), -1);
	ck_assert_int_eq(membudget_cgroup_path("12:pids:/\n"
	    "4:cpu,memory:/docker/abc\n0::/\n", 1, p, sizeof p), 0);
	ck_assert_str_eq(p, "/docker/abc");
	ck_assert_int_eq(membudget_cgroup_path("3:memory:/\n0::/x", 0, p,
	    sizeof p), 0);
	ck_assert_str_eq(p, "/x");
	/* memory_foo is not memory; a path too long is none. */
	ck_assert_int_eq(membudget_cgroup_path("3:memory_foo:/a\n", 1, p,
	    sizeof p), -1);
	ck_assert_int_eq(membudget_cgroup_path("0::/abcdef\n", 0, p, 4), -1);
}
END_TEST

START_TEST(test_mounts)
{
	static const char	mi[] =
	    "22 1 0:21 / /proc rw - proc proc rw\n"
	    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
	    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup "
	    "cgroup rw,memory\n"
	    "40 31 0:40 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
	char			p[256];

	ck_assert_int_eq(membudget_mount(mi, 0, p, sizeof p), 0);
	ck_assert_str_eq(p, "/sys/fs/cgroup/unified");
	ck_assert_int_eq(membudget_mount(mi, 1, p, sizeof p), 0);
	ck_assert_str_eq(p, "/sys/fs/cgroup/memory");
	ck_assert_int_eq(membudget_mount("22 1 0:21 / /proc rw - proc proc "
	    "rw\n", 0, p, sizeof p), -1);
}
END_TEST

/* The suite. */
static Suite *
membudget_suite(void)
{
	Suite	*s = suite_create("membudget");
	TCase	*tc = tcase_create("membudget");

	tcase_add_test(tc, test_shares);
	tcase_add_test(tc, test_meminfo_and_limits);
	tcase_add_test(tc, test_cgroup_paths);
	tcase_add_test(tc, test_mounts);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(membudget_suite()));
}
