/*
 * scenarios.c -- the nine scenarios of issue 9, each against its baseline in
 * the same run.  Latencies alternate between ours and the baseline in
 * batches (rounds), so that a noisy neighbour hits both alike; each figure is
 * the median (p50) of all samples unless the row says otherwise.
 */
#include <sys/epoll.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define WAIT_MS		5000		/* long-poll bound of every wait */
#define SILENCE_MS	150		/* calibration: no output for this long */
#define TP_MAX_BYTES	(4u << 20)	/* throughput: window per GET */
#define TP_SMALL	(64u << 10)	/* an answer this small: the reader is ahead */
/*
 * The session's ring: its pages are recycled as in a long session, not
 * faulted in fresh for every byte (a fault costs ~17 us on the bench VM);
 * big enough that a reader polling every TP_BACKOFF_US keeps up.
 */
#define TP_RING_BYTES	(4u << 20)
#define TP_BACKOFF_US	1000		/* then it waits this long */
#define TP_TEXT_LINE	"The quick brown fox jumps over the lazy dog, 0123456789 h\303\251llo w\303\266rld"	/* a line of output for JSON text */
#define KEY_X		"eA=="		/* 'x' */
#define KEY_DEL		"fw=="		/* DEL (VERASE): erases the 'x' */

extern struct agentd	 bench_ag;	/* the shared instance (agentd_bench.c) */

static uint8_t		*scratch;	/* decoded output */
static size_t		 scratch_len;

/* Ratio helpers for the table. */
static int
met_le(double v, double limit)
{
	return isnan(v) ? MET_INFO : v <= limit ? MET_YES : MET_NO;
}

static int
met_ge(double v, double limit)
{
	return isnan(v) ? MET_INFO : v >= limit ? MET_YES : MET_NO;
}

static uint8_t *
scratch_get(size_t n)
{
	if (scratch_len < n) {
		free(scratch);
		if ((scratch = malloc(n)) == NULL)
			die("out of memory");
		scratch_len = n;
	}
	return scratch;
}

/* POST /v1/sessions; the new id from Location.  Returns the status. */
int
session_create(struct conn *c, const char *json, char *id, size_t idlen)
{
	char	loc[256];
	size_t	n;
	int	st;

	st = conn_do(c, "POST", "/v1/sessions",
	    "Content-Type: application/json\r\n", json, strlen(json));
	if (id == NULL)
		return st;
	id[0] = '\0';
	if (st == 201 && conn_header(c, "Location", loc, sizeof loc) != NULL &&
	    strncmp(loc, "/v1/sessions/", 13) == 0) {
		n = strnlen(loc + 13, idlen - 1);
		memcpy(id, loc + 13, n);
		id[n] = '\0';
	}
	return st;
}

/* DELETE a session at once (grace 0). */
int
session_delete(struct conn *c, const char *id)
{
	char	path[256];

	snprintf(path, sizeof path, "/v1/sessions/%s?grace_ms=0", id);
	return conn_do(c, "DELETE", path, NULL, NULL, 0);
}

static void
need_status(int got, int want, const char *what)
{
	if (got != want)
		die("%s: HTTP %d, wanted %d", what, got, want);
}

/* ---- 1. exec round trip ------------------------------------------------- */

static double
exec_spawn(void)
{
	static char	*argv[] = { "/bin/true", NULL };
	double		 t = now_us();

	run_quiet(argv);
	return now_us() - t;
}

static double
exec_agentd(struct conn *c)
{
	static const char	 body[] =
	    "{\"argv\":[\"/bin/true\"],\"yield_ms\":10000}";
	char			 id[128];
	double			 t = now_us(), dt;
	int			 st;

	st = session_create(c, body, id, sizeof id);
	dt = now_us() - t;
	need_status(st, 201, "exec: POST /v1/sessions");
	if (json_find(conn_body(c), conn_body(c) + c->body_len, "state") ==
	    NULL || strstr(conn_body(c), "\"exited\"") == NULL)
		die("exec: the answer came before the exit");
	session_delete(c, id);	/* not timed */
	return dt;
}

static double
exec_cmd(char *const argv[])
{
	double	t = now_us();
	int	st = run_quiet(argv);

	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("exec: %s %s failed (status %#x)", argv[0], argv[1], st);
	return now_us() - t;
}

void
sc_exec(void)
{
	struct samples	 sp = { 0 }, ag = { 0 }, ssh = { 0 }, rs = { 0 },
			 sk = { 0 };
	char		*ssh_argv[] = { "ssh", "-F", (char *)cfg.ssh_config,
			    (char *)cfg.ssh_host, "/bin/true", NULL };
	char		*rs_argv[] = { "tmux", "-S", (char *)cfg.tmux_socket,
			    "run-shell", "/bin/true", NULL };
	char		 keys[512];
	char		*sk_argv[] = { "tmux", "-S", (char *)cfg.tmux_socket,
			    "send-keys", "-t", "bench:0", keys, "Enter", NULL };
	char		*wf_argv[] = { "tmux", "-S", (char *)cfg.tmux_socket,
			    "wait-for", "agentd-bench", NULL };
	struct conn	 c;
	int		 rounds = cfg.quick ? 1 : 10, fast = cfg.quick ? 10 : 40;
	int		 slow = cfg.quick ? 2 : 6, r, i;
	double		 t;

	note("1. exec round trip of /bin/true");
	snprintf(keys, sizeof keys, "/bin/true; tmux -S %s wait-for -S "
	    "agentd-bench", cfg.tmux_socket ? cfg.tmux_socket : "");
	if (conn_open(&c, &bench_ag.addr) != 0)
		die("connect: %s", strerror(errno));
	exec_spawn();
	exec_agentd(&c);
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < fast; i++)
			samples_add(&sp, exec_spawn());
		for (i = 0; i < fast; i++)
			samples_add(&ag, exec_agentd(&c));
		for (i = 0; cfg.ssh_config != NULL && i < slow; i++)
			samples_add(&ssh, exec_cmd(ssh_argv));
		for (i = 0; cfg.tmux_socket != NULL && i < slow; i++)
			samples_add(&rs, exec_cmd(rs_argv));
		for (i = 0; cfg.tmux_socket != NULL && i < slow; i++) {
			t = now_us();
			exec_cmd(sk_argv);
			exec_cmd(wf_argv);
			samples_add(&sk, now_us() - t);
		}
	}
	conn_close(&c);

	table_row("1 exec /bin/true: POST yield_ms vs posix_spawn+waitpid",
	    fmt_us(samples_median(&ag)), fmt_us(samples_median(&sp)),
	    samples_median(&ag) / samples_median(&sp), "≤ 1.25×",
	    met_le(samples_median(&ag) / samples_median(&sp), 1.25),
	    samples_median(&ag) / samples_median(&sp) / 1.25);
	table_row("1 exec /bin/true: vs ssh host /bin/true (ControlMaster)",
	    fmt_us(samples_median(&ag)), fmt_us(samples_median(&ssh)),
	    samples_median(&ag) / samples_median(&ssh), "< 1×",
	    met_le(samples_median(&ag) / samples_median(&ssh), 0.999), NAN);
	table_row("1 exec /bin/true: vs tmux run-shell",
	    fmt_us(samples_median(&ag)), fmt_us(samples_median(&rs)),
	    samples_median(&ag) / samples_median(&rs), "< 1×",
	    met_le(samples_median(&ag) / samples_median(&rs), 0.999), NAN);
	table_row("1 exec /bin/true: vs tmux send-keys + wait-for",
	    fmt_us(samples_median(&ag)), fmt_us(samples_median(&sk)),
	    samples_median(&ag) / samples_median(&sk), "< 1×",
	    met_le(samples_median(&ag) / samples_median(&sk), 0.999), NAN);
	note("   p95: agentd %s, posix_spawn %s, ssh %s (ssh/spawn %.1f×, "
	    "run-shell/spawn %.1f×, send-keys/spawn %.1f×)",
	    fmt_us(samples_pct(&ag, 95)), fmt_us(samples_pct(&sp, 95)),
	    fmt_us(samples_pct(&ssh, 95)),
	    samples_median(&ssh) / samples_median(&sp),
	    samples_median(&rs) / samples_median(&sp),
	    samples_median(&sk) / samples_median(&sp));
	plot_latency("exec: agentd", samples_median(&ag));
	plot_latency("exec: posix_spawn", samples_median(&sp));
	plot_latency("exec: ssh", samples_median(&ssh));
	plot_latency("exec: tmux run-shell", samples_median(&rs));
	plot_latency("exec: tmux send-keys", samples_median(&sk));
	samples_free(&sp);
	samples_free(&ag);
	samples_free(&ssh);
	samples_free(&rs);
	samples_free(&sk);
}

/* ---- 2. interactive echo ------------------------------------------------ */

/*
 * A keystroke and its echo, on a canonical-mode PTY running cat: 'x' comes
 * back as "x", DEL (VERASE) erases it and comes back as "\b \b"; alternating
 * the two keeps the line empty.  How many bytes each echo has is learnt
 * once per target (calibration), then each round trip waits for them all.
 */
#define ECHO_AGENTD	1
#define ECHO_FD		2	/* a PTY master, or ssh -tt's pipes */

struct echo {
	int		 kind;
	struct conn	*c;
	char		 id[128];
	uint64_t	 cursor;
	int		 wfd, rfd;
	size_t		 len[2];	/* echo bytes of 'x', of DEL */
	int		 del;		/* the next key is DEL */
};

/* agentd: output after cursor until count bytes came, or a silence. */
static size_t
echo_agentd_read(struct echo *e, size_t want, int wait_ms)
{
	char		 path[256];
	const char	*b;
	size_t		 got = 0, n;
	int		 last, st;

	while (want == 0 || got < want) {
		snprintf(path, sizeof path, "/v1/sessions/%s?cursor=%llu&"
		    "wait_ms=%d", e->id, (unsigned long long)e->cursor, wait_ms);
		st = conn_do(e->c, "GET", path, NULL, NULL, 0);
		need_status(st, 200, "echo: GET");
		b = conn_body(e->c);
		n = json_output(b, b + e->c->body_len, NULL, 0, &last, NULL);
		e->cursor = json_int(b, b + e->c->body_len, "cursor",
		    (long long)e->cursor);
		if (n == 0 && want == 0)
			break;
		got += n;
	}
	return got;
}

/* An fd: read until count bytes came, or ms of silence (count 0). */
static size_t
echo_fd_read(struct echo *e, size_t want, int ms)
{
	struct pollfd	pfd = { .fd = e->rfd, .events = POLLIN };
	char		buf[4096];
	size_t		got = 0;
	ssize_t		n;

	while (want == 0 || got < want) {
		/* Counting: the first byte may take long, then a silence. */
		if (want == 0 && poll(&pfd, 1, got == 0 ? WAIT_MS : ms) <= 0)
			break;
		n = read(e->rfd, buf, want == 0 || want - got > sizeof buf ?
		    sizeof buf : want - got);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			die("echo: read: %s", n == 0 ? "EOF" : strerror(errno));
		got += (size_t)n;
	}
	return got;
}

/* One keystroke and its whole echo; µs. */
static double
echo_once(struct echo *e)
{
	static const char	 body[2][48] = {
		"{\"data\":\"" KEY_X "\",\"wait_ms\":5000}",
		"{\"data\":\"" KEY_DEL "\",\"wait_ms\":5000}",
	};
	char			 path[256], key = e->del ? 0x7f : 'x';
	const char		*b;
	double			 t = now_us();
	size_t			 got, want = e->len[e->del];
	int			 st, last;

	if (e->kind == ECHO_AGENTD) {
		snprintf(path, sizeof path, "/v1/sessions/%s/stdin", e->id);
		st = conn_do(e->c, "POST", path,
		    "Content-Type: application/json\r\n", body[e->del],
		    strlen(body[e->del]));
		need_status(st, 200, "echo: POST stdin");
		b = conn_body(e->c);
		got = json_output(b, b + e->c->body_len, NULL, 0, &last, NULL);
		e->cursor = json_int(b, b + e->c->body_len, "cursor",
		    (long long)e->cursor);
		if (got < want)
			echo_agentd_read(e, want - got, WAIT_MS);
	} else {
		if (write(e->wfd, &key, 1) != 1)
			die("echo: write: %s", strerror(errno));
		echo_fd_read(e, want, 0);
	}
	e->del = !e->del;
	return now_us() - t;
}

/* An fd target: send each key, count what comes back. */
static void
echo_calibrate_fd(struct echo *e)
{
	char	key;
	int	k;

	for (k = 0; k < 2; k++) {
		key = k ? 0x7f : 'x';
		if (write(e->wfd, &key, 1) != 1)
			die("echo: write: %s", strerror(errno));
		e->len[k] = echo_fd_read(e, 0, SILENCE_MS);
	}
	e->del = 0;
}

/* agentd: send each key, count the answer's bytes and the stragglers. */
static void
echo_calibrate_agentd(struct echo *e)
{
	static const char	*keys[2] = { KEY_X, KEY_DEL };
	char			 path[256], body[64];
	const char		*b;
	size_t			 n;
	int			 k, last;

	for (k = 0; k < 2; k++) {
		snprintf(path, sizeof path, "/v1/sessions/%s/stdin", e->id);
		snprintf(body, sizeof body, "{\"data\":\"%s\",\"wait_ms\":%d}",
		    keys[k], WAIT_MS);
		need_status(conn_do(e->c, "POST", path,
		    "Content-Type: application/json\r\n", body, strlen(body)),
		    200, "echo: POST stdin");
		b = conn_body(e->c);
		n = json_output(b, b + e->c->body_len, NULL, 0, &last, NULL);
		e->cursor = json_int(b, b + e->c->body_len, "cursor",
		    (long long)e->cursor);
		e->len[k] = n + echo_agentd_read(e, 0, SILENCE_MS);
	}
	e->del = 0;
}

/* Open an echo target on agentd: a PTY cat session. */
static void
echo_open_agentd(struct echo *e, struct conn *c)
{
	memset(e, 0, sizeof *e);
	e->kind = ECHO_AGENTD;
	e->c = c;
	need_status(session_create(c, "{\"argv\":[\"cat\"],\"tty\":true}",
	    e->id, sizeof e->id), 201, "echo: create");
	echo_calibrate_agentd(e);
	if (e->len[0] == 0 || e->len[1] == 0)
		die("echo: agentd's PTY cat does not echo (%zu, %zu bytes)",
		    e->len[0], e->len[1]);
}

static void
echo_open_fd(struct echo *e, int wfd, int rfd)
{
	memset(e, 0, sizeof *e);
	e->kind = ECHO_FD;
	e->wfd = wfd;
	e->rfd = rfd;
	/* Whatever the start printed (a banner), then the echoes. */
	poll(&(struct pollfd){ .fd = rfd, .events = POLLIN }, 1, SILENCE_MS);
	if (poll(&(struct pollfd){ .fd = rfd, .events = POLLIN }, 1, 0) > 0)
		echo_fd_read(e, 0, SILENCE_MS);
	echo_calibrate_fd(e);
	if (e->len[0] == 0 || e->len[1] == 0)
		die("echo: no echo from fd %d (%zu, %zu bytes)", rfd,
		    e->len[0], e->len[1]);
}

static double
healthz_once(struct conn *c)
{
	double	t = now_us();

	need_status(conn_do(c, "GET", "/healthz", NULL, NULL, 0), 200,
	    "GET /healthz");
	return now_us() - t;
}

void
sc_echo(void)
{
	struct samples	 ag = { 0 }, hz = { 0 }, raw = { 0 }, ssh = { 0 };
	struct echo	 eag, eraw, essh;
	struct conn	 c, ch;
	char		*cat_argv[] = { "cat", NULL };
	char		*ssh_argv[] = { "ssh", "-F", (char *)cfg.ssh_config,
			    "-tt", (char *)cfg.ssh_host, "cat", NULL };
	int		 rounds = cfg.quick ? 1 : 10, fast = cfg.quick ? 20 : 100;
	int		 slow = cfg.quick ? 5 : 30, r, i, master, sin, sout;
	pid_t		 cat_pid, ssh_pid = 0;

	note("2. interactive echo round trip");
	if (conn_open(&c, &bench_ag.addr) != 0 ||
	    conn_open(&ch, &bench_ag.addr) != 0)
		die("connect: %s", strerror(errno));
	echo_open_agentd(&eag, &c);
	cat_pid = spawn_pty(cat_argv, &master);
	echo_open_fd(&eraw, master, master);
	if (cfg.ssh_config != NULL) {
		ssh_pid = spawn_pipes(ssh_argv, &sin, &sout);
		echo_open_fd(&essh, sin, sout);
	}
	note("   echo bytes: agentd %zu+%zu, pty %zu+%zu", eag.len[0],
	    eag.len[1], eraw.len[0], eraw.len[1]);

	for (i = 0; i < 10; i++) {
		healthz_once(&ch);
		echo_once(&eag);
		echo_once(&eraw);
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < fast; i++)
			samples_add(&hz, healthz_once(&ch));
		for (i = 0; i < fast; i++)
			samples_add(&ag, echo_once(&eag));
		for (i = 0; i < fast; i++)
			samples_add(&raw, echo_once(&eraw));
		for (i = 0; ssh_pid > 0 && i < slow; i++)
			samples_add(&ssh, echo_once(&essh));
	}
	session_delete(&c, eag.id);
	conn_close(&c);
	conn_close(&ch);
	close(master);
	stop_pid(cat_pid, 1000);
	if (ssh_pid > 0) {
		close(sin);
		close(sout);
		stop_pid(ssh_pid, 2000);
	}

	table_row("2 echo, stdin POST wait_ms: vs one healthz round trip",
	    fmt_us(samples_median(&ag)), fmt_us(samples_median(&hz)),
	    samples_median(&ag) / samples_median(&hz), "≤ 1.5×",
	    met_le(samples_median(&ag) / samples_median(&hz), 1.5),
	    samples_median(&ag) / samples_median(&hz) / 1.5);
	table_row("2 echo, stdin POST wait_ms: vs ssh -tt host cat",
	    fmt_us(samples_median(&ag)), fmt_us(samples_median(&ssh)),
	    samples_median(&ag) / samples_median(&ssh), "< 1×",
	    met_le(samples_median(&ag) / samples_median(&ssh), 0.999),
	    samples_median(&ag) / samples_median(&ssh));
	table_row("2 echo, stdin POST wait_ms: vs raw PTY echo in-process",
	    fmt_us(samples_median(&ag)), fmt_us(samples_median(&raw)),
	    samples_median(&ag) / samples_median(&raw), "—", MET_INFO, NAN);
	note("   p95: agentd %s, healthz %s, pty %s, ssh -tt %s (ssh/pty "
	    "%.1f×)", fmt_us(samples_pct(&ag, 95)), fmt_us(samples_pct(&hz, 95)),
	    fmt_us(samples_pct(&raw, 95)), fmt_us(samples_pct(&ssh, 95)),
	    samples_median(&ssh) / samples_median(&raw));
	plot_latency("echo: agentd", samples_median(&ag));
	plot_latency("healthz", samples_median(&hz));
	plot_latency("echo: raw PTY", samples_median(&raw));
	plot_latency("echo: ssh -tt", samples_median(&ssh));
	samples_free(&ag);
	samples_free(&hz);
	samples_free(&raw);
	samples_free(&ssh);
}

/* ---- 3. output throughput ----------------------------------------------- */

/* Read fd to EOF (or EIO: a PTY master); bytes. */
static size_t
drain_fd(int fd)
{
	uint8_t	*buf = scratch_get(1 << 16);
	size_t	 got = 0;
	ssize_t	 n;

	for (;;) {
		n = read(fd, buf, 1 << 16);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		break;
	}
	return got;
}

/* The command straight on a pipe or a PTY; MB/s. */
static double
tp_direct(char *const argv[], int tty, size_t size)
{
	double	t = now_us(), me0 = cpu_self();
	size_t	got;
	pid_t	pid;
	int	fd;

	pid = tty ? spawn_pty(argv, &fd) : spawn_reader(argv, &fd);
	got = drain_fd(fd);
	close(fd);
	waitpid(pid, NULL, 0);
	if (getenv("BENCH_DEBUG") != NULL)
		fprintf(stderr, "tp %s direct: %.0f ms, reader cpu %.1f ms "
		    "(%.2f ms/MiB)\n", tty ? "pty" : "pipe",
		    (now_us() - t) / 1000, (cpu_self() - me0) * 1000,
		    (cpu_self() - me0) * 1000 / ((double)size / (1 << 20)));
	if (got != size)
		note("   warning: direct %s read %zu of %zu bytes",
		    tty ? "pty" : "pipe", got, size);
	return size / (now_us() - t);
}

/*
 * The same command through agentd, JSON or raw; MB/s: the command's bytes
 * over the time from the create to the client holding all of them (a run
 * that lost chunks to the ring says so).  A bulk reader: it
 * asks for windows of TP_MAX_BYTES; when an answer brought less than
 * TP_SMALL bytes it is ahead of the command and waits TP_BACKOFF_US before
 * asking again (raw mode does not wait on the server; a JSON long-poll
 * would answer each new chunk alone, costing both sides a round trip per
 * chunk while the command wants the CPU).
 */
static double
tp_agentd(struct conn *c, int tty, int raw, size_t size, int text)
{
	char		 body[768], path[256], id[128], v[64], argv[256];
	const char	*b, *e;
	uint64_t	 cursor = 0, dropped = 0;
	size_t		 got = 0, n, ring = TP_RING_BYTES;
	double		 t, dt;
	int		 eof = 0, last, st, first = 1;

	double		 cpu0 = cpu_main_seconds(bench_ag.pid), me0 = cpu_self(), cpu;

	if (getenv("BENCH_TP_RING") != NULL)
		ring = strtoull(getenv("BENCH_TP_RING"), NULL, 0);
	/* Text: lines of UTF-8 (JSON text), else NUL bytes (base64). */
	if (text)
		snprintf(argv, sizeof argv, "\"sh\",\"-c\",\"yes '%s' | head "
		    "-c %zu\"", TP_TEXT_LINE, size);
	else
		snprintf(argv, sizeof argv, "\"head\",\"-c\",\"%zu\","
		    "\"/dev/zero\"", size);
	snprintf(body, sizeof body, "{\"argv\":[%s],\"tty\":%s,"
	    "\"ring_bytes\":%zu,\"max_bytes\":%u,\"wait_ms\":%d%s}", argv,
	    tty ? "true" : "false", ring, TP_MAX_BYTES, WAIT_MS,
	    text ? ",\"encoding\":\"text\"" : "");
	t = now_us();
	need_status(session_create(c, body, id, sizeof id), 201,
	    "throughput: create");
	for (;;) {
		b = conn_body(c);
		e = b + c->body_len;
		if (raw && !first) {
			n = c->body_len;
			if (conn_header(c, "X-Agentd-Cursor", v, sizeof v) == NULL)
				die("throughput: no X-Agentd-Cursor");
			cursor = strtoull(v, NULL, 10);
			if (conn_header(c, "X-Agentd-Dropped-Chunks", v,
			    sizeof v) != NULL)
				dropped += strtoull(v, NULL, 10);
			eof = conn_header(c, "X-Agentd-Eof", v, sizeof v) !=
			    NULL && strcmp(v, "true") == 0;
		} else {
			n = json_output(b, e, scratch_get(TP_MAX_BYTES +
			    65536), TP_MAX_BYTES + 65536, &last, &b);
			cursor = json_int(b, e, "cursor", (long long)cursor);
			dropped += json_int(b, e, "dropped_chunks", 0);
			eof = json_bool(b, e, "eof");
		}
		got += n;
		first = 0;
		if (getenv("BENCH_DEBUG") != NULL)
			fprintf(stderr, "%.0f us: %zu bytes, cursor %llu%s\n",
			    now_us() - c->t0, n, (unsigned long long)cursor,
			    eof ? ", eof" : "");
		if (eof)
			break;
		if (n < TP_SMALL)
			sleep_us(TP_BACKOFF_US);
		snprintf(path, sizeof path, "/v1/sessions/%s?cursor=%llu&"
		    "max_bytes=%u%s%s", id, (unsigned long long)cursor,
		    TP_MAX_BYTES, raw ? "" : "&wait_ms=5000",
		    text ? "&encoding=text" : "");
		st = conn_do(c, "GET", path, raw ?
		    "Accept: application/octet-stream\r\n" : NULL, NULL, 0);
		need_status(st, 200, "throughput: GET");
	}
	dt = now_us() - t;
	if (getenv("BENCH_DEBUG") != NULL) {
		cpu = cpu_main_seconds(bench_ag.pid) - cpu0;
		fprintf(stderr, "tp %s %s: %.0f ms, agentd cpu %.1f ms (%.2f "
		    "ms/MiB of %zu MiB), client cpu %.1f ms\n",
		    tty ? "pty" : "pipe", raw ? "raw" : text ? "json-text" :
		    "json", dt / 1000,
		    cpu * 1000, cpu * 1000 / ((double)size / (1 << 20)),
		    size >> 20, (cpu_self() - me0) * 1000);
	}
	session_delete(c, id);
	/* A PTY's ONLCR makes each line's \n \r\n: more bytes, not fewer. */
	if ((text && tty ? got < size : got != size) || dropped != 0)
		note("   warning: agentd %s %s read %zu of %zu bytes, %llu "
		    "chunks dropped", tty ? "pty" : "pipe", raw ? "raw" : text ?
		    "json-text" : "json",
		    got, size, (unsigned long long)dropped);
	return got / dt;	/* delivered bytes */
}

/* ssh host head -c N /dev/zero, with -tt on a PTY; MB/s. */
static double
tp_ssh(int tty, const char *num, size_t size)
{
	char	*pipe_argv[] = { "ssh", "-F", (char *)cfg.ssh_config,
		    (char *)cfg.ssh_host, "head", "-c", (char *)num, "/dev/zero",
		    NULL };
	char	*tty_argv[] = { "ssh", "-F", (char *)cfg.ssh_config, "-tt",
		    (char *)cfg.ssh_host, "head", "-c", (char *)num, "/dev/zero",
		    NULL };
	double	 t = now_us();
	size_t	 got;
	pid_t	 pid;
	int	 fd;

	pid = spawn_reader(tty ? tty_argv : pipe_argv, &fd);
	got = drain_fd(fd);
	close(fd);
	waitpid(pid, NULL, 0);
	/* ssh -tt may add "Connection closed" on stderr, never on stdout. */
	if (got < size)
		note("   warning: ssh %s read %zu of %zu bytes",
		    tty ? "-tt" : "", got, size);
	return size / (now_us() - t);
}

void
sc_throughput(void)
{
	struct samples	 s[2][6];	/* [tty][direct, json, raw, ssh,
					   direct text, json text] */
	char		 num[32], what[160], tcmd[256];
	char		*argv[] = { "head", "-c", num, "/dev/zero", NULL };
	char		*targv[] = { "sh", "-c", tcmd, NULL };
	const char	*kind[2] = { "pipe", "PTY" };
	struct conn	 c;
	size_t		 size = cfg.quick ? (1u << 20) : (32u << 20);
	int		 rounds = cfg.quick ? 1 : 5, r, tty;
	double		 d, j, w, x, td, tj;
	const char	*only = getenv("BENCH_TP_ONLY");	/* pipe, PTY */

	note("3. output throughput, %zu MiB per run", size >> 20);
	memset(s, 0, sizeof s);
	snprintf(num, sizeof num, "%zu", size);
	snprintf(tcmd, sizeof tcmd, "yes '%s' | head -c %zu", TP_TEXT_LINE,
	    size);
	if (conn_open(&c, &bench_ag.addr) != 0)
		die("connect: %s", strerror(errno));
	tp_agentd(&c, only != NULL && strcmp(only, "PTY") == 0, 0,
	    size, 0);	/* warm-up */
	for (r = 0; r < rounds; r++) {
		for (tty = 0; tty < 2; tty++) {
			if (only != NULL && strcmp(only, kind[tty]) != 0)
				continue;
			samples_add(&s[tty][0], tp_direct(argv, tty, size));
			samples_add(&s[tty][1], tp_agentd(&c, tty, 0, size, 0));
			samples_add(&s[tty][2], tp_agentd(&c, tty, 1, size, 0));
			samples_add(&s[tty][4], tp_direct(targv, tty, size));
			samples_add(&s[tty][5], tp_agentd(&c, tty, 0, size, 1));
			if (cfg.ssh_config != NULL)
				samples_add(&s[tty][3], tp_ssh(tty, num, size));
		}
	}
	conn_close(&c);

	for (tty = 0; tty < 2; tty++) {
		d = samples_median(&s[tty][0]);
		j = samples_median(&s[tty][1]);
		w = samples_median(&s[tty][2]);
		x = samples_median(&s[tty][3]);
		snprintf(what, sizeof what, "3 throughput %s, JSON/base64 "
		    "polling vs reading the %s", kind[tty], kind[tty]);
		table_row(what, fmt_mbs(j), fmt_mbs(d), j / d, "≥ 0.6×",
		    met_ge(j / d, 0.6), 0.6 / (j / d));
		/* UTF-8 lines through encoding=text, against the same lines. */
		td = samples_median(&s[tty][4]);
		tj = samples_median(&s[tty][5]);
		snprintf(what, sizeof what, "3 throughput %s, JSON/text "
		    "polling vs reading the %s (UTF-8 lines)", kind[tty],
		    kind[tty]);
		table_row(what, fmt_mbs(tj), fmt_mbs(td), tj / td, "≥ 0.6×",
		    met_ge(tj / td, 0.6), 0.6 / (tj / td));
		snprintf(what, sizeof what, "3 throughput %s, raw mode vs "
		    "reading the %s", kind[tty], kind[tty]);
		table_row(what, fmt_mbs(w), fmt_mbs(d), w / d, "≥ 0.9×",
		    met_ge(w / d, 0.9), 0.9 / (w / d));
		snprintf(what, sizeof what, "3 throughput %s, raw mode vs "
		    "ssh%s", kind[tty], tty ? " -tt" : "");
		table_row(what, fmt_mbs(w), fmt_mbs(x), w / x, "—", MET_INFO,
		    NAN);
		note("   %s: ssh %.2f× reading it directly", kind[tty], x / d);
	}
	for (tty = 0; tty < 2; tty++)
		for (r = 0; r < 6; r++)
			samples_free(&s[tty][r]);
}
