/*
 * spawner.c -- pty_spawn() on a pool of threads; see spawner.h.
 *
 * Cross-thread paths: the queue and each job's state are under spawner_lock
 * (the loop queues and abandons, a thread takes and finishes); a finished
 * job's pointer goes back to the loop through spawner_pipe.  Whichever side
 * changes a job's state last under the lock owns what the job holds: the
 * thread an abandoned job's child, the loop a finished job's.  An abandoned
 * job still running is on spawner_stuck (the lock's) until its thread is
 * back: the loop SIGKILLs its child through the pidfd clone3 handed out
 * (pty.h), which no one closes while the job is on that list.
 *
 * Threads are made when first needed, not at the start: a job queued when
 * every thread is busy (more jobs queued than threads waiting) makes one
 * more, up to the pool's size.  So an agentd that never spawns has no
 * thread, and one that spawns one at a time has one.
 */
#include <sys/queue.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "pty.h"
#include "proto.h"
#include "spawner.h"
#include "util.h"

#define SPAWNER_STACK	(256 * 1024)	/* bytes: pty_spawn() keeps a 32 KiB
					   child stack and a PATH_MAX on it */
#define SPAWNER_KILL_RETRY_MS	50	/* a child not made yet: look again */
#define SPAWNER_KILL_TRIES	100	/* ... this many times at most */

/* pidfd_send_signal(2) is Linux 5.1. */
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal	424
#endif

/* Where a job is; changed only under spawner_lock. */
enum spawner_state {
	SPAWNER_QUEUED,		/* on the queue, no thread has it */
	SPAWNER_RUNNING,	/* a thread is in pty_spawn() */
	SPAWNER_DONE,		/* its pointer is in the pipe, or read */
	SPAWNER_ABANDONED,	/* timed out or cancelled while running */
	SPAWNER_UNDO,		/* cancelled once done: queued to be undone */
};

struct spawner_job {
	TAILQ_ENTRY(spawner_job) entry;	/* on the queue (the lock's) */
	LIST_ENTRY(spawner_job)	 live;	/* on spawner_jobs (the loop's) */
	LIST_ENTRY(spawner_job)	 stuck;	/* on spawner_stuck (the lock's) */
	enum spawner_state	 state;
	struct pty_watch	 watch;	/* the child's pid and pidfd */
	int			 killed;	/* its child got SIGKILL (lock) */
	int			 tries;		/* looks for its child (lock) */

	/* The spec and what it points to, the job's own. */
	struct pty_spec		 spec;
	struct pty_user		 user;
	char			**argv;
	char			**envp;
	char			*cwd;

	/* The result, written by the thread before SPAWNER_DONE. */
	int			 error;
	struct pty_proc		 proc;
	char			 cause[PTY_CAUSE_MAX];

	/* The loop's. */
	int64_t			 timeout_ms;
	struct event		*timer;
	spawner_done_fn		 done;
	void			*arg;
};

static pthread_mutex_t	spawner_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t	spawner_cond = PTHREAD_COND_INITIALIZER;
static TAILQ_HEAD(, spawner_job) spawner_queue =
    TAILQ_HEAD_INITIALIZER(spawner_queue);
static LIST_HEAD(, spawner_job) spawner_jobs =
    LIST_HEAD_INITIALIZER(spawner_jobs);
static LIST_HEAD(, spawner_job) spawner_stuck =
    LIST_HEAD_INITIALIZER(spawner_stuck);
static struct event	*spawner_kill_ev;	/* looks for stuck children */
static size_t		 spawner_njobs;		/* on spawner_jobs */
static atomic_size_t	 spawner_nabandoned;	/* abandoned, still running */
static int		 spawner_pipe[2] = { -1, -1 };	/* thread -> loop */
static struct event	*spawner_pipe_ev;
static struct event_base *spawner_base;
static unsigned		 spawner_max;		/* threads at most */
static unsigned		 spawner_nthreads;	/* made (the lock's) */
static unsigned		 spawner_idle;		/* waiting (the lock's) */
static size_t		 spawner_nqueued;	/* on the queue (the lock's) */

static int	 spawner_queue_locked(struct spawner_job *);
static void	 spawner_thread_new(void);
static void	*spawner_main(void *);
static void	 spawner_undo(struct spawner_job *);
static void	 spawner_job_free(struct spawner_job *);
static char	**spawner_strv_dup(char *const *);
static void	 spawner_read_cb(evutil_socket_t, short, void *);
static void	 spawner_timeout_cb(evutil_socket_t, short, void *);
static void	 spawner_forget(struct spawner_job *);
static int	 spawner_kill_locked(struct spawner_job *);
static void	 spawner_kill_cb(evutil_socket_t, short, void *);
static void	 spawner_unwatch_locked(struct spawner_job *);

/* The pipe from the threads and its event; no thread before a job. */
void
spawner_init(struct event_base *base, unsigned nthreads)
{
	spawner_base = base;
	spawner_max = nthreads > 0 ? nthreads : 1;
	if (pipe2(spawner_pipe, O_CLOEXEC) == -1)
		fatal("%s: pipe2: %s", __func__, strerror(errno));
	if (fd_nonblock_cloexec(spawner_pipe[0]) != 0)
		fatal("%s: O_NONBLOCK: %s", __func__, strerror(errno));
	spawner_pipe_ev = event_new(base, spawner_pipe[0], EV_READ | EV_PERSIST,
	    spawner_read_cb, NULL);
	if (spawner_pipe_ev == NULL || event_add(spawner_pipe_ev, NULL) != 0)
		fatal("%s: out of memory", __func__);
	if ((spawner_kill_ev = evtimer_new(base, spawner_kill_cb, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
}

/*
 * Queue a job for the threads (the lock held).  Returns 1 when a thread
 * must be made for it: more jobs wait than threads do, and the pool is not
 * full (the thread is counted already).
 */
static int
spawner_queue_locked(struct spawner_job *j)
{
	TAILQ_INSERT_TAIL(&spawner_queue, j, entry);
	spawner_nqueued++;
	pthread_cond_signal(&spawner_cond);
	if (spawner_nqueued <= spawner_idle || spawner_nthreads >= spawner_max)
		return (0);
	spawner_nthreads++;
	return (1);
}

/*
 * Make a thread, every signal blocked in it.  A failure is fatal only when
 * no thread exists (the job would never run); else the job waits for a
 * busy one.
 */
static void
spawner_thread_new(void)
{
	pthread_attr_t	attr;
	pthread_t	t;
	sigset_t	all, old;
	unsigned	n;
	int		error;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, SPAWNER_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	error = pthread_create(&t, &attr, spawner_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (error == 0) {
		pthread_detach(t);
		return;
	}
	pthread_mutex_lock(&spawner_lock);
	n = --spawner_nthreads;
	pthread_mutex_unlock(&spawner_lock);
	if (n == 0)
		fatal("%s: pthread_create: %s", __func__, strerror(error));
	log_warn("%s: pthread_create: %s; %u threads spawn", __func__,
	    strerror(error), n);
}

/* Stop taking results (at exit). */
void
spawner_free(void)
{
	if (spawner_pipe_ev != NULL) {
		event_free(spawner_pipe_ev);
		spawner_pipe_ev = NULL;
	}
	if (spawner_kill_ev != NULL) {
		event_free(spawner_kill_ev);
		spawner_kill_ev = NULL;
	}
}

/* A thread: take a job, spawn, hand the result back (or undo it). */
static void *
spawner_main(void *arg)
{
	struct spawner_job	*j;
	ssize_t			 n;
	int			 abandoned;

	for (;;) {
		pthread_mutex_lock(&spawner_lock);
		while ((j = TAILQ_FIRST(&spawner_queue)) == NULL) {
			spawner_idle++;
			pthread_cond_wait(&spawner_cond, &spawner_lock);
			spawner_idle--;
		}
		TAILQ_REMOVE(&spawner_queue, j, entry);
		spawner_nqueued--;
		if (j->state == SPAWNER_UNDO) {
			pthread_mutex_unlock(&spawner_lock);
			spawner_undo(j);
			spawner_job_free(j);
			atomic_fetch_sub(&spawner_nabandoned, 1);
			continue;
		}
		j->state = SPAWNER_RUNNING;
		pthread_mutex_unlock(&spawner_lock);

		j->error = pty_spawn(&j->spec, &j->proc, j->cause,
		    sizeof j->cause);

		pthread_mutex_lock(&spawner_lock);
		abandoned = j->state == SPAWNER_ABANDONED;
		if (abandoned)
			LIST_REMOVE(j, stuck);
		else
			j->state = SPAWNER_DONE;
		spawner_unwatch_locked(j);
		pthread_mutex_unlock(&spawner_lock);
		if (abandoned) {
			spawner_undo(j);
			spawner_job_free(j);
			atomic_fetch_sub(&spawner_nabandoned, 1);
			continue;
		}
		do
			n = write(spawner_pipe[1], &j, sizeof j);
		while (n == -1 && errno == EINTR);
		if (n != (ssize_t)sizeof j)
			fatal("%s: write: %s", __func__, strerror(errno));
	}
	return (NULL);
}

/* Close the pidfd of the job's child, if clone3 made one (pty.h). */
static void
spawner_unwatch_locked(struct spawner_job *j)
{
	if (atomic_load(&j->watch.pid) > 0)
		close(atomic_load(&j->watch.pidfd));
	atomic_store(&j->watch.pid, 0);
}

/*
 * An abandoned job's child exec'd after all: SIGKILL its session (its group,
 * and any other group it made already), reap it, close its fds.  The child
 * is this thread's: only this thread can reap it.
 */
static void
spawner_undo(struct spawner_job *j)
{
	pid_t	r;

	if (j->error != 0)
		return;		/* pty_spawn() left nothing */
	pty_kill_sessions(&j->proc.pid, 1, SIGKILL);
	do
		r = waitpid(j->proc.pid, NULL, __WALL);
	while (r == -1 && errno == EINTR);
	pty_close(&j->proc);
}

/* Free a job that no list holds. */
static void
spawner_job_free(struct spawner_job *j)
{
	proto_strv_free(j->argv);
	proto_strv_free(j->envp);
	free(j->cwd);
	if (j->spec.cgroup >= 0)
		close(j->spec.cgroup);
	free(j);
}

/* A NULL-terminated copy of v. */
static char **
spawner_strv_dup(char *const *v)
{
	char	**d;
	size_t	  n, i;

	for (n = 0; v[n] != NULL; n++)
		;
	d = xcalloc(n + 1, sizeof *d);
	for (i = 0; i < n; i++)
		d[i] = xstrdup(v[i]);
	return (d);
}

/* Queue a spawn; see spawner.h. */
struct spawner_job *
spawner_start(const struct pty_spec *spec, int64_t timeout_ms,
    spawner_done_fn done, void *arg)
{
	struct spawner_job	*j;
	struct timeval		 tv;
	int			 grow;

	j = xcalloc(1, sizeof *j);
	j->spec = *spec;
	j->argv = spawner_strv_dup(spec->argv);
	j->envp = spawner_strv_dup(spec->envp);
	j->cwd = spec->cwd != NULL ? xstrdup(spec->cwd) : NULL;
	j->spec.argv = j->argv;
	j->spec.envp = j->envp;
	j->spec.cwd = j->cwd;
	if (spec->user != NULL) {
		j->user = *spec->user;
		j->spec.user = &j->user;
	}
	j->spec.watch = &j->watch;	/* zeroed: pid 0 */
	j->proc.pid = -1;
	j->proc.master = j->proc.in = j->proc.out = j->proc.err = -1;
	j->timeout_ms = timeout_ms;
	j->done = done;
	j->arg = arg;
	if ((j->timer = evtimer_new(spawner_base, spawner_timeout_cb,
	    j)) == NULL)
		fatal("%s: out of memory", __func__);
	evtimer_add(j->timer, timeval_ms(&tv, timeout_ms));
	LIST_INSERT_HEAD(&spawner_jobs, j, live);
	spawner_njobs++;

	pthread_mutex_lock(&spawner_lock);
	j->state = SPAWNER_QUEUED;
	grow = spawner_queue_locked(j);
	pthread_mutex_unlock(&spawner_lock);
	if (grow)
		spawner_thread_new();
	return (j);
}

/*
 * Take a job from the loop's side: off the queue if no thread has it
 * (then the loop frees it), else abandoned to its thread, its child
 * SIGKILLed if it has one yet (else soon, by spawner_kill_cb()): a child
 * stuck before exec (a chdir into a FUSE mount that does not answer) would
 * keep the thread for good.  Returns 1 when the job finished already (its
 * pointer is in the pipe): nothing changed.
 */
static int
spawner_abandon(struct spawner_job *j)
{
	struct timeval		tv;
	enum spawner_state	st;
	int			killed = 1;

	pthread_mutex_lock(&spawner_lock);
	st = j->state;
	if (st != SPAWNER_DONE)
		spawner_forget(j);	/* before the thread may free it */
	if (st == SPAWNER_QUEUED) {
		TAILQ_REMOVE(&spawner_queue, j, entry);
		spawner_nqueued--;
	}
	else if (st == SPAWNER_RUNNING) {
		j->state = SPAWNER_ABANDONED;
		atomic_fetch_add(&spawner_nabandoned, 1);
		LIST_INSERT_HEAD(&spawner_stuck, j, stuck);
		killed = spawner_kill_locked(j);
	}
	pthread_mutex_unlock(&spawner_lock);
	if (!killed && !evtimer_pending(spawner_kill_ev, NULL))
		evtimer_add(spawner_kill_ev, timeval_ms(&tv,
		    SPAWNER_KILL_RETRY_MS));
	if (st == SPAWNER_DONE)
		return (1);
	if (st == SPAWNER_QUEUED)
		spawner_job_free(j);
	return (0);
}

/*
 * SIGKILL an abandoned job's child, through the pidfd that stays open
 * while the job is on spawner_stuck.  1 once sent, 0 while the thread has
 * not made the child yet (or clone3 gives no pidfd here).
 */
static int
spawner_kill_locked(struct spawner_job *j)
{
	if (j->killed)
		return (1);
	if (atomic_load(&j->watch.pid) <= 0)
		return (0);
	if (syscall(SYS_pidfd_send_signal, atomic_load(&j->watch.pidfd),
	    SIGKILL, NULL, 0U) == -1 && errno != ESRCH)
		log_warn("%s: pid %d: %s", __func__,
		    atomic_load(&j->watch.pid), strerror(errno));
	else
		log_info("%s: pid %d: SIGKILL, its spawn given up", __func__,
		    atomic_load(&j->watch.pid));
	j->killed = 1;
	return (1);
}

/* Look again for the children of abandoned jobs that had none yet. */
static void
spawner_kill_cb(evutil_socket_t fd, short events, void *arg)
{
	struct spawner_job	*j;
	struct timeval		 tv;
	int			 again = 0;

	pthread_mutex_lock(&spawner_lock);
	LIST_FOREACH(j, &spawner_stuck, stuck) {
		if (spawner_kill_locked(j) || j->tries >= SPAWNER_KILL_TRIES)
			continue;
		if (++j->tries < SPAWNER_KILL_TRIES)
			again = 1;
		else
			log_warn("%s: a spawn given up has no child to kill "
			    "(no clone3 here?): its thread waits for it",
			    __func__);
	}
	pthread_mutex_unlock(&spawner_lock);
	if (again)
		evtimer_add(spawner_kill_ev, timeval_ms(&tv,
		    SPAWNER_KILL_RETRY_MS));
}

/* Drop the loop's hold of a job: its timer, its place on the list. */
static void
spawner_forget(struct spawner_job *j)
{
	event_free(j->timer);
	j->timer = NULL;
	LIST_REMOVE(j, live);
	spawner_njobs--;
}

/* Give up a job; see spawner.h. */
void
spawner_cancel(struct spawner_job *j)
{
	if (spawner_abandon(j) == 0)
		return;
	/* Finished, unread: undo it here, the pipe's copy is skipped. */
	spawner_forget(j);
	j->done = NULL;		/* spawner_read_cb() has a thread undo it */
	if (j->error == 0)
		pty_kill_sessions(&j->proc.pid, 1, SIGKILL);
}

/* A job's deadline: answer it timed out, and abandon it. */
static void
spawner_timeout_cb(evutil_socket_t fd, short events, void *arg)
{
	struct spawner_job	*j = arg;
	struct spawner_result	 r;
	spawner_done_fn		 done = j->done;
	void			*darg = j->arg;
	char			 cause[PTY_CAUSE_MAX];

	snprintf(cause, sizeof cause, "exec '%s': not done within %lld ms "
	    "(a cwd or an executable that does not answer?)", j->argv[0],
	    (long long)j->timeout_ms);
	if (spawner_abandon(j) != 0)
		return;		/* finished meanwhile: the pipe brings it */
	log_warn("%s: %s", __func__, cause);
	memset(&r, 0, sizeof r);
	r.error = -ETIMEDOUT;
	r.timed_out = 1;
	r.proc.pid = -1;
	r.proc.master = r.proc.in = r.proc.out = r.proc.err = -1;
	r.cause = cause;
	done(&r, darg);
}

/* Results came back: hand each to its caller. */
static void
spawner_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct spawner_job	*j;
	struct spawner_result	 r;
	ssize_t			 n;
	int			 grow;

	for (;;) {
		n = read(spawner_pipe[0], &j, sizeof j);
		if (n == -1 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof j)
			return;		/* EAGAIN: all read */
		if (j->done == NULL) {
			/*
			 * Cancelled after it finished (spawner_cancel()).  A
			 * child SIGKILLed while it faults in its text from a
			 * FUSE mount that does not answer dies only when the
			 * mount does: a thread waits for it, never the loop.
			 */
			if (j->error != 0) {
				spawner_job_free(j);
				continue;
			}
			atomic_fetch_add(&spawner_nabandoned, 1);
			pthread_mutex_lock(&spawner_lock);
			j->state = SPAWNER_UNDO;
			grow = spawner_queue_locked(j);
			pthread_mutex_unlock(&spawner_lock);
			if (grow)
				spawner_thread_new();
			continue;
		}
		spawner_forget(j);
		memset(&r, 0, sizeof r);
		r.error = j->error;
		r.proc = j->proc;
		r.cause = j->cause;
		j->done(&r, j->arg);
		spawner_job_free(j);
	}
}

/* Jobs queued or running. */
size_t
spawner_in_flight(void)
{
	return (spawner_njobs);
}

/* Threads made. */
unsigned
spawner_threads(void)
{
	unsigned	n;

	pthread_mutex_lock(&spawner_lock);
	n = spawner_nthreads;
	pthread_mutex_unlock(&spawner_lock);
	return (n);
}

/* Abandoned jobs still in pty_spawn(). */
size_t
spawner_abandoned(void)
{
	return (atomic_load(&spawner_nabandoned));
}
