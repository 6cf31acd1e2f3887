/*
 * agentd.c -- the daemon's wiring, shared by main() and the HTTP fuzzer
 * (tests/fuzz/fuzz_http.c): the loop, the sessions and the listeners, built
 * from a configuration.  main.c adds what only a real daemon does around it:
 * PID-1 duties, signals and the reaper, the companion, the shutdown.
 */
#include <string.h>

#include <event2/event.h>

#include "agentd.h"
#include "api.h"
#include "config.h"
#include "debug.h"
#include "envd.h"
#include "events.h"
#include "files.h"
#include "hold.h"
#include "http.h"
#include "log.h"
#include "mcp.h"
#include "ports_api.h"
#include "outq.h"
#include "pause.h"
#include "session.h"
#include "sessions.h"
#include "sse.h"
#include "util.h"
#include "webdir.h"

struct event_base	*agentd_base;
int64_t			 agentd_start_ms;

static void	(*agentd_observer)(struct session *, int);

/* The session observer: the event feed, the streams, then the caller's. */
static void
agentd_session_event(struct session *s, int events)
{
	events_session_event(s, events);
	sse_session_event(s, events);
	envd_session_event(s, events);
	agentd_observer(s, events);
}

/* Build the loop, the session table and the listeners from cfg. */
int
agentd_start(struct config *cfg, void (*observer)(struct session *, int))
{
	struct session_limits	 limits;
	struct event_config	*ecfg;

	if ((ecfg = event_config_new()) == NULL)
		fatal("%s: out of memory", __func__);
	/* EV_CLOSED: a long-poll's client that goes away is seen at once. */
	event_config_require_features(ecfg, EV_FEATURE_EARLY_CLOSE);
	agentd_base = event_base_new_with_config(ecfg);
	event_config_free(ecfg);
	if (agentd_base == NULL)
		fatal("%s: no event backend with EV_CLOSED", __func__);

	memset(&limits, 0, sizeof limits);
	limits.max_sessions = cfg->max_sessions;
	limits.max_total_ring_bytes = cfg->max_total_ring_bytes;
	limits.stdin_buffer = cfg->stdin_buffer;
	limits.pipe_bytes = cfg->pipe_bytes;
	limits.exited_ttl_ms = cfg->exited_ttl_ms;
	limits.utf8_hold_ms = cfg->utf8_hold_ms;
	limits.memory_bytes = cfg->session_memory;
	limits.pids = cfg->session_pids;
	limits.cpu_percent = cfg->session_cpu;
	limits.oom_score_adj = cfg->session_oom_score_adj;
	limits.workdir = cfg->workdir;
	limits.env = cfg->env_defaults;
	limits.spawn_threads = (unsigned)cfg->spawn_threads;
	limits.spawn_timeout_ms = cfg->spawn_timeout_ms;
	limits.max_session_bytes = cfg->max_session_bytes;
	outq_set_max(cfg->max_answer_bytes);
	limits.profile = cfg->profile;
	limits.cast_resizes = cfg->cast_resizes;
	api_init(cfg, agentd_start_ms);
	webdir_init(cfg->web_dir, cfg->web_file_max);
	debug_init(agentd_base, cfg, agentd_start_ms);
	files_init(agentd_base, cfg);
	hold_init(agentd_base);
	mcp_init(agentd_base, cfg);
	sessions_init(agentd_base, cfg);
	events_init(agentd_base, cfg->max_events, cfg->events_bytes);
	/* the baseline, the feed's port events */
	ports_api_init(agentd_base, cfg);
	pause_init(agentd_base);
	sse_init(agentd_base, cfg->sse_buffer, cfg->sse_keepalive_ms,
	    cfg->idle_timeout_ms);
	sse_set_encoding(cfg->encoding);
	agentd_observer = observer;
	session_init(agentd_base, &limits, agentd_session_event);

	if (http_start(agentd_base, cfg, api_route) != 0 ||
	    envd_start(agentd_base, cfg) != 0)
		return (-1);
	log_debug("%s: listening", __func__);
	return (0);
}
