/*
 * mcp.h -- the Model Context Protocol at /mcp: its Streamable HTTP
 * transport, on agentd's listeners behind the API's token (http.c checks it
 * before routing), and four tools over agentd's sessions: exec_command,
 * write_stdin, list_sessions and kill_session (API.md, "MCP").
 *
 * A POST carries one JSON-RPC message, or (protocol 2025-03-26) a batch;
 * it is answered with application/json: 200 with the responses, 202 when
 * it held only notifications and responses, 4xx with a JSON-RPC error for
 * what the transport refuses (bad JSON, no or unknown Mcp-Session-Id, an
 * unsupported MCP-Protocol-Version).  GET is 405 (no server stream);
 * DELETE ends an MCP session.  initialize opens an MCP session
 * (Mcp-Session-Id), at most --mcp-sessions of them: one more closes the
 * least recently used.  An MCP session remembers, per agentd session, the
 * output already returned, so that each tool result carries the output
 * since the last one.
 *
 * A tool that waits (yield_time_ms, a kill's grace) parks its request with
 * sessions_wait_call(), as a long-poll does: the loop never blocks.  A batch
 * runs its messages one after another.  Event loop thread only.
 */
#ifndef AGENTD_MCP_H
#define AGENTD_MCP_H

struct config;
struct event_base;
struct http_req;
struct proto_buf;

#define MCP_YIELD_MIN_MS	250	/* yield_time_ms is clamped to these */
#define MCP_YIELD_MAX_MS	30000
#define MCP_EXEC_YIELD_MS	10000	/* exec_command's default yield */
#define MCP_STDIN_YIELD_MS	250	/* write_stdin's default yield */
#define MCP_POLL_YIELD_MS	5000	/* an empty write_stdin waits this at least */
#define MCP_TOKENS_DEFAULT	10000	/* max_output_tokens' default */
#define MCP_TOKEN_BYTES		4	/* bytes of output per token */
#define MCP_KILL_GRACE_MS	2000	/* kill_session: SIGTERM, then SIGKILL */
#define MCP_KILL_SLACK_MS	5000	/* kill_session answers at most this
					   after the grace */

/* Set the loop and the configuration, at the start. */
void	mcp_init(struct event_base *, const struct config *);
/* Serve a request to /mcp; every path answers it. */
void	mcp_route(struct http_req *);
/* The MCP sessions' figures for GET /metrics. */
void	mcp_metrics(struct proto_buf *);
/* Answer what is left and free every MCP session (after shutdown). */
void	mcp_free(void);

#endif /* AGENTD_MCP_H */
