/*
 * pty.c -- spawning a session's process, on a PTY or on pipes: the parent's
 * side (child.c is the child's, user.c the user lookup, kill.c signals to
 * what a session left).
 *
 * The parent prepares everything that can allocate or look things up (the
 * PTY master and the slave's name, pipes, /dev/null, the resolved user);
 * the child, between fork and exec, makes only async-signal-safe system
 * calls: it may run in a copy of a multithreaded process whose locks are
 * held by threads that no longer exist.
 *
 * A child that fails before exec writes a struct child_report {stage, errno}
 * to an O_CLOEXEC pipe and exits; a successful exec closes the pipe, so the
 * parent reads either EOF (success) or the report (failure).
 *
 * The child is made by clone(CLONE_VM | CLONE_VFORK), as posix_spawn does in
 * glibc and musl: fork() copies agentd's page tables, and every page either
 * side then writes takes a copy-on-write fault, which cost more than the
 * rest of an exec of /bin/true.  The child runs on a stack in the parent's
 * frame, in the parent's memory, while the parent waits until it has exec'd
 * or exited.  So it must not write anything the parent reads afterwards: it
 * works on its own copies of the fds, never assigns environ (it searches
 * the session's PATH itself), and switches credentials with the raw system
 * calls (the libcs' setuid() and friends signal every thread of a
 * multithreaded process, and those threads are the parent's).  Dispositions
 * are per process without CLONE_SIGHAND, and errno is the parent thread's,
 * which the parent does not read after a successful clone.
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

/* clone3(2) is Linux 5.3, in the same table. */
#ifndef SYS_clone3
#define SYS_clone3		435
#endif

/*
 * Under ASan the child, instrumented, poisons and unpoisons the shadow of
 * its frames on the stack it borrows from the parent's frame; what it left
 * poisoned when it exec'd is cleared before the parent uses that memory.
 */
#if defined(__SANITIZE_ADDRESS__)
#define PTY_ASAN	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PTY_ASAN	1
#endif
#endif
#ifdef PTY_ASAN
#include <sanitizer/asan_interface.h>
#define PTY_STACK_CLEAN(p, n)	__asan_unpoison_memory_region((p), (n))
#else
#define PTY_STACK_CLEAN(p, n)	do { } while (0)
#endif

#define PTY_VEOF_DEFAULT	4		/* ^D */
#define PTY_CHILD_STACK		(32 * 1024)	/* bytes, the clone child's stack */
#define PTY_CLONE_INTO_CGROUP	0x200000000ULL	/* clone3's flag, Linux 5.7 */
#define PTY_CLONE_PIDFD		0x00001000ULL	/* clone's flag, Linux 5.2 */
#define PTY_PATH_DEFAULT	"/usr/local/bin:/bin:/usr/bin"	/* no PATH (musl's) */

/* clone3(2)'s arguments, as far as CLONE_INTO_CGROUP (Linux 5.7). */
struct pty_clone_args {
	uint64_t	flags;
	uint64_t	pidfd;
	uint64_t	child_tid;
	uint64_t	parent_tid;
	uint64_t	exit_signal;
	uint64_t	stack;
	uint64_t	stack_size;
	uint64_t	tls;
	uint64_t	set_tid;
	uint64_t	set_tid_size;
	uint64_t	cgroup;
};

/*
 * The signals a child resets to SIG_DFL: those whose disposition was not
 * SIG_DFL at pty_signals_snapshot() (an ignored one outlives execve; a
 * handler would run in the child, which shares agentd's memory, until
 * exec), each bit sig - 1; every signal until the snapshot is taken.
 */
uint64_t	pty_sig_reset = ~(uint64_t)0;

/*
 * Whether clone3(CLONE_INTO_CGROUP) works here: 1 until the kernel says
 * ENOSYS, E2BIG or EINVAL (older than 5.7), then the child joins itself.
 * Atomic: agentd's spawner threads read and clear it at once.
 */
static atomic_int pty_clone3_ok = 1;

/* Whether clone3(CLONE_PIDFD) works here (spec->watch): 1 until ENOSYS. */
static atomic_int pty_watch_ok = 1;

static int	 spec_check(const struct pty_spec *, char *, size_t);
static void	 fds_init(struct spawn_fds *);
static void	 fds_close(struct spawn_fds *);
static void	 fd_close(int *);
static int	 fd_nonblock(int);
static int	 open_master(struct spawn_fds *, const struct pty_spec *,
		     char *, size_t, char *, size_t);
static int	 env_utf8(char *const *);
static int	 master_utf8(int);
static int	 open_pipes(struct spawn_fds *, const struct pty_spec *,
		     char *, size_t);
static int	 report_read(int, struct child_report *);
static void	 report_cause(const struct child_report *,
		     const struct pty_spec *, const char *, char *, size_t);
static pid_t	 wait_child(pid_t);
static const char *env_path(char *const *);
static pid_t	 spawn_clone(struct child_args *, char *, size_t, char *,
		    size_t);
static int	 oom_differs(int);
static void	 exec_e2big(const struct pty_spec *, char *, size_t);

/* Write a message into a caller's cause buffer, if there is one. */
void
pty_cause(char *cause, size_t causelen, const char *fmt, ...)
{
	va_list	ap;

	if (cause == NULL || causelen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(cause, causelen, fmt, ap);
	va_end(ap);
}

/* Check a spec before anything is opened. */
static int
spec_check(const struct pty_spec *spec, char *cause, size_t causelen)
{
	if (spec == NULL || spec->argv == NULL || spec->argv[0] == NULL) {
		pty_cause(cause, causelen, "no command");
		return -EINVAL;
	}
	if (spec->envp == NULL) {
		pty_cause(cause, causelen, "no environment");
		return -EINVAL;
	}
	if (spec->user != NULL && (spec->user->ngroups < 0 ||
	    spec->user->ngroups > PTY_GROUPS_MAX)) {
		pty_cause(cause, causelen, "user '%s': %d groups",
		    spec->user->name, spec->user->ngroups);
		return -EINVAL;
	}
	if (spec->cgroup < -1 || spec->oom_score_adj < -1000 ||
	    spec->oom_score_adj > 1000) {
		pty_cause(cause, causelen, "cgroup fd %d, oom_score_adj %d out "
		    "of range", spec->cgroup, spec->oom_score_adj);
		return -EINVAL;
	}
	if (spec->tty && (spec->rows == 0 || spec->cols == 0)) {
		pty_cause(cause, causelen, "window size %ux%u out of range",
		    spec->rows, spec->cols);
		return -EINVAL;
	}
	return 0;
}

/* Mark every fd of a spawn as absent. */
static void
fds_init(struct spawn_fds *f)
{
	f->master = -1;
	f->in_r = f->in_w = -1;
	f->out_r = f->out_w = -1;
	f->err_r = f->err_w = -1;
	f->rep_r = f->rep_w = -1;
}

/* Close every fd of a spawn that is open. */
static void
fds_close(struct spawn_fds *f)
{
	fd_close(&f->master);
	fd_close(&f->in_r);
	fd_close(&f->in_w);
	fd_close(&f->out_r);
	fd_close(&f->out_w);
	fd_close(&f->err_r);
	fd_close(&f->err_w);
	fd_close(&f->rep_r);
	fd_close(&f->rep_w);
}

/* Close *fd if open and set it to -1 (EINTR on close: the fd is gone). */
static void
fd_close(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Add O_NONBLOCK to an fd's file status flags. */
static int
fd_nonblock(int fd)
{
	int	flags;

	if ((flags = fcntl(fd, F_GETFL)) == -1)
		return -errno;
	if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) == -1)
		return -errno;
	return 0;
}

/*
 * Move *fd to 3 or above (O_CLOEXEC), closing the old one, so that the
 * child's dup2 onto 0-2 never lands on it.  Only needed when the caller
 * runs with some of 0-2 closed.
 */
int
pty_fd_lift(int *fd)
{
	int	nfd;

	if (*fd < 0 || *fd > STDERR_FILENO)
		return 0;
	if ((nfd = fcntl(*fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1)) == -1)
		return -errno;
	close(*fd);
	*fd = nfd;
	return 0;
}

/*
 * Whether the locale an environment selects (LC_ALL, else LC_CTYPE, else
 * LANG, the first one set and not empty) uses UTF-8.
 */
static int
env_utf8(char *const *envp)
{
	static const char *const	 names[] = { "LC_ALL=", "LC_CTYPE=",
					    "LANG=" };
	const char			*v;
	size_t				 i, j, len;

	for (i = 0; i < sizeof names / sizeof names[0]; i++) {
		len = strlen(names[i]);
		for (j = 0; envp != NULL && envp[j] != NULL; j++) {
			if (strncmp(envp[j], names[i], len) != 0)
				continue;
			v = envp[j] + len;
			if (*v == '\0')
				continue;
			return strcasestr(v, "UTF-8") != NULL ||
			    strcasestr(v, "UTF8") != NULL;
		}
	}
	return 0;
}

/* Set IUTF8 on a PTY (termios of a master are those of its slave). */
static int
master_utf8(int master)
{
	struct termios	t;

	if (tcgetattr(master, &t) == -1)
		return -errno;
	t.c_iflag |= IUTF8;
	if (tcsetattr(master, TCSANOW, &t) == -1)
		return -errno;
	return 0;
}

/*
 * Open a PTY master, name its slave and set the window size; for a UTF-8
 * locale set IUTF8, so the line discipline erases a whole character (as
 * tmux and sshd do).
 */
static int
open_master(struct spawn_fds *f, const struct pty_spec *spec, char *slave,
    size_t slavelen, char *cause, size_t causelen)
{
	struct winsize	ws;
	int		error;

	if ((f->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1) {
		error = -errno;
		pty_cause(cause, causelen, "posix_openpt: %s", strerror(-error));
		return error;
	}
	if (grantpt(f->master) == -1 || unlockpt(f->master) == -1) {
		error = -errno;
		pty_cause(cause, causelen, "unlockpt: %s", strerror(-error));
		return error;
	}
	if ((error = ptsname_r(f->master, slave, slavelen)) != 0) {
		/* glibc returns the error; older versions return -1. */
		error = error > 0 ? -error : -errno;
		pty_cause(cause, causelen, "ptsname_r: %s", strerror(-error));
		return error;
	}
	memset(&ws, 0, sizeof ws);
	ws.ws_row = spec->rows;
	ws.ws_col = spec->cols;
	if (ioctl(f->master, TIOCSWINSZ, &ws) == -1) {
		error = -errno;
		pty_cause(cause, causelen, "TIOCSWINSZ: %s", strerror(-error));
		return error;
	}
	if (env_utf8(spec->envp) && (error = master_utf8(f->master)) != 0) {
		pty_cause(cause, causelen, "IUTF8: %s", strerror(-error));
		return error;
	}
	if ((error = fd_nonblock(f->master)) != 0) {
		pty_cause(cause, causelen, "O_NONBLOCK: %s", strerror(-error));
		return error;
	}
	return 0;
}

/* Open the three pipes (or /dev/null for stdin) of a pipes-mode child. */
static int
open_pipes(struct spawn_fds *f, const struct pty_spec *spec, char *cause,
    size_t causelen)
{
	int	p[2], error;

	if (spec->stdin_null) {
		f->in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (f->in_r == -1) {
			error = -errno;
			pty_cause(cause, causelen, "/dev/null: %s",
			    strerror(-error));
			return error;
		}
	} else {
		if (pipe2(p, O_CLOEXEC) == -1)
			goto fail;
		f->in_r = p[0];
		f->in_w = p[1];
	}
	if (pipe2(p, O_CLOEXEC) == -1)
		goto fail;
	f->out_r = p[0];
	f->out_w = p[1];
	if (pipe2(p, O_CLOEXEC) == -1)
		goto fail;
	f->err_r = p[0];
	f->err_w = p[1];

	/* O_NONBLOCK is per open file: the child's ends stay blocking. */
	if ((f->in_w >= 0 && (error = fd_nonblock(f->in_w)) != 0) ||
	    (error = fd_nonblock(f->out_r)) != 0 ||
	    (error = fd_nonblock(f->err_r)) != 0) {
		pty_cause(cause, causelen, "O_NONBLOCK: %s", strerror(-error));
		return error;
	}
	return 0;

fail:
	error = -errno;
	pty_cause(cause, causelen, "pipe2: %s", strerror(-error));
	return error;
}

/* Read the child's report: 0 on EOF (exec succeeded), 1 on a report. */
static int
report_read(int fd, struct child_report *rep)
{
	char	*p = (char *)rep;
	size_t	 got = 0;
	ssize_t	 n;

	while (got < sizeof *rep) {
		n = read(fd, p + got, sizeof *rep - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			/* Cannot happen on a blocking pipe; count it a failure. */
			rep->stage = 0;
			rep->err = errno;
			return 1;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got == 0)
		return 0;
	if (got < sizeof *rep) {
		/* The child died mid-write: it did not exec. */
		rep->stage = 0;
		rep->err = EPIPE;
	}
	return 1;
}

/* Turn a child's report into a cause a user can read. */
static void
report_cause(const struct child_report *rep, const struct pty_spec *spec,
    const char *slave, char *cause, size_t causelen)
{
	const char	*what = NULL, *err = strerror(rep->err);
	const char	*uname = "?";

	if (spec->user != NULL && spec->user->name[0] != '\0')
		uname = spec->user->name;
	switch (rep->stage) {
	case STAGE_SIGNALS:
		what = "reset signals";
		break;
	case STAGE_SETSID:
		what = "setsid";
		break;
	case STAGE_FDS:
		what = "move fds";
		break;
	case STAGE_TTY_OPEN:
		pty_cause(cause, causelen, "tty '%s': open: %s", slave, err);
		return;
	case STAGE_TTY_CTTY:
		pty_cause(cause, causelen, "tty '%s': TIOCSCTTY: %s", slave,
		    err);
		return;
	case STAGE_TTY_CHOWN:
		pty_cause(cause, causelen, "tty '%s': chown: %s", slave, err);
		return;
	case STAGE_DUP:
		what = "dup2";
		break;
	case STAGE_CLOSE:
		what = "close fds";
		break;
	case STAGE_SETGROUPS:
		pty_cause(cause, causelen, "user '%s': setgroups: %s", uname,
		    err);
		return;
	case STAGE_SETGID:
		pty_cause(cause, causelen, "user '%s': setgid: %s", uname, err);
		return;
	case STAGE_SETUID:
		pty_cause(cause, causelen, "user '%s': setuid: %s", uname, err);
		return;
	case STAGE_CWD:
		pty_cause(cause, causelen, "cwd '%s': %s", spec->cwd, err);
		return;
	case STAGE_CGROUP:
		what = "join cgroup";
		break;
	case STAGE_OOM:
		pty_cause(cause, causelen, "oom_score_adj %d: %s",
		    spec->oom_score_adj, err);
		return;
	case STAGE_EXEC:
		if (rep->err == E2BIG) {
			exec_e2big(spec, cause, causelen);
			return;
		}
		pty_cause(cause, causelen, "exec '%s': %s", spec->argv[0], err);
		return;
	default:
		what = "child";
		break;
	}
	pty_cause(cause, causelen, "%s: %s", what, err);
}

/*
 * Say which string made exec fail with E2BIG: the kernel takes at most
 * MAX_ARG_STRLEN (32 pages) per argument or environment string, so a long
 * "cmd" fails however little else there is; else the total went over.
 */
static void
exec_e2big(const struct pty_spec *spec, char *cause, size_t causelen)
{
	size_t		 i, len, name, most;
	const char	*eq;

	most = (size_t)sysconf(_SC_PAGESIZE) * 32;	/* MAX_ARG_STRLEN */
	for (i = 0; spec->argv[i] != NULL; i++) {
		if ((len = strlen(spec->argv[i]) + 1) > most) {
			pty_cause(cause, causelen, "exec '%s': argv[%zu] is %zu "
			    "bytes, over the kernel's %zu per argument (pass a "
			    "long script on stdin or in a file)", spec->argv[0],
			    i, len - 1, most - 1);
			return;
		}
	}
	for (i = 0; spec->envp[i] != NULL; i++) {
		if ((len = strlen(spec->envp[i]) + 1) > most) {
			/* The name only (at most 64 bytes), never the value. */
			eq = strchr(spec->envp[i], '=');
			name = eq != NULL ? (size_t)(eq - spec->envp[i]) : 0;
			if (name > 64)
				name = 64;
			pty_cause(cause, causelen, "exec '%s': env '%.*s' is %zu "
			    "bytes, over the kernel's %zu per variable",
			    spec->argv[0], (int)name, spec->envp[i], len - 1,
			    most - 1);
			return;
		}
	}
	pty_cause(cause, causelen, "exec '%s': %s (argv and env together)",
	    spec->argv[0], strerror(E2BIG));
}

/* Reap a child that is known to be exiting; -1 if someone else did. */
static pid_t
wait_child(pid_t pid)
{
	pid_t	r;
	int	status;

	do
		r = waitpid(pid, &status, 0);
	while (r == -1 && errno == EINTR);
	return r;
}

/*
 * Note which signals have a disposition other than SIG_DFL, so that each
 * child resets those only: one rt_sigaction() per signal once, instead of
 * in every child while its parent waits.  Call it once the caller's own
 * dispositions are set, before any other thread spawns; a disposition
 * changed later is not seen.
 */
void
pty_signals_snapshot(void)
{
	struct kernel_sigaction	ksa;
	uint64_t		set = 0;
	int			sig;

	for (sig = 1; sig < _NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		memset(&ksa, 0, sizeof ksa);
		if (syscall(SYS_rt_sigaction, sig, NULL, &ksa,
		    sizeof ksa.mask) == -1 || ksa.handler != SIG_DFL)
			set |= (uint64_t)1 << (sig - 1);
	}
	pty_sig_reset = set;
}

#if defined(__x86_64__)
/*
 * clone3(2) whose child calls fn(arg) on the stack ca gives and exits with
 * its return.  The libcs have no wrapper, and a child returning from
 * syscall() into C would run on the stack of its parent, which CLONE_VM
 * shares.  fn and arg ride in r12 and r13, which the system call keeps.
 * Returns the child's pid or -errno.
 */
static long
pty_clone3(struct pty_clone_args *ca, int (*fn)(void *), void *arg)
{
	register long	 r12 __asm__("r12") = (long)fn;
	register long	 r13 __asm__("r13") = (long)arg;
	long		 ret;

	__asm__ __volatile__(
	    "syscall\n\t"
	    "testq %%rax, %%rax\n\t"
	    "jnz 1f\n\t"
	    "xorl %%ebp, %%ebp\n\t"
	    "movq %%r13, %%rdi\n\t"
	    "callq *%%r12\n\t"
	    "movl %%eax, %%edi\n\t"
	    "movl $60, %%eax\n\t"		/* exit(2), never reached */
	    "syscall\n\t"
	    "hlt\n"
	    "1:"
	    : "=a" (ret)
	    : "0" ((long)SYS_clone3), "D" (ca), "S" (sizeof *ca), "r" (r12),
	      "r" (r13)
	    : "rcx", "r11", "memory", "cc");
	return ret;
}
#endif

/*
 * Make the child of a spawn on stack, in spec->cgroup if there is one: born
 * there by clone3(CLONE_INTO_CGROUP), else (an older kernel, another
 * architecture) it writes itself into a->procs, opened here.  With
 * spec->watch, clone3 also hands out its pid and a pidfd as it is made.
 * Returns the pid, or -errno with a cause.
 */
static pid_t
spawn_clone(struct child_args *a, char *stack, size_t stacklen, char *cause,
    size_t causelen)
{
	pid_t	pid;
	int	error;
#if defined(__x86_64__)
	struct pty_clone_args	ca;
	long			ret;

	if ((a->spec->cgroup >= 0 && pty_clone3_ok) ||
	    (a->spec->cgroup < 0 && a->spec->watch != NULL && pty_watch_ok)) {
		memset(&ca, 0, sizeof ca);
		ca.flags = CLONE_VM | CLONE_VFORK;
		ca.exit_signal = SIGCHLD;
		ca.stack = (uint64_t)(uintptr_t)stack;
		ca.stack_size = stacklen;
		if (a->spec->cgroup >= 0) {
			ca.flags |= PTY_CLONE_INTO_CGROUP;
			ca.cgroup = (uint64_t)a->spec->cgroup;
		}
		if (a->spec->watch != NULL) {
			/* A child another thread can kill before exec. */
			ca.flags |= PTY_CLONE_PIDFD | CLONE_PARENT_SETTID;
			ca.pidfd = (uint64_t)(uintptr_t)&a->spec->watch->pidfd;
			ca.parent_tid = (uint64_t)(uintptr_t)
			    &a->spec->watch->pid;
		}
		if ((ret = pty_clone3(&ca, pty_child_run, a)) >= 0)
			return (pid_t)ret;
		if (ret != -ENOSYS && ret != -E2BIG && ret != -EINVAL) {
			pty_cause(cause, causelen, "clone3%s: %s",
			    a->spec->cgroup >= 0 ? " into cgroup" : "",
			    strerror((int)-ret));
			return (pid_t)ret;
		}
		/* Older than 5.7: the child joins; than 5.3: no watch. */
		if (a->spec->cgroup >= 0)
			pty_clone3_ok = 0;
		if (a->spec->cgroup < 0 || ret == -ENOSYS)
			pty_watch_ok = 0;
	}
#endif
	if (a->spec->cgroup >= 0 && (a->procs = openat(a->spec->cgroup,
	    "cgroup.procs", O_WRONLY | O_CLOEXEC)) == -1) {
		error = errno;
		pty_cause(cause, causelen, "cgroup.procs: %s", strerror(error));
		return -error;
	}
	pid = clone(pty_child_run, stack + stacklen,
	    CLONE_VM | CLONE_VFORK | SIGCHLD, a);
	if (pid == -1) {
		error = errno;
		pty_cause(cause, causelen, "clone: %s", strerror(error));
		return -error;
	}
	return pid;
}

/*
 * Whether a child's oom_score_adj must be written: it differs from ours,
 * which it inherits (or ours cannot be read).  A process that changed
 * credentials may not write its own, so one that keeps ours never tries.
 */
static int
oom_differs(int want)
{
	char	buf[16];
	ssize_t	n;
	int	fd;

	if ((fd = open(PTY_OOM_PATH, O_RDONLY | O_CLOEXEC)) == -1)
		return errno != ENOENT;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = '\0';
	return atoi(buf) != want;
}

/* Start a child on a PTY or pipes; see pty.h. */
int
pty_spawn(const struct pty_spec *spec, struct pty_proc *proc, char *cause,
    size_t causelen)
{
	struct spawn_fds	f;
	struct child_report	rep;
	struct child_args	args;
	sigset_t		all, old;
	/* The child's stack; the stack grows down on every Linux target. */
	union {
		char		b[PTY_CHILD_STACK];
		max_align_t	align;
	} stack;
	char			slave[PATH_MAX] = "";
	pid_t			pid;
	int			p[2], error;

	proc->pid = -1;
	proc->master = proc->in = proc->out = proc->err = -1;
	if ((error = spec_check(spec, cause, causelen)) != 0)
		return error;

	fds_init(&f);
	if (spec->tty)
		error = open_master(&f, spec, slave, sizeof slave, cause,
		    causelen);
	else
		error = open_pipes(&f, spec, cause, causelen);
	if (error != 0)
		goto fail;
	if (pipe2(p, O_CLOEXEC) == -1) {
		error = -errno;
		pty_cause(cause, causelen, "pipe2: %s", strerror(-error));
		goto fail;
	}
	f.rep_r = p[0];
	f.rep_w = p[1];
	/* The child keeps rep_w through its dup2 onto 0-2 and close_range. */
	if ((error = pty_fd_lift(&f.rep_w)) != 0) {
		pty_cause(cause, causelen, "F_DUPFD: %s", strerror(-error));
		goto fail;
	}

	/*
	 * With every signal blocked, no handler of ours runs in the child
	 * before it has reset the dispositions.
	 */
	sigfillset(&all);
	if ((error = pthread_sigmask(SIG_SETMASK, &all, &old)) != 0) {
		error = -error;
		pty_cause(cause, causelen, "sigmask: %s", strerror(-error));
		goto fail;
	}
	args.spec = spec;
	args.f = f;
	args.slave = slave;
	args.path = env_path(spec->envp);
	args.procs = -1;
	args.oom = oom_differs(spec->oom_score_adj);
	/* Returns once the child has exec'd or exited (CLONE_VFORK). */
	pid = spawn_clone(&args, stack.b, sizeof stack.b, cause, causelen);
	PTY_STACK_CLEAN(stack.b, sizeof stack.b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (args.procs != -1)
		close(args.procs);
	if (pid < 0) {
		error = pid;
		goto fail;
	}

	/* Drop the child's ends: no slave, no pipe end stays in the parent. */
	fd_close(&f.rep_w);
	fd_close(&f.in_r);
	fd_close(&f.out_w);
	fd_close(&f.err_w);

	if (report_read(f.rep_r, &rep)) {
		wait_child(pid);
		report_cause(&rep, spec, slave, cause, causelen);
		error = rep.err > 0 ? -rep.err : -ECHILD;
		goto fail;
	}
	fd_close(&f.rep_r);

	proc->pid = pid;
	proc->master = f.master;
	proc->in = f.in_w;
	proc->out = f.out_r;
	proc->err = f.err_r;
	return 0;

fail:
	fds_close(&f);
	return error;
}

/* Close every fd of proc that is open. */
void
pty_close(struct pty_proc *proc)
{
	fd_close(&proc->master);
	fd_close(&proc->in);
	fd_close(&proc->out);
	fd_close(&proc->err);
}

/* Set a PTY master's window size. */
int
pty_resize(int master, unsigned short rows, unsigned short cols)
{
	struct winsize	ws;

	if (rows == 0 || cols == 0)
		return -EINVAL;
	memset(&ws, 0, sizeof ws);
	ws.ws_row = rows;
	ws.ws_col = cols;
	if (ioctl(master, TIOCSWINSZ, &ws) == -1)
		return -errno;
	return 0;
}

/* The EOF character of the terminal behind a PTY master. */
int
pty_veof(int master)
{
	struct termios	t;

	/* On Linux, termios of a master are those of its slave. */
	if (tcgetattr(master, &t) == -1 || t.c_cc[VEOF] == _POSIX_VDISABLE)
		return PTY_VEOF_DEFAULT;
	return t.c_cc[VEOF];
}

/* The value of PATH in an environment, or the default search path. */
static const char *
env_path(char *const *envp)
{
	for (; *envp != NULL; envp++) {
		if (strncmp(*envp, "PATH=", 5) == 0)
			return *envp + 5;
	}
	return PTY_PATH_DEFAULT;
}
