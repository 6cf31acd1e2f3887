/*
 * mcp.c -- the Model Context Protocol's Streamable HTTP transport at /mcp,
 * and its tools over agentd's sessions (see mcp.h).
 */
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/types.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "api.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "mcp.h"
#include "outq.h"
#include "proto.h"
#include "ringbuf.h"
#include "session.h"
#include "sessions.h"
#include "stop.h"
#include "util.h"

#define MCP_ID_BYTES		16	/* random bytes of an Mcp-Session-Id */
#define MCP_ID_LEN		(2 * MCP_ID_BYTES)	/* its hex digits */

#define MCP_BATCH_MAX		64	/* messages in one batch */
#define MCP_LIST_MAX		256	/* sessions of one list_sessions */
#define MCP_LIST_COMMAND	256	/* bytes of a command it shows */
#define MCP_RESULT_BYTES	1024	/* bytes of a result beside its output */

/* Append a string literal. */
#define MCP_PUT(b, lit)		proto_buf_append((b), (lit), sizeof (lit) - 1)

/* JSON-RPC's error codes, and the transport's (as the TypeScript SDK's). */
#define RPC_PARSE_ERROR		-32700
#define RPC_INVALID_REQUEST	-32600
#define RPC_METHOD_NOT_FOUND	-32601
#define RPC_INVALID_PARAMS	-32602
#define RPC_INTERNAL_ERROR	-32603
#define RPC_BAD_REQUEST		-32000	/* a header the transport refuses */
#define RPC_NO_SESSION		-32001	/* no such Mcp-Session-Id */

/* The protocol versions served, newest first, and whether they batch. */
static const struct {
	const char	*name;
	int		 batch;
} mcp_versions[] = {
	{ "2025-11-25", 0 },
	{ "2025-06-18", 0 },
	{ "2025-03-26", 1 },
};

/* The tools. */
enum mcp_tool {
	MCP_EXEC,
	MCP_STDIN,
	MCP_LIST,
	MCP_KILL,
};

/* Where one MCP session's reader of an agentd session got to. */
struct mcp_mark {
	TAILQ_ENTRY(mcp_mark)	 entry;
	char			 id[PROTO_ID_MAX + 1];
	long			 pid;		/* tells a reused id apart */
	uint64_t		 cursor;	/* the last chunk returned */
	uint64_t		 offset;	/* output bytes before the next */
};
TAILQ_HEAD(mcp_marks, mcp_mark);

/* An MCP session (Mcp-Session-Id). */
struct mcp_session {
	TAILQ_ENTRY(mcp_session) entry;		/* most recently used first */
	char			 id[MCP_ID_LEN + 1];
	int			 version;	/* index in mcp_versions */
	struct mcp_marks	 marks;
};
TAILQ_HEAD(mcp_sessions, mcp_session);

/* A POST's messages, answered one after another. */
struct mcp_call {
	TAILQ_ENTRY(mcp_call)	 entry;		/* waiting to resume */
	struct evhttp_request	*req;
	char			 sid[MCP_ID_LEN + 1];	/* "": none yet */
	int			 version;
	json_t			*msgs;		/* an array */
	size_t			 next;		/* the next message to run */
	int			 batch;		/* answer with an array */
	int			 invalid;	/* a single invalid message: 400 */
	size_t			 nanswers;
	struct proto_buf	 out;		/* the answers so far */
	struct event		*resume;	/* a batch goes on after a wait */
	/* The tool call that waits. */
	json_t			*id;		/* its request id (in msgs) */
	enum mcp_tool		 tool;
	size_t			 max_bytes;
	int64_t			 wait_ms;	/* exec: its yield, once spawned */
};
TAILQ_HEAD(mcp_calls, mcp_call);

static struct mcp_sessions	mcp_sessions = TAILQ_HEAD_INITIALIZER(mcp_sessions);
static size_t			mcp_nsessions;
static struct mcp_calls		mcp_resuming = TAILQ_HEAD_INITIALIZER(mcp_resuming);
static uint64_t			mcp_evicted;
static struct event_base	*mcp_base;	/* the loop */
static const struct config	*mcp_cfg;

static void	mcp_fail(struct evhttp_request *, int status, int code,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int	mcp_version(const char *);
static struct mcp_session *mcp_session_find(const char *);
static struct mcp_session *mcp_session_new(int version);
static void	mcp_session_free(struct mcp_session *);
static struct mcp_mark *mcp_mark(struct mcp_call *, struct session *);
static void	mcp_delete(struct http_req *);
static void	mcp_post(struct http_req *);
static void	mcp_run(struct mcp_call *);
static int	mcp_message(struct mcp_call *, json_t *);
static int	mcp_request(struct mcp_call *, json_t *id, const char *method,
		    json_t *params);
static void	mcp_finish(struct mcp_call *);
static void	mcp_call_free(struct mcp_call *);
static void	mcp_resume(evutil_socket_t, short, void *);
static void	mcp_waited(struct evhttp_request *, struct session *, void *);
static void	mcp_continue(struct mcp_call *);
static void	mcp_exec_created(struct session *, const struct proto_err *,
		    void *);
static void	mcp_begin(struct mcp_call *, json_t *id);
static void	mcp_result(struct mcp_call *, json_t *id, const char *json);
static void	mcp_error(struct mcp_call *, json_t *id, int code,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void	mcp_tool_error(struct mcp_call *, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
static void	mcp_initialize(struct mcp_call *, json_t *id, json_t *params);
static int	mcp_tools_call(struct mcp_call *, json_t *id, json_t *params);
static int	mcp_args(struct mcp_call *, json_t *args,
		    const char *const *names, char *why, size_t whylen);
static int	mcp_arg_int(json_t *args, const char *name, int64_t min,
		    int64_t *val, char *why, size_t whylen);
static int	mcp_exec(struct mcp_call *, json_t *args);
static int	mcp_stdin(struct mcp_call *, json_t *args);
static int	mcp_kill(struct mcp_call *, json_t *args);
static struct session *mcp_session(struct mcp_call *, const char *sid);
static void	mcp_list(struct mcp_call *, uint64_t);
static size_t	mcp_escaped(const struct proto_window *);
static int	mcp_wait(struct mcp_call *, struct session *, int64_t ms,
		    int delete);
static void	mcp_answer(struct mcp_call *, struct session *);

/*
 * The tools, as tools/list gives them.  Each result of exec_command,
 * write_stdin and kill_session has this structuredContent.
 */
#define MCP_RESULT_SCHEMA \
	"{\"type\": \"object\", \"properties\": {" \
	"\"session_id\": {\"type\": \"string\"}, " \
	"\"exit_code\": {\"type\": [\"integer\", \"null\"]}, " \
	"\"running\": {\"type\": \"boolean\"}, " \
	"\"omitted_bytes\": {\"type\": \"integer\"}, " \
	"\"output\": {\"type\": \"string\"}}, " \
	"\"required\": [\"session_id\", \"exit_code\", \"running\", " \
	"\"omitted_bytes\", \"output\"]}"
#define MCP_YIELD_PROP(what, dflt) \
	"\"yield_time_ms\": {\"type\": \"integer\", \"minimum\": 0, " \
	"\"description\": \"How long to wait for " what " before answering, " \
	"in ms (250..30000; default " dflt ")\"}, " \
	"\"max_output_tokens\": {\"type\": \"integer\", \"minimum\": 1, " \
	"\"description\": \"Output budget in tokens of about 4 bytes; more " \
	"output keeps its head and tail (default 10000)\"}"
static const char mcp_tools_json[] = "{\"tools\": ["
	"{\"name\": \"exec_command\", \"title\": \"Run a command\", "
	"\"description\": \"Run a shell command in a new agentd session (on "
	"a PTY with tty, else on pipes) and wait up to yield_time_ms for it "
	"to end. The result says the session id, then 'exit code N' or "
	"'still running', then 'N bytes omitted' when the output was cut, "
	"then the output. A command still running keeps its session: pass "
	"its session_id to write_stdin.\", "
	"\"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"\"cmd\": {\"type\": \"string\", \"description\": \"The shell "
	"command\"}, "
	"\"workdir\": {\"type\": \"string\", \"description\": \"Working "
	"directory (default: agentd's --workdir; a relative one is taken "
	"from it)\"}, "
	"\"tty\": {\"type\": \"boolean\", \"description\": \"Run on a PTY, "
	"for interactive programs (default false: pipes)\"}, "
	MCP_YIELD_PROP("the command to end", "10000") ", "
	"\"shell\": {\"type\": \"string\", \"description\": \"The shell "
	"that runs cmd (default /bin/sh)\"}, "
	"\"login\": {\"type\": \"boolean\", \"description\": \"Run it as a "
	"login shell (-lc), which reads the profile first (default "
	"false)\"}}, "
	"\"required\": [\"cmd\"], \"additionalProperties\": false}, "
	"\"outputSchema\": " MCP_RESULT_SCHEMA "}, "
	"{\"name\": \"write_stdin\", \"title\": \"Write to a session\", "
	"\"description\": \"Write chars to the stdin of a session that "
	"exec_command started (\\\"\\\" only polls), then wait up to "
	"yield_time_ms for it to end. The result is exec_command's, with the "
	"output since the last result.\", "
	"\"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"\"session_id\": {\"type\": \"string\", \"description\": \"The "
	"session, as exec_command gave it\"}, "
	"\"chars\": {\"type\": \"string\", \"description\": \"What to write, "
	"\\\"\\\\n\\\" included (default \\\"\\\": poll, waiting 5000 ms at "
	"least)\"}, "
	MCP_YIELD_PROP("the session to end", "250") "}, "
	"\"required\": [\"session_id\"], \"additionalProperties\": false}, "
	"\"outputSchema\": " MCP_RESULT_SCHEMA "}, "
	"{\"name\": \"list_sessions\", \"title\": \"List the sessions\", "
	"\"description\": \"List agentd's sessions, running and exited: one "
	"line each with its id, its state and its command (its first 256 "
	"bytes). 256 sessions at most; when more follow, a last line and "
	"'next' say the 'after' that lists them.\", "
	"\"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"\"after\": {\"type\": \"integer\", \"minimum\": 0, "
	"\"description\": \"List the sessions after this one (a 'next' "
	"of an earlier result; default 0: from the first)\"}}, "
	"\"additionalProperties\": false}, "
	"\"outputSchema\": {\"type\": \"object\", \"properties\": {"
	"\"sessions\": {\"type\": \"array\", \"items\": {\"type\": "
	"\"object\", \"properties\": {"
	"\"session_id\": {\"type\": \"string\"}, "
	"\"running\": {\"type\": \"boolean\"}, "
	"\"exit_code\": {\"type\": [\"integer\", \"null\"]}, "
	"\"tty\": {\"type\": \"boolean\"}, "
	"\"command\": {\"type\": \"string\"}}, "
	"\"required\": [\"session_id\", \"running\", \"exit_code\", \"tty\", "
	"\"command\"]}}, \"next\": {\"type\": \"integer\"}}, "
	"\"required\": [\"sessions\"]}, "
	"\"annotations\": {\"readOnlyHint\": true}}, "
	"{\"name\": \"kill_session\", \"title\": \"Kill a session\", "
	"\"description\": \"End a session: SIGTERM to its processes, SIGKILL "
	"2 s later, and remove it. The result is exec_command's, with the "
	"last output.\", "
	"\"inputSchema\": {\"type\": \"object\", \"properties\": {"
	"\"session_id\": {\"type\": \"string\", \"description\": \"The "
	"session\"}}, "
	"\"required\": [\"session_id\"], \"additionalProperties\": false}, "
	"\"outputSchema\": " MCP_RESULT_SCHEMA ", "
	"\"annotations\": {\"destructiveHint\": true}}"
	"]}";

/* Set the loop and the configuration, at the start. */
void
mcp_init(struct event_base *base, const struct config *cfg)
{
	mcp_base = base;
	mcp_cfg = cfg;
}

/* /mcp */
void
mcp_route(struct http_req *hr)
{
	const char	*v;

	if (http_method(hr, EVHTTP_REQ_POST | EVHTTP_REQ_DELETE) != 0)
		return;		/* GET: 405, no stream from the server */
	v = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "MCP-Protocol-Version");
	if (v != NULL && mcp_version(v) < 0) {
		mcp_fail(hr->req, 400, RPC_BAD_REQUEST, "unsupported "
		    "MCP-Protocol-Version '%.32s' (served: %s, %s, %s)", v,
		    mcp_versions[0].name, mcp_versions[1].name,
		    mcp_versions[2].name);
		return;
	}
	if (hr->method == EVHTTP_REQ_DELETE)
		mcp_delete(hr);
	else
		mcp_post(hr);
}

/* Answer a request the transport refuses: status and a JSON-RPC error. */
static void
mcp_fail(struct evhttp_request *req, int status, int code, const char *fmt,
    ...)
{
	struct proto_buf	b = { 0 };
	char			msg[PROTO_MESSAGE_MAX];
	va_list			ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	proto_buf_printf(&b, "{\"jsonrpc\": \"2.0\", \"id\": null, "
	    "\"error\": {\"code\": %d, \"message\": ", code);
	proto_buf_json_string(&b, msg, strlen(msg));
	MCP_PUT(&b, "}}");
	http_reply(req, status, &b);
}

/* The index of a protocol version served, or -1. */
static int
mcp_version(const char *v)
{
	size_t	i;

	for (i = 0; i < nitems(mcp_versions); i++) {
		if (strcmp(v, mcp_versions[i].name) == 0)
			return ((int)i);
	}
	return (-1);
}

/* The MCP session of an id, made the most recently used; or NULL. */
static struct mcp_session *
mcp_session_find(const char *id)
{
	struct mcp_session	*ms;

	TAILQ_FOREACH(ms, &mcp_sessions, entry) {
		if (strcmp(ms->id, id) == 0) {
			TAILQ_REMOVE(&mcp_sessions, ms, entry);
			TAILQ_INSERT_HEAD(&mcp_sessions, ms, entry);
			return (ms);
		}
	}
	return (NULL);
}

/*
 * A new MCP session with a random id; over --mcp-sessions, the least
 * recently used one goes.  NULL when no random bytes can be had.
 */
static struct mcp_session *
mcp_session_new(int version)
{
	static const char	 hex[] = "0123456789abcdef";
	struct mcp_session	*ms;
	uint8_t			 r[MCP_ID_BYTES];
	size_t			 i;
	int			 fd = -1;

	/* Early boot: urandom does not wait for the pool either. */
	if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r &&
	    ((fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)) < 0 ||
	    fd_read_full(fd, r, sizeof r) != sizeof r)) {
		if (fd >= 0)
			close(fd);
		return (NULL);
	}
	if (fd >= 0)
		close(fd);
	ms = xcalloc(1, sizeof *ms);
	for (i = 0; i < sizeof r; i++) {
		ms->id[2 * i] = hex[r[i] >> 4];
		ms->id[2 * i + 1] = hex[r[i] & 0xf];
	}
	ms->version = version;
	TAILQ_INIT(&ms->marks);
	TAILQ_INSERT_HEAD(&mcp_sessions, ms, entry);
	if (++mcp_nsessions > mcp_cfg->mcp_sessions) {
		log_info("%s: %zu MCP sessions (--mcp-sessions): the least "
		    "recently used one ends", __func__, mcp_nsessions);
		mcp_session_free(TAILQ_LAST(&mcp_sessions, mcp_sessions));
		mcp_evicted++;
	}
	return (ms);
}

/* Unlink and free an MCP session. */
static void
mcp_session_free(struct mcp_session *ms)
{
	struct mcp_mark	*m;

	while ((m = TAILQ_FIRST(&ms->marks)) != NULL) {
		TAILQ_REMOVE(&ms->marks, m, entry);
		free(m);
	}
	TAILQ_REMOVE(&mcp_sessions, ms, entry);
	mcp_nsessions--;
	free(ms);
}

/*
 * The call's MCP session's mark of s, made at the start of its output when
 * new; the marks of sessions gone are dropped on the way.  With the MCP
 * session gone meanwhile, a mark of the call's own.
 */
static struct mcp_mark *
mcp_mark(struct mcp_call *c, struct session *s)
{
	static struct mcp_mark	 lone;
	struct mcp_session	*ms;
	struct mcp_mark		*m, *next, *found = NULL;
	struct proto_session	 v;
	struct session		*t;

	session_view(s, &v);
	if ((ms = mcp_session_find(c->sid)) == NULL) {
		memset(&lone, 0, sizeof lone);
		return (&lone);
	}
	for (m = TAILQ_FIRST(&ms->marks); m != NULL; m = next) {
		next = TAILQ_NEXT(m, entry);
		if (strcmp(m->id, v.id) == 0 && m->pid == v.pid)
			found = m;
		else if ((t = session_find(m->id)) == NULL || t == s) {
			TAILQ_REMOVE(&ms->marks, m, entry);
			free(m);
		}
	}
	if (found == NULL) {
		found = xcalloc(1, sizeof *found);
		snprintf(found->id, sizeof found->id, "%s", v.id);
		found->pid = v.pid;
		TAILQ_INSERT_HEAD(&ms->marks, found, entry);
	}
	return (found);
}

/* DELETE /mcp: end the MCP session named by Mcp-Session-Id. */
static void
mcp_delete(struct http_req *hr)
{
	struct mcp_session	*ms;
	struct proto_buf	 b = { 0 };
	const char		*sid;

	sid = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "Mcp-Session-Id");
	if (sid == NULL) {
		mcp_fail(hr->req, 400, RPC_BAD_REQUEST, "Mcp-Session-Id "
		    "header is required");
		return;
	}
	if ((ms = mcp_session_find(sid)) == NULL) {
		mcp_fail(hr->req, 404, RPC_NO_SESSION, "no MCP session "
		    "'%.*s'", MCP_ID_LEN, sid);
		return;
	}
	mcp_session_free(ms);
	http_reply_raw(hr->req, 204, "application/json", &b);
}

/* POST /mcp: a JSON-RPC message or a batch of them. */
static void
mcp_post(struct http_req *hr)
{
	struct evkeyvalq	*h = evhttp_request_get_input_headers(hr->req);
	struct mcp_session	*ms = NULL;
	struct mcp_call		*c;
	const char		*sid, *v, *method = NULL;
	json_error_t		 jerr;
	json_t			*msgs;
	int			 batch;

	msgs = json_loadb(hr->body, hr->body_len, JSON_REJECT_DUPLICATES |
	    JSON_DECODE_ANY, &jerr);
	if (msgs == NULL) {
		mcp_fail(hr->req, 400, RPC_PARSE_ERROR, "parse error: %s "
		    "(line %d, column %d)", jerr.text, jerr.line, jerr.column);
		return;
	}
	if ((batch = json_is_array(msgs)) && json_array_size(msgs) == 0) {
		json_decref(msgs);
		mcp_fail(hr->req, 400, RPC_INVALID_REQUEST, "an empty batch");
		return;
	}
	if (!batch) {
		json_t	*one = json_array();

		if (one == NULL || json_array_append_new(one, msgs) != 0)
			fatal("%s: out of memory", __func__);
		msgs = one;
		method = json_string_value(json_object_get(json_array_get(msgs,
		    0), "method"));
	}

	/* Every message but an initialize belongs to an MCP session. */
	sid = evhttp_find_header(h, "Mcp-Session-Id");
	if (method == NULL || strcmp(method, "initialize") != 0) {
		if (sid == NULL) {
			json_decref(msgs);
			mcp_fail(hr->req, 400, RPC_BAD_REQUEST, "Mcp-Session-Id "
			    "header is required (initialize first)");
			return;
		}
		if ((ms = mcp_session_find(sid)) == NULL) {
			json_decref(msgs);
			mcp_fail(hr->req, 404, RPC_NO_SESSION, "no MCP session "
			    "'%.*s' (initialize again)", MCP_ID_LEN, sid);
			return;
		}
	}
	c = xcalloc(1, sizeof *c);
	c->req = hr->req;
	c->msgs = msgs;
	c->batch = batch;
	if (ms != NULL) {
		snprintf(c->sid, sizeof c->sid, "%s", ms->id);
		c->version = ms->version;
	}
	if ((v = evhttp_find_header(h, "MCP-Protocol-Version")) != NULL)
		c->version = mcp_version(v);	/* checked by mcp_route() */
	if (batch && !mcp_versions[c->version].batch) {
		mcp_fail(hr->req, 400, RPC_INVALID_REQUEST, "protocol version "
		    "%s has no batches", mcp_versions[c->version].name);
		mcp_call_free(c);
		return;
	}
	if (batch && json_array_size(msgs) > MCP_BATCH_MAX) {
		mcp_fail(hr->req, 400, RPC_INVALID_REQUEST, "a batch of %zu "
		    "messages: at most %d", json_array_size(msgs),
		    MCP_BATCH_MAX);
		mcp_call_free(c);
		return;
	}
	mcp_run(c);
}

/*
 * Run the call's messages from the next one on, until one waits (its
 * answer goes on with the rest); then answer the request.
 */
static void
mcp_run(struct mcp_call *c)
{
	struct proto_err	err;

	while (c->next < json_array_size(c->msgs)) {
		/* The answers made so far are held for this client. */
		if (c->out.len > 0 && outq_admit(c->out.len, &err) != 0) {
			mcp_fail(c->req, err.status, RPC_INTERNAL_ERROR, "%s",
			    err.message);
			mcp_call_free(c);
			return;
		}
		if (mcp_message(c, json_array_get(c->msgs, c->next++)))
			return;
	}
	mcp_finish(c);
}

/*
 * Run one message: answer a request (JSON-RPC 2.0's rules), take a
 * notification or a response.  Returns 1 when its answer waits.
 */
static int
mcp_message(struct mcp_call *c, json_t *msg)
{
	json_t		*jsonrpc, *id, *method, *params;

	if (!json_is_object(msg)) {
		c->invalid = !c->batch;
		mcp_error(c, NULL, RPC_INVALID_REQUEST, "a message is a JSON "
		    "object");
		return (0);
	}
	jsonrpc = json_object_get(msg, "jsonrpc");
	id = json_object_get(msg, "id");
	method = json_object_get(msg, "method");
	params = json_object_get(msg, "params");
	if (id != NULL && !json_is_string(id) && !json_is_integer(id)) {
		c->invalid = !c->batch;
		mcp_error(c, NULL, RPC_INVALID_REQUEST, "'id' is a string or "
		    "an integer");
		return (0);
	}
	if (!json_is_string(jsonrpc) ||
	    strcmp(json_string_value(jsonrpc), "2.0") != 0) {
		c->invalid = !c->batch;
		mcp_error(c, id, RPC_INVALID_REQUEST, "'jsonrpc' must be "
		    "\"2.0\"");
		return (0);
	}
	if (method == NULL) {
		if (id != NULL && (json_object_get(msg, "result") != NULL ||
		    json_object_get(msg, "error") != NULL))
			return (0);	/* a response: agentd asks nothing */
		c->invalid = !c->batch;
		mcp_error(c, id, RPC_INVALID_REQUEST, "a message has a "
		    "'method', or a 'result' or 'error' with an 'id'");
		return (0);
	}
	if (!json_is_string(method)) {
		c->invalid = !c->batch;
		mcp_error(c, id, RPC_INVALID_REQUEST, "'method' is a string");
		return (0);
	}
	if (id == NULL)
		return (0);	/* a notification: initialized, cancelled */
	if (params != NULL && !json_is_object(params)) {
		mcp_error(c, id, RPC_INVALID_PARAMS, "'params' is an object");
		return (0);
	}
	return (mcp_request(c, id, json_string_value(method), params));
}

/* Answer a request by its method.  Returns 1 when the answer waits. */
static int
mcp_request(struct mcp_call *c, json_t *id, const char *method,
    json_t *params)
{
	if (strcmp(method, "initialize") == 0) {
		if (c->batch)
			mcp_error(c, id, RPC_INVALID_REQUEST, "initialize "
			    "is not part of a batch");
		else
			mcp_initialize(c, id, params);
	} else if (c->sid[0] == '\0')
		mcp_error(c, id, RPC_INVALID_REQUEST, "initialize first");
	else if (strcmp(method, "ping") == 0)
		mcp_result(c, id, "{}");
	else if (strcmp(method, "tools/list") == 0)
		mcp_result(c, id, mcp_tools_json);
	else if (strcmp(method, "tools/call") == 0)
		return (mcp_tools_call(c, id, params));
	else
		mcp_error(c, id, RPC_METHOD_NOT_FOUND, "method '%.64s' not "
		    "found", method);
	return (0);
}

/* Answer the request with the answers, or 202 when none was asked. */
static void
mcp_finish(struct mcp_call *c)
{
	struct proto_buf	b = { 0 };
	struct proto_err	err;

	if (c->nanswers == 0) {
		http_reply_raw(c->req, 202, "application/json", &b);
		mcp_call_free(c);
		return;
	}
	if (c->batch)
		MCP_PUT(&c->out, "]");	/* mcp_begin() put the "[" */
	if (outq_admit(c->out.len + 1, &err) != 0) {	/* at its real size */
		mcp_fail(c->req, err.status, RPC_INTERNAL_ERROR, "%s",
		    err.message);
		mcp_call_free(c);
		return;
	}
	b = c->out;
	memset(&c->out, 0, sizeof c->out);
	http_reply(c->req, c->invalid ? 400 : 200, &b);
	mcp_call_free(c);
}

/* Free a call (its request is answered, or gone). */
static void
mcp_call_free(struct mcp_call *c)
{
	if (c->resume != NULL) {
		if (event_pending(c->resume, EV_TIMEOUT, NULL))
			TAILQ_REMOVE(&mcp_resuming, c, entry);
		event_free(c->resume);
	}
	json_decref(c->msgs);
	proto_buf_free(&c->out);
	free(c);
}

/* A batch goes on after a message that waited. */
static void
mcp_resume(evutil_socket_t fd, short events, void *arg)
{
	struct mcp_call	*c = arg;

	TAILQ_REMOVE(&mcp_resuming, c, entry);
	mcp_run(c);
}

/*
 * A tool call's wait is over (sessions_wait_call()): answer it, then the rest of
 * a batch, from the loop's next turn (this may be the session observer).
 * req NULL: the client went away.
 */
static void
mcp_waited(struct evhttp_request *req, struct session *s, void *arg)
{
	struct mcp_call	*c = arg;

	if (req == NULL) {
		mcp_call_free(c);
		return;
	}
	mcp_answer(c, s);
	mcp_continue(c);
}

/* A waited answer is in: the next messages, soon (or the end). */
static void
mcp_continue(struct mcp_call *c)
{
	struct timeval	 tv;

	if (c->next == json_array_size(c->msgs) || agentd_stopping()) {
		mcp_run(c);	/* stopping: the rest are answered at once */
		return;
	}
	if (c->resume == NULL &&
	    (c->resume = evtimer_new(mcp_base, mcp_resume, c)) == NULL)
		fatal("%s: out of memory", __func__);
	TAILQ_INSERT_TAIL(&mcp_resuming, c, entry);
	evtimer_add(c->resume, timeval_ms(&tv, 0));
}

/* Start an answer to id: in a batch, a "[" or a comma first. */
static void
mcp_begin(struct mcp_call *c, json_t *id)
{
	if (c->nanswers++ > 0)
		MCP_PUT(&c->out, ", ");
	else if (c->batch)
		MCP_PUT(&c->out, "[");
	MCP_PUT(&c->out, "{\"jsonrpc\": \"2.0\", \"id\": ");
	if (json_is_string(id))
		proto_buf_json_string(&c->out, json_string_value(id),
		    json_string_length(id));
	else if (json_is_integer(id))
		proto_buf_printf(&c->out, "%" JSON_INTEGER_FORMAT,
		    json_integer_value(id));
	else
		MCP_PUT(&c->out, "null");
}

/* Answer id with a result, JSON text. */
static void
mcp_result(struct mcp_call *c, json_t *id, const char *json)
{
	mcp_begin(c, id);
	MCP_PUT(&c->out, ", \"result\": ");
	proto_buf_append(&c->out, json, strlen(json));
	MCP_PUT(&c->out, "}");
}

/* Answer id (NULL: null) with a JSON-RPC error. */
static void
mcp_error(struct mcp_call *c, json_t *id, int code, const char *fmt, ...)
{
	char	msg[PROTO_MESSAGE_MAX];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	mcp_begin(c, id);
	proto_buf_printf(&c->out, ", \"error\": {\"code\": %d, \"message\": ",
	    code);
	proto_buf_json_string(&c->out, msg, strlen(msg));
	MCP_PUT(&c->out, "}}");
}

/* Answer the waiting tool call with a tool result that is an error. */
static void
mcp_tool_error(struct mcp_call *c, const char *fmt, ...)
{
	char	msg[PROTO_MESSAGE_MAX];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	mcp_begin(c, c->id);
	MCP_PUT(&c->out, ", \"result\": {\"content\": [{\"type\": "
	    "\"text\", \"text\": ");
	proto_buf_json_string(&c->out, msg, strlen(msg));
	MCP_PUT(&c->out, "}], \"isError\": true}}");
}

/*
 * initialize: the client's protocol version when served, else the newest;
 * a new MCP session, named in Mcp-Session-Id.
 */
static void
mcp_initialize(struct mcp_call *c, json_t *id, json_t *params)
{
	struct mcp_session	*ms;
	const char		*want;
	char			*result;
	int			 v;

	want = json_string_value(json_object_get(params, "protocolVersion"));
	if (want == NULL ||
	    !json_is_object(json_object_get(params, "capabilities")) ||
	    !json_is_object(json_object_get(params, "clientInfo"))) {
		mcp_error(c, id, RPC_INVALID_PARAMS, "initialize takes "
		    "'protocolVersion' (a string), 'capabilities' and "
		    "'clientInfo' (objects)");
		return;
	}
	if ((v = mcp_version(want)) < 0)
		v = 0;
	if ((ms = mcp_session_new(v)) == NULL) {
		mcp_error(c, id, RPC_INTERNAL_ERROR, "no random bytes for an "
		    "Mcp-Session-Id");
		return;
	}
	snprintf(c->sid, sizeof c->sid, "%s", ms->id);
	c->version = v;
	evhttp_add_header(evhttp_request_get_output_headers(c->req),
	    "Mcp-Session-Id", ms->id);
	log_debug("%s: MCP session %.8s... (%s)", __func__, ms->id,
	    mcp_versions[v].name);
	xasprintf(&result, "{\"protocolVersion\": \"%s\", \"capabilities\": "
	    "{\"tools\": {\"listChanged\": false}}, \"serverInfo\": "
	    "{\"name\": \"agentd\", \"version\": \"%s\"}, \"instructions\": "
	    "\"Run commands in this sandbox with exec_command; a command still "
	    "running keeps its session_id for write_stdin.\"}",
	    mcp_versions[v].name, AGENTD_VERSION);
	mcp_result(c, id, result);
	free(result);
}

/* tools/call.  Returns 1 when the answer waits. */
static int
mcp_tools_call(struct mcp_call *c, json_t *id, json_t *params)
{
	const char	*name;
	json_t		*args;

	name = json_string_value(json_object_get(params, "name"));
	args = json_object_get(params, "arguments");
	if (name == NULL || (args != NULL && !json_is_object(args) &&
	    !json_is_null(args))) {
		mcp_error(c, id, RPC_INVALID_PARAMS, "tools/call takes 'name' "
		    "(a string) and 'arguments' (an object)");
		return (0);
	}
	if (args != NULL && json_is_null(args))
		args = NULL;
	c->id = id;
	c->max_bytes = (size_t)MCP_TOKENS_DEFAULT * MCP_TOKEN_BYTES;
	if (agentd_stopping()) {
		/* Nor the rest of a batch, answered from the shutdown. */
		mcp_tool_error(c, "shutting_down: agentd is shutting down");
		return (0);
	}
	if (strcmp(name, "exec_command") == 0)
		return (mcp_exec(c, args));
	if (strcmp(name, "write_stdin") == 0)
		return (mcp_stdin(c, args));
	if (strcmp(name, "kill_session") == 0)
		return (mcp_kill(c, args));
	if (strcmp(name, "list_sessions") == 0) {
		char	why[PROTO_MESSAGE_MAX];

		int64_t	after;

		if (mcp_args(c, args, (const char *const []){ "after", NULL },
		    why, sizeof why) != 0 || mcp_arg_int(args, "after", 0,
		    &after, why, sizeof why) != 0)
			mcp_tool_error(c, "%s", why);
		else
			mcp_list(c, (uint64_t)after);
		return (0);
	}
	mcp_error(c, id, RPC_INVALID_PARAMS, "unknown tool '%.64s'", name);
	return (0);
}

/*
 * Check a tool's arguments (NULL: none): only names, and
 * max_output_tokens, which sets c->max_bytes.  0, or -1 with why.
 */
static int
mcp_args(struct mcp_call *c, json_t *args, const char *const *names,
    char *why, size_t whylen)
{
	const char	*key;
	json_t		*val;
	size_t		 i;
	int64_t		 tokens;

	json_object_foreach(args, key, val) {
		for (i = 0; names[i] != NULL; i++) {
			if (strcmp(key, names[i]) == 0)
				break;
		}
		if (names[i] == NULL) {
			snprintf(why, whylen, "unknown argument '%.64s'", key);
			return (-1);
		}
	}
	if (mcp_arg_int(args, "max_output_tokens", 1, &tokens, why,
	    whylen) != 0)
		return (-1);
	if (tokens > 0)
		c->max_bytes = tokens > (int64_t)(PROTO_MAX_BYTES_MAX /
		    MCP_TOKEN_BYTES) ? PROTO_MAX_BYTES_MAX :
		    (size_t)tokens * MCP_TOKEN_BYTES;
	return (0);
}

/* An integer argument of at least min, or *val 0 when absent or null. */
static int
mcp_arg_int(json_t *args, const char *name, int64_t min, int64_t *val,
    char *why, size_t whylen)
{
	json_t	*v = json_object_get(args, name);

	*val = 0;
	if (v == NULL || json_is_null(v))
		return (0);
	if (!json_is_integer(v) || json_integer_value(v) < min) {
		snprintf(why, whylen, "'%s' is an integer of at least %lld",
		    name, (long long)min);
		return (-1);
	}
	*val = json_integer_value(v);
	return (0);
}

/* A yield_time_ms argument, its default and Codex's clamps. */
static int
mcp_yield(json_t *args, int64_t dflt, int64_t least, int64_t *ms, char *why,
    size_t whylen)
{
	json_t	*v = json_object_get(args, "yield_time_ms");

	if (mcp_arg_int(args, "yield_time_ms", 0, ms, why, whylen) != 0)
		return (-1);
	if (v == NULL || json_is_null(v))
		*ms = dflt;
	if (*ms < least)
		*ms = least;
	if (*ms > MCP_YIELD_MAX_MS)
		*ms = MCP_YIELD_MAX_MS;
	return (0);
}

/* A string argument, or NULL (absent, null); -1 when not a string. */
static int
mcp_arg_str(json_t *args, const char *name, int empty, const char **s,
    char *why, size_t whylen)
{
	json_t	*v = json_object_get(args, name);

	*s = NULL;
	if (v == NULL || json_is_null(v))
		return (0);
	if (!json_is_string(v) || (!empty && json_string_length(v) == 0)) {
		snprintf(why, whylen, "'%s' is a%s string", name, empty ? "" :
		    " non-empty");
		return (-1);
	}
	*s = json_string_value(v);
	return (0);
}

/* A boolean argument, false when absent or null. */
static int
mcp_arg_bool(json_t *args, const char *name, int *b, char *why,
    size_t whylen)
{
	json_t	*v = json_object_get(args, name);

	*b = 0;
	if (v == NULL || json_is_null(v))
		return (0);
	if (!json_is_boolean(v)) {
		snprintf(why, whylen, "'%s' is a boolean", name);
		return (-1);
	}
	*b = json_is_true(v);
	return (0);
}

/*
 * exec_command: start a session through the API's create (its parser and
 * its defaults), and wait for its end.  Returns 1 when the answer waits.
 */
static int
mcp_exec(struct mcp_call *c, json_t *args)
{
	static const char *const names[] = { "cmd", "workdir", "tty",
	    "yield_time_ms", "max_output_tokens", "shell", "login", NULL };
	struct proto_limits	 lim;
	struct proto_create	 pc;
	struct proto_err	 err;
	struct session		*s;
	const char		*cmd, *workdir, *shell;
	struct proto_buf	 body = { 0 };
	char			 why[PROTO_MESSAGE_MAX];
	int			 tty, login, error;
	int64_t			 ms;

	if (mcp_args(c, args, names, why, sizeof why) != 0 ||
	    mcp_arg_str(args, "cmd", 0, &cmd, why, sizeof why) != 0 ||
	    mcp_arg_str(args, "workdir", 0, &workdir, why, sizeof why) != 0 ||
	    mcp_arg_str(args, "shell", 0, &shell, why, sizeof why) != 0 ||
	    mcp_arg_bool(args, "tty", &tty, why, sizeof why) != 0 ||
	    mcp_arg_bool(args, "login", &login, why, sizeof why) != 0 ||
	    mcp_yield(args, MCP_EXEC_YIELD_MS, MCP_YIELD_MIN_MS, &ms, why,
	    sizeof why) != 0) {
		mcp_tool_error(c, "%s", why);
		return (0);
	}
	if (cmd == NULL) {
		mcp_tool_error(c, "'cmd' is required");
		return (0);
	}

	/* The API's create body, parsed as a POST's. */
	MCP_PUT(&body, "{\"cmd\": ");
	proto_buf_json_string(&body, cmd, strlen(cmd));
	proto_buf_printf(&body, ", \"tty\": %s, \"login\": %s",
	    tty ? "true" : "false", login ? "true" : "false");
	if (shell != NULL) {
		MCP_PUT(&body, ", \"shell\": ");
		proto_buf_json_string(&body, shell, strlen(shell));
	}
	if (workdir != NULL) {
		MCP_PUT(&body, ", \"cwd\": ");
		proto_buf_json_string(&body, workdir, strlen(workdir));
	}
	MCP_PUT(&body, "}");
	if (body.oom)
		fatal("%s: out of memory", __func__);
	lim.ring_bytes_default = mcp_cfg->ring_bytes;
	lim.ring_bytes_min = RING_CAPACITY_MIN;
	lim.ring_bytes_max = mcp_cfg->max_ring_bytes;
	error = proto_parse_create(body.data, body.len, &lim, &pc, &err);
	proto_buf_free(&body);
	if (error != 0) {
		mcp_tool_error(c, "%s: %s", err.code, err.message);
		return (0);
	}
	c->tool = MCP_EXEC;
	c->wait_ms = ms;
	/* The spawn runs on a thread (session.h): the answer waits for it. */
	if (session_create(&pc, mcp_exec_created, c, &s, &err) != 0) {
		proto_create_free(&pc);
		mcp_tool_error(c, "%s: %s", err.code, err.message);
		return (0);
	}
	proto_create_free(&pc);
	return (1);
}

/* exec_command's spawn ended: wait on the session, or say why not. */
static void
mcp_exec_created(struct session *s, const struct proto_err *err, void *arg)
{
	struct mcp_call	*c = arg;

	if (s == NULL) {
		mcp_tool_error(c, "%s: %s", err->code, err->message);
		mcp_continue(c);
		return;
	}
	log_debug("%s: session %s", __func__, session_id(s));
	if (mcp_wait(c, s, c->wait_ms, 0) == 0)
		mcp_continue(c);
}

/* write_stdin.  Returns 1 when the answer waits. */
static int
mcp_stdin(struct mcp_call *c, json_t *args)
{
	static const char *const names[] = { "session_id", "chars",
	    "yield_time_ms", "max_output_tokens", NULL };
	struct proto_err	 err;
	struct session		*s;
	const char		*sid, *chars;
	char			 why[PROTO_MESSAGE_MAX];
	int64_t			 ms;
	size_t			 len;

	if (mcp_args(c, args, names, why, sizeof why) != 0 ||
	    mcp_arg_str(args, "session_id", 0, &sid, why, sizeof why) != 0 ||
	    mcp_arg_str(args, "chars", 1, &chars, why, sizeof why) != 0) {
		mcp_tool_error(c, "%s", why);
		return (0);
	}
	len = chars != NULL ? strlen(chars) : 0;
	if (mcp_yield(args, MCP_STDIN_YIELD_MS, len == 0 ? MCP_POLL_YIELD_MS :
	    MCP_YIELD_MIN_MS, &ms, why, sizeof why) != 0) {
		mcp_tool_error(c, "%s", why);
		return (0);
	}
	if ((s = mcp_session(c, sid)) == NULL)
		return (0);
	if (len > 0 && session_write_stdin(s, chars, len, 0, &err) < 0) {
		mcp_tool_error(c, "%s: %s", err.code, err.message);
		return (0);
	}
	c->tool = MCP_STDIN;
	return (mcp_wait(c, s, ms, 0));
}

/* The session a tool's session_id names, or NULL after a tool error. */
static struct session *
mcp_session(struct mcp_call *c, const char *sid)
{
	struct session	*s;

	if (sid == NULL) {
		mcp_tool_error(c, "'session_id' is required");
		return (NULL);
	}
	if ((s = session_find(sid)) == NULL)
		mcp_tool_error(c, "not_found: no session '%.64s'", sid);
	return (s);
}

/* kill_session: as a DELETE.  Returns 1 when the answer waits. */
static int
mcp_kill(struct mcp_call *c, json_t *args)
{
	static const char *const names[] = { "session_id", NULL };
	struct session		*s;
	const char		*sid;
	char			 why[PROTO_MESSAGE_MAX];

	if (mcp_args(c, args, names, why, sizeof why) != 0 ||
	    mcp_arg_str(args, "session_id", 0, &sid, why, sizeof why) != 0) {
		mcp_tool_error(c, "%s", why);
		return (0);
	}
	if ((s = mcp_session(c, sid)) == NULL)
		return (0);
	c->tool = MCP_KILL;
	session_terminate(s, MCP_KILL_GRACE_MS);
	return (mcp_wait(c, s, MCP_KILL_GRACE_MS + SESSION_DRAIN_CAP_MS +
	    MCP_KILL_SLACK_MS, 1));
}

/*
 * Answer a tool call about s now when it has ended (with delete: when
 * nothing of it is left, as a DELETE), else park it for ms.  Returns 1
 * when parked.
 */
static int
mcp_wait(struct mcp_call *c, struct session *s, int64_t ms, int delete)
{
	if (delete ? session_gone(s) : session_exited(s)) {
		mcp_answer(c, s);
		if (delete)
			session_remove(s);
		return (0);
	}
	sessions_wait_call(c->req, s, ms, delete, mcp_waited, c);
	return (1);
}

/*
 * The bytes a result renders a window's output to, at most: twice (text
 * and output), each byte JSON-escaped: 6 for a control byte or one above
 * 0x7f (\u00XX, or \ufffd when it is not UTF-8), 2 for '"' and '\\'.
 */
static size_t
mcp_escaped(const struct proto_window *w)
{
	const uint8_t	*p;
	size_t		 i, j, n = MCP_RESULT_BYTES;

	for (i = 0; i < w->n; i++) {
		p = w->chunks[i].data;
		for (j = 0; j < w->chunks[i].len; j++)
			n += 2 * (p[j] < 0x20 || p[j] > 0x7f ? 6 :
			    p[j] == '"' || p[j] == '\\' ? 2 : 1);
	}
	return (n);
}

/*
 * Answer the waiting tool call with s: its id, its state, and its output
 * since the MCP session's last result, cut to c->max_bytes (head and
 * tail); in the text, a line says where the cut is.
 */
static void
mcp_answer(struct mcp_call *c, struct session *s)
{
	struct proto_session	 v;
	struct proto_window	 w;
	struct proto_err	 err;
	struct proto_buf	 t = { 0 }, o = { 0 };
	struct mcp_mark		*m = mcp_mark(c, s);
	uint64_t		 end, omitted = 0;
	size_t			 i, cut = 0, got = 0;

	if (m->cursor > ring_newest(session_ring(s)))
		m->cursor = m->offset = 0;	/* another session of that id */
	if (sessions_window(s, m->cursor, c->max_bytes, 1, &w, &err) != 0) {
		mcp_tool_error(c, "%s: %s", err.code, err.message);
		return;
	}
	/* Admitted at its rendered size, before it is made. */
	if (outq_admit(mcp_escaped(&w), &err) != 0) {
		mcp_tool_error(c, "%s: %s", err.code, err.message);
		return;
	}
	session_view(s, &v);

	/* The text: the figures, a line each, then the output. */
	proto_buf_printf(&t, "session %s\n", v.id);
	if (v.exited)
		proto_buf_printf(&t, "exit code %d\n", v.exit_code);
	else
		proto_buf_printf(&t, "still running\n");
	for (i = 0; i < w.n; i++)
		got += w.chunks[i].len;
	if (w.n > 0) {
		end = w.chunks[w.n - 1].offset + w.chunks[w.n - 1].len;
		omitted = end - m->offset - got;	/* cut, or evicted */
		m->offset = end;
	}
	m->cursor = w.cursor;
	if (omitted > 0)
		proto_buf_printf(&t, "%" PRIu64 " bytes omitted\n", omitted);
	/* The text marks the cut between the head and the tail. */
	for (i = 0; i < w.n; i++) {
		if (i == w.truncated_at)
			cut = o.len;
		proto_buf_append(&o, w.chunks[i].data, w.chunks[i].len);
	}
	if (w.truncated_bytes == 0 || w.truncated_at >= w.n)
		cut = o.len;
	if (cut > 0)
		proto_buf_append(&t, o.data, cut);
	if (w.truncated_bytes > 0) {
		if (cut > 0 && o.data[cut - 1] != '\n')
			MCP_PUT(&t, "\n");
		proto_buf_printf(&t, "[... %" PRIu64 " bytes omitted ...]\n",
		    w.truncated_bytes);
	}
	if (o.len > cut)
		proto_buf_append(&t, o.data + cut, o.len - cut);

	mcp_begin(c, c->id);
	MCP_PUT(&c->out, ", \"result\": {\"content\": [{\"type\": "
	    "\"text\", \"text\": ");
	proto_buf_json_string(&c->out, t.data, t.len);
	MCP_PUT(&c->out, "}], \"structuredContent\": "
	    "{\"session_id\": ");
	proto_buf_json_string(&c->out, v.id, strlen(v.id));
	if (v.exited)
		proto_buf_printf(&c->out, ", \"exit_code\": %d, \"running\": "
		    "false", v.exit_code);
	else
		proto_buf_printf(&c->out, ", \"exit_code\": null, \"running\": "
		    "true");
	proto_buf_printf(&c->out, ", \"omitted_bytes\": %" PRIu64 ", "
	    "\"output\": ", omitted);
	proto_buf_json_string(&c->out, o.len > 0 ? o.data : "", o.len);
	MCP_PUT(&c->out, "}, \"isError\": false}}");
	proto_buf_free(&t);
	proto_buf_free(&o);
}

/*
 * list_sessions: a line per session, and the same as structuredContent;
 * MCP_LIST_MAX sessions after the one of seq after at most, each command
 * cut to MCP_LIST_COMMAND bytes, so that the result is bounded whatever
 * the sessions' argv (its worst: each byte escaped to 6, twice).
 */
static void
mcp_list(struct mcp_call *c, uint64_t after)
{
	struct proto_session	 v;
	struct proto_buf	 t = { 0 }, sc = { 0 }, cmd = { 0 };
	struct session		*s;
	size_t			 i, n = 0, len;
	uint64_t		 next = 0;

	MCP_PUT(&sc, "{\"sessions\": [");
	for (s = session_first(); s != NULL; s = session_next(s)) {
		if (session_seq(s) <= after)
			continue;
		if (n == MCP_LIST_MAX) {
			next = session_seq(s) - 1;
			break;
		}
		session_view(s, &v);
		cmd.len = 0;
		for (i = 0; v.argv != NULL && v.argv[i] != NULL &&
		    cmd.len < MCP_LIST_COMMAND; i++)
			proto_buf_printf(&cmd, "%s%s", i > 0 ? " " : "",
			    v.argv[i]);
		if ((len = cmd.len) > MCP_LIST_COMMAND) {
			len = MCP_LIST_COMMAND;	/* not inside a character */
			while (len > 0 && (cmd.data[len] & 0xc0) == 0x80)
				len--;
		}
		proto_buf_printf(&t, "%s ", v.id);
		if (v.exited)
			proto_buf_printf(&t, "exit code %d", v.exit_code);
		else
			proto_buf_printf(&t, "running");
		proto_buf_printf(&t, "%s: ", v.tty ? " tty" : "");
		proto_buf_append(&t, cmd.data, len);
		if (len < cmd.len)
			MCP_PUT(&t, "...");
		MCP_PUT(&t, "\n");
		proto_buf_append(&sc, n == 0 ? "" : ", ", n == 0 ? 0 : 2);
		MCP_PUT(&sc, "{\"session_id\": ");
		proto_buf_json_string(&sc, v.id, strlen(v.id));
		if (v.exited)
			proto_buf_printf(&sc, ", \"running\": false, "
			    "\"exit_code\": %d", v.exit_code);
		else
			proto_buf_printf(&sc, ", \"running\": true, "
			    "\"exit_code\": null");
		proto_buf_printf(&sc, ", \"tty\": %s, \"command\": ",
		    v.tty ? "true" : "false");
		proto_buf_json_string(&sc, cmd.data, len);
		MCP_PUT(&sc, "}");
		n++;
	}
	MCP_PUT(&sc, "]");
	if (next > 0) {
		proto_buf_printf(&sc, ", \"next\": %" PRIu64, next);
		proto_buf_printf(&t, "more sessions: list_sessions with after "
		    "%" PRIu64 "\n", next);
	}
	MCP_PUT(&sc, "}");
	if (t.len == 0)
		proto_buf_printf(&t, "no sessions\n");

	mcp_begin(c, c->id);
	MCP_PUT(&c->out, ", \"result\": {\"content\": [{\"type\": "
	    "\"text\", \"text\": ");
	proto_buf_json_string(&c->out, t.data, t.len);
	MCP_PUT(&c->out, "}], \"structuredContent\": ");
	proto_buf_append(&c->out, sc.data, sc.len);
	MCP_PUT(&c->out, ", \"isError\": false}}");
	proto_buf_free(&t);
	proto_buf_free(&sc);
	proto_buf_free(&cmd);
}

/* GET /metrics: the MCP sessions. */
void
mcp_metrics(struct proto_buf *b)
{
	proto_buf_printf(b,
	    "# TYPE agentd_mcp_sessions gauge\n"
	    "agentd_mcp_sessions %zu\n"
	    "# TYPE agentd_mcp_sessions_max gauge\n"
	    "agentd_mcp_sessions_max %" PRIu64 "\n"
	    "# TYPE agentd_mcp_sessions_evicted_total counter\n"
	    "agentd_mcp_sessions_evicted_total %" PRIu64 "\n",
	    mcp_nsessions, mcp_cfg->mcp_sessions, mcp_evicted);
}

/* After shutdown: answer the batches still to resume, free the sessions. */
void
mcp_free(void)
{
	struct mcp_call	*c;

	while ((c = TAILQ_FIRST(&mcp_resuming)) != NULL) {
		TAILQ_REMOVE(&mcp_resuming, c, entry);
		event_del(c->resume);
		mcp_run(c);	/* stopping: nothing waits */
	}
	while (!TAILQ_EMPTY(&mcp_sessions))
		mcp_session_free(TAILQ_FIRST(&mcp_sessions));
}
