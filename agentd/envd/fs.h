/*
 * fs.h -- envd's filesystem.Filesystem (filesystem.proto) on agentd's
 * files code: Stat, MakeDir, Move, ListDir, Remove, WatchDir, and
 * CreateWatcher, GetWatcherEvents, RemoveWatcher.
 *
 * Paths are taken as envd takes them (fsentry_resolve(): relative to the
 * user's home, "" the default workdir) and then opened as agentd's own
 * /v1/files opens them, on a files worker (files_call()): as envd's, as
 * root (files_act(): only root's symlinks followed, and past the user's
 * own acting as the user; folders MakeDir and Move make given to the
 * user), or with --envd-confine-files acting as the call's user, through
 * fileio_open()/fileio_parent(), which follow only root's and that user's
 * symlinks (any other: permission_denied); a file with several hard links
 * is moved only by its owner.  Acting as the user, agentd's own /proc is
 * refused as GET /v1/files refuses it.  agentd's errors
 * become Connect codes: 404 not_found, 403 permission_denied, 400
 * invalid_argument, 429 and 507 resource_exhausted, 503 unavailable.
 *
 * Watches run on the loop (watch.h), acting as the user the worker that
 * opened them acted as.  A WatchDir stream sends `start` first, then each
 * event, a keepalive each Keepalive-Ping-Interval seconds, and ends
 * deadline_exceeded at Connect-Timeout-Ms.  At most --envd-watchers
 * watches live at once, CreateWatcher watchers and WatchDir streams
 * together (each holds an inotify instance; one being opened counts), a
 * watcher keeping at most --envd-watch-events events until
 * GetWatcherEvents takes them (more: the watcher fails with
 * resource_exhausted, as a stream whose client reads too slowly does); a
 * watch follows at most --envd-watch-dirs folders.  When the watched
 * folder is removed or moved, the watch reports REMOVE (RENAME) "." and
 * nothing more, as envd's: a stream stays open until its client or
 * deadline ends it.  Event loop thread only.
 */
#ifndef AGENTD_FS_H
#define AGENTD_FS_H

#include <sys/types.h>

struct config;
struct event_base;
struct proto_buf;
struct pty_user;

/*
 * Who an envd file call acts for.  In envd's mode (--envd-confine-files
 * 0, the default) its files worker runs as root, as envd's calls do: what
 * it makes (folders on the way, files) is given to uid:gid.  Confined, it
 * runs as the user (files_call()'s user is spec).
 */
struct fs_who {
	uid_t	uid;
	gid_t	gid;
	int	confine;
	char	spec[32];	/* the uid, for files_call() */
};

#define FS_LIST_MAX		100000	/* entries one ListDir answers */
#define FS_LIST_DEPTH_MAX	64	/* levels ListDir goes down (clamped) */
#define FS_REMOVE_DEPTH_MAX	256	/* levels Remove goes down */

/* Register the methods with the Connect core; cfg's limits. */
void	fs_register(struct event_base *, const struct config *cfg);
/* The fs_who of a call's user; the user files_call() acts as (NULL: root). */
const char *fs_who(const struct pty_user *, struct fs_who *);
/* Free the watchers, a stream's ended unavailable (at the end). */
void	fs_free(void);
/* Append the watches' figures to a /metrics answer. */
void	fs_metrics(struct proto_buf *);

#endif /* AGENTD_FS_H */
