/*
 * envfiles.c -- envd's GET and POST /files (see envfiles.h).
 */
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <jansson.h>
#ifdef AGENTD_ZLIB
#include <zlib.h>
#endif

#include "config.h"
#include "conn.h"
#include "connect.h"
#include "envfiles.h"
#include "envstate.h"
#include "fetch.h"
#include "fileio.h"
#include "files.h"
#include "fs.h"
#include "fsentry.h"
#include "http.h"
#include "log.h"
#include "multipart.h"
#include "proto.h"
#include "pty.h"
#include "spool.h"
#include "util.h"

#define ENVFILES_QUERY_MAX	4	/* the query keys read */
#define ENVFILES_INFLATE_CHUNK	(64 << 10)	/* bytes inflated at once */
#define ENVFILES_FEED_MAX	(1u << 30)	/* bytes given to zlib at once
						   (its avail_in is 32 bits) */

/* The query of a /files request. */
struct envfiles_query {
	char	*path;
	char	*username;
	char	*signature;
	char	*expiration;
};

/* A POST on its worker. */
struct envfiles_post {
	struct evbuffer	*body;		/* the request's bytes, moved here */
	char		*map;		/* or the gate's spool of them, mapped */
	size_t		 maplen;
	const char	*data;
	size_t		 len;
	int		 gzip;
	int		 multipart;
	char		*content_type;
	char		*path;		/* the query's, resolved; or NULL */
	char		*home;
	char		*workdir;
	struct fs_who	 who;
	json_t		*meta;		/* X-Metadata-*: an object of strings */
	uint64_t	 max_inflate;	/* bytes a gzip body inflates to */
	const char	*spool_dir;	/* where (NULL: memory) */
	/* The worker's. */
	uid_t		 trust;		/* whose symlinks are followed */
	int		 give;		/* what is made: the user's */
	int		 as_user;	/* the worker acts as the user */
	json_t		*answer;
};

static const struct config	*envfiles_cfg;	/* --max-body */

static void	envfiles_route(struct http_req *, const struct pty_user *, int);
static int	envfiles_query(const char *, struct envfiles_query *);
static void	envfiles_query_free(struct envfiles_query *);
static int	envfiles_signed(struct http_req *, struct envfiles_query *,
		    const char *);
static void	envfiles_b64(const uint8_t *, size_t, char *);
static void	envfiles_post(struct http_req *, struct envfiles_query *,
		    const struct pty_user *, int);
static json_t	*envfiles_meta(struct http_req *);
static void	envfiles_post_free(struct envfiles_post *);
static int	envfiles_work(void *, uid_t, struct proto_err *);
static void	envfiles_done(struct evhttp_request *, void *, int,
		    const struct proto_err *);
static int	envfiles_write(struct envfiles_post *, const char *,
		    const char *, size_t, struct proto_err *);

static const struct envd_route envfiles_routes[] = {
	{ "/files", EVHTTP_REQ_GET | EVHTTP_REQ_POST, ENVD_ROUTE_SIGNED,
	  envfiles_route },
};

/* Register the routes. */
void
envfiles_register(const struct config *cfg)
{
	envfiles_cfg = cfg;
	envd_route_register(envfiles_routes, nitems(envfiles_routes));
}

/* Read path, username, signature and signature_expiration; -1 if bad. */
static int
envfiles_query(const char *q, struct envfiles_query *out)
{
	const char	*p = q, *amp, *eq;
	char		*key, *val, **where;
	size_t		 klen;

	memset(out, 0, sizeof *out);
	while (*p != '\0') {
		amp = strchr(p, '&');
		if (amp == NULL)
			amp = p + strlen(p);
		eq = memchr(p, '=', (size_t)(amp - p));
		klen = (size_t)((eq != NULL ? eq : amp) - p);
		key = xmalloc(klen + 1);
		memcpy(key, p, klen);
		key[klen] = '\0';
		where = strcmp(key, "path") == 0 ? &out->path :
		    strcmp(key, "username") == 0 ? &out->username :
		    strcmp(key, "signature") == 0 ? &out->signature :
		    strcmp(key, "signature_expiration") == 0 ?
		    &out->expiration : NULL;
		free(key);
		if (where != NULL && *where == NULL) {
			val = xmalloc((size_t)(amp - p) + 1);
			if (eq != NULL) {
				memcpy(val, eq + 1, (size_t)(amp - eq - 1));
				val[amp - eq - 1] = '\0';
			} else
				val[0] = '\0';
			/* Go's url.Query(): '+' is a space. */
			*where = evhttp_uridecode(val, 1, NULL);
			free(val);
			if (*where == NULL || strlen(*where) > PROTO_PATH_MAX)
				return (-1);
		}
		p = *amp == '&' ? amp + 1 : amp;
	}
	return (0);
}

/* Free a query's strings. */
static void
envfiles_query_free(struct envfiles_query *q)
{
	free(q->path);
	free(q->username);
	free(q->signature);
	free(q->expiration);
}

/* Base64, standard alphabet, no padding (Go's RawStdEncoding). */
static void
envfiles_b64(const uint8_t *in, size_t len, char *out)
{
	static const char	abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789+/";
	uint32_t		v;
	size_t			i;

	for (i = 0; i + 2 < len; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		*out++ = abc[v >> 18];
		*out++ = abc[(v >> 12) & 63];
		*out++ = abc[(v >> 6) & 63];
		*out++ = abc[v & 63];
	}
	if (len - i == 1) {
		v = (uint32_t)in[i] << 16;
		*out++ = abc[v >> 18];
		*out++ = abc[(v >> 12) & 63];
	} else if (len - i == 2) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		*out++ = abc[v >> 18];
		*out++ = abc[(v >> 12) & 63];
		*out++ = abc[(v >> 6) & 63];
	}
	*out = '\0';
}

/*
 * A call without the token: check its signature as envd does (op "read"
 * or "write").  0, or -1 after answering 401.
 */
static int
envfiles_signed(struct http_req *hr, struct envfiles_query *q, const char *op)
{
	const struct config	*cfg = envfiles_cfg;
	uint8_t			 sha[32];
	char			*raw, want[64], *end;
	long long		 exp = 0;
	int			 n;

	if (q->signature == NULL) {
		envd_plain_fail(hr, 401, "missing signature query parameter");
		return (-1);
	}
	if (q->expiration != NULL) {
		errno = 0;
		exp = strtoll(q->expiration, &end, 10);
		if (errno != 0 || end == q->expiration || *end != '\0') {
			envd_plain_fail(hr, 400, "invalid signature_expiration");
			return (-1);
		}
	}
	n = q->expiration != NULL ? asprintf(&raw, "%s:%s:%s:%.*s:%lld",
	    q->path != NULL ? q->path : "", op, q->username != NULL ?
	    q->username : "", (int)cfg->token_len, cfg->token, exp) :
	    asprintf(&raw, "%s:%s:%s:%.*s", q->path != NULL ? q->path : "",
	    op, q->username != NULL ? q->username : "", (int)cfg->token_len,
	    cfg->token);
	if (n == -1)
		fatal("%s: out of memory", __func__);
	fetch_sha256(raw, (size_t)n, sha);
	explicit_bzero(raw, (size_t)n);
	free(raw);
	memcpy(want, "v1_", 3);
	envfiles_b64(sha, sizeof sha, want + 3);
	if (!ct_equal(want, strlen(want), q->signature,
	    strlen(q->signature))) {
		envd_plain_fail(hr, 401, "invalid signature");
		return (-1);
	}
	if (q->expiration != NULL && exp < (long long)time(NULL)) {
		envd_plain_fail(hr, 401, "signature is already expired");
		return (-1);
	}
	return (0);
}

/* GET or POST /files. */
static void
envfiles_route(struct http_req *hr, const struct pty_user *user,
    int authorized)
{
	struct envfiles_query	 q;
	struct pty_user		 named;
	struct fs_who		 who;
	char			 cause[PTY_CAUSE_MAX], *path;

	if (envfiles_query(hr->query, &q) != 0) {
		envd_plain_fail(hr, 400, "malformed query");
		goto out;
	}
	if (!authorized && envfiles_signed(hr, &q,
	    hr->method == EVHTTP_REQ_GET ? "read" : "write") != 0)
		goto out;
	if (q.username != NULL || !authorized) {
		/* Signed only: the URL's user, never Basic auth's. */
		if (pty_user_lookup(q.username != NULL ? q.username :
		    envstate_user(), &named, cause,
		    sizeof cause) != 0) {
			envd_plain_fail(hr, 401, "error looking up user "
			    "'%.64s': %s", q.username != NULL ? q.username :
			    envstate_user(), cause);
			goto out;
		}
		user = &named;
	}
	if (user == NULL) {
		envd_plain_fail(hr, 401, "no such user");
		goto out;
	}
	if (hr->method == EVHTTP_REQ_POST) {
		envfiles_post(hr, &q, user, authorized);
		goto out;
	}
	if ((path = fsentry_resolve(q.path, user->home, envstate_workdir(),
	    cause, sizeof cause)) == NULL) {
		envd_plain_fail(hr, 400, "error expanding and resolving path: "
		    "%s", cause);
		goto out;
	}
	/* envd's mode: as root, whose symlinks only are followed. */
	files_get_as(hr, path, fs_who(user, &who), user->uid);
	free(path);
out:
	envfiles_query_free(&q);
}

/* POST /files: check the request, move its body to a job, start it. */
static void
envfiles_post(struct http_req *hr, struct envfiles_query *q,
    const struct pty_user *user, int authorized)
{
	struct envfiles_post	*p;
	struct proto_err	 err;
	struct spool		*spool;
	const char		*enc, *ct = hr->content_type;
	char			 cause[PTY_CAUSE_MAX];
	size_t			 len;
	int			 r;

	enc = evhttp_find_header(evhttp_request_get_input_headers(hr->req),
	    "Content-Encoding");
	p = xcalloc(1, sizeof *p);
	if (enc != NULL && *enc != '\0') {
		len = strcspn(enc, "; \t");
		if (len == 4 && strncasecmp(enc, "gzip", 4) == 0)
			p->gzip = 1;
		else if (!(len == 8 && strncasecmp(enc, "identity", 8) == 0)) {
			envd_plain_fail(hr, 400, "unsupported Content-Encoding: "
			    "%.64s, supported: [gzip]", enc);
			goto fail;
		}
	}
#ifndef AGENTD_ZLIB
	if (p->gzip) {
		envd_plain_fail(hr, 415, "this agentd was built without zlib: "
		    "no Content-Encoding: gzip");
		goto fail;
	}
#endif
	len = strcspn(ct, "; \t");
	if (len == 24 && strncasecmp(ct, "application/octet-stream", 24) == 0)
		p->multipart = 0;
	else if (strncasecmp(ct, "multipart/", 10) == 0)
		p->multipart = 1;
	else {
		envd_plain_fail(hr, 400, "unsupported content type: %.64s, "
		    "expected multipart/form-data or application/octet-stream",
		    ct);
		goto fail;
	}
	if (!p->multipart && q->path == NULL) {
		envd_plain_fail(hr, 400, "path query parameter is required for "
		    "raw body upload");
		goto fail;
	}
	if (q->path != NULL && (p->path = fsentry_resolve(q->path, user->home,
	    envstate_workdir(), cause, sizeof cause)) == NULL) {
		envd_plain_fail(hr, 400, "error resolving path: %s", cause);
		goto fail;
	}
	if ((p->meta = envfiles_meta(hr)) == NULL)
		goto fail;
	p->content_type = xstrdup(ct);
	p->home = xstrdup(user->home);
	if (envstate_workdir() != NULL)
		p->workdir = xstrdup(envstate_workdir());
	/*
	 * What a gzip body inflates to: with the token up to
	 * --envd-max-upload, on disk; allowed by its signature alone (or
	 * with --envd-max-upload 0), up to --max-body in memory.
	 */
	if (authorized && envfiles_cfg->envd_max_upload > 0) {
		p->max_inflate = envfiles_cfg->envd_max_upload;
		p->spool_dir = envfiles_cfg->envd_spool_dir;
	} else
		p->max_inflate = envfiles_cfg->max_body;
	/* Over --max-body the gate put the body on disk: map it. */
	if ((spool = conn_spool_take(hr->req)) != NULL) {
		r = spool_map(spool, &p->map, &p->maplen, cause, sizeof cause);
		spool_free(spool);
		if (r != 0) {
			envd_plain_fail(hr, 503, "%s", cause);
			goto fail;
		}
		p->data = p->map;
		p->len = p->maplen;
	/* The body's chains move to the job: a client gone frees the request. */
	} else if ((p->body = evbuffer_new()) == NULL ||
	    evbuffer_add_buffer(p->body, evhttp_request_get_input_buffer(
	    hr->req)) != 0 || (evbuffer_get_length(p->body) > 0 &&
	    (p->data = (const char *)evbuffer_pullup(p->body, -1)) == NULL)) {
		envd_plain_fail(hr, 503, "no memory for the body; try again "
		    "later");
		goto fail;
	} else
		p->len = hr->body_len;	/* not the NUL http.c put after it */
	if (files_call(hr->req, fs_who(user, &p->who), envfiles_work,
	    envfiles_done, p, &err) != 0) {
		envd_plain_fail(hr, err.status, "%s", err.message);
		goto fail;
	}
	return;
fail:
	envfiles_post_free(p);
}

/* Free a POST's job. */
static void
envfiles_post_free(struct envfiles_post *p)
{
	if (p->body != NULL)
		evbuffer_free(p->body);
	spool_unmap(p->map, p->maplen);
	free(p->content_type);
	free(p->path);
	free(p->home);
	free(p->workdir);
	if (p->meta != NULL)
		json_decref(p->meta);
	if (p->answer != NULL)
		json_decref(p->answer);
	free(p);
}

/*
 * The X-Metadata-<key> headers of a request as an object of strings (key
 * lowercased, the first value of a key kept), checked as envd checks
 * them; NULL after answering 400.
 */
static json_t *
envfiles_meta(struct http_req *hr)
{
	struct evkeyvalq	*h;
	struct evkeyval		*kv;
	json_t			*o;
	char			 key[FSENTRY_META_KEY_MAX + 2], cause[160];
	size_t			 total = 0, n, i;

	h = evhttp_request_get_input_headers(hr->req);
	o = json_object();
	TAILQ_FOREACH(kv, h, next) {
		if (strncasecmp(kv->key, "X-Metadata-", 11) != 0)
			continue;
		n = strlen(kv->key + 11);
		if (n == 0)
			continue;		/* envd skips an empty key */
		for (i = 0; i < n && i < sizeof key - 1; i++)
			key[i] = (char)tolower((unsigned char)kv->key[11 + i]);
		key[i] = '\0';
		if (n >= sizeof key) {
			envd_plain_fail(hr, 400, "invalid metadata: a key is "
			    "over %d bytes", FSENTRY_META_KEY_MAX);
			goto fail;
		}
		if (json_object_get(o, key) != NULL)
			continue;		/* the first value wins */
		if (fsentry_meta_check(key, kv->value, &total, cause,
		    sizeof cause) != 0) {
			envd_plain_fail(hr, 400, "invalid metadata: %s", cause);
			goto fail;
		}
		json_object_set_new(o, key, json_string(kv->value));
	}
	return (o);
fail:
	json_decref(o);
	return (NULL);
}

#ifdef AGENTD_ZLIB
/* Give zlib the next bytes of *data when it has taken the last. */
static void
envfiles_feed(z_stream *z, const char **data, size_t *left)
{
	size_t	n;

	if (z->avail_in > 0 || *left == 0)
		return;
	n = *left < ENVFILES_FEED_MAX ? *left : ENVFILES_FEED_MAX;
	z->next_in = (Bytef *)(uintptr_t)*data;
	z->avail_in = (uInt)n;
	*data += n;
	*left -= n;
}

/*
 * On a worker: inflate a whole gzip body, at most max bytes (more: 413,
 * nothing written anywhere), into a spool in dir, mapped (*map, *maplen
 * for spool_unmap()), or with dir NULL into memory (*heap, to free).
 */
static int
envfiles_inflate(const char *data, size_t len, uint64_t max, const char *dir,
    char **map, size_t *maplen, char **heap, struct proto_err *err)
{
	struct spool	*s = NULL;
	z_stream	 z;
	char		*out, cause[SPOOL_CAUSE_MAX];
	size_t		 cap = 0, have = 0, n;
	int		 zr, status, rc = -1;

	*map = *heap = NULL;
	*maplen = 0;
	if (dir != NULL && (s = spool_open(dir, 0, &status, cause,
	    sizeof cause)) == NULL)
		return (proto_fail(err, status, "spool_failed", "%s", cause));
	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		if (s != NULL)
			spool_free(s);
		return (proto_fail(err, 503, "out_of_memory", "no memory to "
		    "inflate; try again later"));
	}
	out = xmalloc(ENVFILES_INFLATE_CHUNK);
	do {
		envfiles_feed(&z, &data, &len);
		z.next_out = (Bytef *)out;
		z.avail_out = ENVFILES_INFLATE_CHUNK;
		zr = inflate(&z, Z_NO_FLUSH);
		if ((zr != Z_OK && zr != Z_STREAM_END) ||
		    (zr == Z_OK && z.avail_in == 0 && len == 0 &&
		    z.avail_out != 0)) {
			proto_fail(err, 400, "invalid_request", "error "
			    "decompressing request body: %s", z.msg != NULL ?
			    z.msg : "unexpected EOF");
			goto out;
		}
		n = ENVFILES_INFLATE_CHUNK - z.avail_out;
		if (have + n > max) {
			proto_fail(err, 413, "body_too_large", "the inflated "
			    "body is over %llu bytes (%s)",
			    (unsigned long long)max, dir != NULL ?
			    "--envd-max-upload" : "--max-body");
			goto out;
		}
		if (s != NULL && spool_write(s, out, n, &status, cause,
		    sizeof cause) != 0) {
			proto_fail(err, status, "spool_failed", "%s", cause);
			goto out;
		}
		if (s == NULL && have + n > cap) {
			cap = cap == 0 ? ENVFILES_INFLATE_CHUNK : cap * 2;
			if (cap > max)
				cap = (size_t)max;
			*heap = xrealloc(*heap, cap);
		}
		if (s == NULL && n > 0)
			memcpy(*heap + have, out, n);
		have += n;
	} while (zr != Z_STREAM_END);
	if (s == NULL) {
		*maplen = have;
		rc = 0;
	} else if (spool_map(s, map, maplen, cause, sizeof cause) != 0)
		proto_fail(err, 503, "spool_failed", "%s", cause);
	else
		rc = 0;
out:
	inflateEnd(&z);
	free(out);
	if (s != NULL)
		spool_free(s);
	if (rc != 0) {
		free(*heap);
		*heap = NULL;
	}
	return (rc);
}
#endif

/*
 * On a worker: write len bytes of data to path in place, as envd does
 * (fileio_open_inplace()), with the request's metadata; append the
 * answer's entry {name, type, path[, metadata]}.
 */
static int
envfiles_write(struct envfiles_post *p, const char *path, const char *data,
    size_t len, struct proto_err *err)
{
	const char	*slash = strrchr(path, '/');
	json_t		*o, *meta;
	ssize_t		 n;
	int		 fd, created, r;

	/* envd's mode: as root unless the user's own symlink is on the way. */
	if (!p->who.confine && !p->as_user) {
		if (files_act(p->who.uid, path, NULL, &p->trust, &p->give, err) != 0)
			return (-1);
		p->as_user = !p->give;
	}
	if ((fd = fileio_open_inplace(path, p->trust, p->who.uid, p->who.gid,
	    p->give, &created, err)) == -1)
		return (-1);
	while (len > 0) {
		n = write(fd, data, len > (1u << 30) ? (1u << 30) : len);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			fileio_fail(err, errno, "write", path);
			close(fd);
			return (-1);
		}
		data += n;
		len -= (size_t)n;
	}
	if ((r = fsentry_meta_write(fd, p->meta)) != 0) {
		fileio_fail(err, -r, "set the metadata of", path);
		close(fd);
		return (-1);
	}
	meta = fsentry_meta_read(fd);
	close(fd);
	o = json_object();
	json_object_set_new(o, "name", fsentry_string(slash != NULL &&
	    slash[1] != '\0' ? slash + 1 : path));
	json_object_set_new(o, "type", json_string("file"));
	json_object_set_new(o, "path", fsentry_string(path));
	if (meta != NULL)
		json_object_set_new(o, "metadata", meta);
	json_array_append_new(p->answer, o);
	return (0);
}

/* Whether path was written by this POST already. */
static int
envfiles_seen(struct envfiles_post *p, const char *path)
{
	size_t	i;

	for (i = 0; i < json_array_size(p->answer); i++) {
		if (strcmp(json_string_value(json_object_get(
		    json_array_get(p->answer, i), "path")), path) == 0)
			return (1);
	}
	return (0);
}

/* On a worker: write the files of a POST, as envd or as the user. */
static int
envfiles_work(void *arg, uid_t owner, struct proto_err *err)
{
	struct envfiles_post	*p = arg;
	struct multipart	 m;
	struct multipart_part	*part;
	const char		*data = p->data;
	char			 cause[256], *path, *map = NULL, *heap = NULL;
	size_t			 len = p->len, maplen = 0;
	int			 r, rc = -1;

	if (data == NULL)
		data = "";
	p->answer = json_array();
	p->trust = owner;
	p->as_user = p->who.confine;
#ifdef AGENTD_ZLIB
	/* Inflated whole first: past the bound nothing is written. */
	if (p->gzip) {
		if (envfiles_inflate(data, len, p->max_inflate, p->spool_dir,
		    &map, &maplen, &heap, err) != 0)
			return (-1);
		data = map != NULL ? map : heap != NULL ? heap : "";
		len = maplen;
	}
#else
	if (p->gzip)
		return (proto_fail(err, 415, "unsupported_media_type", "this "
		    "agentd was built without zlib: no Content-Encoding: gzip"));
#endif
	if (!p->multipart) {
		rc = envfiles_write(p, p->path, data, len, err);
		goto out;
	}
	if (multipart_init(&m, p->content_type, data, len, cause,
	    sizeof cause) != 0) {
		proto_fail(err, 400, "invalid_request", "error parsing "
		    "multipart form: %s", cause);
		goto out;
	}
	part = xmalloc(sizeof *part);
	while ((r = multipart_next(&m, part, cause, sizeof cause)) == 1) {
		if (strcmp(part->name, "file") != 0)
			continue;
		if (p->path != NULL)
			path = xstrdup(p->path);
		else if (!part->has_filename) {
			proto_fail(err, 400, "invalid_request", "error getting "
			    "multipart custom part file name: filename not "
			    "found in Content-Disposition header");
			break;
		} else if ((path = fsentry_resolve(part->filename, p->home,
		    p->workdir, cause, sizeof cause)) == NULL) {
			proto_fail(err, 400, "invalid_request", "error "
			    "resolving path: %s", cause);
			break;
		}
		if (envfiles_seen(p, path)) {
			proto_fail(err, 400, "invalid_request", "you cannot "
			    "upload multiple files to the same path '%.200s' in "
			    "one upload request, only the first specified file "
			    "was uploaded", path);
			free(path);
			break;
		}
		if (envfiles_write(p, path, part->data, part->len, err) != 0) {
			free(path);
			break;
		}
		free(path);
	}
	free(part);
	if (r == -1)
		proto_fail(err, 400, "invalid_request", "error reading form: "
		    "%s", cause);
	else if (r == 0 && json_array_size(p->answer) == 0)
		proto_fail(err, 400, "invalid_request", "the form has no "
		    "\"file\" part");
	else if (r == 0)
		rc = 0;
out:
	spool_unmap(map, maplen);
	free(heap);
	return (rc);
}

/* On the loop: answer a POST. */
static void
envfiles_done(struct evhttp_request *req, void *arg, int rc,
    const struct proto_err *err)
{
	struct envfiles_post	*p = arg;
	struct proto_buf	 b = { 0 };
	struct http_req		 hr;
	char			*s;

	if (req != NULL && rc != 0) {
		memset(&hr, 0, sizeof hr);
		hr.req = req;
		envd_plain_fail(&hr, err->status == 409 ? 400 :
		    err->status < 400 || err->status > 599 ? 500 : err->status,
		    "%s", err->message);
	} else if (req != NULL) {
		if ((s = json_dumps(p->answer, JSON_COMPACT)) == NULL)
			fatal("%s: out of memory", __func__);
		proto_buf_append(&b, s, strlen(s));
		free(s);
		http_reply_raw(req, 200, "application/json", &b);
	}
	envfiles_post_free(p);
}
