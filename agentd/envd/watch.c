/*
 * watch.c -- inotify watches for envd's WatchDir (see watch.h).
 */
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "proto.h"
#include "util.h"
#include "watch.h"

/* inotify's events that envd's fsnotify reports. */
#define WATCH_MASK	(IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | \
	IN_MODIFY | IN_ATTRIB | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | \
	IN_ONLYDIR | IN_EXCL_UNLINK)
#define WATCH_READ_BUF	(16 << 10)	/* bytes read from inotify at once */

/* A watched folder: its path under the root. */
struct watch_dir {
	char			*rel;	/* "" for the root */
};

struct watch {
	int			 ifd;	/* inotify */
	int			 root;	/* O_PATH fd of the watched folder */
	int			 recursive;
	int			 failed;	/* an error was reported */
	int			 in_cb;		/* watch_read() is running */
	int			 dead;		/* freed from a callback */
	size_t			 ndirs;		/* watched now */
	size_t			 max_dirs;
	struct watch_dir	**dirs;		/* by inotify descriptor */
	size_t			 dirs_len;	/* slots in dirs */
	struct event		*ev;
	watch_event_fn		 fn;
	void			*arg;
};

static int	watch_add(struct watch *, const char *rel, int depth,
		    struct proto_err *);
static int	watch_open_beneath(int root, const char *rel);
static void	watch_read(evutil_socket_t, short, void *);
static void	watch_fail(struct watch *, const char *cause);
static void	watch_emit(struct watch *, struct watch_dir *,
		    const struct inotify_event *);

/* Watch dirfd's folder, and with recursive every folder under it. */
struct watch *
watch_open(int dirfd, int recursive, size_t max_dirs, struct proto_err *err)
{
	struct watch	*w;

	w = xcalloc(1, sizeof *w);
	w->max_dirs = max_dirs;
	w->recursive = recursive;
	w->root = -1;
	if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1) {
		proto_fail(err, errno == EMFILE ? 429 : 500, errno == EMFILE ?
		    "resource_exhausted" : "internal_error", "inotify_init: "
		    "%s", strerror(errno));
		goto fail;
	}
	if ((w->root = fcntl(dirfd, F_DUPFD_CLOEXEC, 0)) == -1) {
		proto_fail(err, 500, "internal_error", "dup: %s",
		    strerror(errno));
		goto fail;
	}
	if (watch_add(w, "", 0, err) != 0)
		goto fail;
	return (w);
fail:
	watch_free(w);
	return (NULL);
}

/*
 * Open rel (a path under root without "." or "..") beneath root, no
 * symlink followed on the way: an O_PATH fd of a folder, or -1.
 */
static int
watch_open_beneath(int root, const char *rel)
{
#ifdef SYS_openat2
	struct {
		uint64_t	flags, mode, resolve;
	} how;
	int	fd;

	if (*rel == '\0')
		return (fcntl(root, F_DUPFD_CLOEXEC, 0));
	memset(&how, 0, sizeof how);
	how.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	how.resolve = 0x08 /* RESOLVE_BENEATH */ | 0x04 /* NO_SYMLINKS */ |
	    0x02 /* NO_MAGICLINKS */;
	fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
	if (fd != -1 || (errno != ENOSYS && errno != EPERM))
		return (fd);
#endif
	if (*rel == '\0')
		return (fcntl(root, F_DUPFD_CLOEXEC, 0));
	/* Older kernels: only the last component is sure. */
	return (openat(root, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC));
}

/* Add the folder rel under the root, and recursively those under it. */
static int
watch_add(struct watch *w, const char *rel, int depth, struct proto_err *err)
{
	struct watch_dir	*d;
	struct dirent		*de;
	size_t			 n;
	DIR			*dir;
	char			 proc[64], *sub;
	int			 fd, wd, dfd;

	if (w->ndirs >= w->max_dirs)
		return (proto_fail(err, 429, "resource_exhausted", "the watch "
		    "would follow more than %zu folders (--envd-watch-dirs)",
		    w->max_dirs));
	if ((fd = watch_open_beneath(w->root, rel)) == -1) {
		if (*rel != '\0' && (errno == ENOENT || errno == ENOTDIR ||
		    errno == ELOOP || errno == EXDEV))
			return (0);	/* gone, or not a folder now */
		return (proto_fail(err, errno == EACCES ? 403 : 500,
		    errno == EACCES ? "permission_denied" : "internal_error",
		    "open %.160s: %s", rel, strerror(errno)));
	}
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
	if (wd == -1) {
		close(fd);
		if (*rel != '\0' && errno == EACCES)
			return (0);	/* a folder this user cannot read */
		return (proto_fail(err, errno == ENOSPC ? 429 : errno ==
		    EACCES ? 403 : 500, errno == ENOSPC ? "resource_exhausted" :
		    errno == EACCES ? "permission_denied" : "internal_error",
		    "inotify_add_watch %.160s: %s", *rel ? rel : ".",
		    strerror(errno)));
	}
	/* Descriptors count up from 1 in each inotify instance. */
	if ((size_t)wd >= w->dirs_len) {
		n = w->dirs_len == 0 ? 16 : w->dirs_len;
		while (n <= (size_t)wd)
			n *= 2;
		w->dirs = xrealloc(w->dirs, n * sizeof *w->dirs);
		memset(w->dirs + w->dirs_len, 0, (n - w->dirs_len) *
		    sizeof *w->dirs);
		w->dirs_len = n;
	}
	if (w->dirs[wd] == NULL) {
		d = xcalloc(1, sizeof *d);
		d->rel = xstrdup(rel);
		w->dirs[wd] = d;
		w->ndirs++;
	}
	if (!w->recursive || depth >= WATCH_DEPTH_MAX) {
		close(fd);
		return (0);
	}
	/* The folders under it: read through a real fd (O_PATH cannot). */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(fd);
	if (dfd == -1 || (dir = fdopendir(dfd)) == NULL) {
		if (dfd != -1)
			close(dfd);
		return (0);
	}
	while ((de = readdir(dir)) != NULL) {
		if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		xasprintf(&sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		if (watch_add(w, sub, depth + 1, err) != 0) {
			free(sub);
			closedir(dir);
			return (-1);
		}
		free(sub);
	}
	closedir(dir);
	return (0);
}

/* Start reporting events on base. */
int
watch_start(struct watch *w, struct event_base *base, watch_event_fn fn,
    void *arg)
{
	w->fn = fn;
	w->arg = arg;
	w->ev = event_new(base, w->ifd, EV_READ | EV_PERSIST, watch_read, w);
	if (w->ev == NULL || event_add(w->ev, NULL) != 0)
		return (-1);
	return (0);
}

/* Report an error once, and stop reading. */
static void
watch_fail(struct watch *w, const char *cause)
{
	if (w->failed)
		return;
	w->failed = 1;
	event_del(w->ev);
	log_debug("%s: inotify fd %d: %s", __func__, w->ifd, cause);
	w->fn(w->arg, NULL, 0, cause);
}

/* Report one inotify event as envd's events (one event may be several). */
static void
watch_emit(struct watch *w, struct watch_dir *d, const struct inotify_event *e)
{
	static const struct {
		uint32_t		mask;
		enum watch_type		type;
	} map[] = {	/* fsnotify's order: create, rename, chmod, write, remove */
		{ IN_CREATE | IN_MOVED_TO, WATCH_CREATE },
		{ IN_MOVED_FROM | IN_MOVE_SELF, WATCH_RENAME },
		{ IN_ATTRIB, WATCH_CHMOD },
		{ IN_MODIFY, WATCH_WRITE },
		{ IN_DELETE | IN_DELETE_SELF, WATCH_REMOVE },
	};
	struct proto_err	 err;
	char			*name;
	size_t			 i;
	int			 self = (e->mask & (IN_DELETE_SELF |
				    IN_MOVE_SELF)) != 0;

	/* A folder under the root tells its own end through its parent. */
	if (self && *d->rel != '\0')
		return;
	if (self || e->len == 0 || e->name[0] == '\0')
		name = xstrdup(*d->rel ? d->rel : ".");
	else
		xasprintf(&name, "%s%s%s", d->rel, *d->rel ? "/" : "", e->name);
	if (w->recursive && (e->mask & IN_ISDIR) &&
	    (e->mask & (IN_CREATE | IN_MOVED_TO)) &&
	    watch_add(w, name, 1, &err) != 0) {
		free(name);
		watch_fail(w, err.message);
		return;
	}
	for (i = 0; i < sizeof map / sizeof map[0] && !w->dead; i++) {
		if (e->mask & map[i].mask)
			w->fn(w->arg, name, map[i].type, NULL);
	}
	free(name);
	if (!w->dead && self && (e->mask & IN_DELETE_SELF))
		watch_fail(w, "the watched folder was removed");
}

/*
 * inotify has events: read and report them.  A callback may free the watch
 * (the stream ends): watch_free() then only marks it dead, and it is freed
 * here on the way out.
 */
static void
watch_read(evutil_socket_t fd, short events, void *arg)
{
	struct watch			*w = arg;
	struct inotify_event		*e;
	struct watch_dir		*d;
	char				 buf[WATCH_READ_BUF]
					    __attribute__((aligned(8)));
	ssize_t				 n;
	size_t				 off;

	w->in_cb = 1;
	while (!w->failed && !w->dead) {
		n = read(fd, buf, sizeof buf);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (off = 0; off + sizeof *e <= (size_t)n && !w->failed &&
		    !w->dead; off += sizeof *e + e->len) {
			e = (struct inotify_event *)(buf + off);
			if (e->mask & IN_Q_OVERFLOW) {
				watch_fail(w, "too many events: the inotify "
				    "queue overflowed");
				break;
			}
			if (e->wd < 0 || (size_t)e->wd >= w->dirs_len ||
			    (d = w->dirs[e->wd]) == NULL)
				continue;
			if (e->mask & IN_IGNORED) {
				w->dirs[e->wd] = NULL;
				w->ndirs--;
				free(d->rel);
				free(d);
				continue;
			}
			watch_emit(w, d, e);
		}
	}
	w->in_cb = 0;
	if (w->dead)
		watch_free(w);
}

/* lstat name (an event's) under the root, no symlink followed on the way. */
int
watch_stat(struct watch *w, const char *name, struct stat *st)
{
	const char	*slash = strrchr(name, '/');
	char		*dir;
	int		 fd, rc;

	if (strcmp(name, ".") == 0)
		return (fstat(w->root, st));
	dir = xstrdup(name);
	dir[slash != NULL ? (size_t)(slash - name) : 0] = '\0';
	fd = watch_open_beneath(w->root, dir);
	free(dir);
	if (fd == -1)
		return (-1);
	rc = fstatat(fd, slash != NULL ? slash + 1 : name, st,
	    AT_SYMLINK_NOFOLLOW);
	close(fd);
	return (rc);
}

/* envd's name of an event type. */
const char *
watch_type_name(enum watch_type t)
{
	switch (t) {
	case WATCH_CREATE:
		return ("EVENT_TYPE_CREATE");
	case WATCH_WRITE:
		return ("EVENT_TYPE_WRITE");
	case WATCH_REMOVE:
		return ("EVENT_TYPE_REMOVE");
	case WATCH_RENAME:
		return ("EVENT_TYPE_RENAME");
	case WATCH_CHMOD:
		return ("EVENT_TYPE_CHMOD");
	}
	return ("EVENT_TYPE_UNSPECIFIED");
}

/* Stop watching and free. */
void
watch_free(struct watch *w)
{
	size_t	i;

	if (w == NULL)
		return;
	if (w->in_cb) {		/* from a callback: watch_read() frees it */
		w->dead = 1;
		if (w->ev != NULL)
			event_del(w->ev);
		return;
	}
	if (w->ev != NULL)
		event_free(w->ev);
	for (i = 0; i < w->dirs_len; i++) {
		if (w->dirs[i] != NULL) {
			free(w->dirs[i]->rel);
			free(w->dirs[i]);
		}
	}
	free(w->dirs);
	if (w->ifd != -1)
		close(w->ifd);
	if (w->root != -1)
		close(w->root);
	free(w);
}
