/*
 * connect.h -- the Connect protocol (connectrpc.com, JSON codec, HTTP/1.1)
 * that envd's clients speak, on the --envd-listen listeners; the services
 * (process.c, the filesystem's) register their methods here.
 *
 * Registering.  A service registers a table of methods, each named by its
 * procedure path without the leading '/' ("process.Process/List"), once
 * at start (envd_start() calls each service's *_register()):
 *
 *	static const struct envd_method methods[] = {
 *		{ "filesystem.Filesystem/Stat", ENVD_UNARY, fs_stat },
 *		{ "filesystem.Filesystem/WatchDir", ENVD_STREAM, fs_watch },
 *	};
 *	envd_register(methods, nitems(methods));
 *
 * A method gets its request message as a jansson object (the handler
 * borrows it; envd_json_*() read its fields) and a call that it must end
 * exactly once, now or later:
 *  - unary (ENVD_UNARY): envd_reply(call, msg) answers 200
 *    application/json with msg (the call takes the reference), or
 *    envd_reply_error(call, &err) answers the code's HTTP status and
 *    {"code": "...", "message": "..."}.
 *  - server stream (ENVD_STREAM): envd_stream_open(call, pull, gone, arg)
 *    answers 200 application/connect+json and ends the call; then
 *    envd_stream_send(st, msg) writes one enveloped message (flags 0), and
 *    envd_stream_end(st, err) the end-of-stream envelope (flags 0x02, {}
 *    or {"error": {...}}) and frees the stream.  Messages are pulled, as
 *    sse.h's frames are: write while envd_stream_room(); pull(st, arg)
 *    runs again when the connection drained, or at envd_stream_kick().
 *    gone(arg) runs when the client went away (the stream is freed then;
 *    never call envd_stream_end() after it).  envd_reply_error() before
 *    the stream opened answers 200 with only the end-of-stream envelope.
 * Plain routes (GET /health, /files) register with envd_route_register():
 * their handler answers the evhttp request itself (http.h).
 *
 * Users and auth.  A Basic-auth username ("Authorization: Basic
 * base64(user:)") names the call's user; without one it is /init's
 * defaultUser, else root (as envd_connect_init()'s default_user names it);
 * a user unknown here is 401 unauthenticated.
 * When agentd has a token (--token-file, or /init's accessToken), every
 * route but those registered ENVD_ROUTE_OPEN needs "X-Access-Token";
 * ENVD_ROUTE_SIGNED routes are called without it with authorized 0, and
 * check their signature themselves.
 *
 * Proto-JSON.  Fields are read by their lowerCamelCase name or its
 * snake_case (envd_json_*(): 1 present, 0 absent or null, -1 the wrong
 * type: err is invalid_argument naming the field); int64 may be a number
 * or a decimal string; bytes are base64 (standard or URL-safe, padded or
 * not); enums by name or number.  Writers omit default values (0, "",
 * false, empty bytes), write int64 as strings and bytes as base64.
 * Event loop thread only.
 */
#ifndef AGENTD_ENVD_CONNECT_H
#define AGENTD_ENVD_CONNECT_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct envd_call;
struct envd_stream;
struct http_req;
struct pty_user;

/* Connect's error codes. */
#define ENVD_OK			0
#define ENVD_CANCELED		1
#define ENVD_UNKNOWN		2
#define ENVD_INVALID_ARGUMENT	3
#define ENVD_DEADLINE_EXCEEDED	4
#define ENVD_NOT_FOUND		5
#define ENVD_ALREADY_EXISTS	6
#define ENVD_PERMISSION_DENIED	7
#define ENVD_RESOURCE_EXHAUSTED	8
#define ENVD_FAILED_PRECONDITION 9
#define ENVD_ABORTED		10
#define ENVD_OUT_OF_RANGE	11
#define ENVD_UNIMPLEMENTED	12
#define ENVD_INTERNAL		13
#define ENVD_UNAVAILABLE	14
#define ENVD_DATA_LOSS		15
#define ENVD_UNAUTHENTICATED	16

#define ENVD_MESSAGE_MAX	512	/* bytes of an error's message */

/* An error: a code and its message. */
struct envd_err {
	int	 code;
	char	 message[ENVD_MESSAGE_MAX];
};

/* Fill err; returns -1. */
int	 envd_fail(struct envd_err *, int code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* "invalid_argument" for ENVD_INVALID_ARGUMENT. */
const char *envd_code_name(int code);
/* The HTTP status of a code (Connect's table: 400 for invalid_argument). */
int	 envd_code_status(int code);

/* The kinds of methods. */
#define ENVD_UNARY	0
#define ENVD_STREAM	1	/* a server stream */

typedef void (*envd_method_fn)(struct envd_call *, json_t *msg);

struct envd_method {
	const char	*name;		/* "process.Process/Start" */
	int		 kind;		/* ENVD_UNARY or ENVD_STREAM */
	envd_method_fn	 fn;
};
/* Register methods; the table must outlive agentd (a static const one). */
void	 envd_register(const struct envd_method *, size_t n);

/* Plain routes' flags. */
#define ENVD_ROUTE_OPEN		0x1	/* no token needed (GET /health) */
#define ENVD_ROUTE_SIGNED	0x2	/* called without the token too */

/*
 * A plain route's handler: the user is the Basic-auth one or the default
 * (NULL when unknown: the handler may take another from its query);
 * authorized is 0 only on ENVD_ROUTE_SIGNED routes called without the
 * token.  It answers hr->req itself (http_reply_raw(), envd_plain_fail()).
 */
typedef void (*envd_route_fn)(struct http_req *, const struct pty_user *user,
	    int authorized);

struct envd_route {
	const char	*path;		/* "/health" */
	int		 methods;	/* EVHTTP_REQ_* allowed */
	int		 flags;		/* ENVD_ROUTE_* */
	envd_route_fn	 fn;
};
/* Register plain routes; the table must outlive agentd. */
void	 envd_route_register(const struct envd_route *, size_t n);
/* Answer a plain route with envd's error shape {"code": N, "message"}. */
void	 envd_plain_fail(struct http_req *, int status, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/* The call's user (resolved before the method runs). */
const struct pty_user *envd_call_user(const struct envd_call *);
/* Connect-Timeout-Ms of the call, 0 when none. */
int64_t	 envd_call_timeout_ms(const struct envd_call *);
/* A request header of the call, NULL when absent. */
const char *envd_call_header(const struct envd_call *, const char *name);
/* The HTTP request (valid until the call ends). */
struct http_req *envd_call_req(struct envd_call *);

/*
 * End a call without answering: its client went away (the connection is
 * freed, or being freed, by evhttp).
 */
void	 envd_call_drop(struct envd_call *);
/* Answer a unary call with msg (reference taken) and end it. */
void	 envd_reply(struct envd_call *, json_t *msg);
/* Answer a call with an error and end it. */
void	 envd_reply_error(struct envd_call *, const struct envd_err *);
/* The same with the error built here. */
void	 envd_reply_fail(struct envd_call *, int code, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

typedef void (*envd_pull_fn)(struct envd_stream *, void *arg);
typedef void (*envd_gone_fn)(void *arg);
/* Open a stream call's answer and end the call (see the top). */
struct envd_stream *envd_stream_open(struct envd_call *, envd_pull_fn,
	    envd_gone_fn, void *arg);
/* Whether the stream takes more messages now. */
int	 envd_stream_room(const struct envd_stream *);
/*
 * Write msg (reference taken) in an envelope; a message over
 * --envd-max-message ends the stream with resource_exhausted instead
 * (returns -1 then; the stream is freed, gone is not called).
 */
int	 envd_stream_send(struct envd_stream *, json_t *msg);
/* The producer has news: pull now if there is room. */
void	 envd_stream_kick(struct envd_stream *);
/* End with the end-of-stream envelope (err NULL: "{}") and free. */
void	 envd_stream_end(struct envd_stream *, const struct envd_err *);

/* Proto-JSON readers: 1 present, 0 absent (or null), -1 wrong type. */
json_t	*envd_json_field(json_t *obj, const char *camel);
int	 envd_json_object(json_t *obj, const char *camel, json_t **out,
	    struct envd_err *);
int	 envd_json_array(json_t *obj, const char *camel, json_t **out,
	    struct envd_err *);
int	 envd_json_string(json_t *obj, const char *camel, const char **out,
	    struct envd_err *);
int	 envd_json_bool(json_t *obj, const char *camel, int *out,
	    struct envd_err *);
int	 envd_json_u32(json_t *obj, const char *camel, uint32_t *out,
	    struct envd_err *);
int	 envd_json_i64(json_t *obj, const char *camel, int64_t *out,
	    struct envd_err *);
/* Bytes into a malloc'd *out (NULL when 0 bytes). */
int	 envd_json_bytes(json_t *obj, const char *camel, uint8_t **out,
	    size_t *len, struct envd_err *);
/* An enum by name (names[i] is value values[i]) or number. */
int	 envd_json_enum(json_t *obj, const char *camel,
	    const char *const *names, const int *values, size_t n, int *out,
	    struct envd_err *);

/* Proto-JSON writers: each omits its default value. */
void	 envd_json_set_string(json_t *obj, const char *camel, const char *);
void	 envd_json_set_bool(json_t *obj, const char *camel, int);
void	 envd_json_set_u32(json_t *obj, const char *camel, uint32_t);
void	 envd_json_set_i32(json_t *obj, const char *camel, int32_t);
void	 envd_json_set_i64(json_t *obj, const char *camel, int64_t);
void	 envd_json_set_bytes(json_t *obj, const char *camel, const void *,
	    size_t);
/* Always set (a message, a oneof member: {} is not its default). */
void	 envd_json_set_new(json_t *obj, const char *camel, json_t *value);

/* The wiring's (envd.c): */
struct proto_buf;
/*
 * Set the largest message (--envd-max-message), and where a call without a
 * Basic-auth user finds its default user's name (envstate_user()).
 */
void	 envd_connect_init(uint64_t max_message,
	    const char *(*default_user)(void));
/* Every request of an envd listener (http_listen_routes()'s route). */
void	 envd_route(struct http_req *);
/* Append the requests by method to a /metrics answer. */
void	 envd_metrics(struct proto_buf *);

#endif /* AGENTD_ENVD_CONNECT_H */
