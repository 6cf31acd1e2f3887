/*
 * test_vsock.c -- Check unit tests of vsock.c's addresses (--vsock-listen
 * PORT, agentctl's --vsock CID:PORT) and names, of its peer checks on a
 * socket that is no vsock one, and of agentd.vsock=PORT on the kernel
 * command line (config.c).  No AF_VSOCK socket is opened: the host's vsock
 * is not the tests'.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "../checkmain.h"

#include "config.h"
#include "vsock.h"

static Suite	*vsock_suite(void);

START_TEST(test_port)
{
	const char	*cause = NULL;
	uint32_t	 port = 7;

	ck_assert_int_eq(vsock_parse_port("49984", &port, &cause), 0);
	ck_assert_uint_eq(port, 49984);
	ck_assert_int_eq(vsock_parse_port("1", &port, &cause), 0);
	ck_assert_uint_eq(port, 1);
	ck_assert_int_eq(vsock_parse_port("4294967294", &port, &cause), 0);
	ck_assert_uint_eq(port, 4294967294u);
	port = 7;
	/* VMADDR_PORT_ANY, past 32 bits, 0, signs, spaces, hex, empty. */
	ck_assert_int_eq(vsock_parse_port("4294967295", &port, &cause), -1);
	ck_assert_ptr_nonnull(cause);
	ck_assert_ptr_nonnull(strstr(cause, "1..4294967294"));
	ck_assert_int_eq(vsock_parse_port("4294967296", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("99999999999", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("0", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("-1", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("+5", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port(" 5", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("5 ", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("0x10", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("", &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_port("1:2", &port, &cause), -1);
	ck_assert_uint_eq(port, 7);	/* untouched on failure */
}
END_TEST

START_TEST(test_addr)
{
	const char	*cause = NULL;
	uint32_t	 cid = 9, port = 9;

	ck_assert_int_eq(vsock_parse_addr("1:49984", &cid, &port, &cause), 0);
	ck_assert_uint_eq(cid, 1);
	ck_assert_uint_eq(port, 49984);
	ck_assert_int_eq(vsock_parse_addr("3:1024", &cid, &port, &cause), 0);
	ck_assert_uint_eq(cid, 3);
	ck_assert_uint_eq(port, 1024);
	ck_assert_int_eq(vsock_parse_addr("host:5", &cid, &port, &cause), 0);
	ck_assert_uint_eq(cid, VSOCK_CID_HOST);
	ck_assert_int_eq(vsock_parse_addr("local:6", &cid, &port, &cause), 0);
	ck_assert_uint_eq(cid, VSOCK_CID_LOCAL);
	ck_assert_uint_eq(port, 6);
	ck_assert_int_eq(vsock_parse_addr("0:6", &cid, &port, &cause), 0);
	ck_assert_uint_eq(cid, 0);
	ck_assert_int_eq(vsock_parse_addr("4294967294:6", &cid, &port,
	    &cause), 0);
	ck_assert_uint_eq(cid, 4294967294u);

	cid = port = 9;
	/* No colon, VMADDR_CID_ANY, a bad port, names in other cases. */
	ck_assert_int_eq(vsock_parse_addr("49984", &cid, &port, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "CID:PORT"));
	ck_assert_int_eq(vsock_parse_addr("4294967295:6", &cid, &port,
	    &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "CID"));
	ck_assert_int_eq(vsock_parse_addr("2:0", &cid, &port, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "port"));
	ck_assert_int_eq(vsock_parse_addr("2:", &cid, &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_addr(":5", &cid, &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_addr("HOST:5", &cid, &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_addr("hostx:5", &cid, &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_addr("2:5:6", &cid, &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_addr("-2:5", &cid, &port, &cause), -1);
	ck_assert_int_eq(vsock_parse_addr("", &cid, &port, &cause), -1);
	ck_assert_uint_eq(cid, 9);
	ck_assert_uint_eq(port, 9);
}
END_TEST

START_TEST(test_name)
{
	char	buf[VSOCK_NAME_MAX];

	ck_assert_str_eq(vsock_name(buf, sizeof buf, 2, 49984),
	    "vsock:2:49984");
	ck_assert_str_eq(vsock_name(buf, sizeof buf, 4294967294u,
	    4294967294u), "vsock:4294967294:4294967294");
}
END_TEST

/* A unix socket pair is no vsock peer: neither the host nor local. */
START_TEST(test_peer_not_vsock)
{
	uint32_t	cid = 5, port = 5;
	int		sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	errno = 0;
	ck_assert_int_eq(vsock_peer(sv[0], &cid, &port), -1);
	ck_assert_int_eq(errno, EAFNOSUPPORT);
	ck_assert_uint_eq(cid, 5);
	ck_assert_int_eq(vsock_peer_local_or_host(sv[0]), 0);
	ck_assert_int_eq(vsock_peer_local_or_host(-1), 0);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* agentd.vsock=PORT is a --vsock-listen from the kernel command line. */
START_TEST(test_cmdline)
{
	struct config	 cfg;
	char		*argv[] = { "agentd", NULL };
	char		*argv2[] = { "agentd", "--vsock-listen", "5000",
			    "--vsock-listen", "5001", NULL };

	unsetenv("AGENTD_VSOCK_LISTEN");
	ck_assert_int_eq(config_load(&cfg, 1, argv,
	    "quiet agentd.vsock=1024 x"), 0);
	ck_assert_str_eq(cfg.vsock_listen[0], "1024");
	ck_assert_ptr_null(cfg.vsock_listen[1]);
	config_free(&cfg);

	/* None by default. */
	ck_assert_int_eq(config_load(&cfg, 1, argv, "quiet"), 0);
	ck_assert_ptr_null(cfg.vsock_listen[0]);
	config_free(&cfg);

	/* Flags replace the command line's, and repeat. */
	ck_assert_int_eq(config_load(&cfg, 5, argv2, "agentd.vsock=1024"), 0);
	ck_assert_str_eq(cfg.vsock_listen[0], "5000");
	ck_assert_str_eq(cfg.vsock_listen[1], "5001");
	ck_assert_ptr_null(cfg.vsock_listen[2]);
	config_free(&cfg);
}
END_TEST

/* agentd.envd-confine-files= and the flag: 0 (envd's) unless 1. */
START_TEST(test_envd_confine)
{
	struct config	 cfg;
	char		*argv[] = { "agentd", NULL };
	char		*argv2[] = { "agentd", "--envd-confine-files", "0", NULL };
	char		*argv3[] = { "agentd", "--envd-confine-files", "yes",
			    NULL };

	unsetenv("AGENTD_ENVD_CONFINE_FILES");
	ck_assert_int_eq(config_load(&cfg, 1, argv, "quiet"), 0);
	ck_assert_int_eq(cfg.envd_confine_files, 0);
	config_free(&cfg);
	ck_assert_int_eq(config_load(&cfg, 1, argv,
	    "agentd.envd-confine-files=1"), 0);
	ck_assert_int_eq(cfg.envd_confine_files, 1);
	config_free(&cfg);
	ck_assert_int_eq(config_load(&cfg, 3, argv2,
	    "agentd.envd-confine-files=1"), 0);
	ck_assert_int_eq(cfg.envd_confine_files, 0);
	config_free(&cfg);
	ck_assert_int_eq(config_load(&cfg, 3, argv3, ""), -1);
	config_free(&cfg);
}
END_TEST

/* The suite. */
static Suite *
vsock_suite(void)
{
	Suite	*s = suite_create("vsock");
	TCase	*tc = tcase_create("addresses");

	tcase_add_test(tc, test_port);
	tcase_add_test(tc, test_addr);
	tcase_add_test(tc, test_name);
	tcase_add_test(tc, test_peer_not_vsock);
	tcase_add_test(tc, test_cmdline);
	tcase_add_test(tc, test_envd_confine);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(vsock_suite()));
}
