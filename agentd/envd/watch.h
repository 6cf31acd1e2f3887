/*
 * watch.h -- a folder watched with inotify, as envd's WatchDir and
 * CreateWatcher see it: optionally recursive, each event named relative to
 * the watched folder, with envd's (fsnotify's) types.
 *
 * watch_open() runs on a files worker acting as the call's user (so the
 * folder and, recursively, every folder under it are opened with that
 * user's rights, symlinks under it never followed); the rest runs on the
 * loop: watch_start() makes the inotify fd an event of the base.  Folders
 * made later under a recursive watch are added from the loop, opened
 * beneath the root without following any symlink.
 */
#ifndef AGENTD_WATCH_H
#define AGENTD_WATCH_H

#include <stddef.h>

struct event_base;
struct proto_err;
struct stat;
struct watch;

#define WATCH_DEPTH_MAX		64	/* levels a recursive watch goes down */

/* envd's EventType names, in its order; 0 is none. */
enum watch_type {
	WATCH_CREATE = 1,
	WATCH_WRITE,
	WATCH_REMOVE,
	WATCH_RENAME,
	WATCH_CHMOD,
};

/*
 * An event: name relative to the watched folder ("a/b.txt"; "." for the
 * folder itself), type as above.  Called on the loop for each; an error
 * (the queue overflowed, the folder went, max_dirs reached) comes
 * as name NULL and type 0 with why in cause; the watch then reports no
 * more events.
 */
typedef void (*watch_event_fn)(void *arg, const char *name,
	    enum watch_type type, const char *cause);

/*
 * Watch the folder dirfd (an fd of it: kept as the root; the caller's fd
 * is not taken), recursive or not, following at most max_dirs folders
 * (more: 429 resource_exhausted now, or the watch's error later).  A new
 * watch, or NULL with err.
 */
struct watch *watch_open(int dirfd, int recursive, size_t max_dirs,
	    struct proto_err *err);
/* On the loop: start reporting events to fn; 0 or -1. */
int	watch_start(struct watch *, struct event_base *, watch_event_fn fn,
	    void *arg);
/*
 * lstat an event's name under the watched folder, opened beneath it with
 * no symlink followed on the way (the path a client named cannot be swapped
 * for one elsewhere): 0, or -1 with errno.
 */
int	watch_stat(struct watch *, const char *name, struct stat *);
/* envd's name of a type: "EVENT_TYPE_CREATE" and so on. */
const char *watch_type_name(enum watch_type);
/*
 * Stop and free (on the loop, or on the worker before watch_start()).  From
 * within fn the watch only stops: it is freed once fn's caller returns.
 */
void	watch_free(struct watch *);

#endif /* AGENTD_WATCH_H */
