/*
 * child.c -- the child of a spawn, between clone and exec (see pty.c): it
 * runs on a stack in the parent's frame and makes only async-signal-safe
 * system calls, on its own copies of the fds.
 */

#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "pty.h"
#include "pty_int.h"

/*
 * close_range(2) is Linux 5.9; older headers (and some musl builds) lack the
 * number.  It is 436 in the unified syscall table every modern architecture
 * shares.
 */
#ifndef SYS_close_range
#if defined(__x86_64__) || defined(__aarch64__) || defined(__riscv)
#define SYS_close_range	436
#endif
#endif

/*
 * Test hook: 1 skips close_range, 2 also skips /proc/self/fd, so the unit
 * tests can exercise the fallbacks an old kernel or a bare VM would take.
 */
#ifndef PTY_CLOSE_FALLBACK
#define PTY_CLOSE_FALLBACK	0
#endif

#define PTY_EXIT_NOTFOUND	127		/* exit status: command not found */
#define PTY_EXIT_NOEXEC		126		/* exit status: found, cannot run */
#define PTY_DIRENT_BUF		4096		/* bytes, getdents64 buffer */
#define PTY_NOFILE_CAP		(1024 * 1024)	/* fds, close loop bound */

static void	 child_fail(int, int, int) __attribute__((noreturn));
static int	 child_oom(int);
static void	 child_exec(const struct child_args *, int)
		     __attribute__((noreturn));
static int	 child_signals(void);
static int	 child_sigdfl_raw(int);
static int	 child_dup(int, int);
static int	 child_close_fds(int);
static int	 child_close_range(unsigned int, unsigned int);
static int	 child_close_proc(int);
static void	 child_close_loop(int);

/*
 * Everything below runs in the child between clone and exec: system calls
 * and stores to its own stack only.
 */

/* Report a failed stage to the parent and exit. */
static void
child_fail(int rep, int stage, int err)
{
	struct child_report	r;
	ssize_t			n;

	r.stage = stage;
	r.err = err;
	do
		n = write(rep, &r, sizeof r);
	while (n == -1 && errno == EINTR);
	if (stage == STAGE_EXEC && err != ENOENT && err != ENOTDIR)
		_exit(PTY_EXIT_NOEXEC);
	_exit(PTY_EXIT_NOTFOUND);
}

/*
 * Write the child's oom_score_adj, formatted without stdio (the child may
 * only make async-signal-safe calls).  No /proc: nothing to write, 0.
 * Lower than the floor our runtime set (a container started with a higher
 * oom_score_adj and without CAP_SYS_RESOURCE) the kernel refuses it: the
 * child keeps ours, which is higher, so it is still killed before agentd.
 */
static int
child_oom(int adj)
{
	char		 buf[16], *p = buf + sizeof buf;
	unsigned	 v = adj < 0 ? (unsigned)-adj : (unsigned)adj;
	ssize_t		 n;
	int		 fd, saved;

	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	if (adj < 0)
		*--p = '-';
	if ((fd = open(PTY_OOM_PATH, O_WRONLY | O_CLOEXEC)) == -1)
		return errno == ENOENT ? 0 : -1;
	n = write(fd, p, (size_t)(buf + sizeof buf - p));
	saved = errno;
	close(fd);
	errno = saved;
	if (n == -1 && (saved == EACCES || saved == EPERM))
		return 0;
	return n == -1 ? -1 : 0;
}

/*
 * Set up the child and exec; never returns.  Runs in the parent's memory
 * (see the top): it changes only its locals and the kernel's state.
 */
int
pty_child_run(void *arg)
{
	const struct child_args	*a = arg;
	const struct pty_spec	*spec = a->spec;
	const struct pty_user	*u = spec->user;
	int			 rep = a->f.rep_w, fd0, fd1, fd2, tty;

	/* Into the session's cgroup before anything else (no clone3). */
	if (a->procs != -1 && write(a->procs, "0", 1) != 1)
		child_fail(rep, STAGE_CGROUP, errno);
	if (a->oom && child_oom(spec->oom_score_adj) != 0)
		child_fail(rep, STAGE_OOM, errno);
	if (child_signals() != 0)
		child_fail(rep, STAGE_SIGNALS, errno);
	if (setsid() == -1)
		child_fail(rep, STAGE_SETSID, errno);

	if (spec->tty) {
		/* As session leader without a tty, this one becomes ours. */
		if ((tty = open(a->slave, O_RDWR | O_NOCTTY)) == -1)
			child_fail(rep, STAGE_TTY_OPEN, errno);
		if (ioctl(tty, TIOCSCTTY, 0) == -1)
			child_fail(rep, STAGE_TTY_CTTY, errno);
		if (pty_fd_lift(&tty) != 0)
			child_fail(rep, STAGE_FDS, errno);
		fd0 = fd1 = fd2 = tty;
	} else {
		fd0 = a->f.in_r;
		fd1 = a->f.out_w;
		fd2 = a->f.err_w;
		if (pty_fd_lift(&fd0) != 0 || pty_fd_lift(&fd1) != 0 ||
		    pty_fd_lift(&fd2) != 0)
			child_fail(rep, STAGE_FDS, errno);
	}
	/* Sources are all >= 3 now, so dup2 always clears FD_CLOEXEC. */
	if (child_dup(fd0, STDIN_FILENO) != 0 ||
	    child_dup(fd1, STDOUT_FILENO) != 0 ||
	    child_dup(fd2, STDERR_FILENO) != 0)
		child_fail(rep, STAGE_DUP, errno);
	if (child_close_fds(rep) != 0)
		child_fail(rep, STAGE_CLOSE, errno);

	/*
	 * Groups and gid while still privileged, uid last.  The raw calls:
	 * they change this process alone (see the top).
	 */
	if (u != NULL) {
		if (syscall(SYS_setgroups, (size_t)u->ngroups, u->groups) == -1)
			child_fail(rep, STAGE_SETGROUPS, errno);
		if (syscall(SYS_setgid, u->gid) == -1)
			child_fail(rep, STAGE_SETGID, errno);
		/* The user owns its terminal, as after a login. */
		if (spec->tty && fchown(STDIN_FILENO, u->uid, (gid_t)-1) == -1)
			child_fail(rep, STAGE_TTY_CHOWN, errno);
		if (syscall(SYS_setuid, u->uid) == -1)
			child_fail(rep, STAGE_SETUID, errno);
	}
	/* After the switch, so the user's own permissions decide. */
	if (spec->cwd != NULL && chdir(spec->cwd) == -1)
		child_fail(rep, STAGE_CWD, errno);

	child_exec(a, rep);
}

/*
 * execvp(3) in the session's PATH (a->path), without assigning environ:
 * EACCES is remembered and the search goes on, ENOENT and ENOTDIR go on,
 * any other error ends it; an empty PATH element is the cwd.  As musl's,
 * a file that is not an executable format (ENOEXEC) is not run by /bin/sh.
 */
static void
child_exec(const struct child_args *a, int rep)
{
	char *const	*argv = a->spec->argv, *const *envp = a->spec->envp;
	const char	*file = argv[0], *p, *end;
	char		 buf[PATH_MAX];
	size_t		 flen, dlen;
	int		 eacces = 0;

	if (*file == '\0')
		child_fail(rep, STAGE_EXEC, ENOENT);
	if (strchr(file, '/') != NULL) {
		execve(file, argv, envp);
		child_fail(rep, STAGE_EXEC, errno);
	}
	if ((flen = strlen(file)) > NAME_MAX)
		child_fail(rep, STAGE_EXEC, ENAMETOOLONG);
	for (p = a->path;; p = end + 1) {
		for (end = p; *end != '\0' && *end != ':'; end++)
			;
		dlen = (size_t)(end - p);
		if (dlen + 1 + flen < sizeof buf) {
			memcpy(buf, p, dlen);
			if (dlen > 0)
				buf[dlen++] = '/';
			memcpy(buf + dlen, file, flen + 1);
			execve(buf, argv, envp);
			switch (errno) {
			case EACCES:
				eacces = 1;
				break;
			case ENOENT:
			case ENOTDIR:
				break;
			default:
				child_fail(rep, STAGE_EXEC, errno);
			}
		}
		if (*end == '\0')
			break;
	}
	child_fail(rep, STAGE_EXEC, eacces ? EACCES : ENOENT);
}

/* Set sig's disposition to SIG_DFL with the raw system call. */
static int
child_sigdfl_raw(int sig)
{
	struct kernel_sigaction	ksa;

	memset(&ksa, 0, sizeof ksa);
	ksa.handler = SIG_DFL;
	if (syscall(SYS_rt_sigaction, sig, &ksa, NULL, sizeof ksa.mask) == -1)
		return (errno == EINVAL ? 0 : -1);
	return 0;
}

/*
 * Reset every disposition that is not SIG_DFL (pty_sig_reset: all of them
 * without a snapshot) to SIG_DFL, then unblock every signal.  Raw system
 * calls: this runs in a vfork child sharing agentd's memory, and the libc's
 * sigaction() takes locks (musl's for SIGABRT) and refuses the real-time
 * signals it keeps for itself (glibc's 32 and 33), which may have been left
 * ignored by whoever started agentd.
 */
static int
child_signals(void)
{
	uint64_t	none = 0;	/* the kernel's sigset: _NSIG 64 */
	int		sig;

	for (sig = 1; sig < _NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP ||
		    !(pty_sig_reset & (uint64_t)1 << (sig - 1)))
			continue;
		if (child_sigdfl_raw(sig) == -1)
			return -1;
	}
	return (int)syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL,
	    sizeof none);
}

/* dup2 that retries EINTR. */
static int
child_dup(int from, int to)
{
	while (dup2(from, to) == -1) {
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

/* Close every fd from 3 up except keep (which is >= 3). */
static int
child_close_fds(int keep)
{
	if (PTY_CLOSE_FALLBACK < 1 &&
	    (keep == 3 || child_close_range(3, (unsigned int)keep - 1) == 0) &&
	    child_close_range((unsigned int)keep + 1, ~0U) == 0)
		return 0;
	/* Linux < 5.9 (ENOSYS), or a seccomp filter. */
	if (PTY_CLOSE_FALLBACK < 2 && child_close_proc(keep) == 0)
		return 0;
	/* No /proc (a bare VM before agentd mounts it). */
	child_close_loop(keep);
	return 0;
}

/* close_range(2) by number, as musl may not wrap it. */
static int
child_close_range(unsigned int first, unsigned int last)
{
#ifdef SYS_close_range
	return (int)syscall(SYS_close_range, first, last, 0U);
#else
	(void)first;
	(void)last;
	errno = ENOSYS;
	return -1;
#endif
}

/* Close fds listed in /proc/self/fd with raw getdents64 (no malloc). */
static int
child_close_proc(int keep)
{
	/* The kernel's struct linux_dirent64. */
	struct dirent64_raw {
		uint64_t	d_ino;
		int64_t		d_off;
		unsigned short	d_reclen;
		unsigned char	d_type;
		char		d_name[];
	};
	union {
		char			buf[PTY_DIRENT_BUF];
		struct dirent64_raw	align;
	} u;
	struct dirent64_raw	*d;
	long			 n, pos;
	int			 dir, fd;
	const char		*c;

	dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir == -1)
		return -1;
	/* Closing while reading is safe: the offset is the fd number. */
	while ((n = syscall(SYS_getdents64, dir, u.buf, sizeof u.buf)) > 0) {
		for (pos = 0; pos < n; pos += d->d_reclen) {
			d = (struct dirent64_raw *)(void *)(u.buf + pos);
			fd = 0;
			for (c = d->d_name; *c >= '0' && *c <= '9'; c++)
				fd = fd * 10 + (*c - '0');
			if (*c != '\0' || c == d->d_name)
				continue;
			if (fd > STDERR_FILENO && fd != keep && fd != dir)
				close(fd);
		}
	}
	close(dir);
	return n == 0 ? 0 : -1;
}

/* Close every possible fd up to RLIMIT_NOFILE, the last resort. */
static void
child_close_loop(int keep)
{
	struct rlimit	rl;
	rlim_t		max = PTY_NOFILE_CAP, fd;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY)
		max = rl.rlim_max;
	/* An fd above the soft limit may remain from before a lowering. */
	if (max > PTY_NOFILE_CAP)
		max = PTY_NOFILE_CAP;
	for (fd = STDERR_FILENO + 1; fd < max; fd++) {
		if (fd != (rlim_t)keep)
			close((int)fd);
	}
}
