/*
 * fuzz_proto.c -- libFuzzer harness for proto/: the first byte picks a
 * parser, the rest is its input.  Whatever parses is rendered back, and the
 * rendering must be JSON that jansson reads and that says the same thing:
 * a renderer bug aborts as surely as a parser crash.
 *
 * Selectors: 'c' create, 's' stdin, 'r' resize, 'k' signal, 'q' query,
 * 'b' base64, 'j' JSON string of raw bytes, 't' time, 'x' a window in
 * text and in base64 (the first byte of the rest cuts it into chunks, each
 * chunk a byte of cut points), decoded to the same bytes; any other byte picks
 * one of them by its value.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ansi.h"
#include "headtail.h"
#include "proto.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void	 must(int, const char *);
static json_t	*reparse(struct proto_buf *);
static struct proto_session base_session(void);
static void	 check_session(json_t *, const struct proto_session *);
static void	 check_error(const struct proto_err *);
static void	 fuzz_create(const char *, size_t);
static void	 fuzz_stdin(const char *, size_t);
static void	 fuzz_resize(const char *, size_t);
static void	 fuzz_signal(const char *, size_t);
static void	 fuzz_query(const char *, size_t);
static void	 fuzz_base64(const char *, size_t);
static void	 fuzz_string(const char *, size_t);
static void	 fuzz_time(const char *, size_t);
static void	 fuzz_ansi(const char *, size_t);
static void	 fuzz_headtail(const char *, size_t);
static void	 fuzz_text(const char *, size_t);

static const struct proto_limits lim = {
	.ring_bytes_default = 1u << 20,
	.ring_bytes_min = 4096,
	.ring_bytes_max = 64u << 20,
};

static char *const default_argv[] = { "/bin/true", NULL };

/* Abort with a message when a property does not hold. */
static void
must(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_proto: %s\n", what);
		abort();
	}
}

/*
 * Render p[0..n) cut into chunks as a window, in base64 and in text; both
 * must parse and give back every chunk's bytes, text only for UTF-8.
 */
static void
fuzz_text(const char *p, size_t n)
{
	struct proto_chunk	 c[64];
	struct proto_window	 w;
	struct proto_session	 s = base_session();
	struct proto_buf	 b = { 0 };
	json_error_t		 jerr;
	json_t			*o, *ch, *v, *out;
	uint8_t			*d;
	size_t			 nc = 0, at = 0, k, i, j, len, step, off;
	int			 enc;

	step = n > 0 ? (uint8_t)p[0] % 16 + 1 : 1;
	while (at < n && nc < 64) {
		k = nc + 1 < 64 ? step + (uint8_t)p[at] % 7 : n - at;
		if (k > n - at)
			k = n - at;
		c[nc].id = nc + 1;
		c[nc].offset = at;
		c[nc].data = (const uint8_t *)p + at;
		c[nc].len = (uint32_t)k;
		c[nc].stream = PROTO_STREAM_STDOUT;
		nc++;
		at += k;
	}
	for (enc = PROTO_ENC_BASE64; enc <= PROTO_ENC_TEXT; enc++) {
		memset(&w, 0, sizeof w);
		w.chunks = c;
		w.n = nc;
		w.encoding = enc;
		b.len = 0;
		proto_render_session(&b, &s, &w, -1);
		must(!b.oom, "oom");
		must(b.len <= proto_window_len(&w) + 4096, "window_len short");
		o = json_loadb(b.data, b.len, JSON_ALLOW_NUL, &jerr);
		must(o != NULL, "window does not parse");
		/* Each chunk whole, or in text its pieces, in order. */
		out = json_object_get(o, "output");
		for (i = 0, j = 0, off = 0; j < json_array_size(out); j++) {
			ch = json_array_get(out, j);
			must(i < nc, "more objects than chunks");
			must((uint64_t)json_integer_value(json_object_get(ch,
			    "offset")) == c[i].offset + off, "piece offset");
			if ((v = json_object_get(ch, "text")) != NULL) {
				must(enc == PROTO_ENC_TEXT, "text in base64");
				len = json_string_length(v);
				must(off + len <= c[i].len && memcmp(
				    json_string_value(v), c[i].data + off,
				    len) == 0, "text changed the bytes");
			} else {
				v = json_object_get(ch, "data");
				must(v != NULL && json_is_string(v), "no data");
				must(proto_b64_decode(json_string_value(v),
				    json_string_length(v), &d, &len) == 0 &&
				    off + len <= c[i].len && (len == 0 ||
				    memcmp(d, c[i].data + off, len) == 0),
				    "base64 changed the bytes");
				free(d);
				must(enc == PROTO_ENC_BASE64 || len <= 3 ||
				    proto_text_len(c[i].data, c[i].len) ==
				    SIZE_MAX, "UTF-8 as data");
			}
			must(enc == PROTO_ENC_TEXT || len == c[i].len,
			    "a base64 chunk in pieces");
			if ((off += len) == c[i].len) {
				i++;
				off = 0;
			}
		}
		must(i == nc || (i == nc - 1 && c[i].len == 0), "chunks missing");
		json_decref(o);
	}
	proto_buf_free(&b);
}

/* Parse a rendered buffer back; it must be a JSON object. */
static json_t *
reparse(struct proto_buf *b)
{
	json_error_t	 jerr;
	json_t		*j;

	must(!b->oom, "render ran out of memory");
	j = json_loadb(b->data, b->len, JSON_REJECT_DUPLICATES, &jerr);
	if (j == NULL)
		fprintf(stderr, "%s: %.*s\n", jerr.text,
		    (int)(b->len > 2000 ? 2000 : b->len), b->data);
	must(j != NULL && json_is_object(j), "rendered JSON does not parse");
	return (j);
}

/* A plain running session to vary. */
static struct proto_session
base_session(void)
{
	struct proto_session s = {
		.id = "fuzz", .pid = 1, .tty = 0, .rows = 24, .cols = 80,
		.argv = default_argv, .cwd = "/", .user = "root",
		.exited = 0, .started_ms = 0, .ended_ms = -1,
	};

	return (s);
}

/* Check that a rendered session says what s says. */
static void
check_session(json_t *j, const struct proto_session *s)
{
	json_t	*a;
	size_t	 i;

	must(json_is_string(json_object_get(j, "id")) &&
	    strcmp(json_string_value(json_object_get(j, "id")), s->id) == 0,
	    "id differs");
	must(json_integer_value(json_object_get(j, "rows")) == s->rows &&
	    json_integer_value(json_object_get(j, "cols")) == s->cols,
	    "rows/cols differ");
	a = json_object_get(j, "argv");
	must(json_is_array(a), "argv is not an array");
	for (i = 0; s->argv[i] != NULL; i++)
		must(json_is_string(json_array_get(a, i)) &&
		    strcmp(json_string_value(json_array_get(a, i)),
		    s->argv[i]) == 0, "argv differs");
	must(json_array_size(a) == i, "argv length differs");
	must(s->cwd == NULL ? json_is_null(json_object_get(j, "cwd")) :
	    strcmp(json_string_value(json_object_get(j, "cwd")), s->cwd) == 0,
	    "cwd differs");
	must(json_object_size(j) >= 16, "fields missing");
}

/* A failed parse must have a status, a code, and render as JSON. */
static void
check_error(const struct proto_err *e)
{
	struct proto_buf	 b = { 0 };
	struct proto_session	 s = base_session();
	json_t			*j;

	must(e->status == 400 || e->status == 500, "odd status");
	must(e->code != NULL && e->message[0] != '\0', "no code or message");
	proto_render_error(&b, e, &s);
	j = reparse(&b);
	must(strcmp(json_string_value(json_object_get(json_object_get(j,
	    "error"), "code")), e->code) == 0, "error code differs");
	json_decref(j);
	proto_buf_free(&b);
}

/* create: render the parsed request as a session. */
static void
fuzz_create(const char *p, size_t n)
{
	struct proto_create	 c;
	struct proto_err	 e;
	struct proto_session	 s = base_session();
	struct proto_buf	 b = { 0 };
	json_t			*j;

	if (proto_parse_create(p, n, &lim, &c, &e) != 0) {
		must(c.argv == NULL && c.env == NULL && c.cwd == NULL &&
		    c.user == NULL, "failed parse left memory");
		check_error(&e);
		return;
	}
	must(c.argv != NULL && c.argv[0] != NULL, "no argv");
	must(c.rows >= 1 && c.rows <= 65535 && c.cols >= 1 &&
	    c.cols <= 65535, "rows/cols out of range");
	must(c.yield_ms >= 0 && c.yield_ms <= PROTO_WAIT_MAX_MS &&
	    c.wait_ms >= 0 && c.wait_ms <= PROTO_WAIT_MAX_MS &&
	    c.max_bytes <= PROTO_MAX_BYTES_MAX && c.timeout_ms >= 0,
	    "numbers out of range");
	must(c.ring_bytes >= lim.ring_bytes_min &&
	    c.ring_bytes <= lim.ring_bytes_max, "ring_bytes out of range");
	must(c.id[0] == '\0' || proto_id_valid(c.id), "bad id accepted");
	for (size_t i = 0; c.env != NULL && c.env[i] != NULL; i++)
		must(strchr(c.env[i], '=') != NULL && c.env[i][0] != '=',
		    "bad env entry");
	if (c.id[0] != '\0')
		s.id = c.id;
	s.argv = c.argv;
	s.cwd = c.cwd;
	s.user = c.user;
	s.tty = c.tty;
	s.rows = c.rows;
	s.cols = c.cols;
	proto_render_session(&b, &s, NULL, -1);
	j = reparse(&b);
	check_session(j, &s);
	json_decref(j);
	proto_buf_free(&b);
	proto_create_free(&c);
}

/* stdin: render the data as an output chunk and decode it back. */
static void
fuzz_stdin(const char *p, size_t n)
{
	struct proto_stdin	 in;
	struct proto_err	 e;
	struct proto_session	 s = base_session();
	struct proto_chunk	 ch;
	struct proto_window	 w = { 0 };
	struct proto_buf	 b = { 0 };
	json_t			*j, *d;
	uint8_t			*out;
	size_t			 outlen;

	if (proto_parse_stdin(p, n, &in, &e) != 0) {
		must(in.data == NULL, "failed parse left memory");
		check_error(&e);
		return;
	}
	must((in.data == NULL) == (in.len == 0), "data/len disagree");
	ch.id = 1;
	ch.offset = 0;
	ch.data = in.data;
	ch.len = (uint32_t)in.len;
	ch.stream = (int)(in.len % 3);
	w.chunks = &ch;
	w.n = 1;
	w.cursor = 1;
	w.eof = in.eof;
	proto_render_session(&b, &s, &w, (int64_t)in.len);
	j = reparse(&b);
	d = json_object_get(json_array_get(json_object_get(j, "output"), 0),
	    "data");
	must(json_is_string(d), "no data");
	must(proto_b64_decode(json_string_value(d), json_string_length(d),
	    &out, &outlen) == 0, "rendered base64 does not decode");
	must(outlen == in.len && (outlen == 0 ||
	    memcmp(out, in.data, outlen) == 0), "data differs");
	free(out);
	json_decref(j);
	proto_buf_free(&b);
	proto_stdin_free(&in);
}

/* resize: render a tty session of that size. */
static void
fuzz_resize(const char *p, size_t n)
{
	struct proto_err	 e;
	struct proto_session	 s = base_session();
	struct proto_buf	 b = { 0 };
	unsigned		 rows, cols;
	json_t			*j;

	if (proto_parse_resize(p, n, &rows, &cols, &e) != 0) {
		check_error(&e);
		return;
	}
	must(rows >= 1 && rows <= 65535 && cols >= 1 && cols <= 65535,
	    "size out of range");
	s.tty = 1;
	s.rows = rows;
	s.cols = cols;
	proto_render_session(&b, &s, NULL, -1);
	j = reparse(&b);
	check_session(j, &s);
	json_decref(j);
	proto_buf_free(&b);
}

/* signal: render a session killed by it; its name must read back. */
static void
fuzz_signal(const char *p, size_t n)
{
	struct proto_err	 e;
	struct proto_session	 s = base_session();
	struct proto_buf	 b = { 0 };
	json_t			*j, *v;
	char			*str;
	int			 signo, target;

	if ((str = malloc(n + 1)) != NULL) {
		memcpy(str, p, n);
		str[n] = '\0';
		signo = proto_signal_number(str);
		must(signo == -1 || (signo >= 1 && signo <= PROTO_SIGNAL_MAX),
		    "signal number out of range");
		free(str);
	}
	if (proto_parse_signal(p, n, &signo, &target, &e) != 0) {
		check_error(&e);
		return;
	}
	must(signo >= 1 && signo <= PROTO_SIGNAL_MAX, "signal out of range");
	must(target == PROTO_TARGET_GROUP || target == PROTO_TARGET_FOREGROUND,
	    "signal target out of range");
	s.exited = 1;
	s.signo = signo;
	s.exit_code = 128 + signo;
	s.ended_ms = 1;
	proto_render_session(&b, &s, NULL, -1);
	j = reparse(&b);
	v = json_object_get(j, "signal");
	must(json_is_string(v) && proto_signal_number(json_string_value(v)) ==
	    signo, "signal name does not read back");
	json_decref(j);
	proto_buf_free(&b);
}

/* query: parse, then render a window with its numbers. */
static void
fuzz_query(const char *p, size_t n)
{
	struct proto_query	 q;
	struct proto_err	 e;
	struct proto_session	 s = base_session();
	struct proto_window	 w = { 0 };
	struct proto_buf	 b = { 0 };
	json_t			*j;
	char			*str;

	if ((str = malloc(n + 1)) == NULL)
		return;
	memcpy(str, p, n);
	str[n] = '\0';
	if (proto_parse_query(str, &q, &e) != 0) {
		must(strcmp(e.code, "invalid_cursor") == 0 ||
		    strcmp(e.code, "invalid_request") == 0, "odd query code");
		check_error(&e);
		free(str);
		return;
	}
	free(str);
	must(q.wait_ms >= 0 && q.wait_ms <= PROTO_WAIT_MAX_MS &&
	    q.yield_ms >= 0 && q.yield_ms <= PROTO_WAIT_MAX_MS &&
	    q.max_bytes <= PROTO_MAX_BYTES_MAX && q.grace_ms >= -1 &&
	    (q.eof == 0 || q.eof == 1) && q.idle_ms >= 0 &&
	    q.idle_ms <= PROTO_WAIT_MAX_MS &&
	    (q.head_tail == 0 || q.head_tail == 1) &&
	    (q.strip_ansi == 0 || q.strip_ansi == 1) && q.offset >= -1 &&
	    (q.max_bytes_stdout <= PROTO_MAX_BYTES_MAX ||
	    q.max_bytes_stdout == PROTO_MAX_BYTES_UNSET) &&
	    (q.max_bytes_stderr <= PROTO_MAX_BYTES_MAX ||
	    q.max_bytes_stderr == PROTO_MAX_BYTES_UNSET), "query out of range");
	/* jansson reads integers up to INT64_MAX only. */
	w.cursor = q.cursor & INT64_MAX;
	w.dropped = q.grace_ms < 0 ? 0 : (uint64_t)q.grace_ms;
	w.eof = q.eof;
	w.head_tail = q.head_tail;
	w.truncated_bytes = (uint64_t)q.idle_ms;
	w.truncated_cursor = q.max_bytes;
	proto_render_session(&b, &s, &w, q.wait_ms);
	j = reparse(&b);
	must(!q.head_tail || (json_integer_value(json_object_get(j,
	    "truncated_bytes")) == q.idle_ms && (q.idle_ms == 0 ?
	    json_is_null(json_object_get(j, "truncated_cursor")) :
	    json_integer_value(json_object_get(j, "truncated_cursor")) ==
	    (json_int_t)q.max_bytes)), "truncated fields differ");
	must(q.head_tail || json_object_get(j, "truncated_bytes") == NULL,
	    "truncated fields without head_tail");
	json_decref(j);
	proto_buf_free(&b);
}

/* base64: decode then encode must round-trip, and encode then decode. */
static void
fuzz_base64(const char *p, size_t n)
{
	struct proto_buf	 b = { 0 };
	uint8_t			*out, *again;
	size_t			 outlen, againlen;

	proto_b64_encode(&b, p, n);
	must(b.len == proto_b64_encoded_len(n), "encoded length");
	must(proto_b64_decode(b.data, b.len, &out, &outlen) == 0 &&
	    outlen == n && (n == 0 || memcmp(out, p, n) == 0),
	    "encode/decode differs");
	free(out);
	if (proto_b64_decode(p, n, &out, &outlen) == 0) {
		b.len = 0;
		proto_b64_encode(&b, out, outlen);
		must(proto_b64_decode(b.data, b.len, &again, &againlen) == 0 &&
		    againlen == outlen && (outlen == 0 ||
		    memcmp(again, out, outlen) == 0), "decode/encode differs");
		free(again);
		free(out);
	}
	proto_buf_free(&b);
}

/* JSON strings of raw bytes must be JSON; valid UTF-8 must read back. */
static void
fuzz_string(const char *p, size_t n)
{
	struct proto_buf	 b = { 0 };
	json_error_t		 jerr;
	json_t			*j, *orig;
	char			*str;

	proto_buf_json_string(&b, p, n);
	must(!b.oom, "oom");
	j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	must(j != NULL && json_is_string(j), "escaped string does not parse");
	/* If jansson takes the bytes as a string, ours must mean the same. */
	if ((orig = json_stringn(p, n)) != NULL) {
		must(json_string_length(j) == n &&
		    memcmp(json_string_value(j), p, n) == 0,
		    "valid UTF-8 changed");
		json_decref(orig);
	}
	json_decref(j);
	proto_buf_free(&b);
	if ((str = malloc(n + 1)) != NULL) {
		memcpy(str, p, n);
		str[n] = '\0';
		if (proto_id_valid(str))
			must(strlen(str) >= 1 && strlen(str) <= PROTO_ID_MAX &&
			    strspn(str, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkl"
			    "mnopqrstuvwxyz0123456789._-") == strlen(str),
			    "bad id valid");
		free(str);
	}
}

/* Times: 24 characters, always, for any 64-bit value. */
static void
fuzz_time(const char *p, size_t n)
{
	char	out[25];
	int64_t	ms = 0;

	memcpy(&ms, p, n < sizeof ms ? n : sizeof ms);
	proto_format_time(ms, out);
	must(strlen(out) == 24 && out[4] == '-' && out[10] == 'T' &&
	    out[23] == 'Z', "bad time");
}

/*
 * The escape stripper: the same output whole or split in two at any byte,
 * never longer than its input, never an ESC in it.
 */
static void
fuzz_ansi(const char *p, size_t n)
{
	struct proto_ansi	 a;
	uint8_t			*one, *two;
	size_t			 n1, n2, at;

	if ((one = malloc(n + 1)) == NULL || (two = malloc(n + 1)) == NULL)
		abort();
	proto_ansi_init(&a);
	n1 = proto_ansi_strip(&a, (const uint8_t *)p, n, one);
	at = n > 0 ? (uint8_t)p[0] % (n + 1) : 0;
	proto_ansi_init(&a);
	n2 = proto_ansi_strip(&a, (const uint8_t *)p, at, two);
	n2 += proto_ansi_strip(&a, (const uint8_t *)p + at, n - at, two + n2);
	must(n1 <= n && n1 == n2 && memcmp(one, two, n1) == 0,
	    "ansi: a split changed the output");
	must(memchr(one, 0x1b, n1) == NULL, "ansi: an ESC was kept");
	free(one);
	free(two);
}

/*
 * The head and tail of each stream: budgets from the first 3 bytes, then
 * chunks (a header byte: the stream and a length).  Each stream's pieces
 * are its bytes at their offsets, kept plus left out is its total.
 */
static void
fuzz_headtail(const char *p, size_t n)
{
	static struct proto_chunk	 in[4096], out[4096];
	struct proto_headtail_result	 res;
	struct proto_headtail		*ht;
	uint64_t			 total[3] = { 0 }, kept[3] = { 0 };
	size_t				 budget[3], i, nin = 0, len, at = 3;
	int				 s;

	if (n < 3 || (ht = proto_headtail_new()) == NULL)
		return;
	for (i = 0; i < 3; i++)
		budget[i] = (uint8_t)p[i] * 3;
	while (at < n && nin < 4096) {
		s = (uint8_t)p[at] % 3;
		len = (uint8_t)p[at] / 3 % 40;
		at++;
		if (len > n - at)
			len = n - at;
		in[nin].id = nin + 1;
		in[nin].offset = (uint64_t)at;	/* bytes before it: the input's */
		in[nin].data = (const uint8_t *)p + at;
		in[nin].len = (uint32_t)len;
		in[nin].stream = s;
		total[s] += len;
		at += len;
		nin++;
	}
	proto_headtail_start(ht, budget, 24);
	for (i = 0; i < nin; i++)
		must(proto_headtail_feed(ht, &in[i]) == 0, "headtail: oom");
	proto_headtail_finish(ht, out, &res);
	must(res.n <= 24, "headtail: too many pieces");
	for (i = 0; i < res.n; i++) {
		must(out[i].stream >= 0 && out[i].stream < 3 &&
		    memcmp(out[i].data, p + out[i].offset, out[i].len) == 0,
		    "headtail: a piece's bytes are not its offset's");
		must(i == 0 || out[i].id > out[i - 1].id ||
		    (out[i].id == out[i - 1].id &&
		    out[i].offset > out[i - 1].offset), "headtail: order");
		kept[out[i].stream] += out[i].len;
	}
	for (s = 0; s < 3; s++) {
		must(kept[s] + res.truncated[s] == total[s],
		    "headtail: kept and left out are not the total");
		must(res.truncated[s] == 0 || kept[s] <= budget[s],
		    "headtail: over the budget");
	}
	proto_headtail_free(ht);
}

/* libFuzzer's entry point. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char sel[] = "csrkqbjtahx";
	const char	*p = (const char *)data + 1;
	size_t		 n = size - 1;
	char		 c;

	if (size == 0)
		return (0);
	json_object_seed(1);
	c = strchr(sel, data[0]) != NULL && data[0] != '\0' ? (char)data[0] :
	    sel[data[0] % (sizeof sel - 1)];
	switch (c) {
	case 'c':
		fuzz_create(p, n);
		break;
	case 's':
		fuzz_stdin(p, n);
		break;
	case 'r':
		fuzz_resize(p, n);
		break;
	case 'k':
		fuzz_signal(p, n);
		break;
	case 'q':
		fuzz_query(p, n);
		break;
	case 'b':
		fuzz_base64(p, n);
		break;
	case 'j':
		fuzz_string(p, n);
		break;
	case 'a':
		fuzz_ansi(p, n);
		break;
	case 'h':
		fuzz_headtail(p, n);
		break;
	case 'x':
		fuzz_text(p, n);
		break;
	default:
		fuzz_time(p, n);
		break;
	}
	return (0);
}
