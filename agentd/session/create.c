/*
 * create.c -- a session's start: checks and reservations, the environment
 * and the user, the spawn on the spawner's threads, and the attach of the
 * running child as a session.
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

static LIST_HEAD(, session_pending) pendings =
    LIST_HEAD_INITIALIZER(pendings);
static size_t			 npending;
static uint64_t			 next_id = 1;

/* The variables of the "noninteractive" profile (API.md), beside TERM. */
static const char *const session_quiet_env[] = {
	"NO_COLOR=1", "PAGER=cat", "GIT_PAGER=cat", "GH_PAGER=cat",
	"LC_ALL=C.UTF-8",
};

static int	session_profile(const struct proto_create *);
static void	session_env_set(char **, size_t *, const char *);
static char	**session_environ(const struct proto_create *,
		    const struct pty_user *);
static char	**session_strv_dup(char *const *);
static char	*session_cwd(const char *);
static void	session_spawned(const struct spawner_result *, void *);
static struct session *session_attach(struct session_pending *,
		    const struct pty_proc *);
static void	session_pending_free(struct session_pending *);
static size_t	session_bytes(char *const *, const char *, const char *);
static struct session_pending *session_pending_find(const char *);
static int	session_cgroup(const struct proto_create *, struct cgroup **,
		    struct proto_err *);

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
void
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
	s->output_ms = s->start_mono_ms = clock_mono_ms();
	s->start_rows = s->rows;
	s->start_cols = s->cols;
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
	s->hold_ev = evtimer_new(session_base, session_hold_cb, s);
	if (s->inq == NULL || s->timeout_ev == NULL || s->kill_ev == NULL ||
	    s->drain_ev == NULL || s->ttl_ev == NULL || s->hup_ev == NULL ||
	    s->hold_ev == NULL ||
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
