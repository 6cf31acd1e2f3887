/*
 * compose.c -- envd's POST /files/compose (see compose.h).
 */
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/http.h>

#include <jansson.h>

#include "compose.h"
#include "config.h"
#include "connect.h"
#include "envstate.h"
#include "fileio.h"
#include "files.h"
#include "fs.h"
#include "fsentry.h"
#include "http.h"
#include "proto.h"
#include "pty.h"
#include "util.h"

#define COMPOSE_STEP	(1 << 30)	/* bytes one copy_file_range moves */
#define COMPOSE_BUF	(64 << 10)	/* bytes read at once without it */

/* A compose on its worker. */
struct compose {
	char		**src;		/* resolved, n of them */
	size_t		  n;
	char		 *dest;		/* resolved */
	struct fs_who	  who;
	/* The worker's. */
	uid_t		  trust;	/* whose symlinks are followed */
	int		  as_user;	/* the worker acts as the user */
	char		 *buf;		/* COMPOSE_BUF, where the kernel cannot */
};

static const struct config	*compose_cfg;	/* --envd-compose-sources */
static uint64_t			 compose_refused_sources;
static uint64_t			 compose_refused_room;

static void	compose_route(struct http_req *, const struct pty_user *, int);
static int	compose_parse(struct http_req *, const struct pty_user *,
		    struct compose *);
static void	compose_free(struct compose *);
static int	compose_work(void *, uid_t, struct proto_err *);
static int	compose_open(struct compose *, size_t, struct stat *,
		    struct proto_err *);
static int	compose_copy(struct compose *, int, int, size_t,
		    struct proto_err *);
static void	compose_done(struct evhttp_request *, void *, int,
		    const struct proto_err *);

static const struct envd_route compose_routes[] = {
	{ "/files/compose", EVHTTP_REQ_POST, 0, compose_route },
};

/* Register the route. */
void
compose_register(const struct config *cfg)
{
	compose_cfg = cfg;
	envd_route_register(compose_routes, nitems(compose_routes));
}

/* The limit and the calls it refused, for /metrics. */
void
compose_metrics(struct proto_buf *b)
{
	if (compose_cfg == NULL)
		return;
	proto_buf_printf(b, "# TYPE agentd_envd_compose_sources_max gauge\n"
	    "agentd_envd_compose_sources_max %" PRIu64 "\n"
	    "# TYPE agentd_envd_compose_refused_total counter\n"
	    "agentd_envd_compose_refused_total{reason=\"sources\"} %" PRIu64
	    "\nagentd_envd_compose_refused_total{reason=\"room\"} %" PRIu64
	    "\n", compose_cfg->envd_compose_sources, compose_refused_sources,
	    compose_refused_room);
}

/* POST /files/compose: check the request, then run it on a worker. */
static void
compose_route(struct http_req *hr, const struct pty_user *user,
    int authorized)
{
	struct compose		*c;

	c = xcalloc(1, sizeof *c);
	if (compose_parse(hr, user, c) != 0 || fs_plain_call(hr,
	    c->who.confine ? c->who.spec : NULL, compose_work, compose_done,
	    c) != 0)
		compose_free(c);
}

/*
 * Read the body as envd does (ComposeRequest), resolve its paths for the
 * user (username, or the call's); 0, or -1 after answering.
 */
static int
compose_parse(struct http_req *hr, const struct pty_user *user,
    struct compose *c)
{
	json_error_t	 jerr;
	json_t		*o, *srcs, *dest, *name, *v;
	struct pty_user	 named;
	const char	*s;
	char		 cause[PTY_CAUSE_MAX];
	size_t		 i;
	int		 rc = -1;

	o = json_loadb(hr->body != NULL ? hr->body : "", hr->body_len,
	    JSON_DISABLE_EOF_CHECK, &jerr);
	if (o == NULL || !json_is_object(o)) {
		envd_plain_fail(hr, 400, "invalid request body: %s", o == NULL ?
		    jerr.text : "not a JSON object");
		goto out;
	}
	srcs = json_object_get(o, "source_paths");
	dest = json_object_get(o, "destination");
	name = json_object_get(o, "username");
	if ((srcs != NULL && !json_is_array(srcs) && !json_is_null(srcs)) ||
	    (dest != NULL && !json_is_string(dest) && !json_is_null(dest)) ||
	    (name != NULL && !json_is_string(name) && !json_is_null(name))) {
		envd_plain_fail(hr, 400, "invalid request body: source_paths "
		    "must be an array of strings, destination and username "
		    "strings");
		goto out;
	}
	json_array_foreach(srcs, i, v) {
		if (!json_is_string(v)) {
			envd_plain_fail(hr, 400, "invalid request body: "
			    "source_paths[%zu] is not a string", i);
			goto out;
		}
	}
	if (json_array_size(srcs) == 0) {
		envd_plain_fail(hr, 400, "source_paths must not be empty");
		goto out;
	}
	if (json_array_size(srcs) > compose_cfg->envd_compose_sources) {
		compose_refused_sources++;
		envd_plain_fail(hr, 400, "source_paths has %zu entries, over "
		    "%" PRIu64 " (--envd-compose-sources)",
		    json_array_size(srcs), compose_cfg->envd_compose_sources);
		goto out;
	}
	if (json_string_length(dest) == 0) {
		envd_plain_fail(hr, 400, "destination is required");
		goto out;
	}
	if (json_string_length(name) > 0) {
		s = json_string_value(name);
		if (pty_user_lookup(s, &named, cause, sizeof cause) != 0) {
			envd_plain_fail(hr, 401, "error looking up user "
			    "'%.64s': %s", s, cause);
			goto out;
		}
		user = &named;
	}
	if (user == NULL) {
		envd_plain_fail(hr, 401, "no such user");
		goto out;
	}
	(void)fs_who(user, &c->who);
	if ((c->dest = fsentry_resolve(json_string_value(dest), user->home,
	    envstate_workdir(), cause, sizeof cause)) == NULL) {
		envd_plain_fail(hr, 400, "error resolving destination path: %s",
		    cause);
		goto out;
	}
	c->src = xcalloc(json_array_size(srcs), sizeof *c->src);
	json_array_foreach(srcs, i, v) {
		s = json_string_value(v);
		if ((c->src[i] = fsentry_resolve(s, user->home,
		    envstate_workdir(), cause, sizeof cause)) == NULL) {
			envd_plain_fail(hr, 400, "error resolving source path "
			    "\"%.200s\": %s", s, cause);
			goto out;
		}
		c->n++;
		if (strcmp(c->src[i], c->dest) == 0) {
			envd_plain_fail(hr, 400, "source path \"%.200s\" cannot "
			    "be the same as destination", s);
			goto out;
		}
	}
	rc = 0;
out:
	if (o != NULL)
		json_decref(o);
	return (rc);
}

/* Free a compose. */
static void
compose_free(struct compose *c)
{
	size_t	i;

	for (i = 0; i < c->n; i++)
		free(c->src[i]);
	free(c->src);
	free(c->dest);
	free(c->buf);
	free(c);
}

/*
 * On a worker: open source i, a regular file the call may read (as GET
 * /files checks it); the fd, or -1 with err.
 */
static int
compose_open(struct compose *c, size_t i, struct stat *st,
    struct proto_err *err)
{
	const char	*path = c->src[i];
	int		 fd;

	fd = fileio_open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK, c->trust, err);
	if (fd == -1) {
		if (err->status == 404)
			proto_fail(err, 404, "not_found", "source file not "
			    "found: %.200s", path);
		return (-1);
	}
	if (fstat(fd, st) == -1) {
		fileio_fail(err, errno, "stat", path);
		goto fail;
	}
	if (!S_ISREG(st->st_mode)) {
		proto_fail(err, 400, "invalid_request", "source path is not a "
		    "regular file: %.200s", path);
		goto fail;
	}
	/* The kernel lets any thread of ours read our own /proc entries. */
	if (c->as_user && fileio_own_proc(fd)) {
		fileio_fail(err, EACCES, "open", path);
		goto fail;
	}
	if (fileio_links_ok(st, c->who.uid, path, err) != 0 ||
	    fileio_link_folder_ok(fd, st, c->trust, path, err) != 0)
		goto fail;
	return (fd);
fail:
	close(fd);
	return (-1);
}

/*
 * On a worker: append all of in to out, in the kernel where the file
 * systems allow, else through c->buf.  0, or -1 with err.
 */
static int
compose_copy(struct compose *c, int in, int out, size_t i,
    struct proto_err *err)
{
	ssize_t	n, w, off;

	for (;;) {
		if (c->buf == NULL) {
			n = copy_file_range(in, NULL, out, NULL, COMPOSE_STEP, 0);
			if (n == -1 && (errno == EXDEV || errno == EINVAL ||
			    errno == ENOSYS || errno == EOPNOTSUPP ||
			    errno == EBADF)) {
				c->buf = xmalloc(COMPOSE_BUF);
				continue;
			}
		} else if ((n = read(in, c->buf, COMPOSE_BUF)) > 0) {
			for (off = 0; off < n; off += w) {
				w = write(out, c->buf + off, (size_t)(n - off));
				if (w == -1 && errno == EINTR)
					w = 0;
				else if (w == -1)
					return (fileio_fail(err, errno,
					    "write", c->dest));
			}
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return (fileio_fail(err, errno, "compose", c->src[i]));
		if (n == 0)
			return (0);
	}
}

/*
 * On a worker: check every source, make the destination's folders, copy
 * the sources into a temporary file there, rename it over the destination,
 * remove the sources.
 */
static int
compose_work(void *arg, uid_t owner, struct proto_err *err)
{
	struct compose		*c = arg;
	struct fileio_tmp	 t;
	struct statvfs		 sv;
	struct stat		 st, dst;
	struct proto_err	 e;
	uint64_t		 total = 0;
	char			*base;
	size_t			 i;
	int			 fd, give = 0, r;

	c->trust = owner;
	c->as_user = c->who.confine;
	/* envd's mode: as root unless the user's own symlink is on the way. */
	if (!c->who.confine) {
		give = 1;
		for (i = 0; i <= c->n && give; i++) {
			if (files_act(c->who.uid, i < c->n ? c->src[i] :
			    c->dest, NULL, &c->trust, &give, err) != 0)
				return (-1);
		}
		c->as_user = !give;
	}
	/* The destination's file now, if any: no source may be it. */
	memset(&dst, 0, sizeof dst);
	if ((fd = fileio_parent(c->dest, 0, c->trust, &base, &e)) != -1) {
		if (fstatat(fd, base, &dst, AT_SYMLINK_NOFOLLOW) == -1 ||
		    !S_ISREG(dst.st_mode))
			dst.st_ino = 0;
		close(fd);
		free(base);
	}
	for (i = 0; i < c->n; i++) {
		if ((fd = compose_open(c, i, &st, err)) == -1)
			return (-1);
		close(fd);
		/* Else its removal at the end would take the destination. */
		if (dst.st_ino != 0 && st.st_ino == dst.st_ino &&
		    st.st_dev == dst.st_dev)
			return (proto_fail(err, 400, "invalid_request", "source "
			    "path \"%.200s\" is the destination's file",
			    c->src[i]));
		if ((uint64_t)st.st_size > UINT64_MAX - total)
			return (proto_fail(err, 507, "insufficient_storage",
			    "not enough disk space available"));
		total += (uint64_t)st.st_size;
	}
	/* envd's EnsureDirs: the missing folders are the user's. */
	fd = give ? fileio_parent_own(c->dest, c->trust, c->who.uid,
	    c->who.gid, &base, err) : fileio_parent(c->dest, 1, c->trust,
	    &base, err);
	if (fd == -1)
		return (-1);
	close(fd);
	free(base);
	if (fileio_tmp_open(c->dest, 0, c->trust, &t, err) != 0)
		return (-1);
	/* Blocks needed, rounded up (bavail * frsize could wrap). */
	if (fstatvfs(t.fd, &sv) == 0 && sv.f_frsize > 0 &&
	    (uint64_t)sv.f_bavail < total / sv.f_frsize +
	    (total % sv.f_frsize != 0)) {
		proto_fail(err, 507, "insufficient_storage", "not enough disk "
		    "space available");
		goto fail;
	}
	if (give && fchown(t.fd, c->who.uid, c->who.gid) == -1) {
		fileio_fail(err, errno, "give", c->dest);
		goto fail;
	}
	for (i = 0; i < c->n; i++) {
		if ((fd = compose_open(c, i, &st, err)) == -1)
			goto fail;
		r = compose_copy(c, fd, t.fd, i, err);
		close(fd);
		if (r != 0)
			goto fail;
	}
	if (fileio_tmp_commit(&t, FILEIO_MODE_DEFAULT, err) != 0)
		goto nospace;
	for (i = 0; i < c->n; i++) {
		if ((fd = fileio_parent(c->src[i], 0, c->trust, &base,
		    err)) == -1)
			continue;
		(void)unlinkat(fd, base, 0);
		close(fd);
		free(base);
	}
	return (0);
fail:
	fileio_tmp_abort(&t);
nospace:
	if (err->status == 507)
		proto_fail(err, 507, "insufficient_storage", "not enough disk "
		    "space available");
	return (-1);
}

/* On the loop: answer envd's EntryInfo of the destination. */
static void
compose_done(struct evhttp_request *req, void *arg, int rc,
    const struct proto_err *err)
{
	struct compose		*c = arg;
	const char		*slash = strrchr(c->dest, '/');
	json_t			*o = NULL;

	if (rc != 0 && err->status == 507)
		compose_refused_room++;
	if (req != NULL && rc == 0) {
		o = json_object();
		json_object_set_new(o, "name", fsentry_string(slash != NULL &&
		    slash[1] != '\0' ? slash + 1 : c->dest));
		json_object_set_new(o, "path", fsentry_string(c->dest));
		json_object_set_new(o, "type", json_string("file"));
	}
	fs_plain_done(req, rc, err, o);
	json_decref(o);
	compose_free(c);
}
