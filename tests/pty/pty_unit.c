/*
 * pty_unit.c -- Check tests for pty/: spawning on a PTY and on pipes, exec
 * errors, the child's signal and fd state, users, window size, groups.
 *
 * Timing is never guessed: every read goes until EOF/EIO (or a marker) with
 * poll and a generous deadline, every child is reaped with a blocking
 * waitpid.  Built with PTY_TEST_FDS_ONLY against a pty.c compiled with a
 * PTY_CLOSE_FALLBACK, it runs just the fd tests on that fallback.
 */
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <check.h>
#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "pty.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal	424
#endif

#ifndef PTY_HELPER
#error "PTY_HELPER must name the helper binary"
#endif

#define T_TIMEOUT_MS	20000	/* ms, deadline for any one read */
#define T_CASE_TIMEOUT	120	/* seconds, Check's per-test limit */
#define T_BUF		65536	/* bytes, output buffer of a test */
#ifdef PTY_TEST_FDS_ONLY
#define T_MANY		20	/* spawns in the leak test (slow fallbacks) */
#else
#define T_MANY		100	/* spawns in the leak test */
#endif
#define T_HIGH_FD	4000	/* an fd number far above the usual ones */
#define T_COW_BYTES	(32 * 1024 * 1024)	/* bytes the parent dirties */

/* How a read ended. */
enum t_end {
	T_EOF,		/* read returned 0 */
	T_EIO,		/* read failed with EIO (a PTY master) */
	T_TIMEOUT,	/* the deadline passed */
	T_ERROR,	/* another error */
	T_FOUND,	/* the marker was seen */
};

static char	*t_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C",
		    NULL };

static void	 t_spec(struct pty_spec *, char *const *, int);
static int	 t_read(int, char *, size_t, size_t *, const char *);
static void	 t_read_pipes(struct pty_proc *, char *, char *);
static void	 t_read_tty(struct pty_proc *, char *);
static void	 t_crlf(char *);
static int	 t_wait(pid_t);
static int	 t_count_fds(void);
static void	 t_no_children(void);
static void	 t_run(struct pty_spec *, char *, char *, int *);
static void	 t_tmpdir(char *, size_t) __attribute__((unused));
static void	 t_write_file(const char *, const char *, mode_t)
		     __attribute__((unused));

/* A spec for argv with the test environment: 24x80 or pipes. */
static void
t_spec(struct pty_spec *s, char *const *argv, int tty)
{
	memset(s, 0, sizeof *s);
	s->argv = argv;
	s->envp = t_env;
	s->tty = tty;
	s->rows = 24;
	s->cols = 80;
	s->cgroup = -1;
}

/*
 * Read fd into buf (NUL-terminated) until EOF, EIO, the deadline, or (when
 * marker is given) until buf contains marker.  *len carries the length.
 */
static int
t_read(int fd, char *buf, size_t cap, size_t *len, const char *marker)
{
	struct pollfd	pfd = { .fd = fd, .events = POLLIN };
	ssize_t		n;
	int		r;

	for (;;) {
		buf[*len] = '\0';
		if (marker != NULL && strstr(buf, marker) != NULL)
			return T_FOUND;
		r = poll(&pfd, 1, T_TIMEOUT_MS);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == 0)
			return T_TIMEOUT;
		if (r == -1)
			return T_ERROR;
		n = read(fd, buf + *len, cap - 1 - *len);
		if (n == -1 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n == -1)
			return errno == EIO ? T_EIO : T_ERROR;
		if (n == 0)
			return T_EOF;
		*len += (size_t)n;
		ck_assert_msg(*len < cap - 1, "output too long");
	}
}

/* Read a pipes child's stdout and stderr, both until EOF. */
static void
t_read_pipes(struct pty_proc *p, char *out, char *err)
{
	size_t	olen = 0, elen = 0;
	int	odone = 0, edone = 0, r;

	/* One stream at a time would block on a full other pipe: poll both. */
	while (!odone || !edone) {
		struct pollfd	pfd[2] = {
			{ .fd = odone ? -1 : p->out, .events = POLLIN },
			{ .fd = edone ? -1 : p->err, .events = POLLIN },
		};

		r = poll(pfd, 2, T_TIMEOUT_MS);
		if (r == -1 && errno == EINTR)
			continue;
		ck_assert_int_gt(r, 0);
		if (!odone && pfd[0].revents != 0) {
			ssize_t n = read(p->out, out + olen, T_BUF - 1 - olen);

			if (n > 0)
				olen += (size_t)n;
			else if (n == 0)
				odone = 1;
			else
				ck_assert_int_eq(errno, EAGAIN);
		}
		if (!edone && pfd[1].revents != 0) {
			ssize_t n = read(p->err, err + elen, T_BUF - 1 - elen);

			if (n > 0)
				elen += (size_t)n;
			else if (n == 0)
				edone = 1;
			else
				ck_assert_int_eq(errno, EAGAIN);
		}
	}
	out[olen] = '\0';
	err[elen] = '\0';
}

/* Read a PTY master until EIO (the last slave closed), CRLF made LF. */
static void
t_read_tty(struct pty_proc *p, char *out)
{
	size_t	len = 0;
	int	end;

	end = t_read(p->master, out, T_BUF, &len, NULL);
	ck_assert_msg(end == T_EIO, "master ended with %d, not EIO", end);
	t_crlf(out);
}

/* Turn every CRLF into LF in place (the tty's ONLCR). */
static void
t_crlf(char *s)
{
	char	*w = s;

	for (; *s != '\0'; s++) {
		if (s[0] == '\r' && s[1] == '\n')
			continue;
		*w++ = *s;
	}
	*w = '\0';
}

/* Reap pid, blocking; returns the wait status. */
static int
t_wait(pid_t pid)
{
	int	status;
	pid_t	r;

	do
		r = waitpid(pid, &status, 0);
	while (r == -1 && errno == EINTR);
	ck_assert_int_eq(r, pid);
	return status;
}

/* Count the open fds of this process. */
static int
t_count_fds(void)
{
	DIR		*d = opendir("/proc/self/fd");
	struct dirent	*de;
	int		 n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != '.')
			n++;
	}
	closedir(d);
	return n;
}

/* Assert that this process has no child, zombie or not. */
static void
t_no_children(void)
{
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
}

/* Spawn spec, collect its output (stderr too for pipes) and status. */
static void
t_run(struct pty_spec *s, char *out, char *err, int *status)
{
	struct pty_proc	p;
	char		cause[PTY_CAUSE_MAX] = "";
	int		r;

	r = pty_spawn(s, &p, cause, sizeof cause);
	ck_assert_msg(r == 0, "spawn: %d %s", r, cause);
	if (s->tty)
		t_read_tty(&p, out);
	else
		t_read_pipes(&p, out, err);
	*status = t_wait(p.pid);
	pty_close(&p);
}

/* Make a private temporary directory. */
static void
t_tmpdir(char *path, size_t len)
{
	snprintf(path, len, "/tmp/pty-unit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(path));
}

/* Write a small file with a mode. */
static void
t_write_file(const char *path, const char *text, mode_t mode)
{
	int	fd;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(chmod(path, mode), 0);
}

/* Open fds without O_CLOEXEC (low, 100, very high): none reach the child. */
START_TEST(test_fds_closed)
{
	char		*argv[] = { PTY_HELPER, "fds", NULL };
	char		 out[T_BUF], err[T_BUF];
	struct pty_spec	 s;
	int		 fd, status, before;

	fd = open("/dev/null", O_RDONLY);
	ck_assert_int_ge(fd, 3);
	ck_assert_int_eq(dup2(fd, 100), 100);
	ck_assert_int_eq(dup2(fd, T_HIGH_FD), T_HIGH_FD);
	before = t_count_fds();

	t_spec(&s, argv, _i);
	t_run(&s, out, err, &status);
	ck_assert_str_eq(out, "0 1 2\n");
	ck_assert_int_eq(status, 0);
	ck_assert_int_eq(t_count_fds(), before);
	close(fd);
	close(100);
	close(T_HIGH_FD);
}
END_TEST

/*
 * With 0-2 closed in the parent, new fds land on 0-2: the child still gets
 * the right ones on 0-2 and nothing else.
 */
START_TEST(test_fds_low_closed)
{
	char		*fds[] = { PTY_HELPER, "fds", NULL };
	char		*cat[] = { "sh", "-c", "cat; echo err >&2", NULL };
	char		*nope[] = { "pty-unit-nope", NULL };
	char		 out[T_BUF], err[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 save[3], i, status, before;

	for (i = 0; i < 3; i++)
		save[i] = fcntl(i, F_DUPFD_CLOEXEC, 10);
	for (i = 0; i < 3; i++)
		close(i);
	before = t_count_fds();

	t_spec(&s, fds, _i);
	t_run(&s, out, err, &status);
	ck_assert_str_eq(out, "0 1 2\n");
	ck_assert_int_eq(status, 0);

	/* The report pipe lands on 0-2 too, and must survive the dup2s. */
	t_spec(&s, nope, _i);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -ENOENT);
	ck_assert_str_eq(cause, "exec 'pty-unit-nope': No such file or directory");
	t_no_children();

	if (!_i) {
		t_spec(&s, cat, 0);
		ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
		ck_assert_int_eq(write(p.in, "in\n", 3), 3);
		close(p.in);
		p.in = -1;
		t_read_pipes(&p, out, err);
		ck_assert_str_eq(out, "in\n");
		ck_assert_str_eq(err, "err\n");
		ck_assert_int_eq(t_wait(p.pid), 0);
		pty_close(&p);
	}
	ck_assert_int_eq(t_count_fds(), before);

	for (i = 0; i < 3; i++)
		ck_assert_int_eq(dup2(save[i], i), i);
	for (i = 0; i < 3; i++)
		close(save[i]);
}
END_TEST

/* Many spawns in both modes leave no fd and no child behind. */
START_TEST(test_many_no_leak)
{
	char		*argv[] = { "true", NULL };
	char		 out[T_BUF], err[T_BUF];
	struct pty_spec	 s;
	int		 i, status, before = t_count_fds();

	for (i = 0; i < T_MANY; i++) {
		t_spec(&s, argv, i % 2);
		t_run(&s, out, err, &status);
		ck_assert_int_eq(status, 0);
	}
	ck_assert_int_eq(t_count_fds(), before);
	t_no_children();
}
END_TEST

#ifndef PTY_TEST_FDS_ONLY

static void	 t_wait_killed(pid_t, int);

/* Reap pid, blocking, and check that signal sig killed it. */
static void
t_wait_killed(pid_t pid, int sig)
{
	int	status = t_wait(pid);

	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), sig);
}

/* A PTY child: its tty, its window size, its exit code, EIO at the end. */
START_TEST(test_tty_basic)
{
	char		*argv[] = { "sh", "-c", "tty; stty size; exit 3", NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 n = -1, rows = 0, cols = 0, status;

	t_spec(&s, argv, 1);
	s.rows = 33;
	s.cols = 101;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_gt(p.pid, 0);
	ck_assert_int_ge(p.master, 0);
	ck_assert_int_eq(p.in, -1);
	ck_assert_int_eq(p.out, -1);
	ck_assert_int_eq(p.err, -1);
	ck_assert(fcntl(p.master, F_GETFL) & O_NONBLOCK);
	ck_assert(fcntl(p.master, F_GETFD) & FD_CLOEXEC);

	t_read_tty(&p, out);
	ck_assert_msg(sscanf(out, "/dev/pts/%d\n%d %d\n", &n, &rows, &cols) ==
	    3, "output: %s", out);
	ck_assert_int_ge(n, 0);
	ck_assert_int_eq(rows, 33);
	ck_assert_int_eq(cols, 101);
	status = t_wait(p.pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 3);
	pty_close(&p);
	ck_assert_int_eq(p.master, -1);
}
END_TEST

/* The PTY child leads its session and group, and the PTY is its ctty. */
START_TEST(test_tty_session)
{
	char		*argv[] = { PTY_HELPER, "ids", NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX], tty[64];
	struct pty_spec	 s;
	struct pty_proc	 p;
	long		 pid, sid, pgid, tpgid;
	int		 ctty;

	t_spec(&s, argv, 1);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	t_read_tty(&p, out);
	ck_assert_msg(sscanf(out,
	    "pid=%ld sid=%ld pgid=%ld tpgid=%ld ctty=%d tty=%63s",
	    &pid, &sid, &pgid, &tpgid, &ctty, tty) == 6, "output: %s", out);
	ck_assert_int_eq(pid, p.pid);
	ck_assert_int_eq(sid, p.pid);
	ck_assert_int_eq(pgid, p.pid);
	ck_assert_int_eq(tpgid, p.pid);
	ck_assert_int_eq(ctty, 1);
	ck_assert_int_eq(strncmp(tty, "/dev/pts/", 9), 0);
	ck_assert_int_eq(t_wait(p.pid), 0);
	pty_close(&p);
}
END_TEST

/* A pipes child leads a new session and group too, with no ctty. */
START_TEST(test_pipes_session)
{
	char		*argv[] = { PTY_HELPER, "ids", NULL };
	char		 out[T_BUF], err[T_BUF];
	struct pty_spec	 s;
	long		 pid, sid, pgid, tpgid;
	int		 ctty, status;

	t_spec(&s, argv, 0);
	t_run(&s, out, err, &status);
	ck_assert_msg(sscanf(out, "pid=%ld sid=%ld pgid=%ld tpgid=%ld ctty=%d",
	    &pid, &sid, &pgid, &tpgid, &ctty) == 5, "output: %s", out);
	ck_assert_int_eq(sid, pid);
	ck_assert_int_eq(pgid, pid);
	ck_assert_int_eq(ctty, 0);
	ck_assert_int_eq(status, 0);
}
END_TEST

/*
 * spec->watch: the child's pid and a pidfd of it, the caller's (x86-64,
 * clone3): SIGKILL through it reaches the child; a failed spawn's pidfd is
 * the caller's to close too.
 */
START_TEST(test_watch)
{
	char			*argv[] = { "sleep", "30", NULL };
	char			*nope[] = { "pty-unit-nope", NULL };
	char			 cause[PTY_CAUSE_MAX];
	struct pty_spec		 s;
	struct pty_proc		 p;
	struct pty_watch	 w;
	int			 before = t_count_fds();

	memset(&w, 0, sizeof w);
	t_spec(&s, argv, 0);
	s.watch = &w;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
#if defined(__x86_64__)
	ck_assert_int_eq(w.pid, p.pid);
	ck_assert_int_eq(syscall(SYS_pidfd_send_signal, (int)w.pidfd, SIGKILL,
	    NULL, 0U), 0);
	t_wait_killed(p.pid, SIGKILL);
	close(w.pidfd);
#else
	kill(p.pid, SIGKILL);
	t_wait_killed(p.pid, SIGKILL);
#endif
	pty_close(&p);
	ck_assert_int_eq(t_count_fds(), before);

	memset(&w, 0, sizeof w);
	t_spec(&s, nope, 0);
	s.watch = &w;
	ck_assert_int_ne(pty_spawn(&s, &p, cause, sizeof cause), 0);
	if (w.pid > 0)
		close(w.pidfd);
	ck_assert_int_eq(t_count_fds(), before);
	t_no_children();
}
END_TEST

/* The master gives EIO as soon as the child is gone: no slave leaked. */
START_TEST(test_tty_eio)
{
	char		*argv[] = { "true", NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	size_t		 len = 0;
	int		 before = t_count_fds();

	t_spec(&s, argv, 1);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(t_count_fds(), before + 1);
	ck_assert_int_eq(t_wait(p.pid), 0);
	/* Reaped: whatever still holds the slave open, it is not the child. */
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, NULL), T_EIO);
	pty_close(&p);
	ck_assert_int_eq(t_count_fds(), before);
}
END_TEST

/* Pipes: stdout and stderr apart, fds non-blocking and close-on-exec. */
START_TEST(test_pipes_separate)
{
	char		*argv[] = { "sh", "-c",
			    "echo out; echo err >&2; echo out2; exit 42", NULL };
	char		 out[T_BUF], err[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 status;

	t_spec(&s, argv, 0);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(p.master, -1);
	ck_assert(fcntl(p.in, F_GETFL) & O_NONBLOCK);
	ck_assert(fcntl(p.out, F_GETFL) & O_NONBLOCK);
	ck_assert(fcntl(p.err, F_GETFL) & O_NONBLOCK);
	ck_assert(fcntl(p.in, F_GETFD) & FD_CLOEXEC);
	ck_assert(fcntl(p.out, F_GETFD) & FD_CLOEXEC);
	ck_assert(fcntl(p.err, F_GETFD) & FD_CLOEXEC);
	t_read_pipes(&p, out, err);
	ck_assert_str_eq(out, "out\nout2\n");
	ck_assert_str_eq(err, "err\n");
	status = t_wait(p.pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 42);
	pty_close(&p);
	ck_assert_int_eq(p.in, -1);
	ck_assert_int_eq(p.out, -1);
	ck_assert_int_eq(p.err, -1);
}
END_TEST

/* Pipes: what is written to in comes out; the child's stdin blocks. */
START_TEST(test_pipes_stdin)
{
	char		*argv[] = { "sh", "-c",
			    "cat; echo \"$(cat /proc/self/fdinfo/0 | grep flags)\" >&2",
			    NULL };
	char		 out[T_BUF], err[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	unsigned int	 flags = ~0U;

	t_spec(&s, argv, 0);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(write(p.in, "hello\n", 6), 6);
	close(p.in);
	p.in = -1;
	t_read_pipes(&p, out, err);
	ck_assert_str_eq(out, "hello\n");
	/* flags in octal: O_NONBLOCK (04000) must not be set for the child. */
	ck_assert_msg(sscanf(err, "flags: %o", &flags) == 1, "err: %s", err);
	ck_assert_uint_eq(flags & O_NONBLOCK, 0);
	ck_assert_int_eq(t_wait(p.pid), 0);
	pty_close(&p);
}
END_TEST

/* Pipes with stdin_null: no in fd, the child reads /dev/null. */
START_TEST(test_pipes_stdin_null)
{
	char		*argv[] = { "sh", "-c",
			    "readlink /proc/self/fd/0; cat; echo done", NULL };
	char		 out[T_BUF], err[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;

	t_spec(&s, argv, 0);
	s.stdin_null = 1;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(p.in, -1);
	t_read_pipes(&p, out, err);
	ck_assert_str_eq(out, "/dev/null\ndone\n");
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(t_wait(p.pid), 0);
	pty_close(&p);
}
END_TEST

/* A child killed by a signal reports it through waitpid. */
START_TEST(test_exit_signal)
{
	char		*argv[] = { "sh", "-c", "kill -TERM $$", NULL };
	char		 out[T_BUF], err[T_BUF];
	struct pty_spec	 s;
	int		 status;

	t_spec(&s, argv, _i);
	t_run(&s, out, err, &status);
	ck_assert(WIFSIGNALED(status));
	ck_assert_int_eq(WTERMSIG(status), SIGTERM);
}
END_TEST

/* A command that is not found: -ENOENT, a cause, no fd, no child. */
START_TEST(test_exec_enoent)
{
	char		*argv[] = { "pty-unit-no-such-command", NULL };
	char		 cause[PTY_CAUSE_MAX] = "";
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 before = t_count_fds();

	t_spec(&s, argv, _i);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -ENOENT);
	ck_assert_str_eq(cause,
	    "exec 'pty-unit-no-such-command': No such file or directory");
	ck_assert_int_eq(p.pid, -1);
	ck_assert_int_eq(p.master, -1);
	ck_assert_int_eq(p.in, -1);
	ck_assert_int_eq(p.out, -1);
	ck_assert_int_eq(p.err, -1);
	ck_assert_int_eq(t_count_fds(), before);
	t_no_children();

	/* The same through an absolute path, and without a cause buffer. */
	argv[0] = "/nonexistent/cmd";
	ck_assert_int_eq(pty_spawn(&s, &p, NULL, 0), -ENOENT);
	ck_assert_int_eq(t_count_fds(), before);
	t_no_children();
}
END_TEST

/* A file in PATH without x bits: -EACCES. */
START_TEST(test_exec_eacces)
{
	char		*argv[] = { "pty-unit-noexec", NULL };
	char		 dir[64], file[128], path[160], cause[PTY_CAUSE_MAX];
	char		*env[] = { path, NULL };
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 before = t_count_fds();

	t_tmpdir(dir, sizeof dir);
	snprintf(file, sizeof file, "%s/pty-unit-noexec", dir);
	snprintf(path, sizeof path, "PATH=%s", dir);
	t_write_file(file, "#!/bin/sh\necho hi\n", 0644);

	t_spec(&s, argv, _i);
	s.envp = env;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -EACCES);
	ck_assert_str_eq(cause, "exec 'pty-unit-noexec': Permission denied");
	ck_assert_int_eq(t_count_fds(), before);
	t_no_children();
	unlink(file);
	rmdir(dir);
}
END_TEST

/* A cwd that does not exist: -ENOENT; one that does: the child is there. */
START_TEST(test_cwd)
{
	char		*pwd[] = { "sh", "-c", "pwd", NULL };
	char		 out[T_BUF], err[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 status, before = t_count_fds();

	t_spec(&s, pwd, _i);
	s.cwd = "/nonexistent-dir";
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -ENOENT);
	ck_assert_str_eq(cause,
	    "cwd '/nonexistent-dir': No such file or directory");
	ck_assert_int_eq(t_count_fds(), before);
	t_no_children();

	s.cwd = "/etc/passwd";
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -ENOTDIR);
	ck_assert_str_eq(cause, "cwd '/etc/passwd': Not a directory");

	s.cwd = "/usr/share";
	t_run(&s, out, err, &status);
	ck_assert_str_eq(out, "/usr/share\n");
	ck_assert_int_eq(status, 0);
}
END_TEST

/* Bad specs fail before anything is opened. */
START_TEST(test_invalid_spec)
{
	char		*argv[] = { "true", NULL };
	char		 cause[PTY_CAUSE_MAX] = "";
	struct pty_spec	 s;
	struct pty_proc	 p;

	t_spec(&s, argv, 1);
	s.rows = 0;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -EINVAL);
	ck_assert_str_eq(cause, "window size 0x80 out of range");
	t_spec(&s, NULL, 0);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -EINVAL);
	ck_assert_str_eq(cause, "no command");
	t_spec(&s, argv, 0);
	s.envp = NULL;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -EINVAL);
	t_no_children();
}
END_TEST

/*
 * The child starts with an empty mask and default dispositions, even when
 * the parent blocks and ignores signals; the parent's mask is kept.
 */
/*
 * Ignore a signal the libc keeps for itself, with the raw system call, as a
 * parent of agentd that is not a glibc program may have done.
 */
static void
t_ignore_libc_signal(int sig)
{
	struct {
		void		(*handler)(int);
		unsigned long	  flags;
		void		(*restorer)(void);
		uint64_t	  mask;
	} ksa;

	memset(&ksa, 0, sizeof ksa);
	ksa.handler = SIG_IGN;
	ck_assert_int_eq(syscall(SYS_rt_sigaction, sig, &ksa, NULL,
	    sizeof ksa.mask), 0);
}

/* A child on a PTY (tty) or pipes reports an empty mask and no ignored signal. */
static void
t_signals_clean(int tty)
{
	char		*argv[] = { PTY_HELPER, "sig", NULL };
	char		 out[T_BUF], err[T_BUF];
	struct pty_spec	 s;
	int		 status;

	t_spec(&s, argv, tty);
	t_run(&s, out, err, &status);
	t_crlf(out);
	ck_assert_str_eq(out,
	    "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
	ck_assert_int_eq(status, 0);
}

START_TEST(test_signals_clean)
{
	sigset_t	 block, before, after;
	int		 sig;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGRTMIN + 3, SIG_IGN);
	t_ignore_libc_signal(32);	/* glibc's own: sigaction() refuses it */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGCHLD);
	sigaddset(&block, SIGRTMAX);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &block, NULL), 0);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, NULL, &before), 0);

	t_signals_clean(_i);

	ck_assert_int_eq(sigprocmask(SIG_BLOCK, NULL, &after), 0);
	for (sig = 1; sig < SIGRTMAX; sig++)
		ck_assert_int_eq(sigismember(&before, sig),
		    sigismember(&after, sig));
	ck_assert(signal(SIGPIPE, SIG_IGN) == SIG_IGN);
}
END_TEST

/* After a snapshot, children reset only what was not SIG_DFL: still clean. */
START_TEST(test_signals_clean_after_snapshot)
{
	signal(SIGPIPE, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGRTMIN + 5, SIG_IGN);
	t_ignore_libc_signal(33);
	pty_signals_snapshot();
	t_signals_clean(_i);
	ck_assert(signal(SIGQUIT, SIG_IGN) == SIG_IGN);
}
END_TEST

/* Resize: stty sees it and the foreground group gets SIGWINCH. */
START_TEST(test_resize_winch)
{
	char		*argv[] = { PTY_HELPER, "winch", NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	size_t		 len = 0;

	t_spec(&s, argv, 1);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, "ready 24 80"),
	    T_FOUND);
	ck_assert_int_eq(pty_resize(p.master, 50, 132), 0);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len,
	    "winch 50 132"), T_FOUND);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, NULL), T_EIO);
	ck_assert_int_eq(t_wait(p.pid), 0);
	ck_assert_int_eq(pty_resize(p.master, 0, 10), -EINVAL);
	pty_close(&p);
	ck_assert_int_eq(pty_resize(-1, 10, 10), -EBADF);
}
END_TEST

/* VEOF: 4 by default, what stty set otherwise, and it ends cat's input. */
START_TEST(test_veof)
{
	char		*argv[] = { "sh", "-c",
			    "echo ready; read x; stty eof ^E && echo set && exec cat",
			    NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX], c;
	struct pty_spec	 s;
	struct pty_proc	 p;
	size_t		 len = 0;

	t_spec(&s, argv, 1);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, "ready"),
	    T_FOUND);
	ck_assert_int_eq(pty_veof(p.master), 4);
	ck_assert_int_eq(write(p.master, "go\n", 3), 3);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, "set\r\n"),
	    T_FOUND);
	ck_assert_int_eq(pty_veof(p.master), 5);
	c = (char)pty_veof(p.master);
	ck_assert_int_eq(write(p.master, &c, 1), 1);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, NULL), T_EIO);
	ck_assert_int_eq(t_wait(p.pid), 0);
	pty_close(&p);
	ck_assert_int_eq(pty_veof(-1), 4);
}
END_TEST

/* IUTF8 follows the child's locale: LC_ALL, else LC_CTYPE, else LANG. */
START_TEST(test_iutf8)
{
	static char *const envs[][4] = {
		{ "LANG=C.UTF-8", NULL },
		{ "LANG=C", NULL },
		{ "LANG=C", "LC_ALL=en_US.utf8", NULL },
		{ "LANG=C.UTF-8", "LC_CTYPE=POSIX", NULL },
		{ "LANG=C.UTF-8", "LC_ALL=", "LC_CTYPE=C", NULL },
		{ NULL },
	};
	static const int	 want[] = { 1, 0, 1, 0, 0, 0 };
	char			*argv[] = { "sh", "-c", "read x", NULL };
	char			 cause[PTY_CAUSE_MAX];
	struct pty_spec		 s;
	struct pty_proc		 p;
	struct termios		 t;
	size_t			 i;

	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		t_spec(&s, argv, 1);
		s.envp = envs[i];
		ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
		ck_assert_int_eq(tcgetattr(p.master, &t), 0);
		ck_assert_msg(!!(t.c_iflag & IUTF8) == want[i],
		    "environment %zu: IUTF8 %s", i,
		    want[i] ? "missing" : "set");
		ck_assert_int_eq(write(p.master, "\n", 1), 1);
		ck_assert_int_eq(t_wait(p.pid), 0);
		pty_close(&p);
	}
}
END_TEST

/* pty_kill_group reaches a background grandchild; the group then is gone. */
START_TEST(test_kill_group)
{
	char		*argv[] = { "sh", "-c", "sleep 100 & echo $!; wait", NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	size_t		 len = 0;
	long		 grandchild = 0;
	int		 fd;

	/* The grandchild is reparented to us when sh dies, so we reap it. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	t_spec(&s, argv, _i);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	fd = _i ? p.master : p.out;
	ck_assert_int_eq(t_read(fd, out, sizeof out, &len, "\n"), T_FOUND);
	ck_assert_int_eq(sscanf(out, "%ld", &grandchild), 1);
	ck_assert_int_gt(grandchild, 0);

	ck_assert_int_eq(pty_kill_group(p.pid, SIGKILL), 0);
	t_wait_killed(p.pid, SIGKILL);
	t_wait_killed((pid_t)grandchild, SIGKILL);
	ck_assert_int_eq(pty_kill_group(p.pid, 0), -ESRCH);
	pty_close(&p);

	ck_assert_int_eq(pty_kill_group(1, SIGTERM), -EINVAL);
	ck_assert_int_eq(pty_kill_group(0, SIGTERM), -EINVAL);
	ck_assert_int_eq(pty_kill_group(-5, SIGTERM), -EINVAL);
}
END_TEST

/* SIGTERM to the group: a pipes child and its background sleep both die. */
START_TEST(test_kill_group_term)
{
	char		*argv[] = { "sh", "-c", "sleep 100 & echo $!; wait", NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	size_t		 len = 0;
	long		 grandchild = 0;

	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	t_spec(&s, argv, 0);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(t_read(p.out, out, sizeof out, &len, "\n"), T_FOUND);
	ck_assert_int_eq(sscanf(out, "%ld", &grandchild), 1);
	ck_assert_int_eq(pty_kill_group(p.pid, SIGTERM), 0);
	/* sh first: once it is reaped, its orphan is ours to wait for. */
	t_wait_killed(p.pid, SIGTERM);
	t_wait_killed((pid_t)grandchild, SIGTERM);
	pty_close(&p);
}
END_TEST

/*
 * pty_kill_sessions reaches a job-control shell's job, which runs in a group
 * of its own (pty_kill_group does not); ids <= 1 are skipped.
 */
START_TEST(test_kill_sessions)
{
	char		*argv[] = { "sh", "-c", "set -m; sleep 100 & echo $!; wait",
			    NULL };
	char		 out[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	size_t		 len = 0;
	long		 job = 0;
	pid_t		 sids[3];

	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	t_spec(&s, argv, 1);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, "\n"),
	    T_FOUND);
	ck_assert_int_eq(sscanf(out, "%ld", &job), 1);
	ck_assert_int_eq(getpgid((pid_t)job), (pid_t)job);
	ck_assert_int_eq(getsid((pid_t)job), p.pid);

	sids[0] = 0;
	sids[1] = 1;
	sids[2] = p.pid;
	ck_assert_int_eq(pty_kill_sessions(sids, 3, SIGKILL), 0);
	t_wait_killed(p.pid, SIGKILL);
	t_wait_killed((pid_t)job, SIGKILL);
	ck_assert_int_eq(pty_kill_sessions(&p.pid, 1, 0), -ESRCH);
	ck_assert_int_eq(pty_kill_sessions(sids, 2, SIGTERM), -ESRCH);
	pty_close(&p);
}
END_TEST

/*
 * The foreground group of the terminal, not the session's: a job-control
 * shell runs its job in a group of its own.  _i 0: SIGINT (TIOCSIG), 1:
 * SIGTERM (tcgetpgrp and kill).  The job traps it and exits 7; the shell,
 * which would die of either, lives on to print that.
 */
START_TEST(test_kill_foreground)
{
	char		*argv[] = { "sh", "-c", NULL, NULL };
	char		 cmd[256], out[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_spec	 s;
	struct pty_proc	 p;
	size_t		 len = 0;
	int		 sig = _i ? SIGTERM : SIGINT, status;

	snprintf(cmd, sizeof cmd, "set -m; sh -c 'trap \"exit 7\" %s; "
	    "echo go; while :; do sleep 0.05; done'; echo rc=$?",
	    _i ? "TERM" : "INT");
	argv[2] = cmd;
	t_spec(&s, argv, 1);
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), 0);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, "go\r\n"),
	    T_FOUND);
	/* A group that is not of the given session: refused. */
	if (sig != SIGINT)
		ck_assert_int_eq(pty_kill_foreground(p.master, p.pid + 100000,
		    sig), -ESRCH);
	ck_assert_int_eq(pty_kill_foreground(p.master, p.pid, sig), 0);
	ck_assert_int_eq(t_read(p.master, out, sizeof out, &len, "rc=7"),
	    T_FOUND);
	status = t_wait(p.pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	pty_close(&p);
}
END_TEST

/* The environment is exactly the given one; ours is untouched. */
START_TEST(test_env_exact)
{
	char		*argv[] = { "env", NULL };
	char		*env[] = { "FOO=bar baz", "PATH=/usr/bin:/bin", "EMPTY=",
			    NULL };
	char		 out[T_BUF], err[T_BUF];
	char		**ours = environ;
	struct pty_spec	 s;
	int		 status;

	t_spec(&s, argv, _i);
	s.envp = env;
	t_run(&s, out, err, &status);
	ck_assert_str_eq(out, "FOO=bar baz\nPATH=/usr/bin:/bin\nEMPTY=\n");
	ck_assert_int_eq(status, 0);
	ck_assert_ptr_eq(environ, ours);
}
END_TEST

/*
 * A spawn does not copy the parent's memory: after it, the parent writes
 * its pages without a fault each (fork() leaves every page copy-on-write,
 * and the first write to each after it faults).
 */
START_TEST(test_spawn_no_cow)
{
	char		*argv[] = { "true", NULL };
	char		 out[T_BUF], err[T_BUF];
	struct pty_spec	 s;
	struct rusage	 r0, r1;
	long		 pages = T_COW_BYTES / sysconf(_SC_PAGESIZE), faults;
	char		*mem;
	int		 status;

	mem = mmap(NULL, T_COW_BYTES, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(mem, MAP_FAILED);
	/* Small pages, so that a copy-on-write fault is one per page. */
	madvise(mem, T_COW_BYTES, MADV_NOHUGEPAGE);
	memset(mem, 1, T_COW_BYTES);

	t_spec(&s, argv, _i);
	t_run(&s, out, err, &status);
	ck_assert_int_eq(status, 0);

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &r0), 0);
	memset(mem, 2, T_COW_BYTES);
	ck_assert_int_eq(getrusage(RUSAGE_SELF, &r1), 0);
	faults = r1.ru_minflt - r0.ru_minflt;
	ck_assert_msg(faults < pages / 8, "%ld faults writing %ld pages "
	    "after a spawn", faults, pages);
	munmap(mem, T_COW_BYTES);
}
END_TEST

/* argv[0] is searched in the PATH of the given env, not in ours. */
START_TEST(test_path_search)
{
	char		*argv[] = { "pty-unit-cmd", "arg1", NULL };
	char		 dir[64], file[128], path[160], cause[PTY_CAUSE_MAX];
	char		 out[T_BUF], err[T_BUF], want[256];
	char		*env[] = { path, NULL };
	char		*plain[] = { "PATH=/usr/bin:/bin", NULL };
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 status;

	t_tmpdir(dir, sizeof dir);
	snprintf(file, sizeof file, "%s/pty-unit-cmd", dir);
	snprintf(path, sizeof path, "PATH=/nonexistent:%s:/bin", dir);
	t_write_file(file, "#!/bin/sh\necho \"found $0 $1\"\n", 0755);

	t_spec(&s, argv, _i);
	s.envp = env;
	t_run(&s, out, err, &status);
	snprintf(want, sizeof want, "found %s arg1\n", file);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(status, 0);

	/* In our PATH but not in the child's: not found. */
	ck_assert_int_eq(setenv("PATH", dir, 1), 0);
	s.envp = plain;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -ENOENT);
	t_no_children();
	unlink(file);
	rmdir(dir);
}
END_TEST

/* Looking users up: by name, by uid, unknown, invalid. */
START_TEST(test_user_lookup)
{
	struct pty_user	u;
	char		cause[PTY_CAUSE_MAX] = "";
	int		i, has0 = 0;

	ck_assert_int_eq(pty_user_lookup("root", &u, cause, sizeof cause), 0);
	ck_assert_uint_eq(u.uid, 0);
	ck_assert_uint_eq(u.gid, 0);
	ck_assert_str_eq(u.name, "root");
	ck_assert_str_eq(u.home, "/root");
	ck_assert_int_ge(u.ngroups, 1);
	for (i = 0; i < u.ngroups; i++)
		has0 |= u.groups[i] == 0;
	ck_assert(has0);

	ck_assert_int_eq(pty_user_lookup("0", &u, cause, sizeof cause), 0);
	ck_assert_str_eq(u.name, "root");

	ck_assert_int_eq(pty_user_lookup("4242", &u, cause, sizeof cause), 0);
	ck_assert_uint_eq(u.uid, 4242);
	ck_assert_uint_eq(u.gid, 4242);
	ck_assert_int_eq(u.ngroups, 0);
	ck_assert_str_eq(u.name, "4242");
	ck_assert_str_eq(u.home, "/");

	ck_assert_int_eq(pty_user_lookup("pty-unit-nobody", &u, cause,
	    sizeof cause), -ENOENT);
	ck_assert_str_eq(cause, "unknown user 'pty-unit-nobody'");
	ck_assert_int_eq(pty_user_lookup("", &u, cause, sizeof cause),
	    -EINVAL);
	/* Not numeric (sign, overflow, the reserved -1): looked up as names. */
	ck_assert_int_eq(pty_user_lookup("-1", &u, NULL, 0), -ENOENT);
	ck_assert_int_eq(pty_user_lookup("4294967295", &u, NULL, 0), -ENOENT);
	ck_assert_int_eq(pty_user_lookup("99999999999", &u, NULL, 0), -ENOENT);
}
END_TEST

/* As nobody: uid, gid and groups all switched, the tty handed over. */
START_TEST(test_user_nobody)
{
	char		*creds[] = { PTY_HELPER, "creds", NULL };
	char		*ttyuid[] = { PTY_HELPER, "ttyuid", NULL };
	char		 out[T_BUF], err[T_BUF], want[256], cause[PTY_CAUSE_MAX];
	struct pty_user	 u;
	struct pty_spec	 s;
	gid_t		 mine[] = { 0, 4 };
	int		 status;

	ck_assert_int_eq(setgroups(2, mine), 0);
	ck_assert_int_eq(pty_user_lookup("nobody", &u, cause, sizeof cause), 0);
	t_spec(&s, creds, _i);
	s.user = &u;
	t_run(&s, out, err, &status);
	t_crlf(out);
	ck_assert_int_eq(u.ngroups, 1);
	snprintf(want, sizeof want, "uid=%u euid=%u gid=%u egid=%u groups=%u\n",
	    u.uid, u.uid, u.gid, u.gid, u.groups[0]);
	ck_assert_str_eq(out, want);
	ck_assert_int_eq(status, 0);

	if (_i) {
		t_spec(&s, ttyuid, 1);
		s.user = &u;
		t_run(&s, out, err, &status);
		t_crlf(out);
		snprintf(want, sizeof want, "ttyuid=%u\n", u.uid);
		ck_assert_str_eq(out, want);
	}
}
END_TEST

/* A uid without a passwd entry: uid = gid = N and no groups at all. */
START_TEST(test_user_numeric)
{
	char		*creds[] = { PTY_HELPER, "creds", NULL };
	char		 out[T_BUF], err[T_BUF], cause[PTY_CAUSE_MAX];
	struct pty_user	 u;
	struct pty_spec	 s;
	gid_t		 mine[] = { 0, 4 };
	int		 status;

	/* Groups of our own must not reach the child. */
	ck_assert_int_eq(setgroups(2, mine), 0);
	ck_assert_int_eq(pty_user_lookup("4242", &u, cause, sizeof cause), 0);
	t_spec(&s, creds, _i);
	s.user = &u;
	t_run(&s, out, err, &status);
	t_crlf(out);
	ck_assert_str_eq(out, "uid=4242 euid=4242 gid=4242 egid=4242 groups=\n");
	ck_assert_int_eq(status, 0);
}
END_TEST

/* The cwd is entered as the user: a root-only directory is refused. */
START_TEST(test_user_cwd_denied)
{
	char		*argv[] = { "true", NULL };
	char		 dir[64], want[256], cause[PTY_CAUSE_MAX];
	struct pty_user	 u;
	struct pty_spec	 s;
	struct pty_proc	 p;
	int		 before = t_count_fds();

	t_tmpdir(dir, sizeof dir);
	ck_assert_int_eq(chmod(dir, 0700), 0);
	ck_assert_int_eq(pty_user_lookup("nobody", &u, cause, sizeof cause), 0);
	t_spec(&s, argv, _i);
	s.user = &u;
	s.cwd = dir;
	ck_assert_int_eq(pty_spawn(&s, &p, cause, sizeof cause), -EACCES);
	snprintf(want, sizeof want, "cwd '%s': Permission denied", dir);
	ck_assert_str_eq(cause, want);
	ck_assert_int_eq(t_count_fds(), before);
	t_no_children();
	rmdir(dir);
}
END_TEST

/*
 * Unprivileged, switching user fails at setgroups with EPERM.  Done in a
 * forked process, which drops root for good.
 */
START_TEST(test_user_eperm)
{
	char		*argv[] = { "true", NULL };
	char		 cause[PTY_CAUSE_MAX] = "";
	struct pty_user	 u;
	struct pty_spec	 s;
	struct pty_proc	 p;
	pid_t		 pid;
	int		 status, fds[2];
	ssize_t		 n;

	ck_assert_int_eq(pty_user_lookup("root", &u, cause, sizeof cause), 0);
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int	before, r;

		close(fds[0]);
		if (setgid(65534) == -1 || setuid(65534) == -1)
			_exit(2);
		before = t_count_fds();
		t_spec(&s, argv, _i);
		s.user = &u;
		r = pty_spawn(&s, &p, cause, sizeof cause);
		if (write(fds[1], cause, strlen(cause)) == -1)
			_exit(3);
		if (r != -EPERM)
			_exit(4);
		if (t_count_fds() != before)
			_exit(5);
		if (waitpid(-1, NULL, WNOHANG) != -1 || errno != ECHILD)
			_exit(6);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], cause, sizeof cause - 1);
	cause[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	status = t_wait(pid);
	ck_assert_str_eq(cause, "user 'root': setgroups: Operation not permitted");
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

#endif /* !PTY_TEST_FDS_ONLY */

/* All the tests; loop tests run once for pipes (0) and once for a PTY (1). */
static Suite *
pty_suite(void)
{
	Suite	*su = suite_create("pty");
	TCase	*fds = tcase_create("fds");

	tcase_set_timeout(fds, T_CASE_TIMEOUT);
	tcase_add_loop_test(fds, test_fds_closed, 0, 2);
	tcase_add_loop_test(fds, test_fds_low_closed, 0, 2);
	tcase_add_test(fds, test_many_no_leak);
	suite_add_tcase(su, fds);

#ifndef PTY_TEST_FDS_ONLY
	TCase	*spawn = tcase_create("spawn");
	TCase	*errs = tcase_create("errors");
	TCase	*ctl = tcase_create("control");
	TCase	*user = tcase_create("user");

	tcase_set_timeout(spawn, T_CASE_TIMEOUT);
	tcase_add_test(spawn, test_tty_basic);
	tcase_add_test(spawn, test_tty_session);
	tcase_add_test(spawn, test_pipes_session);
	tcase_add_test(spawn, test_watch);
	tcase_add_test(spawn, test_tty_eio);
	tcase_add_test(spawn, test_pipes_separate);
	tcase_add_test(spawn, test_pipes_stdin);
	tcase_add_test(spawn, test_pipes_stdin_null);
	tcase_add_loop_test(spawn, test_exit_signal, 0, 2);
	tcase_add_loop_test(spawn, test_signals_clean, 0, 2);
	tcase_add_loop_test(spawn, test_signals_clean_after_snapshot, 0, 2);
	tcase_add_loop_test(spawn, test_env_exact, 0, 2);
	tcase_add_loop_test(spawn, test_path_search, 0, 2);
	tcase_add_loop_test(spawn, test_spawn_no_cow, 0, 2);
	suite_add_tcase(su, spawn);

	tcase_set_timeout(errs, T_CASE_TIMEOUT);
	tcase_add_loop_test(errs, test_exec_enoent, 0, 2);
	tcase_add_loop_test(errs, test_exec_eacces, 0, 2);
	tcase_add_loop_test(errs, test_cwd, 0, 2);
	tcase_add_test(errs, test_invalid_spec);
	suite_add_tcase(su, errs);

	tcase_set_timeout(ctl, T_CASE_TIMEOUT);
	tcase_add_test(ctl, test_resize_winch);
	tcase_add_test(ctl, test_veof);
	tcase_add_test(ctl, test_iutf8);
	tcase_add_loop_test(ctl, test_kill_group, 0, 2);
	tcase_add_test(ctl, test_kill_group_term);
	tcase_add_test(ctl, test_kill_sessions);
	tcase_add_loop_test(ctl, test_kill_foreground, 0, 2);
	suite_add_tcase(su, ctl);

	tcase_set_timeout(user, T_CASE_TIMEOUT);
	tcase_add_test(user, test_user_lookup);
	/* Switching users needs root; unprivileged runs skip those. */
	if (geteuid() == 0) {
		tcase_add_loop_test(user, test_user_nobody, 0, 2);
		tcase_add_loop_test(user, test_user_numeric, 0, 2);
		tcase_add_loop_test(user, test_user_cwd_denied, 0, 2);
		tcase_add_loop_test(user, test_user_eperm, 0, 2);
	}
	suite_add_tcase(su, user);
#endif
	return su;
}

/* Run the suite; the exit status says whether everything passed. */
int
main(void)
{
	SRunner	*sr = srunner_create(pty_suite());
	int	 failed;

	/* Tests change signals, groups, PATH and fds 0-2: one process each. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
