/*
 * stats.h -- the counters behind GET /metrics.  A leaf: any module may count
 * here without knowing the daemon around it.  Only the loop's thread writes
 * or reads them.
 */
#ifndef AGENTD_STATS_H
#define AGENTD_STATS_H

#include <stdint.h>

struct agentd_stats {
	uint64_t	 sessions_started;
	uint64_t	 sessions_spawn_failed;
	uint64_t	 sessions_spawn_timeouts;	/* 504 spawn_timeout */
	uint64_t	 output_bytes;		/* captured into the rings */
	uint64_t	 output_dropped_bytes;	/* overwritten before read */
	uint64_t	 output_cuts;		/* chunks cut where reads joined
						   UTF-8 and bytes that are not */
	uint64_t	 output_held;		/* characters' first bytes held
						   for the rest (--utf8-hold) */
	uint64_t	 output_hold_expired;	/* ... published without it */
	uint64_t	 http_requests;
	uint64_t	 connections_open;
	uint64_t	 connections_total;
	uint64_t	 zombies_reaped;
	uint64_t	 sessions_oom_killed;	/* sessions whose cgroup OOM-killed */
	uint64_t	 cgroup_kills;		/* cgroup.kill of a session's cgroup */
};
extern struct agentd_stats	 agentd_stats;

#endif /* AGENTD_STATS_H */
