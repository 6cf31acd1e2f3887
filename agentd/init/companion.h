/*
 * companion.h -- `agentd [options] -- CMD ARGS...`: CMD (envd, say) runs as a
 * supervised service beside the API.  It is restarted when it exits, after a
 * backoff that doubles from COMPANION_BACKOFF_MIN_MS to
 * COMPANION_BACKOFF_MAX_MS (reset once it has run COMPANION_STABLE_MS); its
 * stdout and stderr become lines of agentd's log.  Whatever it does, the API
 * goes on.  Event loop thread only.
 */
#ifndef AGENTD_COMPANION_H
#define AGENTD_COMPANION_H

#include <sys/types.h>

#define COMPANION_BACKOFF_MIN_MS	500	/* first restart delay */
#define COMPANION_BACKOFF_MAX_MS	30000	/* restart delay cap */
#define COMPANION_STABLE_MS		10000	/* a run this long resets the backoff */
#define COMPANION_LINE_MAX		1024	/* bytes of one logged line */

struct event_base;

/*
 * Start supervising argv (kept by reference: it must outlive agentd), on
 * the loop base.
 */
void	companion_start(struct event_base *, char **argv);
/* Called by the reaper; 0 when pid was the companion. */
int	companion_reaped(pid_t pid, int status);
/* Shutdown: SIGTERM to the companion's group, and no more restarts. */
void	companion_stop(void);
/* SIGKILL to the companion's group. */
void	companion_kill(void);
/* Whether the companion process is alive. */
int	companion_running(void);
/* Restarts so far, for the debug endpoints. */
unsigned companion_restarts(void);
/*
 * An upgrade (upgrade.h): the companion's pid (-1 when none runs) and its
 * output pipes (fds[0] stdout, fds[1] stderr; -1: closed), to keep open
 * across the execve; and, in the successor, supervise that pid and read
 * those fds instead of companion_start().
 */
pid_t	companion_handover(int fds[2]);
void	companion_adopt(struct event_base *, char **argv, pid_t pid, int out,
	    int err);
/* Free everything. */
void	companion_free(void);

#endif /* AGENTD_COMPANION_H */
