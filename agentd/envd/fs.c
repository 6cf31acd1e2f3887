/*
 * fs.c -- envd's filesystem.Filesystem (see fs.h).
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>

#include <jansson.h>

#include "config.h"
#include "connect.h"
#include "envstate.h"
#include "fileio.h"
#include "files.h"
#include "fs.h"
#include "fsentry.h"
#include "http.h"
#include "log.h"
#include "proto.h"
#include "pty.h"
#include "util.h"
#include "watch.h"

/* What a job does. */
enum fs_op {
	FS_STAT,
	FS_MKDIR,
	FS_MOVE,
	FS_LIST,
	FS_REMOVE,
	FS_WATCH,	/* WatchDir and CreateWatcher: open the watch */
};

/* A call on its way through a files worker. */
/* A ListDir's walk: its entries so far and their rendered size. */
struct fs_walk {
	json_t			*out;
	uint32_t		 depth;
	size_t			 bytes;
};

struct fs_job {
	enum fs_op		 op;
	struct envd_call	*call;
	int			 stream;	/* WatchDir (else CreateWatcher) */
	char			*path;		/* resolved */
	char			*dest;		/* Move's, resolved */
	uint32_t		 depth;
	int			 recursive;
	int			 include_entry;
	int			 allow_net;
	size_t			 max_dirs;	/* --envd-watch-dirs */
	struct fs_who		 who;
	int			 counted;	/* a watch, in fs_nwatchers */
	/* The worker's. */
	int			 give;		/* what is made: the user's */
	int			 as_user;	/* the worker acts as the user */
	json_t			*answer;
	struct watch		*watch;
};

/* A CreateWatcher watcher, or a WatchDir stream's. */
struct fs_watcher {
	TAILQ_ENTRY(fs_watcher)	 entry;
	char			 id[24];	/* "w" and hex */
	struct watch		*watch;
	char			*root;		/* the watched path */
	int			 include_entry;
	json_t			*events;	/* held FilesystemEvents */
	int			 failed;
	int			 counted;	/* in fs_nwatchers */
	int			 ended;		/* the folder went: no watch */
	struct envd_err		 err;
	/* A stream's. */
	struct envd_stream	*st;
	json_t			*queue;		/* WatchDirResponses unsent */
	struct event		*keepalive;
	struct event		*deadline;
	int64_t			 keepalive_ms;
};
TAILQ_HEAD(fs_watchers, fs_watcher);

static struct fs_watchers	 fs_watchers = TAILQ_HEAD_INITIALIZER(fs_watchers);
static size_t			 fs_nwatchers;		/* watchers, streams */
static uint64_t			 fs_watch_refused;	/* over the limit */
static struct event_base	*fs_base;		/* the loop; NULL: freed */
static size_t			 fs_watchers_max;	/* --envd-watchers */
static size_t			 fs_watch_dirs;		/* --envd-watch-dirs */
static size_t			 fs_events_max;		/* --envd-watch-events */
static size_t			 fs_max_message;	/* --envd-max-message */
static int			 fs_confine;	/* --envd-confine-files */

static void	fs_stat(struct envd_call *, json_t *);
static void	fs_mkdir(struct envd_call *, json_t *);
static void	fs_move(struct envd_call *, json_t *);
static void	fs_list(struct envd_call *, json_t *);
static void	fs_remove(struct envd_call *, json_t *);
static void	fs_watch_dir(struct envd_call *, json_t *);
static void	fs_create_watcher(struct envd_call *, json_t *);
static void	fs_get_events(struct envd_call *, json_t *);
static void	fs_remove_watcher(struct envd_call *, json_t *);
static struct fs_job *fs_job_new(struct envd_call *, json_t *, enum fs_op);
static void	fs_job_free(struct fs_job *);
static void	fs_job_start(struct fs_job *);
static int	fs_work(void *, uid_t, struct proto_err *);
static int	fs_own_proc(const char *, uid_t, struct proto_err *);
static void	fs_done(struct evhttp_request *, void *, int,
		    const struct proto_err *);
static int	fs_code(const struct proto_err *);
static char	*fs_trim(const char *);
static int	fs_work_stat(struct fs_job *, uid_t, struct proto_err *);
static int	fs_work_mkdir(struct fs_job *, uid_t, struct proto_err *);
static int	fs_work_move(struct fs_job *, uid_t, struct proto_err *);
static int	fs_work_list(struct fs_job *, uid_t, struct proto_err *);
static int	fs_walk(int, const char *, uint32_t, struct fs_walk *,
		    struct proto_err *);
static int	fs_work_remove(struct fs_job *, uid_t, struct proto_err *);
static int	fs_rmtree(int, const char *, int);
static int	fs_work_watch(struct fs_job *, uid_t, struct proto_err *);
static int	fs_watch_count(struct fs_job *);
static void	fs_watcher_free(struct fs_watcher *);
static struct fs_watcher *fs_watcher_find(json_t *, struct envd_call *);
static void	fs_event(void *, const char *, enum watch_type,
		    const struct watch_entry *, const char *);
static void	fs_stream_pull(struct envd_stream *, void *);
static void	fs_stream_gone(void *);
static void	fs_stream_keepalive(evutil_socket_t, short, void *);
static void	fs_stream_deadline(evutil_socket_t, short, void *);
static void	fs_stream_start(struct fs_watcher *, struct envd_call *);

static const struct envd_method fs_methods[] = {
	{ "filesystem.Filesystem/Stat", ENVD_UNARY, fs_stat },
	{ "filesystem.Filesystem/MakeDir", ENVD_UNARY, fs_mkdir },
	{ "filesystem.Filesystem/Move", ENVD_UNARY, fs_move },
	{ "filesystem.Filesystem/ListDir", ENVD_UNARY, fs_list },
	{ "filesystem.Filesystem/Remove", ENVD_UNARY, fs_remove },
	{ "filesystem.Filesystem/WatchDir", ENVD_STREAM, fs_watch_dir },
	{ "filesystem.Filesystem/CreateWatcher", ENVD_UNARY,
	  fs_create_watcher },
	{ "filesystem.Filesystem/GetWatcherEvents", ENVD_UNARY,
	  fs_get_events },
	{ "filesystem.Filesystem/RemoveWatcher", ENVD_UNARY,
	  fs_remove_watcher },
};

/* Register the methods. */
void
fs_register(struct event_base *base, const struct config *cfg)
{
	fs_base = base;
	fs_watchers_max = (size_t)cfg->envd_watchers;
	fs_watch_dirs = (size_t)cfg->envd_watch_dirs;
	fs_events_max = (size_t)cfg->envd_watch_events;
	fs_max_message = (size_t)cfg->envd_max_message;
	fs_confine = cfg->envd_confine_files;
	envd_register(fs_methods, nitems(fs_methods));
}

/* Who a call acts for, and the user its worker acts as. */
const char *
fs_who(const struct pty_user *u, struct fs_who *w)
{
	w->uid = u->uid;
	w->gid = u->gid;
	w->confine = fs_confine;
	snprintf(w->spec, sizeof w->spec, "%lu", (unsigned long)u->uid);
	return (w->confine ? w->spec : NULL);
}

/*
 * Free the watchers; a stream's is ended first (unavailable), so that
 * closing its connection later finds nothing of it.  A watch opened after
 * this is refused.
 */
void
fs_free(void)
{
	struct fs_watcher	*fw;
	struct envd_err		 err;

	while ((fw = TAILQ_FIRST(&fs_watchers)) != NULL) {
		if (fw->st != NULL) {
			envd_fail(&err, ENVD_UNAVAILABLE, "agentd is shutting "
			    "down");
			envd_stream_end(fw->st, &err);
			fw->st = NULL;
		}
		fs_watcher_free(fw);
	}
	fs_base = NULL;
}

/* Append the watches' figures to a /metrics answer. */
void
fs_metrics(struct proto_buf *b)
{
	size_t	dirs, bytes;

	if (fs_base == NULL)
		return;
	dirs = watch_dirs_total(&bytes);
	proto_buf_printf(b, "# TYPE agentd_envd_watches gauge\n"
	    "agentd_envd_watches %zu\n"
	    "# TYPE agentd_envd_watches_max gauge\n"
	    "agentd_envd_watches_max %zu\n"
	    "# TYPE agentd_envd_watches_refused_total counter\n"
	    "agentd_envd_watches_refused_total %" PRIu64 "\n"
	    "# TYPE agentd_envd_watch_dirs gauge\n"
	    "agentd_envd_watch_dirs %zu\n"
	    "# TYPE agentd_envd_watch_bytes gauge\n"
	    "agentd_envd_watch_bytes %zu\n", fs_nwatchers, fs_watchers_max,
	    fs_watch_refused, dirs, bytes);
}

/* A Connect code for an agentd error. */
static int
fs_code(const struct proto_err *err)
{
	static const struct {
		const char	*name;
		int		 code;
	} names[] = {
		{ "invalid_argument", ENVD_INVALID_ARGUMENT },
		{ "not_found", ENVD_NOT_FOUND },
		{ "already_exists", ENVD_ALREADY_EXISTS },
		{ "permission_denied", ENVD_PERMISSION_DENIED },
		{ "resource_exhausted", ENVD_RESOURCE_EXHAUSTED },
		{ "failed_precondition", ENVD_FAILED_PRECONDITION },
		{ "unauthenticated", ENVD_UNAUTHENTICATED },
	};
	size_t	i;

	for (i = 0; err->code != NULL && i < nitems(names); i++) {
		if (strcmp(err->code, names[i].name) == 0)
			return (names[i].code);
	}
	switch (err->status) {
	case 400:
	case 409:
		return (ENVD_INVALID_ARGUMENT);
	case 401:
		return (ENVD_UNAUTHENTICATED);
	case 403:
		return (ENVD_PERMISSION_DENIED);
	case 404:
		return (ENVD_NOT_FOUND);
	case 429:
	case 507:
		return (ENVD_RESOURCE_EXHAUSTED);
	case 499:
		return (ENVD_CANCELED);
	case 503:
		return (ENVD_UNAVAILABLE);
	}
	return (ENVD_INTERNAL);
}

/* A copy of path without trailing slashes ("/" stays). */
static char *
fs_trim(const char *path)
{
	char	*p = xstrdup(path);
	size_t	 len = strlen(p);

	while (len > 1 && p[len - 1] == '/')
		p[--len] = '\0';
	return (p);
}

/*
 * Read a request's path field (name) and resolve it as envd does into
 * *out; 0, or -1 after answering the call.
 */
static int
fs_path(struct envd_call *call, json_t *msg, const char *name, char **out)
{
	const struct pty_user	*u = envd_call_user(call);
	struct envd_err		 err;
	const char		*in = "";
	char			 cause[256], *p;

	if (envd_json_string(msg, name, &in, &err) == -1) {
		envd_reply_error(call, &err);
		return (-1);
	}
	if ((p = fsentry_resolve(in, u->home, envstate_workdir(), cause,
	    sizeof cause)) == NULL) {
		envd_reply_fail(call, ENVD_INVALID_ARGUMENT, "%s", cause);
		return (-1);
	}
	*out = fs_trim(p);
	free(p);
	return (0);
}

/* A job for a call, its path read; NULL after answering the call. */
static struct fs_job *
fs_job_new(struct envd_call *call, json_t *msg, enum fs_op op)
{
	struct fs_job	*j;

	j = xcalloc(1, sizeof *j);
	j->op = op;
	j->max_dirs = fs_watch_dirs;
	j->call = call;
	(void)fs_who(envd_call_user(call), &j->who);
	if (fs_path(call, msg, op == FS_MOVE ? "source" : "path",
	    &j->path) != 0 || (op == FS_MOVE && fs_path(call, msg,
	    "destination", &j->dest) != 0)) {
		fs_job_free(j);
		return (NULL);
	}
	return (j);
}

/* Free a job. */
static void
fs_job_free(struct fs_job *j)
{
	free(j->path);
	free(j->dest);
	if (j->counted)
		fs_nwatchers--;
	if (j->answer != NULL)
		json_decref(j->answer);
	watch_free(j->watch);
	free(j);
}

/* Hand a job to a files worker, or answer why not. */
static void
fs_job_start(struct fs_job *j)
{
	struct proto_err	 err;

	if (files_call(envd_call_req(j->call)->req, j->who.confine ?
	    j->who.spec : NULL, fs_work, fs_done, j, &err) != 0) {
		envd_reply_fail(j->call, fs_code(&err), "%s", err.message);
		fs_job_free(j);
	}
}

/* Stat {path} */
static void
fs_stat(struct envd_call *call, json_t *msg)
{
	struct fs_job	*j;

	if ((j = fs_job_new(call, msg, FS_STAT)) != NULL)
		fs_job_start(j);
}

/* MakeDir {path} */
static void
fs_mkdir(struct envd_call *call, json_t *msg)
{
	struct fs_job	*j;

	if ((j = fs_job_new(call, msg, FS_MKDIR)) != NULL)
		fs_job_start(j);
}

/* Move {source, destination} */
static void
fs_move(struct envd_call *call, json_t *msg)
{
	struct fs_job	*j;

	if ((j = fs_job_new(call, msg, FS_MOVE)) != NULL)
		fs_job_start(j);
}

/* ListDir {path, depth} */
static void
fs_list(struct envd_call *call, json_t *msg)
{
	struct fs_job	*j;
	struct envd_err	 err;
	uint32_t	 depth = 0;

	if (envd_json_u32(msg, "depth", &depth, &err) == -1) {
		envd_reply_error(call, &err);
		return;
	}
	if ((j = fs_job_new(call, msg, FS_LIST)) == NULL)
		return;
	j->depth = depth == 0 ? 1 : depth;
	if (j->depth > FS_LIST_DEPTH_MAX)
		j->depth = FS_LIST_DEPTH_MAX;
	fs_job_start(j);
}

/* Remove {path} */
static void
fs_remove(struct envd_call *call, json_t *msg)
{
	struct fs_job	*j;

	if ((j = fs_job_new(call, msg, FS_REMOVE)) != NULL)
		fs_job_start(j);
}

/* The flags of WatchDir and CreateWatcher; 0, or -1 after answering. */
static int
fs_watch_flags(struct fs_job *j, json_t *msg)
{
	struct envd_err	err;

	if (envd_json_bool(msg, "recursive", &j->recursive, &err) == -1 ||
	    envd_json_bool(msg, "includeEntry", &j->include_entry,
	    &err) == -1 ||
	    envd_json_bool(msg, "allowNetworkMounts", &j->allow_net,
	    &err) == -1) {
		envd_reply_error(j->call, &err);
		fs_job_free(j);
		return (-1);
	}
	return (0);
}

/* WatchDir {path, recursive, includeEntry, allowNetworkMounts}: a stream. */
static void
fs_watch_dir(struct envd_call *call, json_t *msg)
{
	struct fs_job	*j;

	if ((j = fs_job_new(call, msg, FS_WATCH)) == NULL)
		return;
	j->stream = 1;
	if (fs_watch_flags(j, msg) == 0 && fs_watch_count(j) == 0)
		fs_job_start(j);
}

/*
 * Count a watch against --envd-watchers from its call on (a watch being
 * opened counts: concurrent calls cannot overshoot).  0, or -1 after
 * answering.
 */
static int
fs_watch_count(struct fs_job *j)
{
	if (fs_nwatchers >= fs_watchers_max) {
		fs_watch_refused++;
		envd_reply_fail(j->call, ENVD_RESOURCE_EXHAUSTED, "%zu watches "
		    "exist (--envd-watchers: CreateWatcher watchers and "
		    "WatchDir streams); remove one first", fs_watchers_max);
		fs_job_free(j);
		return (-1);
	}
	fs_nwatchers++;
	j->counted = 1;
	return (0);
}

/* CreateWatcher: the same, its events kept for GetWatcherEvents. */
static void
fs_create_watcher(struct envd_call *call, json_t *msg)
{
	struct fs_job	*j;

	if ((j = fs_job_new(call, msg, FS_WATCH)) == NULL)
		return;
	if (fs_watch_flags(j, msg) == 0 && fs_watch_count(j) == 0)
		fs_job_start(j);
}

/* The watcher a request's watcherId names; NULL after answering. */
static struct fs_watcher *
fs_watcher_find(json_t *msg, struct envd_call *call)
{
	struct fs_watcher	*fw;
	struct envd_err		 err;
	const char		*id = "";

	if (envd_json_string(msg, "watcherId", &id, &err) == -1) {
		envd_reply_error(call, &err);
		return (NULL);
	}
	TAILQ_FOREACH(fw, &fs_watchers, entry) {
		if (fw->st == NULL && strcmp(fw->id, id) == 0)
			return (fw);
	}
	envd_reply_fail(call, ENVD_NOT_FOUND, "watcher with id %.64s not "
	    "found", id);
	return (NULL);
}

/* GetWatcherEvents {watcherId}: the events since the last call. */
static void
fs_get_events(struct envd_call *call, json_t *msg)
{
	struct fs_watcher	*fw;
	json_t			*o;

	if ((fw = fs_watcher_find(msg, call)) == NULL)
		return;
	if (fw->failed) {
		envd_reply_error(call, &fw->err);
		return;
	}
	o = json_object();
	if (json_array_size(fw->events) > 0)
		envd_json_set_new(o, "events", fw->events);
	else
		json_decref(fw->events);
	fw->events = json_array();
	envd_reply(call, o);
}

/* RemoveWatcher {watcherId} */
static void
fs_remove_watcher(struct envd_call *call, json_t *msg)
{
	struct fs_watcher	*fw;

	if ((fw = fs_watcher_find(msg, call)) == NULL)
		return;
	fs_watcher_free(fw);
	envd_reply(call, json_object());
}

/*
 * On a worker acting as the user: agentd's own /proc (the path, or its
 * folder) is refused as the files GET refuses it, since the kernel lets
 * our threads read it whatever their credentials.  0, or -1 with err.
 */
static int
fs_own_proc(const char *path, uid_t owner, struct proto_err *err)
{
	char	*base = NULL;
	int	 fd, own = 0;

	if ((fd = fileio_open(path, O_PATH, owner, err)) != -1) {
		own = fileio_own_proc(fd);
		close(fd);
	}
	if (!own && (fd = fileio_parent(path, 0, owner, &base, err)) != -1) {
		own = fileio_own_proc(fd);
		close(fd);
	}
	free(base);
	return (own ? fileio_fail(err, EACCES, "open", path) : 0);
}

/* On a worker: do the job as the call's user, or as envd's (root). */
static int
fs_work(void *arg, uid_t owner, struct proto_err *err)
{
	struct fs_job	*j = arg;

	if (j->who.confine)
		j->as_user = 1;
	else if (files_act(j->who.uid, j->path, j->dest, &owner, &j->give,
	    err) != 0)
		return (-1);
	else
		j->as_user = !j->give;
	if (j->as_user && (fs_own_proc(j->path, owner, err) != 0 ||
	    (j->dest != NULL && fs_own_proc(j->dest, owner, err) != 0)))
		return (-1);
	switch (j->op) {
	case FS_STAT:
		return (fs_work_stat(j, owner, err));
	case FS_MKDIR:
		return (fs_work_mkdir(j, owner, err));
	case FS_MOVE:
		return (fs_work_move(j, owner, err));
	case FS_LIST:
		return (fs_work_list(j, owner, err));
	case FS_REMOVE:
		return (fs_work_remove(j, owner, err));
	case FS_WATCH:
		return (fs_work_watch(j, owner, err));
	}
	return (proto_fail(err, 500, "internal", "no such operation"));
}

/* On a worker: the EntryInfo of path, its folder dfd and name base. */
static json_t *
fs_entry(int dfd, const char *base, const char *path, struct proto_err *err)
{
	struct stat	 st;
	const char	*name = *base != '\0' ? base : "/";

	if ((*base != '\0' ? fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) :
	    fstat(dfd, &st)) == -1) {
		fileio_fail(err, errno, "stat", path);
		return (NULL);
	}
	return (fsentry_from_stat_at(dfd, base, &st, name, path));
}

/* Stat: lstat of the path (symlinks on the way as /v1/files takes them). */
static int
fs_work_stat(struct fs_job *j, uid_t owner, struct proto_err *err)
{
	char	*base = NULL;
	int	 dfd, rc = -1;

	if ((dfd = fileio_parent(j->path, 0, owner, &base, err)) == -1)
		return (-1);
	if ((j->answer = fs_entry(dfd, base, j->path, err)) != NULL) {
		j->answer = json_pack("{s:o}", "entry", j->answer);
		rc = 0;
	}
	close(dfd);
	free(base);
	return (rc);
}

/* MakeDir: the folders on the way, then the folder (already_exists). */
static int
fs_work_mkdir(struct fs_job *j, uid_t owner, struct proto_err *err)
{
	struct stat	 st;
	char		*base = NULL;
	int		 dfd, rc = -1;

	if ((dfd = j->give ? fileio_parent_own(j->path, owner, j->who.uid,
	    j->who.gid, &base, err) : fileio_parent(j->path, 1, owner, &base,
	    err)) == -1)
		return (-1);
	if (*base == '\0' || fstatat(dfd, base, &st, 0) == 0) {
		if (*base == '\0' || S_ISDIR(st.st_mode))
			proto_fail(err, 409, "already_exists", "directory "
			    "already exists: %.200s", j->path);
		else
			proto_fail(err, 400, "invalid_argument", "path "
			    "already exists but it is not a directory: %.200s",
			    j->path);
		goto out;
	}
	if (mkdirat(dfd, base, FILEIO_DIR_MODE) == -1) {
		if (errno == EEXIST)
			proto_fail(err, 409, "already_exists", "directory "
			    "already exists: %.200s", j->path);
		else
			fileio_fail(err, errno, "mkdir", j->path);
		goto out;
	}
	if (j->give && fchownat(dfd, base, j->who.uid, j->who.gid,
	    AT_SYMLINK_NOFOLLOW) == -1) {
		fileio_fail(err, errno, "chown", j->path);
		goto out;
	}
	if ((j->answer = fs_entry(dfd, base, j->path, err)) != NULL) {
		j->answer = json_pack("{s:o}", "entry", j->answer);
		rc = 0;
	}
out:
	close(dfd);
	free(base);
	return (rc);
}

/* Move: rename(2), the destination's folders made first. */
static int
fs_work_move(struct fs_job *j, uid_t owner, struct proto_err *err)
{
	struct stat	 st;
	char		*sbase = NULL, *dbase = NULL;
	int		 sfd, dfd = -1, rc = -1;

	if ((sfd = fileio_parent(j->path, 0, owner, &sbase, err)) == -1)
		return (-1);
	if (*sbase == '\0') {
		proto_fail(err, 400, "invalid_argument", "cannot move /");
		goto out;
	}
	if (fstatat(sfd, sbase, &st, AT_SYMLINK_NOFOLLOW) == -1) {
		fileio_fail(err, errno, "stat", j->path);
		if (err->status == 404)
			snprintf(err->message, sizeof err->message,
			    "source file not found: %.200s", j->path);
		goto out;
	}
	/* A link another user made to a file: as /v1/files refuses it. */
	if (S_ISREG(st.st_mode) && fileio_links_ok(&st, j->who.uid, j->path,
	    err) != 0)
		goto out;
	if ((dfd = j->give ? fileio_parent_own(j->dest, owner, j->who.uid,
	    j->who.gid, &dbase, err) : fileio_parent(j->dest, 1, owner, &dbase,
	    err)) == -1)
		goto out;
	if (*dbase == '\0') {
		proto_fail(err, 400, "invalid_argument", "cannot move onto /");
		goto out;
	}
	if (fstatat(dfd, dbase, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && fileio_links_ok(&st, j->who.uid, j->dest,
	    err) != 0)
		goto out;
	if (renameat(sfd, sbase, dfd, dbase) == -1) {
		fileio_fail(err, errno, "rename", j->path);
		goto out;
	}
	if ((j->answer = fs_entry(dfd, dbase, j->dest, err)) != NULL) {
		j->answer = json_pack("{s:o}", "entry", j->answer);
		rc = 0;
	}
out:
	if (dfd != -1)
		close(dfd);
	close(sfd);
	free(sbase);
	free(dbase);
	return (rc);
}

/* Order names as Go's filepath.WalkDir does (bytewise). */
static int
fs_namecmp(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

/*
 * Append the entries of the folder fd (taken and closed) to wk->out, named
 * prefix/name, and those of its folders down to wk->depth: in WalkDir's
 * order (each folder's entries sorted, a folder before what is in it).
 * Symlinks are never followed; a folder that cannot be read is listed, not
 * entered.  More than --envd-max-message rendered is resource_exhausted.
 */
static int
fs_walk(int fd, const char *prefix, uint32_t level, struct fs_walk *wk,
    struct proto_err *err)
{
	json_t		 *entry;
	struct dirent	 *de;
	struct stat	  st;
	DIR		 *dir;
	char		**names = NULL, *path;
	size_t		  n = 0, cap = 0, i;
	int		  sub, rc = 0;

	if ((dir = fdopendir(fd)) == NULL) {
		close(fd);
		return (0);
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap == 0 ? 64 : cap * 2;
			names = xrealloc(names, cap * sizeof *names);
		}
		names[n++] = xstrdup(de->d_name);
	}
	if (n > 0)		/* qsort(NULL, 0) is undefined */
		qsort(names, n, sizeof *names, fs_namecmp);
	for (i = 0; i < n && rc == 0; i++) {
		if (fstatat(dirfd(dir), names[i], &st,
		    AT_SYMLINK_NOFOLLOW) == -1)
			continue;	/* gone meanwhile */
		if (json_array_size(wk->out) >= FS_LIST_MAX) {
			rc = proto_fail(err, 429, "resource_exhausted",
			    "the folder has more than %d entries to list",
			    FS_LIST_MAX);
			break;
		}
		xasprintf(&path, "%s%s%s", prefix, strcmp(prefix, "/") == 0 ?
		    "" : "/", names[i]);
		entry = fsentry_from_stat_at(dirfd(dir), names[i], &st,
		    names[i], path);
		/* The answer as it will be rendered: the entry and a comma. */
		if (entry != NULL)
			wk->bytes += json_dumpb(entry, NULL, 0,
			    JSON_COMPACT) + 1;
		json_array_append_new(wk->out, entry);
		if (wk->bytes > fs_max_message) {
			free(path);
			rc = proto_fail(err, 429, "resource_exhausted", "the "
			    "listing is larger than configured max %zu bytes "
			    "(--envd-max-message)", fs_max_message);
			break;
		}
		if (S_ISDIR(st.st_mode) && level < wk->depth &&
		    (sub = openat(dirfd(dir), names[i], O_RDONLY |
		    O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) != -1)
			rc = fs_walk(sub, path, level + 1, wk, err);
		free(path);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(dir);
	return (rc);
}

/* ListDir: the folder's entries down to depth. */
static int
fs_work_list(struct fs_job *j, uid_t owner, struct proto_err *err)
{
	struct stat	 st;
	struct fs_walk	 wk;
	int		 fd, dfd;

	if ((fd = fileio_open(j->path, O_PATH, owner, err)) == -1)
		return (-1);
	if (fstat(fd, &st) == -1) {
		close(fd);
		return (fileio_fail(err, errno, "stat", j->path));
	}
	if (!S_ISDIR(st.st_mode)) {
		close(fd);
		return (proto_fail(err, 400, "invalid_argument", "path is not "
		    "a directory: %.200s", j->path));
	}
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(fd);
	if (dfd == -1)
		return (fileio_fail(err, errno, "open", j->path));
	wk.out = json_array();
	wk.depth = j->depth;
	wk.bytes = 0;
	if (fs_walk(dfd, j->path, 1, &wk, err) != 0) {
		json_decref(wk.out);
		return (-1);
	}
	j->answer = json_object();
	if (json_array_size(wk.out) > 0)
		json_object_set_new(j->answer, "entries", wk.out);
	else
		json_decref(wk.out);
	return (0);
}

/*
 * Remove name in fd and what is under it (a symlink is removed, never
 * followed).  0 or -1 with errno.
 */
static int
fs_rmtree(int fd, const char *name, int level)
{
	struct dirent	*de;
	DIR		*dir;
	int		 sub, e = 0;

	if (unlinkat(fd, name, 0) == 0 || errno == ENOENT)
		return (0);
	if (errno != EISDIR && errno != EPERM)
		return (-1);
	if (level >= FS_REMOVE_DEPTH_MAX) {
		errno = ELOOP;
		return (-1);
	}
	sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub == -1)
		return (-1);
	if ((dir = fdopendir(sub)) == NULL) {
		close(sub);
		return (-1);
	}
	while ((de = readdir(dir)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fs_rmtree(dirfd(dir), de->d_name, level + 1) == -1 &&
		    e == 0)
			e = errno;
	}
	closedir(dir);
	if (e != 0) {
		errno = e;
		return (-1);
	}
	if (unlinkat(fd, name, AT_REMOVEDIR) == -1 && errno != ENOENT)
		return (-1);
	return (0);
}

/* Remove: the path and all under it; a missing one is no error (envd's). */
static int
fs_work_remove(struct fs_job *j, uid_t owner, struct proto_err *err)
{
	char	*base = NULL;
	int	 dfd, rc = 0;

	if ((dfd = fileio_parent(j->path, 0, owner, &base, err)) == -1)
		return (err->status == 404 ? 0 : -1);
	if (*base == '\0')
		rc = proto_fail(err, 400, "invalid_argument", "cannot remove "
		    "/");
	else if (fs_rmtree(dfd, base, 0) == -1)
		rc = fileio_fail(err, errno, "remove", j->path);
	close(dfd);
	free(base);
	if (rc == 0)
		j->answer = json_object();
	return (rc);
}

/* WatchDir, CreateWatcher: open the folder and watch it. */
static int
fs_work_watch(struct fs_job *j, uid_t owner, struct proto_err *err)
{
	struct statfs	 sfs;
	struct stat	 st;
	int		 fd, dfd;

	if ((fd = fileio_open(j->path, O_PATH, owner, err)) == -1) {
		if (err->status == 404)
			snprintf(err->message, sizeof err->message,
			    "path %.200s not found", j->path);
		return (-1);
	}
	if (fstat(fd, &st) == -1) {
		close(fd);
		return (fileio_fail(err, errno, "stat", j->path));
	}
	if (!S_ISDIR(st.st_mode)) {
		close(fd);
		return (proto_fail(err, 400, "invalid_argument", "path %.200s "
		    "not a directory", j->path));
	}
	if (!j->allow_net && fstatfs(fd, &sfs) == 0) {
		switch ((unsigned long)sfs.f_type) {
		case 0x6969:		/* nfs */
		case 0xFF534D42:	/* cifs */
		case 0x517B:		/* smb */
		case 0xFE534D42:	/* smb2 */
		case 0x65735546:	/* fuse */
			close(fd);
			return (proto_fail(err, 400, "invalid_argument",
			    "cannot watch path on network filesystem: %.200s",
			    j->path));
		}
	}
	/*
	 * Read it as the worker's user: the watch acts as that user for
	 * good, and sees what the user sees.
	 */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(fd);
	if (dfd == -1)
		return (fileio_fail(err, errno, "open", j->path));
	j->watch = watch_open(dfd, (j->recursive ? WATCH_RECURSIVE : 0) |
	    (j->include_entry ? WATCH_ENTRIES : 0), j->max_dirs, err);
	close(dfd);
	return (j->watch == NULL ? -1 : 0);
}

/* On the loop: a job is over; answer its call. */
static void
fs_done(struct evhttp_request *req, void *arg, int rc,
    const struct proto_err *err)
{
	struct fs_job		*j = arg;
	struct fs_watcher	*fw;
	uint8_t			 r[8];
	size_t			 i;

	if (req == NULL) {
		/* The client went away: nobody to answer. */
		envd_call_drop(j->call);
		fs_job_free(j);
		return;
	}
	if (rc != 0) {
		envd_reply_fail(j->call, fs_code(err), "%s", err->message);
		fs_job_free(j);
		return;
	}
	if (j->op != FS_WATCH) {
		envd_reply(j->call, j->answer);
		j->answer = NULL;
		fs_job_free(j);
		return;
	}
	if (fs_base == NULL) {		/* fs_free() ran: agentd stops */
		envd_reply_fail(j->call, ENVD_UNAVAILABLE, "agentd is shutting "
		    "down");
		fs_job_free(j);
		return;
	}
	fw = xcalloc(1, sizeof *fw);
	fw->watch = j->watch;
	j->watch = NULL;
	fw->root = xstrdup(j->path);
	fw->include_entry = j->include_entry;
	fw->events = json_array();
	if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
		memset(r, 0, sizeof r);
	fw->id[0] = 'w';
	for (i = 0; i < sizeof r; i++)
		snprintf(fw->id + 1 + 2 * i, 3, "%02x", r[i]);
	TAILQ_INSERT_TAIL(&fs_watchers, fw, entry);
	fw->counted = 1;		/* the job's count is the watcher's */
	j->counted = 0;
	if (watch_start(fw->watch, fs_base, fs_event, fw) != 0) {
		envd_reply_fail(j->call, ENVD_INTERNAL, "cannot watch: no "
		    "memory for an event");
		fw->st = NULL;
		fs_watcher_free(fw);
	} else if (j->stream)
		fs_stream_start(fw, j->call);
	else
		envd_reply(j->call, json_pack("{s:s}", "watcherId", fw->id));
	fs_job_free(j);
}

/* Stop a watcher and free it. */
static void
fs_watcher_free(struct fs_watcher *fw)
{
	TAILQ_REMOVE(&fs_watchers, fw, entry);
	if (fw->counted)
		fs_nwatchers--;
	watch_free(fw->watch);
	if (fw->keepalive != NULL)
		event_free(fw->keepalive);
	if (fw->deadline != NULL)
		event_free(fw->deadline);
	if (fw->events != NULL)
		json_decref(fw->events);
	if (fw->queue != NULL)
		json_decref(fw->queue);
	free(fw->root);
	free(fw);
}

/*
 * A watch's event (or its end): keep it, or queue it on the stream.  When
 * the watched folder went (no cause), as envd: no error, no more events; a
 * stream stays open (keepalives) until its client or deadline ends it.
 */
static void
fs_event(void *arg, const char *name, enum watch_type type,
    const struct watch_entry *we, const char *cause)
{
	struct fs_watcher	*fw = arg;
	json_t			*ev, *entry;
	char			*path;
	const char		*base;

	if (fw->failed || fw->ended)
		return;		/* the deadline passed: the stream is ending */
	if (name == NULL && cause == NULL) {
		fw->ended = 1;
		watch_free(fw->watch);	/* freed once this returns */
		fw->watch = NULL;
		return;
	}
	if (name == NULL) {
		fw->failed = 1;
		envd_fail(&fw->err, ENVD_INTERNAL, "watcher error: %s", cause);
		goto out;
	}
	ev = json_object();
	envd_json_set_string(ev, "name", name);
	envd_json_set_string(ev, "type", watch_type_name(type));
	/*
	 * Looked up as the watch's user, beneath the watched folder, none
	 * for a symlink (its target is not looked at); best effort, as
	 * envd's: a lookup that failed sends none.  Its metadata only when
	 * that user may read it (here, agentd reads it).
	 */
	if (we != NULL && !S_ISLNK(we->st.st_mode)) {
		if (strcmp(name, ".") == 0)
			path = xstrdup(fw->root);
		else
			xasprintf(&path, "%s/%s", fw->root, name);
		base = strrchr(path, '/') + 1;
		if (*base == '\0')
			base = "/";
		if ((entry = fsentry_from_stat(&we->st, base, path)) != NULL) {
			if (!we->readable)
				json_object_del(entry, "metadata");
			envd_json_set_new(ev, "entry", entry);
		}
		free(path);
	}
	if (fw->queue == NULL) {		/* CreateWatcher's */
		if (json_array_size(fw->events) >= fs_events_max) {
			json_decref(ev);
			fw->failed = 1;
			envd_fail(&fw->err, ENVD_RESOURCE_EXHAUSTED, "more "
			    "than %zu events were not taken "
			    "(--envd-watch-events)", fs_events_max);
			return;
		}
		json_array_append_new(fw->events, ev);
		return;
	}
	if (json_array_size(fw->queue) >= fs_events_max) {
		json_decref(ev);
		fw->failed = 1;
		envd_fail(&fw->err, ENVD_RESOURCE_EXHAUSTED, "more than %zu "
		    "events were not read (--envd-watch-events)",
		    fs_events_max);
		goto out;
	}
	json_array_append_new(fw->queue, json_pack("{s:o}", "filesystem", ev));
	/* An event resets the keepalive (envd's resetKeepalive). */
	if (fw->keepalive != NULL && fw->keepalive_ms > 0) {
		struct timeval	tv;

		event_add(fw->keepalive, timeval_ms(&tv, fw->keepalive_ms));
	}
out:
	if (fw->st != NULL)
		envd_stream_kick(fw->st);
}

/* Open a WatchDir stream: `start` first, then events as they come. */
static void
fs_stream_start(struct fs_watcher *fw, struct envd_call *call)
{
	struct timeval	 tv;
	const char	*h;
	int64_t		 timeout = envd_call_timeout_ms(call);
	long		 secs;

	fw->queue = json_array();
	json_array_append_new(fw->queue, json_pack("{s:{}}", "start"));
	if ((h = envd_call_header(call, "Keepalive-Ping-Interval")) != NULL &&
	    (secs = strtol(h, NULL, 10)) > 0 && secs <= 86400) {
		fw->keepalive_ms = (int64_t)secs * 1000;
		fw->keepalive = event_new(fs_base, -1, EV_PERSIST,
		    fs_stream_keepalive, fw);
		if (fw->keepalive != NULL)
			event_add(fw->keepalive, timeval_ms(&tv,
			    fw->keepalive_ms));
	}
	if (timeout > 0) {
		fw->deadline = event_new(fs_base, -1, 0,
		    fs_stream_deadline, fw);
		if (fw->deadline != NULL)
			event_add(fw->deadline, timeval_ms(&tv, timeout));
	}
	fw->st = envd_stream_open(call, fs_stream_pull, fs_stream_gone, fw);
	envd_stream_kick(fw->st);
}

/* Write what the stream has room for; end it once it failed and drained. */
static void
fs_stream_pull(struct envd_stream *st, void *arg)
{
	struct fs_watcher	*fw = arg;
	json_t			*m;

	while (json_array_size(fw->queue) > 0 && envd_stream_room(st)) {
		m = json_incref(json_array_get(fw->queue, 0));
		json_array_remove(fw->queue, 0);
		if (envd_stream_send(st, m) != 0) {
			/* Ended by the core; gone is not called. */
			fw->st = NULL;
			fs_watcher_free(fw);
			return;
		}
	}
	if (fw->failed && json_array_size(fw->queue) == 0) {
		envd_stream_end(st, &fw->err);
		fw->st = NULL;
		fs_watcher_free(fw);
	}
}

/* The stream's client went away. */
static void
fs_stream_gone(void *arg)
{
	struct fs_watcher	*fw = arg;

	fw->st = NULL;
	fs_watcher_free(fw);
}

/* Time for a keepalive. */
static void
fs_stream_keepalive(evutil_socket_t fd, short events, void *arg)
{
	struct fs_watcher	*fw = arg;

	if (fw->failed || json_array_size(fw->queue) >= fs_events_max)
		return;
	json_array_append_new(fw->queue, json_pack("{s:{}}", "keepalive"));
	if (fw->st != NULL)
		envd_stream_kick(fw->st);
}

/* Connect-Timeout-Ms passed: end the stream deadline_exceeded. */
static void
fs_stream_deadline(evutil_socket_t fd, short events, void *arg)
{
	struct fs_watcher	*fw = arg;

	if (fw->failed)
		return;
	fw->failed = 1;
	envd_fail(&fw->err, ENVD_DEADLINE_EXCEEDED, "the deadline passed");
	if (fw->st != NULL)
		envd_stream_kick(fw->st);
}
