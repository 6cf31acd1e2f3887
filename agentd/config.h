/*
 * config.h -- agentd's settings, from flags, the environment and the kernel
 * command line.
 *
 * Precedence: flags > environment (AGENTD_<FLAG>, AGENTD_TOKEN) > kernel
 * command line (agentd.<flag>=, agentd.token=; only when PID 1) > defaults.
 * A list (--listen) given by a source replaces the lists of the sources below.
 * agentd.vsock=PORT on the kernel command line is agentd.vsock-listen=PORT.
 */
#ifndef AGENTD_CONFIG_H
#define AGENTD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CONFIG_LISTEN_DEFAULT		"0.0.0.0:49984"
#define CONFIG_SOCKET_DEFAULT		"/run/agentd.sock"
#define CONFIG_MAX_SESSIONS_DEFAULT	256
#define CONFIG_EXITED_TTL_DEFAULT	(600 * 1000)	/* ms */
#define CONFIG_MAX_BODY_DEFAULT		(8u << 20)	/* bytes */
#define CONFIG_RING_BYTES_DEFAULT	(1u << 20)	/* bytes */
#define CONFIG_MAX_RING_BYTES_DEFAULT	(64u << 20)	/* bytes */
#define CONFIG_MAX_TOTAL_RING_DEFAULT	(1ull << 30)	/* bytes */
#define CONFIG_FIT_ANSWERS	0x1	/* --max-answer-bytes not given */
#define CONFIG_FIT_RINGS	0x2	/* --max-total-ring-bytes */
#define CONFIG_FIT_SESSION	0x4	/* --max-session-bytes */
#define CONFIG_STDIN_BUFFER_DEFAULT	(1u << 20)	/* bytes */
#define CONFIG_PIPE_BYTES_DEFAULT	(1u << 20)	/* bytes */
#define CONFIG_UTF8_HOLD_DEFAULT	10		/* ms */
#define CONFIG_SHUTDOWN_GRACE_DEFAULT	5000		/* ms */
#define CONFIG_UPGRADE_READY_DEFAULT	60000		/* ms */
#define CONFIG_MAX_CONNECTIONS_DEFAULT	16384	/* TCP; the unix socket and
						   vsock as many each */
#define CONFIG_IDLE_TIMEOUT_DEFAULT	(120 * 1000)	/* ms */
#define CONFIG_HEADER_TIMEOUT_DEFAULT	(10 * 1000)	/* ms */
#define CONFIG_MAX_HEADERS_DEFAULT	100	/* header lines of a request */
#define CONFIG_PREAUTH_TIMEOUT_DEFAULT	(5 * 1000)	/* ms */
#define CONFIG_MAX_PEER_UNPROVEN_DEFAULT 256	/* connections of one peer */
#define CONFIG_MAX_FILE_JOBS_DEFAULT	64	/* files calls running */
#define CONFIG_MCP_SESSIONS_DEFAULT	64	/* MCP sessions kept */
#define CONFIG_MAX_FETCH_BYTES_DEFAULT	(4ull << 30)	/* bytes */
#define CONFIG_RESTORE_WINDOW_DEFAULT	(10 * 1000)	/* ms of running time */
#define CONFIG_RTC_INTERVAL_DEFAULT	1000		/* ms */
#define CONFIG_RTC_DRIFT_DEFAULT	2000		/* ms */
#define CONFIG_RESTORE_PROBE_DEFAULT	1000		/* ms, whole seconds */
#define CONFIG_MAX_EVENTS_DEFAULT	16384	/* events held by the feed */
#define CONFIG_EVENTS_BYTES_DEFAULT	(4u << 20)	/* bytes */
#define CONFIG_SSE_BUFFER_DEFAULT	(256u << 10)	/* bytes */
#define CONFIG_CAST_RESIZES_DEFAULT	1024	/* resizes logged per session */
#define CONFIG_WEB_DIR_DEFAULT		"/usr/share/agentd/web"
#define CONFIG_WEB_FILE_MAX_DEFAULT	(8u << 20)	/* bytes */
#define CONFIG_SSE_KEEPALIVE_DEFAULT	15000	/* ms */
#define CONFIG_PORTS_INTERVAL_DEFAULT	250		/* ms */
#define CONFIG_PORTS_FEED_INTERVAL_DEFAULT 1000		/* ms */
#define CONFIG_SELF_MEMORY_MIN_DEFAULT	(16u << 20)	/* bytes */
#define CONFIG_SELF_CPU_WEIGHT_DEFAULT	1000	/* sessions' parent: 100 */
#define CONFIG_MAX_ANSWER_BYTES_DEFAULT	(128ull << 20)	/* bytes */
#define CONFIG_MAX_SESSION_BYTES_DEFAULT	(64ull << 20)	/* bytes */
#define CONFIG_SPAWN_THREADS_DEFAULT	4	/* spawns running at once */
#define CONFIG_SPAWN_TIMEOUT_DEFAULT	30000	/* ms */

#define CONFIG_ENVD_MAX_MESSAGE_DEFAULT	(4u << 20)	/* bytes */
#define CONFIG_ENVD_WATCHERS_DEFAULT	64	/* CreateWatcher watchers */
#define CONFIG_ENVD_WATCH_DIRS_DEFAULT	8192	/* folders of one watch */
#define CONFIG_ENVD_WATCH_EVENTS_DEFAULT 4096	/* events held untaken */
#define CONFIG_ENVD_MAX_UPLOAD_DEFAULT	(1ull << 30)	/* bytes */
#define CONFIG_ENVD_SPOOL_DIR_DEFAULT	"/tmp"

struct config {
	char		**listen;		/* ADDR:PORT, NULL-terminated */
	char		**envd_listen;		/* envd's ADDR:PORT, NULL-terminated */
	char		**envd_vsock_listen;	/* envd's vsock PORT, NULL-terminated */
	uint64_t	  envd_max_message;	/* bytes of a Connect message */
	uint64_t	  envd_watchers;	/* CreateWatcher watchers at once */
	uint64_t	  envd_watch_dirs;	/* folders of one watch */
	uint64_t	  envd_watch_events;	/* events held untaken */
	uint64_t	  envd_max_upload;	/* bytes of a POST /files body */
	char		 *envd_spool_dir;	/* where bodies over max_body go */
	int		  envd_confine_files;	/* envd's file calls as the user,
						   not as root (envd's) */
	char		 *socket_path;		/* "" disables */
	char		**vsock_listen;		/* PORT, NULL-terminated */
	char		 *token_file;
	char		 *token;		/* NULL: no auth */
	size_t		  token_len;
	char		 *workdir;
	char		 *log_level;
	char		 *web_dir;		/* NULL: the default if it exists */
	uint64_t	  web_file_max;		/* bytes of a file of --web-dir */
	uint64_t	  cast_resizes;		/* resizes logged per session */
	uint64_t	  max_sessions;
	int64_t		  exited_ttl_ms;
	uint64_t	  max_body;
	uint64_t	  ring_bytes;
	uint64_t	  max_ring_bytes;
	uint64_t	  max_total_ring_bytes;
	uint64_t	  stdin_buffer;
	uint64_t	  pipe_bytes;		/* output pipes' buffer, 0: the
						   kernel's */
	int64_t		  shutdown_grace_ms;
	int64_t		  upgrade_ready_ms;	/* a successor's, to take over */
	int64_t		  utf8_hold_ms;		/* --utf8-hold */
	int		  shutdown_reboot;	/* --shutdown=reboot */
	int		  profile;		/* --profile: PROTO_PROFILE_* */
	int		  encoding;		/* --encoding: PROTO_ENC_* */
	uint64_t	  max_connections;
	int64_t		  idle_timeout_ms;
	int64_t		  header_timeout_ms;
	uint64_t	  max_headers;
	int64_t		  preauth_timeout_ms;
	uint64_t	  max_peer_unproven;
	uint64_t	  dual_stack;		/* listen on each --listen's twin */
	uint64_t	  max_file_jobs;
	uint64_t	  max_fetch_bytes;
	int64_t		  restore_window_ms;	/* one restore's signals */
	int64_t		  rtc_interval_ms;	/* 0: no RTC check */
	int64_t		  rtc_drift_ms;
	uint64_t	  clock_step;		/* step CLOCK_REALTIME */
	int64_t		  restore_probe_ms;	/* keepalive after a restore */
	uint64_t	  max_events;		/* the event feed's ring */
	uint64_t	  events_bytes;
	uint64_t	  sse_buffer;		/* bytes unsent per stream */
	int64_t		  sse_keepalive_ms;
	int64_t		  ports_interval_ms;	/* GET /v1/ports' refresh */
	int64_t		  ports_feed_interval_ms; /* the event feed's */
	uint64_t	  mcp_sessions;		/* MCP sessions kept */
	uint64_t	  session_memory;	/* bytes, memory.max; 0: none */
	uint64_t	  session_pids;		/* pids.max; 0: none */
	uint64_t	  session_cpu;		/* percent of a CPU; 0: none */
	int		  session_oom_score_adj;
	uint64_t	  self_memory_min;	/* bytes, agentd's memory.min */
	uint64_t	  self_cpu_weight;	/* agentd's cpu.weight */
	uint64_t	  spawn_threads;
	uint64_t	  max_answer_bytes;
	uint64_t	  max_session_bytes;
	unsigned	  fit;			/* CONFIG_FIT_*: budgets not
						   given (membudget.h) */
	uint64_t	  fit_memory;		/* the memory they fit, 0: none */
	int64_t		  spawn_timeout_ms;
	char		 *hostname;		/* PID 1: set this hostname */
	char		**env;			/* --env K=V, NULL-terminated */
	char		 *env_file;		/* --env-file PATH */
	char		**env_defaults;		/* the file's K=V, then --env's */
	char		**companion;		/* argv after "--", or NULL */
	int		  pid1;			/* getpid() == 1 */
};

/*
 * Fill cfg from argv, the environment and (as PID 1) cmdline, the kernel
 * command line's text.  Returns 0; 1 when --help or --version was answered
 * on stdout; -1 after printing the reason for a bad setting on stderr.
 */
int	config_load(struct config *cfg, int argc, char **argv,
	    const char *cmdline);

/* Free what config_load() allocated. */
void	config_free(struct config *cfg);

/*
 * Find "key=value" for key in a kernel command line (quotes removed); NULL
 * when absent.  The result is malloc'd.
 */
char	*config_cmdline_get(const char *cmdline, const char *key);

#endif /* AGENTD_CONFIG_H */
