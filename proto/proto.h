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
 *
 * Request rules common to every JSON parser:
 *  - Bytes that are not JSON, duplicate keys, "\u0000" in a string and
 *    integers beyond 64 bits: 400 invalid_json, jansson's message with the
 *    line and column.  A top level that is not an object: 400
 *    invalid_request "body must be a JSON object".
 *  - An unknown field: 400 invalid_request "unknown field 'x'".
 *  - An optional field whose value is null counts as not given.
 *  - Integers must be JSON integers: 1.0, "1" and true are 400
 *    invalid_request naming the field.
 *  - Running out of memory: 500 internal_error (not in API.md's table).
 * All parsers are thread-safe and leave their output structs safe to free
 * (or untouched, for scalars) when they fail.
 */
#ifndef PROTO_H
#define PROTO_H

#include <stddef.h>
#include <string.h>
#include <stdint.h>

#define PROTO_ID_MAX		64		/* chars of a session id */
#define PROTO_WAIT_MAX_MS	60000		/* yield_ms and wait_ms are clamped here */
#define PROTO_MAX_BYTES_DEFAULT	65536		/* bytes of output in one answer */
#define PROTO_MAX_BYTES_MAX	(64u << 20)	/* larger max_bytes are clamped */
#define PROTO_ROWS_DEFAULT	24
#define PROTO_COLS_DEFAULT	80
#define PROTO_SHELL_DEFAULT	"/bin/sh"
#define PROTO_MESSAGE_MAX	256		/* bytes of an error message */
#define PROTO_SIGNAL_MAX	64		/* highest signal number accepted */
#define PROTO_GRACE_MAX_MS	3600000		/* DELETE's grace_ms: larger is 400 */
#define PROTO_MAX_BYTES_UNSET	SIZE_MAX	/* max_bytes_stdout/_stderr not
						   given: max_bytes applies */

/* The session's environment profile (create's "profile", --profile). */
#define PROTO_PROFILE_UNSET		(-1)	/* not given: agentd's --profile */
#define PROTO_PROFILE_DEFAULT		0	/* as ever */
#define PROTO_PROFILE_NONINTERACTIVE	1	/* TERM=dumb (pipes), NO_COLOR=1,
						   pagers cat, LC_ALL=C.UTF-8,
						   pipes' stdin /dev/null */

/* Output streams of a chunk (struct proto_chunk's stream). */
#define PROTO_STREAM_PTY	0
#define PROTO_STREAM_STDOUT	1
#define PROTO_STREAM_STDERR	2

/* An error answer: status, code (a static string) and message. */
struct proto_err {
	int		 status;
	const char	*code;
	char		 message[PROTO_MESSAGE_MAX];
};

/* Fill err and return -1. */
int	proto_fail(struct proto_err *, int status, const char *code,
	    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/*
 * A growable output buffer; start from all zeros.  Capacity starts at 256
 * bytes and doubles.  After an allocation failure oom is set and every
 * later append is ignored.  Free data with free() or proto_buf_free().  To
 * reuse the memory for another answer, set len and oom to 0.
 */
struct proto_buf {
	char		*data;
	size_t		 len;
	size_t		 cap;
	int		 oom;		/* an append failed; contents are incomplete */
};

/* proto_buf_append() when the bytes do not fit: grow, then append. */
void	proto_buf_append_grow(struct proto_buf *, const void *, size_t);

/* Append len bytes; inline, so that a constant len compiles to moves. */
static inline void
proto_buf_append(struct proto_buf *b, const void *p, size_t len)
{
	if (len != 0 && len <= b->cap - b->len && !b->oom) {
		memcpy(b->data + b->len, p, len);
		b->len += len;
	} else
		proto_buf_append_grow(b, p, len);
}
void	proto_buf_printf(struct proto_buf *, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));
/* Append an unsigned decimal (no printf: musl's costs 1-2k instructions). */
void	proto_buf_u64(struct proto_buf *, uint64_t);
/*
 * Append a JSON string literal (quotes included) of s[0..len): '"', '\\'
 * and control bytes escaped, each byte that is not part of valid UTF-8
 * written as \ufffd.
 */
void	proto_buf_json_string(struct proto_buf *, const char *s, size_t len);
/*
 * Make room for n more bytes; returns the place to write (data + len) or
 * NULL (oom set).  len is not changed: after writing k <= n bytes there,
 * add k to len.
 */
char	*proto_buf_space(struct proto_buf *, size_t n);
/*
 * Grow the capacity to exactly cap bytes if it is less, without the
 * doubling: for an answer whose size is known (a 5.6 MB window would
 * otherwise take 8 MiB).  Returns 0, or -1 when out of memory (b unchanged,
 * oom not set: later appends grow it as usual).
 */
int	proto_buf_reserve(struct proto_buf *, size_t cap);
void	proto_buf_free(struct proto_buf *);

/* Base64 (standard alphabet, padded). */
size_t	proto_b64_encoded_len(size_t len);
/* Append the padded encoding, written in place (no quotes). */
void	proto_b64_encode(struct proto_buf *, const void *, size_t);
/*
 * Decode into a malloc'd buffer; -1 on bad input or no memory.  Accepts the
 * standard alphabet, padded or unpadded (a partial padding such as "QQ=" is
 * refused); whitespace and any other byte are refused; nonzero bits after
 * the last byte are ignored (as most decoders do).  Empty input gives 0,
 * *out NULL and *outlen 0.
 */
int	proto_b64_decode(const char *, size_t, uint8_t **out, size_t *outlen);

/* Values the parsers check against, taken from agentd's flags. */
struct proto_limits {
	size_t		 ring_bytes_default;	/* --ring-bytes */
	size_t		 ring_bytes_min;	/* 4096 */
	size_t		 ring_bytes_max;	/* --max-ring-bytes */
};

/*
 * POST /v1/sessions.  Exactly one of cmd and argv (a non-empty array of
 * strings).  shell is read only with cmd (ignored, but type-checked, with
 * argv).  login (bool) makes cmd [shell, "-lc", cmd]; with argv it is 400.  cwd, user and shell: non-empty strings.  env: an object of strings,
 * keys non-empty and without '='; an empty object gives env NULL.
 * timeout_ms >= 0; yield_ms, wait_ms, idle_ms >= 0, clamped to
 * PROTO_WAIT_MAX_MS; head_tail a boolean;
 * max_bytes >= 0, clamped to PROTO_MAX_BYTES_MAX; ring_bytes in the limits'
 * min..max (not clamped).  max_bytes_stdout and max_bytes_stderr like
 * max_bytes (PROTO_MAX_BYTES_UNSET when not given); strip_ansi a boolean;
 * profile "default" or "noninteractive".  All owned strings are malloc'd.
 */
#define PROTO_LIMIT_MEMORY_MIN	(1 << 20)	/* bytes, a memory_bytes > 0 */
#define PROTO_LIMIT_MEMORY_MAX	(1ll << 50)	/* bytes */
#define PROTO_LIMIT_PIDS_MAX	4194304		/* the kernel's PID_MAX_LIMIT */
#define PROTO_LIMIT_CPU_MAX	100000		/* percent: 1000 CPUs */

struct proto_create {
	char		**argv;		/* NULL-terminated; cmd becomes [shell, "-c", cmd] */
	char		**env;		/* NULL-terminated "KEY=VALUE", or NULL */
	char		 *cwd;		/* NULL: agentd's --workdir */
	char		 *user;		/* NULL: agentd's user */
	int		  tty;
	unsigned	  rows, cols;
	int		  stdin_open;	/* 0: /dev/null (pipes only) */
	int		  stdin_given;	/* "stdin" was in the request */
	int		  profile;	/* PROTO_PROFILE_* */
	int64_t		  timeout_ms;	/* 0: none */
	int64_t		  yield_ms;	/* clamped to PROTO_WAIT_MAX_MS */
	int64_t		  wait_ms;	/* clamped to PROTO_WAIT_MAX_MS */
	int64_t		  idle_ms;	/* clamped to PROTO_WAIT_MAX_MS */
	size_t		  max_bytes;
	int		  head_tail;	/* over max_bytes: its head and tail */
	size_t		  max_bytes_stdout;	/* head_tail's budget of each */
	size_t		  max_bytes_stderr;	/* stream; UNSET: max_bytes */
	int		  strip_ansi;	/* escape sequences left out */
	int		  encoding;	/* PROTO_ENC_*, UNSET if not given */
	size_t		  ring_bytes;
	char		  id[PROTO_ID_MAX + 1];	/* "" when not given */
	uint64_t	  limit_memory;	/* limits.memory_bytes; 0: the default */
	uint64_t	  limit_pids;	/* limits.pids; 0: the default */
	uint64_t	  limit_cpu;	/* limits.cpu_percent; 0: the default */
};
int	proto_parse_create(const char *body, size_t len,
	    const struct proto_limits *, struct proto_create *, struct proto_err *);
/* Free what the struct owns and NULL it; safe after a failed parse. */
void	proto_create_free(struct proto_create *);
/* Free a NULL-terminated array of malloc'd strings and the array itself. */
void	proto_strv_free(char **);

/* PROTO_PROFILE_* for "default" or "noninteractive"; -1 when unknown. */
int	proto_profile_number(const char *);

/* Whether id matches [A-Za-z0-9._-]{1,64}. */
int	proto_id_valid(const char *id);

/*
 * POST /v1/sessions/{id}/stdin, as JSON or as a raw body plus a query.
 * proto_parse_stdin reads the JSON form: at most one of "data" (base64) and
 * "text" (a string, sent as its UTF-8 bytes); neither is 0 bytes (useful
 * with eof).  eof bool; yield_ms, wait_ms, idle_ms, max_bytes, head_tail,
 * max_bytes_stdout, max_bytes_stderr, strip_ansi as in create; offset >= 0
 * (-1 when not given): the stdin bytes the client believes were accepted
 * before this write.
 */
struct proto_stdin {
	uint8_t		*data;		/* malloc'd, or NULL when len is 0 */
	size_t		 len;
	int		 eof;
	int64_t		 yield_ms;
	int64_t		 wait_ms;
	int64_t		 idle_ms;
	size_t		 max_bytes;
	int		 head_tail;
	size_t		 max_bytes_stdout;	/* PROTO_MAX_BYTES_UNSET: */
	size_t		 max_bytes_stderr;	/* max_bytes */
	int		 strip_ansi;
	int		 encoding;	/* PROTO_ENC_*, UNSET if not given */
	int64_t		 offset;	/* -1: not given */
};
int	proto_parse_stdin(const char *body, size_t len, struct proto_stdin *,
	    struct proto_err *);
void	proto_stdin_free(struct proto_stdin *);

/* POST /v1/sessions/{id}/resize: rows and cols both required, 1..65535. */
int	proto_parse_resize(const char *body, size_t len, unsigned *rows,
	    unsigned *cols, struct proto_err *);

/* Which processes a signal reaches (proto_parse_signal's target). */
#define PROTO_TARGET_GROUP	0	/* the session's process group */
#define PROTO_TARGET_FOREGROUND	1	/* the PTY's foreground process group */

/*
 * POST /v1/sessions/{id}/signal: "SIGINT", "INT" or 2; any string
 * proto_signal_number() knows, or an integer 1..PROTO_SIGNAL_MAX.  The
 * optional "target" is "group" (the default) or "foreground"; *target gets
 * PROTO_TARGET_GROUP or PROTO_TARGET_FOREGROUND.
 */
int	proto_parse_signal(const char *body, size_t len, int *signo,
	    int *target, struct proto_err *);

/*
 * "SIGKILL" for 9; NULL for a number with no name.  Named: the Linux
 * signals SIGHUP..SIGSYS (1..31); realtime signals have no name here
 * (their SIGRTMIN offset depends on the C library).
 */
const char *proto_signal_name(int signo);
/*
 * 9 for "SIGKILL", "KILL" or "9" (case-sensitive names); -1 when unknown.
 * Also knows the aliases IOT, POLL and CLD, and "SIG<n>" / "<n>" for any
 * n in 1..PROTO_SIGNAL_MAX (so a rendered "SIG40" reads back).
 */
int	proto_signal_number(const char *);

/* The query string options of the session endpoints. */
struct proto_query {
	uint64_t	 cursor;	/* default 0 */
	int64_t		 wait_ms;	/* default 0, clamped */
	int64_t		 yield_ms;	/* default 0, clamped */
	size_t		 max_bytes;	/* default PROTO_MAX_BYTES_DEFAULT */
	int64_t		 grace_ms;	/* default -1: not given */
	int		 eof;		/* eof=true|1 */
	int64_t		 idle_ms;	/* default 0, clamped */
	int		 head_tail;	/* head_tail=true|1 */
	int		 port;		/* GET /v1/ports; default -1: not given */
	uint64_t	 limit;		/* GET /v1/sessions: 0 all */
	uint64_t	 after;		/* ... its "next", default 0 */
	size_t		 max_bytes_stdout;	/* default PROTO_MAX_BYTES_UNSET */
	size_t		 max_bytes_stderr;	/* default PROTO_MAX_BYTES_UNSET */
	int		 strip_ansi;	/* strip_ansi=true|1 */
	int		 encoding;	/* encoding=base64|text; default
					   PROTO_ENC_UNSET */
	int64_t		 offset;	/* stdin's offset; default -1 */
};
/*
 * Parse a raw query string (no '?'; NULL or "" gives the defaults).  Keys
 * and values are percent-decoded ('+' is a space); bad percent-encoding is
 * 400 invalid_request.  Unknown keys are ignored; a repeated key: the last
 * one wins.  cursor: decimal digits fitting 64 bits, else 400
 * invalid_cursor.  eof, head_tail and strip_ansi: true, false, 1, 0 or
 * bare.  wait_ms, yield_ms, idle_ms, max_bytes, max_bytes_stdout,
 * max_bytes_stderr, offset, grace_ms: decimal digits,
 * else 400 invalid_request naming the key; values beyond 64 bits saturate,
 * then wait_ms, yield_ms and idle_ms are clamped to PROTO_WAIT_MAX_MS and
 * max_bytes to PROTO_MAX_BYTES_MAX; a grace_ms above PROTO_GRACE_MAX_MS is
 * 400 invalid_request; port: 1..65535, else 400 invalid_request.  limit:
 * decimal digits (saturating; 0: no limit), else 400 invalid_request;
 * after: as cursor (400 invalid_cursor).  A
 * value of ours longer than 32 bytes (decoded) is
 * refused like a non-number.  eof: true, false, 1 or 0; a bare "eof" is
 * true.
 */
int	proto_parse_query(const char *query, struct proto_query *,
	    struct proto_err *);

/*
 * A session, as the renderer sees it.  NULL strings render as null, a NULL
 * argv as [].  exit_code, signo and ended_ms are read only when exited: a
 * running session renders exit_code, signal and ended_at as null.
 */
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
	int		 oom_killed;	/* the session's cgroup saw an OOM kill */
	int64_t		 cpu_ms;	/* usage; -1: null (no such file) */
	int64_t		 memory_peak_bytes;
	int64_t		 pids_peak;
	uint64_t	 stdin_bytes;	/* stdin accepted so far */
	const char	*tag;		/* envd's tag: "labels" {"tag"}, or NULL */
};

/*
 * Output as JSON text (encoding=text; text.c).  proto_text_len: the bytes
 * p[0..len) take JSON-escaped (no quotes; a control byte takes up to 6),
 * SIZE_MAX when they are not valid UTF-8 (overlong forms, surrogates and
 * sequences cut short are not).  proto_text_write: write them escaped into
 * out (proto_text_len bytes of room), return the bytes written.
 * proto_text_encode: append them escaped to b, or return -1 (nothing
 * appended) when they are not UTF-8.
 */
size_t	proto_text_len(const uint8_t *p, size_t len);
size_t	proto_text_write(char *out, const uint8_t *p, size_t len);
int	proto_text_encode(struct proto_buf *, const uint8_t *p, size_t len);
/* Length of the valid UTF-8 sequence at p (n bytes left; 1 for ASCII), 0
   if it is not one (overlong, surrogate, past U+10FFFF, cut short). */
size_t	proto_utf8_len(const uint8_t *p, size_t n);
/*
 * The largest cut at or before end of p[0..end) that splits no UTF-8
 * sequence (end itself when p[end-1] ends one, or when the bytes before end
 * are not the start of a valid-looking sequence: only real sequences are
 * kept whole, at most 3 bytes go back).
 */
size_t	proto_utf8_cut(const uint8_t *p, size_t end);
/* Bytes at the start of p[0..len) that are whole valid UTF-8 sequences. */
size_t	proto_utf8_valid(const uint8_t *p, size_t len);
/*
 * Whether p[0..len) is not UTF-8 only at its ends (a read that split a
 * character): *lead continuation bytes first, *tail bytes of a character
 * cut short last (at most 3 each), valid UTF-8 between, not empty.  A
 * text window renders such a chunk as pieces: base64, text, base64.
 */
int	proto_text_ends(const uint8_t *p, size_t len, size_t *lead,
	    size_t *tail);
/*
 * Cursors inside a chunk (API.md, "Output window").  A window that ends
 * inside chunk k after j bytes of it answers cursor j * 2^32 + k (k below
 * 2^32, j below 2^21: below 2^53, exact in a double); proto_cursor_make
 * gives it, 0 when k or j are out of that range (the window then takes the
 * chunk whole).  proto_cursor_split reads a cursor back: *after, the id
 * the next window follows, *skip, the bytes of chunk *after + 1 already
 * read (0 for a plain id).  With newest at or past 2^32 every cursor is
 * a plain id.
 */
void	proto_cursor_split(uint64_t cursor, uint64_t newest, uint64_t *after,
	    size_t *skip);
uint64_t proto_cursor_make(uint64_t id, size_t taken);

/* Output encodings of a JSON read (encoding=). */
#define PROTO_ENC_BASE64	0	/* "data": base64 */
#define PROTO_ENC_TEXT		1	/* "text" when valid UTF-8, else "data" */
#define PROTO_ENC_UNSET		(-1)	/* not given: the sandbox's default */
/* PROTO_ENC_* of "base64" or "text" (len bytes), or -1. */
int	proto_encoding(const char *s, size_t len);

/* One output chunk to render. */
struct proto_chunk {
	uint64_t	 id;
	uint64_t	 offset;
	const uint8_t	*data;
	uint32_t	 len;
	int		 stream;	/* PROTO_STREAM_*; others: "unknown" */
};

/* An output window to render after a session's fields. */
struct proto_window {
	const struct proto_chunk *chunks;
	size_t		 n;
	uint64_t	 cursor;
	uint64_t	 dropped;
	int		 more;
	int		 eof;
	int		 head_tail;	/* render truncated_bytes and _cursor */
	uint64_t	 truncated_bytes;	/* left out between head and tail */
	uint64_t	 truncated_cursor;	/* the cursor that reads them */
	size_t		 truncated_at;	/* chunks before the first cut */
	int		 per_stream;	/* head_tail on pipes: render
					   truncated_bytes_stdout/_stderr */
	uint64_t	 truncated_stream[3];	/* by PROTO_STREAM_* */
	size_t		 gap_at[3];	/* chunks before each stream's cut,
					   SIZE_MAX: none (head_tail) */
	int		 encoding;	/* PROTO_ENC_* */
	size_t		 skip;		/* bytes of the first chunk read
					   before the window (a cursor
					   inside it) */
};

/*
 * Render a session object; with w, the output window's fields follow in the
 * same object; with written >= 0, a "written" field leads it.  Field order
 * is API.md's: id, pid, tty, rows, cols, argv, cwd, user, state, exit_code,
 * signal, timed_out, started_at, ended_at, last_chunk, bytes_out,
 * stdin_bytes; then
 * output, cursor, dropped_chunks, more, eof; with head_tail,
 * truncated_bytes (and per_stream: truncated_bytes_stdout,
 * truncated_bytes_stderr), truncated_cursor.  A signal with no name renders
 * as "SIG<n>" (e.g. "SIG40").  Compact JSON, no trailing newline.  Strings
 * are escaped as JSON; bytes that are not valid UTF-8 become \ufffd.
 */
/* Bytes a window's fields take in an answer, at most. */
size_t	proto_window_len(const struct proto_window *);
void	proto_render_session(struct proto_buf *, const struct proto_session *,
	    const struct proto_window *w, int64_t written);
/* One chunk object of a window: {"id", "stream", "offset", "data"}. */
void	proto_render_chunk(struct proto_buf *, const struct proto_chunk *);
/* The same, "text" in place of "data" when encoding is text and it is UTF-8. */
void	proto_render_chunk_enc(struct proto_buf *, const struct proto_chunk *,
	    int encoding);
/* A stdin answer: "written", then "duplicate" when set, then the rest. */
void	proto_render_stdin(struct proto_buf *, const struct proto_session *,
	    const struct proto_window *w, int64_t written, int duplicate);
/*
 * The same answer in three parts, for a window rendered as it is sent: the
 * object up to its "output" array ("{", "written" when >= 0, "duplicate"
 * when set, the session's fields, ",\"output\":["); each chunk object
 * (after a comma unless first; "text" as proto_render_stdin() does it for
 * encoding); then the array's end, the window's fields after it (w's
 * chunks are not looked at) and the object's end.
 */
void	proto_render_window_open(struct proto_buf *,
	    const struct proto_session *, int64_t written, int duplicate);
void	proto_render_window_chunk(struct proto_buf *,
	    const struct proto_chunk *, int encoding, int first);
void	proto_render_window_close(struct proto_buf *,
	    const struct proto_window *);
/* {"sessions": [...]} */
void	proto_render_session_list(struct proto_buf *,
	    const struct proto_session *, size_t n);
/* {"sessions": [...], "next": "NEXT"}, or without "next" when NULL. */
void	proto_render_session_page(struct proto_buf *,
	    const struct proto_session *, size_t n, const char *next);
/* {"error": {...}}, and with s a "session" member beside it. */
void	proto_render_error(struct proto_buf *, const struct proto_err *,
	    const struct proto_session *s);
/* {"error": {"code", "message", key: n}}: a figure the client acts on. */
void	proto_render_error_count(struct proto_buf *, const struct proto_err *,
	    const char *key, uint64_t n);
/*
 * "2026-12-02T11:00:00.000Z" into a 25-byte buffer (UTC; years outside
 * 0000..9999 are clamped to that range's ends).
 */
void	proto_format_time(int64_t unix_ms, char out[25]);

/* ---- files (files.c) ---------------------------------------------------- */

#define PROTO_PATH_MAX			4095	/* bytes of a path */
#define PROTO_URL_MAX			8192	/* bytes of a fetch url */
#define PROTO_STAT_MAX			1000	/* paths in one stat request */
#define PROTO_FETCH_TIMEOUT_DEFAULT_MS	60000
#define PROTO_FETCH_TIMEOUT_MAX_MS	86400000	/* 0: no deadline */

/*
 * Whether path[0..len) is a usable path: non-empty, absolute, without NUL,
 * at most PROTO_PATH_MAX bytes.  0, or -1 with 400 invalid_request naming
 * field.
 */
int	proto_path_check(const char *path, size_t len, const char *field,
	    struct proto_err *);
/* Octal permission bits ("0644", "644", "4755"; at most 07777); 0 or -1. */
int	proto_mode_parse(const char *, size_t, int *mode);

/*
 * The query of GET and PUT /v1/files: path (required, percent-decoded,
 * checked with proto_path_check), offset and length (decimal bytes),
 * mode (octal), mkdir (true, false, 1, 0, or bare: true), user (a name
 * or uid, 1..PROTO_USER_MAX bytes).  Unknown keys are ignored; a repeated
 * key: the last one wins.
 */
#define PROTO_USER_MAX			256	/* bytes of a files call's user */
struct proto_files_query {
	char		*path;		/* malloc'd */
	char		*user;		/* malloc'd, or NULL: agentd's */
	size_t		 path_len;
	uint64_t	 offset;	/* default 0 */
	uint64_t	 length;	/* default UINT64_MAX: to the end */
	int		 mode;		/* -1: not given */
	int		 mkdir;		/* default 0 */
};
int	proto_parse_files_query(const char *query, struct proto_files_query *,
	    struct proto_err *);
void	proto_files_query_free(struct proto_files_query *);

/*
 * POST /v1/files/stat: {"paths": [absolute path, ...], "user": U}, at most
 * 1000 paths; user as in proto_files_query.
 */
struct proto_stat_req {
	char		**paths;	/* malloc'd */
	size_t		  n;
	char		 *user;		/* malloc'd, or NULL: agentd's */
};
int	proto_parse_stat(const char *body, size_t len, struct proto_stat_req *,
	    struct proto_err *);
void	proto_stat_req_free(struct proto_stat_req *);

/* One result of a stat, as the renderer sees it. */
struct proto_stat {
	const char	*path;
	int		 exists;
	const char	*error;		/* "ENOENT" etc., when !exists */
	int		 type;		/* PROTO_FTYPE_* */
	uint64_t	 size;
	unsigned	 mode;		/* rendered as "%04o" of mode & 07777 */
	int64_t		 mtime_ms;	/* unix ms */
	unsigned long	 uid, gid;
	const char	*target;	/* a symlink's target, or NULL */
};
#define PROTO_FTYPE_FILE	0
#define PROTO_FTYPE_DIR		1
#define PROTO_FTYPE_SYMLINK	2
#define PROTO_FTYPE_OTHER	3
/*
 * {"results": [{"path", "exists": true, "type", "size", "mode", "mtime",
 * "uid", "gid"[, "target"]} | {"path", "exists": false, "error"}, ...]}
 */
void	proto_render_stat(struct proto_buf *, const struct proto_stat *,
	    size_t n);

/*
 * POST /v1/files/fetch.  url (required): http:// or https://, at most
 * PROTO_URL_MAX bytes, no spaces or control bytes; path (required,
 * absolute); mode: "0644" or an integer 0..07777; sha256: 64 hex digits;
 * timeout_ms: 0..PROTO_FETCH_TIMEOUT_MAX_MS (0: no deadline), default
 * PROTO_FETCH_TIMEOUT_DEFAULT_MS; ca_file: an absolute path; mkdir: bool;
 * user: as in proto_files_query.
 */
struct proto_fetch {
	char		*url;		/* malloc'd */
	char		*user;		/* malloc'd, or NULL: agentd's */
	char		*path;		/* malloc'd */
	char		*ca_file;	/* malloc'd, or NULL: the system's */
	int		 mode;		/* -1: not given */
	int		 mkdir;
	int		 have_sha256;
	uint8_t		 sha256[32];
	int64_t		 timeout_ms;
};
int	proto_parse_fetch(const char *body, size_t len, struct proto_fetch *,
	    struct proto_err *);
void	proto_fetch_free(struct proto_fetch *);

/* {"path": P, "size": N, "sha256": "<hex>"} */
void	proto_render_file(struct proto_buf *, const char *path, uint64_t size,
	    const uint8_t sha256[32]);
/* 64 lowercase hex digits and a NUL. */
void	proto_sha256_hex(const uint8_t sha256[32], char out[65]);

/*
 * POST /v1/sandbox/resumed (proto/sandbox.c).  An empty body, or {}: neither
 * field.  unix_ms: an integer 0..PROTO_UNIX_MS_MAX; entropy: standard
 * base64 of PROTO_ENTROPY_MIN..PROTO_ENTROPY_MAX bytes.  Other fields: 400.
 */
#define PROTO_ENTROPY_MIN	32		/* bytes */
#define PROTO_ENTROPY_MAX	512		/* bytes */
#define PROTO_UNIX_MS_MAX	253402300799999LL /* 9999-12-31T23:59:59.999Z */
struct proto_resumed {
	int64_t		 unix_ms;	/* -1: not given */
	uint8_t		 entropy[PROTO_ENTROPY_MAX];
	size_t		 entropy_len;	/* 0: not given */
};
int	proto_parse_resumed(const char *body, size_t len,
	    struct proto_resumed *, struct proto_err *);

#endif /* PROTO_H */
