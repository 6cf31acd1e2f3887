/*
 * files.h -- the files endpoints of API.md: GET and PUT /v1/files,
 * POST /v1/files/stat and POST /v1/files/fetch.
 *
 * Every call runs on a worker thread of its own, so that no open, stat or
 * read of a slow file system (FUSE, NFS) holds the event loop: at most
 * --max-file-jobs GET, PUT and stat calls and FILES_FETCH_MAX fetches at
 * once (429 beyond).  With a user, the worker takes that user's
 * credentials for the file system (fsuid, fsgid, groups: per thread) before
 * anything else; paths are resolved by fileio_open()/fileio_parent(),
 * which follow only root's and that user's symlinks.
 *
 * GET sends a file of a disk or memory file system from the kernel
 * (sendfile through evbuffer file segments, from the loop); one of any
 * other file system the worker reads FILES_CHUNK at a time, the next chunk
 * only once the last went out; a pseudo-file (/proc, /sys, or size 0) it
 * reads whole, up to FILES_PSEUDO_MAX.  Memory does not grow with the
 * file either way.  PUT writes the request body (at most --max-body)
 * atomically.  A worker hands its job back through a pipe, whose read side
 * is an event of the loop (the chunks of a GET too, and the loop wakes
 * the worker with a condition variable when one is sent): the only
 * cross-thread paths here.  A client that goes away cancels its job.
 * Event loop thread only.
 */
#ifndef AGENTD_FILES_H
#define AGENTD_FILES_H

#include <sys/types.h>

struct config;
struct event_base;
struct evhttp_request;
struct http_req;
struct proto_err;

/*
 * Another module's files work: runs on a worker thread that acts as the
 * call's user (owner: the uid whose symlinks fileio follows besides
 * root's).  Returns 0, or -1 with err filled.  It must not touch the
 * loop's state, nor log.
 */
typedef int (*files_work_fn)(void *arg, uid_t owner, struct proto_err *err);
/*
 * Then, on the loop: req is NULL when the client went away meanwhile (the
 * answer is then nobody's); rc and err are work's.  done owns arg.
 */
typedef void (*files_done_fn)(struct evhttp_request *req, void *arg, int rc,
	    const struct proto_err *err);

#define FILES_FETCH_MAX		8		/* fetches running at once */
#define FILES_FETCH_STACK	(512 << 10)	/* bytes of a fetch worker's stack */
#define FILES_FETCH_STOP_MS	2000		/* a fetch's time to stop at shutdown */
#define FILES_PSEUDO_MAX	(16 << 20)	/* bytes read of a size-0 file (/proc) */
#define FILES_CHUNK		(256 << 10)	/* bytes a GET worker reads at once */

/* Set the loop and the configuration, at the start. */
void	files_init(struct event_base *, const struct config *);
/* Route a request under /v1/files; every path answers it. */
void	files_route(struct http_req *);
/*
 * Run work(arg) on a worker acting as user (a name or uid; NULL: agentd's
 * own), within --max-file-jobs, then done on the loop; req's client is
 * watched meanwhile.  0, or -1 with err (429 over the limit, 503 at
 * shutdown or without memory) and neither called.
 */
int	files_call(struct evhttp_request *req, const char *user,
	    files_work_fn work, files_done_fn done, void *arg,
	    struct proto_err *err);
/*
 * GET /v1/files's answer for envd's GET /files: send the file path to the
 * request acting as user (a name or uid; NULL: agentd's, for uid as
 * files_act() says, its hard links passing), with the same checks
 * (symlinks, hard links, agentd's own /proc when acting as a user),
 * errors in envd's shape {"code": STATUS, "message": "..."}.
 */
void	files_get_as(struct http_req *, const char *path, const char *user,
	    uid_t uid);
/*
 * On a files worker running as root for a call made for uid (envd's
 * mode), before path (and path2, or NULL) are resolved: *trust is the uid
 * whose symlinks fileio then follows besides root's (root's only: 0), and
 * *give 1.  When uid's own symlink is on the way of a path (uid could
 * point the call anywhere with it), the worker acts as uid from then on,
 * for the rest of its job, as files_call() with that user would: *trust
 * uid, *give 0.  0, or -1 with err.
 */
int	files_act(uid_t uid, const char *path, const char *path2, uid_t *trust,
	    int *give, struct proto_err *err);
/* Calls running on workers now: GET, PUT and stat; and fetches. */
void	files_running(size_t *calls, size_t *fetches);

#endif /* AGENTD_FILES_H */
