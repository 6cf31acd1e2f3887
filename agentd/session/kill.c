/*
 * kill.c -- ending sessions: signals to a group or its foreground, the
 * timeout, the grace before SIGKILL, the TTL of an exited session, and the
 * removal of one session or all.
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

static void	session_kill(struct session *, int sig);

/* The exit cap passed with the output still open. */
void
session_drain_cb(evutil_socket_t fd, short events, void *arg)
{
	session_check_exit(arg, 1);
}

/*
 * Signal every process of the session, if it may still have any: its
 * process group and the groups an interactive shell made for its jobs.
 */
static void
session_kill(struct session *s, int sig)
{
	/*
	 * The leader is unreaped (alive or a zombie) until released, so its
	 * pid, the group's and the session's id, cannot belong to anyone
	 * else.  Once released, it may: never signal it again.
	 */
	if (s->released)
		return;
	if (s->cg != NULL) {
		/* The cgroup holds all it started, setsid or not. */
		if (cgroup_session_signal(s->cg, sig) > 0) {
			log_debug("%s: session %s: cgroup signal %d", __func__,
			    s->id, sig);
			if (sig == SIGKILL)
				agentd_stats.cgroup_kills++;
		}
	} else if (pty_kill_sessions(&s->pid, 1, sig) == 0)
		log_debug("%s: session %s: signal %d", __func__, s->id, sig);
	if (sig == SIGKILL)
		s->killed = 1;
}

/* Send sig to every process of the session (envd's SendSignal). */
int
session_signal_all_of(struct session *s, int sig, struct proto_err *err)
{
	if (s->exited)
		return (proto_fail(err, 409, "session_exited",
		    "session '%s' has exited", s->id));
	session_kill(s, sig);
	return (0);
}

/* timeout_ms passed: SIGTERM now, SIGKILL later. */
void
session_timeout_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session	*s = arg;

	if (s->exited)
		return;
	log_info("%s: session %s timed out", __func__, s->id);
	s->timed_out = 1;
	session_kill(s, SIGTERM);
	session_timer_add(s->kill_ev, SESSION_KILL_AFTER_MS);
}

/* The grace after SIGTERM is over. */
void
session_kill_cb(evutil_socket_t fd, short events, void *arg)
{
	session_kill(arg, SIGKILL);
	session_sweep_soon(1);	/* a DELETE waits for the release */
}

/* An exited session's time is up: its leftovers get the usual grace. */
void
session_ttl_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session	*s = arg;

	log_debug("%s: session %s expired", __func__, s->id);
	session_terminate(s, SESSION_KILL_AFTER_MS);
	session_remove(s);
}

/* Send a signal to the session's process group, or to the foreground's. */
int
session_signal(struct session *s, int signo, int target,
    struct proto_err *err)
{
	int	error;

	if (target == PROTO_TARGET_FOREGROUND && !s->tty)
		return (proto_fail(err, 409, "not_a_tty",
		    "session '%s' has no tty: no foreground group", s->id));
	if (s->exited)
		return (proto_fail(err, 409, "session_exited",
		    "session '%s' has exited", s->id));
	if (target == PROTO_TARGET_FOREGROUND) {
		error = s->out[0].fd == -1 ? -ENOTTY :
		    pty_kill_foreground(s->out[0].fd, s->pid, signo);
		if (error != 0)
			return (proto_fail(err, 409, "no_foreground",
			    "session '%s' has no foreground process group: %s",
			    s->id, strerror(-error)));
		return (0);
	}
	if (s->released)
		return (0);	/* leader reaped: nothing of it to signal */
	if ((error = pty_kill_group(s->pid, signo)) != 0 && error != -ESRCH)
		return (proto_fail(err, 409, "session_exited", "kill: %s",
		    strerror(-error)));
	return (0);
}

/*
 * Begin a DELETE or a TTL removal: SIGHUP (a running tty) and SIGTERM to the
 * group, SIGKILL after grace_ms.  An exited session's group may hold
 * leftover background processes: they get the same.
 */
void
session_terminate(struct session *s, int64_t grace_ms)
{
	if (s->terminating)
		return;
	s->terminating = 1;
	s->kill_at_ms = clock_mono_ms() + (grace_ms > 0 ? grace_ms : 0);
	/*
	 * The hangup is the terminal's, for the group it would reach; with
	 * no grace, SIGTERM to the jobs of other groups would come with
	 * their SIGKILL.  Each look at /proc for them costs a system call
	 * per process of the machine: one per signal that needs it.
	 */
	if (!s->released && s->tty && !s->exited)
		pty_kill_group(s->pid, SIGHUP);
	if (grace_ms <= 0) {
		if (!s->released)
			pty_kill_group(s->pid, SIGTERM);
		session_kill(s, SIGKILL);
	} else {
		session_kill(s, SIGTERM);
		event_del(s->kill_ev);
		session_timer_add(s->kill_ev, grace_ms);
	}
	session_sweep_soon(1);	/* it may be empty already */
}

/* Free a session, killing what remains of its group. */
void
session_remove(struct session *s)
{
	struct ring_stats	st;
	size_t			i;

	session_notify(s, SESSION_EV_REMOVED);
	ring_stats(s->ring, &st);
	agentd_stats.output_dropped_bytes += st.bytes_dropped;
	if (!s->released)	/* the rest of the grace, else SIGKILL now */
		session_bury(s, s->terminating ?
		    s->kill_at_ms - clock_mono_ms() : 0);
	for (i = 0; i < 2; i++) {
		if (s->out[i].ev != NULL)
			event_free(s->out[i].ev);
		if (s->out[i].fd != -1)
			close(s->out[i].fd);
	}
	if (s->in_ev != NULL)
		event_free(s->in_ev);
	if (s->in != -1 && !s->tty)
		close(s->in);
	evbuffer_free(s->inq);
	event_free(s->timeout_ev);
	event_free(s->kill_ev);
	event_free(s->drain_ev);
	event_free(s->ttl_ev);
	event_free(s->hup_ev);
	event_free(s->hold_ev);
	if (!s->exited)
		nrunning--;
	ring_total -= s->ring_bytes;
	kept_total -= s->kept_bytes;
	TAILQ_REMOVE(&sessions, s, entry);
	log_debug("%s: session %s removed", __func__, s->id);

	ring_free(s->ring);
	session_strv_free(s->argv);
	free(s->cwd);
	free(s->user);
	free(s->tag);
	free(s->resizes);
	free(s);
}

/*
 * Send sig to every session that may still have processes (tty ones only?),
 * with one look at /proc for all of them.
 */
void
session_signal_all(int sig, int tty_only)
{
	struct session		*s;
	struct session_corpse	*c;
	pid_t			*sids;
	size_t			 n = 0, cap = 0;

	TAILQ_FOREACH(s, &sessions, entry)
		cap++;
	LIST_FOREACH(c, &corpses, entry)
		cap++;
	if (cap == 0)
		return;
	sids = xcalloc(cap, sizeof *sids);
	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->released || (tty_only && !s->tty))
			continue;
		if (s->cg != NULL && !tty_only)
			session_kill(s, sig);	/* the whole cgroup */
		else
			sids[n++] = s->pid;
	}
	if (!tty_only) {
		LIST_FOREACH(c, &corpses, entry) {
			if (c->cg == NULL)
				sids[n++] = c->pid;
			else if (cgroup_session_signal(c->cg, sig) > 0 &&
			    sig == SIGKILL)
				agentd_stats.cgroup_kills++;
		}
	}
	pty_kill_sessions(sids, n, sig);
	free(sids);
}

/* Remove every session; SIGKILL what is left of every group. */
void
session_remove_all(void)
{
	struct session		*s;
	struct session_corpse	*c;

	session_create_cancel_all();
	removing_all = 1;
	while ((s = TAILQ_FIRST(&sessions)) != NULL)
		session_remove(s);
	while ((c = LIST_FIRST(&corpses)) != NULL) {
		if (!c->killed && c->cg != NULL)
			cgroup_session_signal(c->cg, SIGKILL);
		else if (!c->killed)
			pty_kill_group(c->pid, SIGKILL);
		session_corpse_free(c, 1);
	}
	removing_all = 0;
	event_del(sweep_ev);	/* kept: fuzz_http empties the table often */
}
