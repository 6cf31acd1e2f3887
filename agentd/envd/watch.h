/*
 * watch.h -- a folder watched with inotify, as envd's WatchDir and
 * CreateWatcher see it: optionally recursive, each event named relative to
 * the watched folder, with envd's (fsnotify's) types.
 *
 * A watch acts, for its whole life, as the user whose file system
 * credentials (fsuid, fsgid, groups) the thread calling watch_open() has:
 * a files worker acting as the call's user (or as agentd's own, root).
 * watch_open() reads the tree on that worker; afterwards the loop takes
 * that user's file system credentials (on its own thread, for the moment
 * of each step, then its own again) to follow folders made or moved in
 * later and to look up includeEntry's entries, so that a watch never
 * reports from a folder its user cannot read, whenever it was made.  A
 * folder's change of mode or owner is looked at again.
 *
 * The loop's work is bounded per turn, whatever the tree: one read of
 * inotify (WATCH_READ_BUF), then at most WATCH_TURN_STEPS folder entries
 * read or folders dropped; what is left waits for the next turn.  A folder
 * renamed within the tree keeps its watch and its subtree's (moved by
 * inotify's cookie, no walk); one moved in from outside is read a turn's
 * share at a time; one moved out is dropped a share at a time.  Memory is
 * bounded by the folders followed now (tables sized to them).
 *
 * The watched folder itself is held by no fd between steps (its parent
 * is), so that its removal is seen as envd sees it: REMOVE "." (or RENAME
 * "." when it is moved), then the watch ends without error.
 */
#ifndef AGENTD_WATCH_H
#define AGENTD_WATCH_H

#include <sys/stat.h>

#include <stddef.h>

struct event_base;
struct proto_err;
struct watch;

#define WATCH_DEPTH_MAX		64	/* levels a recursive watch goes down */
#define WATCH_TURN_STEPS	512	/* entries read or folders dropped a turn */

/* watch_open()'s flags. */
#define WATCH_RECURSIVE		0x1	/* and every folder under it */
#define WATCH_ENTRIES		0x2	/* look up the entry of CREATE, WRITE,
					   CHMOD (as the watch's user) */

/* envd's EventType names, in its order; 0 is none. */
enum watch_type {
	WATCH_CREATE = 1,
	WATCH_WRITE,
	WATCH_REMOVE,
	WATCH_RENAME,
	WATCH_CHMOD,
};

/* An event's entry, looked up as the watch's user. */
struct watch_entry {
	struct stat	st;		/* lstat, beneath the watched folder */
	int		readable;	/* the user may read it (its metadata) */
};

/*
 * An event: name relative to the watched folder ("a/b.txt"; "." for the
 * folder itself), type as above, entry its entry (WATCH_ENTRIES only;
 * NULL when there is none: another type, gone, or not the user's to see).
 * Called on the loop for each.  The end comes as name NULL and type 0:
 * cause NULL when the watched folder was removed or moved (as envd's, no
 * error), else why (the queue overflowed, max_dirs reached); the watch then
 * reports no more events.
 */
typedef void (*watch_event_fn)(void *arg, const char *name,
	    enum watch_type type, const struct watch_entry *entry,
	    const char *cause);

/*
 * Watch the folder dirfd (an fd of it, read as the calling thread's user;
 * the caller's fd is not taken) with flags, following at most max_dirs
 * folders (more: 429 resource_exhausted now, or the watch's error later).
 * A new watch, or NULL with err.  On a files worker.
 */
struct watch *watch_open(int dirfd, int flags, size_t max_dirs,
	    struct proto_err *err);
/* On the loop: start reporting events to fn; 0 or -1. */
int	watch_start(struct watch *, struct event_base *, watch_event_fn fn,
	    void *arg);
/* Folders followed now by every watch; *bytes: their tables and names. */
size_t	watch_dirs_total(size_t *bytes);
/* envd's name of a type: "EVENT_TYPE_CREATE" and so on. */
const char *watch_type_name(enum watch_type);
/*
 * Stop and free (on the loop, or on the worker before watch_start()).  From
 * within fn the watch only stops: it is freed once fn's caller returns.
 */
void	watch_free(struct watch *);

#endif /* AGENTD_WATCH_H */
