/*
 * main.c -- agentd's start, its signals, the reaper and the shutdown.
 *
 * Signals are blocked and read from a signalfd in the event loop: no handler
 * does any work.  Every child and orphan is reaped in one place,
 * agentd_reap().  As PID 1 nothing here returns from main: the end is a
 * power-off (or a reboot), also after a fatal error.
 */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "agentd.h"
#include "api.h"
#include "cgroup.h"
#include "companion.h"
#include "config.h"
#include "debug.h"
#include "envd.h"
#include "events.h"
#include "evmem.h"
#include "http.h"
#include "log.h"
#include "mcp.h"
#include "membudget.h"
#include "outq.h"
#include "pause.h"
#include "pid1.h"
#include "ports_api.h"
#include "restore.h"
#include "sandbox.h"
#include "session.h"
#include "sessions.h"
#include "spawner.h"
#include "upgguard.h"
#include "upgrade.h"
#include "util.h"

#define AGENTD_FINAL_WAIT_MS	1000	/* after SIGKILL, wait this for the reaping */
#define AGENTD_HUP_DELAY_MS	500	/* shutdown: SIGTERM first, SIGHUP (ttys) then */
#define AGENTD_DRAIN_MS		500	/* the last answers' time to reach their clients */
#define AGENTD_DRAIN_STEP_MS	20	/* ... looked at this often */

static struct config	 config;
static int		 killed;	/* SIGKILL sent to what remained */
static struct event	*signal_ev;
static struct event	*grace_ev;	/* end of the shutdown grace */
static struct event	*final_ev;	/* end of the wait after SIGKILL */
static struct event	*hup_ev;	/* SIGHUP to the tty sessions */
static int		 signal_fd = -1;
static sigset_t		 signal_set;	/* the signals read from signal_fd */

static void	agentd_shutdown(const char *);
static void	agentd_panic(void) __attribute__((noreturn));
static void	agentd_signals_block(void);
static void	agentd_signals(void);
static void	agentd_signal_cb(evutil_socket_t, short, void *);
static void	agentd_reap(void);
static void	agentd_grace_cb(evutil_socket_t, short, void *);
static void	agentd_final_cb(evutil_socket_t, short, void *);
static void	agentd_hup_cb(evutil_socket_t, short, void *);
static void	agentd_session_event(struct session *, int);
static void	agentd_maybe_done(void);
static void	agentd_drain(void);
static void	agentd_libevent_fatal(int);
static void	agentd_libevent_log(int, const char *);
static void	agentd_seed_json(void);
static void	agentd_upgrade_flush(void);

/* Block the signals agentd acts on (agentd_signals reads them). */
static void
agentd_signals_block(void)
{
	sigset_t	*set = &signal_set;

	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGQUIT);
	sigaddset(set, SIGPWR);
	sigaddset(set, SIGUSR1);
	sigaddset(set, SIGUSR2);
	if (sigprocmask(SIG_BLOCK, set, NULL) == -1)
		fatal("%s: sigprocmask: %s", __func__, strerror(errno));
	signal(SIGPIPE, SIG_IGN);
}

/* Read the blocked signals from a signalfd in the loop. */
static void
agentd_signals(void)
{
	if ((signal_fd = signalfd(-1, &signal_set, SFD_NONBLOCK |
	    SFD_CLOEXEC)) == -1)
		fatal("%s: signalfd: %s", __func__, strerror(errno));
	signal_ev = event_new(agentd_base, signal_fd, EV_READ | EV_PERSIST,
	    agentd_signal_cb, NULL);
	if (signal_ev == NULL || event_add(signal_ev, NULL) != 0)
		fatal("%s: event_new failed", __func__);
}

/* A signal arrived: reap, or begin the shutdown. */
static void
agentd_signal_cb(evutil_socket_t fd, short events, void *arg)
{
	struct signalfd_siginfo	si;
	ssize_t			n;
	int			chld = 0;

	while ((n = read(fd, &si, sizeof si)) == (ssize_t)sizeof si) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			chld = 1;
			break;
		case SIGTERM:
		case SIGINT:
		case SIGPWR:
		case SIGQUIT:
			log_info("%s: signal %d from pid %u", __func__,
			    (int)si.ssi_signo, si.ssi_pid);
			agentd_shutdown(si.ssi_signo == SIGINT && config.pid1 ?
			    "ctrl-alt-del" : "signal");
			break;
		default:
			log_debug("%s: signal %d ignored", __func__,
			    (int)si.ssi_signo);
			break;
		}
	}
	if (chld)
		agentd_reap();
}

/* Reap every child and orphan whose status is in. */
static void
agentd_reap(void)
{
	pid_t	pid;
	int	status;

	for (;;) {
		/* Not the sessions' leaders: the spawner thread's children. */
		pid = waitpid(-1, &status, WNOHANG | __WNOTHREAD);
		if (pid == -1 && errno == EINTR)
			continue;
		if (pid <= 0)
			break;
		if (companion_reaped(pid, status) == 0)
			continue;
		if (session_adopted_reaped(pid, status) == 0 ||
		    upgrade_reaped(pid, status) == 0)
			continue;	/* an upgrade's session leader, check */
		agentd_stats.zombies_reaped++;
		log_debug("%s: reaped orphan %ld", __func__, (long)pid);
	}
	session_collect();
	if (agentd_stopping())
		agentd_maybe_done();
}

/* Begin the graceful shutdown. */
static void
agentd_shutdown(const char *why)
{
	struct timeval	tv;
	int64_t		ms;

	if (agentd_stop_begin() != 0)
		return;
	log_info("%s: shutting down (%s), grace %lld ms", __func__, why,
	    (long long)config.shutdown_grace_ms);
	/*
	 * The listeners stay open through the grace: new work is refused
	 * (503 shutting_down) and /healthz says so, also on new connections.
	 */
	companion_stop();
	ports_api_stop();	/* a wait for a port ends: 503 */
	sandbox_stop();		/* a pause waiting for its sync: 503 */
	upgrade_stop();		/* an upgrade's check under way: 503 */
	session_create_cancel_all();	/* creates still spawning: 503 */
	/*
	 * SIGTERM (and SIGCONT, for stopped ones) first, to every session;
	 * SIGHUP to the tty ones a little later: delivered together, SIGHUP
	 * (the lower number) would come first and kill a program that traps
	 * only SIGTERM, while an interactive shell ignores SIGTERM and needs
	 * the SIGHUP.
	 */
	session_signal_all(SIGTERM, 0);
	session_signal_all(SIGCONT, 0);
	/* Every process (adopted orphans too); stopped ones wake to see it. */
	if (config.pid1) {
		kill(-1, SIGTERM);
		kill(-1, SIGCONT);
	} else {
		pid1_kill_children(SIGTERM);
		pid1_kill_children(SIGCONT);
	}
	grace_ev = evtimer_new(agentd_base, agentd_grace_cb, NULL);
	final_ev = evtimer_new(agentd_base, agentd_final_cb, NULL);
	hup_ev = evtimer_new(agentd_base, agentd_hup_cb, NULL);
	evtimer_add(grace_ev, timeval_ms(&tv, config.shutdown_grace_ms));
	ms = config.shutdown_grace_ms / 2 < AGENTD_HUP_DELAY_MS ?
	    config.shutdown_grace_ms / 2 : AGENTD_HUP_DELAY_MS;
	evtimer_add(hup_ev, timeval_ms(&tv, ms));
	agentd_maybe_done();
}

/*
 * The sessions' observer: the API's, and during a shutdown a look at whether
 * it is over (a session turns exited when its output closes, which may come
 * after its status was reaped).
 */
static void
agentd_session_event(struct session *s, int events)
{
	sessions_event(s, events);
	if (agentd_stopping() &&
	    (events & (SESSION_EV_EXITED | SESSION_EV_REMOVED)))
		agentd_maybe_done();
}

/* Part of the shutdown: SIGHUP to the tty sessions. */
static void
agentd_hup_cb(evutil_socket_t fd, short events, void *arg)
{
	session_signal_all(SIGHUP, 1);
}

/* The grace is over: kill what remains. */
static void
agentd_grace_cb(evutil_socket_t fd, short events, void *arg)
{
	struct timeval	tv;

	log_info("%s: grace over, killing what remains", __func__);
	killed = 1;
	session_signal_all(SIGKILL, 0);
	companion_kill();
	if (config.pid1)
		kill(-1, SIGKILL);
	else
		pid1_kill_children(SIGKILL);
	evtimer_add(final_ev, timeval_ms(&tv, AGENTD_FINAL_WAIT_MS));
	agentd_maybe_done();
}

/* Give up waiting for the last children. */
static void
agentd_final_cb(evutil_socket_t fd, short events, void *arg)
{
	log_warn("%s: children remain after SIGKILL; stopping anyway",
	    __func__);
	event_base_loopbreak(agentd_base);
}

/* End the loop once no session runs and no child remains. */
static void
agentd_maybe_done(void)
{
	siginfo_t	si;

	if (session_count_running() > 0 || companion_running())
		return;
	/* Orphans too: as PID 1 or subreaper they are ours to wait for. */
	memset(&si, 0, sizeof si);
	if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WNOTHREAD) ==
	    -1 &&
	    errno == ECHILD)
		event_base_loopbreak(agentd_base);
}

/*
 * The loop ended and every held request was answered (503 shutting_down, or
 * its window): let those answers reach their clients before the
 * connections are freed, AGENTD_DRAIN_MS at most.  No listener accepts by
 * now, and a client that does not read costs only the wait.
 */
static void
agentd_drain(void)
{
	struct timeval	tv;
	int64_t		end = clock_mono_ms() + AGENTD_DRAIN_MS;

	http_stop_accepting();
	while (outq_bytes() > 0 && clock_mono_ms() < end) {
		event_base_loopexit(agentd_base, timeval_ms(&tv,
		    AGENTD_DRAIN_STEP_MS));
		event_base_dispatch(agentd_base);
	}
	if (outq_bytes() > 0)
		log_info("%s: %llu bytes of answers not sent", __func__,
		    (unsigned long long)outq_bytes());
}

/* libevent hit a fatal error: take agentd's fatal path, never exit(). */
static void
agentd_libevent_fatal(int err)
{
	log_error("%s: libevent fatal error %d", __func__, err);
	agentd_panic();
}

/* Route libevent's own messages into agentd's log. */
static void
agentd_libevent_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_warn("libevent: %s", msg);
	else
		log_debug("libevent: %s", msg);
}

/* Seed jansson's hash from the kernel's AT_RANDOM, not /dev/urandom. */
static void
agentd_seed_json(void)
{
	const unsigned char	*r = (const unsigned char *)getauxval(AT_RANDOM);
	uint32_t		 seed = 0;

	if (r != NULL)
		memcpy(&seed, r, sizeof seed);
	if (seed == 0)
		seed = (uint32_t)clock_mono_ms() ^ (uint32_t)getpid();
	json_object_seed(seed);
}

/* An upgrade's hand-over: every long-poll answered with what it has. */
static void
agentd_upgrade_flush(void)
{
	sessions_flush_waiters();
	events_flush_waiters();
}

/* The fatal path: never returns; as PID 1 never exits. */
static void
agentd_panic(void)
{
	static int	panicking;

	upgguard_fire("fatal");	/* an upgrade not yet taken over: go back */
	if (!panicking) {
		panicking = 1;
		session_signal_all(SIGKILL, 0);
		companion_kill();
	}
	if (config.pid1)
		pid1_poweroff(config.shutdown_reboot, 1);
	_exit(1);
}

int
main(int argc, char **argv)
{
	char			*cmdline = NULL;
	int			 error, adopted;

	if (upgrade_check_mode(argc, argv))
		return (0);	/* the new binary of an upgrade, checked */
	upgguard_arm();	/* an upgrade's: the old binary, should this fail */
	evmem_install();	/* before any other libevent call */
	agentd_start_ms = clock_mono_ms();
	fatal_set_hook(agentd_panic);
	/*
	 * Blocked first thing: a PID 1 whose disposition is the default drops
	 * SIGTERM, and the start may take seconds (the NIC, the kernel log);
	 * blocked, it waits in the queue for the signalfd.
	 */
	agentd_signals_block();
	pid1_stdio();	/* fds 0-2 closed: /dev/null, not a socket or the log */
	if (getpid() == 1) {
		pid1_early();
		cmdline = pid1_cmdline();
	}
	error = config_load(&config, argc, argv, cmdline);
	free(cmdline);
	if (error != 0) {
		/* An upgrade's new binary that takes not the old argv: back. */
		upgguard_fire("bad configuration");
		if (getpid() == 1) {
			log_error("%s: bad configuration; using defaults",
			    __func__);
			config_free(&config);
			if (config_load(&config, 1, argv, NULL) != 0)
				agentd_panic();
		} else
			exit(error > 0 ? 0 : 2);
	}
	if (log_set_level(config.log_level) != 0)
		log_warn("%s: unknown --log-level %s", __func__,
		    config.log_level);
	if (config.workdir == NULL && (config.workdir = getcwd(NULL, 0)) == NULL)
		config.workdir = xstrdup("/");
	agentd_seed_json();
	nofile_raise(0, 0);	/* as many fds as allowed: connections, sessions */
	if (config.pid1)
		pid1_setup(&config);
	else if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		log_warn("%s: PR_SET_CHILD_SUBREAPER: %s", __func__,
		    strerror(errno));
	membudget_apply(&config);	/* /proc and the cgroups are mounted */

	upgrade_init(argv, &agentd_start_ms, agentd_upgrade_flush);
	upgrade_resume_early(&config);	/* after an upgrade: the listeners */
	cgroup_init(&(struct cgroup_config){ .mount = CGROUP_MOUNT,
	    .self_memory_min = config.self_memory_min,
	    .self_cpu_weight = config.self_cpu_weight });

	event_set_fatal_callback(agentd_libevent_fatal);
	event_set_log_callback(agentd_libevent_log);
	if (agentd_start(&config, agentd_session_event) != 0) {
		if (!config.pid1)
			exit(1);
		fatal("%s: cannot listen", __func__);
	}
	agentd_signals();
	adopted = upgrade_resume(agentd_base, &config);	/* the sessions, the feed */
	agentd_reap();	/* children whose SIGCHLD came before the signalfd */
	if (config.companion != NULL && !adopted)
		companion_start(agentd_base, config.companion);
	restore_start(agentd_base, &config);
	log_info("%s: agentd %s ready (pid %ld)", __func__, AGENTD_VERSION,
	    (long)getpid());

	event_base_dispatch(agentd_base);

	/* The loop ended: the shutdown is over, or it broke on its own. */
	http_stop_accepting();	/* new requests now get 503: the routes go */
	sessions_flush_waiters();
	session_create_cancel_all();
	/* One more turn without waiting: the answers just given go out. */
	event_base_loop(agentd_base, EVLOOP_NONBLOCK);
	ports_api_free();
	pause_free();
	mcp_free();
	session_signal_all(SIGKILL, 0);
	session_remove_all();
	envd_free();	/* after the sessions' last events */
	spawner_free();
	events_free();	/* after the sessions' last events */
	agentd_drain();
	http_free();
	companion_free();
	restore_free();
	debug_free();	/* the lag timer, started by the first /debug/ request */
	event_free(signal_ev);
	if (grace_ev != NULL)
		event_free(grace_ev);
	if (final_ev != NULL)
		event_free(final_ev);
	if (hup_ev != NULL)
		event_free(hup_ev);
	close(signal_fd);
	event_base_free(agentd_base);
	log_info("%s: stopped", __func__);
	if (config.pid1)
		pid1_poweroff(config.shutdown_reboot, 0);
	config_free(&config);
	libevent_global_shutdown();
	return (0);
}
