/*
 * files.c -- the data of the files endpoints: the query of GET/PUT
 * /v1/files, the bodies of POST /v1/files/stat and /v1/files/fetch, and
 * their answers.  Pure: no I/O.
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "internal.h"
#include "proto.h"

#define PROTO_FILES_KEY_MAX	16	/* bytes of a query key we know */
#define PROTO_FILES_VAL_MAX	32	/* bytes of a numeric query value */

static int	proto_files_u64(const char *, size_t, uint64_t *);
static int	proto_files_pair(const char *, size_t, const char *, size_t,
		    struct proto_files_query *, struct proto_err *);
static int	proto_files_string(json_t *, const char *, char **,
		    struct proto_err *);
static int	proto_files_json_mode(json_t *, const char *, int *,
		    struct proto_err *);

static const char *const proto_stat_fields[] = { "paths", "user", NULL };
static const char *const proto_fetch_fields[] = {
	"url", "path", "mode", "sha256", "timeout_ms", "ca_file", "mkdir",
	"user", NULL
};

/* Whether path is absolute, NUL-free and at most PROTO_PATH_MAX bytes. */
int
proto_path_check(const char *path, size_t len, const char *field,
    struct proto_err *err)
{
	if (len == 0)
		return (proto_fail(err, 400, "invalid_request",
		    "%s: a path is required", field));
	if (memchr(path, '\0', len) != NULL)
		return (proto_fail(err, 400, "invalid_request",
		    "%s: the path contains a NUL byte", field));
	if (len > PROTO_PATH_MAX)
		return (proto_fail(err, 400, "invalid_request",
		    "%s: the path is longer than %d bytes", field,
		    PROTO_PATH_MAX));
	if (path[0] != '/')
		return (proto_fail(err, 400, "invalid_request",
		    "%s: the path must be absolute, not '%.*s'", field,
		    PROTO_NAME_SHOWN, path));
	return (0);
}

/* "0644", "644" or "4755": octal permission bits into *mode; else -1. */
int
proto_mode_parse(const char *s, size_t len, int *mode)
{
	unsigned	v = 0;
	size_t		i;

	if (len == 0 || len > 5)
		return (-1);
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '7')
			return (-1);
		v = v * 8 + (unsigned)(s[i] - '0');
	}
	if (v > 07777)
		return (-1);
	*mode = (int)v;
	return (0);
}

/* Decimal digits fitting 64 bits into *out; else -1. */
static int
proto_files_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t	n = 0;
	size_t		i;

	if (len == 0)
		return (-1);
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return (-1);
		if (n > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return (-1);
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	*out = n;
	return (0);
}

/* Apply one raw key=value pair of a files query. */
static int
proto_files_pair(const char *k, size_t klen, const char *v, size_t vlen,
    struct proto_files_query *q, struct proto_err *err)
{
	char	 key[PROTO_FILES_KEY_MAX * 3 + 1], *val;	/* klen at most */
	size_t	 n, vn;
	int	 rc = 0;

	if (klen > PROTO_FILES_KEY_MAX * 3)
		return (0);		/* not one of ours */
	if (proto_unescape(k, klen, key, klen, &n) != 0)
		return (proto_fail(err, 400, "invalid_request",
		    "bad percent-encoding in the query"));
	key[n] = '\0';		/* decoding never grows: n <= klen */
	if (n > PROTO_FILES_KEY_MAX)
		return (0);
	if (strcmp(key, "path") != 0 && strcmp(key, "offset") != 0 &&
	    strcmp(key, "length") != 0 && strcmp(key, "mode") != 0 &&
	    strcmp(key, "mkdir") != 0 && strcmp(key, "user") != 0)
		return (0);		/* unknown keys are ignored */
	if ((val = malloc(vlen + 1)) == NULL)
		return (proto_oom(err));
	if (proto_unescape(v, vlen, val, vlen, &vn) != 0) {
		free(val);
		return (proto_fail(err, 400, "invalid_request",
		    "bad percent-encoding in the query"));
	}
	val[vn] = '\0';	/* a %00 stays in, for the checks to refuse */
	if (strcmp(key, "path") == 0) {
		free(q->path);
		q->path = val;
		q->path_len = vn;
		return (0);
	}
	if (strcmp(key, "user") == 0) {
		if (vn == 0 || vn > PROTO_USER_MAX ||
		    memchr(val, '\0', vn) != NULL) {
			free(val);
			return (proto_fail(err, 400, "invalid_request",
			    "user must be a user name or uid of 1..%d bytes",
			    PROTO_USER_MAX));
		}
		free(q->user);
		q->user = val;
		return (0);
	}
	if (strcmp(key, "offset") == 0) {
		if (vn > PROTO_FILES_VAL_MAX ||
		    proto_files_u64(val, vn, &q->offset) != 0)
			rc = proto_fail(err, 400, "invalid_request",
			    "offset must be a decimal number of bytes");
	} else if (strcmp(key, "length") == 0) {
		if (vn > PROTO_FILES_VAL_MAX ||
		    proto_files_u64(val, vn, &q->length) != 0)
			rc = proto_fail(err, 400, "invalid_request",
			    "length must be a decimal number of bytes");
	} else if (strcmp(key, "mode") == 0) {
		if (proto_mode_parse(val, vn, &q->mode) != 0)
			rc = proto_fail(err, 400, "invalid_request",
			    "mode must be octal permission bits such as 0644");
	} else {
		if (vn == 0 || strcmp(val, "true") == 0 || strcmp(val, "1") == 0)
			q->mkdir = 1;
		else if (strcmp(val, "false") == 0 || strcmp(val, "0") == 0)
			q->mkdir = 0;
		else
			rc = proto_fail(err, 400, "invalid_request",
			    "mkdir must be true or false");
	}
	free(val);
	return (rc);
}

int
proto_parse_files_query(const char *query, struct proto_files_query *q,
    struct proto_err *err)
{
	const char	*p, *end, *amp, *eq;

	memset(q, 0, sizeof *q);
	q->length = UINT64_MAX;
	q->mode = -1;
	p = query != NULL ? query : "";
	end = p + strlen(p);
	while (p < end) {
		if ((amp = memchr(p, '&', (size_t)(end - p))) == NULL)
			amp = end;
		if (amp > p) {
			eq = memchr(p, '=', (size_t)(amp - p));
			if (proto_files_pair(p, (size_t)((eq != NULL ? eq : amp) - p),
			    eq != NULL ? eq + 1 : amp,
			    eq != NULL ? (size_t)(amp - eq - 1) : 0, q, err) != 0)
				goto fail;
		}
		p = amp + 1;
	}
	if (q->path == NULL) {
		proto_fail(err, 400, "invalid_request",
		    "path: the query parameter path is required");
		goto fail;
	}
	if (proto_path_check(q->path, q->path_len, "path", err) != 0)
		goto fail;
	return (0);
fail:
	proto_files_query_free(q);
	return (-1);
}

void
proto_files_query_free(struct proto_files_query *q)
{
	free(q->path);
	free(q->user);
	q->path = q->user = NULL;
	q->path_len = 0;
}

/* A non-empty string field without NUL, malloc'd into *out if present. */
static int
proto_files_string(json_t *o, const char *key, char **out,
    struct proto_err *err)
{
	json_t	*v = json_object_get(o, key);
	size_t	 len;

	if (v == NULL || json_is_null(v))
		return (0);
	if (!json_is_string(v) || (len = json_string_length(v)) == 0 ||
	    memchr(json_string_value(v), '\0', len) != NULL)
		return (proto_fail(err, 400, "invalid_request",
		    "field '%s' must be a non-empty string without NUL", key));
	if ((*out = strdup(json_string_value(v))) == NULL)
		return (proto_oom(err));
	return (0);
}

/* A mode field: "0644" (octal) or an integer 0..07777. */
static int
proto_files_json_mode(json_t *o, const char *key, int *mode,
    struct proto_err *err)
{
	json_t		*v = json_object_get(o, key);
	json_int_t	 n;

	if (v == NULL || json_is_null(v))
		return (0);
	if (json_is_string(v) && proto_mode_parse(json_string_value(v),
	    json_string_length(v), mode) == 0)
		return (0);
	if (json_is_integer(v) && (n = json_integer_value(v)) >= 0 &&
	    n <= 07777) {
		*mode = (int)n;
		return (0);
	}
	return (proto_fail(err, 400, "invalid_request",
	    "field '%s' must be octal permission bits such as \"0644\"", key));
}

int
proto_parse_stat(const char *body, size_t len, struct proto_stat_req *r,
    struct proto_err *err)
{
	json_t		*root, *paths, *v;
	size_t		 i, n;

	memset(r, 0, sizeof *r);
	if (proto_load(body, len, proto_stat_fields, &root, err) != 0)
		return (-1);
	paths = json_object_get(root, "paths");
	if (paths == NULL || !json_is_array(paths)) {
		json_decref(root);
		return (proto_fail(err, 400, "invalid_request",
		    "field 'paths' must be an array of absolute paths"));
	}
	if ((n = json_array_size(paths)) > PROTO_STAT_MAX) {
		json_decref(root);
		return (proto_fail(err, 400, "invalid_request",
		    "field 'paths' holds %zu paths; at most %d", n,
		    PROTO_STAT_MAX));
	}
	if ((r->paths = calloc(n + 1, sizeof *r->paths)) == NULL) {
		json_decref(root);
		return (proto_oom(err));
	}
	for (i = 0; i < n; i++) {
		char	field[32];

		v = json_array_get(paths, i);
		snprintf(field, sizeof field, "paths[%zu]", i);
		if (!json_is_string(v)) {
			proto_fail(err, 400, "invalid_request",
			    "%s must be a string", field);
			goto fail;
		}
		if (proto_path_check(json_string_value(v),
		    json_string_length(v), field, err) != 0)
			goto fail;
		if ((r->paths[i] = strdup(json_string_value(v))) == NULL) {
			proto_oom(err);
			goto fail;
		}
		r->n++;
	}
	if (proto_files_string(root, "user", &r->user, err) != 0)
		goto fail;
	if (r->user != NULL && strlen(r->user) > PROTO_USER_MAX) {
		proto_fail(err, 400, "invalid_request",
		    "field 'user' is longer than %d bytes", PROTO_USER_MAX);
		goto fail;
	}
	json_decref(root);
	return (0);
fail:
	json_decref(root);
	proto_stat_req_free(r);
	return (-1);
}

void
proto_stat_req_free(struct proto_stat_req *r)
{
	size_t	i;

	if (r->paths != NULL) {
		for (i = 0; i < r->n; i++)
			free(r->paths[i]);
		free(r->paths);
	}
	r->paths = NULL;
	r->n = 0;
	free(r->user);
	r->user = NULL;
}

/* Whether the url starts with http:// or https:// and names a host. */
static int
proto_url_ok(const char *url)
{
	const char	*p;

	if (strncasecmp(url, "http://", 7) == 0)
		p = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		p = url + 8;
	else
		return (0);
	if (*p == '\0' || *p == '/' || *p == '?' || *p == '#' || *p == ':')
		return (0);
	for (; *p != '\0'; p++) {
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return (0);
	}
	return (1);
}

int
proto_parse_fetch(const char *body, size_t len, struct proto_fetch *f,
    struct proto_err *err)
{
	json_t		*root, *v;
	char		*sha = NULL;
	size_t		 i;

	memset(f, 0, sizeof *f);
	f->mode = -1;
	f->timeout_ms = PROTO_FETCH_TIMEOUT_DEFAULT_MS;
	if (proto_load(body, len, proto_fetch_fields, &root, err) != 0)
		return (-1);
	if (proto_files_string(root, "url", &f->url, err) != 0 ||
	    proto_files_string(root, "path", &f->path, err) != 0 ||
	    proto_files_string(root, "ca_file", &f->ca_file, err) != 0 ||
	    proto_files_string(root, "sha256", &sha, err) != 0 ||
	    proto_files_string(root, "user", &f->user, err) != 0 ||
	    proto_files_json_mode(root, "mode", &f->mode, err) != 0)
		goto fail;
	if (f->url == NULL) {
		proto_fail(err, 400, "invalid_request", "field 'url' is required");
		goto fail;
	}
	if (strlen(f->url) > PROTO_URL_MAX || !proto_url_ok(f->url)) {
		proto_fail(err, 400, "invalid_request", "field 'url' must be an "
		    "http:// or https:// URL of at most %d bytes, without "
		    "spaces", PROTO_URL_MAX);
		goto fail;
	}
	if (f->path == NULL) {
		proto_fail(err, 400, "invalid_request",
		    "field 'path' is required");
		goto fail;
	}
	if (f->user != NULL && strlen(f->user) > PROTO_USER_MAX) {
		proto_fail(err, 400, "invalid_request",
		    "field 'user' is longer than %d bytes", PROTO_USER_MAX);
		goto fail;
	}
	if (proto_path_check(f->path, strlen(f->path), "path", err) != 0)
		goto fail;
	if (f->ca_file != NULL &&
	    proto_path_check(f->ca_file, strlen(f->ca_file), "ca_file",
	    err) != 0)
		goto fail;
	if (sha != NULL) {
		if (strlen(sha) != 64)
			goto badsha;
		for (i = 0; i < 32; i++) {
			int	hi = proto_hex(sha[2 * i]);
			int	lo = proto_hex(sha[2 * i + 1]);

			if (hi < 0 || lo < 0)
				goto badsha;
			f->sha256[i] = (uint8_t)(hi << 4 | lo);
		}
		f->have_sha256 = 1;
		free(sha);
		sha = NULL;
	}
	if ((v = json_object_get(root, "timeout_ms")) != NULL &&
	    !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > PROTO_FETCH_TIMEOUT_MAX_MS) {
			proto_fail(err, 400, "invalid_request",
			    "field 'timeout_ms' must be an integer in 0..%d",
			    PROTO_FETCH_TIMEOUT_MAX_MS);
			goto fail;
		}
		f->timeout_ms = json_integer_value(v);
	}
	if ((v = json_object_get(root, "mkdir")) != NULL && !json_is_null(v)) {
		if (!json_is_boolean(v)) {
			proto_fail(err, 400, "invalid_request",
			    "field 'mkdir' must be a boolean");
			goto fail;
		}
		f->mkdir = json_is_true(v);
	}
	json_decref(root);
	return (0);
badsha:
	proto_fail(err, 400, "invalid_request",
	    "field 'sha256' must be 64 hex digits");
fail:
	free(sha);
	json_decref(root);
	proto_fetch_free(f);
	return (-1);
}

void
proto_fetch_free(struct proto_fetch *f)
{
	free(f->url);
	free(f->path);
	free(f->ca_file);
	free(f->user);
	f->url = f->path = f->ca_file = f->user = NULL;
}

/* 64 lowercase hex digits and a NUL. */
void
proto_sha256_hex(const uint8_t sha[32], char out[65])
{
	static const char	digits[] = "0123456789abcdef";
	size_t			i;

	for (i = 0; i < 32; i++) {
		out[2 * i] = digits[sha[i] >> 4];
		out[2 * i + 1] = digits[sha[i] & 0xf];
	}
	out[64] = '\0';
}

void
proto_render_file(struct proto_buf *b, const char *path, uint64_t size,
    const uint8_t sha256[32])
{
	char	hex[65];

	proto_sha256_hex(sha256, hex);
	proto_buf_append(b, "{\"path\": ", 9);
	proto_buf_json_string(b, path, strlen(path));
	proto_buf_printf(b, ", \"size\": %llu, \"sha256\": \"%s\"}",
	    (unsigned long long)size, hex);
}

void
proto_render_stat(struct proto_buf *b, const struct proto_stat *st,
    size_t n)
{
	static const char *const	 types[] = { "file", "dir", "symlink",
					    "other" };
	char				 when[25];
	size_t				 i;

	proto_buf_append(b, "{\"results\": [", 13);
	for (i = 0; i < n; i++) {
		if (i > 0)
			proto_buf_append(b, ", ", 2);
		proto_buf_append(b, "{\"path\": ", 9);
		proto_buf_json_string(b, st[i].path, strlen(st[i].path));
		if (!st[i].exists) {
			proto_buf_append(b, ", \"exists\": false, \"error\": ",
			    28);
			proto_buf_json_string(b, st[i].error,
			    strlen(st[i].error));
			proto_buf_append(b, "}", 1);
			continue;
		}
		proto_format_time(st[i].mtime_ms, when);
		proto_buf_printf(b, ", \"exists\": true, \"type\": \"%s\", "
		    "\"size\": %llu, \"mode\": \"%04o\", \"mtime\": \"%s\", "
		    "\"uid\": %lu, \"gid\": %lu",
		    types[st[i].type <= PROTO_FTYPE_OTHER ? st[i].type :
		    PROTO_FTYPE_OTHER], (unsigned long long)st[i].size,
		    st[i].mode & 07777, when, (unsigned long)st[i].uid,
		    (unsigned long)st[i].gid);
		if (st[i].target != NULL) {
			proto_buf_append(b, ", \"target\": ", 12);
			proto_buf_json_string(b, st[i].target,
			    strlen(st[i].target));
		}
		proto_buf_append(b, "}", 1);
	}
	proto_buf_append(b, "]}", 2);
}
