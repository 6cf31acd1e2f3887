/*
 * agentd.h -- the daemon's global state and its lifecycle.
 *
 * agentd runs one event loop (agentd_base) on its main thread: capture of
 * session output, SIGCHLD, spawning, stdin, HTTP and long-polls all happen
 * there.  The only other threads are files' fetch workers, which hand their
 * results back through a pipe (files.c).  Output reaches readers through
 * each session's lock-free ring, which any thread may read; but the session
 * table, the waiters and the stats belong to the loop, so a second loop
 * would first need a control queue to the capture side (DESIGN.md).
 */
#ifndef AGENTD_H
#define AGENTD_H

#include <stdint.h>

struct config;
struct event_base;
struct session;

extern struct event_base	*agentd_base;
extern int64_t			 agentd_start_ms;	/* monotonic, set first */

#include "stats.h"	/* the counters of GET /metrics, a leaf */
#include "stop.h"	/* the stopping state, a leaf */

/*
 * Build the loop (agentd_base), the session table (its events go to
 * observer) and the listeners from cfg, which must outlive them (agentd.c),
 * and hand each module the base and the configuration it needs.  Returns 0,
 * or -1 when a listener cannot be opened (logged).  main() and the HTTP
 * fuzzer both start this way; main adds signals and the companion.  Only
 * they include this header: the modules are handed what they need.
 */
int	agentd_start(struct config *cfg,
	    void (*observer)(struct session *, int events));

#endif /* AGENTD_H */
