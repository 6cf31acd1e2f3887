/*
 * test_cgroup.c -- Check unit tests of cgroup.c's pure logic: the parsers
 * of /proc/self/cgroup, flat-keyed files and cgroup.controllers, cpu.max's
 * text, the limits a hierarchy cannot apply, and detection refusing what is
 * not a cgroup2 mount.  Nothing here writes a cgroup: the real hierarchy is
 * tested in the VM (tests/e2e/e2e.py).
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "../checkmain.h"

#include "cgroup.h"
#include "log.h"

/* A pure v2 line gives its path; a v1 line or none is refused. */
START_TEST(parse_self)
{
	char	path[PATH_MAX];

	ck_assert_int_eq(cgroup_parse_self("0::/\n", path, sizeof path), 0);
	ck_assert_str_eq(path, "/");
	ck_assert_int_eq(cgroup_parse_self("0::/agentd\n", path, sizeof path),
	    0);
	ck_assert_str_eq(path, "/agentd");
	ck_assert_int_eq(cgroup_parse_self("0::/a/b", path, sizeof path), 0);
	ck_assert_str_eq(path, "/a/b");
	/* This host's kind: v1 hierarchies next to an empty v2 one. */
	ck_assert_int_eq(cgroup_parse_self("12:pids:/user.slice\n"
	    "1:name=systemd:/user.slice\n0::/user.slice\n", path, sizeof path),
	    -EINVAL);
	ck_assert_int_eq(cgroup_parse_self("0::/x\n0::/y\n", path,
	    sizeof path), -EINVAL);
	ck_assert_int_eq(cgroup_parse_self("", path, sizeof path), -EINVAL);
	ck_assert_int_eq(cgroup_parse_self("0::\n", path, sizeof path),
	    -EINVAL);
	ck_assert_int_eq(cgroup_parse_self("0::/long", path, 4), -EINVAL);
}
END_TEST

/* "key N" lines of cgroup.events, memory.events and cpu.stat. */
START_TEST(parse_key)
{
	uint64_t	v = 7;

	ck_assert_int_eq(cgroup_parse_key("populated 1\nfrozen 0\n",
	    "populated", &v), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(cgroup_parse_key("populated 1\nfrozen 0\n", "frozen",
	    &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(cgroup_parse_key("low 0\nhigh 0\nmax 12\noom 3\n"
	    "oom_kill 2\noom_group_kill 0\n", "oom_kill", &v), 0);
	ck_assert_uint_eq(v, 2);
	/* oom is not oom_kill's prefix match, nor the reverse. */
	ck_assert_int_eq(cgroup_parse_key("oom_kill 5\noom 9\n", "oom", &v),
	    0);
	ck_assert_uint_eq(v, 9);
	ck_assert_int_eq(cgroup_parse_key("usage_usec 123456\nuser_usec 1\n",
	    "usage_usec", &v), 0);
	ck_assert_uint_eq(v, 123456);
	ck_assert_int_eq(cgroup_parse_key("x 1\n", "oom_kill", &v), -ENOENT);
	ck_assert_int_eq(cgroup_parse_key("oom_kill x\n", "oom_kill", &v),
	    -EINVAL);
	ck_assert_int_eq(cgroup_parse_key("oom_kill 1x\n", "oom_kill", &v),
	    -EINVAL);
}
END_TEST

/* The controllers agentd uses, out of cgroup.controllers. */
START_TEST(parse_controllers)
{
	ck_assert_uint_eq(cgroup_parse_controllers("cpuset cpu io memory "
	    "hugetlb pids rdma misc\n"), CGROUP_CTRL_MEMORY | CGROUP_CTRL_PIDS |
	    CGROUP_CTRL_CPU);
	ck_assert_uint_eq(cgroup_parse_controllers("cpuset io\n"), 0);
	ck_assert_uint_eq(cgroup_parse_controllers(""), 0);
	ck_assert_uint_eq(cgroup_parse_controllers("pids"), CGROUP_CTRL_PIDS);
	ck_assert_uint_eq(cgroup_parse_controllers("cpuacct memoryx"), 0);
}
END_TEST

/* cpu_percent 100 is one CPU's period. */
START_TEST(cpu_max)
{
	char	buf[64];

	cgroup_cpu_max(100, buf, sizeof buf);
	ck_assert_str_eq(buf, "100000 100000");
	cgroup_cpu_max(50, buf, sizeof buf);
	ck_assert_str_eq(buf, "50000 100000");
	cgroup_cpu_max(250, buf, sizeof buf);
	ck_assert_str_eq(buf, "250000 100000");
	cgroup_cpu_max(0, buf, sizeof buf);
	ck_assert_str_eq(buf, "max 100000");
	cgroup_cpu_max(1, buf, sizeof buf);
	ck_assert_str_eq(buf, "1000 100000");	/* the kernel's 1 ms floor */
}
END_TEST

/*
 * A directory that is not a cgroup2 mount is refused: containment
 * process_group, and every limit is unavailable.  Nothing is created in it.
 */
START_TEST(init_refuses)
{
	struct cgroup_config	 cfg;
	struct cgroup_limits	 l = { 0, 0, 0 };
	struct cgroup		*cg;
	const char		*limit;
	char			 dir[] = "/tmp/cgroup-unit-XXXXXX", cause[256];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(&cfg, 0, sizeof cfg);
	cfg.mount = dir;
	cfg.self_memory_min = CGROUP_SELF_MIN_DEFAULT;
	cfg.self_cpu_weight = CGROUP_SELF_WEIGHT_DEFAULT;
	ck_assert_int_eq(cgroup_init(&cfg), 0);
	ck_assert_int_eq(cgroup_enabled(), 0);
	ck_assert_str_eq(cgroup_containment(), "process_group");
	ck_assert_uint_eq(cgroup_controllers(), 0);
	ck_assert_ptr_null(cgroup_limit_unavailable(&l));
	l.pids = 10;
	ck_assert_str_eq(cgroup_limit_unavailable(&l), "pids");
	l.memory_bytes = 1 << 20;
	ck_assert_str_eq(cgroup_limit_unavailable(&l), "memory_bytes");
	l.memory_bytes = l.pids = 0;
	l.cpu_percent = 5;
	ck_assert_str_eq(cgroup_limit_unavailable(&l), "cpu_percent");
	ck_assert_int_eq(cgroup_session_new(&l, &cg, &limit, cause,
	    sizeof cause), -ENOTSUP);
	ck_assert_ptr_null(cg);
	ck_assert_int_eq(rmdir(dir), 0);	/* still empty */
}
END_TEST

static Suite *
cgroup_suite(void)
{
	Suite	*s = suite_create("agentd_cgroup");
	TCase	*t = tcase_create("cgroup");

	tcase_add_test(t, parse_self);
	tcase_add_test(t, parse_key);
	tcase_add_test(t, parse_controllers);
	tcase_add_test(t, cpu_max);
	tcase_add_test(t, init_refuses);
	suite_add_tcase(s, t);
	return (s);
}

int
main(void)
{
	log_set_level("error");
	return (check_main(cgroup_suite()));
}
