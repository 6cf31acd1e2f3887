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
extern struct config		*agentd_cfg;
extern int64_t			 agentd_start_ms;	/* monotonic */

#include "stats.h"	/* the counters of GET /metrics, a leaf */

/*
 * Build the loop (agentd_base), the session table (its events go to
 * observer) and the listeners from cfg, which must outlive them (agentd.c).
 * Returns 0, or -1 when a listener cannot be opened (logged).  main() and
 * the HTTP fuzzer both start this way; main adds signals and the companion.
 */
int	agentd_start(struct config *cfg,
	    void (*observer)(struct session *, int events));

/*
 * Whether a graceful shutdown is under way: new work is refused (503
 * shutting_down) and /healthz says so.  The state is the loop's; whoever
 * runs the shutdown (main.c) marks its start with agentd_stop_begin().
 */
int	agentd_stopping(void);

/* Mark the shutdown begun: 0 the first time, -1 when it already was. */
int	agentd_stop_begin(void);

#endif /* AGENTD_H */
