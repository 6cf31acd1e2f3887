/*
 * freeze.h -- envd's pause routes on the --envd-listen listeners: POST
 * /freeze, /unfreeze, /fsfreeze, /fsthaw (envd.yaml's FreezeResult).
 *
 * /freeze?mode=legacy|hierarchy&maxCgroups=N&maxWaitMs=M writes
 * cgroup.freeze 1: legacy on the sessions' parent (R/sessions of
 * cgroup.h, every session under it), hierarchy on that and on each child of
 * agentd's ancestor chain (and of the allowlist's: systemd's init.scope,
 * journald, rpcbind) that is on neither, at most maxCgroups (default 512,
 * clamped to --envd-freeze-cgroups) visited.  agentd's own cgroup and its
 * ancestors are never written: its API answers while the rest is frozen.
 * Before the first sweep of a frozen window the whole tree (at most
 * --envd-freeze-cgroups) is read for cgroups the guest froze itself: they
 * are left alone, and stay frozen after the thaw (preFrozen).  With
 * maxWaitMs > 0 the answer waits (a timer reading cgroup.events every
 * FREEZE_POLL_MS, never blocking the loop) until each written cgroup reads
 * "frozen 1" or the budget ends, then 200 with the counts; without it 204
 * at once.  Without containment "cgroup" (no cgroup v2 of agentd's) nothing
 * is written and the counts are envd's no-cgroup-manager ones: mode
 * legacy, the one static cgroup requested and unobservable.
 *
 * /unfreeze (and every /init, freeze_thaw_deferred()) thaws the sessions'
 * parent, then, when a freeze of ours is in effect, every cgroup of the
 * tree off agentd's chain whose cgroup.freeze reads 1, but the guest's own.
 *
 * /fsfreeze, /fsthaw: FIFREEZE, FITHAW on "/" (EBUSY, EINVAL: done
 * already); FIFREEZE only as PID 1 (elsewhere "/" is a machine's).
 *
 * One lock, held by a /freeze that waits: /freeze, /unfreeze, /fsfreeze
 * and /fsthaw meanwhile answer 503; an /init's thaw runs when the wait
 * ends.  Event loop thread only.
 */
#ifndef AGENTD_FREEZE_H
#define AGENTD_FREEZE_H

#define FREEZE_MAX_CGROUPS_DEFAULT 512	/* a hierarchy sweep's visits */
#define FREEZE_WALK_DEFAULT	8192	/* cgroups a scan or thaw visits */
#define FREEZE_POLL_MS		2	/* cgroup.events read again */
#define FREEZE_WAIT_MAX_MS	86400000 /* maxWaitMs's ceiling */

struct config;
struct event_base;
struct proto_buf;

/* Register the routes (cfg: --envd-freeze-cgroups). */
void	freeze_register(struct event_base *, const struct config *);
/* /init's thaw (envd's deferred unfreeze): now, or when a wait ends. */
void	freeze_thaw_deferred(void);
/*
 * Append to a /metrics answer (with --envd-listen): agentd_envd_frozen (a
 * freeze of ours stands), agentd_envd_freeze_cgroups_max, and the totals
 * of freezes, thaws, walks cut by their bound and 503s.
 */
void	freeze_metrics(struct proto_buf *);
/* Drop a waiting freeze and the guest's record (at the end). */
void	freeze_free(void);

#endif /* AGENTD_FREEZE_H */
