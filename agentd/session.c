/*
 * session.c -- sessions: spawn, capture of output into the ring, stdin,
 * timers, the exit rule, removal.
 */
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "agentd.h"
#include "log.h"
#include "pty.h"
#include "ringbuf.h"
#include "session.h"
#include "util.h"

#define SESSION_PATH_DEFAULT \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define SESSION_SMALL_READ	512	/* bytes read when FIONREAD says 0 */
#define SESSION_SHORT_READ	4096	/* bytes: a read under this that took
					   all there was ends the turn */

/* One output fd of a session: the PTY master, or stdout or stderr. */
struct session_out {
	struct session	*s;
	int		 fd;		/* -1 once closed */
	enum ring_stream stream;
	struct event	*ev;
};

struct session {
	TAILQ_ENTRY(session) entry;
	char		 id[PROTO_ID_MAX + 1];
	char		**argv;
	char		*cwd;
	char		*user;
	int		 tty;
	unsigned	 rows, cols;

	pid_t		 pid;		/* also the process group */
	int		 reaped;	/* the status is in */
	int		 status;	/* from waitpid() */
	int		 exited;	/* state "exited" */
	int		 timed_out;
	int		 terminating;	/* DELETE or shutdown under way */
	int		 remove_on_exit;
	int64_t		 started_ms;	/* wall clock */
	int64_t		 ended_ms;	/* wall clock, -1 while running */

	struct ring	*ring;
	size_t		 ring_bytes;
	struct session_out out[2];	/* tty: out[0] only */
	int		 nopen;		/* output fds still open */

	int		 in;		/* stdin fd (the master for a tty), or -1 */
	int		 in_eof;	/* pipes: close stdin once the queue drains */
	struct evbuffer	*inq;
	struct event	*in_ev;

	struct event	*timeout_ev;	/* timeout_ms */
	struct event	*kill_ev;	/* SIGKILL after a grace */
	struct event	*drain_ev;	/* the 250 ms exit cap */
	struct event	*ttl_ev;	/* removal of an exited session */

	void		*user_data;	/* the observer's */
};

static TAILQ_HEAD(, session)	 sessions = TAILQ_HEAD_INITIALIZER(sessions);
static struct session_limits	 limits;
static session_observer_fn	 observer;
static uint64_t			 next_id = 1;
static size_t			 nrunning;
static uint64_t			 ring_total;	/* bytes of every ring */

static void	session_notify(struct session *, int);
static char	**session_environ(const struct proto_create *,
		    const struct pty_user *);
static void	session_strv_free(char **);
static char	**session_strv_dup(char *const *);
static void	session_read_cb(evutil_socket_t, short, void *);
static int	session_capture(struct session_out *, size_t budget);
static void	session_close_out(struct session_out *);
static void	session_write_cb(evutil_socket_t, short, void *);
static void	session_flush_stdin(struct session *);
static void	session_close_stdin(struct session *);
static void	session_timeout_cb(evutil_socket_t, short, void *);
static void	session_kill_cb(evutil_socket_t, short, void *);
static void	session_drain_cb(evutil_socket_t, short, void *);
static void	session_ttl_cb(evutil_socket_t, short, void *);
static void	session_check_exit(struct session *, int capped);
static void	session_timer_add(struct event *, int64_t ms);
static void	session_kill(struct session *, int sig);

/* Set the limits and the observer. */
void
session_init(const struct session_limits *l, session_observer_fn fn)
{
	limits = *l;
	observer = fn;
}

/* Tell the observer. */
static void
session_notify(struct session *s, int events)
{
	if (observer != NULL)
		observer(s, events);
}

/* Arm a one-shot timer for ms milliseconds. */
static void
session_timer_add(struct event *ev, int64_t ms)
{
	struct timeval	tv;

	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	event_add(ev, &tv);
}

/* Copy a NULL-terminated string vector. */
static char **
session_strv_dup(char *const *v)
{
	char	**copy;
	size_t	  n, i;

	for (n = 0; v[n] != NULL; n++)
		;
	copy = xcalloc(n + 1, sizeof *copy);
	for (i = 0; i < n; i++)
		copy[i] = xstrdup(v[i]);
	return (copy);
}

/* Free a NULL-terminated string vector. */
static void
session_strv_free(char **v)
{
	size_t	i;

	for (i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/*
 * The child's environment: a clean base (PATH, HOME, USER, LOGNAME, LANG,
 * TERM for a tty) with the request's variables over it.  Nothing of agentd's
 * own environment leaks but PATH and LANG.
 */
static char **
session_environ(const struct proto_create *pc, const struct pty_user *u)
{
	const char	*path = getenv("PATH"), *lang = getenv("LANG");
	char		**env;
	size_t		  n = 0, cap = 8, i, j, klen;
	const char	 *eq;

	for (i = 0; pc->env != NULL && pc->env[i] != NULL; i++)
		cap++;
	env = xcalloc(cap + 1, sizeof *env);
	xasprintf(&env[n++], "PATH=%s", path != NULL ? path :
	    SESSION_PATH_DEFAULT);
	xasprintf(&env[n++], "HOME=%s", u->home[0] != '\0' ? u->home : "/");
	xasprintf(&env[n++], "USER=%s", u->name);
	xasprintf(&env[n++], "LOGNAME=%s", u->name);
	xasprintf(&env[n++], "LANG=%s", lang != NULL ? lang : "C.UTF-8");
	if (pc->tty)
		env[n++] = xstrdup("TERM=xterm-256color");

	for (i = 0; pc->env != NULL && pc->env[i] != NULL; i++) {
		eq = strchr(pc->env[i], '=');
		klen = eq != NULL ? (size_t)(eq - pc->env[i]) : strlen(pc->env[i]);
		for (j = 0; j < n; j++) {
			if (strncmp(env[j], pc->env[i], klen) == 0 &&
			    env[j][klen] == '=')
				break;
		}
		if (j < n)
			free(env[j]);
		else
			j = n++;
		env[j] = xstrdup(pc->env[i]);
	}
	env[n] = NULL;
	return (env);
}

/* Resolve the user to run as: the request's, or agentd's own. */
static int
session_user_resolve(const char *spec, struct pty_user *u, char *cause,
    size_t causelen)
{
	struct passwd	*pw;
	char		 num[32];

	if (spec != NULL)
		return (pty_user_lookup(spec, u, cause, causelen));
	memset(u, 0, sizeof *u);
	u->uid = geteuid();
	u->gid = getegid();
	if ((pw = getpwuid(u->uid)) != NULL) {
		snprintf(u->name, sizeof u->name, "%s", pw->pw_name);
		snprintf(u->home, sizeof u->home, "%s", pw->pw_dir);
	} else {
		snprintf(num, sizeof num, "%lu", (unsigned long)u->uid);
		snprintf(u->name, sizeof u->name, "%s", num);
		snprintf(u->home, sizeof u->home, "/");
	}
	return (0);
}

/* Start a session. */
int
session_create(const struct proto_create *pc, struct session **out,
    struct proto_err *err)
{
	struct pty_spec	 spec;
	struct pty_proc	 proc;
	struct pty_user	 u;
	struct session	*s;
	char		 cause[PTY_CAUSE_MAX], **env;
	const char	*cwd;
	size_t		 i;
	int		 error;

	*out = NULL;
	if (agentd_stopping())
		return (proto_fail(err, 503, "shutting_down",
		    "agentd is shutting down"));
	if (pc->id[0] != '\0' && (s = session_find(pc->id)) != NULL) {
		*out = s;
		return (proto_fail(err, 409, "session_exists",
		    "session '%s' exists", pc->id));
	}
	if (nrunning >= limits.max_sessions)
		return (proto_fail(err, 429, "too_many_sessions",
		    "%zu sessions are running (--max-sessions %llu)", nrunning,
		    (unsigned long long)limits.max_sessions));
	if (ring_total + pc->ring_bytes > limits.max_total_ring_bytes)
		return (proto_fail(err, 429, "ring_budget_exceeded",
		    "rings of all sessions would exceed %llu bytes "
		    "(--max-total-ring-bytes)",
		    (unsigned long long)limits.max_total_ring_bytes));

	if (session_user_resolve(pc->user, &u, cause, sizeof cause) != 0) {
		agentd_stats.sessions_spawn_failed++;
		return (proto_fail(err, 422, "spawn_failed", "%s", cause));
	}
	cwd = pc->cwd != NULL ? pc->cwd : limits.workdir;
	env = session_environ(pc, &u);

	memset(&spec, 0, sizeof spec);
	spec.argv = pc->argv;
	spec.envp = env;
	spec.cwd = cwd;
	spec.user = pc->user != NULL ? &u : NULL;
	spec.tty = pc->tty;
	spec.rows = pc->rows;
	spec.cols = pc->cols;
	spec.stdin_null = !pc->stdin_open;

	s = xcalloc(1, sizeof *s);
	if ((s->ring = ring_create(pc->ring_bytes, 1)) == NULL) {
		free(s);
		session_strv_free(env);
		return (proto_fail(err, 429, "ring_budget_exceeded",
		    "cannot allocate a ring of %zu bytes", pc->ring_bytes));
	}
	error = pty_spawn(&spec, &proc, cause, sizeof cause);
	session_strv_free(env);
	if (error != 0) {
		ring_free(s->ring);
		free(s);
		agentd_stats.sessions_spawn_failed++;
		log_info("%s: spawn failed: %s", __func__, cause);
		return (proto_fail(err, 422, "spawn_failed", "%s", cause));
	}

	if (pc->id[0] != '\0')
		snprintf(s->id, sizeof s->id, "%s", pc->id);
	else {
		do
			snprintf(s->id, sizeof s->id, "s%llu",
			    (unsigned long long)next_id++);
		while (session_find(s->id) != NULL);
	}
	s->argv = session_strv_dup(pc->argv);
	s->cwd = cwd != NULL ? xstrdup(cwd) : getcwd(NULL, 0);
	if (s->cwd == NULL)
		s->cwd = xstrdup("/");
	s->user = xstrdup(u.name);
	s->tty = pc->tty;
	s->rows = pc->rows;
	s->cols = pc->cols;
	s->pid = proc.pid;
	s->started_ms = clock_wall_ms();
	s->ended_ms = -1;
	s->ring_bytes = pc->ring_bytes;

	for (i = 0; i < 2; i++) {
		s->out[i].s = s;
		s->out[i].fd = -1;
	}
	if (pc->tty) {
		s->out[0].fd = proc.master;
		s->out[0].stream = RING_STREAM_PTY;
		s->in = proc.master;
	} else {
		s->out[0].fd = proc.out;
		s->out[0].stream = RING_STREAM_STDOUT;
		s->out[1].fd = proc.err;
		s->out[1].stream = RING_STREAM_STDERR;
		s->in = proc.in;
	}
	for (i = 0; i < 2; i++) {
		if (s->out[i].fd == -1)
			continue;
		s->out[i].ev = event_new(agentd_base, s->out[i].fd,
		    EV_READ | EV_PERSIST, session_read_cb, &s->out[i]);
		event_add(s->out[i].ev, NULL);
		s->nopen++;
	}
	s->inq = evbuffer_new();
	if (s->in != -1)
		s->in_ev = event_new(agentd_base, s->in, EV_WRITE,
		    session_write_cb, s);
	s->timeout_ev = evtimer_new(agentd_base, session_timeout_cb, s);
	s->kill_ev = evtimer_new(agentd_base, session_kill_cb, s);
	s->drain_ev = evtimer_new(agentd_base, session_drain_cb, s);
	s->ttl_ev = evtimer_new(agentd_base, session_ttl_cb, s);
	if (s->inq == NULL || s->timeout_ev == NULL || s->kill_ev == NULL ||
	    s->drain_ev == NULL || s->ttl_ev == NULL ||
	    (s->in != -1 && s->in_ev == NULL))
		fatal("%s: out of memory", __func__);
	if (pc->timeout_ms > 0)
		session_timer_add(s->timeout_ev, pc->timeout_ms);

	TAILQ_INSERT_TAIL(&sessions, s, entry);
	nrunning++;
	ring_total += s->ring_bytes;
	agentd_stats.sessions_started++;
	log_info("%s: session %s pid %ld %s", __func__, s->id, (long)s->pid,
	    s->tty ? "tty" : "pipes");
	*out = s;
	return (0);
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
session_ring(const struct session *s)
{
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
session_view(const struct session *s, struct proto_session *v)
{
	struct ring_stats	st;

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
}

/* Output is readable: capture it. */
static void
session_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session_out	*o = arg;
	struct session		*s = o->s;
	uint64_t		 before = ring_newest(s->ring);
	int			 closed;

	closed = session_capture(o, SESSION_READ_BUDGET);
	if (ring_newest(s->ring) != before)
		session_notify(s, SESSION_EV_OUTPUT);
	if (closed) {
		session_close_out(o);
		session_check_exit(s, 0);
	}
}

/*
 * Read from o into the ring until EAGAIN or budget bytes; each read is one
 * chunk, read straight into the ring.  Within a budget, a short read that
 * took all FIONREAD announced also ends the turn: the event is
 * level-triggered and comes back if more arrived, so an echo costs no
 * FIONREAD and read that find nothing (a flood still reads to EAGAIN).  SIZE_MAX drains until EAGAIN or EOF.  Returns 1 when
 * the fd reached EOF (or EIO on a PTY master), 0 otherwise.
 */
static int
session_capture(struct session_out *o, size_t budget)
{
	struct session	*s = o->s;
	uint8_t		 small[SESSION_SMALL_READ];
	size_t		 len, done = 0;
	ssize_t		 n;
	void		*p;
	int		 avail;

	while (done < budget) {
		if (ioctl(o->fd, FIONREAD, &avail) == -1 || avail <= 0) {
			/* EOF, or data that arrived since: read it aside. */
			n = read(o->fd, small, sizeof small);
			if (n > 0)
				ring_append(s->ring, small, n, o->stream);
		} else {
			len = (size_t)avail < SESSION_READ_MAX ?
			    (size_t)avail : SESSION_READ_MAX;
			p = ring_reserve(s->ring, &len);
			n = read(o->fd, p, len);
			if (n > 0)
				ring_commit(s->ring, n, o->stream);
			if (n == avail && avail < SESSION_SHORT_READ &&
			    budget != SIZE_MAX) {
				done += n;
				goto out;
			}
		}
		if (n > 0) {
			done += n;
			continue;
		}
		if (n == 0 || errno == EIO)
			break;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			goto out;
		log_warn("%s: session %s fd %d: %s", __func__, s->id, o->fd,
		    strerror(errno));
		break;
	}
	if (done >= budget)
		goto out;
	agentd_stats.output_bytes += done;
	return (1);
out:
	agentd_stats.output_bytes += done;
	return (0);
}

/* Close one output fd; the last one closes the output. */
static void
session_close_out(struct session_out *o)
{
	struct session	*s = o->s;

	if (o->fd == -1)
		return;
	event_free(o->ev);
	o->ev = NULL;
	if (s->tty) {
		/* The master is also stdin. */
		session_close_stdin(s);
		evbuffer_drain(s->inq, evbuffer_get_length(s->inq));
	}
	close(o->fd);
	o->fd = -1;
	if (--s->nopen == 0) {
		ring_close(s->ring);
		log_debug("%s: session %s output closed", __func__, s->id);
		session_notify(s, SESSION_EV_CLOSED);
	}
}

/*
 * Apply the exit rule: exited once the status is in and the output is
 * drained, or (capped) SESSION_DRAIN_CAP_MS after the status.
 */
static void
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
		session_notify(s, SESSION_EV_OUTPUT);
	}
	s->exited = 1;
	s->ended_ms = clock_wall_ms();
	nrunning--;
	event_del(s->drain_ev);
	event_del(s->timeout_ev);
	if (s->nopen == 0)
		event_del(s->kill_ev);
	if (!s->tty)
		session_close_stdin(s);
	session_timer_add(s->ttl_ev, limits.exited_ttl_ms);
	log_info("%s: session %s exited, status %#x", __func__, s->id,
	    s->status);
	session_notify(s, SESSION_EV_EXITED);
	if (s->remove_on_exit)
		session_remove(s);	/* the observer may have asked for it */
}

/* Remove the session once it has exited and the observer has seen it. */
void
session_set_remove_on_exit(struct session *s)
{
	s->remove_on_exit = 1;
}

/* A child's status came in. */
int
session_reaped(pid_t pid, int status)
{
	struct session	*s;

	TAILQ_FOREACH(s, &sessions, entry) {
		if (s->pid == pid && !s->reaped)
			break;
	}
	if (s == NULL)
		return (-1);
	s->reaped = 1;
	s->status = status;
	if (s->nopen > 0)
		session_timer_add(s->drain_ev, SESSION_DRAIN_CAP_MS);
	session_check_exit(s, 0);
	return (0);
}

/* The exit cap passed with the output still open. */
static void
session_drain_cb(evutil_socket_t fd, short events, void *arg)
{
	session_check_exit(arg, 1);
}

/* Signal the session's process group, if it may still exist. */
static void
session_kill(struct session *s, int sig)
{
	int	error;

	/* Once reaped with the output closed, the pgid may be reused. */
	if (s->reaped && s->nopen == 0)
		return;
	if ((error = pty_kill_group(s->pid, sig)) != 0 && error != -ESRCH)
		log_warn("%s: session %s: kill %d: %s", __func__, s->id, sig,
		    strerror(-error));
}

/* timeout_ms passed: SIGTERM now, SIGKILL later. */
static void
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
static void
session_kill_cb(evutil_socket_t fd, short events, void *arg)
{
	session_kill(arg, SIGKILL);
}

/* An exited session's time is up. */
static void
session_ttl_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session	*s = arg;

	log_debug("%s: session %s expired", __func__, s->id);
	session_remove(s);
}

/* Queue input and write what the fd takes now. */
ssize_t
session_write_stdin(struct session *s, const void *data, size_t len,
    int eof, struct proto_err *err)
{
	char	c;

	if (s->exited)
		return (proto_fail(err, 409, "session_exited",
		    "session '%s' has exited", s->id));
	if (s->in == -1 || s->in_eof)
		return (proto_fail(err, 409, "stdin_closed",
		    "stdin of session '%s' is closed", s->id));
	if (evbuffer_get_length(s->inq) + len + (eof && s->tty) >
	    limits.stdin_buffer)
		return (proto_fail(err, 429, "stdin_backpressure",
		    "%zu bytes of stdin are queued, unread (--stdin-buffer "
		    "%llu)", evbuffer_get_length(s->inq),
		    (unsigned long long)limits.stdin_buffer));
	if (len > 0 && evbuffer_add(s->inq, data, len) != 0)
		fatal("%s: out of memory", __func__);
	if (eof && s->tty) {
		c = (char)pty_veof(s->in);	/* the program may have changed it */
		evbuffer_add(s->inq, &c, 1);
	} else if (eof)
		s->in_eof = 1;
	session_flush_stdin(s);
	return ((ssize_t)len);
}

/* Write queued input until the fd would block. */
static void
session_flush_stdin(struct session *s)
{
	int	n;

	while (s->in != -1 && evbuffer_get_length(s->inq) > 0) {
		n = evbuffer_write(s->inq, s->in);
		if (n > 0)
			continue;
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN) {
			event_add(s->in_ev, NULL);
			return;
		}
		/* EPIPE, EIO: nobody reads any more. */
		log_debug("%s: session %s stdin: %s", __func__, s->id,
		    n == 0 ? "closed" : strerror(errno));
		evbuffer_drain(s->inq, evbuffer_get_length(s->inq));
		session_close_stdin(s);
		return;
	}
	if (s->in_eof && !s->tty)
		session_close_stdin(s);
}

/* The stdin fd is writable again. */
static void
session_write_cb(evutil_socket_t fd, short events, void *arg)
{
	session_flush_stdin(arg);
}

/* Stop writing stdin; close the pipe (the master is closed with output). */
static void
session_close_stdin(struct session *s)
{
	if (s->in == -1)
		return;
	if (s->in_ev != NULL) {
		event_free(s->in_ev);
		s->in_ev = NULL;
	}
	if (!s->tty)
		close(s->in);
	s->in = -1;
	s->in_eof = 1;
}

/* Set the PTY's window size. */
int
session_resize(struct session *s, unsigned rows, unsigned cols,
    struct proto_err *err)
{
	int	error;

	if (!s->tty)
		return (proto_fail(err, 409, "not_a_tty",
		    "session '%s' has no tty", s->id));
	if (s->exited || s->out[0].fd == -1)
		return (proto_fail(err, 409, "session_exited",
		    "session '%s' has exited", s->id));
	if ((error = pty_resize(s->out[0].fd, rows, cols)) != 0)
		return (proto_fail(err, 409, "session_exited",
		    "resize: %s", strerror(-error)));
	s->rows = rows;
	s->cols = cols;
	return (0);
}

/* Send a signal to the session's process group. */
int
session_signal(struct session *s, int signo, struct proto_err *err)
{
	int	error;

	if (s->exited)
		return (proto_fail(err, 409, "session_exited",
		    "session '%s' has exited", s->id));
	if ((error = pty_kill_group(s->pid, signo)) != 0 && error != -ESRCH)
		return (proto_fail(err, 409, "session_exited", "kill: %s",
		    strerror(-error)));
	return (0);
}

/* Begin a DELETE of a running session. */
void
session_terminate(struct session *s, int64_t grace_ms)
{
	if (s->exited || s->terminating)
		return;
	s->terminating = 1;
	if (s->tty)
		session_kill(s, SIGHUP);
	session_kill(s, SIGTERM);
	if (grace_ms <= 0)
		session_kill(s, SIGKILL);
	else {
		event_del(s->kill_ev);
		session_timer_add(s->kill_ev, grace_ms);
	}
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
	session_kill(s, SIGKILL);
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
	if (!s->exited)
		nrunning--;
	ring_total -= s->ring_bytes;
	TAILQ_REMOVE(&sessions, s, entry);
	log_debug("%s: session %s removed", __func__, s->id);

	ring_free(s->ring);
	session_strv_free(s->argv);
	free(s->cwd);
	free(s->user);
	free(s);
}

/* Send sig to every group that may still have processes: tty ones only? */
void
session_signal_all(int sig, int tty_only)
{
	struct session	*s;

	TAILQ_FOREACH(s, &sessions, entry) {
		if (!tty_only || s->tty)
			session_kill(s, sig);
	}
}

/* Remove every session. */
void
session_remove_all(void)
{
	struct session	*s;

	while ((s = TAILQ_FIRST(&sessions)) != NULL)
		session_remove(s);
}
