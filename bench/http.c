/*
 * http.c -- a minimal HTTP/1.1 keep-alive client over plain sockets, and
 * just enough JSON and base64 to read agentd's answers.
 *
 * Responses are read with Content-Length (evhttp always sends it for
 * evhttp_send_reply); the buffer keeps what arrived after the response, so
 * the same connection can go on.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "bench.h"

#define CONN_READ	(256 * 1024)	/* bytes asked of one blocking recv */
#define CONN_POLL_READ	16384		/* bytes asked of one recv in conn_poll */

static void	conn_grow(char **, size_t *, size_t need);
static int	conn_parse(struct conn *);

static void
conn_grow(char **buf, size_t *cap, size_t need)
{
	size_t	n = *cap ? *cap : 4096;

	if (need <= *cap)
		return;
	while (n < need)
		n *= 2;
	if ((*buf = realloc(*buf, n)) == NULL)
		die("out of memory");
	*cap = n;
}

/* Connect to addr, blocking, with TCP_NODELAY. */
int
conn_open(struct conn *c, const struct sockaddr_in *addr)
{
	int	one = 1;

	memset(c, 0, sizeof *c);
	if ((c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	if (connect(c->fd, (const struct sockaddr *)addr, sizeof *addr) == -1) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return 0;
}

void
conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c->wbuf);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

/* Build and write a request. */
int
conn_send(struct conn *c, const char *method, const char *path,
    const char *hdrs, const void *body, size_t blen)
{
	size_t	need, off = 0;
	ssize_t	n;
	int	len;

	need = strlen(method) + strlen(path) + (hdrs ? strlen(hdrs) : 0) +
	    strlen(cfg.token) + 256 + blen;
	conn_grow(&c->wbuf, &c->wcap, need);
	len = snprintf(c->wbuf, c->wcap, "%s %s HTTP/1.1\r\nHost: localhost\r\n"
	    "Authorization: Bearer %s\r\n%sContent-Length: %zu\r\n\r\n",
	    method, path, cfg.token, hdrs ? hdrs : "", blen);
	if (blen > 0)
		memcpy(c->wbuf + len, body, blen);
	c->wlen = (size_t)len + blen;
	c->t0 = now_us();
	while (off < c->wlen) {
		n = send(c->fd, c->wbuf + off, c->wlen - off, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN) {
			/* A non-blocking socket: small requests only come here. */
			sleep_us(50);
			continue;
		}
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* Whether the buffer holds a whole response; fills the header fields. */
static int
conn_parse(struct conn *c)
{
	const char	*end, *p;
	char		 v[32];

	if (c->hdr_len == 0) {
		if (c->len < 12)
			return 0;
		end = memmem(c->buf, c->len, "\r\n\r\n", 4);
		if (end == NULL)
			return 0;
		c->hdr_len = (size_t)(end - c->buf) + 4;
		c->status = atoi(c->buf + 9);
		c->body_len = 0;
		if ((p = conn_header(c, "Content-Length", v, sizeof v)) != NULL)
			c->body_len = strtoull(p, NULL, 10);
	}
	return c->len >= c->hdr_len + c->body_len;
}

/* Read what is there now. */
int
conn_poll(struct conn *c)
{
	ssize_t	n;

	if (conn_parse(c))
		return 1;
	for (;;) {
		conn_grow(&c->buf, &c->cap, c->len + CONN_POLL_READ + 1);
		n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1,
		    MSG_DONTWAIT);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		c->len += (size_t)n;
		c->buf[c->len] = '\0';
		if (conn_parse(c))
			return 1;
	}
}

/* Read until a whole response is in. */
int
conn_recv(struct conn *c)
{
	ssize_t	n;
	size_t	want;

	while (!conn_parse(c)) {
		want = CONN_READ;
		if (c->hdr_len > 0 && c->hdr_len + c->body_len > c->len + want)
			want = c->hdr_len + c->body_len - c->len;
		conn_grow(&c->buf, &c->cap, c->len + want + 1);
		n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c->len += (size_t)n;
		c->buf[c->len] = '\0';
	}
	/* The body is read as a string: NUL after it (moved on consume). */
	return c->status;
}

/* Drop the response just handled, keep what came after it. */
void
conn_consume(struct conn *c)
{
	size_t	used = c->hdr_len + c->body_len;

	if (c->hdr_len == 0)
		return;
	if (used < c->len)
		memmove(c->buf, c->buf + used, c->len - used);
	c->len -= used;
	if (c->buf != NULL)
		c->buf[c->len] = '\0';
	c->hdr_len = c->body_len = 0;
	c->status = 0;
}

/* One round trip; the response stays until the next call. */
int
conn_do(struct conn *c, const char *method, const char *path,
    const char *hdrs, const void *body, size_t blen)
{
	conn_consume(c);
	if (conn_send(c, method, path, hdrs, body, blen) != 0)
		return -1;
	return conn_recv(c);
}

const char *
conn_body(const struct conn *c)
{
	return c->buf + c->hdr_len;
}

/* A header's value, copied. */
const char *
conn_header(const struct conn *c, const char *name, char *out, size_t outlen)
{
	const char	*p = c->buf, *end = c->buf + c->hdr_len, *eol, *v;
	size_t		 nl = strlen(name), n;

	while (p < end && (eol = memmem(p, end - p, "\r\n", 2)) != NULL) {
		if ((size_t)(eol - p) > nl && p[nl] == ':' &&
		    strncasecmp(p, name, nl) == 0) {
			for (v = p + nl + 1; v < eol && *v == ' '; v++)
				;
			n = (size_t)(eol - v);
			if (n >= outlen)
				n = outlen - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return out;
		}
		p = eol + 2;
	}
	return NULL;
}

/* ---- JSON: agentd's own compact output, read by key --------------------- */

const char *
json_find(const char *p, const char *end, const char *key)
{
	char		 pat[64];
	size_t		 n;
	const char	*q;

	n = (size_t)snprintf(pat, sizeof pat, "\"%s\"", key);
	while (p < end && (q = memmem(p, end - p, pat, n)) != NULL) {
		q += n;
		while (q < end && isspace((unsigned char)*q))
			q++;
		if (q < end && *q == ':') {
			q++;
			while (q < end && isspace((unsigned char)*q))
				q++;
			return q;
		}
		p = q;
	}
	return NULL;
}

long long
json_int(const char *p, const char *end, const char *key, long long dflt)
{
	const char	*v = json_find(p, end, key);

	if (v == NULL || !(isdigit((unsigned char)*v) || *v == '-'))
		return dflt;
	return strtoll(v, NULL, 10);
}

int
json_bool(const char *p, const char *end, const char *key)
{
	const char	*v = json_find(p, end, key);

	return v != NULL && end - v >= 4 && memcmp(v, "true", 4) == 0;
}

const char *
json_str(const char *p, const char *end, const char *key, char *out,
    size_t outlen)
{
	const char	*v = json_find(p, end, key), *q;
	size_t		 n;

	if (v == NULL || *v != '"')
		return NULL;
	v++;
	if ((q = memchr(v, '"', end - v)) == NULL)
		return NULL;
	n = (size_t)(q - v);
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, v, n);
	out[n] = '\0';
	return out;
}

/*
 * Base64 values pre-shifted to where they land in a little-endian word of
 * the 3 bytes they decode to: one group of 4 characters is 4 lookups, an
 * or and one store.  B64_BAD marks a byte outside the alphabet.
 */
#define B64_BAD		0xffffffffu
static uint32_t	b64_tab[4][256];

/* Fill b64_tab once. */
static void
b64_init(void)
{
	static const char	abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	uint32_t		v;
	int			i;

	if (b64_tab[0][0] != 0)
		return;
	for (i = 0; i < 256; i++)
		b64_tab[0][i] = b64_tab[1][i] = b64_tab[2][i] =
		    b64_tab[3][i] = B64_BAD;
	for (i = 0; i < 64; i++) {
		v = (uint32_t)i;
		b64_tab[0][(uint8_t)abc[i]] = v << 2;
		b64_tab[1][(uint8_t)abc[i]] = v >> 4 | (v & 15) << 12;
		b64_tab[2][(uint8_t)abc[i]] = (v >> 2) << 8 | (v & 3) << 22;
		b64_tab[3][(uint8_t)abc[i]] = v << 16;
	}
}

/* One group of 4 characters as 3 bytes in the low bytes of a word. */
static inline uint32_t
b64_group(const uint8_t *s)
{
	return b64_tab[0][s[0]] | b64_tab[1][s[1]] | b64_tab[2][s[2]] |
	    b64_tab[3][s[3]];
}

/* Decode standard base64 (padded); out NULL counts only. */
size_t
b64_decode(const char *in, size_t len, uint8_t *out)
{
	const uint8_t	*s = (const uint8_t *)in;
	size_t		 i, o = 0;
	uint32_t	 v;
	uint8_t		 t[4] = { 'A', 'A', 'A', 'A' };

	while (len > 0 && in[len - 1] == '=')
		len--;
	if (out == NULL)
		return len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0);
	b64_init();
	/* Whole groups but the last: a 4-byte store, its 4th byte rewritten. */
	for (i = 0; i + 8 <= len; i += 4, o += 3) {
		v = b64_group(s + i);
		memcpy(out + o, &v, 4);
	}
	for (; i + 4 <= len; i += 4) {
		v = b64_group(s + i);
		out[o++] = (uint8_t)v;
		out[o++] = (uint8_t)(v >> 8);
		out[o++] = (uint8_t)(v >> 16);
	}
	if (len - i >= 2) {
		memcpy(t, s + i, len - i);
		v = b64_group(t);
		out[o++] = (uint8_t)v;
		if (len - i == 3)
			out[o++] = (uint8_t)(v >> 8);
	}
	return o;
}

/*
 * Unescape a JSON string's contents v..q (agentd's escapes: \" \\ \n \r \t
 * \b \f \uXXXX, surrogate pairs) into out (NULL: only count); the bytes.
 */
static size_t
json_text_decode(const char *v, const char *q, uint8_t *out)
{
	const char	*bs;
	size_t		 o = 0, n;
	unsigned	 cp, lo;

	while (v < q) {
		if ((bs = memchr(v, '\\', q - v)) == NULL)
			bs = q;
		n = (size_t)(bs - v);
		if (out != NULL)
			memcpy(out + o, v, n);
		o += n;
		if ((v = bs) >= q)
			break;
		if (v[1] != 'u') {
			if (out != NULL)
				out[o] = v[1] == 'n' ? '\n' : v[1] == 'r' ? '\r' :
				    v[1] == 't' ? '\t' : v[1] == 'b' ? '\b' :
				    v[1] == 'f' ? '\f' : (uint8_t)v[1];
			o++;
			v += 2;
			continue;
		}
		cp = (unsigned)strtoul((char[5]){ v[2], v[3], v[4], v[5], 0 },
		    NULL, 16);
		v += 6;
		if (cp >= 0xd800 && cp < 0xdc00 && q - v >= 6 && v[1] == 'u') {
			lo = (unsigned)strtoul((char[5]){ v[2], v[3], v[4],
			    v[5], 0 }, NULL, 16);
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			v += 6;
		}
		n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
		if (out != NULL) {
			if (n == 1)
				out[o] = (uint8_t)cp;
			else if (n == 2) {
				out[o] = (uint8_t)(0xc0 | cp >> 6);
				out[o + 1] = (uint8_t)(0x80 | (cp & 0x3f));
			} else if (n == 3) {
				out[o] = (uint8_t)(0xe0 | cp >> 12);
				out[o + 1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
				out[o + 2] = (uint8_t)(0x80 | (cp & 0x3f));
			} else {
				out[o] = (uint8_t)(0xf0 | cp >> 18);
				out[o + 1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
				out[o + 2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
				out[o + 3] = (uint8_t)(0x80 | (cp & 0x3f));
			}
		}
		o += n;
	}
	return o;
}

/* The closing quote of a JSON string whose contents start at v. */
static const char *
json_string_end(const char *v, const char *end)
{
	const char	*q = v;

	while ((q = memchr(q, '"', end - q)) != NULL) {
		const char	*b = q;

		while (b > v && b[-1] == '\\')
			b--;
		if ((q - b) % 2 == 0)
			return q;
		q++;
	}
	return NULL;
}

/* Decode every chunk of an answer's "output" array: "data" or "text". */
size_t
json_output(const char *p, const char *end, uint8_t *out, size_t outlen,
    int *last, const char **rest)
{
	const char	*v, *q, *nd = NULL, *nt = NULL;
	size_t		 total = 0, n, room;
	int		 text;

	*last = -1;
	if (rest != NULL)
		*rest = p;
	if ((p = json_find(p, end, "output")) == NULL || *p != '[')
		return 0;
	for (;;) {
		/* The next "data" and "text", each looked for once. */
		if (nd != NULL && nd < p)
			nd = NULL;
		if (nt != NULL && nt < p)
			nt = NULL;
		if (nd == NULL && (nd = json_find(p, end, "data")) == NULL)
			nd = end;
		if (nt == NULL && (nt = json_find(p, end, "text")) == NULL)
			nt = end;
		text = nt < nd;
		v = text ? nt : nd;
		if (v >= end || *v != '"')
			break;
		v++;
		if ((q = text ? json_string_end(v, end) :
		    memchr(v, '"', end - v)) == NULL)
			break;
		room = out != NULL && total < outlen ? outlen - total : 0;
		if (text) {
			/* Unescaped, it is no longer than escaped. */
			if (out != NULL && (size_t)(q - v) <= room) {
				n = json_text_decode(v, q, out + total);
				if (n > 0)
					*last = out[total + n - 1];
			} else
				n = json_text_decode(v, q, NULL);
		} else if (out != NULL && (size_t)(q - v) / 4 * 3 <= room) {
			n = b64_decode(v, (size_t)(q - v), out + total);
			if (n > 0)
				*last = out[total + n - 1];
		} else
			n = b64_decode(v, (size_t)(q - v), NULL);
		total += n;
		p = q + 1;
		if (rest != NULL)
			*rest = p;
	}
	return total;
}
