/*
 * gate.c -- the gate of conn.c: each request's head is held back from
 * evhttp until it is whole, taken apart and checked (the token, Host and
 * Origin, the framing) before evhttp sees a byte; refusals are JSON, and
 * a chunked body's framing is checked as it passes.  Also the deadline and
 * the last-word error of a connection (conn_arm, conn_send_error), which
 * conn.c uses too.  conn.c calls here; what the gate needs of conn.c comes
 * in at conn_gate_init().
 */

#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <linux/vm_sockets.h>

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "config.h"
#include "conn.h"
#include "conn_int.h"
#include "httpcore.h"
#include "log.h"
#include "outq.h"
#include "proto.h"
#include "spool.h"
#include "stats.h"
#include "util.h"
#include "vsock.h"

#define CONN_LINGER_MS		2000	/* a refused connection's input is
					   read and dropped this long */
#define CONN_HEADER_COST	128	/* bytes evhttp allocates for a header
					   line besides its text */
#define CONN_CHUNK_LINE_MAX	1024	/* bytes of a chunk-size line */
#define CONN_URI_STACK		256	/* bytes of a request target checked
					   without a malloc */
#define CONN_HOLD_COPY_MAX	4096	/* bytes of a read copied into the held
					   bytes; larger reads move whole */

/* What the gate takes from a request's head. */
struct conn_head {
	int		 minor;		/* HTTP/1.minor (a higher one: 1) */
	size_t		 version_at;	/* the minor digit to rewrite to '1'
					   (HTTP/1.2 and up), or 0 */
	int		 nhost;
	const char	*host;		/* not NUL-terminated */
	size_t		 host_len;
	const char	*origin;
	size_t		 origin_len;
	const char	*fetch_site;
	size_t		 fetch_site_len;
	const char	*auth;		/* Authorization */
	size_t		 auth_len;
	const char	*xtoken;	/* X-Access-Token */
	size_t		 xtoken_len;
	int64_t		 content_length; /* -1: none */
	int		 chunked;
	int		 nte;		/* Transfer-Encoding headers */
	int		 expect;	/* 0; 1: 100-continue; 2: another */
	int		 post_files;	/* POST /files (envd's upload) */
	int		 spool;		/* its body goes to a spool (spool.h) */
};

/* Why the gate refuses a request. */
struct conn_refusal {
	int	 status;
	int	 envd;		/* in envd's shape: {"code": N, "message"} */
	char	 code[32];
	char	 message[160];
};

static void		 conn_hold(struct conn *, struct evbuffer *);
static int		 conn_head_step(struct conn *, struct evbuffer *);
static int		 conn_chunk_step(struct conn *, struct evbuffer *);
static int		 conn_trailer_ok(const char *, size_t);
static void		 conn_admit(struct conn *, struct evbuffer *,
			    size_t len);
static int		 conn_parse(const char *, size_t, struct conn_head *,
			    struct conn_refusal *);
static int		 conn_policy(struct conn *, struct conn_head *,
			    struct conn_refusal *);
static void		 conn_release(struct conn *, struct evbuffer *,
			    size_t len);
static void		 conn_refuse(struct conn *, const struct conn_refusal *);
static int		 conn_refusal(struct conn_refusal *, int status,
			    const char *code, const char *fmt, ...)
			    __attribute__((format(printf, 4, 5)));
static int		 conn_tchar(int);
static int		 conn_is(const char *, size_t, const char *);
static int		 conn_host_local(const char *, size_t);
static int		 conn_origin_same(const struct conn_head *);
static int		 conn_spool_start(struct conn *, const char *, size_t,
			    const struct conn_head *, struct conn_refusal *);
static int		 conn_spool_step(struct conn *, struct evbuffer *,
			    size_t);
static void		 conn_spool_finish(struct conn *, struct evbuffer *);
static void		 conn_pass(struct conn *, struct evbuffer *, size_t);

uint64_t		 conn_inflight;	/* bytes, every connection's */
static const struct config *gate_cfg;
static uint64_t		 gate_refused;	/* requests refused */
static void		(*gate_prove)(struct conn *);	/* conn.c's */
static void		(*gate_uncount)(struct conn *);	/* conn.c's */

/* The configuration, and what conn.c does when the gate asks. */
void
conn_gate_init(const struct config *cfg, void (*prove)(struct conn *),
    void (*uncount)(struct conn *))
{
	gate_cfg = cfg;
	gate_prove = prove;
	gate_uncount = uncount;
}

/* Requests the gate refused, for /metrics. */
uint64_t
conn_gate_refused(void)
{
	return (gate_refused);
}

/* Start (or restart) the connection's deadline. */
void
conn_arm(struct conn *c, int64_t ms)
{
	struct timeval	tv;

	evtimer_add(c->deadline, timeval_ms(&tv, ms));
}

/*
 * Write an error straight to a connection that is about to be closed,
 * unless evhttp has an answer of its own under way; best effort: a full
 * socket buffer, or unread bytes that make the close a reset, may lose it.
 */
void
conn_send_error(struct conn *c, int status, const char *code,
    const char *message)
{
	static const struct {
		int		 status;
		const char	*reason;
	} reasons[] = {
		{ 400, "Bad Request" }, { 401, "Unauthorized" },
		{ 403, "Forbidden" }, { 413, "Payload Too Large" },
		{ 417, "Expectation Failed" },
		{ 431, "Request Header Fields Too Large" },
		{ 503, "Service Unavailable" },
		{ 507, "Insufficient Storage" },
		{ 505, "HTTP Version Not Supported" },
	};
	struct iovec	 iov[2];
	struct msghdr	 msg;
	char		 head[320], body[320], date[40];
	const char	*reason = "Error";
	ssize_t		 n;
	size_t		 i;

	http_count(status);
	if (c->fd < 0 || evbuffer_get_length(bufferevent_get_output(
	    evhttp_connection_get_bufferevent(c->evcon))) > 0)
		return;
	iov[1].iov_base = body;
	/* code NULL: envd's shape, for the spool's refusals. */
	iov[1].iov_len = (size_t)(code == NULL ? snprintf(body, sizeof body,
	    "{\"code\": %d, \"message\": \"%s\"}\n", status, message) :
	    snprintf(body, sizeof body,
	    "{\"error\": {\"code\": \"%s\", \"message\": \"%s\"}}\n", code,
	    message));
	for (i = 0; i < nitems(reasons); i++) {
		if (reasons[i].status == status)
			reason = reasons[i].reason;
	}
	http_date(date, sizeof date);
	iov[0].iov_base = head;
	iov[0].iov_len = (size_t)snprintf(head, sizeof head,
	    "HTTP/1.1 %d %s\r\n"
	    "Content-Type: application/json\r\n"
	    "Content-Length: %zu\r\n"
	    "Date: %s\r\n"
	    "%s"
	    "Connection: close\r\n\r\n", status, reason, iov[1].iov_len, date,
	    status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = iov;
	msg.msg_iovlen = 2;
	n = sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)n;
}

/*
 * Move what is in in to the held bytes.  Small reads are copied into the
 * free room of held's last chain: moving them would keep a chain of at
 * least 1 KiB per read, and a head sent a byte at a time would cost a
 * kilobyte a byte where the budget counts one.
 */
static void
conn_hold(struct conn *c, struct evbuffer *in)
{
	size_t		 n = evbuffer_get_length(in);
	unsigned char	*p;

	if (n >= CONN_HOLD_COPY_MAX) {
		evbuffer_add_buffer(c->held, in);
		return;
	}
	if (n == 0)
		return;
	if ((p = evbuffer_pullup(in, n)) == NULL ||
	    evbuffer_add(c->held, p, n) != 0)
		fatal("%s: out of memory", __func__);
	evbuffer_drain(in, n);
}

/*
 * The gate.  evhttp parses a head as it arrives and keeps every header line
 * it reads (~110 bytes of heap each, whatever the line's size), answers
 * 100 Continue before anyone saw the request, and its own errors are HTML.
 * So a request's head is held back here until it is whole: it is checked
 * (syntax, header count, Host, Origin, the token if it has a body, the body's
 * size, Expect) and refused with a JSON answer, or handed to evhttp.  A
 * chunked body passes through the gate too, a chunk-size line at a time
 * (extensions are dropped; evhttp does not parse them).  Runs in the input
 * buffer's callback, before evhttp's read callback sees the bytes; keep
 * bytes at the front of in were handed on already.
 */
void
conn_gate(struct conn *c, struct evbuffer *in, size_t keep)
{
	struct evbuffer	*front;
	size_t		 len;

	if (c->state == CONN_BODY)
		return;
	if (c->held == NULL && (c->held = evbuffer_new()) == NULL)
		fatal("%s: out of memory", __func__);
	if (keep == 0)
		conn_hold(c, in);
	else {
		/* What was handed on before and evhttp has not read stays. */
		if ((front = evbuffer_new()) == NULL)
			fatal("%s: out of memory", __func__);
		evbuffer_remove_buffer(in, front, keep);
		conn_hold(c, in);
		c->releasing = 1;
		evbuffer_prepend_buffer(in, front);
		c->releasing = 0;
		evbuffer_free(front);
	}
	while ((len = evbuffer_get_length(c->held)) > 0) {
		switch (c->state) {
		case CONN_BODY:
			conn_release(c, in, len);
			return;
		case CONN_DRAIN:
			evbuffer_drain(c->held, len);
			return;
		case CONN_SPOOL:
			conn_spool_step(c, in, len);
			break;
		case CONN_HEAD:
			if (conn_head_step(c, in) == 0)
				return;
			break;
		default:
			if (conn_chunk_step(c, in) == 0)
				return;
			break;
		}
	}
}

/*
 * Hand len bytes held to evhttp.  A socket bufferevent's input is frozen
 * at its end but while it reads: when the gate runs after an answer
 * (conn_request_done), it is thawed for the move.
 */
static void
conn_release(struct conn *c, struct evbuffer *in, size_t len)
{
	c->releasing = 1;
	if (evbuffer_remove_buffer(c->held, in, len) == -1) {
		evbuffer_unfreeze(in, 0);
		evbuffer_remove_buffer(c->held, in, len);
		evbuffer_freeze(in, 0);
	}
	c->releasing = 0;
}

/*
 * Refuse a request: answer it, stop writing, and drop what the client
 * still sends until it closes or CONN_LINGER_MS pass (a close with unread
 * bytes would reset the connection, and the answer with it).
 */
static void
conn_refuse(struct conn *c, const struct conn_refusal *r)
{
	gate_refused++;
	log_debug("%s: fd %d: %d %s", __func__, c->fd, r->status, r->code);
	conn_send_error(c, r->status, r->envd ? NULL : r->code, r->message);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_WR);
	c->state = CONN_DRAIN;
	conn_spool_drop(c);
	evbuffer_drain(c->held, evbuffer_get_length(c->held));
	gate_uncount(c);
	conn_arm(c, CONN_LINGER_MS);
}

/* Fill a refusal. */
static int
conn_refusal(struct conn_refusal *r, int status, const char *code,
    const char *fmt, ...)
{
	va_list	ap;

	r->status = status;
	r->envd = 0;
	snprintf(r->code, sizeof r->code, "%s", code);
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof r->message, fmt, ap);
	va_end(ap);
	return (-1);
}

/*
 * One more line of a head: count it; at the empty line that ends it,
 * admit or refuse the request.  Returns 0 when more bytes are needed.
 */
static int
conn_head_step(struct conn *c, struct evbuffer *in)
{
	struct conn_refusal	 r;
	struct evbuffer_ptr	 p;
	size_t			 len = evbuffer_get_length(c->held);
	char			 cr = '\0', first;

	/*
	 * A request starts with a method (a token) or an empty line: anything
	 * else (a TLS handshake of an https:// client) is refused at once,
	 * not left to wait for a line end until the header timeout.
	 */
	if (c->scanned == 0 && len > 0 &&
	    evbuffer_copyout(c->held, &first, 1) == 1 && first != '\r' &&
	    first != '\n' && !conn_tchar((unsigned char)first)) {
		conn_refusal(&r, 400, "invalid_request", "not an HTTP request "
		    "(TLS? agentd speaks plain HTTP)");
		conn_refuse(c, &r);
		return (1);
	}

	/* Search each byte once, whatever the size of the reads. */
	if (c->searched < c->scanned)
		c->searched = c->scanned;
	if (evbuffer_ptr_set(c->held, &p, c->searched, EVBUFFER_PTR_SET) == 0)
		p = evbuffer_search(c->held, "\n", 1, &p);
	else
		p.pos = -1;
	if (p.pos == -1) {
		c->searched = len;
		if (len <= HTTP_HEADERS_MAX)
			return (0);
		conn_refusal(&r, 431, "headers_too_large", "the request line "
		    "and headers are over %d bytes", HTTP_HEADERS_MAX);
		conn_refuse(c, &r);
		return (1);
	}
	if ((size_t)p.pos == c->scanned + 1) {
		evbuffer_ptr_set(c->held, &p, c->scanned, EVBUFFER_PTR_SET);
		evbuffer_copyout_from(c->held, &p, &cr, 1);
		evbuffer_ptr_set(c->held, &p, c->scanned + 1, EVBUFFER_PTR_SET);
	}
	if ((size_t)p.pos == c->scanned || cr == '\r') {
		if (c->nlines == 0) {	/* an empty line before a request */
			evbuffer_drain(c->held, (size_t)p.pos + 1);
			c->scanned = c->searched = 0;
		} else
			conn_admit(c, in, (size_t)p.pos + 1);
		return (1);
	}
	c->scanned = (size_t)p.pos + 1;
	if (++c->nlines > gate_cfg->max_headers + 1)
		conn_refusal(&r, 431, "headers_too_large", "more than %llu "
		    "header lines (--max-headers)",
		    (unsigned long long)gate_cfg->max_headers);
	else if (c->scanned > HTTP_HEADERS_MAX)
		conn_refusal(&r, 431, "headers_too_large", "the request line "
		    "and headers are over %d bytes", HTTP_HEADERS_MAX);
	else
		return (1);
	conn_refuse(c, &r);
	return (1);
}

/* A whole head of len bytes is held: check it, then hand it to evhttp. */
static void
conn_admit(struct conn *c, struct evbuffer *in, size_t len)
{
	struct conn_head	 h;
	struct conn_refusal	 r;
	const char		*p;

	if ((p = (const char *)evbuffer_pullup(c->held, len)) == NULL)
		fatal("%s: out of memory", __func__);
	if (conn_parse(p, len, &h, &r) != 0 || conn_policy(c, &h, &r) != 0) {
		conn_refuse(c, &r);
		return;
	}
	if (h.version_at != 0)
		((char *)(uintptr_t)p)[h.version_at] = '1';	/* held: ours */
	/* What evhttp will allocate for the lines counts, not their bytes. */
	c->pending += c->nlines * CONN_HEADER_COST;
	conn_inflight += c->nlines * CONN_HEADER_COST;
	c->state = h.chunked ? CONN_CHUNK_SIZE : CONN_BODY;
	c->scanned = c->searched = 0;
	c->nlines = 0;
	c->chunked_total = 0;
	c->head_bytes = len;
	c->body_bytes = h.content_length > 0 ? (uint64_t)h.content_length : 0;
	if (!h.spool) {
		conn_release(c, in, len);
		return;
	}
	if (conn_spool_start(c, p, len, &h, &r) != 0)
		conn_refuse(c, &r);
}

/* Whether c is a character of an HTTP token (a method, a header name). */
static int
conn_tchar(int ch)
{
	return ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	    (ch >= '0' && ch <= '9') || (ch != '\0' &&
	    strchr("!#$%&'*+-.^_`|~", ch) != NULL));
}

/* Whether a header's name is name. */
static int
conn_is(const char *p, size_t len, const char *name)
{
	return (len == strlen(name) && strncasecmp(p, name, len) == 0);
}

/* Take a request's head apart; -1 with a refusal when it is malformed. */
static int
conn_parse(const char *p, size_t len, struct conn_head *h,
    struct conn_refusal *r)
{
	const char	*end = p + len, *eol, *le, *sp1, *sp2, *colon, *v, *ve;
	const char	*q;
	char		 uri_stack[CONN_URI_STACK], *uri = uri_stack;
	struct evhttp_uri *u;
	int64_t		 n;

	memset(h, 0, sizeof *h);
	h->content_length = -1;

	/* METHOD SP request-target SP HTTP/1.x */
	eol = memchr(p, '\n', end - p);
	le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
	sp1 = memchr(p, ' ', le - p);
	sp2 = memrchr(p, ' ', le - p);
	if (sp1 == NULL || sp1 == p || sp2 == sp1 || sp2 == sp1 + 1)
		return (conn_refusal(r, 400, "invalid_request",
		    "malformed request line"));
	for (q = p; q < sp1; q++) {
		if (!conn_tchar((unsigned char)*q))
			return (conn_refusal(r, 400, "invalid_request",
			    "malformed method"));
	}
	/*
	 * HTTP/1.x with x > 1 is served as HTTP/1.1, the highest minor
	 * version known (RFC 9110 2.5): conn_admit() rewrites the digit, and
	 * evhttp answers in 1.1.  Another major version is 505.
	 */
	if (le - sp2 - 1 == 8 && strncmp(sp2 + 1, "HTTP/1.", 7) == 0 &&
	    sp2[8] >= '0' && sp2[8] <= '9') {
		h->minor = sp2[8] - '0';
		h->version_at = sp2[8] > '1' ? (size_t)(sp2 + 8 - p) : 0;
		if (h->minor > 1)
			h->minor = 1;
	} else if (le - sp2 - 1 == 8 && strncmp(sp2 + 1, "HTTP/", 5) == 0 &&
	    sp2[6] >= '0' && sp2[6] <= '9' && sp2[7] == '.' &&
	    sp2[8] >= '0' && sp2[8] <= '9')
		return (conn_refusal(r, 505, "http_version_not_supported",
		    "HTTP/%c.%c: only HTTP/1.x is served", sp2[6], sp2[8]));
	else
		return (conn_refusal(r, 400, "invalid_request",
		    "malformed request line"));
	for (q = sp1 + 1; q < sp2; q++) {
		if ((unsigned char)*q <= ' ' || *q == 0x7f)
			return (conn_refusal(r, 400, "invalid_request",
			    "malformed request target"));
	}
	/* evhttp answers a target it cannot parse with HTML. */
	if (sp2 - sp1 > CONN_URI_STACK)
		uri = xmalloc(sp2 - sp1);
	memcpy(uri, sp1 + 1, sp2 - sp1 - 1);
	uri[sp2 - sp1 - 1] = '\0';
	u = strlen(uri) == (size_t)(sp2 - sp1 - 1) ?
	    evhttp_uri_parse_with_flags(uri, EVHTTP_URI_NONCONFORMANT) : NULL;
	if (uri != uri_stack)
		free(uri);
	if (u == NULL)
		return (conn_refusal(r, 400, "invalid_request",
		    "malformed request target"));
	evhttp_uri_free(u);
	h->post_files = sp1 - p == 4 && memcmp(p, "POST", 4) == 0 &&
	    sp2 - sp1 - 1 >= 6 && memcmp(sp1 + 1, "/files", 6) == 0 &&
	    (sp2 - sp1 - 1 == 6 || sp1[7] == '?');

	for (p = eol + 1; p < end; p = eol + 1) {
		eol = memchr(p, '\n', end - p);
		le = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
		if (le == p)
			break;		/* the empty line */
		if (*p == ' ' || *p == '\t')
			return (conn_refusal(r, 400, "invalid_request",
			    "a folded header line"));
		/* RFC 9112 2.2, 5: evhttp would cut a value at a NUL. */
		if (memchr(p, '\0', le - p) != NULL ||
		    memchr(p, '\r', le - p) != NULL)
			return (conn_refusal(r, 400, "invalid_request",
			    "a NUL or bare CR in a header line"));
		if ((colon = memchr(p, ':', le - p)) == NULL || colon == p)
			return (conn_refusal(r, 400, "invalid_request",
			    "a header line without a name"));
		for (q = p; q < colon; q++) {
			if (!conn_tchar((unsigned char)*q))
				return (conn_refusal(r, 400, "invalid_request",
				    "a malformed header name"));
		}
		for (v = colon + 1; v < le && (*v == ' ' || *v == '\t'); v++)
			;
		/* evhttp skips only spaces: a tab there would frame apart. */
		if (memchr(colon + 1, '\t', v - (colon + 1)) != NULL &&
		    (conn_is(p, colon - p, "Content-Length") ||
		    conn_is(p, colon - p, "Transfer-Encoding")))
			return (conn_refusal(r, 400, "invalid_request",
			    "a tab before a framing header's value"));
		for (ve = le; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;
		if (conn_is(p, colon - p, "Host")) {
			h->nhost++;
			h->host = v;
			h->host_len = ve - v;
		} else if (conn_is(p, colon - p, "Content-Length")) {
			for (n = 0, q = v; q < ve && *q >= '0' && *q <= '9' &&
			    n < (INT64_MAX - 9) / 10; q++)
				n = n * 10 + (*q - '0');
			if (q == v || q != ve || (h->content_length != -1 &&
			    h->content_length != n))
				return (conn_refusal(r, 400, "invalid_request",
				    "a malformed Content-Length"));
			h->content_length = n;
		} else if (conn_is(p, colon - p, "Transfer-Encoding")) {
			h->nte++;
			h->chunked = conn_is(v, ve - v, "chunked");
		} else if (conn_is(p, colon - p, "Expect"))
			h->expect = conn_is(v, ve - v, "100-continue") ? 1 : 2;
		else if (conn_is(p, colon - p, "Origin")) {
			h->origin = v;
			h->origin_len = ve - v;
		} else if (conn_is(p, colon - p, "Sec-Fetch-Site")) {
			h->fetch_site = v;
			h->fetch_site_len = ve - v;
		} else if (conn_is(p, colon - p, "Authorization") &&
		    h->auth == NULL) {
			h->auth = v;
			h->auth_len = ve - v;
		} else if (conn_is(p, colon - p, "X-Access-Token") &&
		    h->xtoken == NULL) {
			h->xtoken = v;
			h->xtoken_len = ve - v;
		}
	}
	if (h->nte > 1 || (h->nte == 1 && !h->chunked))
		return (conn_refusal(r, 400, "invalid_request", "only "
		    "Transfer-Encoding: chunked"));
	if (h->nte == 1 && h->content_length != -1)
		return (conn_refusal(r, 400, "invalid_request",
		    "both Transfer-Encoding and Content-Length"));
	return (0);
}

/*
 * Whether a Host names this machine by a loopback name or an address: a
 * browser tricked by DNS rebinding sends the attacker's name.
 */
static int
conn_host_local(const char *v, size_t len)
{
	char		 name[256];
	struct in_addr	 a;
	const char	*colon;

	if (len > 0 && v[0] == '[')
		return (1);	/* an IPv6 literal */
	if ((colon = memrchr(v, ':', len)) != NULL)
		len = colon - v;
	if (len == 0 || len >= sizeof name)
		return (0);
	memcpy(name, v, len);
	name[len] = '\0';
	if (name[len - 1] == '.')
		name[--len] = '\0';
	if (strcasecmp(name, "localhost") == 0 || (len > 10 &&
	    strcasecmp(name + len - 10, ".localhost") == 0))
		return (1);
	return (inet_pton(AF_INET, name, &a) == 1);
}

/* Whether an Origin is the request's own Host, over http or https. */
static int
conn_origin_same(const struct conn_head *h)
{
	const char	*o = h->origin;
	size_t		 len = h->origin_len, skip;

	if (h->host == NULL)
		return (0);
	if (len > 7 && strncasecmp(o, "http://", 7) == 0)
		skip = 7;
	else if (len > 8 && strncasecmp(o, "https://", 8) == 0)
		skip = 8;
	else
		return (0);
	return (len - skip == h->host_len &&
	    strncasecmp(o + skip, h->host, h->host_len) == 0);
}

/*
 * What agentd wants of a request before reading its body: one Host (on
 * HTTP/1.1), without a token configured a Host that is a loopback name
 * or an address (TCP, vsock), from vsock without a token the host or
 * this machine (CID 2, 1), no cross-site
 * browser origin, the token before a body, a body within --max-body, and
 * no Expect but 100-continue.  Returns 0, or -1 with a refusal.
 */
static int
conn_policy(struct conn *c, struct conn_head *h,
    struct conn_refusal *r)
{
	int	authorized;

	if (h->nhost > 1 || (h->minor == 1 && h->nhost == 0))
		return (conn_refusal(r, 400, "invalid_request", "HTTP/1.1 "
		    "needs one Host header; this request has %d", h->nhost));
	/*
	 * Without a token a page rebound to 127.0.0.1 could read answers,
	 * and so could one rebound to the host's own 127.0.0.1 that qemu or
	 * Docker forward to any of our addresses: every TCP listener.  With
	 * a token it can do nothing, and a sidecar proxy that connects over
	 * loopback may pass the platform's own Host on.
	 */
	if (c->pool->transport == CONN_VSOCK && gate_cfg->token == NULL &&
	    !c->vsock_trusted)
		return (conn_refusal(r, 403, "forbidden_peer", "without a "
		    "token, vsock peers other than the host (CID 2) and this "
		    "machine (CID 1) are refused"));
	/*
	 * On vsock too: a host-side proxy (socat, Firecracker's unix socket)
	 * may carry a browser's request as well as the platform's.
	 */
	if (!c->pool->unix_socket && gate_cfg->token == NULL && h->host != NULL &&
	    !conn_host_local(h->host, h->host_len))
		return (conn_refusal(r, 403, "forbidden_host", "without a "
		    "token, a request must name this machine in its Host (a "
		    "loopback name or an address)"));
	if ((h->origin != NULL && !conn_origin_same(h)) ||
	    (h->fetch_site != NULL &&
	    !conn_is(h->fetch_site, h->fetch_site_len, "same-origin") &&
	    !conn_is(h->fetch_site, h->fetch_site_len, "none")))
		return (conn_refusal(r, 403, "forbidden_origin", "requests from "
		    "another site's pages are refused"));
	authorized = c->pool->unix_socket || http_token_ok(h->auth,
	    h->auth_len, h->xtoken, h->xtoken_len);
	if (!authorized && !c->pool->own_auth &&
	    (h->chunked || h->content_length > 0))
		return (conn_refusal(r, 401, "unauthorized", "missing or wrong "
		    "token (a body is read only after it)"));
	/*
	 * envd's POST /files over --max-body goes to disk (a chunked one
	 * always: its size is not known yet), only with the token: else
	 * anyone could fill the disk.
	 */
	h->spool = c->pool->own_auth && h->post_files && authorized &&
	    !c->pool->unix_socket && gate_cfg->envd_max_upload > 0 &&
	    (h->chunked || (h->content_length > 0 &&
	    (uint64_t)h->content_length > gate_cfg->max_body));
	if (h->spool && h->content_length > 0 &&
	    (uint64_t)h->content_length > gate_cfg->envd_max_upload) {
		conn_refusal(r, 413, "body_too_large", "the body has %lld "
		    "bytes; --envd-max-upload is %llu",
		    (long long)h->content_length,
		    (unsigned long long)gate_cfg->envd_max_upload);
		r->envd = 1;
		return (-1);
	}
	if (!h->spool && h->content_length > 0 &&
	    (uint64_t)h->content_length > gate_cfg->max_body)
		return (conn_refusal(r, 413, "body_too_large", "the body has "
		    "%lld bytes; --max-body is %llu%s",
		    (long long)h->content_length,
		    (unsigned long long)gate_cfg->max_body, c->pool->own_auth &&
		    h->post_files ? " (larger uploads need the access token)" :
		    ""));
	if (h->expect == 2)
		return (conn_refusal(r, 417, "expectation_failed", "only "
		    "Expect: 100-continue"));
	if (authorized)
		gate_prove(c);
	return (0);
}

/*
 * A chunked body, a step at a time: size lines are held until whole and
 * handed on without extensions, data and trailers pass.  Returns 0 when
 * more bytes are needed.
 */
static int
conn_chunk_step(struct conn *c, struct evbuffer *in)
{
	struct conn_refusal	 r;
	struct evbuffer_ptr	 p;
	char			 line[CONN_CHUNK_LINE_MAX + 3], *end;
	size_t			 eol = 0, len, n;
	uint64_t		 size;

	len = evbuffer_get_length(c->held);
	if (c->state == CONN_CHUNK_DATA) {
		n = len < c->chunk_left ? len : (size_t)c->chunk_left;
		if (c->spool != NULL) {
			if (conn_spool_step(c, in, n) != 0)
				return (1);
		} else
			conn_release(c, in, n);
		if ((c->chunk_left -= n) == 0)
			c->state = CONN_CHUNK_END;
		return (1);
	}
	p = evbuffer_search_eol(c->held, NULL, &eol, EVBUFFER_EOL_CRLF);
	if (p.pos == -1) {
		if (c->state == CONN_CHUNK_END && len > 1)
			goto bad;
		if ((c->state == CONN_CHUNK_SIZE && len > CONN_CHUNK_LINE_MAX) ||
		    (c->state == CONN_TRAILER && len > HTTP_HEADERS_MAX))
			goto bad;
		return (0);
	}
	switch (c->state) {
	case CONN_CHUNK_END:
		if (p.pos != 0)
			goto bad;
		conn_pass(c, in, eol);
		c->state = CONN_CHUNK_SIZE;
		return (1);
	case CONN_TRAILER:
		if ((c->head_bytes += (size_t)p.pos + eol) > HTTP_HEADERS_MAX) {
			conn_refusal(&r, 431, "headers_too_large", "the request "
			    "line, headers and trailer are over %d bytes",
			    HTTP_HEADERS_MAX);
			conn_refuse(c, &r);
			return (1);
		}
		if (p.pos != 0 && (++c->nlines > gate_cfg->max_headers ||
		    !conn_trailer_ok((const char *)evbuffer_pullup(c->held,
		    p.pos), (size_t)p.pos)))
			goto bad;
		conn_pass(c, in, (size_t)p.pos + eol);
		if (p.pos == 0 && c->spool != NULL)
			conn_spool_finish(c, in);
		else if (p.pos == 0) {
			c->state = CONN_BODY;	/* the request is whole */
			c->nlines = 0;
		}
		return (1);
	default:
		break;
	}
	if ((size_t)p.pos > CONN_CHUNK_LINE_MAX)
		goto bad;
	evbuffer_remove(c->held, line, (size_t)p.pos + eol);
	line[p.pos] = '\0';
	errno = 0;
	size = strtoull(line, &end, 16);
	if (end == line || errno != 0 || line[0] == '-' || line[0] == '+' ||
	    line[strspn(line, "0123456789abcdefABCDEF")] != *end)
		goto bad;
	end += strspn(end, " \t");
	if (*end != '\0' && *end != ';')
		goto bad;
	if (c->spool != NULL && (size > gate_cfg->envd_max_upload ||
	    (c->chunked_total += size) > gate_cfg->envd_max_upload)) {
		conn_refusal(&r, 413, "body_too_large", "the body is larger "
		    "than --envd-max-upload (%llu bytes)",
		    (unsigned long long)gate_cfg->envd_max_upload);
		r.envd = 1;
		conn_refuse(c, &r);
		return (1);
	}
	if (c->spool == NULL && (size > gate_cfg->max_body ||
	    (c->chunked_total += size) > gate_cfg->max_body)) {
		conn_refusal(&r, 413, "body_too_large", "the body is larger "
		    "than --max-body (%llu bytes)",
		    (unsigned long long)gate_cfg->max_body);
		conn_refuse(c, &r);
		return (1);
	}
	if (c->spool == NULL) {
		n = (size_t)snprintf(line, sizeof line, "%llx\r\n",
		    (unsigned long long)size);
		evbuffer_prepend(c->held, line, n);
		conn_release(c, in, n);
	}
	c->chunk_left = size;
	c->state = size == 0 ? CONN_TRAILER : CONN_CHUNK_DATA;
	return (1);
bad:
	conn_refusal(&r, 400, "invalid_request", "malformed chunked body");
	conn_refuse(c, &r);
	return (1);
}

/*
 * Whether a trailer line is a header line evhttp takes: a name, a colon, no
 * NUL or bare CR (else evhttp answers a text/html 413 of its own).
 */
static int
conn_trailer_ok(const char *line, size_t len)
{
	const char	*colon;
	size_t		 i;

	if (line == NULL || memchr(line, '\0', len) != NULL ||
	    memchr(line, '\r', len) != NULL ||
	    (colon = memchr(line, ':', len)) == NULL || colon == line)
		return (0);
	for (i = 0; line + i < colon; i++) {
		if (!conn_tchar((unsigned char)line[i]))
			return (0);
	}
	return (1);
}

/*
 * Hand len held bytes of a chunked body's framing to evhttp, or drop them
 * when the body goes to a spool.
 */
static void
conn_pass(struct conn *c, struct evbuffer *in, size_t len)
{
	if (c->spool != NULL)
		evbuffer_drain(c->held, len);
	else
		conn_release(c, in, len);
}

/*
 * envd's POST /files whose body goes to disk: open the spool, keep the
 * head of len bytes at p for evhttp with Content-Length: 0 instead of its
 * framing (and without Expect: the 100 Continue is ours), and let the body
 * come.  0, or -1 with a refusal.
 */
static int
conn_spool_start(struct conn *c, const char *p, size_t len,
    const struct conn_head *h, struct conn_refusal *r)
{
	const char	*end = p + len, *eol, *colon;
	char		 cause[SPOOL_CAUSE_MAX];
	int		 status;
	ssize_t		 n;

	if ((c->spool = spool_open(gate_cfg->envd_spool_dir, h->chunked ? 0 :
	    (uint64_t)h->content_length, &status, cause, sizeof cause)) ==
	    NULL) {
		log_warn("%s: fd %d: %s", __func__, c->fd, cause);
		conn_refusal(r, status, "spool_failed", "%s", cause);
		r->envd = 1;
		return (-1);
	}
	if ((c->spool_head = evbuffer_new()) == NULL)
		fatal("%s: out of memory", __func__);
	eol = memchr(p, '\n', len);
	evbuffer_add(c->spool_head, p, (size_t)(eol + 1 - p));
	for (p = eol + 1; p < end; p = eol + 1) {
		eol = memchr(p, '\n', (size_t)(end - p));
		if (eol == p || (eol == p + 1 && *p == '\r'))
			break;		/* the empty line */
		colon = memchr(p, ':', (size_t)(eol - p));
		if (conn_is(p, (size_t)(colon - p), "Content-Length") ||
		    conn_is(p, (size_t)(colon - p), "Transfer-Encoding") ||
		    conn_is(p, (size_t)(colon - p), "Expect"))
			continue;
		evbuffer_add(c->spool_head, p, (size_t)(eol + 1 - p));
	}
	evbuffer_add(c->spool_head, "Content-Length: 0\r\n\r\n", 21);
	evbuffer_drain(c->held, len);
	if (h->expect == 1 && c->fd >= 0) {
		/* Best effort, as conn_send_error(): nothing was written yet. */
		n = send(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		(void)n;
	}
	log_debug("%s: fd %d: %s body to spool", __func__, c->fd,
	    h->chunked ? "a chunked" : "a");
	if (!h->chunked) {
		c->state = CONN_SPOOL;
		c->spool_left = (uint64_t)h->content_length;
	}
	return (0);
}

/*
 * Write len held bytes (at most what the body has left) to the spool; at
 * the body's end hand the head on.  Bytes on disk are not in flight, and
 * each write is progress: the deadline starts again.  0, or -1 after a
 * refusal (507 when the disk is full).
 */
static int
conn_spool_step(struct conn *c, struct evbuffer *in, size_t len)
{
	struct conn_refusal	 r;
	char			 cause[SPOOL_CAUSE_MAX];
	size_t			 done;
	int			 status;

	if (c->state == CONN_SPOOL && len > c->spool_left)
		len = (size_t)c->spool_left;
	if (spool_write_buffer(c->spool, c->held, len, &status, cause,
	    sizeof cause) != 0) {
		log_warn("%s: fd %d: %s", __func__, c->fd, cause);
		conn_refusal(&r, status, "spool_failed", "%s", cause);
		r.envd = 1;
		conn_refuse(c, &r);
		return (-1);
	}
	done = len < c->pending ? len : c->pending;
	c->pending -= done;
	conn_inflight -= done;
	conn_arm(c, gate_cfg->header_timeout_ms);
	/* A chunk's data: conn_chunk_step() counts it. */
	if (c->state == CONN_SPOOL && (c->spool_left -= len) == 0)
		conn_spool_finish(c, in);
	return (0);
}

/* The spooled body is whole: hand evhttp the head, Content-Length: 0. */
static void
conn_spool_finish(struct conn *c, struct evbuffer *in)
{
	size_t	len = evbuffer_get_length(c->spool_head);

	log_debug("%s: fd %d: %llu bytes spooled", __func__, c->fd,
	    (unsigned long long)spool_size(c->spool));
	c->state = CONN_BODY;
	c->nlines = 0;
	evbuffer_prepend_buffer(c->held, c->spool_head);
	evbuffer_free(c->spool_head);
	c->spool_head = NULL;
	conn_release(c, in, len);
}

/* Free a connection's spool, unless a handler took it. */
void
conn_spool_drop(struct conn *c)
{
	spool_free(c->spool);
	c->spool = NULL;
	if (c->spool_head != NULL)
		evbuffer_free(c->spool_head);
	c->spool_head = NULL;
}
