/*
 * upgrade.c -- scenario 13: the pause in service of a live upgrade (issue
 * 31).  One agentd with 100 PTY `cat` sessions upgrades to a copy of its
 * own binary; the pause is from the 202 answer to the first 200 of
 * /healthz (on a new connection, asked in a loop) that counts the
 * upgrade: the checks before the answer are not in it.  Goal: ≤ 50 ms.
 * The baseline is one healthz of the same instance.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define UPG_SESSIONS	100	/* PTY sessions kept across each upgrade */
#define UPG_GOAL_US	50000	/* the pause's goal */
#define UPG_WAIT_US	10e6	/* give up on a round after this */

static int	upg_copy(const char *, const char *);
static long long upg_count(const struct sockaddr_in *);

/* Copy the binary from to to, mode 0755. */
static int
upg_copy(const char *from, const char *to)
{
	char	buf[65536];
	ssize_t	n;
	int	in, out, rc = 0;

	if ((in = open(from, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	unlink(to);
	if ((out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0755)) == -1) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, (size_t)n) != n)
			rc = -1;
	if (n < 0)
		rc = -1;
	close(in);
	close(out);
	return rc;
}

/* /healthz's "upgrades" on a new connection; -1 when it did not answer 200. */
static long long
upg_count(const struct sockaddr_in *addr)
{
	struct conn	c;
	long long	n = -1;
	const char	*b;

	if (conn_open(&c, addr) != 0)
		return -1;
	if (conn_do(&c, "GET", "/healthz", NULL, NULL, 0) == 200) {
		b = conn_body(&c);
		n = json_int(b, b + c.body_len, "upgrades", -1);
	}
	conn_close(&c);
	return n;
}

/* 13. the pause of a live upgrade under 100 sessions. */
void
sc_upgrade(void)
{
	static const char	 body_fmt[] = "{\"path\":\"%s\"}";
	struct samples		 pause = { 0 }, hz = { 0 };
	struct agentd		 a;
	struct conn		 c;
	char			 next[512], body[600], id[128];
	int			 rounds = cfg.quick ? 2 : 10, r, i, st;
	double			 t, t0, end;
	long long		 n;

	note("13. live upgrade: the pause from the 202 to the successor's "
	    "healthz, %d PTY sessions", UPG_SESSIONS);
	snprintf(next, sizeof next, "%s/agentd-next", cfg.tmpdir);
	if (upg_copy(cfg.agentd, next) != 0)
		die("copy %s to %s: %s", cfg.agentd, next, strerror(errno));
	if (agentd_start(&a, cfg.agentd, (const char *const[]){
	    "--max-sessions", "200", NULL }) != 0)
		die("cannot start %s", cfg.agentd);
	if (conn_open(&c, &a.addr) != 0)
		die("connect: %s", strerror(errno));
	for (i = 0; i < UPG_SESSIONS; i++) {
		if ((st = session_create(&c, "{\"argv\":[\"cat\"],\"tty\":true,"
		    "\"ring_bytes\":65536}", id, sizeof id)) != 201)
			die("create: %d", st);
	}
	conn_close(&c);
	snprintf(body, sizeof body, body_fmt, next);
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 5; i++) {
			if (conn_open(&c, &a.addr) != 0)
				die("connect: %s", strerror(errno));
			t = now_us();
			conn_do(&c, "GET", "/healthz", NULL, NULL, 0);
			samples_add(&hz, now_us() - t);
			conn_close(&c);
		}
		if (conn_open(&c, &a.addr) != 0)
			die("connect: %s", strerror(errno));
		st = conn_do(&c, "POST", "/v1/sandbox/upgrade",
		    "Content-Type: application/json\r\n", body, strlen(body));
		t0 = now_us();
		conn_close(&c);
		if (st != 202)
			die("upgrade: %d", st);
		end = t0 + UPG_WAIT_US;
		while ((n = upg_count(&a.addr)) != r + 1 && now_us() < end)
			;
		if (n != r + 1)
			die("upgrade %d not seen within %.0f s", r + 1,
			    UPG_WAIT_US / 1e6);
		samples_add(&pause, now_us() - t0);
	}
	note("   pause p50 %s, max %s over %d upgrades",
	    fmt_us(samples_median(&pause)), fmt_us(samples_pct(&pause, 100)),
	    rounds);
	table_row("13 live upgrade, 100 PTY sessions: 202 to the successor's "
	    "healthz vs one healthz", fmt_us(samples_median(&pause)),
	    fmt_us(samples_median(&hz)),
	    samples_median(&pause) / samples_median(&hz), "≤ 50 ms",
	    samples_median(&pause) <= UPG_GOAL_US ? MET_YES : MET_NO,
	    samples_median(&pause) / UPG_GOAL_US);
	agentd_stop(&a);
	unlink(next);
	samples_free(&pause);
	samples_free(&hz);
}
