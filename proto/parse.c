/*
 * parse.c -- JSON request bodies into C structs: create, stdin, resize and
 * signal.  jansson parses (duplicate keys rejected); the helpers here check
 * every field's type and range and name the field in each message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"
#include "proto.h"

#define PROTO_DIM_MAX		65535	/* rows and cols */
#define PROTO_RING_MIN		4096	/* bytes; used when limits are NULL */
#define PROTO_RING_DEFAULT	(1u << 20)	/* bytes; likewise */
#define PROTO_RING_MAX		(64u << 20)	/* bytes; likewise */

static json_t	*proto_field(json_t *, const char *);
static int	 proto_get_bool(json_t *, const char *, int *,
		    struct proto_err *);
static int	 proto_get_int(json_t *, const char *, int64_t, int64_t,
		    int64_t *, struct proto_err *);
static int	 proto_get_count(json_t *, const char *, int64_t, int64_t *,
		    struct proto_err *);
static int	 proto_get_encoding(json_t *, int *, struct proto_err *);
static int	 proto_get_string(json_t *, const char *, int,
		    const char **, size_t *, struct proto_err *);
static int	 proto_create_argv(json_t *, struct proto_create *,
		    struct proto_err *);
static int	 proto_create_env(json_t *, struct proto_create *,
		    struct proto_err *);
static int	 proto_create_strings(json_t *, struct proto_create *,
		    struct proto_err *);
static int	 proto_create_numbers(json_t *, const struct proto_limits *,
		    struct proto_create *, struct proto_err *);
static int	 proto_create_limits(json_t *, struct proto_create *,
		    struct proto_err *);

static const char *const proto_create_fields[] = {
	"cmd", "argv", "shell", "tty", "rows", "cols", "cwd", "env", "user",
	"stdin", "timeout_ms", "yield_ms", "wait_ms", "max_bytes", "ring_bytes",
	"id", "login", "idle_ms", "head_tail", "limits", "max_bytes_stdout",
	"max_bytes_stderr", "strip_ansi", "profile", "encoding", NULL
};
static const char *const proto_limits_fields[] = {
	"memory_bytes", "pids", "cpu_percent", NULL
};
static const char *const proto_stdin_fields[] = {
	"data", "text", "eof", "yield_ms", "wait_ms", "max_bytes", "idle_ms",
	"head_tail", "max_bytes_stdout", "max_bytes_stderr", "strip_ansi",
	"offset", "encoding", NULL
};
static const char *const proto_resize_fields[] = { "rows", "cols", NULL };
static const char *const proto_signal_fields[] = { "signal", "target", NULL };

/* Fill err for an allocation failure; return -1. */
int
proto_oom(struct proto_err *err)
{
	return (proto_fail(err, 500, "internal_error", "out of memory"));
}

/* Parse body as a JSON object holding only the known fields. */
int
proto_load(const char *body, size_t len, const char *const *known,
    json_t **out, struct proto_err *err)
{
	json_error_t	 jerr;
	json_t		*root, *v;
	const char	*key;
	size_t		 i;

	*out = NULL;
	if (body == NULL || len == 0)
		return (proto_fail(err, 400, "invalid_json",
		    "the body is empty; a JSON object is required"));
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
	    &jerr);
	if (root == NULL) {
		if (json_error_code(&jerr) == json_error_out_of_memory)
			return (proto_oom(err));
		return (proto_fail(err, 400, "invalid_json",
		    "%s (line %d, column %d)", jerr.text, jerr.line,
		    jerr.column));
	}
	if (!json_is_object(root)) {
		json_decref(root);
		return (proto_fail(err, 400, "invalid_request",
		    "body must be a JSON object"));
	}
	json_object_foreach(root, key, v) {
		for (i = 0; known[i] != NULL; i++) {
			if (strcmp(key, known[i]) == 0)
				break;
		}
		if (known[i] == NULL) {
			proto_fail(err, 400, "invalid_request",
			    "unknown field '%.*s'", PROTO_NAME_SHOWN, key);
			json_decref(root);
			return (-1);
		}
	}
	*out = root;
	return (0);
}

/* The value of an optional field; NULL when absent or null. */
static json_t *
proto_field(json_t *o, const char *key)
{
	json_t	*v = json_object_get(o, key);

	if (v == NULL || json_is_null(v))
		return (NULL);
	return (v);
}

/* Read a boolean field into *out if present. */
static int
proto_get_bool(json_t *o, const char *key, int *out, struct proto_err *err)
{
	json_t	*v;

	if ((v = proto_field(o, key)) == NULL)
		return (0);
	if (!json_is_boolean(v))
		return (proto_fail(err, 400, "invalid_request",
		    "field '%s' must be a boolean", key));
	*out = json_is_true(v);
	return (0);
}

/* Read an integer field in min..max into *out if present. */
static int
proto_get_int(json_t *o, const char *key, int64_t min, int64_t max,
    int64_t *out, struct proto_err *err)
{
	json_t		*v;
	json_int_t	 n;

	if ((v = proto_field(o, key)) == NULL)
		return (0);
	if (!json_is_integer(v) || (n = json_integer_value(v)) < min ||
	    n > max)
		return (proto_fail(err, 400, "invalid_request",
		    "field '%s' must be an integer in %lld..%lld", key,
		    (long long)min, (long long)max));
	*out = n;
	return (0);
}

/* Read an integer field >= 0, clamped to clamp, into *out if present. */
static int
proto_get_count(json_t *o, const char *key, int64_t clamp, int64_t *out,
    struct proto_err *err)
{
	json_t		*v;
	json_int_t	 n;

	if ((v = proto_field(o, key)) == NULL)
		return (0);
	if (!json_is_integer(v) || (n = json_integer_value(v)) < 0)
		return (proto_fail(err, 400, "invalid_request",
		    "field '%s' must be an integer >= 0", key));
	*out = n > clamp ? clamp : n;
	return (0);
}

/* Read "encoding" ("base64" or "text") into *out if present. */
static int
proto_get_encoding(json_t *o, int *out, struct proto_err *err)
{
	json_t	*v;
	int	 e = -1;

	if ((v = proto_field(o, "encoding")) == NULL)
		return (0);
	if (json_is_string(v))
		e = proto_encoding(json_string_value(v),
		    json_string_length(v));
	if (e < 0)
		return (proto_fail(err, 400, "invalid_request",
		    "field 'encoding' must be \"base64\" or \"text\""));
	*out = e;
	return (0);
}

/* Read a string field (non-empty unless empty_ok) into *out if present. */
static int
proto_get_string(json_t *o, const char *key, int empty_ok, const char **out,
    size_t *outlen, struct proto_err *err)
{
	json_t		*v;
	const char	*s;
	size_t		 len;

	if ((v = proto_field(o, key)) == NULL)
		return (0);
	if (!json_is_string(v))
		goto bad;
	s = json_string_value(v);
	len = json_string_length(v);
	/* jansson refuses \u0000 without JSON_ALLOW_NUL; check anyway. */
	if ((len == 0 && !empty_ok) || memchr(s, '\0', len) != NULL)
		goto bad;
	*out = s;
	if (outlen != NULL)
		*outlen = len;
	return (0);
bad:
	return (proto_fail(err, 400, "invalid_request",
	    empty_ok ? "field '%s' must be a string without NUL" :
	    "field '%s' must be a non-empty string without NUL", key));
}

/* Free a NULL-terminated array of strings. */
void
proto_strv_free(char **v)
{
	size_t	i;

	if (v == NULL)
		return;
	for (i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* Whether id matches [A-Za-z0-9._-]{1,64}. */
int
proto_id_valid(const char *id)
{
	size_t	i;
	char	c;

	if (id == NULL)
		return (0);
	for (i = 0; id[i] != '\0'; i++) {
		c = id[i];
		if (i >= PROTO_ID_MAX)
			return (0);
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return (0);
	}
	return (i > 0);
}

/*
 * Build c->argv from exactly one of "cmd" (with "shell", and "login" for a
 * login shell: shell -lc cmd) and "argv".
 */
static int
proto_create_argv(json_t *o, struct proto_create *c, struct proto_err *err)
{
	json_t		*cmd, *argv, *v;
	const char	*shell = PROTO_SHELL_DEFAULT, *s = NULL;
	size_t		 i, n;
	int		 login = 0;

	cmd = proto_field(o, "cmd");
	argv = proto_field(o, "argv");
	if ((cmd == NULL) == (argv == NULL))
		return (proto_fail(err, 400, "invalid_request",
		    "exactly one of 'cmd' and 'argv' is required"));
	if (proto_get_string(o, "shell", 0, &shell, NULL, err) != 0 ||
	    proto_get_bool(o, "login", &login, err) != 0)
		return (-1);
	if (login && cmd == NULL)
		return (proto_fail(err, 400, "invalid_request",
		    "field 'login' needs 'cmd' (a login shell runs a command)"));

	if (cmd != NULL) {
		if (proto_get_string(o, "cmd", 1, &s, NULL, err) != 0)
			return (-1);
		if ((c->argv = calloc(4, sizeof *c->argv)) == NULL)
			return (proto_oom(err));
		if ((c->argv[0] = strdup(shell)) == NULL ||
		    (c->argv[1] = strdup(login ? "-lc" : "-c")) == NULL ||
		    (c->argv[2] = strdup(s)) == NULL)
			return (proto_oom(err));
		return (0);
	}

	if (!json_is_array(argv) || (n = json_array_size(argv)) == 0)
		return (proto_fail(err, 400, "invalid_request",
		    "field 'argv' must be a non-empty array of strings"));
	if ((c->argv = calloc(n + 1, sizeof *c->argv)) == NULL)
		return (proto_oom(err));
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return (proto_fail(err, 400, "invalid_request",
			    "field 'argv' must be a non-empty array of strings"
			    " (element %zu is not a string)", i));
		if ((c->argv[i] = strdup(json_string_value(v))) == NULL)
			return (proto_oom(err));
	}
	return (0);
}

/* Build c->env ("KEY=VALUE" strings) from the "env" object. */
static int
proto_create_env(json_t *o, struct proto_create *c, struct proto_err *err)
{
	json_t		*env, *v;
	const char	*key, *val;
	size_t		 n, i = 0, klen, vlen;

	if ((env = proto_field(o, "env")) == NULL)
		return (0);
	if (!json_is_object(env))
		return (proto_fail(err, 400, "invalid_request",
		    "field 'env' must be an object of strings"));
	if ((n = json_object_size(env)) == 0)
		return (0);
	if ((c->env = calloc(n + 1, sizeof *c->env)) == NULL)
		return (proto_oom(err));
	json_object_foreach(env, key, v) {
		klen = strlen(key);
		if (klen == 0 || strchr(key, '=') != NULL)
			return (proto_fail(err, 400, "invalid_request",
			    "field 'env': name '%.*s' must be non-empty and"
			    " without '='", PROTO_NAME_SHOWN, key));
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return (proto_fail(err, 400, "invalid_request",
			    "field 'env': the value of '%.*s' must be a string",
			    PROTO_NAME_SHOWN, key));
		val = json_string_value(v);
		vlen = json_string_length(v);
		if ((c->env[i] = malloc(klen + 1 + vlen + 1)) == NULL)
			return (proto_oom(err));
		memcpy(c->env[i], key, klen);
		c->env[i][klen] = '=';
		memcpy(c->env[i] + klen + 1, val, vlen + 1);
		i++;
	}
	return (0);
}

/* Copy cwd, user and id. */
static int
proto_create_strings(json_t *o, struct proto_create *c, struct proto_err *err)
{
	json_t		*v;
	const char	*s;

	s = NULL;
	if (proto_get_string(o, "cwd", 0, &s, NULL, err) != 0)
		return (-1);
	if (s != NULL && (c->cwd = strdup(s)) == NULL)
		return (proto_oom(err));
	s = NULL;
	if (proto_get_string(o, "user", 0, &s, NULL, err) != 0)
		return (-1);
	if (s != NULL && (c->user = strdup(s)) == NULL)
		return (proto_oom(err));
	if ((v = proto_field(o, "id")) != NULL) {
		if (!json_is_string(v) ||
		    json_string_length(v) > PROTO_ID_MAX ||
		    !proto_id_valid(json_string_value(v)) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return (proto_fail(err, 400, "invalid_request",
			    "field 'id' must match [A-Za-z0-9._-]{1,64}"));
		memcpy(c->id, json_string_value(v), json_string_length(v) + 1);
	}
	s = NULL;
	if (proto_get_string(o, "profile", 0, &s, NULL, err) != 0)
		return (-1);
	if (s != NULL && (c->profile = proto_profile_number(s)) < 0)
		return (proto_fail(err, 400, "invalid_request",
		    "field 'profile' must be \"noninteractive\" or "
		    "\"default\""));
	return (0);
}

/* PROTO_PROFILE_* for a profile's name, -1 when unknown. */
int
proto_profile_number(const char *name)
{
	if (strcmp(name, "default") == 0)
		return (PROTO_PROFILE_DEFAULT);
	if (strcmp(name, "noninteractive") == 0)
		return (PROTO_PROFILE_NONINTERACTIVE);
	return (-1);
}

/* Read the booleans and numbers of a create request. */
static int
proto_create_numbers(json_t *o, const struct proto_limits *lim,
    struct proto_create *c, struct proto_err *err)
{
	int64_t	rows = PROTO_ROWS_DEFAULT, cols = PROTO_COLS_DEFAULT;
	int64_t	max_bytes = PROTO_MAX_BYTES_DEFAULT;
	int64_t	out_bytes = -1, err_bytes = -1;
	int64_t	ring, ring_min, ring_max;

	ring = lim != NULL ? (int64_t)lim->ring_bytes_default :
	    PROTO_RING_DEFAULT;
	ring_min = lim != NULL ? (int64_t)lim->ring_bytes_min : PROTO_RING_MIN;
	ring_max = lim != NULL ? (int64_t)lim->ring_bytes_max : PROTO_RING_MAX;
	if (lim != NULL && lim->ring_bytes_max > INT64_MAX)
		ring_max = INT64_MAX;

	if (proto_get_bool(o, "tty", &c->tty, err) != 0 ||
	    proto_get_int(o, "rows", 1, PROTO_DIM_MAX, &rows, err) != 0 ||
	    proto_get_int(o, "cols", 1, PROTO_DIM_MAX, &cols, err) != 0 ||
	    proto_get_bool(o, "stdin", &c->stdin_open, err) != 0 ||
	    proto_get_count(o, "timeout_ms", INT64_MAX, &c->timeout_ms,
	    err) != 0 ||
	    proto_get_count(o, "yield_ms", PROTO_WAIT_MAX_MS, &c->yield_ms,
	    err) != 0 ||
	    proto_get_count(o, "wait_ms", PROTO_WAIT_MAX_MS, &c->wait_ms,
	    err) != 0 ||
	    proto_get_count(o, "idle_ms", PROTO_WAIT_MAX_MS, &c->idle_ms,
	    err) != 0 ||
	    proto_get_bool(o, "head_tail", &c->head_tail, err) != 0 ||
	    proto_get_count(o, "max_bytes", PROTO_MAX_BYTES_MAX, &max_bytes,
	    err) != 0 ||
	    proto_get_count(o, "max_bytes_stdout", PROTO_MAX_BYTES_MAX,
	    &out_bytes, err) != 0 ||
	    proto_get_count(o, "max_bytes_stderr", PROTO_MAX_BYTES_MAX,
	    &err_bytes, err) != 0 ||
	    proto_get_bool(o, "strip_ansi", &c->strip_ansi, err) != 0 ||
	    proto_get_encoding(o, &c->encoding, err) != 0 ||
	    proto_get_int(o, "ring_bytes", ring_min, ring_max, &ring, err) != 0)
		return (-1);
	c->stdin_given = json_object_get(o, "stdin") != NULL &&
	    !json_is_null(json_object_get(o, "stdin"));
	c->rows = (unsigned)rows;
	c->cols = (unsigned)cols;
	c->max_bytes = (size_t)max_bytes;
	c->max_bytes_stdout = out_bytes < 0 ? PROTO_MAX_BYTES_UNSET :
	    (size_t)out_bytes;
	c->max_bytes_stderr = err_bytes < 0 ? PROTO_MAX_BYTES_UNSET :
	    (size_t)err_bytes;
	c->ring_bytes = (size_t)ring;
	return (0);
}

/*
 * Read "limits": an object of memory_bytes (0, or at least
 * PROTO_LIMIT_MEMORY_MIN), pids and cpu_percent, each an integer >= 0.
 */
static int
proto_create_limits(json_t *o, struct proto_create *c, struct proto_err *err)
{
	json_t		*l, *v;
	const char	*key;
	int64_t		 mem = 0, pids = 0, cpu = 0;
	size_t		 i;

	if ((l = proto_field(o, "limits")) == NULL || json_is_null(l))
		return (0);
	if (!json_is_object(l))
		return (proto_fail(err, 400, "invalid_request",
		    "field 'limits' must be an object"));
	json_object_foreach(l, key, v) {
		for (i = 0; proto_limits_fields[i] != NULL &&
		    strcmp(key, proto_limits_fields[i]) != 0; i++)
			;
		if (proto_limits_fields[i] == NULL)
			return (proto_fail(err, 400, "invalid_request",
			    "unknown field 'limits.%.*s'", PROTO_NAME_SHOWN,
			    key));
	}
	if (proto_get_int(l, "memory_bytes", 0, PROTO_LIMIT_MEMORY_MAX, &mem,
	    err) != 0 ||
	    proto_get_int(l, "pids", 0, PROTO_LIMIT_PIDS_MAX, &pids, err) != 0 ||
	    proto_get_int(l, "cpu_percent", 0, PROTO_LIMIT_CPU_MAX, &cpu,
	    err) != 0)
		return (-1);
	if (mem > 0 && mem < PROTO_LIMIT_MEMORY_MIN)
		return (proto_fail(err, 400, "invalid_request",
		    "field 'memory_bytes' must be 0 or at least %d bytes",
		    PROTO_LIMIT_MEMORY_MIN));
	c->limit_memory = (uint64_t)mem;
	c->limit_pids = (uint64_t)pids;
	c->limit_cpu = (uint64_t)cpu;
	return (0);
}

/* Parse and check a POST /v1/sessions body. */
int
proto_parse_create(const char *body, size_t len,
    const struct proto_limits *lim, struct proto_create *c,
    struct proto_err *err)
{
	json_t	*o;

	memset(c, 0, sizeof *c);
	c->stdin_open = 1;
	c->profile = PROTO_PROFILE_UNSET;
	c->encoding = PROTO_ENC_UNSET;
	if (proto_load(body, len, proto_create_fields, &o, err) != 0)
		return (-1);
	if (proto_create_argv(o, c, err) != 0 ||
	    proto_create_numbers(o, lim, c, err) != 0 ||
	    proto_create_strings(o, c, err) != 0 ||
	    proto_create_env(o, c, err) != 0 ||
	    proto_create_limits(o, c, err) != 0) {
		json_decref(o);
		proto_create_free(c);
		return (-1);
	}
	json_decref(o);
	return (0);
}

/* Free what a parsed create request owns. */
void
proto_create_free(struct proto_create *c)
{
	proto_strv_free(c->argv);
	proto_strv_free(c->env);
	free(c->cwd);
	free(c->user);
	c->argv = c->env = NULL;
	c->cwd = c->user = NULL;
}

/* Parse and check a JSON stdin body. */
int
proto_parse_stdin(const char *body, size_t len, struct proto_stdin *in,
    struct proto_err *err)
{
	json_t		*o;
	const char	*data = NULL, *text = NULL;
	size_t		 dlen = 0, tlen = 0;
	int64_t		 max_bytes = PROTO_MAX_BYTES_DEFAULT;
	int64_t		 out_bytes = -1, err_bytes = -1;

	memset(in, 0, sizeof *in);
	in->offset = -1;
	in->encoding = PROTO_ENC_UNSET;
	if (proto_load(body, len, proto_stdin_fields, &o, err) != 0)
		return (-1);
	if (proto_get_string(o, "data", 1, &data, &dlen, err) != 0 ||
	    proto_get_string(o, "text", 1, &text, &tlen, err) != 0 ||
	    proto_get_bool(o, "eof", &in->eof, err) != 0 ||
	    proto_get_count(o, "yield_ms", PROTO_WAIT_MAX_MS, &in->yield_ms,
	    err) != 0 ||
	    proto_get_count(o, "wait_ms", PROTO_WAIT_MAX_MS, &in->wait_ms,
	    err) != 0 ||
	    proto_get_count(o, "idle_ms", PROTO_WAIT_MAX_MS, &in->idle_ms,
	    err) != 0 ||
	    proto_get_bool(o, "head_tail", &in->head_tail, err) != 0 ||
	    proto_get_count(o, "max_bytes", PROTO_MAX_BYTES_MAX, &max_bytes,
	    err) != 0 ||
	    proto_get_count(o, "max_bytes_stdout", PROTO_MAX_BYTES_MAX,
	    &out_bytes, err) != 0 ||
	    proto_get_count(o, "max_bytes_stderr", PROTO_MAX_BYTES_MAX,
	    &err_bytes, err) != 0 ||
	    proto_get_bool(o, "strip_ansi", &in->strip_ansi, err) != 0 ||
	    proto_get_encoding(o, &in->encoding, err) != 0 ||
	    proto_get_count(o, "offset", INT64_MAX, &in->offset, err) != 0)
		goto fail;
	in->max_bytes = (size_t)max_bytes;
	in->max_bytes_stdout = out_bytes < 0 ? PROTO_MAX_BYTES_UNSET :
	    (size_t)out_bytes;
	in->max_bytes_stderr = err_bytes < 0 ? PROTO_MAX_BYTES_UNSET :
	    (size_t)err_bytes;
	if (data != NULL && text != NULL) {
		proto_fail(err, 400, "invalid_request",
		    "only one of 'data' and 'text' may be given");
		goto fail;
	}
	/* (Decoding also fails when out of memory; that too answers 400.) */
	if (data != NULL &&
	    proto_b64_decode(data, dlen, &in->data, &in->len) != 0) {
		proto_fail(err, 400, "invalid_request",
		    "field 'data' must be standard base64");
		goto fail;
	}
	if (text != NULL && tlen > 0) {
		if ((in->data = malloc(tlen)) == NULL) {
			proto_oom(err);
			goto fail;
		}
		memcpy(in->data, text, tlen);
		in->len = tlen;
	}
	json_decref(o);
	return (0);
fail:
	json_decref(o);
	proto_stdin_free(in);
	return (-1);
}

/* Free the data of a parsed stdin request. */
void
proto_stdin_free(struct proto_stdin *in)
{
	free(in->data);
	in->data = NULL;
	in->len = 0;
}

/* Parse and check a resize body: rows and cols, both required. */
int
proto_parse_resize(const char *body, size_t len, unsigned *rows,
    unsigned *cols, struct proto_err *err)
{
	json_t	*o;
	int64_t	 r = -1, c = -1;
	int	 rc = -1;

	if (proto_load(body, len, proto_resize_fields, &o, err) != 0)
		return (-1);
	if (proto_get_int(o, "rows", 1, PROTO_DIM_MAX, &r, err) != 0 ||
	    proto_get_int(o, "cols", 1, PROTO_DIM_MAX, &c, err) != 0)
		goto out;
	if (r < 0 || c < 0) {
		proto_fail(err, 400, "invalid_request", "field '%s' is required",
		    r < 0 ? "rows" : "cols");
		goto out;
	}
	*rows = (unsigned)r;
	*cols = (unsigned)c;
	rc = 0;
out:
	json_decref(o);
	return (rc);
}

/* Parse and check a signal body: a name or a number, and a target. */
int
proto_parse_signal(const char *body, size_t len, int *signo, int *target,
    struct proto_err *err)
{
	json_t		*o, *v;
	const char	*s, *t = NULL;
	int		 n = -1;

	if (proto_load(body, len, proto_signal_fields, &o, err) != 0)
		return (-1);
	if (proto_get_string(o, "target", 0, &t, NULL, err) != 0) {
		json_decref(o);
		return (-1);
	}
	if (t != NULL && strcmp(t, "group") != 0 &&
	    strcmp(t, "foreground") != 0) {
		json_decref(o);
		return (proto_fail(err, 400, "invalid_request",
		    "field 'target' must be \"group\" or \"foreground\""));
	}
	if ((v = proto_field(o, "signal")) == NULL) {
		json_decref(o);
		return (proto_fail(err, 400, "invalid_request",
		    "field 'signal' is required"));
	}
	if (json_is_integer(v) && json_integer_value(v) >= 1 &&
	    json_integer_value(v) <= PROTO_SIGNAL_MAX)
		n = (int)json_integer_value(v);
	else if (json_is_string(v) && (s = json_string_value(v)) != NULL &&
	    strlen(s) == json_string_length(v))
		n = proto_signal_number(s);
	if (n < 0) {
		json_decref(o);
		return (proto_fail(err, 400, "invalid_request",
		    "field 'signal' must be a signal name such as \"SIGTERM\""
		    " or a number in 1..%d", PROTO_SIGNAL_MAX));
	}
	*signo = n;
	*target = t != NULL && strcmp(t, "foreground") == 0 ?
	    PROTO_TARGET_FOREGROUND : PROTO_TARGET_GROUP;
	json_decref(o);
	return (0);
}
