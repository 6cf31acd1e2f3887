/*
 * sessionsave.h -- the session table across an upgrade (upgrade.h): each
 * session, running or exited, written as a [session] section of the
 * hand-over state (upgstate.h) by the old agentd, and listed again by its
 * successor with the same id, pid, fds (PTY master or pipes, cgroup
 * directory), ring (bytes, chunk ids, offsets), stdin count and queue,
 * exit status, usage and the time left on its timers.
 *
 * The fds a section names must stay open across the execve: save hands
 * them to the caller, who clears their FD_CLOEXEC just before it.  The
 * successor sets FD_CLOEXEC on each again.
 *
 * A key the successor does not know is logged "ignoring" and skipped; a
 * section without an id, a pid or a ring, or whose id is listed already,
 * is dropped whole (logged), its fds closed.  Event loop thread only.
 */
#ifndef AGENTD_SESSIONSAVE_H
#define AGENTD_SESSIONSAVE_H

#include <stddef.h>

struct upgstate;
struct upgstate_w;
struct session_load;

/*
 * Write every session; the fds to keep open go to keep (at most max,
 * *nkeep counts them).  Returns the sessions written, or -1 when keep is
 * too small (nothing to undo: the state is only text).
 */
int	 session_save_all(struct upgstate_w *, int *keep, size_t *nkeep,
	    size_t max);

/* Begin reading a [session] section. */
struct session_load *session_load_begin(void);
/* One item of it (r: for its blob). */
void	 session_load_item(struct session_load *, const struct upgstate *r,
	    const char *key, const char *value, size_t len);
/*
 * End the section: list the session (0), or drop it whole (-1, logged,
 * its fds closed).  Frees sl.
 */
int	 session_load_end(struct session_load *, const struct upgstate *r);

#endif /* AGENTD_SESSIONSAVE_H */
