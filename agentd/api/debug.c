/*
 * debug.c -- GET /debug/stat and GET /debug/logs (unix socket only), and
 * the timer that measures the event loop's lag.
 */
#include <sys/resource.h>
#include <sys/types.h>

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>

#include "api.h"
#include "cgroup.h"
#include "companion.h"
#include "config.h"
#include "conn.h"
#include "debug.h"
#include "forward.h"
#include "http.h"
#include "log.h"
#include "proto.h"
#include "ringbuf.h"
#include "session.h"
#include "sessions.h"
#include "stats.h"
#include "stop.h"
#include "util.h"

/* The lag timer's figures, in microseconds. */
struct debug_lag {
	struct event	*ev;
	int64_t		 due_us;	/* when the pending fire is due */
	int64_t		 since_ms;	/* monotonic ms of the first arming */
	int64_t		 last_us;
	int64_t		 max_us;
	int64_t		 sum_us;
	uint64_t	 samples;
};

static struct debug_lag	 lag;
static struct event_base	*debug_base;	/* the loop */
static int64_t			 debug_start_ms;	/* monotonic */
static const struct config	*debug_cfg;	/* the budgets */

static int64_t	debug_mono_us(void);
static void	debug_lag_start(void);
static void	debug_lag_arm(void);
static void	debug_lag_cb(evutil_socket_t, short, void *);
static long	debug_count_fds(void);
static long	debug_rss_bytes(long *vsz);
static void	debug_stat(struct http_req *);
static void	debug_stat_sessions(struct proto_buf *);
static void	debug_logs(struct http_req *);
static void	debug_log_json(const char *, void *);
static void	debug_log_text(const char *, void *);

/* Microseconds of CLOCK_MONOTONIC. */
static int64_t
debug_mono_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

/* Arm the lag timer for one interval from now. */
static void
debug_lag_arm(void)
{
	struct timeval	tv;

	lag.due_us = debug_mono_us() + DEBUG_LAG_INTERVAL_MS * 1000;
	evtimer_add(lag.ev, timeval_ms(&tv, DEBUG_LAG_INTERVAL_MS));
}

/* The lag timer fired: how late it is is how long the loop was busy. */
static void
debug_lag_cb(evutil_socket_t fd, short events, void *arg)
{
	int64_t	late = debug_mono_us() - lag.due_us;

	if (late < 0)
		late = 0;
	lag.last_us = late;
	if (late > lag.max_us)
		lag.max_us = late;
	lag.sum_us += late;
	lag.samples++;
	debug_lag_arm();
}

/* Set the loop and agentd's start (monotonic). */
void
debug_init(struct event_base *base, const struct config *cfg,
    int64_t start_ms)
{
	debug_cfg = cfg;
	debug_base = base;
	debug_start_ms = start_ms;
}

/* Start measuring the lag. */
static void
debug_lag_start(void)
{
	if (lag.ev != NULL || debug_base == NULL)
		return;
	if ((lag.ev = evtimer_new(debug_base, debug_lag_cb, NULL)) == NULL)
		fatal("%s: out of memory", __func__);
	lag.since_ms = clock_mono_ms();
	debug_lag_arm();
	log_debug("%s: measuring the loop lag every %d ms", __func__,
	    DEBUG_LAG_INTERVAL_MS);
}

/* Stop the timer. */
void
debug_free(void)
{
	if (lag.ev != NULL)
		event_free(lag.ev);
	memset(&lag, 0, sizeof lag);
}

/* Open fds of agentd, or -1 without /proc. */
static long
debug_count_fds(void)
{
	DIR		*d;
	struct dirent	*de;
	long		 n = 0;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return (-1);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] != '.')
			n++;
	}
	closedir(d);
	return (n - 1);		/* the directory's own fd */
}

/* Resident bytes (and virtual bytes in *vsz), or -1 without /proc. */
static long
debug_rss_bytes(long *vsz)
{
	FILE	*f;
	long	 size, resident, page = sysconf(_SC_PAGESIZE);
	int	 n;

	*vsz = -1;
	if ((f = fopen("/proc/self/statm", "re")) == NULL)
		return (-1);
	n = fscanf(f, "%ld %ld", &size, &resident);
	fclose(f);
	if (n != 2)
		return (-1);
	*vsz = size * page;
	return (resident * page);
}

/* Route /debug/... */
void
debug_route(struct http_req *hr)
{
	debug_lag_start();
	if (strcmp(hr->path, "/debug/stat") != 0 &&
	    strcmp(hr->path, "/debug/logs") != 0) {
		http_fail(hr->req, 404, "not_found", "no route %s", hr->path);
		return;
	}
	if (hr->method != EVHTTP_REQ_GET) {
		http_fail(hr->req, 405, "method_not_allowed",
		    "method not allowed on %s", hr->path);
		return;
	}
	if (strcmp(hr->path, "/debug/stat") == 0)
		debug_stat(hr);
	else
		debug_logs(hr);
}

/* The "sessions" array of /debug/stat. */
static void
debug_stat_sessions(struct proto_buf *b)
{
	struct proto_session	 v;
	struct ring_stats	 st;
	struct session		*s;
	const char		*sep = "";

	proto_buf_printf(b, "\"sessions\": [");
	for (s = session_first(); s != NULL; s = session_next(s)) {
		session_view(s, &v);
		ring_stats(session_ring(s), &st);
		proto_buf_printf(b, "%s{\"id\": ", sep);
		proto_buf_json_string(b, v.id, strlen(v.id));
		proto_buf_printf(b, ", \"pid\": %ld, \"state\": \"%s\", "
		    "\"tty\": %s, \"readers\": %zu, \"output_closed\": %s, "
		    "\"ring\": {\"capacity\": %zu, \"slots\": %zu, "
		    "\"held_bytes\": %" PRIu64 ", \"held_chunks\": %" PRIu64 ", "
		    "\"oldest\": %" PRIu64 ", \"newest\": %" PRIu64 ", "
		    "\"total_bytes\": %" PRIu64 ", "
		    "\"dropped_chunks\": %" PRIu64 ", "
		    "\"dropped_bytes\": %" PRIu64 "}}",
		    v.pid, v.exited ? "exited" : "running",
		    v.tty ? "true" : "false", sessions_waiter_count(s),
		    session_output_closed(s) ? "true" : "false",
		    st.capacity, st.slots, st.bytes_held,
		    st.newest >= st.oldest ? st.newest - st.oldest + 1 : 0,
		    st.oldest, st.newest, st.bytes_total, st.chunks_dropped,
		    st.bytes_dropped);
		sep = ", ";
	}
	proto_buf_printf(b, "]");
}

/* GET /debug/stat */
static void
debug_stat(struct http_req *hr)
{
	struct proto_buf	b = { 0 };
	struct rlimit		rl;
	long			rss, vsz, fd_limit = -1;
	int64_t			now = clock_mono_ms();

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		fd_limit = (long)rl.rlim_cur;
	rss = debug_rss_bytes(&vsz);
	proto_buf_printf(&b, "{\"pid\": %ld, \"version\": \"%s\", "
	    "\"uptime_ms\": %" PRId64 ", \"stopping\": %s, "
	    "\"fds\": %ld, \"fd_limit\": %ld, "
	    "\"rss_bytes\": %ld, \"vsz_bytes\": %ld, ",
	    (long)getpid(), AGENTD_VERSION, now - debug_start_ms,
	    agentd_stopping() ? "true" : "false", debug_count_fds(), fd_limit,
	    rss, vsz);
	proto_buf_printf(&b, "\"loop_lag\": {\"interval_ms\": %d, "
	    "\"last_ms\": %.3f, \"max_ms\": %.3f, \"avg_ms\": %.3f, "
	    "\"samples\": %" PRIu64 ", \"measured_ms\": %" PRId64 "}, ",
	    DEBUG_LAG_INTERVAL_MS, lag.last_us / 1000.0, lag.max_us / 1000.0,
	    lag.samples > 0 ? lag.sum_us / 1000.0 / lag.samples : 0.0,
	    lag.samples, now - lag.since_ms);
	proto_buf_printf(&b, "\"containment\": \"%s\", ",
	    cgroup_containment());
	proto_buf_printf(&b, "\"companion\": {\"running\": %s, "
	    "\"restarts\": %u}, ",
	    companion_running() ? "true" : "false", companion_restarts());
	proto_buf_printf(&b, "\"connections_open\": %" PRIu64 ", "
	    "\"connections_total\": %" PRIu64 ", "
	    "\"http_requests\": %" PRIu64 ", "
	    "\"sessions_running\": %zu, \"sessions_total\": %zu, "
	    "\"sessions_started\": %" PRIu64 ", "
	    "\"ring_bytes_total\": %" PRIu64 ", "
	    "\"output_bytes\": %" PRIu64 ", "
	    "\"zombies_reaped\": %" PRIu64 ", ",
	    agentd_stats.connections_open, agentd_stats.connections_total,
	    agentd_stats.http_requests, session_count_running(),
	    session_count(), agentd_stats.sessions_started,
	    session_ring_bytes_total(), agentd_stats.output_bytes,
	    agentd_stats.zombies_reaped);
	conn_stat(&b);
	proto_buf_printf(&b, ", ");
	forward_stat(&b);
	proto_buf_printf(&b, ", ");
	/* The budgets as applied; fit: not given, a share of memory_bytes. */
	proto_buf_printf(&b, "\"budgets\": {\"memory_bytes\": %" PRIu64 ", "
	    "\"max_answer_bytes\": {\"bytes\": %" PRIu64 ", \"fit\": %s}, "
	    "\"max_total_ring_bytes\": {\"bytes\": %" PRIu64 ", \"fit\": %s}, "
	    "\"max_session_bytes\": {\"bytes\": %" PRIu64 ", \"fit\": %s}}, ",
	    debug_cfg->fit_memory, debug_cfg->max_answer_bytes,
	    debug_cfg->fit & CONFIG_FIT_ANSWERS ? "true" : "false",
	    debug_cfg->max_total_ring_bytes,
	    debug_cfg->fit & CONFIG_FIT_RINGS ? "true" : "false",
	    debug_cfg->max_session_bytes,
	    debug_cfg->fit & CONFIG_FIT_SESSION ? "true" : "false");
	debug_stat_sessions(&b);
	proto_buf_printf(&b, "}");
	http_reply(hr->req, 200, &b);
}

/* One log line as a JSON array element. */
static void
debug_log_json(const char *line, void *arg)
{
	struct proto_buf	*b = arg;

	if (b->data[b->len - 1] != '[')
		proto_buf_append(b, ", ", 2);
	proto_buf_json_string(b, line, strlen(line));
}

/* One log line as a text line. */
static void
debug_log_text(const char *line, void *arg)
{
	struct proto_buf	*b = arg;

	proto_buf_append(b, line, strlen(line));
	proto_buf_append(b, "\n", 1);
}

/* GET /debug/logs[?format=text] */
static void
debug_logs(struct http_req *hr)
{
	struct proto_buf	b = { 0 };

	if (strstr(hr->query, "format=text") != NULL) {
		log_foreach(debug_log_text, &b);
		http_reply_raw(hr->req, 200, "text/plain; charset=utf-8", &b);
		return;
	}
	proto_buf_printf(&b, "{\"capacity\": %d, \"lines\": [",
	    LOG_RING_LINES);
	if (b.oom) {
		proto_buf_free(&b);
		fatal("%s: out of memory", __func__);
	}
	log_foreach(debug_log_json, &b);
	proto_buf_append(&b, "]}", 2);
	http_reply(hr->req, 200, &b);
}
