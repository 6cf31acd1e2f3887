/*
 * query.c -- the query string options of the session endpoints
 * (?cursor=&wait_ms=&yield_ms=&max_bytes=&grace_ms=&eof=).
 */
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "proto.h"

#define PROTO_QUERY_KEY_MAX	24	/* bytes of a key we know, decoded */
#define PROTO_QUERY_VAL_MAX	32	/* bytes of a value we read, decoded */

static int	proto_digits(const char *, size_t, uint64_t *);
static int	proto_query_pair(const char *, size_t, const char *, size_t,
		    int, struct proto_query *, struct proto_err *);

/* The value of a hex digit, or -1. */
int
proto_hex(int c)
{
	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (c - 'A' + 10);
	return (-1);
}

/*
 * Percent-decode s[0..len) into out (at most size bytes; the decoded length
 * goes to *outlen, which may exceed size: the caller then knows the value is
 * too long for what it wants).  -1 on a bad escape.
 */
int
proto_unescape(const char *s, size_t len, char *out, size_t size,
    size_t *outlen)
{
	size_t	i, o = 0;
	int	hi, lo;
	char	c;

	for (i = 0; i < len; i++) {
		c = s[i];
		if (c == '%') {
			if (len - i < 3 || (hi = proto_hex(s[i + 1])) < 0 ||
			    (lo = proto_hex(s[i + 2])) < 0)
				return (-1);
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+')
			c = ' ';
		if (o < size)
			out[o] = c;
		o++;
	}
	*outlen = o;
	return (0);
}

/* Decimal digits into *out, saturating at UINT64_MAX (then 1); else -1. */
static int
proto_digits(const char *s, size_t len, uint64_t *out)
{
	uint64_t	n = 0;
	size_t		i;
	int		over = 0;

	if (len == 0)
		return (-1);
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return (-1);
		if (n > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10) {
			n = UINT64_MAX;
			over = 1;
		} else if (!over)
			n = n * 10 + (uint64_t)(s[i] - '0');
	}
	*out = n;
	return (over);
}

/* Apply one decoded key=value pair (has_value 0: a bare key). */
static int
proto_query_pair(const char *key, size_t klen, const char *val, size_t vlen,
    int has_value, struct proto_query *q, struct proto_err *err)
{
	uint64_t	n = 0;
	int		r, *flag;

#define KEY_IS(s) (klen == sizeof(s) - 1 && memcmp(key, s, klen) == 0)
	if (KEY_IS("eof") || KEY_IS("head_tail") || KEY_IS("strip_ansi")) {
		flag = KEY_IS("eof") ? &q->eof : KEY_IS("head_tail") ?
		    &q->head_tail : &q->strip_ansi;
		if (!has_value || (vlen == 4 && memcmp(val, "true", 4) == 0) ||
		    (vlen == 1 && val[0] == '1'))
			*flag = 1;
		else if ((vlen == 5 && memcmp(val, "false", 5) == 0) ||
		    (vlen == 1 && val[0] == '0'))
			*flag = 0;
		else
			return (proto_fail(err, 400, "invalid_request",
			    "query parameter '%.*s' must be true, false, 1 or 0",
			    (int)klen, key));
		return (0);
	}
	if (KEY_IS("encoding")) {
		if ((q->encoding = proto_encoding(val, vlen)) < 0)
			return (proto_fail(err, 400, "invalid_request",
			    "query parameter 'encoding' must be base64 or "
			    "text"));
		return (0);
	}
	if (!KEY_IS("cursor") && !KEY_IS("wait_ms") && !KEY_IS("yield_ms") &&
	    !KEY_IS("max_bytes") && !KEY_IS("grace_ms") && !KEY_IS("idle_ms") &&
	    !KEY_IS("port") && !KEY_IS("limit") && !KEY_IS("after") &&
	    !KEY_IS("max_bytes_stdout") && !KEY_IS("max_bytes_stderr") &&
	    !KEY_IS("offset"))
		return (0);
	r = vlen > PROTO_QUERY_VAL_MAX ? -1 : proto_digits(val, vlen, &n);
	if (KEY_IS("cursor") || KEY_IS("after")) {
		if (r != 0 && KEY_IS("after"))
			return (proto_fail(err, 400, "invalid_cursor",
			    "query parameter 'after' must be a list's \"next\""));
		if (KEY_IS("after")) {
			q->after = n;
			return (0);
		}
		if (r != 0)
			return (proto_fail(err, 400, "invalid_cursor",
			    "query parameter 'cursor' must be a chunk id, a"
			    " decimal integer in 0..%llu",
			    (unsigned long long)UINT64_MAX));
		q->cursor = n;
		return (0);
	}
	if (KEY_IS("port")) {
		if (r != 0 || n < 1 || n > 65535)
			return (proto_fail(err, 400, "invalid_request",
			    "query parameter 'port' must be a port number,"
			    " 1..65535"));
		q->port = (int)n;
		return (0);
	}
	if (r < 0)
		return (proto_fail(err, 400, "invalid_request",
		    "query parameter '%.*s' must be an integer >= 0",
		    (int)klen, key));
	if (KEY_IS("wait_ms"))
		q->wait_ms = n > PROTO_WAIT_MAX_MS ? PROTO_WAIT_MAX_MS : (int64_t)n;
	else if (KEY_IS("yield_ms"))
		q->yield_ms = n > PROTO_WAIT_MAX_MS ? PROTO_WAIT_MAX_MS :
		    (int64_t)n;
	else if (KEY_IS("idle_ms"))
		q->idle_ms = n > PROTO_WAIT_MAX_MS ? PROTO_WAIT_MAX_MS :
		    (int64_t)n;
	else if (KEY_IS("limit"))
		q->limit = n;
	else if (KEY_IS("max_bytes"))
		q->max_bytes = n > PROTO_MAX_BYTES_MAX ? PROTO_MAX_BYTES_MAX :
		    (size_t)n;
	else if (KEY_IS("max_bytes_stdout"))
		q->max_bytes_stdout = n > PROTO_MAX_BYTES_MAX ?
		    PROTO_MAX_BYTES_MAX : (size_t)n;
	else if (KEY_IS("max_bytes_stderr"))
		q->max_bytes_stderr = n > PROTO_MAX_BYTES_MAX ?
		    PROTO_MAX_BYTES_MAX : (size_t)n;
	else if (KEY_IS("offset")) {
		if (r != 0 || n > INT64_MAX)
			return (proto_fail(err, 400, "invalid_request",
			    "query parameter 'offset' is too large"));
		q->offset = (int64_t)n;
	}
	else if (r != 0 || n > PROTO_GRACE_MAX_MS)
		return (proto_fail(err, 400, "invalid_request",
		    "query parameter 'grace_ms' must be at most %d",
		    PROTO_GRACE_MAX_MS));
	else
		q->grace_ms = (int64_t)n;
#undef KEY_IS
	return (0);
}

/* Parse a raw query string into q, defaults first. */
int
proto_parse_query(const char *query, struct proto_query *q,
    struct proto_err *err)
{
	char		 key[PROTO_QUERY_KEY_MAX], val[PROTO_QUERY_VAL_MAX];
	const char	*p, *end, *eq, *amp;
	size_t		 klen, vlen;

	memset(q, 0, sizeof *q);
	q->max_bytes = PROTO_MAX_BYTES_DEFAULT;
	q->max_bytes_stdout = q->max_bytes_stderr = PROTO_MAX_BYTES_UNSET;
	q->offset = -1;
	q->encoding = PROTO_ENC_UNSET;
	q->grace_ms = -1;
	q->port = -1;
	if (query == NULL)
		return (0);
	end = query + strlen(query);
	for (p = query; p < end; p = amp + 1) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		if (amp == p)
			continue;
		eq = memchr(p, '=', (size_t)(amp - p));
		if (proto_unescape(p, (size_t)((eq != NULL ? eq : amp) - p), key,
		    sizeof key, &klen) != 0 || (eq != NULL &&
		    proto_unescape(eq + 1, (size_t)(amp - eq - 1), val,
		    sizeof val, &vlen) != 0))
			return (proto_fail(err, 400, "invalid_request",
			    "bad percent-encoding in the query string"));
		if (eq == NULL)
			vlen = 0;
		/* A key too long to decode here is none of ours. */
		if (klen > sizeof key)
			continue;
		/* A value longer than val reads as not a number (or eof). */
		if (proto_query_pair(key, klen, val,
		    vlen > sizeof val ? sizeof val + 1 : vlen, eq != NULL, q,
		    err) != 0)
			return (-1);
	}
	return (0);
}
