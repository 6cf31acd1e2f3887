/*
 * collapse.c -- envd's POST /collapse (see collapse.h).
 */
#include <sys/mman.h>
#include <sys/types.h>

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "collapse.h"
#include "connect.h"
#include "http.h"
#include "log.h"
#include "proto.h"
#include "util.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE	25
#endif

/* What a collapse did: CollapseResult. */
struct collapse_stats {
	int	regions, chunks, collapsed, huge, skipped;
	int	error;		/* the first madvise errno */
};

static void	collapse_post(struct http_req *, const struct pty_user *, int);
static int64_t	collapse_huge_bytes(void);
static void	collapse_range(uintptr_t, uintptr_t, struct collapse_stats *);

static const struct envd_route collapse_routes[] = {
	{ "/collapse", EVHTTP_REQ_POST, 0, collapse_post },
};

/* Register the route. */
void
collapse_register(void)
{
	envd_route_register(collapse_routes, nitems(collapse_routes));
}

/* AnonHugePages of smaps_rollup in bytes, -1 when unread. */
static int64_t
collapse_huge_bytes(void)
{
	FILE		*f;
	char		 line[128];
	long long	 kb = -1;

	if ((f = fopen("/proc/self/smaps_rollup", "re")) == NULL)
		return (-1);
	while (fgets(line, sizeof line, f) != NULL) {
		if (sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return (kb < 0 ? -1 : kb * 1024);
}

/* Advise a region huge, then collapse each whole chunk in it. */
static void
collapse_range(uintptr_t start, uintptr_t end, struct collapse_stats *s)
{
	uintptr_t	c;

	(void)madvise((void *)start, end - start, MADV_HUGEPAGE);
	c = (start + COLLAPSE_CHUNK - 1) & ~(uintptr_t)(COLLAPSE_CHUNK - 1);
	for (; c + COLLAPSE_CHUNK <= end; c += COLLAPSE_CHUNK) {
		s->chunks++;
		if (madvise((void *)c, COLLAPSE_CHUNK, MADV_COLLAPSE) == 0)
			s->collapsed++;
		else {
			if (s->error == 0)
				s->error = errno;
			s->skipped++;
		}
	}
}

/* POST /collapse */
static void
collapse_post(struct http_req *hr, const struct pty_user *u, int authorized)
{
	struct collapse_stats	 s = { 0 };
	struct proto_buf	 b = { 0 };
	unsigned long long	 lo, hi;
	int64_t			 t0 = clock_mono_ms(), before, after, grew;
	char			 line[512], perms[8], note[160];
	FILE			*f;
	int			 n, off;

	if ((f = fopen("/proc/self/maps", "re")) == NULL) {
		envd_plain_fail(hr, 500, "read self maps: %s", strerror(errno));
		return;
	}
	before = collapse_huge_bytes();
	while (fgets(line, sizeof line, f) != NULL) {
		off = 0;
		n = sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &lo, &hi, perms,
		    &off);
		/* Anonymous: no path after the inode. */
		if (n != 3 || off == 0 || (line[off] != '\0' &&
		    line[off] != '\n') || perms[0] != 'r' || perms[1] != 'w')
			continue;
		s.regions++;
		collapse_range((uintptr_t)lo, (uintptr_t)hi, &s);
	}
	fclose(f);
	after = collapse_huge_bytes();
	/* What the kernel accepted but found huge already did no work. */
	grew = before < 0 || after < before ? -1 : (after - before) /
	    COLLAPSE_CHUNK;
	if (grew >= 0 && grew < s.collapsed) {
		s.huge = s.collapsed - (int)grew;
		s.collapsed = (int)grew;
	}
	note[0] = '\0';
	if (s.chunks == 0)
		snprintf(note, sizeof note, "nothing to collapse: no whole "
		    "2 MiB chunk in agentd's anonymous memory");
	else if (s.collapsed + s.huge == 0)
		snprintf(note, sizeof note, "MADV_COLLAPSE: %s%s",
		    strerror(s.error), s.error == EINVAL ? " (Linux before "
		    "6.1, or transparent huge pages off)" : "");
	proto_buf_printf(&b, "{\"regions\":%d,\"chunks\":%d,\"collapsed\":%d,"
	    "\"alreadyHuge\":%d,\"skipped\":%d,\"elapsedMs\":%" PRId64,
	    s.regions, s.chunks, s.collapsed, s.huge, s.skipped,
	    clock_mono_ms() - t0);
	if (note[0] != '\0') {
		proto_buf_append(&b, ",\"note\":", 8);
		proto_buf_json_string(&b, note, strlen(note));
	}
	proto_buf_append(&b, "}\n", 2);
	log_info("%s: %d regions, %d chunks, %d collapsed, %d huge, %d "
	    "skipped", __func__, s.regions, s.chunks, s.collapsed, s.huge,
	    s.skipped);
	evhttp_add_header(evhttp_request_get_output_headers(hr->req),
	    "Cache-Control", "no-store");
	http_reply_raw(hr->req, 200, "application/json", &b);
}
