/*
 * pty.h -- spawning a session's process, on a PTY or on pipes.
 *
 * Plain POSIX and Linux: no libevent, no logging, no exit.  Functions return
 * 0 or -errno; those that can fail for a reason a user should read also fill
 * a caller's cause buffer ("cwd '/nope': No such file or directory").
 *
 * The child of pty_spawn() starts clean: it is the leader of a new session
 * and process group (setsid); with a PTY, the PTY is its controlling terminal
 * and its stdin, stdout and stderr; every signal disposition is SIG_DFL and
 * its signal mask is empty; no fd but 0-2 is open; it runs in the requested
 * cwd as the requested user (gid, supplementary groups, uid) with exactly the
 * given environment; its oom_score_adj is spec's (where /proc is mounted);
 * with spec->cgroup, it is in that cgroup before it runs anything of its
 * own: born there by clone3(CLONE_INTO_CGROUP) (Linux 5.7, x86-64), else
 * it writes itself into the cgroup's cgroup.procs first.  Exec errors come back to the parent through an
 * O_CLOEXEC pipe, so pty_spawn() fails (and no child remains) when the cwd,
 * the user or the exec fails.
 *
 * All fds handed back are O_CLOEXEC and O_NONBLOCK.
 */
#ifndef PTY_H
#define PTY_H

#include <sys/types.h>
#include <stddef.h>

#define PTY_CAUSE_MAX	256	/* bytes, a cause buffer's size */
#define PTY_GROUPS_MAX	64	/* supplementary groups kept for a user */

/* A user resolved in the parent, so the child does no lookups. */
struct pty_user {
	uid_t		 uid;
	gid_t		 gid;
	gid_t		 groups[PTY_GROUPS_MAX];
	int		 ngroups;
	char		 name[64];
	char		 home[256];
};

/*
 * Where the kernel writes, as the child is made (before pty_spawn()
 * returns, while it may still wait for a chdir or an execve that does not
 * answer), the child's pid and a pidfd of it: clone3 with CLONE_PIDFD and
 * CLONE_PARENT_SETTID (x86-64, Linux 5.3).  Another thread may then SIGKILL
 * a child stuck before its exec through the pidfd.  pid stays 0 where that
 * is not available.  The pidfd is valid, and the caller's to close, only
 * once pid is > 0: a clone that failed may have left there a number that is
 * not ours.
 */
struct pty_watch {
	_Atomic int	 pid;		/* 0, then the child's */
	_Atomic int	 pidfd;		/* valid once pid > 0 */
};

/* What to run, and how. */
struct pty_spec {
	char *const		*argv;		/* argv[0] searched in the PATH of envp */
	char *const		*envp;		/* the child's whole environment */
	const char		*cwd;		/* NULL: inherit */
	const struct pty_user	*user;		/* NULL: keep agentd's credentials */
	int			 tty;		/* 1: a PTY; 0: pipes */
	unsigned short		 rows, cols;	/* PTY size, 1..65535 */
	int			 stdin_null;	/* pipes only: stdin is /dev/null */
	int			 cgroup;	/* a cgroup v2 directory fd the
						   child starts in, or -1 */
	int			 oom_score_adj;	/* the child's, -1000..1000 */
	struct pty_watch	*watch;		/* or NULL; zeroed by the caller */
};

/* A running child and the parent's ends of its fds; -1 where there is none. */
struct pty_proc {
	pid_t		 pid;		/* also the process group and session id */
	int		 master;	/* tty: the PTY master (read output, write input) */
	int		 in;		/* pipes: write end of stdin */
	int		 out;		/* pipes: read end of stdout */
	int		 err;		/* pipes: read end of stderr */
};

/*
 * Resolve a user given by name or numeric uid (a uid with no passwd entry is
 * taken as uid = gid = that number, no groups, name the number, home "/").
 * groups holds the primary gid too; past PTY_GROUPS_MAX the rest are
 * dropped.  Returns 0, or -ENOENT with a cause for an unknown name, -EINVAL
 * for an empty spec, or the passwd lookup's error.
 */
int	pty_user_lookup(const char *spec, struct pty_user *out, char *cause,
	    size_t causelen);

/*
 * Note the signals whose disposition is not SIG_DFL now; children then
 * reset only those (else every signal, one system call each, while the
 * parent waits).  Call it once the caller's own dispositions are set and
 * before any thread spawns: a disposition changed later is not seen.
 */
void	pty_signals_snapshot(void);

/*
 * Start a child.  Signals are blocked in the parent across the clone and
 * restored before return.  Returns 0 and fills *proc, or -errno and writes the
 * reason to cause ("exec 'nope': No such file or directory", "cwd '/x': ...",
 * "user 'bob': setgid: ..."); on failure no fd is leaked, *proc is all -1 and
 * the child, if one was forked, has been reaped (a blocking waitpid on its
 * pid).  A bad spec (no argv[0], no envp, a 0 row/col with tty, ngroups
 * outside 0..PTY_GROUPS_MAX) is -EINVAL.
 *
 * Blocks until the child has exec'd or failed (for as long as a lease or
 * a file system that does not answer holds the child's chdir or execve:
 * agentd calls it on threads of its own, several at once, which is safe;
 * the child is the calling thread's).  The child switches user
 * (groups, gid, uid) before chdir, so the cwd is entered with the user's own
 * permissions; with a PTY and a user, the slave is chowned to that uid.
 */
int	pty_spawn(const struct pty_spec *, struct pty_proc *proc, char *cause,
	    size_t causelen);

/* Close every fd of proc that is open and set it to -1. */
void	pty_close(struct pty_proc *);

/* Set a PTY master's window size (the kernel sends SIGWINCH); 0: -EINVAL. */
int	pty_resize(int master, unsigned short rows, unsigned short cols);

/* The terminal's EOF character (VEOF) of a PTY master, or 4 (^D). */
int	pty_veof(int master);

/*
 * Send sig to the process group pgid.  Returns 0 or -errno (-ESRCH: gone);
 * pgid <= 1 is -EINVAL (kill(-1) would reach every process).
 */
int	pty_kill_group(pid_t pgid, int sig);

/*
 * Send sig to every process of the sessions sids (each the pid of its
 * leader, which the caller keeps unreaped, or whose id it knows held by a
 * live process of the session, so that the id names no other session):
 * kill(-sid) for the leader's group, then each process of another
 * group of the session, as /proc shows it (an interactive shell runs each
 * job in a group of its own, and `nohup job &` there outlives a SIGHUP).
 * Those are signalled through a pidfd opened before their session is read
 * again, so a pid reused in between is never signalled.  Without /proc of
 * our own PID namespace, or without pidfds (Linux < 5.3), only the leaders'
 * groups.  Returns 0 when some process was signalled, else -ESRCH; a sid
 * <= 1 is skipped.
 */
int	pty_kill_sessions(const pid_t *sids, size_t nsids, int sig);

/* Whether /proc shows our own PID namespace (a scan of it finds our pids). */
int	pty_proc_own(void);

/*
 * Send sig to the foreground process group of the terminal behind a PTY
 * master, if that group belongs to the session sid.  SIGINT, SIGQUIT and
 * SIGTSTP go through TIOCSIG, as the terminal's own keys would (the kernel
 * signals the group it holds: no pgid reuse is possible).  Other signals:
 * tcgetpgrp(), then kill(-pgrp) if the group's leader is alive in the
 * session sid (a live leader pins the pgid; only a pid wrap-around between
 * that check and the kill, two system calls, could defeat it); if the
 * leader is gone, each member of the group in the session, found in /proc
 * and signalled through a pidfd.  Returns 0 or -errno: -ESRCH when there is
 * no such group (no foreground, or no process left in it), -ENOTTY/-EIO
 * once hung up.
 */
int	pty_kill_foreground(int master, pid_t sid, int sig);

/*
 * pidfd_open(2) (Linux 5.3) and pidfd_send_signal(2) (5.1) by their numbers,
 * which libcs name late or not at all.  As the system calls: a pidfd or -1,
 * 0 or -1, with errno (ENOSYS before those kernels).
 */
int	pty_pidfd_open(pid_t pid);
int	pty_pidfd_signal(int pidfd, int sig);

#endif /* PTY_H */
