/*
 * pause.c -- sync() on a thread of its own for POST /v1/sandbox/pause
 * (pause.h).
 *
 * The thread is started per sync and detached: a sync stuck in a file
 * system that never answers keeps its thread, nothing else.  It writes the
 * sync's time to a pipe whose write end is never closed (a stuck thread
 * may write after pause_free()); the loop reads it and calls the waits
 * the sync covers.
 */
#include <sys/queue.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "pause.h"
#include "util.h"

#define PAUSE_STACK	(64 * 1024)	/* bytes: the thread calls sync() */

struct pause_wait {
	TAILQ_ENTRY(pause_wait)	 entry;
	uint64_t		 sync;	/* the sync that covers it */
	pause_done_fn		 done;
	void			*arg;
};

static TAILQ_HEAD(, pause_wait)	pause_waits = TAILQ_HEAD_INITIALIZER(pause_waits);
static int		 pause_pipe[2] = { -1, -1 };	/* thread -> loop */
static struct event	*pause_ev;
static uint64_t		 pause_started;		/* syncs started */
static int		 pause_running;		/* one is running */

static int	 pause_sync_start(void);
static void	*pause_main(void *);
static void	 pause_read_cb(evutil_socket_t, short, void *);

/* Take the syncs' results on base. */
void
pause_init(struct event_base *base)
{
	if (pipe2(pause_pipe, O_CLOEXEC) == -1)
		fatal("%s: pipe2: %s", __func__, strerror(errno));
	if (fd_nonblock_cloexec(pause_pipe[0]) != 0)
		fatal("%s: O_NONBLOCK: %s", __func__, strerror(errno));
	pause_ev = event_new(base, pause_pipe[0], EV_READ | EV_PERSIST,
	    pause_read_cb, NULL);
	if (pause_ev == NULL || event_add(pause_ev, NULL) != 0)
		fatal("%s: out of memory", __func__);
}

/* Stop taking results; the waits left are freed, never called. */
void
pause_free(void)
{
	struct pause_wait	*w;

	while ((w = TAILQ_FIRST(&pause_waits)) != NULL) {
		TAILQ_REMOVE(&pause_waits, w, entry);
		free(w);
	}
	if (pause_ev != NULL) {
		event_free(pause_ev);
		pause_ev = NULL;
	}
}

/* Ask for a sync; see pause.h. */
struct pause_wait *
pause_start(pause_done_fn done, void *arg)
{
	struct pause_wait	*w;

	w = xcalloc(1, sizeof *w);
	w->done = done;
	w->arg = arg;
	/* A sync running began before this call: the next one covers it. */
	w->sync = pause_started + 1;
	TAILQ_INSERT_TAIL(&pause_waits, w, entry);
	if (!pause_running && pause_sync_start() != 0) {
		TAILQ_REMOVE(&pause_waits, w, entry);
		free(w);
		return (NULL);
	}
	return (w);
}

/* Give up a wait. */
void
pause_cancel(struct pause_wait *w)
{
	TAILQ_REMOVE(&pause_waits, w, entry);
	free(w);
}

/* Start the next sync on a thread: 0, or -1 (logged). */
static int
pause_sync_start(void)
{
	pthread_attr_t	attr;
	pthread_t	t;
	sigset_t	all, old;
	int		error;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PAUSE_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	error = pthread_create(&t, &attr, pause_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (error != 0) {
		log_warn("%s: pthread_create: %s", __func__, strerror(error));
		return (-1);
	}
	pause_started++;
	pause_running = 1;
	return (0);
}

/* The thread: sync, then say how long it took. */
static void *
pause_main(void *arg)
{
	int64_t	ms, t0 = clock_mono_ms();
	ssize_t	n;

	sync();
	ms = clock_mono_ms() - t0;
	do
		n = write(pause_pipe[1], &ms, sizeof ms);
	while (n == -1 && errno == EINTR);
	return (NULL);
}

/* A sync ended: call the waits it covers, and start the next if any. */
static void
pause_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct pause_wait	*w, *next;
	int64_t			 ms;

	while (read(pause_pipe[0], &ms, sizeof ms) == (ssize_t)sizeof ms) {
		pause_running = 0;
		log_info("%s: sync %llu done in %lld ms", __func__,
		    (unsigned long long)pause_started, (long long)ms);
		for (w = TAILQ_FIRST(&pause_waits); w != NULL; w = next) {
			next = TAILQ_NEXT(w, entry);
			if (w->sync > pause_started)
				continue;
			TAILQ_REMOVE(&pause_waits, w, entry);
			w->done(w->arg, ms);
			free(w);
		}
	}
	if (!pause_running && !TAILQ_EMPTY(&pause_waits) &&
	    pause_sync_start() != 0) {
		/* No thread for the next: say so to those who wait. */
		while ((w = TAILQ_FIRST(&pause_waits)) != NULL) {
			TAILQ_REMOVE(&pause_waits, w, entry);
			w->done(w->arg, -1);
			free(w);
		}
	}
}
