/*
 * reap.c -- a session's exit: the exit rule, the leader's status (left a
 * zombie until its group is done with), the corpses of removed sessions
 * and the sweep of leaders pinned by their group.
 */

#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/capability.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "cgroup.h"
#include "log.h"
#include "pty.h"
#include "ringbuf.h"
#include "session.h"
#include "session_int.h"
#include "spawner.h"
#include "stats.h"
#include "stop.h"
#include "util.h"

#define SESSION_SWEEP_MS	20	/* sweep pinned leaders after a reap */
#define SESSION_SWEEP_MAX_MS	1000	/* backed off to while none is released */

static int64_t			 sweep_ms = SESSION_SWEEP_MS;

static int	session_proc_live(pid_t);
static int	session_pid_cmp(const void *, const void *);
static void	session_release(struct session *);
static void	session_check_gone(struct session *);
static int	session_corpse_done(struct session_corpse *);

/*
 * Apply the exit rule: exited once the status is in and the output is
 * drained, or (capped) SESSION_DRAIN_CAP_MS after the status.
 */
void
session_check_exit(struct session *s, int capped)
{
	size_t	i;
	int	closed;

	if (s->exited || !s->reaped)
		return;
	if (s->nopen > 0 && !capped)
		return;
	if (s->nopen > 0) {
		/* Capture what the process wrote before it exited. */
		for (i = 0; i < 2; i++) {
			if (s->out[i].fd == -1)
				continue;
			closed = session_capture(&s->out[i], SIZE_MAX);
			if (closed)
				session_close_out(&s->out[i]);
		}
		session_flush(s);
		session_notify(s, SESSION_EV_OUTPUT);
	}
	s->exited = 1;
	s->ended_ms = clock_wall_ms();
	nrunning--;
	event_del(s->drain_ev);
	event_del(s->timeout_ev);
	/*
	 * A timeout's or a DELETE's SIGKILL still reaches what the leader
	 * left behind (a job ignoring the SIGTERM that ended the leader).
	 */
	if (s->nopen == 0 && !s->timed_out && !s->terminating)
		event_del(s->kill_ev);
	session_usage_read(s, 1);
	if (!s->tty)
		session_close_stdin(s);
	session_timer_add(s->ttl_ev, limits.exited_ttl_ms);
	log_info("%s: session %s exited, status %#x", __func__, s->id,
	    s->status);
	session_notify(s, SESSION_EV_EXITED);
	if (s->remove_on_exit)
		session_remove(s);	/* the observer may have asked for it */
	else
		session_check_gone(s);
}

/*
 * Tell the observer once the session has exited and none of its processes
 * is left; remove it then if the observer asked.
 */
static void
session_check_gone(struct session *s)
{
	if (s->gone || !session_gone(s))
		return;
	s->gone = 1;
	session_notify(s, SESSION_EV_GONE);
	if (s->remove_on_exit)
		session_remove(s);
}

/*
 * Nothing of the session is left to signal: take its final usage, remove
 * its cgroup, reap the leader (a zombie), then tell who waits.
 */
static void
session_release(struct session *s)
{
	log_debug("%s: session %s: releasing pid %ld", __func__, s->id,
	    (long)s->pid);
	if (s->cg != NULL) {
		session_usage_read(s, 1);
		cgroup_session_free(s->cg);
		s->cg = NULL;
	}
	if (s->restored != 2)	/* else agentd's reaper took it (upgrade) */
		waitpid(s->pid, NULL, WNOHANG);
	s->released = 1;
	session_check_gone(s);
}

/* Remove the session once it has exited and the observer has seen it. */
void
session_set_remove_on_exit(struct session *s)
{
	s->remove_on_exit = 1;
}

/* A leader's status came in (it stays a zombie until released). */
void
session_status_in(struct session *s, int status)
{
	struct session_out	*o = &s->out[0];

	s->reaped = 1;
	s->status = status;
	if (s->hup) {
		/* Its terminal is gone with it: read what is left, close. */
		event_del(s->hup_ev);
		s->hup = 0;
		if (session_capture(o, SIZE_MAX)) {
			session_notify(s, SESSION_EV_OUTPUT);
			session_close_out(o);
		} else
			event_add(o->ev, NULL);	/* /dev/tty reopened */
	}
	if (s->nopen > 0)
		session_timer_add(s->drain_ev, SESSION_DRAIN_CAP_MS);
	session_check_exit(s, 0);
}

/* The status of a child that has exited, leaving it a zombie: 1, else 0. */
int
session_waitid(pid_t pid, int *status)
{
	siginfo_t	si;

	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == -1 ||
	    si.si_pid != pid)
		return (0);
	switch (si.si_code) {
	case CLD_EXITED:
		*status = (si.si_status & 0xff) << 8;
		break;
	case CLD_DUMPED:
		*status = (si.si_status & 0x7f) | 0x80;
		break;
	default:
		*status = si.si_status & 0x7f;
		break;
	}
	return (1);
}

/* The status of the leader pid came in; 0 when pid is a session's. */
int
session_reaped(pid_t pid, int status)
{
	struct session	*s;

	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->pid == pid && !s->reaped) {
			session_status_in(s, status);
			return (0);
		}
	}
	return (-1);
}

/*
 * Called after every SIGCHLD: take the status of each leader that ended
 * (sessions and corpses), then sweep soon for leaders whose session has no
 * live process left.
 */
void
session_collect(void)
{
	struct session		*s, *next;
	struct session_corpse	*c, *cnext;
	int			 status, fresh = 0;

	for (s = TAILQ_FIRST(&sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, entry);
		if (!s->reaped && session_waitid(s->pid, &status)) {
			session_status_in(s, status);
			fresh = 1;
		}
	}
	for (c = LIST_FIRST(&corpses); c != NULL; c = cnext) {
		cnext = LIST_NEXT(c, entry);
		if (c->reaped || !session_waitid(c->pid, &status))
			continue;
		c->reaped = 1;
		fresh = 1;
		if (session_corpse_done(c))
			session_corpse_free(c, 1);
	}
	session_sweep_soon(fresh);
}

/*
 * Keep a removed session's unreleased leader until its group's SIGKILL, in
 * ms (now when ms <= 0), then reap it.  The output fds go with it, unread:
 * leftovers writing a last word during the grace get no SIGPIPE for it.
 */
void
session_bury(struct session *s, int64_t ms)
{
	struct session_corpse	*c;
	pid_t			 pid = s->pid;
	size_t			 i;

	c = xcalloc(1, sizeof *c);
	c->pid = pid;
	c->reaped = s->reaped;
	/* The session's own SIGKILL reached all its groups already. */
	c->wide = !s->killed;
	c->cg = s->cg;
	s->cg = NULL;
	for (i = 0; i < 2; i++) {
		c->fds[i] = ms > 0 ? s->out[i].fd : -1;
		if (c->fds[i] == -1)
			continue;
		event_free(s->out[i].ev);
		s->out[i].ev = NULL;
		s->out[i].fd = -1;
	}
	if ((c->kill_ev = evtimer_new(session_base, session_corpse_cb,
	    c)) == NULL)
		fatal("%s: out of memory", __func__);
	LIST_INSERT_HEAD(&corpses, c, entry);
	if (ms > 0) {
		log_debug("%s: pid %ld: group SIGKILL in %lld ms", __func__,
		    (long)pid, (long long)ms);
		session_timer_add(c->kill_ev, ms);
	} else
		session_corpse_cb(-1, 0, c);
}

/*
 * Keep a cgroup whose processes are not the loop's to reap (an abandoned
 * spawn's child) until cgroup.kill has emptied it, then remove it.
 */
void
session_bury_cgroup(struct cgroup *cg)
{
	struct session_corpse	*c;

	log_info("%s: cgroup %s: killing what is left of a spawn given up",
	    __func__, cgroup_session_name(cg));
	c = xcalloc(1, sizeof *c);
	c->reaped = 1;			/* no leader: pid 0 */
	c->fds[0] = c->fds[1] = -1;
	c->cg = cg;
	if ((c->kill_ev = evtimer_new(session_base, session_corpse_cb,
	    c)) == NULL)
		fatal("%s: out of memory", __func__);
	LIST_INSERT_HEAD(&corpses, c, entry);
	session_corpse_cb(-1, 0, c);	/* frees c if already empty */
	session_sweep_soon(1);
}

/* A corpse's grace is over: SIGKILL its group, then reap the leader. */
void
session_corpse_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session_corpse	*c = arg;
	size_t			 i;

	/* At the end of session_remove_all() the SIGKILL went out already. */
	if (c->cg != NULL) {
		if (cgroup_session_signal(c->cg, SIGKILL) > 0)
			agentd_stats.cgroup_kills++;
	} else if (c->wide && !removing_all)
		pty_kill_sessions(&c->pid, 1, SIGKILL);
	else
		pty_kill_group(c->pid, SIGKILL);
	c->killed = 1;
	for (i = 0; i < 2; i++) {
		if (c->fds[i] != -1)
			close(c->fds[i]);
		c->fds[i] = -1;
	}
	if (session_corpse_done(c))
		session_corpse_free(c, 1);
	/* Else the leader is dying: session_collect() reaps it; a
	   cgroup's last processes: the sweep. */
}

/* Whether a corpse is over: killed, reaped, its cgroup (if any) empty. */
static int
session_corpse_done(struct session_corpse *c)
{
	return (c->killed && c->reaped &&
	    (c->cg == NULL || cgroup_session_populated(c->cg) <= 0));
}

/* Forget a corpse; reap its leader (a zombie by now) if asked. */
void
session_corpse_free(struct session_corpse *c, int reap)
{
	size_t	i;

	if (reap && c->reaped && c->pid > 0)
		waitpid(c->pid, NULL, WNOHANG);
	if (c->cg != NULL) {
		/* At shutdown, wait a little for cgroup.kill to finish. */
		if (removing_all &&
		    cgroup_session_wait_empty(c->cg, CGROUP_WAIT_EMPTY_MS) != 0)
			log_warn("%s: cgroup %s not empty", __func__,
			    cgroup_session_name(c->cg));
		cgroup_session_free(c->cg);
	}
	for (i = 0; i < 2; i++) {
		if (c->fds[i] != -1)
			close(c->fds[i]);
	}
	LIST_REMOVE(c, entry);
	event_free(c->kill_ev);
	free(c);
}

/*
 * Sweep in a moment if some leader waits to be released: soon after a
 * leader ended (fresh), else (orphans reaped) after a delay that doubles
 * while sweeps release nothing, so a stream of orphans next to a long-lived
 * leftover costs at most a sweep a second.
 */
void
session_sweep_soon(int fresh)
{
	struct session	*s;
	int		 pending = !LIST_EMPTY(&corpses);

	if (sweep_ev == NULL)
		return;
	TAILQ_FOREACH(s, &sessions, entry) {
		if (!s->reaped || s->released)
			continue;
		pending = 1;
		/* A DELETE waits for the release: no back-off. */
		if (s->terminating)
			fresh = 1;
	}
	if (fresh && sweep_ms > SESSION_SWEEP_MS) {
		sweep_ms = SESSION_SWEEP_MS;
		event_del(sweep_ev);
	}
	if (pending && !evtimer_pending(sweep_ev, NULL))
		session_timer_add(sweep_ev, sweep_ms);
}

/* Order pids for qsort() and bsearch(). */
static int
session_pid_cmp(const void *a, const void *b)
{
	pid_t	x = *(const pid_t *)a, y = *(const pid_t *)b;

	return ((x > y) - (x < y));
}

/*
 * Whether process pid is live: not a zombie of one thread ("pid (comm)
 * state ... num_threads", the 3rd and 20th fields of /proc/PID/stat).  A
 * zombie whose threads still run (its main thread called pthread_exit())
 * is live; only a zombie of one thread, itself, is over.  A process gone
 * meanwhile is not live.
 */
static int
session_proc_live(pid_t pid)
{
	char		 buf[512], *end;
	const char	*p;
	long		 nthreads;

	if ((p = proc_stat(pid, buf, sizeof buf)) == NULL ||
	    *p == 'X' || *p == 'x')
		return (0);
	if (*p != 'Z')
		return (1);
	if ((p = proc_stat_skip(p, 20 - 3)) == NULL)
		return (0);
	nthreads = strtol(p, &end, 10);
	return (end != p && nthreads > 1);
}

/*
 * Release the zombie leaders whose session has no live process left.  Each
 * process of the machine costs one getsid(); only those in a session whose
 * leader is pinned have their /proc/PID/stat read, to tell the live from
 * the zombies.  Nothing can join a session but a child of one of its
 * processes, so a session with no live process stays empty, and its group
 * can never need a signal again.  A miss (a process forked during the scan)
 * only means leftovers escape the final SIGKILL; a released pid is never
 * signalled, so no miss can make agentd signal a stranger.
 */
void
session_sweep_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session		*s, *snext;
	struct session_corpse	*c, *cnext;
	struct dirent		*d;
	DIR			*proc = NULL;
	pid_t			*want, *busy = NULL, pid, sid;
	size_t			 nwant = 0, nbusy = 0, cap = 0, i, released = 0;

	/* A cgroup says itself whether a process of it is left. */
	for (s = TAILQ_FIRST(&sessions); s != NULL; s = snext) {
		snext = TAILQ_NEXT(s, entry);
		if (s->cg != NULL && s->reaped && !s->released &&
		    cgroup_session_populated(s->cg) <= 0) {
			session_release(s);
			released++;
		}
	}
	for (c = LIST_FIRST(&corpses); c != NULL; c = cnext) {
		cnext = LIST_NEXT(c, entry);
		if (c->cg != NULL && session_corpse_done(c)) {
			session_corpse_free(c, 1);
			released++;
		}
	}

	TAILQ_FOREACH(s, &sessions, entry)
		nwant += s->cg == NULL && s->reaped && !s->released;
	LIST_FOREACH(c, &corpses, entry)
		nwant += c->cg == NULL && c->reaped;
	if (nwant > 0 && !pty_proc_own()) {
		/*
		 * No /proc to look into: a DELETE's session gets its group's
		 * SIGKILL now, so that its leader can be reaped before the
		 * answer; the others wait for their removal.
		 */
		for (s = TAILQ_FIRST(&sessions); s != NULL; s = snext) {
			snext = TAILQ_NEXT(s, entry);
			if (s->cg == NULL && s->reaped && !s->released &&
			    s->terminating) {
				pty_kill_group(s->pid, SIGKILL);
				session_release(s);
				released++;
			}
		}
		goto out;
	}
	if (nwant == 0 || (proc = opendir("/proc")) == NULL)
		goto out;
	want = xcalloc(nwant, sizeof *want);
	nwant = 0;
	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->cg == NULL && s->reaped && !s->released)
			want[nwant++] = s->pid;
	}
	LIST_FOREACH(c, &corpses, entry) {
		if (c->cg == NULL && c->reaped)
			want[nwant++] = c->pid;
	}
	qsort(want, nwant, sizeof *want, session_pid_cmp);

	/* The pinned sessions with a live process: few, whatever the load. */
	while ((d = readdir(proc)) != NULL) {
		if (!isdigit((unsigned char)d->d_name[0]))
			continue;
		pid = (pid_t)strtol(d->d_name, NULL, 10);
		if ((sid = getsid(pid)) <= 0 || bsearch(&sid, want, nwant,
		    sizeof *want, session_pid_cmp) == NULL ||
		    !session_proc_live(pid))
			continue;
		for (i = 0; i < nbusy && busy[i] != sid; i++)
			;
		if (i < nbusy)
			continue;
		if (nbusy == cap) {
			cap = cap == 0 ? 64 : cap * 2;
			busy = xrealloc(busy, cap * sizeof *busy);
		}
		busy[nbusy++] = sid;
	}
	closedir(proc);
	free(want);

	for (s = TAILQ_FIRST(&sessions); s != NULL; s = snext) {
		snext = TAILQ_NEXT(s, entry);
		if (s->cg != NULL || !s->reaped || s->released)
			continue;
		for (i = 0; i < nbusy && busy[i] != s->pid; i++)
			;
		if (i < nbusy)
			continue;
		session_release(s);
		released++;
	}
	for (c = LIST_FIRST(&corpses); c != NULL; c = cnext) {
		cnext = LIST_NEXT(c, entry);
		if (c->cg != NULL)
			continue;
		for (i = 0; i < nbusy && busy[i] != c->pid; i++)
			;
		if (c->reaped && i == nbusy) {
			session_corpse_free(c, 1);
			released++;
		}
	}
	free(busy);
out:
	if (released > 0)
		sweep_ms = SESSION_SWEEP_MS;
	else if ((sweep_ms *= 2) > SESSION_SWEEP_MAX_MS)
		sweep_ms = SESSION_SWEEP_MAX_MS;
	/*
	 * A DELETE's SIGKILL went out and it waits for the release: look
	 * again, whether or not a reap comes (an orphan's end is init's
	 * to see where agentd is no subreaper).
	 */
	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->terminating && s->killed && s->reaped && !s->released) {
			session_timer_add(sweep_ev, sweep_ms);
			break;
		}
	}
}

/*
 * The session a process belongs to.  With a cgroup per session, the one
 * whose cgroup holds it (a reparented daemon too).  Else the first of pid
 * and its ancestors (up to SESSION_PARENTS_MAX) whose session id (setsid)
 * is a session's leader, while that leader is unreleased (its pid cannot be
 * anyone else's).  So a process that left with setsid is still found
 * through its parent, unless that parent ended and it was reparented to
 * agentd or init.
 */
struct session *
session_of_pid(pid_t pid)
{
	struct session	*s;
	const char	*f;
	char		 buf[512];
	long		 ppid, sid;
	int		 depth;

	if (cgroup_enabled()) {
		if (cgroup_of_pid(pid, buf, sizeof buf) != 0)
			return (NULL);
		TAILQ_FOREACH(s, &sessions, entry) {
			if (s->cg != NULL &&
			    strcmp(cgroup_session_name(s->cg), buf) == 0)
				return (s);
		}
		return (NULL);
	}
	for (depth = 0; pid > 1 && depth < SESSION_PARENTS_MAX; depth++) {
		/* state ppid pgrp session */
		if ((f = proc_stat(pid, buf, sizeof buf)) == NULL ||
		    sscanf(f, "%*c %ld %*d %ld", &ppid, &sid) != 2)
			return (NULL);
		TAILQ_FOREACH(s, &sessions, entry) {
			if (s->pid == (pid_t)sid && !s->released)
				return (s);
		}
		pid = (pid_t)ppid;
	}
	return (NULL);
}

/*
 * A restored session's leader was reaped by agentd's reaper: after an
 * upgrade it is the main thread's child, which waitpid(-1) sees.  Its pid
 * may be anyone's from now on: the session is released (its group never
 * signalled again).  0 when pid was a restored session's leader.
 */
int
session_adopted_reaped(pid_t pid, int status)
{
	struct session	*s;

	TAILQ_FOREACH(s, &sessions, entry) {
		if (!s->restored || s->pid != pid || s->released)
			continue;
		s->restored = 2;	/* its pid is free: never waitpid() it */
		if (s->cg != NULL) {
			/*
			 * The cgroup, not the pid, reaches what is left: the
			 * sweep releases it once the cgroup is empty.
			 */
			session_sweep_soon(1);
			if (!s->reaped)
				session_status_in(s, status);	/* may free s */
			return (0);
		}
		s->released = 1;
		if (!s->reaped)
			session_status_in(s, status);	/* may free s */
		else
			session_check_gone(s);
		return (0);
	}
	return (-1);
}
