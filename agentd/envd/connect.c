/*
 * connect.c -- the Connect protocol on the envd listeners: routing to the
 * registered methods and plain routes, the token and the user, envelopes,
 * errors and proto-JSON (see connect.h).
 */
#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "connect.h"
#include "http.h"
#include "httpcore.h"
#include "log.h"
#include "proto.h"
#include "pty.h"
#include "sse.h"
#include "util.h"

#define ENVD_METHODS_MAX	64	/* registered methods at most */
#define ENVD_ROUTES_MAX		16	/* registered plain routes at most */
#define ENVD_TIMEOUT_DIGITS	10	/* Connect-Timeout-Ms at most */
#define ENVD_ENVELOPE		5	/* bytes: flags, big-endian length */
#define ENVD_FLAG_COMPRESSED	0x01
#define ENVD_FLAG_END		0x02

/* A call in flight. */
struct envd_call {
	struct http_req			 hr;
	const struct envd_method	*m;
	struct pty_user			 user;
	int64_t				 timeout_ms;
};

/* An open server stream. */
struct envd_stream {
	struct sse	*sse;
	envd_pull_fn	 pull;
	envd_gone_fn	 gone;
	void		*arg;
};

/* A registered method and its count. */
struct envd_slot {
	const struct envd_method	*m;
	uint64_t			 calls;
};

static struct envd_slot		 envd_methods[ENVD_METHODS_MAX];
static size_t			 envd_nmethods;
static struct {
	const struct envd_route	*r;
	uint64_t		 calls;
} envd_routes[ENVD_ROUTES_MAX];
static size_t			 envd_nroutes;
static uint64_t			 envd_unrouted;	/* no route, no method */
static uint64_t			 envd_max_message;
static const char		*(*envd_user_dflt)(void); /* the wiring's */

static const struct {
	const char	*name;
	int		 status;
} envd_codes[] = {
	{ "ok", 200 }, { "canceled", 499 }, { "unknown", 500 },
	{ "invalid_argument", 400 }, { "deadline_exceeded", 504 },
	{ "not_found", 404 }, { "already_exists", 409 },
	{ "permission_denied", 403 }, { "resource_exhausted", 429 },
	{ "failed_precondition", 400 }, { "aborted", 409 },
	{ "out_of_range", 400 }, { "unimplemented", 501 }, { "internal", 500 },
	{ "unavailable", 503 }, { "data_loss", 500 },
	{ "unauthenticated", 401 },
};

static void	envd_rpc(struct http_req *, struct envd_slot *);
static int	envd_type_is(const char *, const char *);
static int	envd_user_of(struct http_req *, struct pty_user *,
		    struct envd_err *);
static int	envd_authorized(struct http_req *);
static int	envd_timeout(const char *, int64_t *);
static json_t	*envd_parse(struct envd_call *, struct envd_err *);
static void	envd_answer_error(struct http_req *, int stream,
		    const struct envd_err *, int status);
static void	envd_error_json(struct proto_buf *, const struct envd_err *);
static void	envd_envelope(struct proto_buf *, int flags, const char *,
		    size_t);
static void	envd_stream_pull(struct sse *, void *);
static void	envd_stream_gone(void *);
static char	*envd_snake(const char *, char *, size_t);
static int	envd_wrong(struct envd_err *, const char *, const char *);

/* Fill err; -1. */
int
envd_fail(struct envd_err *err, int code, const char *fmt, ...)
{
	va_list	ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return (-1);
}

/* A code's name. */
const char *
envd_code_name(int code)
{
	if (code < 0 || (size_t)code >= nitems(envd_codes))
		code = ENVD_UNKNOWN;
	return (envd_codes[code].name);
}

/* A code's HTTP status. */
int
envd_code_status(int code)
{
	if (code < 0 || (size_t)code >= nitems(envd_codes))
		code = ENVD_UNKNOWN;
	return (envd_codes[code].status);
}

/* Register methods. */
void
envd_register(const struct envd_method *m, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (envd_nmethods == ENVD_METHODS_MAX)
			fatal("%s: too many methods", __func__);
		envd_methods[envd_nmethods++].m = &m[i];
	}
}

/* Register plain routes. */
void
envd_route_register(const struct envd_route *r, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		if (envd_nroutes == ENVD_ROUTES_MAX)
			fatal("%s: too many routes", __func__);
		envd_routes[envd_nroutes++].r = &r[i];
	}
}

/* Set the largest message, and where the default user comes from. */
void
envd_connect_init(uint64_t max_message, const char *(*default_user)(void))
{
	envd_max_message = max_message;
	envd_user_dflt = default_user;
}

/* Whether a Content-Type is type, parameters aside. */
static int
envd_type_is(const char *ct, const char *type)
{
	size_t	len = strlen(type);

	if (ct == NULL)
		return (0);
	while (*ct == ' ')
		ct++;
	return (strncasecmp(ct, type, len) == 0 && (ct[len] == '\0' ||
	    ct[len] == ';' || ct[len] == ' '));
}

/* Whether the request carries the token, or none is set. */
static int
envd_authorized(struct http_req *hr)
{
	const char	*x;

	x = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "X-Access-Token");
	return (http_token_ok(NULL, 0, x, x != NULL ? strlen(x) : 0));
}

/*
 * The user of a request: Basic auth's username, else the default.  -1 with
 * unauthenticated for a user unknown here or a header that is no Basic.
 */
static int
envd_user_of(struct http_req *hr, struct pty_user *u, struct envd_err *err)
{
	const char	*a, *name;
	uint8_t		*dec = NULL;
	size_t		 len, i;
	char		 cause[128], buf[64];

	a = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "Authorization");
	name = envd_user_dflt();
	if (a != NULL && strncasecmp(a, "Basic ", 6) == 0) {
		a += 6;
		while (*a == ' ')
			a++;
		if (proto_b64_decode(a, strlen(a), &dec, &len) != 0)
			return (envd_fail(err, ENVD_UNAUTHENTICATED,
			    "invalid Basic authorization"));
		for (i = 0; i < len && dec[i] != ':'; i++)
			;
		if (i == 0 || i >= sizeof buf || memchr(dec, '\0', i) != NULL) {
			free(dec);
			if (i == 0)
				goto dflt;
			return (envd_fail(err, ENVD_UNAUTHENTICATED,
			    "invalid username"));
		}
		memcpy(buf, dec, i);
		buf[i] = '\0';
		free(dec);
		name = buf;
	}
dflt:
	if (pty_user_lookup(name, u, cause, sizeof cause) != 0)
		return (envd_fail(err, ENVD_UNAUTHENTICATED,
		    "invalid username: '%s': %s", name, cause));
	return (0);
}

/* Parse Connect-Timeout-Ms: 1..10 digits. */
static int
envd_timeout(const char *v, int64_t *ms)
{
	size_t	i;

	*ms = 0;
	if (v == NULL)
		return (0);
	for (i = 0; v[i] != '\0'; i++) {
		if (!isdigit((unsigned char)v[i]) || i >= ENVD_TIMEOUT_DIGITS)
			return (-1);
		*ms = *ms * 10 + (v[i] - '0');
	}
	return (i == 0 ? -1 : 0);
}

/* Every request of an envd listener comes here. */
void
envd_route(struct http_req *hr)
{
	struct envd_err	 err;
	struct pty_user	 u;
	const char	*p = hr->path;
	size_t		 i;
	int		 ok;

	for (i = 0; i < envd_nroutes; i++) {
		if (strcmp(envd_routes[i].r->path, p) != 0)
			continue;
		envd_routes[i].calls++;
		if (!(hr->method & envd_routes[i].r->methods)) {
			envd_plain_fail(hr, 405, "method not allowed on %s", p);
			return;
		}
		ok = envd_authorized(hr);
		if (!ok && !(envd_routes[i].r->flags & (ENVD_ROUTE_OPEN |
		    ENVD_ROUTE_SIGNED))) {
			envd_plain_fail(hr, 401, "missing or wrong access "
			    "token (X-Access-Token)");
			return;
		}
		envd_routes[i].r->fn(hr, envd_user_of(hr, &u, &err) == 0 ?
		    &u : NULL, ok || (envd_routes[i].r->flags &
		    ENVD_ROUTE_OPEN));
		return;
	}
	for (i = 0; *p == '/' && i < envd_nmethods; i++) {
		if (strcmp(envd_methods[i].m->name, p + 1) == 0) {
			envd_methods[i].calls++;
			envd_rpc(hr, &envd_methods[i]);
			return;
		}
	}
	envd_unrouted++;
	/* envd checks the token before its router: no token, no 404. */
	if (!envd_authorized(hr)) {
		envd_plain_fail(hr, 401, "missing or wrong access token "
		    "(X-Access-Token)");
		return;
	}
	envd_fail(&err, ENVD_UNIMPLEMENTED, "no procedure or route %.200s", p);
	envd_answer_error(hr, 0, &err, 404);
}

/* A Connect call: the checks of the protocol, then the method. */
static void
envd_rpc(struct http_req *hr, struct envd_slot *slot)
{
	struct evkeyvalq	*h = evhttp_request_get_input_headers(hr->req);
	const struct envd_method *m = slot->m;
	struct envd_call	*call;
	struct envd_err		 err;
	const char		*v;
	json_t			*msg;
	int			 stream = m->kind == ENVD_STREAM;

	if (!envd_authorized(hr)) {
		envd_fail(&err, ENVD_UNAUTHENTICATED, "missing or wrong access "
		    "token (X-Access-Token)");
		envd_answer_error(hr, 0, &err, 401);
		return;
	}
	if (hr->method != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(hr->req),
		    "Allow", "POST");
		envd_fail(&err, ENVD_UNIMPLEMENTED, "%s takes POST only",
		    m->name);
		envd_answer_error(hr, 0, &err, 405);
		return;
	}
	if (!envd_type_is(hr->content_type, stream ?
	    "application/connect+json" : "application/json")) {
		evhttp_add_header(evhttp_request_get_output_headers(hr->req),
		    "Accept-Post", stream ? "application/connect+json" :
		    "application/json");
		envd_fail(&err, ENVD_UNIMPLEMENTED, "content type '%.64s' is "
		    "not served: %s wants %s", hr->content_type, m->name,
		    stream ? "application/connect+json" : "application/json");
		envd_answer_error(hr, 0, &err, 415);
		return;
	}
	if ((v = evhttp_find_header(h, "Connect-Protocol-Version")) != NULL &&
	    strcmp(v, "1") != 0) {
		envd_fail(&err, ENVD_INVALID_ARGUMENT, "Connect-Protocol-Version "
		    "must be \"1\": got \"%.16s\"", v);
		envd_answer_error(hr, stream, &err, 0);
		return;
	}
	v = evhttp_find_header(h, stream ? "Connect-Content-Encoding" :
	    "Content-Encoding");
	if (v != NULL && strcmp(v, "identity") != 0) {
		envd_fail(&err, ENVD_UNIMPLEMENTED, "unknown compression "
		    "\"%.32s\": supported encodings are identity", v);
		envd_answer_error(hr, stream, &err, 0);
		return;
	}
	call = xcalloc(1, sizeof *call);
	call->hr = *hr;
	call->m = m;
	if (envd_timeout(evhttp_find_header(h, "Connect-Timeout-Ms"),
	    &call->timeout_ms) != 0) {
		envd_fail(&err, ENVD_INVALID_ARGUMENT, "protocol error: invalid "
		    "Connect-Timeout-Ms (1 to %d digits)", ENVD_TIMEOUT_DIGITS);
		goto fail;
	}
	if (envd_user_of(hr, &call->user, &err) != 0)
		goto fail;
	if ((msg = envd_parse(call, &err)) == NULL)
		goto fail;
	log_debug("%s: %s", __func__, m->name);
	m->fn(call, msg);
	json_decref(msg);
	return;
fail:
	envd_reply_error(call, &err);
}

/* The request's message: a JSON body, or one envelope of a stream's. */
static json_t *
envd_parse(struct envd_call *call, struct envd_err *err)
{
	const uint8_t	*b = (const uint8_t *)call->hr.body;
	size_t		 len = call->hr.body_len;
	uint32_t	 n;
	json_error_t	 jerr;
	json_t		*msg;

	if (call->m->kind == ENVD_STREAM) {
		if (len < ENVD_ENVELOPE) {
			envd_fail(err, ENVD_INVALID_ARGUMENT, "protocol error: "
			    "incomplete envelope: %zu bytes", len);
			return (NULL);
		}
		n = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 |
		    (uint32_t)b[3] << 8 | b[4];
		if (n > envd_max_message) {
			envd_fail(err, ENVD_RESOURCE_EXHAUSTED, "message size "
			    "%" PRIu32 " is larger than configured max %" PRIu64,
			    n, envd_max_message);
			return (NULL);
		}
		if (b[0] & ENVD_FLAG_COMPRESSED) {
			envd_fail(err, ENVD_INVALID_ARGUMENT, "protocol error: "
			    "received compressed message without "
			    "Connect-Content-Encoding");
			return (NULL);
		}
		if (b[0] != 0) {
			envd_fail(err, ENVD_INVALID_ARGUMENT, "protocol error: "
			    "invalid envelope flags %d", b[0]);
			return (NULL);
		}
		if ((size_t)n != len - ENVD_ENVELOPE) {
			envd_fail(err, ENVD_INVALID_ARGUMENT, "protocol error: "
			    "promised %" PRIu32 " bytes in enveloped message, "
			    "got %zu bytes", n, len - ENVD_ENVELOPE);
			return (NULL);
		}
		b += ENVD_ENVELOPE;
		len = n;
	} else if (len > envd_max_message) {
		envd_fail(err, ENVD_RESOURCE_EXHAUSTED, "message size %zu is "
		    "larger than configured max %" PRIu64, len,
		    envd_max_message);
		return (NULL);
	}
	if (len == 0)
		return (json_object());
	if ((msg = json_loadb((const char *)b, len, JSON_REJECT_DUPLICATES,
	    &jerr)) == NULL) {
		envd_fail(err, ENVD_INVALID_ARGUMENT, "unmarshal into %s: %s "
		    "(line %d, column %d)", call->m->name, jerr.text,
		    jerr.line, jerr.column);
		return (NULL);
	}
	if (!json_is_object(msg)) {
		json_decref(msg);
		envd_fail(err, ENVD_INVALID_ARGUMENT, "unmarshal into %s: the "
		    "message is not a JSON object", call->m->name);
		return (NULL);
	}
	return (msg);
}

/* {"code": "...", "message": "..."} */
static void
envd_error_json(struct proto_buf *b, const struct envd_err *err)
{
	const char	*name = envd_code_name(err->code);

	proto_buf_append(b, "{\"code\":\"", 9);
	proto_buf_append(b, name, strlen(name));
	proto_buf_append(b, "\",\"message\":", 12);
	proto_buf_json_string(b, err->message, strlen(err->message));
	proto_buf_append(b, "}", 1);
}

/* One envelope of data. */
static void
envd_envelope(struct proto_buf *b, int flags, const char *data, size_t len)
{
	uint8_t	hdr[ENVD_ENVELOPE];

	hdr[0] = (uint8_t)flags;
	hdr[1] = (uint8_t)(len >> 24);
	hdr[2] = (uint8_t)(len >> 16);
	hdr[3] = (uint8_t)(len >> 8);
	hdr[4] = (uint8_t)len;
	proto_buf_append(b, hdr, sizeof hdr);
	proto_buf_append(b, data, len);
}

/*
 * Answer an error: a unary call's (status 0: the code's), or a stream's
 * (200 and the end-of-stream envelope alone).
 */
static void
envd_answer_error(struct http_req *hr, int stream, const struct envd_err *err,
    int status)
{
	struct proto_buf	 b = { 0 }, e = { 0 };

	log_debug("%s: %s: %s", __func__, envd_code_name(err->code),
	    err->message);
	if (!stream) {
		envd_error_json(&b, err);
		http_reply_raw(hr->req, status != 0 ? status :
		    envd_code_status(err->code), "application/json", &b);
		return;
	}
	proto_buf_append(&e, "{\"error\":", 9);
	envd_error_json(&e, err);
	proto_buf_append(&e, "}", 1);
	envd_envelope(&b, ENVD_FLAG_END, e.data, e.len);
	proto_buf_free(&e);
	http_reply_raw(hr->req, 200, "application/connect+json", &b);
}

/* Answer a plain route with envd's error shape. */
void
envd_plain_fail(struct http_req *hr, int status, const char *fmt, ...)
{
	struct proto_buf	 b = { 0 };
	char			 msg[ENVD_MESSAGE_MAX];
	va_list			 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	proto_buf_printf(&b, "{\"code\":%d,\"message\":", status);
	proto_buf_json_string(&b, msg, strlen(msg));
	proto_buf_append(&b, "}", 1);
	http_reply_raw(hr->req, status, "application/json", &b);
}

/* The call's user. */
const struct pty_user *
envd_call_user(const struct envd_call *call)
{
	return (&call->user);
}

/* The call's deadline. */
int64_t
envd_call_timeout_ms(const struct envd_call *call)
{
	return (call->timeout_ms);
}

/* A request header. */
const char *
envd_call_header(const struct envd_call *call, const char *name)
{
	return (evhttp_find_header(evhttp_request_get_input_headers(
	    call->hr.req), name));
}

/* The HTTP request. */
struct http_req *
envd_call_req(struct envd_call *call)
{
	return (&call->hr);
}

/* End a call whose client went away. */
void
envd_call_drop(struct envd_call *call)
{
	free(call);
}

/* Answer a unary call. */
void
envd_reply(struct envd_call *call, json_t *msg)
{
	struct proto_buf	 b = { 0 };
	struct envd_err		 err;
	char			*s;

	if ((s = json_dumps(msg, JSON_COMPACT)) == NULL)
		fatal("%s: out of memory", __func__);
	json_decref(msg);
	if (strlen(s) > envd_max_message) {
		envd_fail(&err, ENVD_RESOURCE_EXHAUSTED, "answer of %zu bytes "
		    "is larger than configured max %" PRIu64, strlen(s),
		    envd_max_message);
		free(s);
		envd_reply_error(call, &err);
		return;
	}
	proto_buf_append(&b, s, strlen(s));
	free(s);
	http_reply_raw(call->hr.req, 200, "application/json", &b);
	free(call);
}

/* Answer a call with an error. */
void
envd_reply_error(struct envd_call *call, const struct envd_err *err)
{
	envd_answer_error(&call->hr, call->m->kind == ENVD_STREAM, err, 0);
	free(call);
}

/* The same, built here. */
void
envd_reply_fail(struct envd_call *call, int code, const char *fmt, ...)
{
	struct envd_err	err;
	va_list		ap;

	err.code = code;
	va_start(ap, fmt);
	vsnprintf(err.message, sizeof err.message, fmt, ap);
	va_end(ap);
	envd_reply_error(call, &err);
}

/* Open a stream's answer. */
struct envd_stream *
envd_stream_open(struct envd_call *call, envd_pull_fn pull,
    envd_gone_fn gone, void *arg)
{
	struct envd_stream	*st;

	st = xcalloc(1, sizeof *st);
	st->pull = pull;
	st->gone = gone;
	st->arg = arg;
	st->sse = sse_start_raw(&call->hr, 200, "application/connect+json",
	    envd_stream_pull, envd_stream_gone, st);
	free(call);
	return (st);
}

/* sse's pull: the producer's. */
static void
envd_stream_pull(struct sse *sse, void *arg)
{
	struct envd_stream	*st = arg;

	st->pull(st, st->arg);
}

/* sse's gone: the client left. */
static void
envd_stream_gone(void *arg)
{
	struct envd_stream	*st = arg;

	st->gone(st->arg);
	free(st);
}

/* Whether the stream takes more. */
int
envd_stream_room(const struct envd_stream *st)
{
	return (sse_room(st->sse));
}

/* Write one message. */
int
envd_stream_send(struct envd_stream *st, json_t *msg)
{
	struct proto_buf	 b = { 0 };
	struct envd_err		 err;
	char			*s;
	size_t			 len;

	if ((s = json_dumps(msg, JSON_COMPACT)) == NULL)
		fatal("%s: out of memory", __func__);
	json_decref(msg);
	len = strlen(s);
	if (len > envd_max_message) {
		free(s);
		envd_fail(&err, ENVD_RESOURCE_EXHAUSTED, "message of %zu bytes "
		    "is larger than configured max %" PRIu64, len,
		    envd_max_message);
		envd_stream_end(st, &err);
		return (-1);
	}
	envd_envelope(&b, 0, s, len);
	free(s);
	if (b.oom)
		fatal("%s: out of memory", __func__);
	sse_send_raw(st->sse, b.data, b.len);
	proto_buf_free(&b);
	return (0);
}

/* The producer has news. */
void
envd_stream_kick(struct envd_stream *st)
{
	sse_kick(st->sse);
}

/* End the stream. */
void
envd_stream_end(struct envd_stream *st, const struct envd_err *err)
{
	struct proto_buf	 b = { 0 }, e = { 0 };

	if (err == NULL)
		proto_buf_append(&e, "{}", 2);
	else {
		proto_buf_append(&e, "{\"error\":", 9);
		envd_error_json(&e, err);
		proto_buf_append(&e, "}", 1);
	}
	envd_envelope(&b, ENVD_FLAG_END, e.data, e.len);
	proto_buf_free(&e);
	if (b.oom)
		fatal("%s: out of memory", __func__);
	sse_send_raw(st->sse, b.data, b.len);
	proto_buf_free(&b);
	sse_end(st->sse);
	free(st);
}

/* The snake_case of a lowerCamelCase name into buf. */
static char *
envd_snake(const char *camel, char *buf, size_t len)
{
	size_t	i = 0;

	for (; *camel != '\0' && i + 2 < len; camel++) {
		if (isupper((unsigned char)*camel)) {
			buf[i++] = '_';
			buf[i++] = (char)tolower((unsigned char)*camel);
		} else
			buf[i++] = *camel;
	}
	buf[i] = '\0';
	return (buf);
}

/* A field by its lowerCamelCase name or its snake_case; NULL for null. */
json_t *
envd_json_field(json_t *obj, const char *camel)
{
	json_t	*v;
	char	 snake[128];

	if (!json_is_object(obj))
		return (NULL);
	if ((v = json_object_get(obj, camel)) == NULL)
		v = json_object_get(obj, envd_snake(camel, snake,
		    sizeof snake));
	return (json_is_null(v) ? NULL : v);
}

/* invalid_argument for a field of the wrong type. */
static int
envd_wrong(struct envd_err *err, const char *camel, const char *want)
{
	return (envd_fail(err, ENVD_INVALID_ARGUMENT, "invalid value for "
	    "field %s: want %s", camel, want));
}

/* A message field. */
int
envd_json_object(json_t *obj, const char *camel, json_t **out,
    struct envd_err *err)
{
	json_t	*v;

	if ((v = envd_json_field(obj, camel)) == NULL)
		return (0);
	if (!json_is_object(v))
		return (envd_wrong(err, camel, "an object"));
	*out = v;
	return (1);
}

/* A repeated field. */
int
envd_json_array(json_t *obj, const char *camel, json_t **out,
    struct envd_err *err)
{
	json_t	*v;

	if ((v = envd_json_field(obj, camel)) == NULL)
		return (0);
	if (!json_is_array(v))
		return (envd_wrong(err, camel, "an array"));
	*out = v;
	return (1);
}

/* A string field. */
int
envd_json_string(json_t *obj, const char *camel, const char **out,
    struct envd_err *err)
{
	json_t	*v;

	if ((v = envd_json_field(obj, camel)) == NULL)
		return (0);
	if (!json_is_string(v))
		return (envd_wrong(err, camel, "a string"));
	if (strlen(json_string_value(v)) != json_string_length(v))
		return (envd_wrong(err, camel, "a string without NUL"));
	*out = json_string_value(v);
	return (1);
}

/* A bool field. */
int
envd_json_bool(json_t *obj, const char *camel, int *out,
    struct envd_err *err)
{
	json_t	*v;

	if ((v = envd_json_field(obj, camel)) == NULL)
		return (0);
	if (!json_is_boolean(v))
		return (envd_wrong(err, camel, "true or false"));
	*out = json_is_true(v);
	return (1);
}

/* An integer field, a number or a decimal string, within min..max. */
static int
envd_json_int(json_t *obj, const char *camel, int64_t min, int64_t max,
    int64_t *out, struct envd_err *err)
{
	json_t		*v;
	const char	*s;
	char		*end;
	long long	 n = 0;
	double		 d;

	if ((v = envd_json_field(obj, camel)) == NULL)
		return (0);
	if (json_is_integer(v))
		n = json_integer_value(v);
	else if (json_is_real(v)) {
		d = json_real_value(v);
		if (d != (double)(long long)d)
			return (envd_wrong(err, camel, "an integer"));
		n = (long long)d;
	} else if (json_is_string(v)) {
		s = json_string_value(v);
		errno = 0;
		n = strtoll(s, &end, 10);
		if (*s == '\0' || *end != '\0' || errno != 0 || isspace(
		    (unsigned char)*s))
			return (envd_wrong(err, camel, "an integer"));
	} else
		return (envd_wrong(err, camel, "an integer"));
	if (n < min || n > max)
		return (envd_fail(err, ENVD_INVALID_ARGUMENT, "invalid value "
		    "for field %s: %lld is out of range", camel, n));
	*out = n;
	return (1);
}

/* A uint32 field. */
int
envd_json_u32(json_t *obj, const char *camel, uint32_t *out,
    struct envd_err *err)
{
	int64_t	n = 0;
	int	rc;

	if ((rc = envd_json_int(obj, camel, 0, UINT32_MAX, &n, err)) == 1)
		*out = (uint32_t)n;
	return (rc);
}

/* An int64 field. */
int
envd_json_i64(json_t *obj, const char *camel, int64_t *out,
    struct envd_err *err)
{
	return (envd_json_int(obj, camel, INT64_MIN, INT64_MAX, out, err));
}

/* A bytes field: base64, standard or URL-safe, padded or not. */
int
envd_json_bytes(json_t *obj, const char *camel, uint8_t **out, size_t *len,
    struct envd_err *err)
{
	json_t	*v;
	char	*s;
	size_t	 i, n;

	if ((v = envd_json_field(obj, camel)) == NULL)
		return (0);
	if (!json_is_string(v))
		return (envd_wrong(err, camel, "a base64 string"));
	n = json_string_length(v);
	s = xmalloc(n + 1);
	memcpy(s, json_string_value(v), n + 1);
	for (i = 0; i < n; i++) {
		if (s[i] == '-')
			s[i] = '+';
		else if (s[i] == '_')
			s[i] = '/';
	}
	if (proto_b64_decode(s, n, out, len) != 0) {
		free(s);
		return (envd_wrong(err, camel, "a base64 string"));
	}
	free(s);
	return (1);
}

/* An enum field, by name or number. */
int
envd_json_enum(json_t *obj, const char *camel, const char *const *names,
    const int *values, size_t n, int *out, struct envd_err *err)
{
	json_t	*v;
	size_t	 i;

	if ((v = envd_json_field(obj, camel)) == NULL)
		return (0);
	for (i = 0; i < n; i++) {
		if ((json_is_string(v) &&
		    strcmp(json_string_value(v), names[i]) == 0) ||
		    (json_is_integer(v) && json_integer_value(v) == values[i])) {
			*out = values[i];
			return (1);
		}
	}
	if (json_is_integer(v)) {	/* an unknown number is kept */
		if (json_integer_value(v) < INT32_MIN ||
		    json_integer_value(v) > INT32_MAX)
			return (envd_wrong(err, camel, "an enum value"));
		*out = (int)json_integer_value(v);
		return (1);
	}
	return (envd_wrong(err, camel, "an enum value"));
}

/* Set a string, unless "" (bytes that are not UTF-8 become U+FFFD). */
void
envd_json_set_string(json_t *obj, const char *camel, const char *s)
{
	struct proto_buf	 b = { 0 };
	json_t			*v;

	if (s == NULL || *s == '\0')
		return;
	if ((v = json_string(s)) == NULL) {
		proto_buf_json_string(&b, s, strlen(s));
		v = b.oom ? NULL : json_loadb(b.data, b.len, JSON_DECODE_ANY,
		    NULL);
		proto_buf_free(&b);
	}
	envd_json_set_new(obj, camel, v);
}

/* Set a bool, unless false. */
void
envd_json_set_bool(json_t *obj, const char *camel, int v)
{
	if (v)
		envd_json_set_new(obj, camel, json_true());
}

/* Set a uint32, unless 0. */
void
envd_json_set_u32(json_t *obj, const char *camel, uint32_t v)
{
	if (v != 0)
		envd_json_set_new(obj, camel, json_integer(v));
}

/* Set an int32, unless 0. */
void
envd_json_set_i32(json_t *obj, const char *camel, int32_t v)
{
	if (v != 0)
		envd_json_set_new(obj, camel, json_integer(v));
}

/* Set an int64 as a string, unless 0. */
void
envd_json_set_i64(json_t *obj, const char *camel, int64_t v)
{
	char	num[32];

	if (v != 0) {
		snprintf(num, sizeof num, "%" PRId64, v);
		envd_json_set_new(obj, camel, json_string(num));
	}
}

/* Set bytes as base64, unless empty. */
void
envd_json_set_bytes(json_t *obj, const char *camel, const void *p,
    size_t len)
{
	struct proto_buf	b = { 0 };

	if (len == 0)
		return;
	proto_b64_encode(&b, p, len);
	if (b.oom)
		fatal("%s: out of memory", __func__);
	envd_json_set_new(obj, camel, json_stringn_nocheck(b.data, b.len));
	proto_buf_free(&b);
}

/* Set a value always. */
void
envd_json_set_new(json_t *obj, const char *camel, json_t *value)
{
	if (value == NULL || json_object_set_new(obj, camel, value) != 0)
		fatal("%s: out of memory (or a string that is not UTF-8)",
		    __func__);
}

/* Append the envd counters to a /metrics answer. */
void
envd_metrics(struct proto_buf *b)
{
	size_t	i;

	if (envd_nmethods == 0)
		return;
	proto_buf_printf(b, "# TYPE agentd_envd_requests_total counter\n");
	for (i = 0; i < envd_nmethods; i++)
		proto_buf_printf(b, "agentd_envd_requests_total{method=\"%s\"} "
		    "%" PRIu64 "\n", envd_methods[i].m->name,
		    envd_methods[i].calls);
	for (i = 0; i < envd_nroutes; i++)
		proto_buf_printf(b, "agentd_envd_requests_total{method=\"%s\"} "
		    "%" PRIu64 "\n", envd_routes[i].r->path,
		    envd_routes[i].calls);
	proto_buf_printf(b, "agentd_envd_requests_total{method=\"unknown\"} "
	    "%" PRIu64 "\n", envd_unrouted);
}
