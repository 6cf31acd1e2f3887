/*
 * companion.c -- a supervised service beside the API, restarted with backoff.
 */
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "companion.h"
#include "evmem.h"
#include "log.h"
#include "pty.h"
#include "util.h"

/*
 * One output pipe of the companion, logged line by line until its end.  A
 * run's pipes outlive it while a descendant (a daemon it forked) holds them:
 * closing them at the restart would kill that daemon with SIGPIPE.
 */
struct companion_out {
	int				 fd;
	struct event			*ev;
	struct evbuffer			*line;
	const char			*name;
	TAILQ_ENTRY(companion_out)	 entry;
};
TAILQ_HEAD(companion_outs, companion_out);

static char			**argv_;
static pid_t			  pid = -1;
static int			  stopped;
static unsigned			  restarts;
static int64_t			  backoff_ms = COMPANION_BACKOFF_MIN_MS;
static int64_t			  started_ms;
static struct event		 *restart_ev;
static struct event_base	 *companion_base;	/* the loop */
static struct companion_outs	  outs = TAILQ_HEAD_INITIALIZER(outs);

static void	companion_spawn(void);
static void	companion_restart_cb(evutil_socket_t, short, void *);
static void	companion_read_cb(evutil_socket_t, short, void *);
static void	companion_open_out(int, const char *);
static void	companion_close_out(struct companion_out *);
static void	companion_log_lines(struct companion_out *, int flush);

/* Start supervising argv. */
void
companion_start(struct event_base *base, char **argv)
{
	companion_base = base;
	argv_ = argv;
	restart_ev = evtimer_new(companion_base, companion_restart_cb, NULL);
	if (restart_ev == NULL)
		fatal("%s: out of memory", __func__);
	companion_spawn();
}

/* Spawn the companion on pipes, stdin /dev/null, agentd's environment. */
static void
companion_spawn(void)
{
	extern char	**environ;
	struct pty_spec	  spec;
	struct pty_proc	  proc;
	struct timeval	  tv;
	char		  cause[PTY_CAUSE_MAX];

	memset(&spec, 0, sizeof spec);
	spec.argv = argv_;
	spec.envp = environ;
	spec.stdin_null = 1;
	spec.cgroup = -1;
	if (pty_spawn(&spec, &proc, cause, sizeof cause) != 0) {
		log_error("%s: %s; retrying in %lld ms", __func__, cause,
		    (long long)backoff_ms);
		evtimer_add(restart_ev, timeval_ms(&tv, backoff_ms));
		backoff_ms = backoff_ms * 2 > COMPANION_BACKOFF_MAX_MS ?
		    COMPANION_BACKOFF_MAX_MS : backoff_ms * 2;
		return;
	}
	pid = proc.pid;
	started_ms = clock_mono_ms();
	companion_open_out(proc.out, "stdout");
	companion_open_out(proc.err, "stderr");
	log_info("%s: companion %s started, pid %ld", __func__, argv_[0],
	    (long)pid);
}

/* Log each whole line of o's buffer (and the rest when flushing). */
static void
companion_log_lines(struct companion_out *o, int flush)
{
	char	*line;
	size_t	 len;

	while ((line = evbuffer_readln(o->line, &len, EVBUFFER_EOL_LF)) !=
	    NULL) {
		log_info("companion %s: %.*s", o->name, (int)len, line);
		evmem_release(line);
	}
	len = evbuffer_get_length(o->line);
	if (len >= COMPANION_LINE_MAX || (flush && len > 0)) {
		if (len > COMPANION_LINE_MAX)
			len = COMPANION_LINE_MAX;
		log_info("companion %s: %.*s", o->name, (int)len,
		    (const char *)evbuffer_pullup(o->line, len));
		evbuffer_drain(o->line, len);
	}
}

/* The companion wrote something. */
static void
companion_read_cb(evutil_socket_t fd, short events, void *arg)
{
	struct companion_out	*o = arg;
	int			 n;

	n = evbuffer_read(o->line, fd, COMPANION_LINE_MAX);
	if (n > 0) {
		companion_log_lines(o, 0);
		return;
	}
	if (n == -1 && (errno == EAGAIN || errno == EINTR))
		return;
	companion_log_lines(o, 1);
	companion_close_out(o);
}

/* Log what comes out of fd, one of a run's pipes, until its end. */
static void
companion_open_out(int fd, const char *name)
{
	struct companion_out	*o;

	o = xcalloc(1, sizeof *o);
	o->fd = fd;
	o->name = name;
	o->line = evbuffer_new();
	o->ev = event_new(companion_base, fd, EV_READ | EV_PERSIST,
	    companion_read_cb, o);
	if (o->line == NULL || o->ev == NULL)
		fatal("%s: out of memory", __func__);
	event_add(o->ev, NULL);
	TAILQ_INSERT_TAIL(&outs, o, entry);
}

/* Close and free one of the companion's pipes. */
static void
companion_close_out(struct companion_out *o)
{
	TAILQ_REMOVE(&outs, o, entry);
	event_free(o->ev);
	evbuffer_free(o->line);
	close(o->fd);
	free(o);
}

/* The companion's status came in: restart it after the backoff. */
int
companion_reaped(pid_t p, int status)
{
	struct timeval	tv;

	if (pid == -1 || p != pid)
		return (-1);
	pid = -1;
	if (WIFSIGNALED(status))
		log_warn("%s: companion killed by signal %d", __func__,
		    WTERMSIG(status));
	else
		log_warn("%s: companion exited %d", __func__,
		    WEXITSTATUS(status));
	if (stopped)
		return (0);
	if (clock_mono_ms() - started_ms >= COMPANION_STABLE_MS)
		backoff_ms = COMPANION_BACKOFF_MIN_MS;
	log_info("%s: restarting the companion in %lld ms", __func__,
	    (long long)backoff_ms);
	evtimer_add(restart_ev, timeval_ms(&tv, backoff_ms));
	backoff_ms = backoff_ms * 2 > COMPANION_BACKOFF_MAX_MS ?
	    COMPANION_BACKOFF_MAX_MS : backoff_ms * 2;
	return (0);
}

/* The backoff is over. */
static void
companion_restart_cb(evutil_socket_t fd, short events, void *arg)
{
	if (stopped)
		return;
	restarts++;
	companion_spawn();
}

/* No more restarts; SIGTERM to the companion's group. */
void
companion_stop(void)
{
	stopped = 1;
	if (restart_ev != NULL)
		event_del(restart_ev);
	if (pid != -1)
		pty_kill_group(pid, SIGTERM);
}

/* SIGKILL to the companion's group. */
void
companion_kill(void)
{
	stopped = 1;
	if (pid != -1)
		pty_kill_group(pid, SIGKILL);
}

/* Whether the companion is alive. */
int
companion_running(void)
{
	return (pid != -1);
}

/* Restarts so far. */
unsigned
companion_restarts(void)
{
	return (restarts);
}

/* Free everything. */
void
companion_free(void)
{
	while (!TAILQ_EMPTY(&outs))
		companion_close_out(TAILQ_FIRST(&outs));
	if (restart_ev != NULL)
		event_free(restart_ev);
	restart_ev = NULL;
}

/* For an upgrade: the companion's pid (-1: none) and its pipes' fds. */
pid_t
companion_handover(int fds[2])
{
	struct companion_out	*o;

	fds[0] = fds[1] = -1;
	TAILQ_FOREACH(o, &outs, entry)
		fds[strcmp(o->name, "stderr") == 0] = o->fd;
	return (pid);
}

/* Supervise the companion an upgrade handed over, as if started here. */
void
companion_adopt(struct event_base *base, char **argv, pid_t p, int out,
    int err)
{
	companion_base = base;
	argv_ = argv;
	restart_ev = evtimer_new(companion_base, companion_restart_cb, NULL);
	if (restart_ev == NULL)
		fatal("%s: out of memory", __func__);
	pid = p;
	started_ms = clock_mono_ms();
	if (out != -1)
		companion_open_out(out, "stdout");
	if (err != -1)
		companion_open_out(err, "stderr");
	log_info("%s: companion %s handed over, pid %ld", __func__, argv_[0],
	    (long)pid);
}
