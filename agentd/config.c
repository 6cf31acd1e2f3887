/*
 * config.c -- flags, environment and kernel command line into a struct config.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "proto.h"
#include "util.h"

enum opt_kind {
	OPT_STRING,	/* char * */
	OPT_LIST,	/* char ** (repeatable) */
	OPT_SIZE,	/* uint64_t bytes */
	OPT_COUNT,	/* uint64_t */
	OPT_SECONDS,	/* int64_t ms; a plain number is seconds */
	OPT_MILLIS,	/* int64_t ms; a plain number is milliseconds */
	OPT_SHUTDOWN,	/* int: poweroff|reboot */
	OPT_ADJ,	/* int: an oom_score_adj, -1000..1000 */
	OPT_PROFILE,	/* int: PROTO_PROFILE_* by name */
	OPT_ENCODING,	/* int: PROTO_ENC_* by name */
	OPT_BOOL,	/* int: 0|1 */
};

struct opt {
	const char	*name;		/* the flag without "--" */
	enum opt_kind	 kind;
	size_t		 off;		/* offset in struct config */
	uint64_t	 min, max;	/* range of numbers */
	const char	*arg;		/* for --help */
	const char	*help;
};

#define OFF(f)	offsetof(struct config, f)
static const struct opt opts[] = {
	{ "listen", OPT_LIST, OFF(listen), 0, 0, "ADDR:PORT",
	  "TCP address to serve (repeatable; default " CONFIG_LISTEN_DEFAULT
	  ", and [::]:49984 by --dual-stack)" },
	{ "envd-listen", OPT_LIST, OFF(envd_listen), 0, 0, "ADDR:PORT",
	  "TCP address serving envd's protocol, for the E2B SDKs "
	  "(repeatable; default none; docs/envd-sdk.md)" },
	{ "envd-vsock-listen", OPT_LIST, OFF(envd_vsock_listen), 0, 0, "PORT",
	  "AF_VSOCK port serving envd's protocol on any CID, as "
	  "--envd-listen (repeatable; default none)" },
	{ "envd-max-message", OPT_SIZE, OFF(envd_max_message), 1024,
	  1ull << 30, "BYTES", "largest Connect message of the envd "
	  "listener, in or out (default 4MiB)" },
	{ "envd-watchers", OPT_COUNT, OFF(envd_watchers), 0, 100000, "N",
	  "envd CreateWatcher watchers alive at once (default 64)" },
	{ "envd-watch-dirs", OPT_COUNT, OFF(envd_watch_dirs), 1, 1000000, "N",
	  "folders one envd watch follows, recursive ones included "
	  "(default 8192)" },
	{ "envd-watch-events", OPT_COUNT, OFF(envd_watch_events), 1, 1000000,
	  "N", "events an envd watcher or WatchDir stream holds untaken "
	  "(default 4096; more: resource_exhausted)" },
	{ "envd-max-upload", OPT_SIZE, OFF(envd_max_upload), 0, 1ull << 50,
	  "BYTES", "largest body of envd's POST /files, kept on disk in "
	  "--envd-spool-dir when over --max-body (default 1GiB; more: 413; 0: "
	  "none spooled, --max-body holds)" },
	{ "envd-spool-dir", OPT_STRING, OFF(envd_spool_dir), 0, 0, "DIR",
	  "folder of the unlinked files holding envd uploads over --max-body "
	  "(default " CONFIG_ENVD_SPOOL_DIR_DEFAULT "; full: 507)" },
	{ "envd-confine-files", OPT_BOOL, OFF(envd_confine_files), 0, 1,
	  "0|1", "envd's file calls act as the call's user (1), or as envd's "
	  "do: as root, what they make given to the user (default 0)" },
	{ "socket", OPT_STRING, OFF(socket_path), 0, 0, "PATH",
	  "unix socket, mode 0600 (default " CONFIG_SOCKET_DEFAULT
	  "; '' disables)" },
	{ "vsock-listen", OPT_LIST, OFF(vsock_listen), 0, 0, "PORT",
	  "AF_VSOCK port to serve on any CID, as TCP (repeatable; default "
	  "none; as PID 1 also agentd.vsock=PORT on the kernel command line)" },
	{ "token-file", OPT_STRING, OFF(token_file), 0, 0, "PATH",
	  "file holding the bearer token for TCP and vsock requests (else "
	  "AGENTD_TOKEN)" },
	{ "workdir", OPT_STRING, OFF(workdir), 0, 0, "DIR",
	  "default cwd of sessions (default: agentd's cwd)" },
	{ "max-sessions", OPT_COUNT, OFF(max_sessions), 1, 1000000, "N",
	  "running sessions at most (default 256)" },
	{ "exited-ttl", OPT_SECONDS, OFF(exited_ttl_ms), 0, INT64_MAX, "SECONDS",
	  "keep an exited session this long (default 600; units ms/s/m/h)" },
	{ "max-body", OPT_SIZE, OFF(max_body), 1024, 1ull << 40, "BYTES",
	  "largest request body (default 8MiB)" },
	{ "ring-bytes", OPT_SIZE, OFF(ring_bytes), 4096, 64u << 20, "BYTES",
	  "output ring of a session (default 1MiB)" },
	{ "max-ring-bytes", OPT_SIZE, OFF(max_ring_bytes), 4096, 64u << 20, "BYTES",
	  "largest ring_bytes a request may ask for (default 64MiB)" },
	{ "max-total-ring-bytes", OPT_SIZE, OFF(max_total_ring_bytes), 4096,
	  1ull << 40, "BYTES",
	  "rings of all sessions together at most (default 1GiB)" },
	{ "stdin-buffer", OPT_SIZE, OFF(stdin_buffer), 1, 1ull << 32, "BYTES",
	  "stdin queued and unread per session at most (default 1MiB)" },
	{ "pipe-bytes", OPT_SIZE, OFF(pipe_bytes), 0, 64u << 20, "BYTES",
	  "kernel buffer of a pipe session's stdout and stderr, applied with "
	  "CAP_SYS_RESOURCE or CAP_SYS_ADMIN only (default 1MiB; 0 keeps the "
	  "kernel's 64KiB)" },
	{ "utf8-hold", OPT_MILLIS, OFF(utf8_hold_ms), 0, 1000, "MS",
	  "how long a chunk's last bytes wait for the rest of their UTF-8 "
	  "character (default 10; 0: no wait)" },
	{ "session-memory", OPT_SIZE, OFF(session_memory), 0, 1ull << 50,
	  "BYTES", "memory.max of each session's cgroup, no swap (default 0: "
	  "none); a request's limits.memory_bytes replaces it" },
	{ "session-pids", OPT_COUNT, OFF(session_pids), 0, 4194304, "N",
	  "pids.max of each session's cgroup (default 0: none)" },
	{ "session-cpu", OPT_COUNT, OFF(session_cpu), 0, 100000, "PERCENT",
	  "cpu.max of each session's cgroup, 100 is one CPU (default 0: none)" },
	{ "session-oom-score-adj", OPT_ADJ, OFF(session_oom_score_adj), 0, 0,
	  "N", "oom_score_adj of each session's process, -1000..1000 (default "
	  "0; agentd's own is -1000)" },
	{ "self-memory-min", OPT_SIZE, OFF(self_memory_min), 0, 1ull << 40,
	  "BYTES", "memory.min of agentd's own cgroup (default 16MiB)" },
	{ "self-cpu-weight", OPT_COUNT, OFF(self_cpu_weight), 1, 10000, "N",
	  "cpu.weight of agentd's own cgroup; the sessions' parent has 100 "
	  "(default 1000)" },
	{ "shutdown-grace", OPT_MILLIS, OFF(shutdown_grace_ms), 0, 3600000, "MS",
	  "SIGTERM to SIGKILL on shutdown (default 5000; units ms/s/m)" },
	{ "upgrade-ready-timeout", OPT_MILLIS, OFF(upgrade_ready_ms), 100,
	  3600000, "MS", "a live upgrade's new agentd must have taken the state "
	  "over within this, else it execs the old binary again (default "
	  "60000; units ms/s/m)" },
	{ "shutdown", OPT_SHUTDOWN, OFF(shutdown_reboot), 0, 0, "poweroff|reboot",
	  "as PID 1, how to end the machine (default poweroff)" },
	{ "max-connections", OPT_COUNT, OFF(max_connections), 1, 1000000, "N",
	  "HTTP connections held at most, TCP, the unix socket and vsock "
	  "each; one more closes the oldest that has not sent the token, else gets 503 "
	  "and a close (default 16384)" },
	{ "idle-timeout", OPT_MILLIS, OFF(idle_timeout_ms), 100, 86400000, "MS",
	  "close a connection idle between requests after this (default 120000;"
	  " units ms/s/m)" },
	{ "header-timeout", OPT_MILLIS, OFF(header_timeout_ms), 100, 86400000,
	  "MS", "the first request must arrive whole within this of the "
	  "connect, later ones within --idle-timeout plus this (default 10000;"
	  " units ms/s/m)" },
	{ "max-headers", OPT_COUNT, OFF(max_headers), 8, 10000, "N",
	  "header lines of a request at most; one more gets 431 and a close "
	  "(default 100)" },
	{ "preauth-timeout", OPT_MILLIS, OFF(preauth_timeout_ms), 100,
	  86400000, "MS", "with a token, a TCP or vsock connection that "
	  "has not sent it yet must send a request within this of its start "
	  "or its last answer, if shorter than --header-timeout (default "
	  "5000; units ms/s/m)" },
	{ "max-peer-unproven", OPT_COUNT, OFF(max_peer_unproven), 1, 1000000,
	  "N", "with a token, TCP or vsock connections of one peer address "
	  "(IPv6: its /64; vsock: its CID) that have not sent it yet, at most; one more closes the "
	  "peer's oldest that has nothing unread with a 503 (default 256)" },
	{ "dual-stack", OPT_COUNT, OFF(dual_stack), 0, 1, "0|1",
	  "also listen on the other family's twin of a wildcard or loopback "
	  "--listen ([::] for 0.0.0.0, [::1] for 127.0.0.1), and refuse to "
	  "start when it is taken (default 1)" },
	{ "ports-interval", OPT_MILLIS, OFF(ports_interval_ms), 20, 60000, "MS",
	  "refresh the listening sockets this often while a GET /v1/ports "
	  "waits for a port (default 250; units ms/s)" },
	{ "ports-feed-interval", OPT_MILLIS, OFF(ports_feed_interval_ms), 0,
	  60000, "MS", "otherwise this often, for the port.opened and "
	  "port.closed events (default 1000; 0: only while asked)" },
	{ "max-file-jobs", OPT_COUNT, OFF(max_file_jobs), 1, 100000, "N",
	  "GET, PUT and stat calls of /v1/files running at once, each on a "
	  "thread; one more gets 429 (default 64)" },
	{ "mcp-sessions", OPT_COUNT, OFF(mcp_sessions), 1, 100000, "N",
	  "MCP sessions (Mcp-Session-Id of /mcp) kept; one more ends the "
	  "least recently used (default 64)" },
	{ "max-fetch-bytes", OPT_SIZE, OFF(max_fetch_bytes), 1, 1ull << 50,
	  "BYTES", "largest download of /v1/files/fetch (default 4GiB)" },
	{ "restore-window", OPT_MILLIS, OFF(restore_window_ms), 0, 3600000,
	  "MS", "signals of a restore (vmgenid, the RTC, POST "
	  "/v1/sandbox/resumed) this close in running time are one restore "
	  "(default 10000; units ms/s/m)" },
	{ "rtc-interval", OPT_MILLIS, OFF(rtc_interval_ms), 0, 3600000, "MS",
	  "check /dev/rtc0 against CLOCK_REALTIME this often to see a restore; "
	  "0 never (default 1000; units ms/s/m)" },
	{ "rtc-drift", OPT_MILLIS, OFF(rtc_drift_ms), 1500, 3600000, "MS",
	  "the RTC moving away from CLOCK_REALTIME by more than this between "
	  "two checks is a restore (default 2000; units ms/s/m)" },
	{ "clock-step", OPT_COUNT, OFF(clock_step), 0, 1, "0|1",
	  "on a restore, step CLOCK_REALTIME to unix_ms or the RTC; 0 leaves "
	  "the clock to the platform (default 1)" },
	{ "restore-probe", OPT_SECONDS, OFF(restore_probe_ms), 1000, 3600000,
	  "SECONDS", "after a restore, TCP connections from before it get a "
	  "keepalive probe this often, three unanswered close them (default "
	  "1; units ms/s/m/h, whole seconds)" },
	{ "max-events", OPT_COUNT, OFF(max_events), 1, 10000000, "N",
	  "events the feed of GET /v1/events holds; the oldest go first "
	  "(default 16384)" },
	{ "events-bytes", OPT_SIZE, OFF(events_bytes), 4096, 1ull << 32,
	  "BYTES", "bytes of events the feed holds at most (default 4MiB)" },
	{ "sse-buffer", OPT_SIZE, OFF(sse_buffer), 4096, 64u << 20, "BYTES",
	  "unsent bytes of a Server-Sent Events stream at most; a reader "
	  "behind waits, and gets a gap when the ring moved on (default "
	  "256KiB)" },
	{ "sse-keepalive", OPT_MILLIS, OFF(sse_keepalive_ms), 10, 3600000,
	  "MS", "a comment line on each Server-Sent Events stream this often "
	  "(default 15000; units ms/s/m)" },
	{ "max-answer-bytes", OPT_SIZE, OFF(max_answer_bytes), 1u << 20,
	  1ull << 40, "BYTES", "answers waiting to be read by their clients, "
	  "all together at most; a window or list past it gets 503 too_busy "
	  "(default 128MiB)" },
	{ "max-session-bytes", OPT_SIZE, OFF(max_session_bytes), 1u << 20,
	  1ull << 40, "BYTES", "argv, cwd and user of every session kept "
	  "(running, starting and exited) together at most; a create past it "
	  "gets 429 session_budget_exceeded (default 64MiB)" },
	{ "spawn-threads", OPT_COUNT, OFF(spawn_threads), 1, 256, "N",
	  "threads that spawn sessions' processes, so many creates run at "
	  "once; more wait their turn (default 4)" },
	{ "spawn-timeout", OPT_MILLIS, OFF(spawn_timeout_ms), 100, 3600000,
	  "MS", "a create whose process has not exec'd within this (its "
	  "queue time too) gets 504 spawn_timeout; a late child is killed "
	  "(default 30000; units ms/s/m)" },
	{ "hostname", OPT_STRING, OFF(hostname), 0, 0, "NAME",
	  "as PID 1, set the hostname (default: keep)" },
	{ "env", OPT_LIST, OFF(env), 0, 0, "NAME=VALUE",
	  "a variable every session gets under its request's env "
	  "(repeatable; wins over --env-file)" },
	{ "env-file", OPT_STRING, OFF(env_file), 0, 0, "PATH",
	  "NAME=VALUE lines every session gets under its request's env "
	  "('#' comments and blank lines skipped)" },
	{ "profile", OPT_PROFILE, OFF(profile), 0, 0, "noninteractive|default",
	  "the environment of sessions whose create names no profile: "
	  "noninteractive sets TERM=dumb (pipes), NO_COLOR=1, PAGER=cat, "
	  "GIT_PAGER=cat, GH_PAGER=cat, LC_ALL=C.UTF-8 and gives pipe "
	  "sessions /dev/null as stdin (default: default, none of that)" },
	{ "encoding", OPT_ENCODING, OFF(encoding), 0, 0, "base64|text",
	  "how JSON reads carry output when the request names no encoding: "
	  "base64 \"data\", or \"text\" for chunks that are UTF-8 (default "
	  "base64)" },
	{ "web-dir", OPT_STRING, OFF(web_dir), 0, 0, "DIR",
	  "folder of the web terminal's files, served at /term/ without the "
	  "token (default " CONFIG_WEB_DIR_DEFAULT " when it exists; '' "
	  "disables)" },
	{ "web-file-max", OPT_SIZE, OFF(web_file_max), 1024, 1ull << 30,
	  "BYTES", "largest file served from --web-dir; a larger one is 404 "
	  "(default 8MiB)" },
	{ "cast-resizes", OPT_COUNT, OFF(cast_resizes), 0, 1000000, "N",
	  "resizes of a session kept for its recording (/cast), the last ones "
	  "(default 1024)" },
	{ "log-level", OPT_STRING, OFF(log_level), 0, 0, "LEVEL",
	  "debug, info, warn or error (default info)" },
};
#undef OFF

/* Where a setting came from, lowest precedence first. */
enum source {
	SOURCE_DEFAULT,
	SOURCE_CMDLINE,
	SOURCE_ENV,
	SOURCE_FLAG,
};

static int	config_set(struct config *, const struct opt *, const char *,
		    enum source, enum source *);
static int	config_read_token(struct config *);
static void	config_usage(FILE *);
static void	config_defaults(struct config *);
static char	*config_env_name(const struct opt *);
static int	config_env_add(struct config *, size_t *, const char *,
		    const char *, unsigned);
static int	config_env_defaults(struct config *);
static int	config_vsock_alias(struct config *, const char *,
		    enum source *);

/* Set the defaults. */
static void
config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->listen = xcalloc(2, sizeof *cfg->listen);
	cfg->listen[0] = xstrdup(CONFIG_LISTEN_DEFAULT);
	cfg->env = xcalloc(1, sizeof *cfg->env);
	cfg->vsock_listen = xcalloc(1, sizeof *cfg->vsock_listen);
	cfg->envd_listen = xcalloc(1, sizeof *cfg->envd_listen);
	cfg->envd_vsock_listen = xcalloc(1, sizeof *cfg->envd_vsock_listen);
	cfg->envd_max_message = CONFIG_ENVD_MAX_MESSAGE_DEFAULT;
	cfg->envd_watchers = CONFIG_ENVD_WATCHERS_DEFAULT;
	cfg->envd_watch_dirs = CONFIG_ENVD_WATCH_DIRS_DEFAULT;
	cfg->envd_watch_events = CONFIG_ENVD_WATCH_EVENTS_DEFAULT;
	cfg->envd_max_upload = CONFIG_ENVD_MAX_UPLOAD_DEFAULT;
	cfg->envd_spool_dir = xstrdup(CONFIG_ENVD_SPOOL_DIR_DEFAULT);
	cfg->socket_path = xstrdup(CONFIG_SOCKET_DEFAULT);
	cfg->log_level = xstrdup("info");
	cfg->max_sessions = CONFIG_MAX_SESSIONS_DEFAULT;
	cfg->exited_ttl_ms = CONFIG_EXITED_TTL_DEFAULT;
	cfg->max_body = CONFIG_MAX_BODY_DEFAULT;
	cfg->ring_bytes = CONFIG_RING_BYTES_DEFAULT;
	cfg->max_ring_bytes = CONFIG_MAX_RING_BYTES_DEFAULT;
	cfg->max_total_ring_bytes = CONFIG_MAX_TOTAL_RING_DEFAULT;
	cfg->stdin_buffer = CONFIG_STDIN_BUFFER_DEFAULT;
	cfg->pipe_bytes = CONFIG_PIPE_BYTES_DEFAULT;
	cfg->utf8_hold_ms = CONFIG_UTF8_HOLD_DEFAULT;
	cfg->shutdown_grace_ms = CONFIG_SHUTDOWN_GRACE_DEFAULT;
	cfg->upgrade_ready_ms = CONFIG_UPGRADE_READY_DEFAULT;
	cfg->max_connections = CONFIG_MAX_CONNECTIONS_DEFAULT;
	cfg->idle_timeout_ms = CONFIG_IDLE_TIMEOUT_DEFAULT;
	cfg->header_timeout_ms = CONFIG_HEADER_TIMEOUT_DEFAULT;
	cfg->max_headers = CONFIG_MAX_HEADERS_DEFAULT;
	cfg->dual_stack = 1;
	cfg->preauth_timeout_ms = CONFIG_PREAUTH_TIMEOUT_DEFAULT;
	cfg->max_peer_unproven = CONFIG_MAX_PEER_UNPROVEN_DEFAULT;
	cfg->max_file_jobs = CONFIG_MAX_FILE_JOBS_DEFAULT;
	cfg->ports_interval_ms = CONFIG_PORTS_INTERVAL_DEFAULT;
	cfg->ports_feed_interval_ms = CONFIG_PORTS_FEED_INTERVAL_DEFAULT;
	cfg->max_fetch_bytes = CONFIG_MAX_FETCH_BYTES_DEFAULT;
	cfg->restore_window_ms = CONFIG_RESTORE_WINDOW_DEFAULT;
	cfg->rtc_interval_ms = CONFIG_RTC_INTERVAL_DEFAULT;
	cfg->rtc_drift_ms = CONFIG_RTC_DRIFT_DEFAULT;
	cfg->clock_step = 1;
	cfg->restore_probe_ms = CONFIG_RESTORE_PROBE_DEFAULT;
	cfg->max_events = CONFIG_MAX_EVENTS_DEFAULT;
	cfg->events_bytes = CONFIG_EVENTS_BYTES_DEFAULT;
	cfg->sse_buffer = CONFIG_SSE_BUFFER_DEFAULT;
	cfg->web_file_max = CONFIG_WEB_FILE_MAX_DEFAULT;
	cfg->cast_resizes = CONFIG_CAST_RESIZES_DEFAULT;
	cfg->sse_keepalive_ms = CONFIG_SSE_KEEPALIVE_DEFAULT;
	cfg->mcp_sessions = CONFIG_MCP_SESSIONS_DEFAULT;
	cfg->self_memory_min = CONFIG_SELF_MEMORY_MIN_DEFAULT;
	cfg->self_cpu_weight = CONFIG_SELF_CPU_WEIGHT_DEFAULT;
	cfg->spawn_threads = CONFIG_SPAWN_THREADS_DEFAULT;
	cfg->max_answer_bytes = CONFIG_MAX_ANSWER_BYTES_DEFAULT;
	cfg->max_session_bytes = CONFIG_MAX_SESSION_BYTES_DEFAULT;
	cfg->spawn_timeout_ms = CONFIG_SPAWN_TIMEOUT_DEFAULT;
}

/* "max-sessions" -> "AGENTD_MAX_SESSIONS". */
static char *
config_env_name(const struct opt *o)
{
	char	*name, *p;

	xasprintf(&name, "AGENTD_%s", o->name);
	for (p = name; *p != '\0'; p++)
		*p = *p == '-' ? '_' : toupper((unsigned char)*p);
	return (name);
}

/* Apply one value of o from src, unless a higher source already set it. */
static int
config_set(struct config *cfg, const struct opt *o, const char *value,
    enum source src, enum source *seen)
{
	void		*field = (char *)cfg + o->off;
	uint64_t	 u;
	int64_t		 ms;
	long		 adj;
	size_t		 n;
	char		***list, *end;

	if (*seen > src)
		return (0);
	switch (o->kind) {
	case OPT_STRING:
		free(*(char **)field);
		*(char **)field = xstrdup(value);
		break;
	case OPT_LIST:
		list = field;
		if (*seen < src) {
			for (n = 0; (*list)[n] != NULL; n++)
				free((*list)[n]);
			(*list)[0] = NULL;
		}
		for (n = 0; (*list)[n] != NULL; n++)
			;
		*list = xrealloc(*list, (n + 2) * sizeof **list);
		(*list)[n] = xstrdup(value);
		(*list)[n + 1] = NULL;
		break;
	case OPT_SIZE:
	case OPT_COUNT:
		if ((o->kind == OPT_COUNT &&
		    strspn(value, "0123456789") != strlen(value)) ||
		    parse_size(value, &u) != 0 || u < o->min || u > o->max) {
			fprintf(stderr, "agentd: --%s: '%s' is not a %s in "
			    "%llu..%llu\n", o->name, value,
			    o->kind == OPT_SIZE ? "size" : "number",
			    (unsigned long long)o->min,
			    (unsigned long long)o->max);
			return (-1);
		}
		*(uint64_t *)field = u;
		break;
	case OPT_SECONDS:
	case OPT_MILLIS:
		if (parse_duration(value, o->kind == OPT_SECONDS ? 1000 : 1,
		    &ms) != 0 || (uint64_t)ms < o->min ||
		    (uint64_t)ms > o->max) {
			fprintf(stderr, "agentd: --%s: '%s' is not a duration\n",
			    o->name, value);
			return (-1);
		}
		*(int64_t *)field = ms;
		break;
	case OPT_ADJ:
		errno = 0;
		adj = strtol(value, &end, 10);
		if (end == value || *end != '\0' || errno != 0 ||
		    adj < -1000 || adj > 1000) {
			fprintf(stderr, "agentd: --%s: '%s' is not a number in "
			    "-1000..1000\n", o->name, value);
			return (-1);
		}
		*(int *)field = (int)adj;
		break;
	case OPT_SHUTDOWN:
		if (strcmp(value, "poweroff") == 0)
			*(int *)field = 0;
		else if (strcmp(value, "reboot") == 0)
			*(int *)field = 1;
		else {
			fprintf(stderr, "agentd: --%s: '%s' is not poweroff or "
			    "reboot\n", o->name, value);
			return (-1);
		}
		break;
	case OPT_BOOL:
		if ((value[0] != '0' && value[0] != '1') || value[1] != '\0') {
			fprintf(stderr, "agentd: --%s: '%s' is not 0 or 1\n",
			    o->name, value);
			return (-1);
		}
		*(int *)field = value[0] - '0';
		break;
	case OPT_PROFILE:
		if ((*(int *)field = proto_profile_number(value)) < 0) {
			fprintf(stderr, "agentd: --%s: '%s' is not "
			    "noninteractive or default\n", o->name, value);
			return (-1);
		}
		break;
	case OPT_ENCODING:
		if ((*(int *)field = proto_encoding(value,
		    strlen(value))) < 0) {
			fprintf(stderr, "agentd: --%s: '%s' is not base64 or "
			    "text\n", o->name, value);
			return (-1);
		}
		break;
	}
	*seen = src;
	return (0);
}

/* Find "key=value" in a kernel command line; a malloc'd value or NULL. */
char *
config_cmdline_get(const char *cmdline, const char *key)
{
	const char	*p = cmdline, *start;
	size_t		 klen = strlen(key), wlen;
	char		*value = NULL, *q;

	while ((start = cmdline_next(&p, &wlen)) != NULL) {
		if (wlen > klen && strncmp(start, key, klen) == 0 &&
		    start[klen] == '=') {
			free(value);	/* the last one wins, as for the kernel */
			value = xmalloc(p - start);
			q = value;
			for (start += klen + 1; start < p; start++) {
				if (*start != '"')
					*q++ = *start;
			}
			*q = '\0';
		}
	}
	return (value);
}

/* Read the token from its file, or take it from the environment. */
static int
config_read_token(struct config *cfg)
{
	char	 buf[4096];
	ssize_t	 n;
	size_t	 len = 0;
	int	 fd;

	if (cfg->token_file == NULL || *cfg->token_file == '\0')
		return (0);
	if ((fd = open(cfg->token_file, O_RDONLY | O_CLOEXEC)) == -1) {
		fprintf(stderr, "agentd: --token-file %s: %s\n", cfg->token_file,
		    strerror(errno));
		return (-1);
	}
	while (len < sizeof buf &&
	    (n = read(fd, buf + len, sizeof buf - len)) != 0) {
		if (n == -1) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "agentd: --token-file %s: %s\n",
			    cfg->token_file, strerror(errno));
			close(fd);
			return (-1);
		}
		len += n;
	}
	close(fd);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
	    buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	if (len == 0 || len == sizeof buf) {
		fprintf(stderr, "agentd: --token-file %s: %s\n", cfg->token_file,
		    len == 0 ? "empty (after trimming trailing whitespace): no "
		    "token to check" : "too long");
		return (-1);
	}
	/* A NUL would end the token early: "abc\0..." would accept "abc". */
	if (memchr(buf, '\0', len) != NULL) {
		fprintf(stderr, "agentd: --token-file %s: holds a NUL byte (at "
		    "offset %zu): not a token\n", cfg->token_file,
		    (size_t)((char *)memchr(buf, '\0', len) - buf));
		explicit_bzero(buf, sizeof buf);
		return (-1);
	}
	free(cfg->token);
	cfg->token = xmalloc(len + 1);
	memcpy(cfg->token, buf, len);
	cfg->token[len] = '\0';
	cfg->token_len = len;
	explicit_bzero(buf, sizeof buf);
	return (0);
}

/*
 * Add "NAME=VALUE" to the default environment (replacing an earlier NAME),
 * or say on stderr why it is not one (from: the flag or file, line: > 0 in
 * a file).
 */
static int
config_env_add(struct config *cfg, size_t *n, const char *kv,
    const char *from, unsigned line)
{
	const char	*eq = strchr(kv, '=');
	size_t		 klen, i;

	klen = eq != NULL ? (size_t)(eq - kv) : 0;
	if (klen == 0) {
		if (line > 0)
			fprintf(stderr, "agentd: %s line %u: not NAME=VALUE\n",
			    from, line);
		else
			fprintf(stderr, "agentd: %s '%s': not NAME=VALUE\n",
			    from, kv);
		return (-1);
	}
	for (i = 0; i < *n; i++) {
		if (strncmp(cfg->env_defaults[i], kv, klen + 1) == 0)
			break;
	}
	if (i < *n)
		free(cfg->env_defaults[i]);
	else {
		cfg->env_defaults = xrealloc(cfg->env_defaults,
		    (*n + 2) * sizeof *cfg->env_defaults);
		cfg->env_defaults[(*n)++] = NULL;
		cfg->env_defaults[*n] = NULL;
	}
	cfg->env_defaults[i] = xstrdup(kv);
	return (0);
}

/*
 * Build the sessions' default environment: --env-file's lines, then --env
 * over them.  Lines are NAME=VALUE as they stand (no quotes, no expansion);
 * blank lines and lines starting with '#' are skipped.
 */
static int
config_env_defaults(struct config *cfg)
{
	FILE		*f;
	char		*line = NULL;
	size_t		 cap = 0, n = 0, i;
	ssize_t		 len;
	unsigned	 lineno = 0;
	int		 error = 0;

	cfg->env_defaults = xcalloc(1, sizeof *cfg->env_defaults);
	if (cfg->env_file != NULL && *cfg->env_file != '\0') {
		if ((f = fopen(cfg->env_file, "re")) == NULL) {
			fprintf(stderr, "agentd: --env-file %s: %s\n",
			    cfg->env_file, strerror(errno));
			return (-1);
		}
		while (error == 0 && (len = getline(&line, &cap, f)) != -1) {
			lineno++;
			while (len > 0 && (line[len - 1] == '\n' ||
			    line[len - 1] == '\r'))
				line[--len] = '\0';
			if (len == 0 || line[0] == '#')
				continue;
			error = config_env_add(cfg, &n, line, cfg->env_file,
			    lineno);
		}
		if (error == 0 && ferror(f)) {
			fprintf(stderr, "agentd: --env-file %s: %s\n",
			    cfg->env_file, strerror(errno));
			error = -1;
		}
		free(line);
		fclose(f);
	}
	for (i = 0; error == 0 && cfg->env[i] != NULL; i++)
		error = config_env_add(cfg, &n, cfg->env[i], "--env", 0);
	return (error);
}

/*
 * agentd.vsock=PORT on the kernel command line: one more --vsock-listen
 * port from the command line (beside agentd.vsock-listen=).
 */
static int
config_vsock_alias(struct config *cfg, const char *value, enum source *seen)
{
	size_t	i;

	for (i = 0; i < nitems(opts); i++) {
		if (opts[i].off == offsetof(struct config, vsock_listen))
			return (config_set(cfg, &opts[i], value, SOURCE_CMDLINE,
			    &seen[i]));
	}
	return (-1);
}

/* Print the usage, one line per flag. */
static void
config_usage(FILE *f)
{
	char	flag[64];
	size_t	i;

	fprintf(f, "usage: agentd [options] [-- COMMAND ARGS...]\n"
	    "Serves the agentd HTTP API; as PID 1 it is also the init.\n"
	    "COMMAND, if given, runs as a supervised companion service.\n\n");
	for (i = 0; i < nitems(opts); i++) {
		snprintf(flag, sizeof flag, "--%s %s", opts[i].name, opts[i].arg);
		fprintf(f, "  %-34s %s\n", flag, opts[i].help);
	}
	fprintf(f, "  %-34s %s\n  %-34s %s\n", "--version", "print the version",
	    "--help", "print this help");
	fprintf(f, "\nEach flag can also be set as AGENTD_<FLAG> in the "
	    "environment (AGENTD_MAX_SESSIONS=...),\nor as PID 1 as "
	    "agentd.<flag>= on the kernel command line; flags win, then the "
	    "environment.\nThe token: --token-file, else AGENTD_TOKEN, else "
	    "agentd.token= (PID 1).\n");
}

/* Load the configuration from every source. */
int
config_load(struct config *cfg, int argc, char **argv, const char *cmdline)
{
	struct option	 longopts[nitems(opts) + 3];
	enum source	 seen[nitems(opts)];
	char		*env, *name, *v;
	size_t		 i;
	int		 c, idx, error = 0;

	config_defaults(cfg);
	cfg->pid1 = getpid() == 1;
	for (i = 0; i < nitems(opts); i++)
		seen[i] = SOURCE_DEFAULT;

	/* The kernel command line, lowest of the explicit sources. */
	if (cmdline != NULL) {
		for (i = 0; i < nitems(opts); i++) {
			xasprintf(&name, "agentd.%s", opts[i].name);
			v = config_cmdline_get(cmdline, name);
			free(name);
			if (v != NULL && config_set(cfg, &opts[i], v,
			    SOURCE_CMDLINE, &seen[i]) != 0) {
				free(v);
				return (-1);
			}
			free(v);
		}
		cfg->token = config_cmdline_get(cmdline, "agentd.token");
		if ((v = config_cmdline_get(cmdline, "agentd.vsock")) != NULL)
			error = config_vsock_alias(cfg, v, seen);
		free(v);
		if (error != 0)
			return (-1);
	}

	/* The environment. */
	for (i = 0; i < nitems(opts); i++) {
		name = config_env_name(&opts[i]);
		env = getenv(name);
		free(name);
		if (env != NULL && config_set(cfg, &opts[i], env, SOURCE_ENV,
		    &seen[i]) != 0)
			return (-1);
	}
	if ((env = getenv("AGENTD_TOKEN")) != NULL) {
		if (*env != '\0') {
			free(cfg->token);
			cfg->token = xstrdup(env);
		}
		/*
		 * /proc/<pid>/environ shows the block agentd started with, not
		 * environ: blank the value where it lies (a session running as
		 * root could read it there, as PID 1 above all).
		 */
		explicit_bzero(env, strlen(env));
	}
	/* Sessions never see it; they get a clean environment anyway. */
	unsetenv("AGENTD_TOKEN");

	/* The flags. */
	for (i = 0; i < nitems(opts); i++) {
		longopts[i].name = opts[i].name;
		longopts[i].has_arg = required_argument;
		longopts[i].flag = NULL;
		longopts[i].val = 0;
	}
	longopts[i++] = (struct option){ "version", no_argument, NULL, 'V' };
	longopts[i++] = (struct option){ "help", no_argument, NULL, 'h' };
	longopts[i] = (struct option){ NULL, 0, NULL, 0 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "+hV", longopts, &idx)) != -1) {
		switch (c) {
		case 0:
			if (config_set(cfg, &opts[idx], optarg, SOURCE_FLAG,
			    &seen[idx]) != 0)
				return (-1);
			break;
		case 'V':
			printf("agentd %s\n", AGENTD_VERSION);
			return (1);
		case 'h':
			config_usage(stdout);
			return (1);
		default:
			config_usage(stderr);
			return (-1);
		}
	}
	if (optind < argc && strcmp(argv[optind - 1], "--") == 0)
		cfg->companion = &argv[optind];
	else if (optind < argc && cfg->pid1) {
		/* The kernel passes init the words it does not know. */
		fprintf(stderr, "agentd: ignoring arguments from the kernel "
		    "command line (a companion needs \"--\")\n");
	} else if (optind < argc) {
		fprintf(stderr, "agentd: unexpected argument '%s' (a companion "
		    "command goes after \"--\")\n", argv[optind]);
		config_usage(stderr);
		return (-1);
	}

	if (config_read_token(cfg) != 0 || config_env_defaults(cfg) != 0)
		return (-1);
	if (cfg->token != NULL) {
		cfg->token_len = strlen(cfg->token);
		if (cfg->token_len == 0) {
			free(cfg->token);
			cfg->token = NULL;
		}
	}
	/* The budgets not given fit the machine (membudget.h). */
	for (i = 0; i < nitems(opts); i++) {
		if (seen[i] != SOURCE_DEFAULT)
			continue;
		if (opts[i].off == offsetof(struct config, max_answer_bytes))
			cfg->fit |= CONFIG_FIT_ANSWERS;
		else if (opts[i].off == offsetof(struct config, max_total_ring_bytes))
			cfg->fit |= CONFIG_FIT_RINGS;
		else if (opts[i].off == offsetof(struct config, max_session_bytes))
			cfg->fit |= CONFIG_FIT_SESSION;
	}
	if (cfg->ring_bytes > cfg->max_ring_bytes) {
		fprintf(stderr, "agentd: --ring-bytes is larger than "
		    "--max-ring-bytes\n");
		return (-1);
	}
	if (cfg->listen[0] == NULL && *cfg->socket_path == '\0' &&
	    cfg->vsock_listen[0] == NULL) {
		fprintf(stderr, "agentd: nothing to listen on\n");
		return (-1);
	}
	return (0);
}

/* Free the configuration's allocations. */
void
config_free(struct config *cfg)
{
	size_t	i;

	for (i = 0; cfg->listen != NULL && cfg->listen[i] != NULL; i++)
		free(cfg->listen[i]);
	free(cfg->listen);
	for (i = 0; cfg->vsock_listen != NULL && cfg->vsock_listen[i] != NULL;
	    i++)
		free(cfg->vsock_listen[i]);
	free(cfg->vsock_listen);
	for (i = 0; cfg->envd_listen != NULL && cfg->envd_listen[i] != NULL;
	    i++)
		free(cfg->envd_listen[i]);
	free(cfg->envd_listen);
	for (i = 0; cfg->envd_vsock_listen != NULL &&
	    cfg->envd_vsock_listen[i] != NULL; i++)
		free(cfg->envd_vsock_listen[i]);
	free(cfg->envd_vsock_listen);
	for (i = 0; cfg->env != NULL && cfg->env[i] != NULL; i++)
		free(cfg->env[i]);
	free(cfg->env);
	for (i = 0; cfg->env_defaults != NULL && cfg->env_defaults[i] != NULL;
	    i++)
		free(cfg->env_defaults[i]);
	free(cfg->env_defaults);
	free(cfg->env_file);
	free(cfg->socket_path);
	free(cfg->envd_spool_dir);
	free(cfg->token_file);
	free(cfg->web_dir);
	if (cfg->token != NULL)
		explicit_bzero(cfg->token, cfg->token_len);
	free(cfg->token);
	free(cfg->workdir);
	free(cfg->log_level);
	free(cfg->hostname);
	memset(cfg, 0, sizeof *cfg);
}
