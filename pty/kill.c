/*
 * kill.c -- signals to what a session left: its process group, every
 * process of its sessions (found in /proc), the foreground of its PTY.
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

/* pidfd_send_signal(2) is Linux 5.1, pidfd_open(2) 5.3: the same table. */
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal	424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open		434
#endif

/* pidfd_open(2), by its number. */
int
pty_pidfd_open(pid_t pid)
{
	return ((int)syscall(SYS_pidfd_open, pid, 0U));
}

/* pidfd_send_signal(2), by its number. */
int
pty_pidfd_signal(int pidfd, int sig)
{
	return ((int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0U));
}

static int	 kill_scan(const pid_t *, size_t, pid_t, int);
static int	 proc_match(pid_t, const pid_t *, size_t, pid_t);
static int	 sid_in(pid_t, const pid_t *, size_t);

/* Signal a process group. */
int
pty_kill_group(pid_t pgid, int sig)
{
	/* kill(-1) would reach every process, kill(0) our own group. */
	if (pgid <= 1)
		return -EINVAL;
	if (kill(-pgid, sig) == -1)
		return -errno;
	return 0;
}

/*
 * Signal every process of some sessions: each leader's group, then the
 * members of their other groups, each through a pidfd.
 */
int
pty_kill_sessions(const pid_t *sids, size_t nsids, int sig)
{
	size_t	i;
	int	hit = 0;

	for (i = 0; i < nsids; i++) {
		if (sids[i] > 1 && kill(-sids[i], sig) == 0)
			hit = 1;
	}
	if (kill_scan(sids, nsids, 0, sig) == 0)
		hit = 1;
	return hit ? 0 : -ESRCH;
}

/*
 * Signal, each through a pidfd, the processes of the sessions sids that
 * are in group pgrp, or with pgrp 0 in any group but their session's own
 * (which kill(-sid) reaches).  The pidfd names the process that had the
 * pid when it was opened; if that one still matches after, it is the one
 * meant (a pid reused in between is never signalled); if it died
 * meanwhile, the signal is ESRCH.  0 when one was signalled, else -ESRCH.
 */
static int
kill_scan(const pid_t *sids, size_t nsids, pid_t pgrp, int sig)
{
	DIR		*proc;
	struct dirent	*d;
	pid_t		 pid;
	int		 pfd, hit = 0;

	if (!pty_proc_own() || (proc = opendir("/proc")) == NULL)
		return -ESRCH;
	while ((d = readdir(proc)) != NULL) {
		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		pid = (pid_t)strtol(d->d_name, NULL, 10);
		if (!proc_match(pid, sids, nsids, pgrp))
			continue;
		pfd = pty_pidfd_open(pid);
		if (pfd == -1 && errno == ENOSYS)
			break;
		if (pfd == -1)
			continue;
		if (proc_match(pid, sids, nsids, pgrp) &&
		    pty_pidfd_signal(pfd, sig) == 0)
			hit = 1;
		close(pfd);
	}
	closedir(proc);
	return hit ? 0 : -ESRCH;
}

/* Whether /proc shows our own PID namespace. */
int
pty_proc_own(void)
{
	char	buf[32];
	ssize_t	n;

	if ((n = readlink("/proc/self", buf, sizeof buf - 1)) <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10) == (long)getpid();
}

/*
 * Whether process pid is in one of the sessions sids and in group pgrp (0:
 * any group but its session's own).  Two system calls, where reading
 * /proc/PID/stat costs ten times that (it renders some fifty fields); the
 * session first, which rules out most.  A zombie still has both; signalling
 * it does nothing.
 */
static int
proc_match(pid_t pid, const pid_t *sids, size_t nsids, pid_t pgrp)
{
	pid_t	sid, g;

	if (!sid_in(sid = getsid(pid), sids, nsids) || (g = getpgid(pid)) == -1)
		return 0;
	return pgrp != 0 ? g == pgrp : g != sid;
}

/* Whether sid is one of sids (and a session one may signal). */
static int
sid_in(pid_t sid, const pid_t *sids, size_t nsids)
{
	size_t	i;

	if (sid <= 1)
		return 0;
	for (i = 0; i < nsids; i++) {
		if (sids[i] == sid)
			return 1;
	}
	return 0;
}

/* Signal the foreground process group of a PTY's terminal. */
int
pty_kill_foreground(int master, pid_t sid, int sig)
{
	pid_t	pgrp;

	if ((pgrp = tcgetpgrp(master)) == -1)
		return -errno;
	if (pgrp <= 1)
		return -ESRCH;
	if (sig == SIGINT || sig == SIGQUIT || sig == SIGTSTP) {
		/* TIOCSIG says 0 to a group with nobody left: look first. */
		if (kill(-pgrp, 0) == -1 && errno == ESRCH)
			return -ESRCH;
		if (ioctl(master, TIOCSIG, sig) == 0)
			return 0;
		if (errno != EINVAL)
			return -errno;
		/* An old kernel without TIOCSIG: as for any signal. */
	}
	/*
	 * The terminal only takes groups of its session; a live leader in the
	 * session pins the pgid, so it is that group, not a reuse.  A leader
	 * that is gone (the first command of a pipeline that ended) pins
	 * nothing: then each member still in the session, through a pidfd.
	 */
	if (getsid(pgrp) != sid || getpgid(pgrp) != pgrp)
		return kill_scan(&sid, 1, pgrp, sig);
	if (kill(-pgrp, sig) == -1)
		return -errno;
	return 0;
}
