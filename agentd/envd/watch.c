/*
 * watch.c -- inotify watches for envd's WatchDir (see watch.h).
 *
 * The folders followed form a tree: each knows its parent and its name in
 * it, so that a rename is a relink, and a path is built from the names
 * when an event is reported.  Two hash tables find a folder by inotify
 * descriptor and by (parent, name); both are sized to the folders
 * followed.  A folder is live (in the tree), moving (taken out by an
 * IN_MOVED_FROM, waiting for the IN_MOVED_TO of the same cookie) or
 * dropped (cut off, its watch and its subtree's removed a turn's share at
 * a time).  Live folders whose entries are still to be read wait in the
 * scan queue.
 */
#include <sys/inotify.h>
#include <sys/queue.h>
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
#define WATCH_READ_BUF	(16 << 10)	/* bytes read from inotify in a turn */
#define WATCH_SLICE	64		/* events looked at as the user at once */
#define WATCH_TABLE_MIN	16		/* slots of a hash table at least */
#define WATCH_MOVING_MAX 64		/* folders waiting for their MOVED_TO */

enum watch_state {
	WATCH_LIVE,	/* in the tree */
	WATCH_MOVING,	/* taken out by IN_MOVED_FROM: in w->moving */
	WATCH_DROP,	/* cut off: in w->drop */
};

/* A folder followed. */
struct watch_dir {
	struct watch_dir	*parent;	/* NULL: the root, or not live */
	char			*name;		/* in parent */
	int			 wd;		/* -1 once inotify dropped it */
	enum watch_state	 state;
	uint32_t		 cookie;	/* moving: its IN_MOVED_FROM's */
	int			 queued;	/* in w->scan */
	LIST_HEAD(, watch_dir)	 kids;
	LIST_ENTRY(watch_dir)	 sibling;	/* parent's kids, or w->moving */
	TAILQ_ENTRY(watch_dir)	 entry;		/* w->scan or w->drop */
	struct watch_dir	*wd_next;	/* chain in w->by_wd */
	struct watch_dir	*name_next;	/* chain in w->by_name */
};
LIST_HEAD(watch_dirs, watch_dir);
TAILQ_HEAD(watch_queue, watch_dir);

/* An event looked at as the user, to be reported as agentd. */
struct watch_out {
	char			*name;
	enum watch_type		 type;
	int			 has_entry;
	struct watch_entry	 entry;
};

struct watch {
	int			 ifd;		/* inotify */
	int			 flags;		/* WATCH_RECURSIVE, WATCH_ENTRIES */
	size_t			 max_dirs;
	struct watch_dir	*top;		/* the watched folder */
	/* The watched folder: its parent and name there, or held itself. */
	int			 parent;	/* O_PATH, or -1 */
	char			*base;
	int			 held;		/* O_PATH of the folder, or -1 */
	dev_t			 dev;
	ino_t			 ino;
	int			 rootfd;	/* open for a step, or -1 */
	/* The user it acts as. */
	uid_t			 uid;
	gid_t			 gid;
	gid_t			*groups;
	int			 ngroups;
	int			 other;		/* not the loop's own */
	int			 became;	/* the loop acts as it now */
	/* Folders. */
	struct watch_dir	**by_wd;
	struct watch_dir	**by_name;
	size_t			 slots;		/* of each table */
	size_t			 ndirs;		/* in the tables */
	size_t			 bytes;		/* tables, folders, names */
	size_t			 ndrop;		/* of them, dropped */
	struct watch_dirs	 moving;
	size_t			 nmoving;
	struct watch_queue	 scan;
	struct watch_queue	 drop;
	DIR			*scan_dir;	/* of TAILQ_FIRST(&scan) */
	int			 scan_depth;
	/* On the loop. */
	struct event		*ev;
	struct event		*work;
	watch_event_fn		 fn;
	void			*arg;
	int			 started;
	int			 ended;		/* no more events */
	int			 told;		/* the end was reported */
	char			*cause;		/* the end's, NULL: none */
	int			 in_cb;
	int			 dead;		/* freed from a callback */
};

static size_t	 watch_ndirs_total;	/* of started watches (the loop's) */
static size_t	 watch_bytes_total;
static gid_t	*watch_own_groups;	/* the loop's, read before it first */
static int	 watch_own_ngroups = -1;	/* acts as a watch's user */

static int	watch_open_beneath(int root, const char *rel, int flags);
static int	watch_root(struct watch *);
static void	watch_root_put(struct watch *);
static int	watch_become(struct watch *);
static void	watch_unbecome(struct watch *);
static void	watch_account(struct watch *, ssize_t, ssize_t);
static size_t	watch_hash(const struct watch_dir *, const char *);
static void	watch_resize(struct watch *, size_t);
static void	watch_table_del(struct watch *, struct watch_dir *, int);
static struct watch_dir *watch_by_wd(struct watch *, int);
static struct watch_dir *watch_by_name(struct watch *,
		    const struct watch_dir *, const char *);
static struct watch_dir *watch_dir_new(struct watch *, int);
static void	watch_attach(struct watch *, struct watch_dir *,
		    struct watch_dir *, const char *);
static void	watch_detach(struct watch *, struct watch_dir *);
static void	watch_cut(struct watch *, struct watch_dir *);
static void	watch_dir_free(struct watch *, struct watch_dir *);
static void	watch_drop_one(struct watch *, struct watch_dir *, int *);
static char	*watch_path(struct watch *, struct watch_dir *, int *);
static int	watch_add_at(struct watch *, struct watch_dir *, int,
		    const char *, int, struct proto_err *);
static int	watch_add_new(struct watch *, struct watch_dir *, const char *,
		    const char *, int, struct proto_err *);
static int	watch_scan_step(struct watch *, int *, struct proto_err *);
static void	watch_recheck(struct watch *, struct watch_dir *);
static void	watch_event(struct watch *, const struct inotify_event *,
		    struct watch_out *, size_t *);
static void	watch_out_add(struct watch *, struct watch_out *, size_t *,
		    const char *, uint32_t);
static void	watch_end(struct watch *, const char *);
static void	watch_tell_end(struct watch *);
static void	watch_kick(struct watch *);
static void	watch_read(evutil_socket_t, short, void *);
static void	watch_work(evutil_socket_t, short, void *);

/* Watch dirfd's folder, and with WATCH_RECURSIVE every folder under it. */
struct watch *
watch_open(int dirfd, int flags, size_t max_dirs, struct proto_err *err)
{
	struct watch	*w;
	struct stat	 st, pst;
	char		 proc[64], link[PATH_MAX], *slash;
	ssize_t		 n;
	int		 budget, ng;

	w = xcalloc(1, sizeof *w);
	w->flags = flags;
	w->max_dirs = max_dirs;
	w->parent = w->held = w->rootfd = -1;
	LIST_INIT(&w->moving);
	TAILQ_INIT(&w->scan);
	TAILQ_INIT(&w->drop);
	watch_resize(w, WATCH_TABLE_MIN);
	/* The user: this thread's file system credentials (-1 changes none). */
	w->uid = (uid_t)syscall(SYS_setfsuid, (uid_t)-1);
	w->gid = (gid_t)syscall(SYS_setfsgid, (gid_t)-1);
	if ((ng = getgroups(0, NULL)) > 0) {
		w->groups = xcalloc((size_t)ng, sizeof *w->groups);
		if ((w->ngroups = getgroups(ng, w->groups)) < 0)
			w->ngroups = 0;
	}
	if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) == -1) {
		proto_fail(err, errno == EMFILE ? 429 : 500, errno == EMFILE ?
		    "resource_exhausted" : "internal_error", "inotify_init: "
		    "%s", strerror(errno));
		goto fail;
	}
	if (fstat(dirfd, &st) == -1) {
		proto_fail(err, 500, "internal_error", "fstat: %s",
		    strerror(errno));
		goto fail;
	}
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	/*
	 * Hold its parent and name, not the folder: an fd of it would keep
	 * inotify from telling its removal (IN_DELETE_SELF comes once the
	 * last reference goes).  "/", or a folder whose name cannot be
	 * found again, is held itself.
	 */
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
	if ((n = readlink(proc, link, sizeof link - 1)) > 1 &&
	    (w->parent = openat(dirfd, "..", O_PATH | O_DIRECTORY |
	    O_CLOEXEC)) != -1) {
		link[n] = '\0';
		slash = strrchr(link, '/');
		if (slash != NULL && slash[1] != '\0' &&
		    fstatat(w->parent, slash + 1, &pst,
		    AT_SYMLINK_NOFOLLOW) == 0 && pst.st_dev == w->dev &&
		    pst.st_ino == w->ino)
			w->base = xstrdup(slash + 1);
		else {
			close(w->parent);
			w->parent = -1;
		}
	}
	if (w->base == NULL && (w->held = fcntl(dirfd, F_DUPFD_CLOEXEC,
	    0)) == -1) {
		proto_fail(err, 500, "internal_error", "dup: %s",
		    strerror(errno));
		goto fail;
	}
	/* The folder, then (recursive) all under it, on this worker. */
	w->rootfd = dirfd;
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
	if ((n = inotify_add_watch(w->ifd, proc, WATCH_MASK)) == -1) {
		w->rootfd = -1;
		proto_fail(err, errno == ENOSPC ? 429 : errno == EACCES ?
		    403 : 500, errno == ENOSPC ? "resource_exhausted" :
		    errno == EACCES ? "permission_denied" : "internal_error",
		    "inotify_add_watch: %s", strerror(errno));
		goto fail;
	}
	w->top = watch_dir_new(w, (int)n);
	w->top->name = xstrdup("");
	watch_account(w, 0, 1);
	if (w->flags & WATCH_RECURSIVE) {
		w->top->queued = 1;
		TAILQ_INSERT_TAIL(&w->scan, w->top, entry);
	}
	while (!TAILQ_EMPTY(&w->scan)) {
		budget = INT_MAX;
		if (watch_scan_step(w, &budget, err) == -1) {
			w->rootfd = -1;
			goto fail;
		}
	}
	w->rootfd = -1;
	return (w);
fail:
	watch_free(w);
	return (NULL);
}

/*
 * Open rel (a path under root without "." or "..") beneath root with
 * flags, no symlink followed on the way: an fd, or -1.
 */
static int
watch_open_beneath(int root, const char *rel, int flags)
{
#ifdef SYS_openat2
	struct {
		uint64_t	flags, mode, resolve;
	} how;
	int	fd;

	if (*rel == '\0')
		rel = ".";
	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	how.resolve = 0x08 /* RESOLVE_BENEATH */ | 0x04 /* NO_SYMLINKS */ |
	    0x02 /* NO_MAGICLINKS */;
	fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
	if (fd != -1 || (errno != ENOSYS && errno != EPERM))
		return (fd);
#endif
	if (*rel == '\0')
		rel = ".";
	/* Older kernels: only the last component is sure. */
	return (openat(root, rel, flags | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC));
}

/*
 * The watched folder for a step: found again in its parent (the same
 * folder, not one put in its place), or the one held.  An fd, or -1.
 */
static int
watch_root(struct watch *w)
{
	struct stat	st;
	int		fd;

	if (w->rootfd != -1)
		return (w->rootfd);
	if (w->held != -1)
		return (w->held);
	fd = openat(w->parent, w->base, O_PATH | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	if (fd == -1)
		return (-1);
	if (fstat(fd, &st) == -1 || st.st_dev != w->dev ||
	    st.st_ino != w->ino) {
		close(fd);
		errno = ENOENT;
		return (-1);
	}
	return (w->rootfd = fd);
}

/* Close the step's fd of the watched folder. */
static void
watch_root_put(struct watch *w)
{
	if (w->rootfd != -1 && w->started)
		close(w->rootfd);
	if (w->started)
		w->rootfd = -1;
}

/*
 * On the loop: take the watch's user's file system credentials on this
 * thread (the raw syscalls: the libcs' change every thread), groups, then
 * fsgid and fsuid; leaving fsuid 0 drops the file system capabilities,
 * going back gives them back.  0, or -1 acting as before.
 */
static int
watch_become(struct watch *w)
{
	int	n;

	if (!w->other || w->became)
		return (0);
	if (watch_own_ngroups == -1) {
		n = (int)syscall(SYS_getgroups, 0, NULL);
		watch_own_groups = xcalloc(n > 0 ? (size_t)n : 1,
		    sizeof *watch_own_groups);
		n = n > 0 ? (int)syscall(SYS_getgroups, n,
		    watch_own_groups) : 0;
		if (n < 0)
			return (-1);
		watch_own_ngroups = n;
	}
	if (syscall(SYS_setgroups, (size_t)w->ngroups, w->groups) == -1)
		return (-1);
	w->became = 1;
	syscall(SYS_setfsgid, w->gid);
	syscall(SYS_setfsuid, w->uid);
	/* setfsuid() reports no error: read the values back. */
	if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != w->uid ||
	    (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != w->gid) {
		watch_unbecome(w);
		return (-1);
	}
	return (0);
}

/* The loop's own credentials again (agentd's: euid, egid, groups). */
static void
watch_unbecome(struct watch *w)
{
	uid_t	uid = geteuid();
	gid_t	gid = getegid();

	if (!w->became)
		return;
	w->became = 0;
	syscall(SYS_setfsuid, uid);
	syscall(SYS_setfsgid, gid);
	if (syscall(SYS_setgroups, (size_t)watch_own_ngroups,
	    watch_own_groups) == -1 ||
	    (uid_t)syscall(SYS_setfsuid, (uid_t)-1) != uid ||
	    (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != gid)
		fatal("%s: cannot act as agentd again", __func__);
}

/* Count dirs folders and bytes more (or fewer) for w and in all. */
static void
watch_account(struct watch *w, ssize_t dirs, ssize_t bytes)
{
	w->ndirs += (size_t)dirs;
	w->bytes += (size_t)bytes;
	if (w->started) {
		watch_ndirs_total += (size_t)dirs;
		watch_bytes_total += (size_t)bytes;
	}
}

/* Hash of (parent, name). */
static size_t
watch_hash(const struct watch_dir *parent, const char *name)
{
	uint64_t	h = 14695981039346656037ull ^ (uintptr_t)parent;

	for (; *name != '\0'; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return ((size_t)(h ^ (h >> 29)));
}

/* Give both tables slots slots (a power of two), every folder moved. */
static void
watch_resize(struct watch *w, size_t slots)
{
	struct watch_dir	**by_wd, **by_name, *d, *next;
	size_t			  i, k;

	by_wd = xcalloc(slots, sizeof *by_wd);
	by_name = xcalloc(slots, sizeof *by_name);
	for (i = 0; i < w->slots; i++) {
		for (d = w->by_wd[i]; d != NULL; d = next) {
			next = d->wd_next;
			k = (size_t)(unsigned)d->wd & (slots - 1);
			d->wd_next = by_wd[k];
			by_wd[k] = d;
		}
		for (d = w->by_name[i]; d != NULL; d = next) {
			next = d->name_next;
			k = watch_hash(d->parent, d->name) & (slots - 1);
			d->name_next = by_name[k];
			by_name[k] = d;
		}
	}
	free(w->by_wd);
	free(w->by_name);
	watch_account(w, 0, 2 * ((ssize_t)slots - (ssize_t)w->slots) *
	    (ssize_t)sizeof *by_wd);
	w->by_wd = by_wd;
	w->by_name = by_name;
	w->slots = slots;
}

/* Take d out of by_name (name) or by_wd (!name). */
static void
watch_table_del(struct watch *w, struct watch_dir *d, int name)
{
	struct watch_dir	**p;

	if (name) {
		p = &w->by_name[watch_hash(d->parent, d->name) &
		    (w->slots - 1)];
		while (*p != NULL && *p != d)
			p = &(*p)->name_next;
		if (*p != NULL)
			*p = d->name_next;
		return;
	}
	p = &w->by_wd[(size_t)(unsigned)d->wd & (w->slots - 1)];
	while (*p != NULL && *p != d)
		p = &(*p)->wd_next;
	if (*p != NULL)
		*p = d->wd_next;
}

/* The folder of inotify descriptor wd. */
static struct watch_dir *
watch_by_wd(struct watch *w, int wd)
{
	struct watch_dir	*d;

	for (d = w->by_wd[(size_t)(unsigned)wd & (w->slots - 1)]; d != NULL;
	    d = d->wd_next) {
		if (d->wd == wd)
			return (d);
	}
	return (NULL);
}

/* The live folder name in parent. */
static struct watch_dir *
watch_by_name(struct watch *w, const struct watch_dir *parent,
    const char *name)
{
	struct watch_dir	*d;

	for (d = w->by_name[watch_hash(parent, name) & (w->slots - 1)];
	    d != NULL; d = d->name_next) {
		if (d->parent == parent && strcmp(d->name, name) == 0)
			return (d);
	}
	return (NULL);
}

/* A new folder of descriptor wd, in no tree yet. */
static struct watch_dir *
watch_dir_new(struct watch *w, int wd)
{
	struct watch_dir	*d;
	size_t			 k;

	d = xcalloc(1, sizeof *d);
	d->wd = wd;
	d->state = WATCH_LIVE;
	LIST_INIT(&d->kids);
	if (w->ndirs + 1 > w->slots)
		watch_resize(w, w->slots * 2);
	k = (size_t)(unsigned)wd & (w->slots - 1);
	d->wd_next = w->by_wd[k];
	w->by_wd[k] = d;
	watch_account(w, 1, sizeof *d);
	return (d);
}

/* Put d (not in the tree) into the tree as name in parent. */
static void
watch_attach(struct watch *w, struct watch_dir *d, struct watch_dir *parent,
    const char *name)
{
	struct watch_dir	*old;
	size_t			 k;

	/* A folder of that name replaced: its watch goes. */
	if ((old = watch_by_name(w, parent, name)) != NULL && old != d)
		watch_cut(w, old);
	if (d->name == NULL || strcmp(d->name, name) != 0) {
		watch_account(w, 0, (ssize_t)strlen(name) - (d->name != NULL ?
		    (ssize_t)strlen(d->name) : -1));
		free(d->name);
		d->name = xstrdup(name);
	}
	d->parent = parent;
	d->state = WATCH_LIVE;
	d->cookie = 0;
	LIST_INSERT_HEAD(&parent->kids, d, sibling);
	k = watch_hash(parent, d->name) & (w->slots - 1);
	d->name_next = w->by_name[k];
	w->by_name[k] = d;
}

/*
 * Take d out of the tree (or of the moving list); its subtree stays, and
 * so does its place in the scan queue (a folder read is the same folder
 * wherever it moves).
 */
static void
watch_detach(struct watch *w, struct watch_dir *d)
{
	if (d->state == WATCH_MOVING) {
		LIST_REMOVE(d, sibling);
		w->nmoving--;
	} else if (d->state == WATCH_LIVE && d->parent != NULL) {
		watch_table_del(w, d, 1);
		LIST_REMOVE(d, sibling);
	}
	d->parent = NULL;
}

/* Cut d and its subtree off: they are dropped a turn's share at a time. */
static void
watch_cut(struct watch *w, struct watch_dir *d)
{
	if (d->state == WATCH_DROP || d == w->top)
		return;
	watch_detach(w, d);
	if (d->queued) {
		if (d == TAILQ_FIRST(&w->scan) && w->scan_dir != NULL) {
			closedir(w->scan_dir);
			w->scan_dir = NULL;
		}
		TAILQ_REMOVE(&w->scan, d, entry);
		d->queued = 0;
	}
	d->state = WATCH_DROP;
	w->ndrop++;
	TAILQ_INSERT_TAIL(&w->drop, d, entry);
	watch_kick(w);
}

/* Free d (out of the tree and queues): its watch, its table slot. */
static void
watch_dir_free(struct watch *w, struct watch_dir *d)
{
	if (d->wd != -1) {
		inotify_rm_watch(w->ifd, d->wd);
		watch_table_del(w, d, 0);
	}
	watch_account(w, -1, -(ssize_t)(sizeof *d + (d->name != NULL ?
	    strlen(d->name) + 1 : 0)));
	free(d->name);
	free(d);
	if (w->slots > WATCH_TABLE_MIN && w->ndirs < w->slots / 4)
		watch_resize(w, w->slots / 2);
}

/* Drop the first dropped folder: its kids are cut, it goes. */
static void
watch_drop_one(struct watch *w, struct watch_dir *d, int *budget)
{
	struct watch_dir	*k;

	while ((k = LIST_FIRST(&d->kids)) != NULL) {
		watch_cut(w, k);
		(*budget)--;
	}
	TAILQ_REMOVE(&w->drop, d, entry);
	w->ndrop--;
	watch_dir_free(w, d);
	(*budget)--;
}

/*
 * d's path under the watched folder ("" for it), and *depth its level:
 * malloc'd, or NULL when d is not in the tree, or deeper than
 * WATCH_DEPTH_MAX (a subtree moved under another).
 */
static char *
watch_path(struct watch *w, struct watch_dir *d, int *depth)
{
	struct watch_dir	*up[WATCH_DEPTH_MAX + 1];
	size_t			 len = 1;
	int			 n = 0, i;
	char			*p, *s;

	for (; d != w->top; d = d->parent) {
		if (d == NULL || d->state != WATCH_LIVE ||
		    n > WATCH_DEPTH_MAX)
			return (NULL);
		up[n++] = d;
		len += strlen(d->name) + 1;
	}
	p = s = xmalloc(len);
	for (i = n - 1; i >= 0; i--) {
		len = strlen(up[i]->name);
		memcpy(s, up[i]->name, len);
		s += len;
		if (i > 0)
			*s++ = '/';
	}
	*s = '\0';
	*depth = n;
	return (p);
}

/*
 * Follow the folder name in dfd (parent's fd) at level depth: a new one is
 * watched and queued to be read; one followed already (moved here unseen)
 * is relinked.  0 (followed, or not a folder, gone, not readable), or -1
 * with err.
 */
static int
watch_add_at(struct watch *w, struct watch_dir *parent, int dfd,
    const char *name, int depth, struct proto_err *err)
{
	struct watch_dir	*d, *up;
	char			 proc[64];
	int			 fd, wd, again = 1, spent = 0;

	fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return (0);	/* gone, not a folder, or not the user's */
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
retry:
	if ((wd = inotify_add_watch(w->ifd, proc, WATCH_MASK)) == -1) {
		close(fd);
		if (errno == EACCES || errno == ENOENT || errno == ENOTDIR)
			return (0);	/* a folder this user cannot read */
		return (proto_fail(err, errno == ENOSPC ? 429 : 500,
		    errno == ENOSPC ? "resource_exhausted" : "internal_error",
		    "inotify_add_watch: %s", strerror(errno)));
	}
	if ((d = watch_by_wd(w, wd)) != NULL && d->state == WATCH_DROP &&
	    again) {
		/* Being dropped: drop it now (the same watch), then anew. */
		again = 0;
		TAILQ_REMOVE(&w->drop, d, entry);
		TAILQ_INSERT_HEAD(&w->drop, d, entry);
		watch_drop_one(w, d, &spent);
		goto retry;
	}
	close(fd);
	if (d == NULL) {
		if (w->ndirs - w->ndrop >= w->max_dirs) {
			inotify_rm_watch(w->ifd, wd);
			return (proto_fail(err, 429, "resource_exhausted", "the "
			    "watch would follow more than %zu folders "
			    "(--envd-watch-dirs)", w->max_dirs));
		}
		d = watch_dir_new(w, wd);
		watch_attach(w, d, parent, name);
		if ((w->flags & WATCH_RECURSIVE) && depth < WATCH_DEPTH_MAX) {
			d->queued = 1;
			TAILQ_INSERT_TAIL(&w->scan, d, entry);
			watch_kick(w);
		}
		return (0);
	}
	/* Itself or above: a bind mount would make a loop. */
	for (up = parent; up != NULL; up = up->parent) {
		if (up == d)
			return (0);
	}
	if (d->state != WATCH_DROP) {
		watch_detach(w, d);
		watch_attach(w, d, parent, name);
	}
	return (0);
}

/* Follow the folder name under parent (at path, level depth): as above. */
static int
watch_add_new(struct watch *w, struct watch_dir *parent, const char *path,
    const char *name, int depth, struct proto_err *err)
{
	int	root, dfd, rc;

	if ((root = watch_root(w)) == -1)
		return (0);
	if ((dfd = watch_open_beneath(root, path, O_PATH)) == -1)
		return (0);
	rc = watch_add_at(w, parent, dfd, name, depth, err);
	close(dfd);
	return (rc);
}

/*
 * Read entries of the first folder of the scan queue (opening it first),
 * following the folders among them, while budget lasts.  0; 1 when the
 * first waits for its IN_MOVED_TO (it goes last: the rest of the queue
 * waits for the next turn); or -1 with err.
 */
static int
watch_scan_step(struct watch *w, int *budget, struct proto_err *err)
{
	struct watch_dir	*d = TAILQ_FIRST(&w->scan), *up;
	struct dirent		*de;
	struct stat		 st;
	char			*path;
	int			 root, fd, done = 0;

	if (w->scan_dir == NULL) {
		(*budget)--;
		path = watch_path(w, d, &w->scan_depth);
		for (up = d; path == NULL && up != NULL && up != w->top;
		    up = up->parent) {
			if (up->state == WATCH_MOVING) {
				TAILQ_REMOVE(&w->scan, d, entry);
				TAILQ_INSERT_TAIL(&w->scan, d, entry);
				return (1);
			}
		}
		root = watch_root(w);
		fd = path == NULL || root == -1 ? -1 :
		    watch_open_beneath(root, path, O_RDONLY);
		free(path);
		if (fd == -1 || (w->scan_dir = fdopendir(fd)) == NULL) {
			if (fd != -1)
				close(fd);
			/* Gone, moved away, or one the user cannot read. */
			TAILQ_REMOVE(&w->scan, d, entry);
			d->queued = 0;
			return (0);
		}
	}
	while (*budget > 0) {
		(*budget)--;
		if ((de = readdir(w->scan_dir)) == NULL) {
			done = 1;	/* the end, or an error: as far as read */
			break;
		}
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (de->d_type == DT_UNKNOWN && (fstatat(dirfd(w->scan_dir),
		    de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
		    !S_ISDIR(st.st_mode)))
			continue;
		if (de->d_type != DT_UNKNOWN && de->d_type != DT_DIR)
			continue;
		if (watch_add_at(w, d, dirfd(w->scan_dir), de->d_name,
		    w->scan_depth + 1, err) != 0)
			return (-1);
		if (w->scan_dir == NULL)
			return (0);	/* d went meanwhile */
	}
	if (done) {
		closedir(w->scan_dir);
		w->scan_dir = NULL;
		TAILQ_REMOVE(&w->scan, d, entry);
		d->queued = 0;
	}
	return (0);
}

/*
 * A folder's mode or owner changed: one its user cannot read any more is
 * dropped (the watched folder: the watch ends), one it cannot enter keeps
 * no folder under it; one it can enter again is read again.
 */
static void
watch_recheck(struct watch *w, struct watch_dir *d)
{
	struct watch_dir	*k;
	char			*path;
	int			 root, fd, sfd, depth;

	if ((path = watch_path(w, d, &depth)) == NULL ||
	    (root = watch_root(w)) == -1) {
		free(path);
		return;
	}
	fd = watch_open_beneath(root, path, O_RDONLY);
	free(path);
	if (fd == -1) {
		if (errno != EACCES)
			return;
		if (d == w->top)
			watch_end(w, "permission denied: the watched folder "
			    "cannot be read any more");
		else
			watch_cut(w, d);
		return;
	}
	sfd = openat(fd, ".", O_PATH | O_CLOEXEC);
	close(fd);
	if (sfd == -1) {
		while ((k = LIST_FIRST(&d->kids)) != NULL)
			watch_cut(w, k);
		return;
	}
	close(sfd);
	if ((w->flags & WATCH_RECURSIVE) && !d->queued &&
	    depth < WATCH_DEPTH_MAX && LIST_EMPTY(&d->kids)) {
		d->queued = 1;
		TAILQ_INSERT_TAIL(&w->scan, d, entry);
		watch_kick(w);
	}
}

/* Look at one inotify event (as the user): the tree, then what to tell. */
static void
watch_event(struct watch *w, const struct inotify_event *e,
    struct watch_out *out, size_t *nout)
{
	struct watch_dir	*d, *k;
	struct proto_err	 err;
	char			*path, *name;
	int			 depth, named = e->len > 0 && e->name[0] != '\0';

	if ((d = watch_by_wd(w, e->wd)) == NULL)
		return;		/* dropped already */
	if (e->mask & IN_IGNORED) {
		watch_table_del(w, d, 0);
		d->wd = -1;
		if (d == w->top)
			watch_end(w, NULL);
		else
			watch_cut(w, d);
		return;
	}
	if (e->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
		/* A folder under the root tells its own end through its
		   parent; one moved out of the tree goes. */
		if (d != w->top) {
			if ((e->mask & IN_MOVE_SELF) &&
			    d->state == WATCH_MOVING)
				watch_cut(w, d);
			return;
		}
		watch_out_add(w, out, nout, ".", e->mask);
		watch_end(w, NULL);	/* as envd: no more events */
		return;
	}
	if ((path = watch_path(w, d, &depth)) == NULL)
		return;		/* cut off, moving, or too deep */
	if (!named) {
		if ((e->mask & IN_ATTRIB) && w->uid != 0)
			watch_recheck(w, d);
		watch_out_add(w, out, nout, *path != '\0' ? path : ".",
		    e->mask);
		free(path);
		return;
	}
	xasprintf(&name, "%s%s%s", path, *path != '\0' ? "/" : "", e->name);
	if ((w->flags & WATCH_RECURSIVE) && (e->mask & IN_ISDIR)) {
		if ((e->mask & IN_MOVED_FROM) &&
		    (k = watch_by_name(w, d, e->name)) != NULL) {
			watch_detach(w, k);
			k->state = WATCH_MOVING;
			k->cookie = e->cookie;
			LIST_INSERT_HEAD(&w->moving, k, sibling);
			if (++w->nmoving > WATCH_MOVING_MAX) {
				/* The oldest's MOVED_TO never came. */
				LIST_FOREACH(k, &w->moving, sibling) {
					if (LIST_NEXT(k, sibling) == NULL)
						break;
				}
				watch_cut(w, k);
			}
		}
		if (e->mask & (IN_CREATE | IN_MOVED_TO)) {
			LIST_FOREACH(k, &w->moving, sibling) {
				if ((e->mask & IN_MOVED_TO) &&
				    k->cookie == e->cookie)
					break;
			}
			if (k != NULL && depth < WATCH_DEPTH_MAX) {
				watch_detach(w, k);
				watch_attach(w, k, d, e->name);
			} else if (k != NULL)
				watch_cut(w, k);
			else if (depth < WATCH_DEPTH_MAX &&
			    watch_add_new(w, d, path, e->name, depth + 1,
			    &err) != 0)
				watch_end(w, err.message);
		}
	}
	watch_out_add(w, out, nout, name, e->mask);
	free(name);
	free(path);
}

/* Queue what one event tells (one inotify event may be several). */
static void
watch_out_add(struct watch *w, struct watch_out *out, size_t *nout,
    const char *name, uint32_t mask)
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
	struct watch_out	*o;
	const char		*slash, *base;
	char			*dir;
	size_t			 i;
	int			 root, fd, has = -1;

	for (i = 0; i < nitems(map); i++) {
		if (!(mask & map[i].mask))
			continue;
		o = &out[(*nout)++];
		o->name = xstrdup(name);
		o->type = map[i].type;
		o->has_entry = 0;
		if (!(w->flags & WATCH_ENTRIES) || (o->type != WATCH_CREATE &&
		    o->type != WATCH_WRITE && o->type != WATCH_CHMOD))
			continue;
		if (has == -1) {
			/*
			 * lstat as the user, beneath the watched folder, no
			 * symlink followed on the way (best effort, as
			 * envd's: a lookup that fails sends none); whether
			 * the user may read it (faccessat2 AT_EACCESS checks
			 * the fsuid; agentd's own watch may).
			 */
			has = 0;
			slash = strrchr(name, '/');
			base = strcmp(name, ".") == 0 ? "." : slash != NULL ?
			    slash + 1 : name;
			dir = xstrdup(name);
			dir[slash != NULL ? (size_t)(slash - name) : 0] = '\0';
			if ((root = watch_root(w)) != -1 &&
			    (fd = watch_open_beneath(root, dir, O_PATH)) != -1) {
				has = fstatat(fd, base, &o->entry.st,
				    AT_SYMLINK_NOFOLLOW) == 0;
				o->entry.readable = has && (!w->became ||
				    syscall(SYS_faccessat2, fd, base, R_OK,
				    AT_EACCESS | AT_SYMLINK_NOFOLLOW) == 0);
				close(fd);
			}
			free(dir);
		} else
			o->entry = o[-1].entry;
		o->has_entry = has;
	}
}

/* No more events: the end is reported once what came before is. */
static void
watch_end(struct watch *w, const char *cause)
{
	if (w->ended)
		return;
	w->ended = 1;
	w->cause = cause != NULL ? xstrdup(cause) : NULL;
	if (w->ev != NULL)
		event_del(w->ev);
	if (w->work != NULL)
		event_del(w->work);
}

/* Report the end, once. */
static void
watch_tell_end(struct watch *w)
{
	if (!w->ended || w->told || w->dead)
		return;
	w->told = 1;
	log_debug("%s: inotify fd %d: %s", __func__, w->ifd,
	    w->cause != NULL ? w->cause : "the watched folder went");
	w->fn(w->arg, NULL, 0, NULL, w->cause);
}

/* Work waits: do a share of it in the next loop turn. */
static void
watch_kick(struct watch *w)
{
	struct timeval	tv = { 0, 0 };

	/* A timer: it runs after the loop looked at the fds again. */
	if (w->work != NULL && !w->ended && !evtimer_pending(w->work, NULL))
		evtimer_add(w->work, &tv);
}

/* Start reporting events on base. */
int
watch_start(struct watch *w, struct event_base *base, watch_event_fn fn,
    void *arg)
{
	w->fn = fn;
	w->arg = arg;
	w->started = 1;
	watch_ndirs_total += w->ndirs;
	watch_bytes_total += w->bytes;
	w->other = w->uid != geteuid() || w->gid != getegid();
	w->ev = event_new(base, w->ifd, EV_READ | EV_PERSIST, watch_read, w);
	w->work = evtimer_new(base, watch_work, w);
	if (w->ev == NULL || w->work == NULL || event_add(w->ev, NULL) != 0)
		return (-1);
	return (0);
}

/*
 * inotify has events: read them once (the rest waits for the next turn),
 * look at them as the user a slice at a time, and report each slice as
 * agentd.  A callback may free the watch (the stream ends): watch_free()
 * then only marks it dead, and it is freed here on the way out.
 */
static void
watch_read(evutil_socket_t fd, short events, void *arg)
{
	struct watch			*w = arg;
	struct inotify_event		*e;
	struct watch_out		 out[WATCH_SLICE * 2];
	char				 buf[WATCH_READ_BUF]
					    __attribute__((aligned(8)));
	ssize_t				 n;
	size_t				 off = 0, nout, i;

	w->in_cb = 1;
	do
		n = read(fd, buf, sizeof buf);
	while (n == -1 && errno == EINTR);
	while (n > 0 && off + sizeof *e <= (size_t)n && !w->ended &&
	    !w->dead) {
		nout = 0;
		if (watch_become(w) != 0)
			watch_end(w, "cannot act as the watch's user");
		/* Each event gives at most two. */
		for (; off + sizeof *e <= (size_t)n && nout < WATCH_SLICE &&
		    !w->ended; off += sizeof *e + e->len) {
			e = (struct inotify_event *)(buf + off);
			if (e->mask & IN_Q_OVERFLOW)
				watch_end(w, "too many events: the inotify "
				    "queue overflowed");
			else
				watch_event(w, e, out, &nout);
		}
		watch_unbecome(w);
		watch_root_put(w);
		for (i = 0; i < nout; i++) {
			if (!w->dead)
				w->fn(w->arg, out[i].name, out[i].type,
				    out[i].has_entry ? &out[i].entry : NULL,
				    NULL);
			free(out[i].name);
		}
	}
	watch_tell_end(w);
	w->in_cb = 0;
	if (w->dead)
		watch_free(w);
}

/*
 * The waiting work, a turn's share: folders to drop first, then folders
 * to read (as the user).
 */
static void
watch_work(evutil_socket_t fd, short events, void *arg)
{
	struct watch		*w = arg;
	struct proto_err	 err;
	int			 budget = WATCH_TURN_STEPS, rc;

	w->in_cb = 1;
	if (watch_become(w) != 0)
		watch_end(w, "cannot act as the watch's user");
	while (budget > 0 && !w->ended) {
		if (!TAILQ_EMPTY(&w->drop))
			watch_drop_one(w, TAILQ_FIRST(&w->drop), &budget);
		else if (TAILQ_EMPTY(&w->scan))
			break;
		else if ((rc = watch_scan_step(w, &budget, &err)) == -1)
			watch_end(w, err.message);
		else if (rc == 1)
			break;
	}
	watch_unbecome(w);
	watch_root_put(w);
	if (!TAILQ_EMPTY(&w->drop) || !TAILQ_EMPTY(&w->scan))
		watch_kick(w);
	watch_tell_end(w);
	w->in_cb = 0;
	if (w->dead)
		watch_free(w);
}

/* Folders followed by the started watches, and their bytes. */
size_t
watch_dirs_total(size_t *bytes)
{
	*bytes = watch_bytes_total;
	return (watch_ndirs_total);
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
	struct watch_dir	*d, *next;
	size_t			 i;

	if (w == NULL)
		return;
	if (w->in_cb) {		/* from a callback: freed on its way out */
		w->dead = 1;
		if (w->ev != NULL)
			event_del(w->ev);
		if (w->work != NULL)
			event_del(w->work);
		return;
	}
	if (w->ev != NULL)
		event_free(w->ev);
	if (w->work != NULL)
		event_free(w->work);
	if (w->scan_dir != NULL)
		closedir(w->scan_dir);
	/* Those inotify dropped already are in no table: dropped, or top. */
	for (d = TAILQ_FIRST(&w->drop); d != NULL; d = next) {
		next = TAILQ_NEXT(d, entry);
		if (d->wd == -1) {
			free(d->name);
			free(d);
		}
	}
	if (w->top != NULL && w->top->wd == -1) {
		free(w->top->name);
		free(w->top);
	}
	for (i = 0; i < w->slots; i++) {
		for (d = w->by_wd[i]; d != NULL; d = next) {
			next = d->wd_next;
			free(d->name);
			free(d);
		}
	}
	if (w->started) {
		watch_ndirs_total -= w->ndirs;
		watch_bytes_total -= w->bytes;
	}
	free(w->by_wd);
	free(w->by_name);
	free(w->groups);
	free(w->cause);
	free(w->base);
	if (w->ifd != -1)
		close(w->ifd);
	if (w->parent != -1)
		close(w->parent);
	if (w->held != -1)
		close(w->held);
	free(w);
}
