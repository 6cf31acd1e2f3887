/*
 * bench.h -- agentd-bench: the load client behind `make bench`.
 *
 * One process measures every scenario of bench/README (issue 9) against its
 * baseline in the same run, interleaving the two, and prints one table.
 * Plain sockets and epoll, keep-alive, one connection per worker: a client
 * that costs a few microseconds per request, so that what is measured is
 * agentd.  Everything runs on the main thread except the healthz probe of
 * the scale scenario.
 */
#ifndef BENCH_H
#define BENCH_H

#include <sys/types.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

/* ---- configuration (agentd_bench.c) ------------------------------------ */

struct bench_cfg {
	const char	*agentd;	/* the binary measured (the release build) */
	const char	*agentd_dev;	/* the dev build, for the wrk comparison */
	const char	*ring_bench;	/* bench/ring_bench, or NULL */
	const char	*ssh_config;	/* ssh -F FILE HOST, or NULL: no ssh */
	const char	*ssh_host;
	const char	*tmux_socket;	/* a private tmux server's socket, or NULL */
	const char	*tmpdir;	/* logs, pid file */
	const char	*outdir;	/* results: table, tsv, plot data */
	const char	*only;		/* run only these scenarios ("1,2,9") */
	const char	*token;
	int		 quick;		/* every scenario tiny: the smoke test */
};
extern struct bench_cfg	 cfg;

/* ---- time and statistics (util.c) -------------------------------------- */

struct samples {
	double		*v;		/* microseconds (or any unit) */
	size_t		 n, cap;
	int		 sorted;
};

double	now_us(void);
void	sleep_us(double);
void	samples_add(struct samples *, double);
double	samples_pct(struct samples *, double p);	/* p in 0..100 */
double	samples_median(struct samples *);
void	samples_free(struct samples *);

/* A formatted value in a static ring of buffers (valid for 16 calls). */
const char	*fmt_us(double us);
const char	*fmt_kib(double kib);
const char	*fmt_mbs(double mb_per_s);
const char	*fmt_rate(double per_s);

void	 die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
	    noreturn));
void	 note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- processes (util.c) ------------------------------------------------- */

/* posix_spawnp argv with 0-2 on /dev/null, wait; returns the wait status. */
int	 run_quiet(char *const argv[]);
/* posix_spawnp argv with stdout on a new pipe (*out), 0 and 2 /dev/null. */
pid_t	 spawn_reader(char *const argv[], int *out);
/* Start argv with stdin and stdout on pipes (ssh -tt cat). */
pid_t	 spawn_pipes(char *const argv[], int *in, int *out);
/* Start argv on a new PTY; *master is its master (O_CLOEXEC). */
pid_t	 spawn_pty(char *const argv[], int *master);
/* SIGTERM, wait up to ms, then SIGKILL; reaps. */
void	 stop_pid(pid_t, int ms);
/* VmRSS of a process, KiB; -1 if unknown. */
long	 rss_kib(pid_t);
/* CPU seconds (user + system) a process has used; -1 if unknown. */
double	 cpu_seconds(pid_t);
/* CPU seconds of a process's main thread, to the nanosecond; -1 if unknown. */
double	 cpu_main_seconds(pid_t);
/* CPU seconds (user + system) this process has used. */
double	 cpu_self(void);
/* Size of a file, bytes; -1 if unknown. */
long	 file_size(const char *);
/* A TCP port on 127.0.0.1 that was free a moment ago. */
int	 free_port(void);
/* Whether cmd is an executable in PATH. */
int	 in_path(const char *cmd);
/* Raise RLIMIT_NOFILE's soft limit to the hard one. */
void	 raise_nofile(void);

/* ---- agentd instances (util.c) ------------------------------------------ */

struct agentd {
	pid_t			 pid;
	int			 port;
	struct sockaddr_in	 addr;
	double			 startup_us;	/* exec to first healthz 200 */
};

/*
 * Start bin on a free port with extra flags (NULL-terminated, may be NULL),
 * no unix socket, the bench token, logs in tmpdir; wait for healthz 200.
 */
int	 agentd_start(struct agentd *, const char *bin, const char *const *extra);
void	 agentd_stop(struct agentd *);
/* Kill every agentd still running (atexit and signals). */
void	 agentd_stop_all(void);

/* ---- HTTP/1.1 over keep-alive (http.c) ---------------------------------- */

struct conn {
	int		 fd;
	char		*buf;		/* received, not yet consumed */
	size_t		 len, cap;
	size_t		 hdr_len;	/* 0 until the headers are in */
	size_t		 body_len;
	int		 status;
	char		*wbuf;		/* the request being built */
	size_t		 wlen, wcap;
	double		 t0;		/* when the request was sent */
	void		*user;
};

int	 conn_open(struct conn *, const struct sockaddr_in *);
void	 conn_close(struct conn *);
/*
 * Send one request (blocking write).  hdrs: extra header lines, each ending
 * in \r\n, or NULL.  The token goes with every request.
 */
int	 conn_send(struct conn *, const char *method, const char *path,
	    const char *hdrs, const void *body, size_t blen);
/* Read until a whole response is in (blocking); returns the status or -1. */
int	 conn_recv(struct conn *);
/* Read what is there without blocking; 1: a whole response, 0: not yet, -1. */
int	 conn_poll(struct conn *);
/* Drop the response just handled. */
void	 conn_consume(struct conn *);
/* Send and receive; returns the status or -1. */
int	 conn_do(struct conn *, const char *method, const char *path,
	    const char *hdrs, const void *body, size_t blen);
const char	*conn_body(const struct conn *);
/* A response header's value (copied into out), or NULL. */
const char	*conn_header(const struct conn *, const char *name, char *out,
		    size_t outlen);

/* ---- JSON and base64, just enough (http.c) ------------------------------ */

/* The value after "key": in [p, end), or NULL. */
const char	*json_find(const char *p, const char *end, const char *key);
long long	 json_int(const char *p, const char *end, const char *key,
		    long long dflt);
int		 json_bool(const char *p, const char *end, const char *key);
/* A string value copied into out; NULL when missing. */
const char	*json_str(const char *p, const char *end, const char *key,
		    char *out, size_t outlen);
/*
 * Decode every output chunk's "data" into out (may be NULL: count only).
 * Returns the bytes decoded; *last is the last decoded byte (or -1);
 * *rest (rest may be NULL) where the fields after the output begin, so that
 * they are found without a search through megabytes of base64.
 */
size_t	 json_output(const char *p, const char *end, uint8_t *out,
	    size_t outlen, int *last, const char **rest);
size_t	 b64_decode(const char *in, size_t len, uint8_t *out);

/* ---- the table (agentd_bench.c) ----------------------------------------- */

#define MET_INFO	(-1)	/* no goal: for information */
#define MET_NO		0
#define MET_YES		1

/*
 * One line: what, ours, the baseline, ours/baseline, the goal, whether it
 * is met, and the "goal score" for the plot (measured / limit, or limit /
 * measured for at-least goals: <= 1 is met; NAN for information).
 */
void	 table_row(const char *scenario, const char *ours, const char *base,
	    double ratio, const char *goal, int met, double score);
/* A latency sample for the plot's second panel. */
void	 plot_latency(const char *label, double p50_us);

/* ---- scenarios ---------------------------------------------------------- */

void	 sc_exec(void);		/* 1 */
void	 sc_echo(void);		/* 2 */
void	 sc_throughput(void);	/* 3 */
void	 sc_startup(void);	/* 4 */
void	 sc_footprint(void);	/* 5 */
void	 sc_fairness(void);	/* 6 */
void	 sc_scale(void);	/* 7 */
void	 sc_ring(void);		/* 8 */
void	 sc_wrk(void);		/* 9 */
void	 sc_streams(void);	/* 10 */
void	 sc_upgrade(void);	/* 13 */

/* Scenario helpers (scenarios.c). */
int	 session_create(struct conn *, const char *json, char *id, size_t idlen);
int	 session_delete(struct conn *, const char *id);

#endif /* BENCH_H */
