/*
 * load.c -- scenarios 4 to 9: startup and size, footprint per session,
 * fairness under output floods, scale (sessions and long-polls), the ring
 * microbenchmarks and requests per second with wrk.
 */
#include <sys/epoll.h>
#include <sys/wait.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define TMUX_BATCH	50	/* new-window commands per tmux invocation */
#define PROBE_PHASES	4
#define FLOODS		6	/* sessions running cat /dev/zero */
#define SCALE_P99_GOAL	10000	/* µs: healthz and create p99 at scale (issue 15) */

extern struct agentd	 bench_ag;

static const char *const big_limits[] = {
	"--max-sessions", "4000",
	"--max-total-ring-bytes", "68719476736",
	NULL,
};

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

/* Read all of a child's stdout into a string (caller frees). */
static char *
read_all(int fd)
{
	char	*buf = NULL;
	size_t	 len = 0, cap = 0;
	ssize_t	 n;

	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 8192;
			if ((buf = realloc(buf, cap)) == NULL)
				die("out of memory");
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	if (buf == NULL && (buf = malloc(1)) == NULL)
		die("out of memory");
	buf[len] = '\0';
	return buf;
}

/* Run argv and capture its stdout. */
static char *
capture(char *const argv[])
{
	char	*out;
	pid_t	 pid;
	int	 fd;

	pid = spawn_reader(argv, &fd);
	out = read_all(fd);
	close(fd);
	waitpid(pid, NULL, 0);
	return out;
}

/* ---- a private tmux server, for footprint baselines --------------------- */

static pid_t
tmux_start(const char *sock)
{
	char	*start[] = { "tmux", "-S", (char *)sock, "-f", "/dev/null",
		    "new-session", "-d", "-s", "fp", "cat", NULL };
	char	*pid_argv[] = { "tmux", "-S", (char *)sock, "display-message",
		    "-p", "#{pid}", NULL };
	char	*out;
	pid_t	 pid;

	if (run_quiet(start) != 0)
		return -1;
	out = capture(pid_argv);
	pid = (pid_t)atol(out);
	free(out);
	return pid > 0 ? pid : -1;
}

static void
tmux_kill(const char *sock)
{
	char	*argv[] = { "tmux", "-S", (char *)sock, "kill-server", NULL };

	run_quiet(argv);
	unlink(sock);
}

/* n more windows running cat, in batches. */
static void
tmux_windows(const char *sock, int n)
{
	char	*argv[8 + 4 * TMUX_BATCH];
	int	 k, i;

	while (n > 0) {
		k = 0;
		argv[k++] = "tmux";
		argv[k++] = "-S";
		argv[k++] = (char *)sock;
		for (i = 0; i < TMUX_BATCH && n > 0; i++, n--) {
			if (i > 0)
				argv[k++] = ";";
			argv[k++] = "new-window";
			argv[k++] = "-d";
			argv[k++] = "cat";
		}
		argv[k] = NULL;
		if (run_quiet(argv) != 0)
			die("tmux new-window failed");
	}
}

/* ---- 4. startup, idle RSS, binary size ---------------------------------- */

void
sc_startup(void)
{
	static char	*true_argv[] = { "/bin/true", NULL };
	struct samples	 sp = { 0 }, up = { 0 }, rss = { 0 };
	struct agentd	 a;
	struct conn	 c;
	char		 sock[512];
	int		 rounds = cfg.quick ? 3 : 30, r, i;
	double		 t, trss = NAN, size, tsize;
	pid_t		 tpid;

	note("4. startup, idle RSS, binary size");
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 3; i++) {
			t = now_us();
			run_quiet(true_argv);
			samples_add(&sp, now_us() - t);
		}
		if (agentd_start(&a, cfg.agentd, NULL) != 0)
			die("cannot start %s", cfg.agentd);
		samples_add(&up, a.startup_us);
		if (conn_open(&c, &a.addr) == 0) {
			for (i = 0; i < 3; i++)
				conn_do(&c, "GET", "/healthz", NULL, NULL, 0);
			conn_close(&c);
		}
		samples_add(&rss, rss_kib(a.pid));
		agentd_stop(&a);
	}
	snprintf(sock, sizeof sock, "%s/tmux-idle.sock", cfg.tmpdir);
	if ((tpid = tmux_start(sock)) > 0) {
		sleep_us(100000);
		trss = rss_kib(tpid);
		tmux_kill(sock);
	}
	size = file_size(cfg.agentd) / 1024.0;
	tsize = file_size("/usr/bin/tmux") / 1024.0;

	table_row("4 startup: exec to first healthz 200 vs spawn+wait "
	    "/bin/true", fmt_us(samples_median(&up)),
	    fmt_us(samples_median(&sp)),
	    samples_median(&up) / samples_median(&sp), "≤ 1.5×",
	    met_le(samples_median(&up) / samples_median(&sp), 1.5),
	    samples_median(&up) / samples_median(&sp) / 1.5);
	table_row("4 idle RSS (VmRSS) vs an idle tmux server",
	    fmt_kib(samples_median(&rss)), fmt_kib(trss),
	    samples_median(&rss) / trss, "≤ 1 MiB",
	    met_le(samples_median(&rss), 1024),
	    samples_median(&rss) / 1024);
	table_row("4 binary size (static, stripped) vs /usr/bin/tmux",
	    fmt_kib(size), fmt_kib(tsize), size / tsize, "≤ 1 MiB",
	    met_le(size, 1024), size / 1024);
	samples_free(&sp);
	samples_free(&up);
	samples_free(&rss);
}

/* ---- 5. footprint per idle PTY session ---------------------------------- */

void
sc_footprint(void)
{
	static const char	 body[] = "{\"argv\":[\"cat\"],\"tty\":true}";
	const int		 steps[2] = { cfg.quick ? 10 : 100,
				    cfg.quick ? 50 : 1000 };
	double			 ours[2], theirs[2];
	long			 r0, r, t0;
	struct agentd		 a;
	struct conn		 c;
	char			 id[128], sock[512], path[256], what[128];
	int			 k, n = 0, made = 0;
	pid_t			 tpid;

	note("5. RSS per idle PTY session at %d and %d", steps[0], steps[1]);
	if (agentd_start(&a, cfg.agentd, (const char *const *)big_limits) != 0)
		die("cannot start %s", cfg.agentd);
	if (conn_open(&c, &a.addr) != 0)
		die("connect: %s", strerror(errno));
	/* Warm-up: the first session and answer allocate for good. */
	if (session_create(&c, body, id, sizeof id) != 201)
		die("footprint: create failed: %.200s", conn_body(&c));
	snprintf(path, sizeof path, "/v1/sessions/%s", id);
	conn_do(&c, "GET", path, NULL, NULL, 0);
	session_delete(&c, id);
	sleep_us(200000);
	r0 = rss_kib(a.pid);
	for (k = 0; k < 2; k++) {
		for (; n < steps[k]; n++) {
			if (session_create(&c, body, NULL, 0) != 201)
				die("footprint: session %d: %.200s", n,
				    conn_body(&c));
			made++;
		}
		conn_do(&c, "GET", "/healthz", NULL, NULL, 0);
		sleep_us(300000);
		r = rss_kib(a.pid);
		ours[k] = (double)(r - r0) / steps[k];
		note("   agentd: %d sessions, RSS %ld KiB (idle %ld KiB)",
		    steps[k], r, r0);
	}
	conn_close(&c);
	agentd_stop(&a);

	theirs[0] = theirs[1] = NAN;
	snprintf(sock, sizeof sock, "%s/tmux-fp.sock", cfg.tmpdir);
	if ((tpid = tmux_start(sock)) > 0) {
		tmux_windows(sock, 1);
		sleep_us(200000);
		t0 = rss_kib(tpid);
		n = 0;
		for (k = 0; k < 2; k++) {
			tmux_windows(sock, steps[k] - n);
			n = steps[k];
			sleep_us(300000);
			r = rss_kib(tpid);
			theirs[k] = (double)(r - t0) / steps[k];
			note("   tmux: %d windows, RSS %ld KiB (idle %ld KiB)",
			    steps[k], r, t0);
		}
		tmux_kill(sock);
	}
	for (k = 0; k < 2; k++) {
		snprintf(what, sizeof what, "5 RSS per idle PTY session at "
		    "%d vs tmux per window", steps[k]);
		table_row(what, fmt_kib(ours[k]), fmt_kib(theirs[k]),
		    ours[k] / theirs[k], "≤ 32 KiB", met_le(ours[k], 32),
		    ours[k] / 32);
	}
	(void)made;
}

/* ---- 6. fairness under floods ------------------------------------------- */

/* Alternate healthz and echo on the shared instance. */
static void
fair_measure(struct conn *ch, struct conn *ce, const char *eid,
    uint64_t *ecursor, int n, struct samples *hz, struct samples *echo)
{
	static const char	*keys[2] = {
		"{\"data\":\"eA==\",\"wait_ms\":5000}",
		"{\"data\":\"fw==\",\"wait_ms\":5000}",
	};
	char			 path[256];
	const char		*b;
	double			 t;
	int			 i, last, k = 0;
	size_t			 got;

	snprintf(path, sizeof path, "/v1/sessions/%s/stdin", eid);
	for (i = 0; i < n; i++) {
		t = now_us();
		if (conn_do(ch, "GET", "/healthz", NULL, NULL, 0) != 200)
			die("fairness: healthz failed");
		samples_add(hz, now_us() - t);
		if (i % 5 != 0)
			continue;
		/* One keystroke in five requests: 'x', then DEL. */
		t = now_us();
		if (conn_do(ce, "POST", path, "Content-Type: application/json"
		    "\r\n", keys[k], strlen(keys[k])) != 200)
			die("fairness: stdin failed");
		b = conn_body(ce);
		got = json_output(b, b + ce->body_len, NULL, 0, &last, NULL);
		*ecursor = json_int(b, b + ce->body_len, "cursor",
		    (long long)*ecursor);
		if (got == 0)
			die("fairness: no echo within 5 s");
		samples_add(echo, now_us() - t);
		k = !k;
	}
}

/* bytes_out of a session. */
static long long
bytes_out(struct conn *c, const char *id)
{
	char	path[256];

	snprintf(path, sizeof path, "/v1/sessions/%s?max_bytes=1", id);
	if (conn_do(c, "GET", path, NULL, NULL, 0) != 200)
		return -1;
	return json_int(conn_body(c), conn_body(c) + c->body_len, "bytes_out",
	    -1);
}

void
sc_fairness(void)
{
	static const char	 flood[] = "{\"argv\":[\"cat\",\"/dev/zero\"]}";
	struct samples		 hz[2] = { { 0 } }, echo[2] = { { 0 } };
	struct conn		 ch, ce;
	char			 eid[128], fid[FLOODS][128];
	uint64_t		 ecursor = 0;
	long long		 b0, b1;
	int			 cycles = cfg.quick ? 1 : 3;
	int			 n = cfg.quick ? 50 : 600, cyc, f;
	double			 t0, flood_mbs = 0, hz95, e95;

	note("6. fairness: healthz and echo while %d sessions flood", FLOODS);
	if (conn_open(&ch, &bench_ag.addr) != 0 ||
	    conn_open(&ce, &bench_ag.addr) != 0)
		die("connect: %s", strerror(errno));
	if (session_create(&ce, "{\"argv\":[\"cat\"],\"tty\":true}", eid,
	    sizeof eid) != 201)
		die("fairness: create failed");
	for (cyc = 0; cyc < cycles; cyc++) {
		fair_measure(&ch, &ce, eid, &ecursor, n, &hz[0], &echo[0]);
		for (f = 0; f < FLOODS; f++) {
			if (session_create(&ce, flood, fid[f],
			    sizeof fid[f]) != 201)
				die("fairness: flood create failed");
		}
		sleep_us(200000);
		b0 = bytes_out(&ce, fid[0]);
		t0 = now_us();
		fair_measure(&ch, &ce, eid, &ecursor, n, &hz[1], &echo[1]);
		b1 = bytes_out(&ce, fid[0]);
		flood_mbs += (b1 - b0) * (double)FLOODS / (now_us() - t0) /
		    cycles;
		for (f = 0; f < FLOODS; f++)
			session_delete(&ce, fid[f]);
	}
	session_delete(&ce, eid);
	conn_close(&ch);
	conn_close(&ce);

	hz95 = samples_pct(&hz[1], 95);
	e95 = samples_pct(&echo[1], 95);
	table_row("6 fairness, 6 floods: healthz p50 vs no floods",
	    fmt_us(samples_pct(&hz[1], 50)), fmt_us(samples_pct(&hz[0], 50)),
	    samples_pct(&hz[1], 50) / samples_pct(&hz[0], 50), "—", MET_INFO,
	    NAN);
	table_row("6 fairness, 6 floods: healthz p95 vs no floods",
	    fmt_us(hz95), fmt_us(samples_pct(&hz[0], 95)),
	    hz95 / samples_pct(&hz[0], 95), "≤ 50 ms", met_le(hz95, 50000),
	    hz95 / 50000);
	table_row("6 fairness, 6 floods: healthz p99 vs no floods",
	    fmt_us(samples_pct(&hz[1], 99)), fmt_us(samples_pct(&hz[0], 99)),
	    samples_pct(&hz[1], 99) / samples_pct(&hz[0], 99), "—", MET_INFO,
	    NAN);
	table_row("6 fairness, 6 floods: echo p95 vs no floods", fmt_us(e95),
	    fmt_us(samples_pct(&echo[0], 95)),
	    e95 / samples_pct(&echo[0], 95), "≤ 100 ms", met_le(e95, 100000),
	    e95 / 100000);
	note("   the floods captured %s together meanwhile", fmt_mbs(flood_mbs));
	samples_free(&hz[0]);
	samples_free(&hz[1]);
	samples_free(&echo[0]);
	samples_free(&echo[1]);
}

/* ---- 7. scale: sessions and long-polls ---------------------------------- */

struct probe {
	struct sockaddr_in	 addr;
	_Atomic int		 phase;		/* -1: stop */
	struct samples		 s[PROBE_PHASES];
	pthread_t		 thread;
};

/* A healthz every SCALE_PROBE_MS on its own connection. */
static void *
probe_loop(void *arg)
{
	struct probe	*p = arg;
	struct conn	 c;
	double		 t;
	int		 ph;

	if (conn_open(&c, &p->addr) != 0)
		return NULL;
	while ((ph = atomic_load(&p->phase)) >= 0) {
		t = now_us();
		if (conn_do(&c, "GET", "/healthz", NULL, NULL, 0) != 200)
			break;
		samples_add(&p->s[ph], now_us() - t);
		sleep_us(2000);
	}
	conn_close(&c);
	return NULL;
}

void
sc_scale(void)
{
	static const char	 body[] = "{\"argv\":[\"cat\"],\"tty\":true}";
	const int		 nsess = cfg.quick ? 50 : 1000;
	const int		 npoll = 2 * nsess;
	struct probe		 p;
	struct samples		 create = { 0 }, wake = { 0 }, during = { 0 };
	struct agentd		 a;
	struct conn		 c, *polls;
	struct epoll_event	 ev, evs[256];
	char			(*ids)[32], path[256];
	double			*sent, t, t_create, hold = cfg.quick ? 2e5 : 1e6;
	int			 ep, i, k, n, answered = 0, early = 0, ph;

	note("7. scale: %d sessions, %d long-polls", nsess, npoll);
	if (agentd_start(&a, cfg.agentd, (const char *const *)big_limits) != 0)
		die("cannot start %s", cfg.agentd);
	memset(&p, 0, sizeof p);
	p.addr = a.addr;
	atomic_store(&p.phase, 0);
	if (pthread_create(&p.thread, NULL, probe_loop, &p) != 0)
		die("pthread_create");
	sleep_us(hold);

	/* 1: create the sessions. */
	atomic_store(&p.phase, 1);
	if (conn_open(&c, &a.addr) != 0)
		die("connect: %s", strerror(errno));
	ids = calloc(nsess, sizeof *ids);
	sent = calloc(nsess, sizeof *sent);
	polls = calloc(npoll, sizeof *polls);
	if (ids == NULL || sent == NULL || polls == NULL)
		die("out of memory");
	t_create = now_us();
	for (i = 0; i < nsess; i++) {
		t = now_us();
		if (session_create(&c, body, ids[i], sizeof ids[i]) != 201)
			die("scale: session %d: %.200s", i, conn_body(&c));
		samples_add(&create, now_us() - t);
	}
	t_create = now_us() - t_create;

	/* 2: park two long-polls on each. */
	atomic_store(&p.phase, 2);
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
		die("epoll_create1: %s", strerror(errno));
	for (i = 0; i < npoll; i++) {
		if (conn_open(&polls[i], &a.addr) != 0)
			die("scale: connection %d: %s", i, strerror(errno));
		snprintf(path, sizeof path, "/v1/sessions/%s?cursor=0&"
		    "wait_ms=60000", ids[i / 2]);
		if (conn_send(&polls[i], "GET", path, NULL, NULL, 0) != 0)
			die("scale: send: %s", strerror(errno));
		ev.events = EPOLLIN;
		ev.data.u32 = (uint32_t)i;
		epoll_ctl(ep, EPOLL_CTL_ADD, polls[i].fd, &ev);
	}
	sleep_us(hold);
	/* Answered before any output: a refusal, not a wake-up; not timed. */
	while ((n = epoll_wait(ep, evs, 256, 0)) > 0) {
		for (k = 0; k < n; k++)
			epoll_ctl(ep, EPOLL_CTL_DEL, polls[evs[k].data.u32].fd,
			    NULL);
		early += n;
	}

	/* 3: wake them: a keystroke to each session, its echo answers both. */
	atomic_store(&p.phase, 3);
	for (i = 0; i < nsess; i++) {
		snprintf(path, sizeof path, "/v1/sessions/%s/stdin", ids[i]);
		sent[i] = now_us();
		if (conn_do(&c, "POST", path, "Content-Type: application/"
		    "json\r\n", "{\"text\":\"x\"}", 12) != 200)
			die("scale: stdin %d failed", i);
		while (answered + early < npoll && (n = epoll_wait(ep, evs, 256,
		    i == nsess - 1 ? 10000 : 0)) > 0) {
			for (k = 0; k < n; k++) {
				struct conn *pc = &polls[evs[k].data.u32];

				if (conn_poll(pc) == 0)
					continue;
				samples_add(&wake, now_us() -
				    sent[evs[k].data.u32 / 2]);
				epoll_ctl(ep, EPOLL_CTL_DEL, pc->fd, NULL);
				answered++;
			}
			if (i < nsess - 1)
				break;
		}
	}
	atomic_store(&p.phase, -1);
	pthread_join(p.thread, NULL);
	for (i = 0; i < npoll; i++)
		conn_close(&polls[i]);
	close(ep);
	conn_close(&c);
	agentd_stop(&a);

	for (ph = 1; ph < PROBE_PHASES; ph++)
		for (i = 0; i < (int)p.s[ph].n; i++)
			samples_add(&during, p.s[ph].v[i]);
	if (answered < npoll || early > 0)
		note("   warning: %d of %d long-polls answered, %d early",
		    answered, npoll, early);
	note("   created %d sessions in %.2f s (p50 %s, p99 %s); long-polls "
	    "woken p50 %s, p99 %s", nsess, t_create / 1e6,
	    fmt_us(samples_pct(&create, 50)), fmt_us(samples_pct(&create, 99)),
	    fmt_us(samples_pct(&wake, 50)), fmt_us(samples_pct(&wake, 99)));
	note("   healthz p99 while creating %s, parking %s, waking %s",
	    fmt_us(samples_pct(&p.s[1], 99)), fmt_us(samples_pct(&p.s[2], 99)),
	    fmt_us(samples_pct(&p.s[3], 99)));
	snprintf(path, sizeof path, "7 scale: healthz p99 throughout %d "
	    "sessions + %d long-polls vs idle", nsess, npoll);
	table_row(path, fmt_us(samples_pct(&during, 99)),
	    fmt_us(samples_pct(&p.s[0], 99)),
	    samples_pct(&during, 99) / samples_pct(&p.s[0], 99), "≤ 10 ms",
	    met_le(samples_pct(&during, 99), SCALE_P99_GOAL), NAN);
	snprintf(path, sizeof path, "7 scale: create p99 at up to %d "
	    "sessions vs healthz p99 idle", nsess);
	table_row(path, fmt_us(samples_pct(&create, 99)),
	    fmt_us(samples_pct(&p.s[0], 99)),
	    samples_pct(&create, 99) / samples_pct(&p.s[0], 99), "≤ 10 ms",
	    met_le(samples_pct(&create, 99), SCALE_P99_GOAL), NAN);
	snprintf(path, sizeof path, "7 scale: %d long-polls woken by stdin, "
	    "p99 vs healthz p99 idle", npoll);
	table_row(path, fmt_us(samples_pct(&wake, 99)),
	    fmt_us(samples_pct(&p.s[0], 99)),
	    samples_pct(&wake, 99) / samples_pct(&p.s[0], 99), "—", MET_INFO,
	    NAN);
	for (ph = 0; ph < PROBE_PHASES; ph++)
		samples_free(&p.s[ph]);
	samples_free(&create);
	samples_free(&wake);
	samples_free(&during);
	free(ids);
	free(sent);
	free(polls);
	(void)met_ge;
}

/* ---- 8. ring microbenchmarks -------------------------------------------- */

void
sc_ring(void)
{
	char	*argv[] = { (char *)cfg.ring_bench, "--seconds", "0.25", NULL };
	char	*qargv[] = { (char *)cfg.ring_bench, "--quick", NULL };
	char	*out, *line, *save, path[512], test[64], what[128];
	double	 gbps, cpu, ratio, base = NAN;
	size_t	 chunk;
	FILE	*f;

	note("8. ring microbenchmarks");
	if (cfg.ring_bench == NULL || access(cfg.ring_bench, X_OK) != 0) {
		note("   no ring_bench: skipped");
		return;
	}
	out = capture(cfg.quick ? qargv : argv);
	snprintf(path, sizeof path, "%s/ring_bench.txt", cfg.outdir);
	if ((f = fopen(path, "w")) != NULL) {
		fputs(out, f);
		fclose(f);
	}
	/* "   4096  append, 0 readers     10.96   15.26   0.22 ..." */
	for (line = strtok_r(out, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		char	*p, *gap;

		chunk = strtoul(line, &p, 10);
		if (p == line || chunk == 0)
			continue;
		while (*p == ' ')
			p++;
		/* The test's name ends at the first run of two spaces. */
		if ((gap = strstr(p, "  ")) == NULL ||
		    (size_t)(gap - p) >= sizeof test)
			continue;
		memcpy(test, p, gap - p);
		test[gap - p] = '\0';
		if (sscanf(gap, "%lf %lf %lf", &gbps, &cpu, &ratio) != 3)
			continue;
		if (strncmp(test, "memcpy", 6) == 0) {
			base = cpu;
			continue;
		}
		if (strcmp(test, "append, 0 readers") != 0 &&
		    strcmp(test, "append, 4 readers") != 0 &&
		    strcmp(test, "read") != 0)
			continue;
		snprintf(what, sizeof what, "8 ring %s, %zu B chunks vs memcpy",
		    test, chunk);
		snprintf(path, sizeof path, "%.1f GB/s", cpu);
		snprintf(test, sizeof test, "%.1f GB/s", base);
		table_row(what, path, test, ratio, "—", MET_INFO, NAN);
	}
	free(out);
}

/* ---- 9. requests per second, static vs dev ------------------------------ */

/* wrk -t2 -c32 on a URL; requests per second, NAN on failure. */
static double
wrk_rate(int port, const char *path, double secs)
{
	char	 url[256], dur[32], hdr[256];
	char	*argv[] = { "wrk", "-t2", "-c32", "-d", dur, "-H", hdr, url,
		    NULL };
	char	*out, *p;
	double	 rate = NAN;

	snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
	snprintf(dur, sizeof dur, "%.0fs", secs);
	snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", cfg.token);
	out = capture(argv);
	if ((p = strstr(out, "Requests/sec:")) != NULL)
		rate = strtod(p + 13, NULL);
	if (strstr(out, "Non-2xx") != NULL)
		note("   warning: wrk %s saw non-2xx answers", path);
	free(out);
	return rate;
}

void
sc_wrk(void)
{
	static const char	 body[] = "{\"argv\":[\"/bin/true\"],"
				    "\"yield_ms\":5000}";
	struct agentd		 a[2];	/* 0: static (release), 1: dev */
	struct samples		 s[2][2] = { { { 0 } } };	/* [bin][url] */
	const char		*bins[2] = { cfg.agentd, cfg.agentd_dev };
	char			 path[2][160], id[128];
	struct conn		 c;
	int			 rounds = cfg.quick ? 1 : 3, r, b, u, bb;
	double			 secs = cfg.quick ? 1 : 3, st, dv;

	note("9. requests/s with wrk, 32 connections: static vs dev build");
	if (cfg.agentd_dev == NULL || !in_path("wrk")) {
		note("   no dev build or no wrk: skipped");
		return;
	}
	for (b = 0; b < 2; b++) {
		if (agentd_start(&a[b], bins[b], NULL) != 0)
			die("cannot start %s", bins[b]);
		if (conn_open(&c, &a[b].addr) != 0 ||
		    session_create(&c, body, id, sizeof id) != 201)
			die("wrk: cannot create a session");
		conn_close(&c);
		snprintf(path[b], sizeof path[b], "/v1/sessions/%s", id);
	}
	for (r = 0; r < rounds; r++) {
		for (u = 0; u < 2; u++) {
			for (bb = 0; bb < 2; bb++) {
				b = (r + bb) % 2;	/* alternate who goes first */
				samples_add(&s[b][u], wrk_rate(a[b].port,
				    u == 0 ? "/healthz" : path[b], secs));
			}
		}
	}
	agentd_stop(&a[0]);
	agentd_stop(&a[1]);
	for (u = 0; u < 2; u++) {
		st = samples_median(&s[0][u]);
		dv = samples_median(&s[1][u]);
		table_row(u == 0 ? "9 wrk GET /healthz: static musl vs dev glibc" :
		    "9 wrk GET /v1/sessions/{id}: static musl vs dev glibc",
		    fmt_rate(st), fmt_rate(dv), st / dv, "≥ 1.0×",
		    met_ge(st / dv, 1.0), 1.0 / (st / dv));
	}
	for (b = 0; b < 2; b++)
		for (u = 0; u < 2; u++)
			samples_free(&s[b][u]);
}
