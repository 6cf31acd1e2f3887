/*
 * api.h -- the routes of API.md: api_route() hands each request to the file
 * of its resource (sessions.h, files.h, events.h, ports_api.h, sandbox.h,
 * mcp.h, debug.h) and answers /healthz and /metrics itself.
 * Event loop thread only.
 */
#ifndef AGENTD_API_H
#define AGENTD_API_H

#include <stdint.h>

struct config;
struct http_req;

/* Set the configuration and agentd's start (monotonic ms), at the start. */
void	api_init(const struct config *, int64_t start_ms);
/* Route a request to its handler; every path answers it. */
void	api_route(struct http_req *);

#endif /* AGENTD_API_H */
