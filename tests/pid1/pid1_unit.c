/*
 * pid1_unit.c -- Check unit tests of the pure parts of agentd's PID 1 duties:
 * the kernel's ip= (netcfg_parse_ip), a key of the kernel command line
 * (config_cmdline_get), the command line without the token
 * (pid1_cmdline_strip), and the order in which modules.dep and
 * modules.alias make kmod_load() try modules; and pid1_kill_children()
 * on a little process tree of the test's own.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "config.h"
#include "log.h"
#include "kmod.h"
#include "netcfg.h"
#include "pid1.h"

static char	cause[NETCFG_CAUSE_MAX];

/* An address in dotted form, for comparisons. */
static const char *
dotted(struct in_addr a)
{
	static char	buf[4][INET_ADDRSTRLEN];
	static int	n;

	n = (n + 1) % 4;
	inet_ntop(AF_INET, &a, buf[n], sizeof buf[n]);
	return (buf[n]);
}

START_TEST(ip_static_short_form)
{
	struct netcfg_ip	ip;

	ck_assert_int_eq(netcfg_parse_ip(
	    "10.0.2.15::10.0.2.2:255.255.255.0::eth0:off", &ip, cause,
	    sizeof cause), 0);
	ck_assert_str_eq(dotted(ip.client), "10.0.2.15");
	ck_assert_str_eq(dotted(ip.server), "0.0.0.0");
	ck_assert_str_eq(dotted(ip.gateway), "10.0.2.2");
	ck_assert_str_eq(dotted(ip.netmask), "255.255.255.0");
	ck_assert_str_eq(ip.hostname, "");
	ck_assert_str_eq(ip.device, "eth0");
	ck_assert_int_eq(ip.dns[0].s_addr, 0);
}
END_TEST

START_TEST(ip_all_fields)
{
	struct netcfg_ip	ip;

	ck_assert_int_eq(netcfg_parse_ip("172.16.0.2:172.16.0.9:172.16.0.1:"
	    "255.255.0.0:box-1:ens3:none:1.1.1.1:8.8.8.8:9.9.9.9:extra:more",
	    &ip, cause, sizeof cause), 0);
	ck_assert_str_eq(dotted(ip.client), "172.16.0.2");
	ck_assert_str_eq(dotted(ip.server), "172.16.0.9");
	ck_assert_str_eq(dotted(ip.gateway), "172.16.0.1");
	ck_assert_str_eq(dotted(ip.netmask), "255.255.0.0");
	ck_assert_str_eq(ip.hostname, "box-1");
	ck_assert_str_eq(ip.device, "ens3");
	ck_assert_str_eq(dotted(ip.dns[0]), "1.1.1.1");
	ck_assert_str_eq(dotted(ip.dns[1]), "8.8.8.8");
}
END_TEST

START_TEST(ip_defaults)
{
	struct netcfg_ip	ip;

	/* No autoconf field, no netmask: static, classful mask. */
	ck_assert_int_eq(netcfg_parse_ip("10.1.2.3:::::eth1", &ip, cause,
	    sizeof cause), 0);
	ck_assert_str_eq(dotted(ip.netmask), "255.0.0.0");
	ck_assert_int_eq(ip.gateway.s_addr, 0);
	ck_assert_int_eq(netcfg_parse_ip("172.20.1.1", &ip, cause,
	    sizeof cause), -ENOTSUP);	/* a lone word is an autoconf */
	ck_assert_int_eq(netcfg_parse_ip("172.20.1.1:", &ip, cause,
	    sizeof cause), 0);
	ck_assert_str_eq(dotted(ip.netmask), "255.255.0.0");
	ck_assert_int_eq(netcfg_parse_ip("192.168.7.7::::", &ip, cause,
	    sizeof cause), 0);
	ck_assert_str_eq(dotted(ip.netmask), "255.255.255.0");
	ck_assert_str_eq(ip.device, "");	/* the first NIC */
}
END_TEST

START_TEST(ip_nothing_to_do)
{
	struct netcfg_ip	ip;

	ck_assert_int_eq(netcfg_parse_ip("off", &ip, cause, sizeof cause), 1);
	ck_assert_int_eq(netcfg_parse_ip("none", &ip, cause, sizeof cause), 1);
	ck_assert_int_eq(netcfg_parse_ip("", &ip, cause, sizeof cause), 1);
	ck_assert_int_eq(netcfg_parse_ip("::10.0.0.1:255.0.0.0::eth0:off", &ip,
	    cause, sizeof cause), 1);
	/* Only a hostname: nothing for the network, the name is kept. */
	ck_assert_int_eq(netcfg_parse_ip("::::sbx::off", &ip, cause,
	    sizeof cause), 1);
	ck_assert_str_eq(ip.hostname, "sbx");
}
END_TEST

START_TEST(ip_unsupported)
{
	static const char *const v[] = { "dhcp", "on", "any", "bootp", "rarp",
	    "both", "10.0.0.2::10.0.0.1:255.0.0.0::eth0:dhcp",
	    ":::::eth0:dhcp" };
	struct netcfg_ip	ip;
	size_t			i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		cause[0] = '\0';
		ck_assert_int_eq(netcfg_parse_ip(v[i], &ip, cause,
		    sizeof cause), -ENOTSUP);
		ck_assert_ptr_nonnull(strstr(cause, "not supported"));
	}
}
END_TEST

START_TEST(ip_malformed)
{
	static const struct {
		const char	*value;
		const char	*needle;
	} v[] = {
		{ "10.0.2.300::::::off", "client" },
		{ "10.0.2.3:x:::::off", "server" },
		{ "10.0.2.3::10.0.2:::::off", "gateway" },
		{ "10.0.2.3:::255.0.255.0:::off", "netmask" },
		{ "10.0.2.3:::0.0.0.0:::off", "netmask" },
		{ "10.0.2.3::::::off:1.2.3", "dns0" },
		{ "10.0.2.3::::::off:1.2.3.4:nope", "dns1" },
		{ "10.0.2.3:::::a-very-long-ifname0:off", "device" },
		{ "10.0.2.3:::::../x:off", "device" },
		{ "10.0.2.3::::" "0123456789012345678901234567890123456789"
		  "0123456789012345678901234567::off", "hostname" },
	};
	struct netcfg_ip	ip;
	size_t			i;

	for (i = 0; i < sizeof v / sizeof v[0]; i++) {
		cause[0] = '\0';
		ck_assert_msg(netcfg_parse_ip(v[i].value, &ip, cause,
		    sizeof cause) == -EINVAL, "%s", v[i].value);
		ck_assert_msg(strstr(cause, v[i].needle) != NULL, "%s: %s",
		    v[i].value, cause);
	}
	/* A field longer than any is cut off, not overflowed. */
	{
		char	big[2048];

		memset(big, '1', sizeof big - 1);
		big[sizeof big - 1] = '\0';
		big[3] = ':';
		ck_assert_int_eq(netcfg_parse_ip(big, &ip, cause, sizeof cause),
		    -EINVAL);
	}
	/* No cause buffer is fine. */
	ck_assert_int_eq(netcfg_parse_ip("x:", &ip, NULL, 0), -EINVAL);
}
END_TEST

START_TEST(cmdline_get)
{
	const char	*cl = "BOOT_IMAGE=/vmlinuz root=/dev/vda ip=10.0.2.15::"
	    "10.0.2.2:255.255.255.0::eth0:off agentd.token=abc "
	    "agentd.listen=0.0.0.0:1 quiet agentd.hostname=\"a b\" "
	    "agentd.listen=[::]:2\n";
	char		*v;

	v = config_cmdline_get(cl, "ip");
	ck_assert_str_eq(v, "10.0.2.15::10.0.2.2:255.255.255.0::eth0:off");
	free(v);
	v = config_cmdline_get(cl, "agentd.token");
	ck_assert_str_eq(v, "abc");
	free(v);
	v = config_cmdline_get(cl, "agentd.listen");	/* the last one wins */
	ck_assert_str_eq(v, "[::]:2");
	free(v);
	v = config_cmdline_get(cl, "agentd.hostname");	/* quotes removed */
	ck_assert_str_eq(v, "a b");
	free(v);
	ck_assert_ptr_null(config_cmdline_get(cl, "quiet"));	/* no '=' */
	ck_assert_ptr_null(config_cmdline_get(cl, "agentd"));
	ck_assert_ptr_null(config_cmdline_get(cl, "agentd.tok"));
	ck_assert_ptr_null(config_cmdline_get(cl, "oken"));
	ck_assert_ptr_null(config_cmdline_get("", "ip"));
	v = config_cmdline_get("agentd.token=", "agentd.token");
	ck_assert_str_eq(v, "");	/* present, empty: config drops it */
	free(v);
}
END_TEST

START_TEST(cmdline_strip)
{
	char	*s;

	s = pid1_cmdline_strip("console=ttyS0 agentd.token=abc quiet\n",
	    "agentd.token");
	ck_assert_str_eq(s, "console=ttyS0 quiet\n");
	free(s);
	s = pid1_cmdline_strip("agentd.token=a  agentd.token=\"b c\"  x=1 "
	    "agentd.tokenx=2 agentd.token", "agentd.token");
	ck_assert_str_eq(s, "x=1 agentd.tokenx=2 agentd.token\n");
	free(s);
	s = pid1_cmdline_strip("a=\"x agentd.token=1\" b", "agentd.token");
	ck_assert_str_eq(s, "a=\"x agentd.token=1\" b\n");
	free(s);
	s = pid1_cmdline_strip("", "agentd.token");
	ck_assert_str_eq(s, "\n");
	free(s);
}
END_TEST

/* Write a file under dir. */
static void
put(const char *dir, const char *name, const char *text)
{
	char	 path[512];
	FILE	*f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

/* The log lines kept, joined. */
static void
log_cat(const char *line, void *arg)
{
	char	*buf = arg;

	strncat(buf, line, 16384 - strlen(buf) - 2);
	strcat(buf, "\n");
}

START_TEST(modules_dependency_order)
{
	char	 dir[] = "/tmp/pid1_unit.XXXXXX", sub[600], logbuf[16384];
	char	*a, *b;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sub, sizeof sub, "%s/kernel", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	/* Not ELF: the kernel refuses them (or we lack the right to ask). */
	put(dir, "kernel/top.ko", "junk");
	put(dir, "kernel/mid-dep.ko.xz", "junk");
	put(dir, "kernel/base.ko", "junk");
	put(dir, "modules.dep", "kernel/top.ko: kernel/mid-dep.ko.xz "
	    "kernel/base.ko\nkernel/mid-dep.ko.xz: kernel/base.ko\n"
	    "kernel/base.ko:\n");
	log_set_level_value(LOG_LEVEL_DEBUG);
	/* No modules.alias: every module, each after its dependencies. */
	ck_assert_int_eq(kmod_load(dir), 0);
	logbuf[0] = '\0';
	log_foreach(log_cat, logbuf);
	a = strstr(logbuf, "finit_module kernel/base.ko:");
	ck_assert_msg(a != NULL, "%s", logbuf);
	/* base failed, so nothing that needs it was tried. */
	ck_assert_ptr_null(strstr(logbuf, "finit_module kernel/top.ko:"));
	ck_assert_ptr_null(strstr(logbuf, "finit_module kernel/mid-dep"));
	ck_assert_ptr_nonnull(strstr(logbuf, "mid_dep: dependency base "
	    "failed"));

	/* With modules.alias: only what a device of this machine matches. */
	put(dir, "modules.alias", "# Aliases extracted from modules "
	    "themselves.\nalias nosuchbus:v0001d0002* top\nalias *:* "
	    "mid-dep\n");
	ck_assert_int_eq(kmod_load(dir), 0);
	logbuf[0] = '\0';
	log_foreach(log_cat, logbuf);
	b = strstr(a + 1, "finit_module kernel/base.ko:");
	if (access("/sys/bus/pci/devices", F_OK) == 0 ||
	    access("/sys/bus/platform/devices", F_OK) == 0)
		ck_assert_msg(b != NULL, "no device matched '*:*'\n%s", logbuf);

	/* No such directory: nothing, quietly. */
	ck_assert_int_eq(kmod_load("/nonexistent/modules"), 0);

	unlink(strcat(strcpy(sub, dir), "/modules.alias"));
	unlink(strcat(strcpy(sub, dir), "/modules.dep"));
	unlink(strcat(strcpy(sub, dir), "/kernel/top.ko"));
	unlink(strcat(strcpy(sub, dir), "/kernel/mid-dep.ko.xz"));
	unlink(strcat(strcpy(sub, dir), "/kernel/base.ko"));
	rmdir(strcat(strcpy(sub, dir), "/kernel"));
	rmdir(dir);
}
END_TEST

/*
 * A child that ignores SIGTERM, and its own child that does not: the child's
 * child gets the signal too (only the child got it: it lived on).
 */
START_TEST(kill_children_reaches_grandchildren)
{
	pid_t	child, grandchild, pid;
	int	fds[2], status, n;

	/* Orphans come to us, not to the machine's init. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	ck_assert_int_eq(pipe(fds), 0);
	if ((child = fork()) == 0) {
		/* Check's SIGTERM handler would signal the test's group. */
		signal(SIGTERM, SIG_DFL);
		if ((grandchild = fork()) == 0) {
			close(fds[0]);
			close(fds[1]);
			for (;;)
				pause();
		}
		signal(SIGTERM, SIG_IGN);
		if (write(fds[1], &grandchild, sizeof grandchild) !=
		    (ssize_t)sizeof grandchild)
			_exit(1);
		for (;;)
			pause();
	}
	ck_assert_int_gt(child, 0);
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &grandchild, sizeof grandchild),
	    (int)sizeof grandchild);
	close(fds[0]);
	ck_assert_int_eq(pid1_kill_children(SIGTERM), 2);
	/* The child lives on; once it is killed, its child comes to us. */
	ck_assert_int_eq(kill(child, SIGKILL), 0);
	for (n = 0; n < 2; n++) {
		pid = waitpid(-1, &status, 0);
		ck_assert(pid == child || pid == grandchild);
		ck_assert(WIFSIGNALED(status));
		ck_assert_int_eq(WTERMSIG(status), pid == child ? SIGKILL :
		    SIGTERM);
	}
	ck_assert_int_eq(pid1_kill_children(SIGTERM), 0);
}
END_TEST

int
main(void)
{
	Suite	*s = suite_create("pid1");
	TCase	*tc = tcase_create("pure");
	SRunner	*sr;
	int	 failed;

	tcase_add_test(tc, ip_static_short_form);
	tcase_add_test(tc, ip_all_fields);
	tcase_add_test(tc, ip_defaults);
	tcase_add_test(tc, ip_nothing_to_do);
	tcase_add_test(tc, ip_unsupported);
	tcase_add_test(tc, ip_malformed);
	tcase_add_test(tc, cmdline_get);
	tcase_add_test(tc, cmdline_strip);
	tcase_add_test(tc, modules_dependency_order);
	tcase_add_test(tc, kill_children_reaches_grandchildren);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
