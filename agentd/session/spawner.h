/*
 * spawner.h -- pty_spawn() on a pool of threads, so that a spawn whose chdir
 * or execve blocks (a lease on the executable, a FUSE mount that does not
 * answer) blocks only itself, never the loop.
 *
 * The threads are made as jobs need them (none before the first, at most
 * the pool's size), live as long as agentd and run with every signal
 * blocked.
 * Each child is its spawning thread's: agentd's reaper (waitpid(-1,
 * __WNOTHREAD) on the main thread) never sees it, so its status waits, a
 * zombie, for session_collect() (waitid WNOWAIT), however late the spawn's
 * result reaches the loop.  A thread that ended would hand its children to
 * another thread of the process, maybe the main one: they never end.
 *
 * A job is answered once, on the loop: with its result, or at its deadline
 * with timed_out set.  A job timed out or cancelled is abandoned: if its
 * child still execs, the thread SIGKILLs its session and reaps it, and
 * closes its fds; nothing is left.  Everything here but the threads' own
 * work runs on the loop's thread.
 */
#ifndef AGENTD_SPAWNER_H
#define AGENTD_SPAWNER_H

#include <stddef.h>
#include <stdint.h>

#include "pty.h"

#define SPAWNER_THREADS_DEFAULT		4	/* spawns running at once */
#define SPAWNER_TIMEOUT_DEFAULT		30000	/* ms a spawn may take */

struct event_base;
struct spawner_job;

/* How a spawn ended. */
struct spawner_result {
	int		 error;		/* 0, or -errno from pty_spawn() */
	int		 timed_out;	/* no answer within the timeout */
	struct pty_proc	 proc;		/* error 0: the caller's from now on */
	const char	*cause;		/* error or timed_out: why */
};

/* Called on the loop, once per job that was not cancelled. */
typedef void (*spawner_done_fn)(const struct spawner_result *, void *arg);

/*
 * Results come back on base (once each); nthreads threads spawn at once at
 * most, made when a job finds every thread busy.
 */
void	spawner_init(struct event_base *, unsigned nthreads);

/*
 * Queue a spawn of spec, copied (argv, envp, cwd, user): the caller may
 * free its own at once.  spec's cgroup fd (if not -1) becomes the job's,
 * closed when the job ends.  done is called with the result, or after
 * timeout_ms (> 0) with timed_out set if the spawn has not ended by then
 * (waiting in the queue counts).  Never fails.
 */
struct spawner_job *spawner_start(const struct pty_spec *, int64_t timeout_ms,
	    spawner_done_fn done, void *arg);

/* Give up a job whose done was not called yet: it never will be. */
void	spawner_cancel(struct spawner_job *);

/*
 * Stop taking results (at exit, after the last session): the threads stay,
 * and one still stuck in a spawn writes its result into the pipe unread.
 */
void	spawner_free(void);

/* Jobs queued or running, as the loop sees them (abandoned ones not). */
size_t	spawner_in_flight(void);
/* Threads made so far (at most the pool's size). */
unsigned spawner_threads(void);
/* Abandoned jobs whose thread is still in pty_spawn(). */
size_t	spawner_abandoned(void);

#endif /* AGENTD_SPAWNER_H */
