/*
 * session.c -- sessions: spawn, capture of output into the ring, stdin,
 * timers, the exit rule, removal.
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

#define SESSION_PATH_DEFAULT \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define SESSION_SMALL_READ	512	/* bytes read when FIONREAD says 0 */
#define SESSION_HUP_POLL_MIN_MS	10	/* first look at a hung-up master */
#define SESSION_HUP_POLL_MAX_MS	1000	/* slowest look at a hung-up master */
#define SESSION_SWEEP_MS	20	/* sweep pinned leaders after a reap */
#define SESSION_SWEEP_MAX_MS	1000	/* backed off to while none is released */
#define SESSION_JOIN_BYTES	4096	/* bytes a chunk joined from reads grows to */
#define SESSION_JOIN_SHARE	64	/* ... and at most this share of the ring */
#define SESSION_READ_SHARE	16	/* a read takes at most this share of the ring */
#define SESSION_SHORT_READ	4096	/* bytes: a read under this that took
					   all there was ends the turn */
#define SESSION_TTY_ROOM	512	/* bytes of pending room a PTY read
					   wants, in place of FIONREAD */
#define SESSION_TTY_FULL	4095	/* bytes of a PTY read that emptied a
					   full n_tty buffer (4 KiB - 1) */
#define SESSION_USAGE_MS	50	/* a view rereads the cgroup's usage
					   at most this often */

/*
 * A removed session's leader, kept unreaped (alive, or a zombie) so that its
 * pid, which is the group's id, cannot be reused before the group's SIGKILL.
 */
struct session_corpse {
	LIST_ENTRY(session_corpse) entry;
	pid_t		 pid;		/* its leader, or 0: a cgroup alone */
	int		 reaped;	/* the status is in */
	int		 killed;	/* the SIGKILL went out */
	int		 wide;		/* SIGKILL every group of the session */
	int		 fds[2];	/* output kept open, unread, or -1 */
	struct cgroup	*cg;		/* the session's cgroup, or NULL */
	struct event	*kill_ev;
};

/* A create whose spawn is under way: its id and its share are reserved. */
struct session_pending {
	LIST_ENTRY(session_pending) entry;
	char			 id[PROTO_ID_MAX + 1];
	struct spawner_job	*job;
	struct ring		*ring;
	size_t			 ring_bytes;
	struct cgroup		*cg;		/* the session's, or NULL */
	size_t			 kept_bytes;
	char			**argv;
	char			*cwd;
	char			*user;
	int			 tty;
	unsigned		 rows, cols;
	int64_t			 timeout_ms;
	size_t			 max_bytes;	/* the create's */
	session_create_fn	 fn;
	void			*arg;
};

static TAILQ_HEAD(, session)	 sessions = TAILQ_HEAD_INITIALIZER(sessions);
static LIST_HEAD(, session_corpse) corpses = LIST_HEAD_INITIALIZER(corpses);
static struct event		*sweep_ev;
static int64_t			 sweep_ms = SESSION_SWEEP_MS;
static LIST_HEAD(, session_pending) pendings =
    LIST_HEAD_INITIALIZER(pendings);
static size_t			 npending;
static struct event_base	*session_base;	/* the capture loop */
static struct session_limits	 limits;
static struct event		*turn_ev;	/* ends a loop turn's count */
static size_t			 turn_bytes;	/* read in this loop turn */
static int			 turn_open;	/* turn_ev is active */
static session_observer_fn	 observer;
static uint64_t			 next_id = 1;
static size_t			 nrunning;
static uint64_t			 ring_total;	/* bytes of every ring */
static uint64_t			 kept_total;	/* bytes of session_bytes(),
						   every session's and pending */
static uint64_t			 next_seq = 1;
static int			 removing_all;	/* in session_remove_all() */

/* The variables of the "noninteractive" profile (API.md), beside TERM. */
static const char *const session_quiet_env[] = {
	"NO_COLOR=1", "PAGER=cat", "GIT_PAGER=cat", "GH_PAGER=cat",
	"LC_ALL=C.UTF-8",
};

static void	session_notify(struct session *, int);
static int	session_profile(const struct proto_create *);
static void	session_env_set(char **, size_t *, const char *);
static char	**session_environ(const struct proto_create *,
		    const struct pty_user *);
static void	session_strv_free(char **);
static char	**session_strv_dup(char *const *);
static void	session_read_cb(evutil_socket_t, short, void *);
static int	session_capture(struct session_out *, size_t budget);
static void	session_pipe_size(struct session *, int);
static int	session_pipe_exempt(void);
static size_t	session_turn_budget(void);
static void	session_turn_cb(evutil_socket_t, short, void *);
static void	*session_room(struct session_out *, size_t, size_t *);
static void	session_publish(struct session *);
static void	session_publish_full(struct session *);
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
static char	*session_cwd(const char *);
static void	session_spawned(const struct spawner_result *, void *);
static struct session *session_attach(struct session_pending *,
		    const struct pty_proc *);
static void	session_pending_free(struct session_pending *);
static size_t	session_bytes(char *const *, const char *, const char *);
static struct session_pending *session_pending_find(const char *);
static int	session_waitid(pid_t, int *status);
static void	session_status_in(struct session *, int status);
static void	session_hup(struct session_out *);
static void	session_hup_cb(evutil_socket_t, short, void *);
static void	session_bury(struct session *, int64_t ms);
static void	session_corpse_cb(evutil_socket_t, short, void *);
static void	session_bury_cgroup(struct cgroup *);
static void	session_corpse_free(struct session_corpse *, int reap);
static void	session_sweep_soon(int fresh);
static void	session_sweep_cb(evutil_socket_t, short, void *);
static int	session_proc_live(pid_t);
static int	session_pid_cmp(const void *, const void *);
static int	session_cgroup(const struct proto_create *, struct cgroup **,
		    struct proto_err *);
static void	session_usage_read(struct session *, int force);
static void	session_release(struct session *);
static void	session_check_gone(struct session *);
static int	session_corpse_done(struct session_corpse *);
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
	turn_ev = event_new(session_base, -1, 0, session_turn_cb, NULL);
	if (sweep_ev == NULL || turn_ev == NULL)
		fatal("%s: out of memory", __func__);
	turn_open = 0;
	pty_signals_snapshot();		/* main() has set SIGPIPE's */
	spawner_init(base, limits.spawn_threads > 0 ? limits.spawn_threads :
	    SPAWNER_THREADS_DEFAULT);
}

/*
 * The absolute cwd of a session: the request's, a relative one taken from
 * --workdir (itself taken from agentd's cwd when relative), or --workdir.
 */
static char *
session_cwd(const char *req)
{
	char	*base, *here, *path;

	if (req != NULL && req[0] == '/')
		return (xstrdup(req));
	if (limits.workdir != NULL && limits.workdir[0] == '/')
		base = xstrdup(limits.workdir);
	else {
		if ((here = getcwd(NULL, 0)) == NULL)
			here = xstrdup("/");
		if (limits.workdir == NULL)
			base = here;
		else {
			xasprintf(&base, "%s%s%s", here,
			    here[strlen(here) - 1] == '/' ? "" : "/",
			    limits.workdir);
			free(here);
		}
	}
	while (req != NULL && req[0] == '.' && req[1] == '/')
		for (req += 2; *req == '/'; req++)
			;
	if (req == NULL || req[0] == '\0' || strcmp(req, ".") == 0)
		return (base);
	xasprintf(&path, "%s%s%s", base,
	    base[strlen(base) - 1] == '/' ? "" : "/", req);
	free(base);
	return (path);
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

	event_add(ev, timeval_ms(&tv, ms));
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

/* Set "K=V" in env (n entries, room for one more): replace K or append. */
static void
session_env_set(char **env, size_t *n, const char *kv)
{
	const char	*eq = strchr(kv, '=');
	size_t		 klen, j;

	klen = eq != NULL ? (size_t)(eq - kv) : strlen(kv);
	for (j = 0; j < *n; j++) {
		if (strncmp(env[j], kv, klen) == 0 && env[j][klen] == '=')
			break;
	}
	if (j < *n)
		free(env[j]);
	else
		j = (*n)++;
	env[j] = xstrdup(kv);
}

/* The profile a create asks for, else agentd's --profile. */
static int
session_profile(const struct proto_create *pc)
{
	return (pc->profile != PROTO_PROFILE_UNSET ? pc->profile :
	    limits.profile);
}

/*
 * The child's environment: a clean base (PATH, HOME, USER, LOGNAME, LANG,
 * TERM for a tty), agentd's --env/--env-file defaults over it, then the
 * request's variables.  Nothing of agentd's own environment leaks but PATH
 * and LANG.
 */
static char **
session_environ(const struct proto_create *pc, const struct pty_user *u)
{
	const char	*path = getenv("PATH"), *lang = getenv("LANG");
	char		**env;
	size_t		  n = 0, cap = 8 + 1 + nitems(session_quiet_env), i;

	for (i = 0; limits.env != NULL && limits.env[i] != NULL; i++)
		cap++;
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
	if (session_profile(pc) == PROTO_PROFILE_NONINTERACTIVE) {
		/* What a CLI reads to stay quiet, uncoloured and unpaged. */
		if (!pc->tty)
			env[n++] = xstrdup("TERM=dumb");
		for (i = 0; i < nitems(session_quiet_env); i++)
			env[n++] = xstrdup(session_quiet_env[i]);
	}

	for (i = 0; limits.env != NULL && limits.env[i] != NULL; i++)
		session_env_set(env, &n, limits.env[i]);
	for (i = 0; pc->env != NULL && pc->env[i] != NULL; i++)
		session_env_set(env, &n, pc->env[i]);
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

/* Start a session: checks and reservations here, the spawn on a thread. */
int
session_create(const struct proto_create *pc, session_create_fn fn,
    void *arg, struct session **out, struct proto_err *err)
{
	struct session_pending	*p;
	struct pty_spec		 spec;
	struct pty_user		 u;
	struct session		*s;
	struct ring		*ring;
	struct cgroup		*cg;
	char			 cause[PTY_CAUSE_MAX], **env;
	char			*cwd;
	size_t			 kept;

	*out = NULL;
	if (agentd_stopping())
		return (proto_fail(err, 503, "shutting_down",
		    "agentd is shutting down"));
	if (pc->id[0] != '\0' && (s = session_find(pc->id)) != NULL) {
		*out = s;
		return (proto_fail(err, 409, "session_exists",
		    "session '%s' exists", pc->id));
	}
	if (pc->id[0] != '\0' && session_pending_find(pc->id) != NULL)
		return (proto_fail(err, 409, "session_exists",
		    "session '%s' is being started", pc->id));
	if (nrunning + npending >= limits.max_sessions)
		return (proto_fail(err, 429, "too_many_sessions",
		    "%zu sessions are running or starting (--max-sessions "
		    "%llu)", nrunning + npending,
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
	cwd = session_cwd(pc->cwd);
	kept = session_bytes(pc->argv, cwd, u.name);
	if (kept_total + kept > limits.max_session_bytes) {
		free(cwd);
		return (proto_fail(err, 429, "session_budget_exceeded",
		    "argv, cwd and user of the sessions kept would exceed %llu "
		    "bytes (--max-session-bytes; %llu kept): remove exited "
		    "sessions", (unsigned long long)limits.max_session_bytes,
		    (unsigned long long)kept_total));
	}
	if (session_cgroup(pc, &cg, err) != 0) {
		free(cwd);
		return (-1);
	}
	memset(&spec, 0, sizeof spec);
	spec.cgroup = -1;
	/* The spawn's own fd: the session may close (and remove) cg first. */
	if (cg != NULL && (spec.cgroup = fcntl(cgroup_session_fd(cg),
	    F_DUPFD_CLOEXEC, 3)) == -1) {
		agentd_stats.sessions_spawn_failed++;
		proto_fail(err, 422, "spawn_failed", "cgroup fd: %s",
		    strerror(errno));
		free(cwd);
		cgroup_session_free(cg);
		return (-1);
	}
	if ((ring = ring_create(pc->ring_bytes, 1)) == NULL) {
		free(cwd);
		if (spec.cgroup != -1)
			close(spec.cgroup);
		cgroup_session_free(cg);
		return (proto_fail(err, 429, "ring_budget_exceeded",
		    "cannot allocate a ring of %zu bytes", pc->ring_bytes));
	}
	env = session_environ(pc, &u);

	spec.argv = pc->argv;
	spec.envp = env;
	spec.cwd = cwd;
	spec.user = pc->user != NULL ? &u : NULL;
	spec.tty = pc->tty;
	spec.rows = pc->rows;
	spec.cols = pc->cols;
	spec.stdin_null = !pc->stdin_open;
	spec.oom_score_adj = limits.oom_score_adj;
	/* A CLI waiting on an open stdin would hang an agent's turn. */
	if (session_profile(pc) == PROTO_PROFILE_NONINTERACTIVE && !pc->tty &&
	    !pc->stdin_given)
		spec.stdin_null = 1;

	p = xcalloc(1, sizeof *p);
	if (pc->id[0] != '\0')
		snprintf(p->id, sizeof p->id, "%s", pc->id);
	else {
		do
			snprintf(p->id, sizeof p->id, "s%llu",
			    (unsigned long long)next_id++);
		while (session_find(p->id) != NULL ||
		    session_pending_find(p->id) != NULL);
	}
	p->ring = ring;
	p->ring_bytes = pc->ring_bytes;
	p->cg = cg;
	p->argv = session_strv_dup(pc->argv);
	p->cwd = cwd;
	p->user = xstrdup(u.name);
	p->tty = pc->tty;
	p->rows = pc->rows;
	p->cols = pc->cols;
	p->timeout_ms = pc->timeout_ms;
	p->max_bytes = pc->max_bytes;
	p->fn = fn;
	p->arg = arg;
	LIST_INSERT_HEAD(&pendings, p, entry);
	npending++;
	ring_total += p->ring_bytes;
	p->kept_bytes = kept;
	kept_total += kept;
	p->job = spawner_start(&spec, limits.spawn_timeout_ms > 0 ?
	    limits.spawn_timeout_ms : SPAWNER_TIMEOUT_DEFAULT,
	    session_spawned, p);
	session_strv_free(env);
	return (0);
}

/* A pending create's spawn ended: make the session, or say why not. */
static void
session_spawned(const struct spawner_result *r, void *arg)
{
	struct session_pending	*p = arg;
	struct proto_err	 err;
	struct session		*s = NULL;

	LIST_REMOVE(p, entry);
	npending--;
	ring_total -= p->ring_bytes;
	kept_total -= p->kept_bytes;
	if (r->timed_out) {
		agentd_stats.sessions_spawn_timeouts++;
		proto_fail(&err, 504, "spawn_timeout", "%s", r->cause);
	} else if (r->error != 0) {
		agentd_stats.sessions_spawn_failed++;
		log_info("%s: spawn failed: %s", __func__, r->cause);
		proto_fail(&err, 422, "spawn_failed", "%s", r->cause);
	} else
		s = session_attach(p, &r->proc);
	p->fn(s, s != NULL ? NULL : &err, p->arg);
	session_pending_free(p);
}

/*
 * What a session keeps of its request for as long as it is listed: argv,
 * cwd and user, with their pointers and NULs.
 */
static size_t
session_bytes(char *const *argv, const char *cwd, const char *user)
{
	size_t	n = 0, i;

	for (i = 0; argv[i] != NULL; i++)
		n += strlen(argv[i]) + 1 + sizeof argv[i];
	return (n + sizeof argv[i] + strlen(cwd) + 1 + strlen(user) + 1);
}

/* Bytes of argv, cwd and user of every session kept and starting. */
uint64_t
session_bytes_total(void)
{
	return (kept_total);
}

/*
 * Free a pending create that no list holds, and what it still owns.  A
 * spawn given up (its timeout, a cancel) may have its child in the cgroup
 * already, on a spawner thread that reaps it: the cgroup is killed and
 * removed once empty.
 */
static void
session_pending_free(struct session_pending *p)
{
	if (p->ring != NULL)
		ring_free(p->ring);
	/* Removed first: a child may still clone3 into it until then. */
	if (p->cg != NULL && cgroup_session_remove(p->cg) == -EBUSY)
		session_bury_cgroup(p->cg);
	session_strv_free(p->argv);
	free(p->cwd);
	free(p->user);
	free(p);
}

/* The pending create of id, or NULL. */
static struct session_pending *
session_pending_find(const char *id)
{
	struct session_pending	*p;

	LIST_FOREACH(p, &pendings, entry) {
		if (strcmp(p->id, id) == 0)
			return (p);
	}
	return (NULL);
}

/* Give up the pending create of arg: its fn is never called. */
void
session_create_cancel(void *arg)
{
	struct session_pending	*p;

	LIST_FOREACH(p, &pendings, entry) {
		if (p->arg == arg)
			break;
	}
	if (p == NULL)
		return;
	log_info("%s: create of %s cancelled", __func__, p->id);
	spawner_cancel(p->job);
	LIST_REMOVE(p, entry);
	npending--;
	ring_total -= p->ring_bytes;
	kept_total -= p->kept_bytes;
	session_pending_free(p);
}

/* Answer every pending create 503 shutting_down and give it up. */
void
session_create_cancel_all(void)
{
	struct session_pending	*p;
	struct proto_err	 err;

	while ((p = LIST_FIRST(&pendings)) != NULL) {
		spawner_cancel(p->job);
		LIST_REMOVE(p, entry);
		npending--;
		ring_total -= p->ring_bytes;
		kept_total -= p->kept_bytes;
		proto_fail(&err, 503, "shutting_down", "agentd is shutting "
		    "down");
		p->fn(NULL, &err, p->arg);
		session_pending_free(p);
	}
}

/* Creates whose spawn is under way. */
size_t
session_count_starting(void)
{
	return (npending);
}

/* Turn a pending create whose child runs into a session; the ring moves. */
static struct session *
session_attach(struct session_pending *p, const struct pty_proc *proc)
{
	struct session	*s;
	size_t		 i;
	int		 status;

	s = xcalloc(1, sizeof *s);
	snprintf(s->id, sizeof s->id, "%s", p->id);
	s->ring = p->ring;
	p->ring = NULL;
	s->argv = p->argv;
	p->argv = NULL;
	s->cwd = p->cwd;
	p->cwd = NULL;
	s->user = p->user;
	p->user = NULL;
	s->tty = p->tty;
	s->rows = p->rows;
	s->cols = p->cols;
	s->pid = proc->pid;
	s->started_ms = clock_wall_ms();
	s->output_ms = clock_mono_ms();
	s->ended_ms = -1;
	s->ring_bytes = p->ring_bytes;
	s->cg = p->cg;
	p->cg = NULL;
	s->usage.cpu_ms = s->usage.memory_peak_bytes = s->usage.pids_peak =
	    s->usage.oom_kills = -1;
	s->kept_bytes = p->kept_bytes;
	s->seq = next_seq++;

	for (i = 0; i < 2; i++) {
		s->out[i].s = s;
		s->out[i].fd = -1;
	}
	if (p->tty) {
		s->out[0].fd = proc->master;
		s->out[0].stream = RING_STREAM_PTY;
		s->in = proc->master;
	} else {
		s->out[0].fd = proc->out;
		s->out[0].stream = RING_STREAM_STDOUT;
		s->out[1].fd = proc->err;
		s->out[1].stream = RING_STREAM_STDERR;
		s->in = proc->in;
		session_pipe_size(s, proc->out);
		session_pipe_size(s, proc->err);
	}
	for (i = 0; i < 2; i++) {
		if (s->out[i].fd == -1)
			continue;
		s->out[i].ev = event_new(session_base, s->out[i].fd,
		    EV_READ | EV_PERSIST, session_read_cb, &s->out[i]);
		event_add(s->out[i].ev, NULL);
		s->nopen++;
	}
	s->inq = evbuffer_new();
	if (s->in != -1)
		s->in_ev = event_new(session_base, s->in, EV_WRITE,
		    session_write_cb, s);
	s->timeout_ev = evtimer_new(session_base, session_timeout_cb, s);
	s->kill_ev = evtimer_new(session_base, session_kill_cb, s);
	s->drain_ev = evtimer_new(session_base, session_drain_cb, s);
	s->ttl_ev = evtimer_new(session_base, session_ttl_cb, s);
	s->hup_ev = evtimer_new(session_base, session_hup_cb, &s->out[0]);
	if (s->inq == NULL || s->timeout_ev == NULL || s->kill_ev == NULL ||
	    s->drain_ev == NULL || s->ttl_ev == NULL || s->hup_ev == NULL ||
	    (s->in != -1 && s->in_ev == NULL))
		fatal("%s: out of memory", __func__);
	if (p->timeout_ms > 0)
		session_timer_add(s->timeout_ev, p->timeout_ms);

	TAILQ_INSERT_TAIL(&sessions, s, entry);
	nrunning++;
	ring_total += s->ring_bytes;
	kept_total += s->kept_bytes;
	agentd_stats.sessions_started++;
	log_info("%s: session %s pid %ld %s%s%s", __func__, s->id,
	    (long)s->pid, s->tty ? "tty" : "pipes", s->cg != NULL ?
	    " cgroup " : "", s->cg != NULL ? cgroup_session_name(s->cg) : "");
	session_notify(s, SESSION_EV_CREATED);
	/* Its SIGCHLD may have come before it was listed. */
	if (session_waitid(s->pid, &status)) {
		session_status_in(s, status);
		session_sweep_soon(1);
	}
	return (s);
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
 * The cgroup of a new session, with the request's limits or the defaults;
 * NULL without containment "cgroup".  A limit the request asks for that
 * cannot be applied is 422 limits_unavailable; a default that cannot be
 * was logged by session_init() (no controller) and is left out.
 */
static int
session_cgroup(const struct proto_create *pc, struct cgroup **out,
    struct proto_err *err)
{
	struct cgroup_limits	 l;
	const char		*name;
	char			 cause[PTY_CAUSE_MAX];
	unsigned		 ctrl = cgroup_controllers();

	*out = NULL;
	l.memory_bytes = pc->limit_memory;
	l.pids = pc->limit_pids;
	l.cpu_percent = pc->limit_cpu;
	if (!cgroup_enabled()) {
		name = l.memory_bytes > 0 ? "memory_bytes" : l.pids > 0 ?
		    "pids" : l.cpu_percent > 0 ? "cpu_percent" : NULL;
		if (name != NULL)
			return (proto_fail(err, 422, "limits_unavailable",
			    "limit '%s' needs a writable cgroup v2 hierarchy "
			    "(containment is process_group)", name));
		return (0);
	}
	if ((name = cgroup_limit_unavailable(&l)) != NULL)
		return (proto_fail(err, 422, "limits_unavailable",
		    "limit '%s': its cgroup controller is not enabled here",
		    name));
	if (l.memory_bytes == 0 && (ctrl & CGROUP_CTRL_MEMORY))
		l.memory_bytes = limits.memory_bytes;
	if (l.pids == 0 && (ctrl & CGROUP_CTRL_PIDS))
		l.pids = limits.pids;
	if (l.cpu_percent == 0 && (ctrl & CGROUP_CTRL_CPU))
		l.cpu_percent = limits.cpu_percent;
	if (cgroup_session_new(&l, out, &name, cause, sizeof cause) != 0) {
		agentd_stats.sessions_spawn_failed++;
		if (name != NULL)
			return (proto_fail(err, 422, "limits_unavailable",
			    "limit '%s': %s", name, cause));
		return (proto_fail(err, 422, "spawn_failed", "%s", cause));
	}
	return (0);
}

/*
 * Read the cgroup's usage, at most every SESSION_USAGE_MS unless forced;
 * the first OOM kill seen is counted and logged.
 */
static void
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

/*
 * Give an output pipe --pipe-bytes of kernel buffer.  A flood then runs on
 * while agentd answers a request instead of blocking at 64 KiB, and each
 * read of it wakes the writer less often: in bench scenario 3, half the
 * requests per MiB and 0.78 -> 0.67 ms of agentd CPU per MiB (raw).  The
 * kernel holds at most that much unread per pipe; an unprivileged agentd
 * may not pass /proc/sys/fs/pipe-max-size (1 MiB), and the pipe then keeps
 * its size.
 */
static void
session_pipe_size(struct session *s, int fd)
{
	if (limits.pipe_bytes == 0 || fd == -1)
		return;
	if (fcntl(fd, F_SETPIPE_SZ, (int)limits.pipe_bytes) == -1)
		log_debug("%s: session %s fd %d: F_SETPIPE_SZ %llu: %s",
		    __func__, s->id, fd, (unsigned long long)limits.pipe_bytes,
		    strerror(errno));
}

/*
 * Bytes the output fd at hand may read in this loop turn: SESSION_READ_BUDGET
 * while the fds served before it in the turn read less than
 * SESSION_TURN_BUDGET together, else SESSION_READ_MAX.  One flood reads in
 * big turns (a pipe of --pipe-bytes holds more than a turn); many share
 * about SESSION_TURN_BUDGET, so a turn stays short for the requests
 * waiting behind it (six floods with a quarter MiB each made healthz 4x
 * slower).  The turn's first read activates turn_ev, which runs after the
 * callbacks already queued in this turn and starts the count again.
 */
static size_t
session_turn_budget(void)
{
	if (!turn_open) {
		turn_open = 1;
		turn_bytes = 0;
		event_active(turn_ev, EV_TIMEOUT, 1);
	}
	return (turn_bytes < SESSION_TURN_BUDGET ? SESSION_READ_BUDGET :
	    SESSION_READ_MAX);
}

/* The loop turn's output callbacks ran: the next read starts a new count. */
static void
session_turn_cb(evutil_socket_t fd, short events, void *arg)
{
	turn_open = 0;
}

/*
 * Whether agentd is exempt from the kernel's per-user pipe budget: the
 * buffers of an unprivileged user's pipes count against
 * fs.pipe-user-pages-soft (64 MiB), and past it the kernel gives that
 * user's new pipes, its sessions' own included, two pages each.
 */
static int
session_pipe_exempt(void)
{
	struct __user_cap_header_struct	hdr;
	struct __user_cap_data_struct	data[_LINUX_CAPABILITY_U32S_3];

	memset(&hdr, 0, sizeof hdr);
	hdr.version = _LINUX_CAPABILITY_VERSION_3;
	if (syscall(SYS_capget, &hdr, data) == -1)
		return (0);
	return ((data[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective &
	    CAP_TO_MASK(CAP_SYS_RESOURCE)) != 0 ||
	    (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &
	    CAP_TO_MASK(CAP_SYS_ADMIN)) != 0);
}

/* The output pipes' buffer size given to new pipe sessions, 0: the kernel's. */
uint64_t
session_pipe_bytes(void)
{
	return (limits.pipe_bytes);
}

/* Output is readable: capture it. */
static void
session_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session_out	*o = arg;
	struct session		*s = o->s;
	uint64_t		 before = ring_newest(s->ring);
	uint64_t		 bytes = agentd_stats.output_bytes;
	int			 closed;

	closed = session_capture(o, session_turn_budget());
	turn_bytes += agentd_stats.output_bytes - bytes;
	if (ring_newest(s->ring) != before) {
		s->hup_ms = 0;
		session_notify(s, SESSION_EV_OUTPUT);
	}
	if (closed && s->tty && !s->reaped)
		session_hup(o);
	else if (closed) {
		session_close_out(o);
		session_check_exit(s, 0);
	}
}

/*
 * EIO on a PTY master while the leader lives: every slave fd is closed (a
 * program closing 0-2 at exit, as coreutils do), but closing the master now
 * would hang the terminal up and SIGHUP the leader.  Keep the master and look
 * at it again later (a hung-up master polls readable, so it cannot stay in
 * the loop): a process may reopen /dev/tty.  The leader's exit closes it.
 */
static void
session_hup(struct session_out *o)
{
	struct session	*s = o->s;

	if (!s->hup)
		log_debug("%s: session %s: slave closed, leader alive",
		    __func__, s->id);
	s->hup = 1;
	event_del(o->ev);
	s->hup_ms = s->hup_ms == 0 ? SESSION_HUP_POLL_MIN_MS :
	    s->hup_ms * 2 > SESSION_HUP_POLL_MAX_MS ? SESSION_HUP_POLL_MAX_MS :
	    s->hup_ms * 2;
	session_timer_add(s->hup_ev, s->hup_ms);
}

/* Time to look at a hung-up master again. */
static void
session_hup_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session_out	*o = arg;

	if (o->fd != -1)
		event_add(o->ev, NULL);
}

/*
 * Read from o into the ring until EAGAIN or budget bytes, straight into the
 * ring.  Reads of one stream are joined into one chunk, up to
 * SESSION_JOIN_BYTES, while no reader waits (one chunk per read made tiny
 * chunks fill the ring's index long before its bytes); the chunk is
 * published when full, when the other stream has output, at the end of
 * the round if a reader waits, and whenever anyone looks at the session.
 * Within a budget, a short read that took all FIONREAD announced also ends
 * the turn: the event is level-triggered and comes back if more arrived, so
 * an echo costs no FIONREAD and read that find nothing (a flood still reads
 * to EAGAIN).  A budget of SIZE_MAX drains until EAGAIN or EOF.
 * A PTY master hands out at most n_tty's 4 KiB buffer per read, so a flood
 * is a read per 4 KiB: it is read without FIONREAD (into the pending room
 * when SESSION_TTY_ROOM is left, else a new chunk), and a read that emptied
 * a full buffer goes on at once (the next read waits for the tty's worker
 * to refill it) instead of a trip through epoll (whose tty poll waits for
 * that worker too); a read that found less ends the turn.
 * Returns 1 when the fd reached EOF (or EIO on a PTY master), 0 otherwise.
 */
static int
session_capture(struct session_out *o, size_t budget)
{
	struct session	*s = o->s;
	uint8_t		 small[SESSION_SMALL_READ];
	size_t		 len, done = 0;
	ssize_t		 n;
	void		*p;
	int		 avail, closed = 0;

	while (done < budget) {
		if (s->tty)
			avail = SESSION_TTY_ROOM;
		else if (ioctl(o->fd, FIONREAD, &avail) == -1 || avail < 0)
			avail = 0;
		if ((p = session_room(o, (size_t)avail, &len)) == NULL) {
			/* EOF, or data that arrived since: read it aside. */
			n = read(o->fd, small, sizeof small);
			if (n > 0) {
				session_publish(s);
				ring_append(s->ring, small, n, o->stream);
			}
		} else if ((n = read(o->fd, p, len)) > 0) {
			s->pend_len += n;
			if (s->pend_len == s->pend_room)
				session_publish_full(s);
			if (budget != SIZE_MAX && (s->tty ?
			    (size_t)n < len && n < SESSION_TTY_FULL :
			    n == avail && avail < SESSION_SHORT_READ)) {
				done += n;
				break;
			}
		}
		if (n > 0) {
			done += n;
			continue;
		}
		if (n == 0 || errno == EIO) {
			closed = 1;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			break;
		log_warn("%s: session %s fd %d: %s", __func__, s->id, o->fd,
		    strerror(errno));
		closed = 1;
		break;
	}
	if (s->watchers > 0)
		session_publish(s);
	if (done > 0)
		s->output_ms = clock_mono_ms();
	agentd_stats.output_bytes += done;
	return (closed);
}

/*
 * Where the next read of o goes, and *len how much to read: the free room
 * of the pending chunk if it is o's stream's and there is room for avail
 * bytes (FIONREAD's figure); else a new pending chunk (the old one
 * published) of avail bytes or the join size, whichever is larger.  A read
 * takes at most SESSION_READ_MAX and 1/SESSION_READ_SHARE of the ring, so a
 * small ring is not emptied by one eviction.  NULL when avail is 0 and no
 * pending room is left: the caller reads aside rather than evict old output
 * for nothing.
 */
static void *
session_room(struct session_out *o, size_t avail, size_t *len)
{
	struct session	*s = o->s;
	size_t		 join, want, most, room;

	most = ring_chunk_max(s->ring) / SESSION_READ_SHARE;
	if (most > SESSION_READ_MAX)
		most = SESSION_READ_MAX;
	if (avail > most)
		avail = most;
	room = s->pend_room - s->pend_len;
	if (s->pend != NULL && s->pend_stream == o->stream &&
	    room >= (avail > 0 ? avail : 1)) {
		*len = room;
		return (s->pend + s->pend_len);
	}
	if (avail == 0)
		return (NULL);
	/* A read of the same stream follows: no character split between. */
	if (s->pend != NULL && s->pend_stream == o->stream)
		session_publish_full(s);
	else
		session_publish(s);

	join = ring_chunk_max(s->ring) / SESSION_JOIN_SHARE;
	if (join > SESSION_JOIN_BYTES)
		join = SESSION_JOIN_BYTES;
	want = avail > join ? avail : join;
	if (s->carry_len > 0 && s->carry_stream == o->stream)
		want += s->carry_len;
	if ((s->pend = ring_reserve(s->ring, &want)) == NULL)
		return (NULL);	/* ids used up: ring_append says so too */
	s->pend_len = 0;
	s->pend_room = want;
	s->pend_stream = o->stream;
	/* What the last full chunk of this stream left begins this one. */
	if (s->carry_len > 0 && s->carry_stream == o->stream &&
	    want > s->carry_len) {
		memcpy(s->pend, s->carry, s->carry_len);
		s->pend_len = s->carry_len;
		s->carry_len = 0;
	}
	*len = want - s->pend_len;
	return (s->pend + s->pend_len);
}

/*
 * Publish the pending chunk, if any bytes were read into it, after what a
 * full chunk left over, if anything (then as a chunk of its own: nobody who
 * looks sees output later than it was read).
 */
static void
session_publish(struct session *s)
{
	if (s->carry_len > 0 && (s->pend == NULL ||
	    s->pend_stream != s->carry_stream || s->pend_len == 0)) {
		/* The pending chunk, if any, holds no byte yet: rebuilt. */
		s->pend = NULL;
		(void)ring_append(s->ring, s->carry, s->carry_len,
		    s->carry_stream);
		s->carry_len = 0;
	}
	if (s->pend == NULL)
		return;
	if (s->pend_len > 0)
		ring_commit(s->ring, s->pend_len, s->pend_stream);
	s->pend = NULL;
	s->pend_len = s->pend_room = 0;
}

/*
 * Publish the pending chunk, full (or too full for the next read of its
 * stream): when it ends inside a UTF-8 sequence
 * (the last read stopped there, and more of the stream is likely to
 * follow), that sequence's first bytes are left to the next chunk of the
 * stream, so that a cut agentd chose splits no character (API.md).
 */
static void
session_publish_full(struct session *s)
{
	size_t	keep;

	keep = proto_utf8_cut(s->pend, s->pend_len);
	if (keep == 0 || s->pend_len - keep > SESSION_CARRY_MAX ||
	    s->carry_len > 0) {
		session_publish(s);
		return;
	}
	s->carry_len = s->pend_len - keep;
	s->carry_stream = s->pend_stream;
	memcpy(s->carry, s->pend + keep, s->carry_len);
	s->pend_len = keep;
	session_publish(s);
}

/* Milliseconds since output was last read (or since the start). */
int64_t
session_quiet_ms(const struct session *s)
{
	return (clock_mono_ms() - s->output_ms);
}

/* A reader starts (on) or stops waiting for new output. */
void
session_watch(struct session *s, int on)
{
	if (on) {
		s->watchers++;
		session_publish(s);
	} else if (s->watchers > 0)
		s->watchers--;
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
		session_publish(s);
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
		session_publish(s);
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
static void
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
static int
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

/* The exit cap passed with the output still open. */
static void
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
	session_sweep_soon(1);	/* a DELETE waits for the release */
}

/* An exited session's time is up: its leftovers get the usual grace. */
static void
session_ttl_cb(evutil_socket_t fd, short events, void *arg)
{
	struct session	*s = arg;

	log_debug("%s: session %s expired", __func__, s->id);
	session_terminate(s, SESSION_KILL_AFTER_MS);
	session_remove(s);
}

/*
 * Queue input at the client's offset (-1: none), exactly once: what was
 * accepted before is skipped.  *dup tells a write accepted whole before.
 */
ssize_t
session_write_stdin_at(struct session *s, const void *data, size_t len,
    int eof, int64_t offset, int *dup, struct proto_err *err)
{
	uint64_t	skip;

	*dup = 0;
	if (offset < 0)
		return (session_write_stdin(s, data, len, eof, err));
	if ((uint64_t)offset > s->stdin_bytes)
		return (proto_fail(err, 409, "stdin_offset_mismatch",
		    "offset %lld is after the %llu stdin bytes accepted",
		    (long long)offset, (unsigned long long)s->stdin_bytes));
	skip = s->stdin_bytes - (uint64_t)offset;
	if (skip > 0 && skip >= len) {
		/* Accepted before, its eof with it: nothing to do again. */
		*dup = 1;
		return (0);
	}
	return (session_write_stdin(s, (const uint8_t *)data + skip,
	    len - skip, eof, err));
}

/* Bytes of stdin accepted so far. */
uint64_t
session_stdin_bytes(const struct session *s)
{
	return (s->stdin_bytes);
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
	s->stdin_bytes += len;
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
	free(s);
}

/* Label the session with envd's tag (NULL: none). */
void
session_set_tag(struct session *s, const char *tag)
{
	free(s->tag);
	s->tag = tag != NULL ? xstrdup(tag) : NULL;
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

/*
 * Keep a removed session's unreleased leader until its group's SIGKILL, in
 * ms (now when ms <= 0), then reap it.  The output fds go with it, unread:
 * leftovers writing a last word during the grace get no SIGPIPE for it.
 */
static void
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
static void
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
static void
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
static void
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
static void
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
static void
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
		session_publish(s);
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
	if (s->inq == NULL || s->timeout_ev == NULL || s->kill_ev == NULL ||
	    s->drain_ev == NULL || s->ttl_ev == NULL || s->hup_ev == NULL ||
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
