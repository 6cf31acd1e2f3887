/*
 * sandbox.h -- the routes of the sandbox itself: POST /v1/sandbox/resumed
 * (the platform reports a restore) and POST /v1/sandbox/pause (it is about
 * to snapshot).  The work is restore.h's and pause.h's.  Event loop thread
 * only.
 */
#ifndef AGENTD_SANDBOX_H
#define AGENTD_SANDBOX_H

struct http_req;

/* Route a request under /v1/sandbox/ (404 for an unknown path). */
void	sandbox_route(struct http_req *);
/* The shutdown: answer the pauses still waiting for their sync (503). */
void	sandbox_stop(void);

#endif /* AGENTD_SANDBOX_H */
