/*
 * freeze.c -- envd's POST /freeze, /unfreeze, /fsfreeze, /fsthaw (see
 * freeze.h).  The kernel's cgroup-v2.rst: cgroup.freeze is a cgroup's own
 * request, cgroup.events' "frozen" the settled state of its tasks.
 */
#include <sys/ioctl.h>
#include <sys/types.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>

#include "cgroup.h"
#include "config.h"
#include "connect.h"
#include "freeze.h"
#include "hold.h"
#include "http.h"
#include "log.h"
#include "proto.h"
#include "util.h"

#ifndef FIFREEZE
#define FIFREEZE	_IOWR('X', 119, int)
#define FITHAW		_IOWR('X', 120, int)
#endif

/* What a sweep did and saw: FreezeResult. */
struct freeze_result {
	const char	*mode;
	int		 visited, allowlisted, truncated, prefrozen;
	int		 requested, frozen, notfrozen, failed, unobservable;
	int64_t		 sweep_ms, wait_ms;
};

/* A list of cgroup paths. */
struct freeze_list {
	char		**p;
	size_t		  n, cap;
};

/* A /freeze waiting for its cgroups to read frozen: the lock. */
struct freeze_wait {
	struct evhttp_request	*req;
	struct hold		*hold;
	struct event		*poll;
	struct freeze_result	 r;
	struct freeze_list	 targets;	/* not read frozen yet */
	int64_t			 start_ms;	/* the wait's */
};

static struct event_base	*freeze_base;
static uint64_t			 freeze_walk_max = FREEZE_WALK_DEFAULT;
static struct freeze_wait	*freeze_waiting;
static int			 freeze_thaw_due;	/* /init came meanwhile */
static int			 freeze_active;	/* a freeze of ours stands */
static struct freeze_list	 freeze_guest;	/* frozen by the guest */
static uint64_t			 freeze_n, freeze_thaws, freeze_cut, freeze_nbusy;
static char			 freeze_root[PATH_MAX];	/* R of cgroup.h */

/* Where systemd's cgroups the resume needs live (envd's allowlist). */
static const char *freeze_allow[] = {
	"init.scope", "system.slice/systemd-journald.service",
	"system.slice/rpcbind.service", "system.slice/rpcbind.socket",
	"system.slice/rpc-statd.service",
};

static void	freeze_post(struct http_req *, const struct pty_user *, int);
static void	freeze_unfreeze(struct http_req *, const struct pty_user *,
		    int);
static void	freeze_fs(struct http_req *, const struct pty_user *, int);
static int	freeze_query(struct http_req *, int *hier, int64_t *maxcg,
		    int64_t *waitms);
static int	freeze_parse_int(const char *, int64_t *, char *, size_t);
static int	freeze_self(char *, size_t);
static int	freeze_flag(const char *dir, const char *file, const char *key);
static int	freeze_set(const char *dir, const char *val);
static void	freeze_list_add(struct freeze_list *, const char *);
static int	freeze_list_has(const struct freeze_list *, const char *);
static void	freeze_list_clear(struct freeze_list *);
static int	freeze_children(const char *, struct freeze_list *);
static int	freeze_ancestor(const char *a, const char *p);
static int	freeze_descend(const char *self, const char *p);
static int	freeze_allowlisted(const char *p);
static int	freeze_in_effect(const char *sessions);
static void	freeze_scan(const char *self, struct freeze_result *);
static void	freeze_sweep(const char *self, const char *sessions, int,
		    int64_t maxcg, int rescan, struct freeze_result *,
		    struct freeze_list *);
static int	freeze_thaw(char *cause, size_t causelen);
static int	freeze_check(struct freeze_wait *);
static void	freeze_tick(evutil_socket_t, short, void *);
static void	freeze_deadline(void *);
static void	freeze_gone(void *);
static void	freeze_end(struct freeze_wait *, int answer);
static void	freeze_answer(struct evhttp_request *,
		    const struct freeze_result *);
static void	freeze_busy(struct http_req *);
static void	freeze_204(struct http_req *);
static int	freeze_isdir(const struct dirent *);

static const struct envd_route freeze_routes[] = {
	{ "/freeze", EVHTTP_REQ_POST, 0, freeze_post },
	{ "/unfreeze", EVHTTP_REQ_POST, 0, freeze_unfreeze },
	{ "/fsfreeze", EVHTTP_REQ_POST, 0, freeze_fs },
	{ "/fsthaw", EVHTTP_REQ_POST, 0, freeze_fs },
};

static const struct hold_ops freeze_hold_ops = {
	freeze_deadline, freeze_gone
};

/* Register the routes. */
void
freeze_register(struct event_base *base, const struct config *cfg)
{
	freeze_base = base;
	freeze_walk_max = cfg->envd_freeze_cgroups;
	envd_route_register(freeze_routes, nitems(freeze_routes));
}

/* The lock is held: envd's bare 503. */
static void
freeze_busy(struct http_req *hr)
{
	struct proto_buf	b = { 0 };

	freeze_nbusy++;
	log_debug("%s: %s while a freeze waits", __func__, hr->path);
	http_reply_raw(hr->req, 503, "text/plain", &b);
}

/* An answer with no body and no caching. */
static void
freeze_204(struct http_req *hr)
{
	struct proto_buf	b = { 0 };

	evhttp_add_header(evhttp_request_get_output_headers(hr->req),
	    "Cache-Control", "no-store");
	http_reply_raw(hr->req, 204, "text/plain", &b);
}

/*
 * Go's strconv.ParseInt(s, 10, 64): 0 and *v, or -1 with the error of
 * envd's binding.
 */
static int
freeze_parse_int(const char *s, int64_t *v, char *why, size_t whylen)
{
	const char	*p = s;
	uint64_t	 n = 0, lim;
	int		 neg = 0;

	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	if (*p == '\0')
		goto syntax;
	for (; *p != '\0'; p++) {
		if (!isdigit((unsigned char)*p))
			goto syntax;
		if (n > (lim - (uint64_t)(*p - '0')) / 10) {
			cause_set(why, whylen, "error binding string "
			    "parameter: strconv.ParseInt: parsing \"%.64s\": "
			    "value out of range", s);
			return (-1);
		}
		n = n * 10 + (uint64_t)(*p - '0');
	}
	*v = neg ? (int64_t)(0 - n) : (int64_t)n;
	return (0);
syntax:
	cause_set(why, whylen, "error binding string parameter: "
	    "strconv.ParseInt: parsing \"%.64s\": invalid syntax", s);
	return (-1);
}

/*
 * /freeze's query as envd's generated wrapper binds it (Go's ParseQuery: a
 * pair with ';' dropped, a key without '=' has ""): each parameter at most
 * once, the integers Go's; else http.Error's 400 and -1.  An unknown mode
 * is legacy, as envd takes it.
 */
static int
freeze_query(struct http_req *hr, int *hier, int64_t *maxcg, int64_t *waitms)
{
	static const char *names[] = { "mode", "maxCgroups", "maxWaitMs" };
	struct proto_buf	 b = { 0 };
	const char		*p, *e;
	char			*pair, *key, *val[3] = { NULL, NULL, NULL }, *eq;
	char			 why[192];
	int			 count[3] = { 0, 0, 0 }, i, rc = 0;
	int64_t			*out[3] = { NULL, maxcg, waitms };

	for (p = hr->query; *p != '\0'; p = e + (*e != '\0')) {
		e = p + strcspn(p, "&");
		xasprintf(&pair, "%.*s", (int)(e - p), p);
		if ((eq = strchr(pair, '=')) != NULL)
			*eq++ = '\0';
		key = evhttp_uridecode(pair, 1, NULL);
		for (i = 0; key != NULL && memchr(p, ';', e - p) == NULL &&
		    i < 3; i++) {
			if (strcmp(key, names[i]) == 0 && count[i]++ == 0)
				val[i] = evhttp_uridecode(eq != NULL ? eq : "",
				    1, NULL);
		}
		free(key);
		free(pair);
	}
	*hier = 0;
	*maxcg = *waitms = 0;
	for (i = 0; i < 3 && rc == 0; i++) {
		if (count[i] > 1) {
			cause_set(why, sizeof why, "multiple values for single "
			    "value parameter '%s'", names[i]);
			rc = -1;
		} else if (val[i] != NULL && i == 0)
			*hier = strcmp(val[i], "hierarchy") == 0;
		else if (val[i] != NULL)
			rc = freeze_parse_int(val[i], out[i], why, sizeof why);
		if (rc != 0)
			proto_buf_printf(&b, "Invalid format for parameter %s: "
			    "%s\n", names[i], why);
	}
	for (i = 0; i < 3; i++)
		free(val[i]);
	if (rc != 0) {
		evhttp_add_header(evhttp_request_get_output_headers(hr->req),
		    "X-Content-Type-Options", "nosniff");
		http_reply_raw(hr->req, 400, "text/plain; charset=utf-8", &b);
	}
	return (rc);
}

/*
 * agentd's own cgroup (R/agentd), absolute, and R in freeze_root: 0, or -1
 * (no containment "cgroup").
 */
static int
freeze_self(char *self, size_t len)
{
	char	buf[4096], rel[PATH_MAX], *p;
	ssize_t	n;
	int	fd;

	if (!cgroup_enabled() ||
	    (fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC)) == -1)
		return (-1);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return (-1);
	buf[n] = '\0';
	if (cgroup_parse_self(buf, rel, sizeof rel) != 0 ||
	    (size_t)snprintf(self, len, "%s%s", CGROUP_MOUNT, rel) >= len ||
	    (p = strrchr(self, '/')) == NULL || strcmp(p, "/agentd") != 0)
		return (-1);
	snprintf(freeze_root, sizeof freeze_root, "%.*s", (int)(p - self),
	    self);
	return (0);
}

/* A cgroup's 0/1: its cgroup.freeze (key NULL) or a key of a flat file. */
static int
freeze_flag(const char *dir, const char *file, const char *key)
{
	char		path[PATH_MAX], buf[512];
	uint64_t	v;
	ssize_t		n;
	int		fd;

	snprintf(path, sizeof path, "%s/%s", dir, file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (-errno);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0)
		return (-EIO);
	buf[n] = '\0';
	if (key == NULL)
		return (buf[0] == '1');
	if (cgroup_parse_key(buf, key, &v) != 0)
		return (-EINVAL);
	return (v != 0);
}

/* Write cgroup.freeze: 0, or -errno. */
static int
freeze_set(const char *dir, const char *val)
{
	char	path[PATH_MAX];
	int	fd, error = 0;

	snprintf(path, sizeof path, "%s/cgroup.freeze", dir);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
		return (-errno);
	if (write(fd, val, 1) != 1)
		error = -errno;
	close(fd);
	return (error);
}

/* Append a copy of a path. */
static void
freeze_list_add(struct freeze_list *l, const char *p)
{
	if (l->n == l->cap) {
		l->cap = l->cap == 0 ? 16 : l->cap * 2;
		l->p = xrealloc(l->p, l->cap * sizeof *l->p);
	}
	l->p[l->n++] = xstrdup(p);
}

/* Whether a list holds a path. */
static int
freeze_list_has(const struct freeze_list *l, const char *p)
{
	size_t	i;

	for (i = 0; i < l->n; i++) {
		if (strcmp(l->p[i], p) == 0)
			return (1);
	}
	return (0);
}

/* Empty a list. */
static void
freeze_list_clear(struct freeze_list *l)
{
	while (l->n > 0)
		free(l->p[--l->n]);
	free(l->p);
	l->p = NULL;
	l->cap = 0;
}

/* A directory filter: cgroups are the folders. */
static int
freeze_isdir(const struct dirent *d)
{
	return (d->d_type == DT_DIR && strcmp(d->d_name, ".") != 0 &&
	    strcmp(d->d_name, "..") != 0);
}

/* Append a cgroup's children, by name as Go lists them: 0, or -errno. */
static int
freeze_children(const char *dir, struct freeze_list *out)
{
	struct dirent	**d;
	char		  path[PATH_MAX];
	int		  n, i;

	if ((n = scandir(dir, &d, freeze_isdir, alphasort)) == -1)
		return (-errno);
	for (i = 0; i < n; i++) {
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir,
		    d[i]->d_name) < sizeof path)
			freeze_list_add(out, path);
		free(d[i]);
	}
	free(d);
	return (0);
}

/* Whether a is p or one of p's ancestors. */
static int
freeze_ancestor(const char *a, const char *p)
{
	size_t	n = strlen(a);

	return (strncmp(a, p, n) == 0 && (p[n] == '\0' || p[n] == '/'));
}

/*
 * Whether the sweep goes into p rather than freezing it: p is agentd's
 * cgroup or an ancestor, or an ancestor of an allowlisted cgroup.
 */
static int
freeze_descend(const char *self, const char *p)
{
	char	full[PATH_MAX + 64];
	size_t	i;

	if (freeze_ancestor(p, self))
		return (1);
	for (i = 0; i < nitems(freeze_allow); i++) {
		snprintf(full, sizeof full, "%s/%s", freeze_root,
		    freeze_allow[i]);
		if (strcmp(p, full) != 0 && freeze_ancestor(p, full))
			return (1);
	}
	return (0);
}

/* Whether p is (under) a cgroup of the allowlist. */
static int
freeze_allowlisted(const char *p)
{
	char	full[PATH_MAX + 64];
	size_t	i;

	for (i = 0; i < nitems(freeze_allow); i++) {
		snprintf(full, sizeof full, "%s/%s", freeze_root,
		    freeze_allow[i]);
		if (freeze_ancestor(full, p))
			return (1);
	}
	return (0);
}

/*
 * Whether a freeze of ours stands: remembered, or the sessions' parent
 * reads frozen (every sweep writes it first).
 */
static int
freeze_in_effect(const char *sessions)
{
	return (freeze_active ||
	    freeze_flag(sessions, "cgroup.events", "frozen") == 1);
}

/*
 * Record the cgroups the guest froze itself: the whole tree, breadth
 * first, at most freeze_walk_max, off the sweep's way.
 */
static void
freeze_scan(const char *self, struct freeze_result *r)
{
	struct freeze_list	q = { 0 };
	size_t			i;
	uint64_t		visited = 0;

	freeze_list_clear(&freeze_guest);
	freeze_list_add(&q, freeze_root);
	for (i = 0; i < q.n; i++) {
		if (visited++ >= freeze_walk_max) {
			r->truncated = 1;
			break;
		}
		if (!freeze_descend(self, q.p[i]) &&
		    !freeze_allowlisted(q.p[i]) &&
		    freeze_flag(q.p[i], "cgroup.freeze", NULL) == 1)
			freeze_list_add(&freeze_guest, q.p[i]);
		(void)freeze_children(q.p[i], &q);
	}
	freeze_list_clear(&q);
}

/*
 * Write cgroup.freeze 1: the sessions' parent, then (hierarchy) each child
 * of the cgroups the sweep goes into that it does not go into itself, is
 * not allowlisted and not the guest's.  Written ones go to targets.
 */
static void
freeze_sweep(const char *self, const char *sessions, int hier, int64_t maxcg,
    int rescan, struct freeze_result *r, struct freeze_list *targets)
{
	struct freeze_list	 into = { 0 }, kids = { 0 };
	size_t			 i, j;
	int			 error;

	if ((error = freeze_set(sessions, "1")) != 0) {
		log_warn("%s: %s: %s", __func__, sessions, strerror(-error));
		r->failed++;
	} else {
		r->requested++;
		freeze_list_add(targets, sessions);
	}
	if (!hier)
		return;
	/* The cgroups to go into, in envd's order: the chain, then the
	   allowlist's ancestors. */
	freeze_list_add(&into, freeze_root);
	for (i = 0; i < into.n; i++) {
		kids.n = 0;
		if (freeze_children(into.p[i], &kids) != 0)
			continue;
		for (j = 0; j < kids.n; j++) {
			if (freeze_descend(self, kids.p[j]) &&
			    !freeze_list_has(&into, kids.p[j]))
				freeze_list_add(&into, kids.p[j]);
		}
		for (j = 0; j < kids.n; j++)
			free(kids.p[j]);
		kids.n = 0;
	}
	for (i = 0; i < into.n; i++) {
		freeze_children(into.p[i], &kids);
		for (j = 0; j < kids.n; j++) {
			const char *c = kids.p[j];

			if (r->visited >= maxcg) {
				r->truncated = 1;
				goto out;
			}
			r->visited++;
			if (freeze_descend(self, c) || strcmp(c, sessions) == 0)
				continue;
			if (freeze_allowlisted(c)) {
				r->allowlisted++;
				continue;
			}
			if (freeze_list_has(&freeze_guest, c))
				continue;
			/* Frozen since the scan: the guest's too. */
			if (rescan && freeze_flag(c, "cgroup.freeze", NULL) ==
			    1) {
				freeze_list_add(&freeze_guest, c);
				r->prefrozen++;
				continue;
			}
			if ((error = freeze_set(c, "1")) != 0) {
				log_warn("%s: %s: %s", __func__, c,
				    strerror(-error));
				r->failed++;
				continue;
			}
			r->requested++;
			freeze_list_add(targets, c);
		}
		freeze_list_clear(&kids);
	}
out:
	freeze_list_clear(&kids);
	freeze_list_clear(&into);
}

/* POST /freeze */
static void
freeze_post(struct http_req *hr, const struct pty_user *u, int authorized)
{
	struct freeze_wait	*w;
	char			 self[PATH_MAX], sessions[PATH_MAX + 16];
	int64_t			 maxcg, waitms, t0;
	int			 hier, rescan;

	if (freeze_query(hr, &hier, &maxcg, &waitms) != 0)
		return;
	if (freeze_waiting != NULL) {
		freeze_busy(hr);
		return;
	}
	if (maxcg <= 0)
		maxcg = FREEZE_MAX_CGROUPS_DEFAULT;
	if ((uint64_t)maxcg > freeze_walk_max)
		maxcg = (int64_t)freeze_walk_max;
	if (waitms > FREEZE_WAIT_MAX_MS)
		waitms = FREEZE_WAIT_MAX_MS;

	w = xcalloc(1, sizeof *w);
	w->r.mode = "legacy";
	t0 = clock_mono_ms();
	if (freeze_self(self, sizeof self) != 0) {
		/* envd's no-cgroup-manager freeze: nothing to read back. */
		w->r.requested = 1;
		w->r.unobservable = waitms > 0;
	} else {
		snprintf(sessions, sizeof sessions, "%s/sessions", freeze_root);
		if ((rescan = !freeze_in_effect(sessions)))
			freeze_scan(self, &w->r);
		w->r.prefrozen = (int)freeze_guest.n;
		if (hier)
			w->r.mode = "hierarchy";
		freeze_sweep(self, sessions, hier, maxcg, rescan, &w->r,
		    &w->targets);
		freeze_active |= w->r.requested > 0;
	}
	w->start_ms = clock_mono_ms();
	w->r.sweep_ms = w->start_ms - t0;
	freeze_n++;
	freeze_cut += w->r.truncated;
	log_info("%s: %s: %d requested, %d failed, %d visited%s", __func__,
	    w->r.mode, w->r.requested, w->r.failed, w->r.visited,
	    w->r.truncated ? " (truncated)" : "");
	w->req = hr->req;
	if (waitms <= 0) {
		freeze_end(w, 0);
		freeze_204(hr);
		return;
	}
	if (freeze_check(w) == 0) {
		freeze_end(w, 1);
		return;
	}
	freeze_waiting = w;
	w->hold = hold_new(hr->req, waitms, &freeze_hold_ops, w);
	w->poll = evtimer_new(freeze_base, freeze_tick, w);
	freeze_tick(-1, 0, w);
}

/* Read the targets' state: the ones still not frozen stay; how many. */
static int
freeze_check(struct freeze_wait *w)
{
	size_t	i, n = 0;
	int	f;

	for (i = 0; i < w->targets.n; i++) {
		if ((f = freeze_flag(w->targets.p[i], "cgroup.events",
		    "frozen")) == 1)
			w->r.frozen++;
		else if (f < 0)
			w->r.failed++;
		if (f != 0)
			free(w->targets.p[i]);
		else
			w->targets.p[n++] = w->targets.p[i];
	}
	w->targets.n = n;
	return ((int)n);
}

/* The poll (events 0: arm it): again in FREEZE_POLL_MS while some are
   not frozen. */
static void
freeze_tick(evutil_socket_t fd, short events, void *arg)
{
	struct freeze_wait	*w = arg;
	struct timeval		 tv;

	if ((events & EV_TIMEOUT) && freeze_check(w) == 0) {
		freeze_end(w, 1);
		return;
	}
	evtimer_add(w->poll, timeval_ms(&tv, FREEZE_POLL_MS));
}

/* The budget ended. */
static void
freeze_deadline(void *arg)
{
	struct freeze_wait	*w = arg;

	freeze_check(w);
	freeze_end(w, 1);
}

/* The caller went: nothing to answer; the lock is free again. */
static void
freeze_gone(void *arg)
{
	freeze_end(arg, 0);
}

/*
 * End a freeze: its counts, its answer (when asked), the lock, and the
 * thaw an /init asked for meanwhile.
 */
static void
freeze_end(struct freeze_wait *w, int answer)
{
	struct freeze_result	*r = &w->r;
	char			 cause[256];
	int			 held = freeze_waiting == w;

	r->wait_ms = clock_mono_ms() - w->start_ms;
	r->notfrozen = (int)w->targets.n;
	if (answer)
		freeze_answer(w->req, r);
	if (w->hold != NULL)
		hold_free(w->hold);
	if (w->poll != NULL)
		event_free(w->poll);
	freeze_list_clear(&w->targets);
	free(w);
	if (held) {
		freeze_waiting = NULL;
		if (freeze_thaw_due) {
			freeze_thaw_due = 0;
			if (freeze_thaw(cause, sizeof cause) != 0)
				log_warn("%s: /init's thaw: %s", __func__,
				    cause);
		}
	}
}

/* 200 with the FreezeResult, in envd's field order. */
static void
freeze_answer(struct evhttp_request *req, const struct freeze_result *r)
{
	struct proto_buf	b = { 0 };

	proto_buf_printf(&b, "{\"mode\":\"%s\",\"visited\":%d,"
	    "\"allowlisted\":%d,\"truncated\":%s,\"preFrozen\":%d,"
	    "\"requested\":%d,\"frozen\":%d,\"notFrozen\":%d,\"failed\":%d,"
	    "\"unobservable\":%d,\"sweepMs\":%" PRId64 ",\"waitMs\":%" PRId64
	    "}\n", r->mode, r->visited, r->allowlisted, r->truncated ?
	    "true" : "false", r->prefrozen, r->requested, r->frozen,
	    r->notfrozen, r->failed, r->unobservable, r->sweep_ms, r->wait_ms);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Cache-Control", "no-store");
	http_reply_raw(req, 200, "application/json", &b);
}

/*
 * Thaw: the sessions' parent, then, when a freeze of ours stands, every
 * cgroup off agentd's chain reading cgroup.freeze 1 but the guest's own.
 * 0, or -1 with a cause (the failures are counted in it).
 */
static int
freeze_thaw(char *cause, size_t causelen)
{
	struct freeze_list	q = { 0 };
	char			self[PATH_MAX], sessions[PATH_MAX + 16];
	size_t			i;
	int			discover, failed = 0, truncated = 0, thawed = 0;
	int			preserved = 0, error;

	freeze_thaws++;
	if (freeze_self(self, sizeof self) != 0)
		return (0);
	snprintf(sessions, sizeof sessions, "%s/sessions", freeze_root);
	discover = freeze_in_effect(sessions);
	if ((error = freeze_set(sessions, "0")) != 0 && error != -ENOENT)
		failed++;
	if (discover) {
		freeze_list_add(&q, freeze_root);
		for (i = 0; i < q.n; i++) {
			const char *c = q.p[i];

			if (i >= freeze_walk_max) {
				truncated = 1;
				break;
			}
			if (freeze_ancestor(c, self))
				;
			else if (freeze_list_has(&freeze_guest, c))
				preserved++;
			else if ((error = freeze_flag(c, "cgroup.freeze",
			    NULL)) == 1) {
				if ((error = freeze_set(c, "0")) == 0)
					thawed++;
				else if (error != -ENOENT)
					failed++;
			} else if (error < 0 && error != -ENOENT)
				failed++;
			(void)freeze_children(c, &q);
		}
		freeze_list_clear(&q);
	}
	freeze_cut += truncated;
	log_info("%s: %d thawed, %d preserved, %d failed%s", __func__, thawed,
	    preserved, failed, truncated ? " (truncated)" : "");
	if (failed == 0 && !truncated) {
		freeze_active = 0;
		return (0);
	}
	cause_set(cause, causelen, "%d cgroups failed to thaw%s", failed,
	    truncated ? ", the walk was truncated" : "");
	return (-1);
}

/* POST /unfreeze */
static void
freeze_unfreeze(struct http_req *hr, const struct pty_user *u,
    int authorized)
{
	char	cause[256];

	if (freeze_waiting != NULL) {
		freeze_busy(hr);
		return;
	}
	if (freeze_thaw(cause, sizeof cause) != 0) {
		envd_plain_fail(hr, 500, "unfreeze workload cgroups: %s", cause);
		return;
	}
	freeze_204(hr);
}

/* /init's thaw. */
void
freeze_thaw_deferred(void)
{
	char	cause[256];

	if (freeze_waiting != NULL) {
		freeze_thaw_due = 1;
		return;
	}
	if (freeze_thaw(cause, sizeof cause) != 0)
		log_warn("%s: %s", __func__, cause);
}

/* POST /fsfreeze, POST /fsthaw: FIFREEZE, FITHAW on "/". */
static void
freeze_fs(struct http_req *hr, const struct pty_user *u, int authorized)
{
	const char	*op;
	int		 thaw = strcmp(hr->path, "/fsthaw") == 0, fd, rc;

	op = thaw ? "FITHAW" : "FIFREEZE";
	/* envd's fsFreezeLock is its own: a cgroup freeze's wait is not it. */
	if (!thaw && getpid() != 1) {
		envd_plain_fail(hr, 500, "FIFREEZE /: refused: agentd is not "
		    "PID 1, and / is not a sandbox's own");
		return;
	}
	if ((fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
		envd_plain_fail(hr, 500, "open /: %s", strerror(errno));
		return;
	}
	rc = ioctl(fd, thaw ? FITHAW : FIFREEZE, 0);
	if (rc == -1 && errno == (thaw ? EINVAL : EBUSY))
		rc = 0;		/* thawed, frozen already */
	else if (rc == -1)
		rc = errno;
	close(fd);
	if (rc != 0) {
		log_warn("%s: %s /: %s", __func__, op, strerror(rc));
		envd_plain_fail(hr, 500, "%s /: %s", op, strerror(rc));
		return;
	}
	log_info("%s: %s / done", __func__, op);
	freeze_204(hr);
}

/* Append the figures to a /metrics answer. */
void
freeze_metrics(struct proto_buf *b)
{
	if (freeze_base == NULL)
		return;
	proto_buf_printf(b, "# TYPE agentd_envd_frozen gauge\n"
	    "agentd_envd_frozen %d\n"
	    "# TYPE agentd_envd_freeze_cgroups_max gauge\n"
	    "agentd_envd_freeze_cgroups_max %" PRIu64 "\n"
	    "# TYPE agentd_envd_freezes_total counter\n"
	    "agentd_envd_freezes_total %" PRIu64 "\n"
	    "# TYPE agentd_envd_thaws_total counter\n"
	    "agentd_envd_thaws_total %" PRIu64 "\n"
	    "# TYPE agentd_envd_freeze_truncated_total counter\n"
	    "agentd_envd_freeze_truncated_total %" PRIu64 "\n"
	    "# TYPE agentd_envd_freeze_busy_total counter\n"
	    "agentd_envd_freeze_busy_total %" PRIu64 "\n", freeze_active,
	    freeze_walk_max, freeze_n, freeze_thaws, freeze_cut, freeze_nbusy);
}

/* Drop a waiting freeze (its connection goes with evhttp) and the record. */
void
freeze_free(void)
{
	if (freeze_waiting != NULL)
		freeze_end(freeze_waiting, 0);
	freeze_list_clear(&freeze_guest);
}
