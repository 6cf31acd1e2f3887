/*
 * session.c -- the session table: set up, find, count and view sessions;
 * the rest of a session's life is in create.c (spawn and attach),
 * capture.c (output into the ring), stdin.c, kill.c (signals, timers,
 * removal) and reap.c (the exit rule, statuses, corpses and the sweep).
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
#include "turn.h"
#include "util.h"

#define SESSION_USAGE_MS	50	/* a view rereads the cgroup's usage
					   at most this often */

struct sessions_head	 sessions = TAILQ_HEAD_INITIALIZER(sessions);
struct corpses_head corpses = LIST_HEAD_INITIALIZER(corpses);
struct event		*sweep_ev;
struct event_base	*session_base;	/* the capture loop */
struct session_limits	 limits;
struct turn		*session_turn;	/* the reads' loop turn */
static session_observer_fn	 observer;
size_t			 nrunning;
uint64_t			 ring_total;	/* bytes of every ring */
uint64_t			 kept_total;	/* bytes of session_bytes(),
						   every session's and pending */
uint64_t			 next_seq = 1;
int			 removing_all;	/* in session_remove_all() */

static int64_t	session_left(struct event *);

/*
 * Set the limits and the observer, and start the spawner's threads.
 *
 * Why threads: a spawn waits for the child's chdir and execve, which a
 * lease on the executable or a FUSE mount that does not answer can hold
 * for as long as they like; on the loop that would stop every session and
 * client.  And session leaders must stay unreaped until agentd is done
 * signalling their group (a reaped leader's pid, the group's id, may be
 * reused by any new process, and kill(-pgid) would then reach a stranger).
 * agentd reaps orphans with waitpid(-1, __WNOTHREAD), which sees only the
 * main thread's children; the leaders are the spawner threads' children,
 * so only session_collect() (waitid WNOWAIT) and the final reap touch
 * them.  Orphans are adopted by the main thread (the first live thread of
 * a subreaper or of init).
 */
void
session_init(struct event_base *base, const struct session_limits *l,
    session_observer_fn fn)
{
	session_base = base;
	limits = *l;
	observer = fn;
	if (limits.pipe_bytes > 0 && !session_pipe_exempt()) {
		log_info("%s: --pipe-bytes %llu not applied: without "
		    "CAP_SYS_RESOURCE or CAP_SYS_ADMIN, big pipes would count "
		    "against fs.pipe-user-pages-soft, past which every new pipe "
		    "of the user shrinks to two pages", __func__,
		    (unsigned long long)limits.pipe_bytes);
		limits.pipe_bytes = 0;
	}
	if (!cgroup_enabled() && (limits.memory_bytes > 0 ||
	    limits.pids > 0 || limits.cpu_percent > 0))
		log_warn("%s: --session-memory, --session-pids and --session-cpu "
		    "not applied: containment is process_group", __func__);
	sweep_ev = evtimer_new(session_base, session_sweep_cb, NULL);
	session_turn = turn_new(session_base);
	if (sweep_ev == NULL)
		fatal("%s: out of memory", __func__);
	pty_signals_snapshot();		/* main() has set SIGPIPE's */
	spawner_init(base, limits.spawn_threads > 0 ? limits.spawn_threads :
	    SPAWNER_THREADS_DEFAULT);
}

/* Tell the observer. */
void
session_notify(struct session *s, int events)
{
	if (observer != NULL)
		observer(s, events);
}

/* Arm a one-shot timer for ms milliseconds. */
void
session_timer_add(struct event *ev, int64_t ms)
{
	struct timeval	tv;

	event_add(ev, timeval_ms(&tv, ms));
}

/* Find a session by id. */
struct session *
session_find(const char *id)
{
	struct session	*s;

	TAILQ_FOREACH(s, &sessions, entry) {
		if (strcmp(s->id, id) == 0)
			return (s);
	}
	return (NULL);
}

/* A session's place in the order of creation. */
uint64_t
session_seq(const struct session *s)
{
	return (s->seq);
}

/* The first session of the table. */
struct session *
session_first(void)
{
	return (TAILQ_FIRST(&sessions));
}

/* The session after s. */
struct session *
session_next(struct session *s)
{
	return (TAILQ_NEXT(s, entry));
}

/* Running sessions. */
size_t
session_count_running(void)
{
	return (nrunning);
}

/* Leaders kept as zombies: exited, unreleased sessions and dead corpses. */
size_t
session_count_unreaped(void)
{
	struct session		*s;
	struct session_corpse	*c;
	size_t			 n = 0;

	TAILQ_FOREACH(s, &sessions, entry)
		n += s->reaped && !s->released;
	LIST_FOREACH(c, &corpses, entry)
		n += c->pid > 0 && c->reaped;
	return (n);
}

/* Sessions in the table. */
size_t
session_count(void)
{
	struct session	*s;
	size_t		 n = 0;

	TAILQ_FOREACH(s, &sessions, entry)
		n++;
	return (n);
}

/* Bytes of all rings. */
uint64_t
session_ring_bytes_total(void)
{
	return (ring_total);
}

/* The session's id. */
const char *
session_id(const struct session *s)
{
	return (s->id);
}

/* The session's ring. */
struct ring *
session_ring(struct session *s)
{
	session_publish(s);
	return (s->ring);
}

/* Whether the session's state is "exited". */
int
session_exited(const struct session *s)
{
	return (s->exited);
}

/* Whether the output is closed: nothing more will be captured. */
int
session_output_closed(const struct session *s)
{
	return (s->nopen == 0);
}

/* The observer's slot. */
void **
session_user(struct session *s)
{
	return (&s->user_data);
}

/* Fill a rendering view. */
void
session_view(struct session *s, struct proto_session *v)
{
	struct ring_stats	st;

	session_publish(s);
	ring_stats(s->ring, &st);
	memset(v, 0, sizeof *v);
	v->id = s->id;
	v->pid = s->pid;
	v->tty = s->tty;
	v->rows = s->rows;
	v->cols = s->cols;
	v->argv = s->argv;
	v->cwd = s->cwd;
	v->user = s->user;
	v->tag = s->tag;
	v->exited = s->exited;
	if (s->exited) {
		if (WIFSIGNALED(s->status)) {
			v->signo = WTERMSIG(s->status);
			v->exit_code = 128 + v->signo;
		} else
			v->exit_code = WEXITSTATUS(s->status);
	}
	v->timed_out = s->timed_out;
	v->started_ms = s->started_ms;
	v->ended_ms = s->exited ? s->ended_ms : -1;
	v->last_chunk = st.newest;
	v->bytes_out = st.bytes_total;
	session_usage_read(s, 0);
	v->oom_killed = s->oom_killed;
	v->cpu_ms = s->usage.cpu_ms;
	v->memory_peak_bytes = s->usage.memory_peak_bytes;
	v->pids_peak = s->usage.pids_peak;
	v->stdin_bytes = s->stdin_bytes;
}

/* Whether the session exited and none of its processes is left. */
int
session_gone(const struct session *s)
{
	return (s->exited && s->released);
}

/*
 * Read the cgroup's usage, at most every SESSION_USAGE_MS unless forced;
 * the first OOM kill seen is counted and logged.
 */
void
session_usage_read(struct session *s, int force)
{
	int64_t	now;

	if (s->cg == NULL)
		return;
	now = clock_mono_ms();
	if (!force && s->usage_ms != 0 && now - s->usage_ms < SESSION_USAGE_MS)
		return;
	cgroup_session_usage(s->cg, &s->usage);
	s->usage_ms = now;
	if (s->usage.oom_kills > 0 && !s->oom_killed) {
		s->oom_killed = 1;
		agentd_stats.sessions_oom_killed++;
		/* session.exited's oom_killed tells the event feed. */
		log_info("%s: session %s: OOM kill in its cgroup (%lld)",
		    __func__, s->id, (long long)s->usage.oom_kills);
	}
}

/* Label the session with envd's tag (NULL: none). */
void
session_set_tag(struct session *s, const char *tag)
{
	free(s->tag);
	s->tag = tag != NULL ? xstrdup(tag) : NULL;
}

/* The time left on a timer, in ms from now, or -1 when it is not armed. */
static int64_t
session_left(struct event *ev)
{
	struct timeval	tv, now;
	int64_t		ms;

	if (ev == NULL || !evtimer_pending(ev, &tv))
		return (-1);
	gettimeofday(&now, NULL);
	ms = ((int64_t)tv.tv_sec - now.tv_sec) * 1000 +
	    ((int64_t)tv.tv_usec - now.tv_usec) / 1000;
	return (ms > 0 ? ms : 0);
}

/* The time left on each timer of s. */
void
session_timers_left(struct session *s, struct session_timers *t)
{
	t->timeout_ms = session_left(s->timeout_ev);
	t->kill_ms = session_left(s->kill_ev);
	t->ttl_ms = session_left(s->ttl_ev);
	t->drain_ms = session_left(s->drain_ev);
}

/* Before a hand-over: publish what was read, send the corpses' SIGKILL. */
void
session_upgrade_prepare(void)
{
	struct session		*s;
	struct session_corpse	*c, *next;

	TAILQ_FOREACH(s, &sessions, entry)
		session_flush(s);
	for (c = LIST_FIRST(&corpses); c != NULL; c = next) {
		next = LIST_NEXT(c, entry);
		if (c->killed)
			continue;
		event_del(c->kill_ev);
		session_corpse_cb(-1, 0, c);	/* may free c */
	}
}

/* List a session an upgrade restored: its events, timers, counters. */
void
session_insert(struct session *s, const struct session_timers *t)
{
	size_t	i;

	s->nopen = 0;
	for (i = 0; i < 2; i++) {
		s->out[i].s = s;
		if (s->out[i].fd == -1)
			continue;
		s->out[i].ev = event_new(session_base, s->out[i].fd,
		    EV_READ | EV_PERSIST, session_read_cb, &s->out[i]);
		if (s->out[i].ev == NULL)
			fatal("%s: out of memory", __func__);
		if (!(s->hup && i == 0))
			event_add(s->out[i].ev, NULL);
		s->nopen++;
	}
	if (s->inq == NULL)
		s->inq = evbuffer_new();
	if (s->in != -1)
		s->in_ev = event_new(session_base, s->in, EV_WRITE,
		    session_write_cb, s);
	s->timeout_ev = evtimer_new(session_base, session_timeout_cb, s);
	s->kill_ev = evtimer_new(session_base, session_kill_cb, s);
	s->drain_ev = evtimer_new(session_base, session_drain_cb, s);
	s->ttl_ev = evtimer_new(session_base, session_ttl_cb, s);
	s->hup_ev = evtimer_new(session_base, session_hup_cb, &s->out[0]);
	s->hold_ev = evtimer_new(session_base, session_hold_cb, s);
	if (s->inq == NULL || s->timeout_ev == NULL || s->kill_ev == NULL ||
	    s->drain_ev == NULL || s->ttl_ev == NULL || s->hup_ev == NULL ||
	    s->hold_ev == NULL ||
	    (s->in != -1 && s->in_ev == NULL))
		fatal("%s: out of memory", __func__);
	if (t->timeout_ms >= 0)
		session_timer_add(s->timeout_ev, t->timeout_ms);
	if (t->kill_ms >= 0)
		session_timer_add(s->kill_ev, t->kill_ms);
	if (t->ttl_ms >= 0)
		session_timer_add(s->ttl_ev, t->ttl_ms);
	if (t->drain_ms >= 0)
		session_timer_add(s->drain_ev, t->drain_ms);
	if (s->hup)
		session_timer_add(s->hup_ev, s->hup_ms > 0 ? s->hup_ms :
		    SESSION_HUP_POLL_MIN_MS);
	if (s->out[0].carry_len > 0 || s->out[1].carry_len > 0)
		session_timer_add(s->hold_ev, 0);	/* an older agentd's */
	s->restored = 1;
	TAILQ_INSERT_TAIL(&sessions, s, entry);
	if (!s->exited)
		nrunning++;
	ring_total += s->ring_bytes;
	kept_total += s->kept_bytes;
	if (s->seq >= next_seq)
		next_seq = s->seq + 1;
	if (s->in != -1 && evbuffer_get_length(s->inq) > 0)
		event_add(s->in_ev, NULL);
	log_info("%s: session %s pid %ld %s, %s", __func__, s->id,
	    (long)s->pid, s->tty ? "tty" : "pipes", s->exited ? "exited" :
	    "running");
	if (s->reaped && !s->released)
		session_sweep_soon(1);
}
