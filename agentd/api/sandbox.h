/*
 * sandbox.h -- the routes of the sandbox itself: POST /v1/sandbox/resumed
 * (the platform reports a restore) and POST /v1/sandbox/pause (it is about
 * to snapshot).  The work is restore.h's.  Event loop thread only.
 */
#ifndef AGENTD_SANDBOX_H
#define AGENTD_SANDBOX_H

struct http_req;

/* Route a request under /v1/sandbox/ (404 for an unknown path). */
void	sandbox_route(struct http_req *);

#endif /* AGENTD_SANDBOX_H */
