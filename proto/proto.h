/*
 * proto.h -- the data of agentd's HTTP API: requests parsed and validated into
 * C structs, and answers rendered as JSON.  See API.md for the contract.
 *
 * Pure functions: no I/O, no globals but constant tables, no logging, no
 * exit.  Parsers take bytes and return 0 or -1 with a struct proto_err filled
 * with the HTTP status, the API's error code and a message naming the field.
 * Renderers append to a struct proto_buf, which records an allocation failure
 * instead of returning one from every call (check buf->oom once at the end).
 *
 * JSON bodies are parsed by jansson with duplicate keys rejected; unknown
 * fields, wrong types and values out of range are 400 invalid_request.
 */
#ifndef PROTO_H
#define PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_ID_MAX		64		/* chars of a session id */
#define PROTO_WAIT_MAX_MS	60000		/* yield_ms and wait_ms are clamped here */
#define PROTO_MAX_BYTES_DEFAULT	65536		/* bytes of output in one answer */
#define PROTO_MAX_BYTES_MAX	(64u << 20)	/* larger max_bytes are clamped */
#define PROTO_ROWS_DEFAULT	24
#define PROTO_COLS_DEFAULT	80
#define PROTO_SHELL_DEFAULT	"/bin/sh"
#define PROTO_MESSAGE_MAX	256		/* bytes of an error message */

/* An error answer: status, code (a static string) and message. */
struct proto_err {
	int		 status;
	const char	*code;
	char		 message[PROTO_MESSAGE_MAX];
};

/* Fill err and return -1. */
int	proto_fail(struct proto_err *, int status, const char *code,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A growable output buffer.  Free data with free(). */
struct proto_buf {
	char		*data;
	size_t		 len;
	size_t		 cap;
	int		 oom;		/* an append failed; contents are incomplete */
};

void	proto_buf_append(struct proto_buf *, const void *, size_t);
void	proto_buf_printf(struct proto_buf *, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Append a JSON string literal (quotes included) of s[0..len). */
void	proto_buf_json_string(struct proto_buf *, const char *s, size_t len);
/* Make room for n more bytes; returns the place to write or NULL (oom set). */
char	*proto_buf_space(struct proto_buf *, size_t n);
void	proto_buf_free(struct proto_buf *);

/* Base64 (standard alphabet, padded). */
size_t	proto_b64_encoded_len(size_t len);
void	proto_b64_encode(struct proto_buf *, const void *, size_t);
/* Decode into a malloc'd buffer; -1 on bad input or no memory. */
int	proto_b64_decode(const char *, size_t, uint8_t **out, size_t *outlen);

/* Values the parsers check against, taken from agentd's flags. */
struct proto_limits {
	size_t		 ring_bytes_default;	/* --ring-bytes */
	size_t		 ring_bytes_min;	/* 4096 */
	size_t		 ring_bytes_max;	/* --max-ring-bytes */
};

/* POST /v1/sessions */
struct proto_create {
	char		**argv;		/* NULL-terminated; cmd becomes [shell, "-c", cmd] */
	char		**env;		/* NULL-terminated "KEY=VALUE", or NULL */
	char		 *cwd;		/* NULL: agentd's --workdir */
	char		 *user;		/* NULL: agentd's user */
	int		  tty;
	unsigned	  rows, cols;
	int		  stdin_open;	/* 0: /dev/null (pipes only) */
	int64_t		  timeout_ms;	/* 0: none */
	int64_t		  yield_ms;	/* clamped to PROTO_WAIT_MAX_MS */
	int64_t		  wait_ms;	/* clamped to PROTO_WAIT_MAX_MS */
	size_t		  max_bytes;
	size_t		  ring_bytes;
	char		  id[PROTO_ID_MAX + 1];	/* "" when not given */
};
int	proto_parse_create(const char *body, size_t len,
	    const struct proto_limits *, struct proto_create *, struct proto_err *);
void	proto_create_free(struct proto_create *);

/* Whether id matches [A-Za-z0-9._-]{1,64}. */
int	proto_id_valid(const char *id);

/* POST /v1/sessions/{id}/stdin, as JSON or as a raw body plus a query. */
struct proto_stdin {
	uint8_t		*data;		/* malloc'd, or NULL when len is 0 */
	size_t		 len;
	int		 eof;
	int64_t		 yield_ms;
	int64_t		 wait_ms;
	size_t		 max_bytes;
};
int	proto_parse_stdin(const char *body, size_t len, struct proto_stdin *,
	    struct proto_err *);
void	proto_stdin_free(struct proto_stdin *);

/* POST /v1/sessions/{id}/resize */
int	proto_parse_resize(const char *body, size_t len, unsigned *rows,
	    unsigned *cols, struct proto_err *);

/* POST /v1/sessions/{id}/signal: "SIGINT", "INT" or 2. */
int	proto_parse_signal(const char *body, size_t len, int *signo,
	    struct proto_err *);

/* "SIGKILL" for 9; NULL for a number with no name. */
const char *proto_signal_name(int signo);
/* 9 for "SIGKILL", "KILL" or "9" (case-sensitive names); -1 when unknown. */
int	proto_signal_number(const char *);

/* The query string options of the session endpoints. */
struct proto_query {
	uint64_t	 cursor;	/* default 0 */
	int64_t		 wait_ms;	/* default 0, clamped */
	int64_t		 yield_ms;	/* default 0, clamped */
	size_t		 max_bytes;	/* default PROTO_MAX_BYTES_DEFAULT */
	int64_t		 grace_ms;	/* default -1: not given */
	int		 eof;		/* eof=true|1 */
};
/* Parse a raw query string (no '?'); unknown keys are ignored. */
int	proto_parse_query(const char *query, struct proto_query *,
	    struct proto_err *);

/* A session, as the renderer sees it. */
struct proto_session {
	const char	*id;
	long		 pid;
	int		 tty;
	unsigned	 rows, cols;
	char *const	*argv;
	const char	*cwd;
	const char	*user;
	int		 exited;
	int		 exit_code;	/* valid when exited */
	int		 signo;		/* killed by this signal, 0 if none */
	int		 timed_out;
	int64_t		 started_ms;	/* unix ms */
	int64_t		 ended_ms;	/* unix ms, -1 while running */
	uint64_t	 last_chunk;
	uint64_t	 bytes_out;
};

/* One output chunk to render. */
struct proto_chunk {
	uint64_t	 id;
	uint64_t	 offset;
	const uint8_t	*data;
	uint32_t	 len;
	int		 stream;	/* 0 pty, 1 stdout, 2 stderr */
};

/* An output window to render after a session's fields. */
struct proto_window {
	const struct proto_chunk *chunks;
	size_t		 n;
	uint64_t	 cursor;
	uint64_t	 dropped;
	int		 more;
	int		 eof;
};

/*
 * Render a session object; with w, the output window's fields follow in the
 * same object; with written >= 0, a "written" field leads it.
 */
void	proto_render_session(struct proto_buf *, const struct proto_session *,
	    const struct proto_window *w, int64_t written);
/* {"sessions": [...]} */
void	proto_render_session_list(struct proto_buf *,
	    const struct proto_session *, size_t n);
/* {"error": {...}}, and with s a "session" member beside it. */
void	proto_render_error(struct proto_buf *, const struct proto_err *,
	    const struct proto_session *s);
/* "2026-12-02T11:00:00.000Z" into a 25-byte buffer. */
void	proto_format_time(int64_t unix_ms, char out[25]);

#endif /* PROTO_H */
