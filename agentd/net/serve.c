/*
 * serve.c -- Go's http.ServeContent decisions for a file's answer, with
 * envd's encoding rules (see serve.h).
 */
#include <sys/random.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "serve.h"
#include "util.h"

/* A precondition's outcome, as Go's condResult. */
#define SERVE_NONE	0
#define SERVE_TRUE	1
#define SERVE_FALSE	2

static char	*serve_dup(const struct evkeyvalq *, const char *);
static int	 serve_encoding(const char *, int, int);
static int	 serve_etags(const char *);
static int	 serve_time(const char *, time_t *);
static int	 serve_since(const char *, time_t);
static int	 serve_num(const char *, size_t, uint64_t *);
static int	 serve_ranges(const char *, uint64_t, struct serve_ans *);

/* A header's value, copied; NULL when absent or empty (Go's Get). */
static char *
serve_dup(const struct evkeyvalq *h, const char *name)
{
	const char	*v = evhttp_find_header(h, name);

	return (v != NULL && *v != '\0' ? xstrdup(v) : NULL);
}

/* Copy the headers and decide the encoding. */
void
serve_read(struct serve_req *r, const struct evkeyvalq *h, int gzip_ok)
{
	struct timespec	ts;
	uint8_t		rnd[SERVE_BOUNDARY_LEN / 2];
	size_t		i;

	memset(r, 0, sizeof *r);
	r->range = serve_dup(h, "Range");
	r->if_range = serve_dup(h, "If-Range");
	r->if_match = serve_dup(h, "If-Match");
	r->if_unmodified = serve_dup(h, "If-Unmodified-Since");
	r->if_none_match = serve_dup(h, "If-None-Match");
	r->if_modified = serve_dup(h, "If-Modified-Since");
	r->enc = serve_encoding(evhttp_find_header(h, "Accept-Encoding"),
	    gzip_ok, r->range != NULL || r->if_modified != NULL ||
	    r->if_none_match != NULL || r->if_range != NULL);
	/*
	 * A boundary, not a secret: never wait for the kernel's pool (early
	 * in a VM's boot it blocks for a second); else the clock's bits.
	 */
	if (r->range == NULL || strchr(r->range, ',') == NULL)
		return;			/* no multipart answer */
	if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		for (i = 0; i < sizeof rnd; i++)
			rnd[i] = (uint8_t)((uint64_t)ts.tv_nsec >> (i % 4 * 8) ^
			    (uint64_t)ts.tv_sec >> (i % 8));
	}
	for (i = 0; i < sizeof rnd; i++)
		snprintf(r->boundary + 2 * i, 3, "%02x", rnd[i]);
}

/* Free the copies. */
void
serve_free(struct serve_req *r)
{
	free(r->range);
	free(r->if_range);
	free(r->if_match);
	free(r->if_unmodified);
	free(r->if_none_match);
	free(r->if_modified);
	memset(r, 0, sizeof *r);
}

/*
 * envd's parseAcceptEncoding: the supported entry (gzip, identity, "*")
 * of the highest q-value above 0, first one first; none, identity unless
 * it was refused ("identity;q=0", or "*;q=0" without an identity of q>0),
 * then SERVE_REFUSE.  A Range or conditional request gets identity (or
 * SERVE_REFUSE when refused), as envd does to keep ServeContent's 206/304.
 */
static int
serve_encoding(const char *v, int gzip_ok, int ranged)
{
	const char	*p, *end, *semi, *q;
	char		*num;
	double		 qv, x, best = 0;
	size_t		 n;
	int		 enc = -1, id_no = 0, id_yes = 0, any_no = 0, e;

	if (v == NULL || *v == '\0')
		return (SERVE_IDENTITY);
	for (p = v; *p != '\0'; p = *end == ',' ? end + 1 : end) {
		end = p + strcspn(p, ",");
		semi = memchr(p, ';', (size_t)(end - p));
		qv = 1;
		for (q = semi; q != NULL; q = q < end ? memchr(q, ';',
		    (size_t)(end - q)) : NULL) {
			q += 1 + strspn(q + 1, " \t");
			if (q < end && strncasecmp(q, "q=", 2) == 0) {
				/* Go's ParseFloat: all of it, or q stays 1. */
				x = strtod(q + 2, &num);
				if (num != q + 2 && (num == end ||
				    strchr(" \t;", *num) != NULL))
					qv = x;
			}
		}
		p += strspn(p, " \t");
		n = (size_t)((semi != NULL ? semi : end) - p);
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		e = n == 8 && strncasecmp(p, "identity", 8) == 0 ? 0 :
		    n == 1 && *p == '*' ? 1 :
		    n == 4 && strncasecmp(p, "gzip", 4) == 0 && gzip_ok ? 2 : -1;
		if (e == 0 && qv == 0)
			id_no = 1;
		else if (e == 0)
			id_yes = 1;
		else if (e == 1 && qv == 0)
			any_no = 1;
		if (e != -1 && qv != 0 && (enc == -1 || qv > best)) {
			enc = e;
			best = qv;
		}
	}
	if (any_no && !id_yes)
		id_no = 1;
	if (ranged)
		return (id_no ? SERVE_REFUSE : SERVE_IDENTITY);
	if (enc == 2 || (enc == 1 && id_no))
		return (SERVE_GZIP);
	if (enc == 0 || enc == 1 || !id_no)
		return (SERVE_IDENTITY);
	return (SERVE_REFUSE);
}

/*
 * An If-Match or If-None-Match list against a file without an ETag: 1
 * when it holds "*" before any malformed entry (Go's scan), else 0.
 */
static int
serve_etags(const char *v)
{
	const char	*p = v, *close;

	for (;;) {
		p += strspn(p, " \t\r\n,");
		if (*p == '*')
			return (1);
		if (strncmp(p, "W/", 2) == 0)
			p += 2;
		if (*p != '"' || (close = strchr(p + 1, '"')) == NULL)
			return (0);
		p = close + 1;
	}
}

/*
 * Go's http.ParseTime: IMF-fixdate, RFC 850 (a 2-digit year: 69-99 the
 * 1900s) or asctime, in GMT; 0 or -1.
 */
static int
serve_time(const char *v, time_t *t)
{
	static const char	 mons[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	const char		*m;
	char			 mon[4] = "", gmt[4] = "GMT";
	int			 d, y, h, mi, s, n = -1;
	int64_t			 era, yoe, doy;

	v += strspn(v, "SMTWFadehinorstuy");	/* the weekday */
	if (sscanf(v, ", %2d %3s %4d %2d:%2d:%2d %3s%n", &d, mon, &y, &h, &mi,
	    &s, gmt, &n) != 7 || y < 1000) {
		n = -1;
		if (sscanf(v, ", %2d-%3s-%2d %2d:%2d:%2d %3s%n", &d, mon, &y,
		    &h, &mi, &s, gmt, &n) == 7)
			y += y < 69 ? 2000 : 1900;
		else if (sscanf(v, " %3s %2d %2d:%2d:%2d %4d%n", mon, &d, &h,
		    &mi, &s, &y, &n) != 6)
			return (-1);
	}
	if (n < 0 || v[n] != '\0' || strcmp(gmt, "GMT") != 0 ||
	    strlen(mon) != 3 || (m = strstr(mons, mon)) == NULL ||
	    (m - mons) % 3 != 0 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    s > 60 || h < 0 || mi < 0 || s < 0)
		return (-1);
	/* Days from the civil date (H. Hinnant's algorithm). */
	n = (int)(m - mons) / 3 + 1;
	y -= n <= 2;
	era = y / 400;
	yoe = y - era * 400;
	doy = (153 * (n + (n > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	*t = (time_t)((era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy -
	    719468) * 86400 + h * 3600 + mi * 60 + s);
	return (0);
}

/*
 * If-Unmodified-Since or If-Modified-Since against mtime: SERVE_TRUE when
 * the file was not modified after the date.
 */
static int
serve_since(const char *v, time_t mtime)
{
	time_t	t;

	if (v == NULL || mtime == 0 || serve_time(v, &t) != 0)
		return (SERVE_NONE);
	return (mtime <= t ? SERVE_TRUE : SERVE_FALSE);
}

/* A decimal as Go's ParseInt (a sign allowed), 0..INT64_MAX; 0 or -1. */
static int
serve_num(const char *p, size_t n, uint64_t *out)
{
	uint64_t	v = 0;

	if (n > 0 && *p == '+') {
		p++;
		n--;
	}
	if (n == 0)
		return (-1);
	for (; n > 0; p++, n--) {
		if (!isdigit((unsigned char)*p) || v > (INT64_MAX - 9) / 10)
			return (-1);
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	return (0);
}

/*
 * Go's parseRange: ans->ranges of the Range header against size; 0, 1
 * when none overlaps, -1 when malformed, -2 without memory.
 */
static int
serve_ranges(const char *v, uint64_t size, struct serve_ans *a)
{
	const char	*p, *end, *dash, *s, *e;
	uint64_t	 start, last;
	size_t		 cap = 1, sl, el;
	int		 nooverlap = 0;

	if (strncmp(v, "bytes=", 6) != 0)
		return (-1);
	for (p = v + 6; *p != '\0'; p++)
		cap += *p == ',';
	if ((a->ranges = calloc(cap, sizeof *a->ranges)) == NULL)
		return (-2);
	for (p = v + 6; *p != '\0'; p = *end == ',' ? end + 1 : end) {
		end = p + strcspn(p, ",");
		p += strspn(p, " \t\r\n");
		if (p >= end)
			continue;
		if ((dash = memchr(p, '-', (size_t)(end - p))) == NULL)
			return (-1);
		for (s = p, sl = (size_t)(dash - p); sl > 0 &&
		    strchr(" \t\r\n", s[sl - 1]) != NULL; sl--)
			;
		e = dash + 1 + strspn(dash + 1, " \t\r\n");
		for (el = e > end ? 0 : (size_t)(end - e); el > 0 &&
		    strchr(" \t\r\n", e[el - 1]) != NULL; el--)
			;
		if (sl == 0) {
			/* A suffix: the last N bytes. */
			if (el == 0 || *e == '-' || serve_num(e, el, &last) != 0)
				return (-1);
			if (last > size)
				last = size;
			a->ranges[a->nranges].off = size - last;
			a->ranges[a->nranges++].len = last;
			continue;
		}
		if (serve_num(s, sl, &start) != 0)
			return (-1);
		if (start >= size) {
			nooverlap = 1;
			continue;
		}
		last = size - 1;
		if (el > 0 && (serve_num(e, el, &last) != 0 || start > last))
			return (-1);
		if (last >= size)
			last = size - 1;
		a->ranges[a->nranges].off = start;
		a->ranges[a->nranges++].len = last - start + 1;
	}
	return (nooverlap && a->nranges == 0 ? 1 : 0);
}

/* Decide the answer, as ServeContent's checkPreconditions then ranges. */
int
serve_eval(const struct serve_req *r, uint64_t size, time_t mtime,
    struct serve_ans *a)
{
	uint64_t	sum = 0;
	time_t		t;
	size_t		i;
	char		head[SERVE_PART_HEAD_MAX];
	int		c;

	memset(a, 0, sizeof *a);
	a->size = size;
	a->mtime = mtime;
	a->status = 200;
	a->body = size;
	/* If-Match (no ETag: only "*"), else If-Unmodified-Since: 412. */
	c = r->if_match != NULL ? (serve_etags(r->if_match) ? SERVE_TRUE :
	    SERVE_FALSE) : serve_since(r->if_unmodified, mtime);
	if (c == SERVE_FALSE) {
		a->status = 412;
		goto empty;
	}
	/* If-None-Match (only "*" matches), else If-Modified-Since: 304. */
	if (r->if_none_match != NULL ? serve_etags(r->if_none_match) :
	    serve_since(r->if_modified, mtime) == SERVE_TRUE) {
		a->status = 304;
		goto empty;
	}
	/* If-Range: an ETag never matches; a date must be the mtime's. */
	if (r->range == NULL || (r->if_range != NULL && (mtime == 0 ||
	    r->if_range[0] == '"' || strncmp(r->if_range, "W/", 2) == 0 ||
	    serve_time(r->if_range, &t) != 0 || t != mtime)))
		return (0);
	switch ((c = serve_ranges(r->range, size, a))) {
	case -2:
		return (-1);
	case -1:
	case 1:
		a->nooverlap = c == 1;
		a->status = 416;
		serve_ans_free(a);
		goto empty;
	}
	for (i = 0; i < a->nranges && sum <= size; i++)
		sum = a->ranges[i].len > UINT64_MAX - sum ? UINT64_MAX :
		    sum + a->ranges[i].len;
	if (a->nranges == 0 || sum > size) {
		serve_ans_free(a);
		return (0);
	}
	a->status = 206;
	a->body = sum;
	if (a->nranges > 1) {
		for (i = 0; i <= a->nranges; i++)
			a->body += serve_part(r, a, i, head);
	}
	return (0);
empty:
	a->body = 0;
	return (0);
}

/* Free the ranges. */
void
serve_ans_free(struct serve_ans *a)
{
	free(a->ranges);
	a->ranges = NULL;
	a->nranges = 0;
}

/* The head of part i, or the closing delimiter, as Go's multipart writes. */
size_t
serve_part(const struct serve_req *r, const struct serve_ans *a, size_t i,
    char *buf)
{
	int	n;

	if (i == a->nranges)
		n = snprintf(buf, SERVE_PART_HEAD_MAX, "\r\n--%s--\r\n",
		    r->boundary);
	else
		n = snprintf(buf, SERVE_PART_HEAD_MAX, "%s--%s\r\n"
		    "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64
		    "\r\nContent-Type: application/octet-stream\r\n\r\n",
		    i == 0 ? "" : "\r\n", r->boundary, a->ranges[i].off,
		    a->ranges[i].off + a->ranges[i].len - 1, a->size);
	return ((size_t)n);
}

/* The Content-Type. */
const char *
serve_type(const struct serve_req *r, const struct serve_ans *a, char *buf)
{
	if (a->status != 206 || a->nranges < 2)
		return ("application/octet-stream");
	snprintf(buf, SERVE_TYPE_MAX, "multipart/byteranges; boundary=%s",
	    r->boundary);
	return (buf);
}

/* The headers. */
void
serve_head(const struct serve_req *r, const struct serve_ans *a,
    struct evkeyvalq *out)
{
	struct tm	tm;
	char		v[64];

	evhttp_add_header(out, "Vary", "Accept-Encoding");
	if (r->enc == SERVE_GZIP) {
		evhttp_add_header(out, "Content-Encoding", "gzip");
		return;
	}
	if (a->mtime != 0 && gmtime_r(&a->mtime, &tm) != NULL &&
	    strftime(v, sizeof v, "%a, %d %b %Y %H:%M:%S GMT", &tm) > 0)
		evhttp_add_header(out, "Last-Modified", v);
	if (a->status == 416 && a->nooverlap) {
		snprintf(v, sizeof v, "bytes */%" PRIu64, a->size);
		evhttp_add_header(out, "Content-Range", v);
	}
	if (a->status == 206 && a->nranges == 1) {
		snprintf(v, sizeof v, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
		    a->ranges[0].off, a->ranges[0].off + a->ranges[0].len - 1,
		    a->size);
		evhttp_add_header(out, "Content-Range", v);
	}
	if (a->status == 200 || a->status == 206)
		evhttp_add_header(out, "Accept-Ranges", "bytes");
}
