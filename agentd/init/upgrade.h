/*
 * upgrade.h -- live upgrade: agentd replaces its own binary in the same
 * pid (PID 1 or not) under running sessions and clients.
 *
 * POST /v1/sandbox/upgrade {"path": "/abs/agentd", "sha256": "<hex>"}.
 * Before anything changes the new binary is checked: an absolute path to
 * a regular, executable file that nobody but root (or agentd's own user)
 * can write, whose SHA-256 matches when given, and that, run once with
 * --upgrade-check, exits 0 within UPGRADE_CHECK_MS and prints the state
 * format it reads (the first line of upgstate.h's text, then "version
 * V"; the loop goes on meanwhile).  Any failure is 422 upgrade_rejected
 * and changes nothing.  Then 202
 * {"from_version", "to_version"} and the hand-over: accepting pauses (new
 * connects wait in the backlog), session long-polls are answered with what
 * they have, the answers are let out for UPGRADE_DRAIN_MS at most, and the
 * state (upgstate.h: the token, generation, counters, the event feed, the
 * listeners, the companion, every session by sessionsave.h) goes to a
 * memfd.  The fds that must live get FD_CLOEXEC cleared (everything else
 * keeps it: connections close with the execve, streams end, clients
 * resume by cursor or Last-Event-ID), and the new binary is execve'd with
 * agentd's own argv and UPGRADE_ENV naming the state's fd.  If execve
 * fails, the fds get FD_CLOEXEC back, accepting goes on, and the failure
 * is counted and logged: the old agentd carries on.  The old binary stays
 * open until the new agentd has taken the state over (upgguard.h): if it
 * cannot (it exits, crashes, hangs), the old binary runs again with the
 * same state, counts a failure and a rollback, and posts
 * sandbox.upgrade_failed {from_version, to_version, reason}.
 *
 * The successor reads the state before it listens (upgrade_resume_early:
 * the token, the listeners) and after (upgrade_resume: the rest), posts
 * sandbox.upgraded {from_version, to_version}, and goes on with what it
 * could restore (envd's /init state too: envstate.h): a state refused
 * whole, or a section it cannot use, is logged and dropped, never fatal.
 * A session leader that exited during the hand-over is reaped by it and
 * reported with its exit code.
 *
 * Event loop thread only.
 */
#ifndef AGENTD_UPGRADE_H
#define AGENTD_UPGRADE_H

#include <sys/types.h>

#include <stdint.h>

#define UPGRADE_ENV		"AGENTD_UPGRADE_STATE"	/* the state's fd */
#define UPGRADE_CHECK_FLAG	"--upgrade-check"
#define UPGRADE_CHECK_MS	10000	/* the check's run at most */
#define UPGRADE_CHECK_OUT_MAX	4096	/* bytes of its output read */
#define UPGRADE_DRAIN_MS	200	/* answers' time to go out first */
#define UPGRADE_KEEP_MAX	65536	/* fds kept across the execve */

struct config;
struct event_base;
struct http_req;
struct proto_buf;

/*
 * main(), first thing: with argv[1] UPGRADE_CHECK_FLAG print the state
 * format this binary reads and return 1 (main exits 0); else 0.
 */
int	 upgrade_check_mode(int argc, char **argv);
/*
 * Keep main's argv for the execve (it must outlive agentd), main's start
 * time (the uptime's; saved at a hand-over, set from the state when
 * resuming), and the hook that answers every long-poll at the hand-over
 * (sessions_flush_waiters).
 */
void	 upgrade_init(char **argv, int64_t *start_ms, void (*flush)(void));
/*
 * Before agentd_start(): when UPGRADE_ENV names a state, read it, hand
 * its listeners to http_inherit() and its token to cfg.
 */
void	 upgrade_resume_early(struct config *cfg);
/*
 * After agentd_start() (base: its loop; cfg is kept for the route and
 * the hand-over) and before the first reap: the event feed, the
 * sessions, the generation and counters, the companion.  Returns 1 when
 * the companion was handed over (do not start another), else 0.
 */
int	 upgrade_resume(struct event_base *, struct config *cfg);

/*
 * POST /v1/sandbox/upgrade.  The check runs as the main thread's child
 * while the loop goes on; the reaper hands its status to upgrade_reaped()
 * (0 when pid was the check's).  The shutdown answers a check under way
 * 503 (upgrade_stop()).
 */
void	 upgrade_route(struct http_req *);
int	 upgrade_reaped(pid_t pid, int status);
void	 upgrade_stop(void);
/* Upgrades since the boot (0 at first). */
uint64_t upgrade_count(void);
/* Append agentd_upgrades_total and agentd_upgrade_failures_total. */
void	 upgrade_metrics(struct proto_buf *);

#endif /* AGENTD_UPGRADE_H */
