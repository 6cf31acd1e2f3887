/*
 * render.c -- answers as JSON, written by hand into a proto_buf: session
 * objects, output windows, errors and lists.  No jansson here: an answer
 * with a megabyte of output is one pass of base64 straight into the buffer.
 */
#include <stdint.h>
#include <string.h>

#include "proto.h"

#define PROTO_CHUNK_OVERHEAD	96	/* bytes of JSON around one chunk's data */
#define PROTO_MS_MIN		(-62167219200000LL) /* 0000-01-01T00:00:00Z */
#define PROTO_MS_MAX		(253402300799999LL) /* 9999-12-31T23:59:59.999Z */

/* Append a string literal (a compile-time constant). */
#define LIT(b, s)	proto_buf_append((b), (s), sizeof(s) - 1)

static void	proto_put_u64(struct proto_buf *, uint64_t);
static void	proto_put_i64(struct proto_buf *, int64_t);
static void	proto_put_bool(struct proto_buf *, int);
static void	proto_put_usage(struct proto_buf *, int64_t);
static void	proto_put_str(struct proto_buf *, const char *);
static void	proto_put_time(struct proto_buf *, int64_t);
static void	proto_put_digits(char *, unsigned, unsigned);
static void	proto_session_fields(struct proto_buf *,
		    const struct proto_session *);
static void	proto_chunk_head(struct proto_buf *,
		    const struct proto_chunk *);
static int	proto_render_text(struct proto_buf *,
		    const struct proto_chunk *, int);
static void	proto_window_fields(struct proto_buf *,
		    const struct proto_window *);
static void	proto_window_tail(struct proto_buf *,
		    const struct proto_window *);
static void	proto_stdin_head(struct proto_buf *,
		    const struct proto_session *, int64_t, int);

static const char *const proto_streams[] = { "pty", "stdout", "stderr" };

/* Append an unsigned decimal. */
static void
proto_put_u64(struct proto_buf *b, uint64_t n)
{
	proto_buf_u64(b, n);
}

/* Append a signed decimal. */
static void
proto_put_i64(struct proto_buf *b, int64_t n)
{
	if (n < 0) {
		LIT(b, "-");
		proto_put_u64(b, (uint64_t)0 - (uint64_t)n);
	} else
		proto_put_u64(b, (uint64_t)n);
}

/* Append true or false. */
static void
proto_put_bool(struct proto_buf *b, int v)
{
	if (v)
		LIT(b, "true");
	else
		LIT(b, "false");
}

/* Append a usage figure, null when negative (the kernel lacks it). */
static void
proto_put_usage(struct proto_buf *b, int64_t v)
{
	if (v < 0)
		LIT(b, "null");
	else
		proto_put_u64(b, (uint64_t)v);
}

/* Append a C string as a JSON string, or null for NULL. */
static void
proto_put_str(struct proto_buf *b, const char *s)
{
	if (s == NULL)
		LIT(b, "null");
	else
		proto_buf_json_string(b, s, strlen(s));
}

/* Append a quoted ISO 8601 time. */
static void
proto_put_time(struct proto_buf *b, int64_t ms)
{
	char	t[25];

	proto_format_time(ms, t);
	LIT(b, "\"");
	proto_buf_append(b, t, 24);
	LIT(b, "\"");
}

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
size_t
proto_utf8_len(const uint8_t *p, size_t n)
{
	uint8_t	c = p[0], lo = 0x80, hi = 0xbf;
	size_t	len, i;

	if (c < 0x80)
		return (1);
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;	/* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f;	/* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;	/* no overlong forms */
		else if (c == 0xf4)
			hi = 0x8f;	/* nothing above U+10FFFF */
	} else
		return (0);
	if (n < len || p[1] < lo || p[1] > hi)
		return (0);
	for (i = 2; i < len; i++) {
		if (p[i] < 0x80 || p[i] > 0xbf)
			return (0);
	}
	return (len);
}

/* Append s[0..len) as a JSON string literal; invalid UTF-8 becomes U+FFFD. */
void
proto_buf_json_string(struct proto_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t	*p = (const uint8_t *)s;
	size_t		 i = 0, run, n;
	char		 esc[6];
	uint8_t		 c;

	LIT(b, "\"");
	while (i < len) {
		/* The longest run that needs no escape goes in one append. */
		for (run = i; run < len; run += n) {
			c = p[run];
			if (c < 0x20 || c == '"' || c == '\\')
				break;
			if ((n = proto_utf8_len(p + run, len - run)) == 0)
				break;
		}
		proto_buf_append(b, p + i, run - i);
		if ((i = run) >= len)
			break;
		c = p[i++];
		switch (c) {
		case '"':
			LIT(b, "\\\"");
			break;
		case '\\':
			LIT(b, "\\\\");
			break;
		case '\n':
			LIT(b, "\\n");
			break;
		case '\r':
			LIT(b, "\\r");
			break;
		case '\t':
			LIT(b, "\\t");
			break;
		case '\b':
			LIT(b, "\\b");
			break;
		case '\f':
			LIT(b, "\\f");
			break;
		default:
			if (c >= 0x80) {
				LIT(b, "\\ufffd");
				break;
			}
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			proto_buf_append(b, esc, sizeof esc);
			break;
		}
	}
	LIT(b, "\"");
}

/* Write n as exactly width decimal digits. */
static void
proto_put_digits(char *out, unsigned n, unsigned width)
{
	while (width-- > 0) {
		out[width] = (char)('0' + n % 10);
		n /= 10;
	}
}

/* "2026-12-02T11:00:00.000Z" (UTC) into out, NUL-terminated. */
void
proto_format_time(int64_t ms, char out[25])
{
	int64_t	days, rest, z, era, doe, yoe, doy, mp, y, m, d;

	if (ms < PROTO_MS_MIN)
		ms = PROTO_MS_MIN;
	if (ms > PROTO_MS_MAX)
		ms = PROTO_MS_MAX;
	days = ms / 86400000;
	rest = ms % 86400000;
	if (rest < 0) {
		rest += 86400000;
		days--;
	}
	/* Days to a civil date: Howard Hinnant's days_from_civil inverse. */
	z = days + 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y = yoe + era * 400 + (m <= 2);

	memcpy(out, "0000-00-00T00:00:00.000Z", 25);
	proto_put_digits(out, (unsigned)y, 4);
	proto_put_digits(out + 5, (unsigned)m, 2);
	proto_put_digits(out + 8, (unsigned)d, 2);
	proto_put_digits(out + 11, (unsigned)(rest / 3600000), 2);
	proto_put_digits(out + 14, (unsigned)(rest / 60000 % 60), 2);
	proto_put_digits(out + 17, (unsigned)(rest / 1000 % 60), 2);
	proto_put_digits(out + 20, (unsigned)(rest % 1000), 3);
}

/* Append a session's fields, without braces. */
static void
proto_session_fields(struct proto_buf *b, const struct proto_session *s)
{
	const char	*name;
	size_t		 i;

	LIT(b, "\"id\":");
	proto_put_str(b, s->id);
	LIT(b, ",\"pid\":");
	proto_put_i64(b, s->pid);
	LIT(b, ",\"tty\":");
	proto_put_bool(b, s->tty);
	LIT(b, ",\"rows\":");
	proto_put_u64(b, s->rows);
	LIT(b, ",\"cols\":");
	proto_put_u64(b, s->cols);
	LIT(b, ",\"argv\":[");
	for (i = 0; s->argv != NULL && s->argv[i] != NULL; i++) {
		if (i > 0)
			LIT(b, ",");
		proto_put_str(b, s->argv[i]);
	}
	LIT(b, "],\"cwd\":");
	proto_put_str(b, s->cwd);
	LIT(b, ",\"user\":");
	proto_put_str(b, s->user);
	if (s->exited) {
		LIT(b, ",\"state\":\"exited\",\"exit_code\":");
		proto_put_i64(b, s->exit_code);
		LIT(b, ",\"signal\":");
		if (s->signo <= 0)
			LIT(b, "null");
		else if ((name = proto_signal_name(s->signo)) != NULL)
			proto_put_str(b, name);
		else {
			LIT(b, "\"SIG");
			proto_put_u64(b, (unsigned)s->signo);
			LIT(b, "\"");
		}
	} else
		LIT(b, ",\"state\":\"running\",\"exit_code\":null,\"signal\":null");
	LIT(b, ",\"timed_out\":");
	proto_put_bool(b, s->timed_out);
	LIT(b, ",\"started_at\":");
	proto_put_time(b, s->started_ms);
	LIT(b, ",\"ended_at\":");
	if (s->exited && s->ended_ms >= 0)
		proto_put_time(b, s->ended_ms);
	else
		LIT(b, "null");
	LIT(b, ",\"last_chunk\":");
	proto_put_u64(b, s->last_chunk);
	LIT(b, ",\"bytes_out\":");
	proto_put_u64(b, s->bytes_out);
	LIT(b, ",\"oom_killed\":");
	proto_put_bool(b, s->oom_killed);
	LIT(b, ",\"usage\":{\"cpu_ms\":");
	proto_put_usage(b, s->cpu_ms);
	LIT(b, ",\"memory_peak_bytes\":");
	proto_put_usage(b, s->memory_peak_bytes);
	LIT(b, ",\"pids_peak\":");
	proto_put_usage(b, s->pids_peak);
	LIT(b, "}");
	LIT(b, ",\"stdin_bytes\":");
	proto_put_u64(b, s->stdin_bytes);
	if (s->tag != NULL) {
		LIT(b, ",\"labels\":{\"tag\":");
		proto_put_str(b, s->tag);
		LIT(b, "}");
	}
}

/* Bytes a window's fields take, at most. */
size_t
proto_window_len(const struct proto_window *w)
{
	size_t	i, need = 256, n, lead, tail;

	for (i = 0; i < w->n; i++) {
		n = SIZE_MAX;
		/* Text: exact (it may take up to 6 bytes per byte). */
		if (w->encoding == PROTO_ENC_TEXT)
			n = proto_text_len(w->chunks[i].data,
			    w->chunks[i].len);
		/* Split at its ends: base64, text, base64 pieces. */
		if (n == SIZE_MAX && w->encoding == PROTO_ENC_TEXT &&
		    proto_text_ends(w->chunks[i].data, w->chunks[i].len,
		    &lead, &tail))
			n = proto_b64_encoded_len(lead) + proto_b64_encoded_len(
			    tail) + proto_text_len(w->chunks[i].data + lead,
			    w->chunks[i].len - lead - tail) +
			    2 * PROTO_CHUNK_OVERHEAD;
		if (n == SIZE_MAX)
			n = proto_b64_encoded_len(w->chunks[i].len);
		n = n > SIZE_MAX - PROTO_CHUNK_OVERHEAD ? SIZE_MAX :
		    n + PROTO_CHUNK_OVERHEAD;
		need = need > SIZE_MAX - n ? SIZE_MAX : need + n;
	}
	return (need);
}

/* Append one chunk object: id, stream, offset, base64 data. */
void
proto_render_chunk(struct proto_buf *b, const struct proto_chunk *c)
{
	proto_render_chunk_enc(b, c, PROTO_ENC_BASE64);
}

/* Append one chunk object: id, stream, offset, then text or base64 data. */
void
proto_render_chunk_enc(struct proto_buf *b, const struct proto_chunk *c,
    int encoding)
{
	if (encoding == PROTO_ENC_TEXT && proto_render_text(b, c, 0) == 0)
		return;
	proto_chunk_head(b, c);
	LIT(b, ",\"data\":\"");
	proto_b64_encode(b, c->data, c->len);
	LIT(b, "\"}");
}

/* A chunk object's id, stream and offset, after its "{". */
static void
proto_chunk_head(struct proto_buf *b, const struct proto_chunk *c)
{
	LIT(b, "{\"id\":");
	proto_put_u64(b, c->id);
	LIT(b, ",\"stream\":\"");
	if (c->stream >= 0 && c->stream <= PROTO_STREAM_STDERR)
		proto_buf_append(b, proto_streams[c->stream],
		    strlen(proto_streams[c->stream]));
	else
		LIT(b, "unknown");
	LIT(b, "\",\"offset\":");
	proto_put_u64(b, c->offset);
}

/*
 * Append a chunk object with "text", escaped straight into the answer in
 * one pass; -1 with nothing appended when its bytes are not UTF-8.  With
 * pieces, one that is not only at its ends (proto_text_ends()) goes as its
 * pieces: base64, text, base64 (same id, each piece's own offset).
 */
static int
proto_render_text(struct proto_buf *b, const struct proto_chunk *c,
    int pieces)
{
	struct proto_chunk	p;
	size_t			mark = b->len, lead, tail;

	proto_chunk_head(b, c);
	LIT(b, ",\"text\":\"");
	if (proto_text_encode(b, c->data, c->len) == 0 || b->oom) {
		LIT(b, "\"}");
		return (0);
	}
	b->len = mark;
	if (!pieces || !proto_text_ends(c->data, c->len, &lead, &tail))
		return (-1);
	p = *c;
	if (lead > 0) {
		p.len = (uint32_t)lead;
		proto_render_chunk(b, &p);
		LIT(b, ",");
	}
	p.data = c->data + lead;
	p.offset = c->offset + lead;
	p.len = c->len - (uint32_t)(lead + tail);
	(void)proto_render_text(b, &p, 0);
	if (tail > 0) {
		LIT(b, ",");
		p.data += p.len;
		p.offset += p.len;
		p.len = (uint32_t)tail;
		proto_render_chunk(b, &p);
	}
	return (0);
}

/* Append an output window's fields, each after a comma. */
static void
proto_window_fields(struct proto_buf *b, const struct proto_window *w)
{
	size_t	i;

	/* Grow once for the whole window rather than chunk by chunk. */
	if (proto_buf_space(b, proto_window_len(w)) == NULL)
		return;

	LIT(b, ",\"output\":[");
	for (i = 0; i < w->n; i++)
		proto_render_window_chunk(b, &w->chunks[i], w->encoding,
		    i == 0);
	proto_window_tail(b, w);
}

/* One chunk of a window's "output", after a comma unless it is the first. */
void
proto_render_window_chunk(struct proto_buf *b, const struct proto_chunk *c,
    int encoding, int first)
{
	if (!first)
		LIT(b, ",");
	if (encoding != PROTO_ENC_TEXT || proto_render_text(b, c, 1) != 0)
		proto_render_chunk(b, c);
}

/* The end of a window's "output", and the fields after it. */
static void
proto_window_tail(struct proto_buf *b, const struct proto_window *w)
{
	LIT(b, "],\"cursor\":");
	proto_put_u64(b, w->cursor);
	LIT(b, ",\"dropped_chunks\":");
	proto_put_u64(b, w->dropped);
	LIT(b, ",\"more\":");
	proto_put_bool(b, w->more);
	LIT(b, ",\"eof\":");
	proto_put_bool(b, w->eof);
	if (w->head_tail) {
		LIT(b, ",\"truncated_bytes\":");
		proto_put_u64(b, w->truncated_bytes);
		if (w->per_stream) {
			LIT(b, ",\"truncated_bytes_stdout\":");
			proto_put_u64(b,
			    w->truncated_stream[PROTO_STREAM_STDOUT]);
			LIT(b, ",\"truncated_bytes_stderr\":");
			proto_put_u64(b,
			    w->truncated_stream[PROTO_STREAM_STDERR]);
		}
		LIT(b, ",\"truncated_cursor\":");
		if (w->truncated_bytes > 0)
			proto_put_u64(b, w->truncated_cursor);
		else
			LIT(b, "null");
	}
}

/*
 * A stdin answer cut in three, for a window rendered as it is sent: the
 * object up to its "output" array, each chunk, then the window's fields
 * after the array (w's chunks are not looked at) and the object's end.
 */
void
proto_render_window_open(struct proto_buf *b, const struct proto_session *s,
    int64_t written, int duplicate)
{
	proto_stdin_head(b, s, written, duplicate);
	LIT(b, ",\"output\":[");
}

void
proto_render_window_close(struct proto_buf *b, const struct proto_window *w)
{
	proto_window_tail(b, w);
	LIT(b, "}");
}

/* Render a session object, with a window and "written" when given. */
void
proto_render_session(struct proto_buf *b, const struct proto_session *s,
    const struct proto_window *w, int64_t written)
{
	proto_render_stdin(b, s, w, written, 0);
}

/* Render a stdin answer: "written", "duplicate", the session, the window. */
void
proto_render_stdin(struct proto_buf *b, const struct proto_session *s,
    const struct proto_window *w, int64_t written, int duplicate)
{
	proto_stdin_head(b, s, written, duplicate);
	if (w != NULL)
		proto_window_fields(b, w);
	LIT(b, "}");
}

/* "{", "written", "duplicate" and the session's fields. */
static void
proto_stdin_head(struct proto_buf *b, const struct proto_session *s,
    int64_t written, int duplicate)
{
	LIT(b, "{");
	if (written >= 0) {
		LIT(b, "\"written\":");
		proto_put_i64(b, written);
		LIT(b, ",");
	}
	if (duplicate)
		LIT(b, "\"duplicate\":true,");
	proto_session_fields(b, s);
}

/* Render {"sessions": [...]}. */
void
proto_render_session_list(struct proto_buf *b, const struct proto_session *s,
    size_t n)
{
	proto_render_session_page(b, s, n, NULL);
}

/* Render one page of the list, and the "next" to ask for the rest. */
void
proto_render_session_page(struct proto_buf *b, const struct proto_session *s,
    size_t n, const char *next)
{
	size_t	i;

	LIT(b, "{\"sessions\":[");
	for (i = 0; i < n; i++) {
		if (i > 0)
			LIT(b, ",");
		proto_render_session(b, &s[i], NULL, -1);
	}
	LIT(b, "]");
	if (next != NULL) {
		LIT(b, ",\"next\":");
		proto_put_str(b, next);
	}
	LIT(b, "}");
}

/* Render {"error": {"code", "message", key: n}}. */
void
proto_render_error_count(struct proto_buf *b, const struct proto_err *err,
    const char *key, uint64_t n)
{
	LIT(b, "{\"error\":{\"code\":");
	proto_put_str(b, err->code != NULL ? err->code : "internal_error");
	LIT(b, ",\"message\":");
	proto_buf_json_string(b, err->message,
	    strnlen(err->message, sizeof err->message));
	LIT(b, ",");
	proto_put_str(b, key);
	LIT(b, ":");
	proto_put_u64(b, n);
	LIT(b, "}}");
}

/* Render {"error": {"code", "message"}} and, with s, "session" beside it. */
void
proto_render_error(struct proto_buf *b, const struct proto_err *err,
    const struct proto_session *s)
{
	LIT(b, "{\"error\":{\"code\":");
	proto_put_str(b, err->code != NULL ? err->code : "internal_error");
	LIT(b, ",\"message\":");
	proto_buf_json_string(b, err->message,
	    strnlen(err->message, sizeof err->message));
	LIT(b, "}");
	if (s != NULL) {
		LIT(b, ",\"session\":");
		proto_render_session(b, s, NULL, -1);
	}
	LIT(b, "}");
}
