/*
 * agentd.h -- the daemon's global state and its lifecycle.
 *
 * agentd runs one event loop on one thread (agentd_base): capture of session
 * output, SIGCHLD, spawning, stdin, HTTP and long-polls all happen there.
 * Output still crosses into readers only through each session's lock-free
 * ring, so a second loop can be added without touching the data path.
 */
#ifndef AGENTD_H
#define AGENTD_H

#include <stdint.h>

struct config;
struct event_base;

extern struct event_base	*agentd_base;
extern struct config		*agentd_cfg;
extern int64_t			 agentd_start_ms;	/* monotonic */

/* Counters behind GET /metrics. */
struct agentd_stats {
	uint64_t	 sessions_started;
	uint64_t	 sessions_spawn_failed;
	uint64_t	 output_bytes;
	uint64_t	 output_dropped_bytes;
	uint64_t	 http_requests;
	uint64_t	 connections_open;
	uint64_t	 connections_total;
	uint64_t	 zombies_reaped;
};
extern struct agentd_stats	 agentd_stats;

/* Whether a graceful shutdown is under way. */
int	agentd_stopping(void);

/* Start the graceful shutdown (idempotent). */
void	agentd_shutdown(const char *why);

/*
 * The fatal path: kill every session, sync and, as PID 1, power off (never
 * exit); otherwise exit 1.  Never returns.
 */
void	agentd_panic(void) __attribute__((noreturn));

#endif /* AGENTD_H */
