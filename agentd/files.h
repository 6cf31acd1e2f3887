/*
 * files.h -- the files endpoints of API.md: GET and PUT /v1/files,
 * POST /v1/files/stat and POST /v1/files/fetch.
 *
 * GET streams the file from the kernel (sendfile through evbuffer file
 * segments), so its memory does not grow with the file.  PUT writes the
 * request body (at most --max-body) atomically on the event loop.  Stat
 * runs lstat on the event loop.  A fetch runs on a worker thread of its
 * own (at most FILES_FETCH_MAX at once, 429 too_many_fetches beyond); the
 * worker hands its job back through a pipe, whose read side is an event
 * of agentd_base: the only cross-thread path here.  A client that goes
 * away cancels its fetch.
 * Event loop thread only.
 */
#ifndef AGENTD_FILES_H
#define AGENTD_FILES_H

struct http_req;

#define FILES_FETCH_MAX		8		/* fetches running at once */
#define FILES_FETCH_STACK	(512 << 10)	/* bytes of a fetch worker's stack */
#define FILES_FETCH_STOP_MS	2000		/* a fetch's time to stop at shutdown */
#define FILES_PSEUDO_MAX	(16 << 20)	/* bytes read of a size-0 file (/proc) */

/* Route a request under /v1/files; every path answers it. */
void	files_route(struct http_req *);

#endif /* AGENTD_FILES_H */
