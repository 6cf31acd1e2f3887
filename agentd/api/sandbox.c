/*
 * sandbox.c -- POST /v1/sandbox/resumed and POST /v1/sandbox/pause
 * (sandbox.h).
 */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include <event2/http.h>

#include "http.h"
#include "proto.h"
#include "restore.h"
#include "sandbox.h"

static void	sandbox_resumed(struct http_req *);
static void	sandbox_pause(struct http_req *);
static void	sandbox_error(struct proto_buf *, const char *, const char *);

/* Route a request under /v1/sandbox/. */
void
sandbox_route(struct http_req *hr)
{
	if (strcmp(hr->path, "/v1/sandbox/resumed") == 0) {
		if (http_method(hr, EVHTTP_REQ_POST) == 0)
			sandbox_resumed(hr);
	} else if (strcmp(hr->path, "/v1/sandbox/pause") == 0) {
		if (http_method(hr, EVHTTP_REQ_POST) == 0)
			sandbox_pause(hr);
	} else
		http_fail(hr->req, 404, "not_found", "no route %s", hr->path);
}

/* Append , "name": "text" when text is not empty. */
static void
sandbox_error(struct proto_buf *b, const char *name, const char *text)
{
	if (text[0] == '\0')
		return;
	proto_buf_printf(b, ", \"%s\": ", name);
	proto_buf_json_string(b, text, strlen(text));
}

/*
 * POST /v1/sandbox/resumed {"unix_ms": N, "entropy": "<base64>"}:
 * {"generation": N, "clock_step_ms": D, ...}.
 */
static void
sandbox_resumed(struct http_req *hr)
{
	struct proto_resumed	 req;
	struct restore_result	 r;
	struct proto_err	 err;
	struct proto_buf	 b = { 0 };

	if (proto_parse_resumed(hr->body, hr->body_len, &req, &err) != 0) {
		http_reply_error(hr->req, &err, NULL);
		return;
	}
	restore_resumed(req.unix_ms, req.entropy, req.entropy_len, &r);
	explicit_bzero(req.entropy, sizeof req.entropy);
	proto_buf_printf(&b, "{\"generation\": %" PRIu64 ", \"clock_step_ms\": "
	    "%" PRId64 ", \"same_restore\": %s, \"clock\": \"%s\"",
	    r.generation, r.clock_step_ms, r.same ? "true" : "false", r.clock);
	sandbox_error(&b, "clock_error", r.clock_error);
	proto_buf_printf(&b, ", \"entropy_bytes\": %zu", r.entropy_bytes);
	sandbox_error(&b, "entropy_error", r.entropy_error);
	proto_buf_printf(&b, ", \"connections_probed\": %zu}", r.probed);
	http_reply(hr->req, 200, &b);
}

/* POST /v1/sandbox/pause: sync, {"generation": N}. */
static void
sandbox_pause(struct http_req *hr)
{
	struct proto_buf	b = { 0 };

	proto_buf_printf(&b, "{\"generation\": %" PRIu64 "}", restore_pause());
	http_reply(hr->req, 200, &b);
}
