/*
 * streams.c -- scenario 10: a slow Server-Sent Events reader of a session
 * that floods, and healthz meanwhile (issue 23: healthz p95 at most
 * max(3x idle, 8 ms)).
 */
#include <sys/socket.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define SSE_GOAL_FLOOR_US	8000	/* µs: the goal is never below this */
#define SSE_READ_BYTES		1024	/* what the slow reader reads a turn */

extern struct agentd	 bench_ag;

static int
met_le(double v, double limit)
{
	return isnan(v) ? MET_INFO : v <= limit ? MET_YES : MET_NO;
}

/* healthz n times on c into s. */
static void
sse_healthz(struct conn *c, int n, int slow_fd, struct samples *s)
{
	char	buf[SSE_READ_BYTES];
	double	t;
	int	i;

	for (i = 0; i < n; i++) {
		t = now_us();
		if (conn_do(c, "GET", "/healthz", NULL, NULL, 0) != 200)
			die("sse: healthz failed");
		samples_add(s, now_us() - t);
		/* The slow reader: a kilobyte now and then, never blocking. */
		if (slow_fd >= 0 && i % 10 == 0)
			(void)recv(slow_fd, buf, sizeof buf, MSG_DONTWAIT);
		sleep_us(1000);
	}
}

/* A stream of the session id's output on a socket with a small buffer. */
static int
sse_open_slow(const char *id)
{
	char	req[512];
	int	fd, rcv = 4096, n;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		die("sse: socket: %s", strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
	if (connect(fd, (const struct sockaddr *)&bench_ag.addr,
	    sizeof bench_ag.addr) == -1)
		die("sse: connect: %s", strerror(errno));
	n = snprintf(req, sizeof req, "GET /v1/sessions/%s HTTP/1.1\r\n"
	    "Host: bench\r\nAccept: text/event-stream\r\n"
	    "Authorization: Bearer %s\r\n\r\n", id, cfg.token);
	if (write(fd, req, (size_t)n) != n)
		die("sse: write: %s", strerror(errno));
	return fd;
}

void
sc_streams(void)
{
	static const char	 flood[] = "{\"argv\":[\"cat\",\"/dev/zero\"]}";
	struct samples		 idle = { 0 }, busy = { 0 };
	struct conn		 c;
	char			 loc[256], id[256], path[300];
	long			 rss0, rss1;
	double			 i95, b95, goal;
	int			 n = cfg.quick ? 100 : 1000, fd;

	note("10. SSE: healthz while a slow reader streams a flood");
	if (conn_open(&c, &bench_ag.addr) != 0)
		die("connect: %s", strerror(errno));
	sse_healthz(&c, n, -1, &idle);
	if (conn_do(&c, "POST", "/v1/sessions", "Content-Type: "
	    "application/json\r\n", flood, strlen(flood)) != 201 ||
	    conn_header(&c, "Location", loc, sizeof loc) == NULL ||
	    strncmp(loc, "/v1/sessions/", 13) != 0)
		die("sse: flood create failed");
	snprintf(id, sizeof id, "%s", loc + 13);
	fd = sse_open_slow(id);
	sleep_us(200000);
	rss0 = rss_kib(bench_ag.pid);
	sse_healthz(&c, n, fd, &busy);
	rss1 = rss_kib(bench_ag.pid);
	close(fd);
	snprintf(path, sizeof path, "/v1/sessions/%s?grace_ms=0", id);
	(void)conn_do(&c, "DELETE", path, NULL, NULL, 0);
	conn_close(&c);

	i95 = samples_pct(&idle, 95);
	b95 = samples_pct(&busy, 95);
	goal = fmax(3 * i95, SSE_GOAL_FLOOR_US);
	table_row("10 SSE: healthz p95, a slow reader of a flood vs idle",
	    fmt_us(b95), fmt_us(i95), b95 / i95, "≤ max(3× idle, 8 ms)",
	    met_le(b95, goal), b95 / goal);
	note("   agentd's RSS moved by %ld KiB during the stream", rss1 - rss0);
	samples_free(&idle);
	samples_free(&busy);
}
