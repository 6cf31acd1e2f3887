/*
 * api.c -- the routes of API.md: each path to the file of its resource
 * (sessions.c, files.c, events.c, ports_api.c, sandbox.c, mcp.c, debug.c),
 * and the sandbox's own: /healthz and /metrics.
 */
#include <sys/types.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/http.h>

#include "api.h"
#include "cast.h"
#include "cgroup.h"
#include "config.h"
#include "conn.h"
#include "connect.h"
#include "debug.h"
#include "events.h"
#include "evmem.h"
#include "files.h"
#include "fs.h"
#include "http.h"
#include "mcp.h"
#include "outq.h"
#include "ports.h"
#include "ports_api.h"
#include "proto.h"
#include "restore.h"
#include "ringbuf.h"
#include "sandbox.h"
#include "upgrade.h"
#include "webdir.h"
#include "session.h"
#include "sessions.h"
#include "spawner.h"
#include "sse.h"
#include "stats.h"
#include "stop.h"
#include "util.h"

static const struct config	*api_cfg;
static int64_t			 api_start_ms;	/* monotonic */

static void	api_healthz(struct http_req *);
static void	api_metrics(struct http_req *);

/* Set the configuration and agentd's start (monotonic ms), at the start. */
void
api_init(const struct config *cfg, int64_t start_ms)
{
	api_cfg = cfg;
	api_start_ms = start_ms;
}

/* Route a request. */
void
api_route(struct http_req *hr)
{
	const char	*p = hr->path;

	if (strcmp(p, "/healthz") == 0) {
		if (http_method(hr, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD) == 0)
			api_healthz(hr);
	} else if (strcmp(p, "/metrics") == 0) {
		if (http_method(hr, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD) == 0)
			api_metrics(hr);
	} else if (strncmp(p, "/v1/sessions", 12) == 0 &&
	    (p[12] == '\0' || p[12] == '/'))
		sessions_route(hr);
	else if (strncmp(p, "/v1/files", 9) == 0)
		files_route(hr);
	else if (strncmp(p, "/v1/sandbox/", 12) == 0)
		sandbox_route(hr);
	else if (strncmp(p, "/v1/events", 10) == 0)
		events_route(hr);
	else if (strncmp(p, "/v1/ports", 9) == 0)
		ports_route(hr);
	else if (strcmp(p, "/mcp") == 0)
		mcp_route(hr);
	else if (strncmp(p, "/term", 5) == 0 && (p[5] == '\0' || p[5] == '/'))
		webdir_route(hr);
	else if (hr->unix_peer && strncmp(p, "/debug/", 7) == 0)
		debug_route(hr);	/* the unix socket only */
	else
		http_fail(hr->req, 404, "not_found", "no route %s", p);
}

/* GET /healthz */
static void
api_healthz(struct http_req *hr)
{
	static const char	ok[] = "{\"status\": \"ok\", \"version\": \""
				    AGENTD_VERSION "\", \"sessions\": ";
	static const char	stop[] = "{\"status\": \"shutting_down\", "
				    "\"version\": \"" AGENTD_VERSION "\", "
				    "\"sessions\": ";
	static const char	error[] = ", \"error\": {\"code\": "
				    "\"shutting_down\", \"message\": \"agentd "
				    "is shutting down\"}";
	struct proto_buf	b = { 0 };
	int64_t			up = clock_mono_ms() - api_start_ms;
	int			stopping = agentd_stopping();

	/* Appended, not printf'd: musl's printf is most of a healthz. */
	if (stopping)
		proto_buf_append(&b, stop, sizeof stop - 1);
	else
		proto_buf_append(&b, ok, sizeof ok - 1);
	proto_buf_u64(&b, session_count_running());
	proto_buf_append(&b, ", \"uptime_ms\": ", 15);
	proto_buf_u64(&b, up > 0 ? (uint64_t)up : 0);
	proto_buf_append(&b, ", \"pid\": ", 9);
	proto_buf_u64(&b, (uint64_t)getpid());
	proto_buf_append(&b, ", \"generation\": ", 16);
	proto_buf_u64(&b, restore_generation());
	proto_buf_append(&b, ", \"upgrades\": ", 14);
	proto_buf_u64(&b, upgrade_count());
	proto_buf_append(&b, ", \"containment\": \"", 18);
	proto_buf_append(&b, cgroup_containment(), strlen(cgroup_containment()));
	proto_buf_append(&b, "\"", 1);
	if (stopping)
		proto_buf_append(&b, error, sizeof error - 1);
	proto_buf_append(&b, "}", 1);
	http_reply(hr->req, stopping ? 503 : 200, &b);
}

/* GET /metrics, in Prometheus' text format. */
static void
api_metrics(struct http_req *hr)
{
	const struct http_code_count	*codes;
	struct proto_buf		 b = { 0 };
	struct ring_stats		 st;
	struct session			*s;
	uint64_t			 dropped = agentd_stats.output_dropped_bytes;
	uint64_t			 held = 0;
	size_t				 n, i, calls, fetches;

	for (s = session_first(); s != NULL; s = session_next(s)) {
		ring_stats(session_ring(s), &st);
		dropped += st.bytes_dropped;
		held += st.bytes_held;
	}
	proto_buf_printf(&b,
	    "# TYPE agentd_sessions_running gauge\n"
	    "agentd_sessions_running %zu\n"
	    "# TYPE agentd_sessions gauge\n"
	    "agentd_sessions %zu\n"
	    "# TYPE agentd_sessions_started_total counter\n"
	    "agentd_sessions_started_total %" PRIu64 "\n"
	    "# TYPE agentd_sessions_spawn_failed_total counter\n"
	    "agentd_sessions_spawn_failed_total %" PRIu64 "\n"
	    "# TYPE agentd_sessions_starting gauge\n"
	    "agentd_sessions_starting %zu\n"
	    "# TYPE agentd_spawn_timeouts_total counter\n"
	    "agentd_spawn_timeouts_total %" PRIu64 "\n"
	    "# TYPE agentd_spawns_abandoned gauge\n"
	    "agentd_spawns_abandoned %zu\n"
	    "# TYPE agentd_output_bytes_total counter\n"
	    "agentd_output_bytes_total %" PRIu64 "\n"
	    "# TYPE agentd_output_dropped_bytes_total counter\n"
	    "agentd_output_dropped_bytes_total %" PRIu64 "\n"
	    "# TYPE agentd_output_utf8_cuts_total counter\n"
	    "agentd_output_utf8_cuts_total %" PRIu64 "\n"
	    "# TYPE agentd_output_utf8_held_total counter\n"
	    "agentd_output_utf8_held_total %" PRIu64 "\n"
	    "# TYPE agentd_output_utf8_hold_expired_total counter\n"
	    "agentd_output_utf8_hold_expired_total %" PRIu64 "\n"
	    "# TYPE agentd_output_held_bytes gauge\n"
	    "agentd_output_held_bytes %" PRIu64 "\n"
	    "# TYPE agentd_ring_bytes gauge\n"
	    "agentd_ring_bytes %" PRIu64 "\n"
	    "# TYPE agentd_pipe_bytes gauge\n"
	    "agentd_pipe_bytes %" PRIu64 "\n"
	    "# TYPE agentd_zombies_reaped_total counter\n"
	    "agentd_zombies_reaped_total %" PRIu64 "\n"
	    "# TYPE agentd_session_bytes gauge\n"
	    "agentd_session_bytes %" PRIu64 "\n"
	    "# TYPE agentd_session_bytes_max gauge\n"
	    "agentd_session_bytes_max %" PRIu64 "\n"
	    "# TYPE agentd_http_answer_bytes gauge\n"
	    "agentd_http_answer_bytes %" PRIu64 "\n"
	    "# TYPE agentd_http_answer_bytes_max gauge\n"
	    "agentd_http_answer_bytes_max %" PRIu64 "\n"
	    "# TYPE agentd_session_leaders_unreaped gauge\n"
	    "agentd_session_leaders_unreaped %zu\n"
	    "# TYPE agentd_sessions_oom_killed_total counter\n"
	    "agentd_sessions_oom_killed_total %" PRIu64 "\n"
	    "# TYPE agentd_cgroup_kills_total counter\n"
	    "agentd_cgroup_kills_total %" PRIu64 "\n"
	    "# TYPE agentd_uptime_seconds gauge\n"
	    "agentd_uptime_seconds %.3f\n",
	    session_count_running(), session_count(),
	    agentd_stats.sessions_started, agentd_stats.sessions_spawn_failed,
	    session_count_starting(), agentd_stats.sessions_spawn_timeouts,
	    spawner_abandoned(), agentd_stats.output_bytes, dropped,
	    agentd_stats.output_cuts, agentd_stats.output_held,
	    agentd_stats.output_hold_expired, held,
	    session_ring_bytes_total(), session_pipe_bytes(),
	    agentd_stats.zombies_reaped,
	    session_bytes_total(), api_cfg->max_session_bytes,
	    outq_bytes(), outq_max(),
	    session_count_unreaped(),
	    agentd_stats.sessions_oom_killed, agentd_stats.cgroup_kills,
	    (clock_mono_ms() - api_start_ms) / 1000.0);
	conn_metrics(&b);
	restore_metrics(&b);
	upgrade_metrics(&b);
	events_metrics(&b);
	sse_metrics(&b);
	cast_metrics(&b);
	proto_buf_printf(&b, "# TYPE agentd_cast_resizes_max gauge\n"
	    "agentd_cast_resizes_max %" PRIu64 "\n", api_cfg->cast_resizes);
	webdir_metrics(&b);
	/* libevent's freed buffers kept for reuse (musl only; evmem.h). */
	proto_buf_printf(&b, "# TYPE agentd_evmem_kept_bytes gauge\n"
	    "agentd_evmem_kept_bytes %zu\n", evmem_kept());
	mcp_metrics(&b);
	files_running(&calls, &fetches);
	proto_buf_printf(&b,
	    "# TYPE agentd_file_calls gauge\n"
	    "agentd_file_calls %zu\n"
	    "# TYPE agentd_file_calls_max gauge\n"
	    "agentd_file_calls_max %" PRIu64 "\n"
	    "# TYPE agentd_fetches gauge\n"
	    "agentd_fetches %zu\n"
	    "# TYPE agentd_fetches_max gauge\n"
	    "agentd_fetches_max %d\n"
	    "# TYPE agentd_fetch_bytes_max gauge\n"
	    "agentd_fetch_bytes_max %" PRIu64 "\n",
	    calls, api_cfg->max_file_jobs, fetches, FILES_FETCH_MAX,
	    api_cfg->max_fetch_bytes);
	ports_metrics(&b);
	envd_metrics(&b);
	fs_metrics(&b);
	proto_buf_printf(&b, "# TYPE agentd_http_requests_total counter\n");
	n = http_code_counts(&codes);
	for (i = 0; i < n; i++)
		proto_buf_printf(&b, "agentd_http_requests_total{code=\"%d\"} "
		    "%" PRIu64 "\n", codes[i].code, codes[i].count);
	http_reply_raw(hr->req, 200, "text/plain; version=0.0.4", &b);
}
