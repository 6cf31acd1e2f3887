/*
 * sandbox.c -- POST /v1/sandbox/resumed and POST /v1/sandbox/pause
 * (sandbox.h).
 */
#include <sys/queue.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "hold.h"
#include "http.h"
#include "log.h"
#include "pause.h"
#include "proto.h"
#include "restore.h"
#include "sandbox.h"
#include "upgrade.h"
#include "util.h"

#define SANDBOX_PAUSE_WAIT_MS	30000	/* a pause answers by then, synced
					   or not */

/* A pause waiting for its sync. */
struct sandbox_pause {
	TAILQ_ENTRY(sandbox_pause) entry;
	struct evhttp_request	*req;
	struct hold		*hold;
	struct pause_wait	*wait;
};

static TAILQ_HEAD(, sandbox_pause) sandbox_pauses =
    TAILQ_HEAD_INITIALIZER(sandbox_pauses);

static void	sandbox_resumed(struct http_req *);
static void	sandbox_pause(struct http_req *);
static void	sandbox_pause_answer(struct sandbox_pause *, int64_t sync_ms);
static void	sandbox_pause_synced(void *, int64_t);
static void	sandbox_pause_deadline(void *);
static void	sandbox_pause_gone(void *);
static void	sandbox_pause_free(struct sandbox_pause *);
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
	} else if (strcmp(hr->path, "/v1/sandbox/upgrade") == 0) {
		if (http_method(hr, EVHTTP_REQ_POST) == 0)
			upgrade_route(hr);	/* upgrade.h */
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

/*
 * POST /v1/sandbox/pause: {"generation": N, "synced": true} once a sync
 * that started after it has ended; "synced": false past
 * SANDBOX_PAUSE_WAIT_MS (the sync goes on).
 */
static void
sandbox_pause(struct http_req *hr)
{
	static const struct hold_ops	 ops = { sandbox_pause_deadline,
					    sandbox_pause_gone };
	struct sandbox_pause		*p;

	p = xcalloc(1, sizeof *p);
	p->req = hr->req;
	TAILQ_INSERT_TAIL(&sandbox_pauses, p, entry);
	if ((p->wait = pause_start(sandbox_pause_synced, p)) == NULL) {
		sandbox_pause_answer(p, -1);
		return;
	}
	p->hold = hold_new(hr->req, SANDBOX_PAUSE_WAIT_MS, &ops, p);
}

/* Answer a pause, and free it; sync_ms -1: not synced. */
static void
sandbox_pause_answer(struct sandbox_pause *p, int64_t sync_ms)
{
	struct proto_buf	b = { 0 };

	proto_buf_printf(&b, "{\"generation\": %" PRIu64 ", \"synced\": %s",
	    restore_generation(), sync_ms >= 0 ? "true" : "false");
	if (sync_ms >= 0)
		proto_buf_printf(&b, ", \"sync_ms\": %" PRId64, sync_ms);
	proto_buf_append(&b, "}", 1);
	log_info("%s: pause at generation %" PRIu64 ": %s", __func__,
	    restore_generation(), sync_ms >= 0 ? "synced" : "not synced");
	http_reply(p->req, 200, &b);
	sandbox_pause_free(p);
}

/* The sync ended (the wait is gone). */
static void
sandbox_pause_synced(void *arg, int64_t ms)
{
	struct sandbox_pause	*p = arg;

	p->wait = NULL;
	sandbox_pause_answer(p, ms);
}

/* The sync did not end in time: answer without it. */
static void
sandbox_pause_deadline(void *arg)
{
	struct sandbox_pause	*p = arg;

	log_warn("%s: the sync has not ended in %d ms", __func__,
	    SANDBOX_PAUSE_WAIT_MS);
	sandbox_pause_answer(p, -1);
}

/* The client went away. */
static void
sandbox_pause_gone(void *arg)
{
	sandbox_pause_free(arg);
}

/* Unlink and free a pause (its request answered, or gone). */
static void
sandbox_pause_free(struct sandbox_pause *p)
{
	TAILQ_REMOVE(&sandbox_pauses, p, entry);
	if (p->wait != NULL)
		pause_cancel(p->wait);
	if (p->hold != NULL)
		hold_free(p->hold);
	free(p);
}

/* The shutdown: every pause still waiting is answered 503. */
void
sandbox_stop(void)
{
	struct sandbox_pause	*p;

	while ((p = TAILQ_FIRST(&sandbox_pauses)) != NULL) {
		http_fail(p->req, 503, "shutting_down",
		    "agentd is shutting down");
		sandbox_pause_free(p);
	}
}
