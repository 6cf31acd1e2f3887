/*
 * test_util.c -- Check unit tests of agentd's leaves: util.c (sizes,
 * durations, constant-time comparison, timevals, the fatal hook, the fd
 * limit) and fileio.c (atomic writes, mkdir -p, errno as the API's errors).
 */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "../checkmain.h"

#include "fileio.h"
#include "log.h"
#include "proto.h"
#include "util.h"

static void	 hook_exit_42(void);
static char	*scratch(void);
static void	 rm_rf(const char *);
static size_t	 entries(const char *);
static char	*slurp(const char *);
static Suite	*util_suite(void);

/* A fatal hook for the tests: exit with a code the parent can see. */
static void
hook_exit_42(void)
{
	_exit(42);
}

/* A new empty folder under /tmp; the caller removes it (rm_rf). */
static char *
scratch(void)
{
	char	*d = strdup("/tmp/agentd-util-XXXXXX");

	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(mkdtemp(d));
	return (d);
}

/* Remove a folder of the tests and what is in it (two levels at most). */
static void
rm_rf(const char *dir)
{
	char		 cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Entries of a folder, without . and .. */
static size_t
entries(const char *dir)
{
	DIR		*d = opendir(dir);
	struct dirent	*e;
	size_t		 n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	}
	closedir(d);
	return (n);
}

/* A small file's bytes, NUL-terminated (malloc'd). */
static char *
slurp(const char *path)
{
	static char	 buf[4096];
	ssize_t		 n;
	int		 fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof buf - 1);
	ck_assert_int_ge(n, 0);
	buf[n] = '\0';
	close(fd);
	return (strdup(buf));
}

START_TEST(test_parse_size)
{
	uint64_t	v = 7;

	ck_assert_int_eq(parse_size("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(parse_size("1048576", &v), 0);
	ck_assert_uint_eq(v, 1048576);
	ck_assert_int_eq(parse_size("64KiB", &v), 0);
	ck_assert_uint_eq(v, 64 << 10);
	ck_assert_int_eq(parse_size("8M", &v), 0);
	ck_assert_uint_eq(v, 8u << 20);
	ck_assert_int_eq(parse_size("1g", &v), 0);
	ck_assert_uint_eq(v, 1u << 30);
	ck_assert_int_eq(parse_size("3kb", &v), 0);
	ck_assert_uint_eq(v, 3 << 10);
	ck_assert_int_eq(parse_size("5b", &v), 0);
	ck_assert_uint_eq(v, 5);
	ck_assert_int_eq(parse_size("18446744073709551615", &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	/* Garbage, signs, spaces, fractions, unknown units, overflow. */
	v = 7;
	ck_assert_int_eq(parse_size("", &v), -1);
	ck_assert_int_eq(parse_size("k", &v), -1);
	ck_assert_int_eq(parse_size("-1", &v), -1);
	ck_assert_int_eq(parse_size("+1", &v), -1);
	ck_assert_int_eq(parse_size(" 1", &v), -1);
	ck_assert_int_eq(parse_size("1 ", &v), -1);
	ck_assert_int_eq(parse_size("1.5M", &v), -1);
	ck_assert_int_eq(parse_size("1T", &v), -1);
	ck_assert_int_eq(parse_size("1KiBx", &v), -1);
	ck_assert_int_eq(parse_size("18446744073709551616", &v), -1);
	ck_assert_int_eq(parse_size("17179869184G", &v), -1);
	ck_assert_uint_eq(v, 7);	/* untouched on failure */
}
END_TEST

START_TEST(test_parse_duration)
{
	int64_t	ms = 7;

	ck_assert_int_eq(parse_duration("250", 1, &ms), 0);
	ck_assert_int_eq(ms, 250);
	ck_assert_int_eq(parse_duration("3", 1000, &ms), 0);	/* unit */
	ck_assert_int_eq(ms, 3000);
	ck_assert_int_eq(parse_duration("250ms", 1000, &ms), 0);
	ck_assert_int_eq(ms, 250);
	ck_assert_int_eq(parse_duration("5s", 1, &ms), 0);
	ck_assert_int_eq(ms, 5000);
	ck_assert_int_eq(parse_duration("2m", 1, &ms), 0);
	ck_assert_int_eq(ms, 120000);
	ck_assert_int_eq(parse_duration("1h", 1, &ms), 0);
	ck_assert_int_eq(ms, 3600000);
	ck_assert_int_eq(parse_duration("0s", 1, &ms), 0);
	ck_assert_int_eq(ms, 0);
	ms = 7;
	ck_assert_int_eq(parse_duration("", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("s", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("-5s", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("5S", 1, &ms), -1);	/* case */
	ck_assert_int_eq(parse_duration("5 s", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("1d", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("1.5s", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("9223372036854775807", 1, &ms), 0);
	ck_assert_int_eq(ms, INT64_MAX);
	ms = 7;
	ck_assert_int_eq(parse_duration("9223372036854775807s", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("9223372036854775808", 1, &ms), -1);
	ck_assert_int_eq(parse_duration("2562047788015216h", 1, &ms), -1);
	ck_assert_int_eq(ms, 7);
}
END_TEST

START_TEST(test_ct_equal)
{
	ck_assert_int_eq(ct_equal("secret", 6, "secret", 6), 1);
	ck_assert_int_eq(ct_equal("", 0, "", 0), 1);
	ck_assert_int_eq(ct_equal("secret", 6, "secreT", 6), 0);
	ck_assert_int_eq(ct_equal("secret", 6, "Secret", 6), 0);
	ck_assert_int_eq(ct_equal("secret", 6, "secre", 5), 0);
	ck_assert_int_eq(ct_equal("secre", 5, "secret", 6), 0);
	ck_assert_int_eq(ct_equal("", 0, "x", 1), 0);
	/* Bytes after a NUL count: it is not a C string comparison. */
	ck_assert_int_eq(ct_equal("a\0b", 3, "a\0c", 3), 0);
	ck_assert_int_eq(ct_equal("a\0b", 3, "a\0b", 3), 1);
}
END_TEST

START_TEST(test_cmdline_next)
{
	const char	*p = "  a=1 b=\"x y\"  c\t\"d e\"=2 \"unclosed z", *w;
	size_t		 len;

	ck_assert_ptr_nonnull(w = cmdline_next(&p, &len));
	ck_assert_int_eq((int)len, 3);
	ck_assert(strncmp(w, "a=1", len) == 0);
	ck_assert_ptr_nonnull(w = cmdline_next(&p, &len));
	ck_assert(len == 7 && strncmp(w, "b=\"x y\"", len) == 0);
	ck_assert_ptr_nonnull(w = cmdline_next(&p, &len));
	ck_assert(len == 1 && *w == 'c');
	ck_assert_ptr_nonnull(w = cmdline_next(&p, &len));
	ck_assert(len == 7 && strncmp(w, "\"d e\"=2", len) == 0);
	/* An unclosed quote runs to the end. */
	ck_assert_ptr_nonnull(w = cmdline_next(&p, &len));
	ck_assert(len == 11 && strncmp(w, "\"unclosed z", len) == 0);
	ck_assert_ptr_null(cmdline_next(&p, &len));
	ck_assert_ptr_null(cmdline_next(&p, &len));	/* stays at the end */
	p = " \t\n";
	ck_assert_ptr_null(cmdline_next(&p, &len));
	p = "";
	ck_assert_ptr_null(cmdline_next(&p, &len));
}
END_TEST

START_TEST(test_timeval_ms)
{
	struct timeval	tv;

	ck_assert_ptr_eq(timeval_ms(&tv, 0), &tv);
	ck_assert_int_eq(tv.tv_sec, 0);
	ck_assert_int_eq(tv.tv_usec, 0);
	timeval_ms(&tv, 999);
	ck_assert_int_eq(tv.tv_sec, 0);
	ck_assert_int_eq(tv.tv_usec, 999000);
	timeval_ms(&tv, 1000);
	ck_assert_int_eq(tv.tv_sec, 1);
	ck_assert_int_eq(tv.tv_usec, 0);
	timeval_ms(&tv, 86400001);
	ck_assert_int_eq(tv.tv_sec, 86400);
	ck_assert_int_eq(tv.tv_usec, 1000);
}
END_TEST

START_TEST(test_clocks)
{
	int64_t	a = clock_mono_ms(), b = clock_mono_ms();

	ck_assert_int_ge(b, a);
	/* After 2001 and before 2300, in ms. */
	ck_assert_int_gt(clock_wall_ms(), 1000000000000LL);
	ck_assert_int_lt(clock_wall_ms(), 10413792000000LL);
}
END_TEST

START_TEST(test_nofile_raise)
{
	struct rlimit	rl;
	int64_t		n;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	/* Lower the soft limit, then raise it to a number, then the hard. */
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max >= 128) {
		rl.rlim_cur = 64;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
		n = nofile_raise(100, 0);
		ck_assert_int_eq(n, 100);
		n = nofile_raise(50, 0);		/* never lowers */
		ck_assert_int_eq(n, 100);
		n = nofile_raise(0, 0);
		ck_assert_int_eq(n, (int64_t)rl.rlim_max);
		n = nofile_raise(rl.rlim_max + 1000, 0);	/* capped at hard */
		ck_assert_int_eq(n, (int64_t)rl.rlim_max);
	}
	/*
	 * PID 1's way: the hard limit goes up too, where the hard limit may
	 * be raised at all (CAP_SYS_RESOURCE: a container may lack it).
	 */
	rl.rlim_cur = rl.rlim_max = 4096;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_max = 4097;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_max = 4096;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
		ck_assert_int_eq(nofile_raise(8192, 0), 4096);
		ck_assert_int_eq(nofile_raise(8192, 1), 8192);
		ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
		ck_assert_int_eq((int64_t)rl.rlim_max, 8192);
	}
}
END_TEST

/* fd_read_full: through short reads to len, fewer at EOF. */
START_TEST(test_fd_read_full)
{
	char	buf[16];
	int	p[2];

	ck_assert_int_eq(pipe(p), 0);
	/* Two writes are two short reads of a pipe. */
	ck_assert_int_eq(write(p[1], "hello ", 6), 6);
	ck_assert_int_eq(write(p[1], "world", 5), 5);
	ck_assert_uint_eq(fd_read_full(p[0], buf, 8), 8);
	ck_assert_int_eq(memcmp(buf, "hello wo", 8), 0);
	close(p[1]);
	ck_assert_uint_eq(fd_read_full(p[0], buf, sizeof buf), 3);
	ck_assert_int_eq(memcmp(buf, "rld", 3), 0);
	ck_assert_uint_eq(fd_read_full(p[0], buf, sizeof buf), 0);
	close(p[0]);
	ck_assert_uint_eq(fd_read_full(p[0], buf, sizeof buf), 0);	/* EBADF */
}
END_TEST

START_TEST(test_fatal_hook)
{
	pid_t	pid;
	int	status;

	/* With a hook: it runs after the log line. */
	if ((pid = fork()) == 0) {
		log_set_level("error");
		fatal_set_hook(hook_exit_42);
		fatal("test %d", 1);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 42);
	/* Without one: exit 1. */
	if ((pid = fork()) == 0) {
		log_set_level("error");
		fatal("test %d", 2);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 1);
}
END_TEST

/*
 * A log line reaches stderr in one write: stderr is a SOCK_SEQPACKET
 * socket here, where each write is one message.  (musl's dprintf() wrote
 * a line over 80 bytes in pieces.)  A line that overflows LOG_LINE_MAX is
 * cut, and still ends with its newline.
 */
START_TEST(test_log_one_write)
{
	char	 msg[2 * LOG_LINE_MAX], big[LOG_LINE_MAX + 100];
	int	 sv[2], saved;
	ssize_t	 n;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	saved = dup(STDERR_FILENO);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(sv[0], STDERR_FILENO), STDERR_FILENO);
	log_set_level("info");
	log_write(LOG_LEVEL_INFO, "%s: session %s pid %d exited, and more "
	    "words to pass 80 bytes", "here", "s1", 42);
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	log_write(LOG_LEVEL_WARN, "%s", big);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(sv[0]);

	n = recv(sv[1], msg, sizeof msg, MSG_DONTWAIT);
	ck_assert_int_gt(n, 0);
	msg[n] = '\0';
	ck_assert_msg(strncmp(msg, "agentd: ", 8) == 0, "%s", msg);
	ck_assert_msg(strstr(msg, " info here: session s1 pid 42 exited, and more "
	    "words to pass 80 bytes\n") != NULL &&
	    msg[n - 1] == '\n' && strchr(msg, '\n') == msg + n - 1, "%s", msg);
	n = recv(sv[1], msg, sizeof msg, MSG_DONTWAIT);
	ck_assert_int_eq(n, 8 + LOG_LINE_MAX - 1 + 1);
	ck_assert_int_eq(msg[n - 1], '\n');
	ck_assert_int_eq(msg[n - 2], 'x');
	/* No third piece: the writer's end is closed. */
	ck_assert_int_eq(recv(sv[1], msg, sizeof msg, MSG_DONTWAIT), 0);
	close(sv[1]);
}
END_TEST

/*
 * proc_stat() finds the fields past a comm that holds ") " itself, and
 * proc_stat_skip() walks them; a pid that is gone is NULL.
 */
START_TEST(test_proc_stat)
{
	char		 buf[512], *end;
	const char	*p;
	pid_t		 pid;
	int		 sv[2], status;
	char		 c;

	ck_assert_int_eq(pipe(sv), 0);
	if ((pid = fork()) == 0) {
		prctl(PR_SET_NAME, "a) b (c) ", 0, 0, 0);
		if (write(sv[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(read(sv[0], &c, 1), 1);
	p = proc_stat(pid, buf, sizeof buf);
	ck_assert_ptr_nonnull(p);
	ck_assert_msg(strchr("RS", *p) != NULL, "state %c", *p);
	p = proc_stat_skip(p, 1);		/* ppid, field 4 */
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(strtol(p, &end, 10), getpid());
	ck_assert_ptr_nonnull(proc_stat_skip(p, 22 - 4));
	ck_assert_ptr_null(proc_stat_skip(p, 200));
	ck_assert_ptr_null(proc_stat_skip(NULL, 1));
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_ptr_null(proc_stat(pid, buf, sizeof buf));
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_fileio_write_commit)
{
	struct fileio_tmp	 t;
	struct proto_err	 err;
	struct stat		 st;
	char			*dir = scratch(), path[PATH_MAX], *got;

	snprintf(path, sizeof path, "%s/a/b/f.txt", dir);
	/* Without mkdir the folder must exist: 404, nothing left. */
	ck_assert_int_eq(fileio_tmp_open(path, 0, geteuid(), &t, &err), -1);
	ck_assert_int_eq(err.status, 404);
	ck_assert_str_eq(err.code, "not_found");
	ck_assert_uint_eq(entries(dir), 0);
	/* With it: folders made, a hidden temporary file until the commit. */
	ck_assert_int_eq(fileio_tmp_open(path, 1, geteuid(), &t, &err), 0);
	ck_assert_int_eq(fileio_tmp_write(&t, "hello ", 6, &err), 0);
	ck_assert_int_eq(fileio_tmp_write(&t, "world\n", 6, &err), 0);
	ck_assert_int_eq(stat(path, &st), -1);
	snprintf(path, sizeof path, "%s/a/b", dir);
	ck_assert_uint_eq(entries(path), 1);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, FILEIO_DIR_MODE);
	snprintf(path, sizeof path, "%s/a/b/f.txt", dir);
	ck_assert_int_eq(fileio_tmp_commit(&t, 0640, &err), 0);
	got = slurp(path);
	ck_assert_str_eq(got, "hello world\n");
	free(got);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0640);	/* not the umask's */
	snprintf(path, sizeof path, "%s/a/b", dir);
	ck_assert_uint_eq(entries(path), 1);		/* no temporary left */
	/* Over an existing file: replaced whole. */
	snprintf(path, sizeof path, "%s/a/b/f.txt", dir);
	ck_assert_int_eq(fileio_tmp_open(path, 0, geteuid(), &t, &err), 0);
	ck_assert_int_eq(fileio_tmp_write(&t, "2", 1, &err), 0);
	ck_assert_int_eq(fileio_tmp_commit(&t, FILEIO_MODE_DEFAULT, &err), 0);
	got = slurp(path);
	ck_assert_str_eq(got, "2");
	free(got);
	rm_rf(dir);
	free(dir);
}
END_TEST

START_TEST(test_fileio_abort_and_refusals)
{
	struct fileio_tmp	 t;
	struct proto_err	 err;
	char			*dir = scratch(), path[PATH_MAX];

	snprintf(path, sizeof path, "%s/f", dir);
	ck_assert_int_eq(fileio_tmp_open(path, 0, geteuid(), &t, &err), 0);
	ck_assert_int_eq(fileio_tmp_write(&t, "x", 1, &err), 0);
	ck_assert_uint_eq(entries(dir), 1);
	fileio_tmp_abort(&t);
	ck_assert_uint_eq(entries(dir), 0);	/* the temporary is gone */
	/* A folder is not a file's target; nor a path ending in '/'. */
	ck_assert_int_eq(fileio_tmp_open(dir, 0, geteuid(), &t, &err), -1);
	ck_assert_int_eq(err.status, 409);
	ck_assert_str_eq(err.code, "is_a_directory");
	snprintf(path, sizeof path, "%s/g/", dir);
	ck_assert_int_eq(fileio_tmp_open(path, 1, geteuid(), &t, &err), -1);
	ck_assert_int_eq(err.status / 100, 4);
	ck_assert_uint_eq(entries(dir), 0);
	rm_rf(dir);
	free(dir);
}
END_TEST

START_TEST(test_fileio_errors)
{
	static const struct {
		int		 e;
		int		 status;
		const char	*code;
	} map[] = {
		{ ENOENT, 404, "not_found" }, { ENOTDIR, 404, "not_found" },
		{ EACCES, 403, "permission_denied" },
		{ EPERM, 403, "permission_denied" },
		{ EROFS, 403, "permission_denied" },
		{ EISDIR, 409, "is_a_directory" },
		{ ENAMETOOLONG, 400, "invalid_request" },
		{ ELOOP, 400, "invalid_request" },
		{ ENOSPC, 507, "insufficient_storage" },
		{ EDQUOT, 507, "insufficient_storage" },
		{ EFBIG, 507, "insufficient_storage" },
		{ EIO, 500, "internal_error" },
	};
	struct proto_err	err;
	char			buf[16];
	size_t			i;

	for (i = 0; i < sizeof map / sizeof map[0]; i++) {
		memset(&err, 0, sizeof err);
		ck_assert_int_eq(fileio_fail(&err, map[i].e, "open", "/x/y"),
		    -1);
		ck_assert_int_eq(err.status, map[i].status);
		ck_assert_str_eq(err.code, map[i].code);
		ck_assert_ptr_nonnull(strstr(err.message, "/x/y"));
	}
	ck_assert_str_eq(fileio_errno_name(ENOENT, buf), "ENOENT");
	ck_assert_str_eq(fileio_errno_name(EACCES, buf), "EACCES");
	ck_assert_str_eq(fileio_errno_name(4095, buf), "E4095");
}
END_TEST

static Suite *
util_suite(void)
{
	Suite	*s = suite_create("agentd_util");
	TCase	*tc = tcase_create("util");

	tcase_add_test(tc, test_parse_size);
	tcase_add_test(tc, test_parse_duration);
	tcase_add_test(tc, test_ct_equal);
	tcase_add_test(tc, test_cmdline_next);
	tcase_add_test(tc, test_timeval_ms);
	tcase_add_test(tc, test_clocks);
	tcase_add_test(tc, test_nofile_raise);
	tcase_add_test(tc, test_fatal_hook);
	tcase_add_test(tc, test_fd_read_full);
	tcase_add_test(tc, test_log_one_write);
	tcase_add_test(tc, test_proc_stat);
	suite_add_tcase(s, tc);
	tc = tcase_create("fileio");
	tcase_add_test(tc, test_fileio_write_commit);
	tcase_add_test(tc, test_fileio_abort_and_refusals);
	tcase_add_test(tc, test_fileio_errors);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	umask(022);
	return (check_main(util_suite()));
}
