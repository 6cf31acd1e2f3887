/*
 * util.c -- messages, the way out, writes, and calling the API.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "proto.h"
#include "term.h"

static atomic_int	ctl_exiting;

/* Print "agentctl: msg" on stderr. */
static void
ctl_vwarn(const char *fmt, va_list ap)
{
	char	msg[1024];

	vsnprintf(msg, sizeof msg, fmt, ap);
	/* In raw mode a bare \n does not return the carriage. */
	dprintf(STDERR_FILENO, "agentctl: %s%s", msg,
	    term_is_raw() ? "\r\n" : "\n");
}

/* Print a warning. */
void
ctl_warn(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	ctl_vwarn(fmt, ap);
	va_end(ap);
}

/* Print an error and exit 1. */
void
ctl_fatal(const char *fmt, ...)
{
	va_list	ap;

	term_restore();
	va_start(ap, fmt);
	ctl_vwarn(fmt, ap);
	va_end(ap);
	ctl_exit(CTL_EXIT_ERROR);
}

/* Print a usage error and exit 2. */
void
ctl_usage(const char *cmd, const char *fmt, ...)
{
	char	msg[1024];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	dprintf(STDERR_FILENO, "agentctl%s%s: %s\n"
	    "Try 'agentctl --help' for more information.\n",
	    cmd != NULL ? " " : "", cmd != NULL ? cmd : "", msg);
	ctl_exit(CTL_EXIT_USAGE);
}

/* Leave the process, once, from any thread. */
void
ctl_exit(int code)
{
	if (atomic_exchange(&ctl_exiting, 1)) {
		for (;;)
			pause();	/* another thread is on its way out */
	}
	term_restore();
	fflush(stdout);
	_exit(code);
}

/* Write everything. */
int
ctl_write_all(int fd, const void *buf, size_t len)
{
	const char	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		n = write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= n;
		} else if (n == -1 && errno != EINTR && errno != EAGAIN)
			return (-errno);
	}
	return (0);
}

/* Percent-encode all but [A-Za-z0-9._~-]. */
char *
ctl_escape(const char *s)
{
	static const char	 hex[] = "0123456789ABCDEF";
	char			*out, *p;

	if ((out = malloc(strlen(s) * 3 + 1)) == NULL)
		ctl_fatal("out of memory");
	for (p = out; *s != '\0'; s++) {
		unsigned char	c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || strchr("._~-", c) != NULL)
			*p++ = (char)c;
		else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return (out);
}

/* /v1/sessions/ID[suffix] */
char *
ctl_session_path(const char *id, const char *suffix)
{
	char	*e = ctl_escape(id), *path;

	if (asprintf(&path, "/v1/sessions/%s%s", e, suffix) == -1)
		ctl_fatal("out of memory");
	free(e);
	return (path);
}

/* Sleep. */
void
ctl_sleep_ms(int ms)
{
	struct timespec	ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* Call the API; exit 1 when agentd cannot be reached. */
int
ctl_api(struct client *c, const char *method, const char *path,
    const char *ctype, const void *body, size_t len, int timeout_ms,
    json_t **json)
{
	struct client_resp	resp;
	char			cause[CLIENT_CAUSE_MAX];
	int			status;

	if (client_request(c, method, path, ctype, body, len, timeout_ms,
	    &resp, cause, sizeof cause) != 0)
		ctl_fatal("%s", cause);
	status = resp.status;
	if (json != NULL)
		/* "text" output (encoding=text) may hold NUL bytes. */
		*json = json_loadb(resp.body, resp.len, JSON_ALLOW_NUL, NULL);
	client_resp_free(&resp);
	return (status);
}

/* The code of an error answer. */
const char *
ctl_err_code(json_t *j)
{
	return (ctl_json_str(json_object_get(j, "error"), "code", ""));
}

/* Print an error answer and exit 1. */
void
ctl_api_fail(int status, json_t *j)
{
	json_t		*err = json_object_get(j, "error");
	const char	*msg = ctl_json_str(err, "message", NULL);

	if (msg == NULL)
		ctl_fatal("agentd answered %d", status);
	if (status == 401)
		ctl_fatal("%s (%s)", msg, client_is_unix() ?
		    "the socket admits root and agentd's own user" :
		    "set AGENTD_TOKEN to agentd's token");
	ctl_fatal("%s", msg);
}

/*
 * A chunk's bytes, from its "text" (encoding=text) or its base64 "data",
 * into a malloc'd *out (NULL for none) of *n bytes.  -1 when it has
 * neither or bad base64.
 */
int
ctl_chunk_bytes(json_t *chunk, uint8_t **out, size_t *n)
{
	json_t	*v;

	if ((v = json_object_get(chunk, "text")) != NULL &&
	    json_is_string(v)) {
		*n = json_string_length(v);
		*out = NULL;
		if (*n == 0)
			return (0);
		if ((*out = malloc(*n)) == NULL)
			ctl_fatal("out of memory");
		memcpy(*out, json_string_value(v), *n);
		return (0);
	}
	if ((v = json_object_get(chunk, "data")) == NULL || !json_is_string(v))
		return (-1);
	return (proto_b64_decode(json_string_value(v), json_string_length(v),
	    out, n));
}

/* An integer member, or def. */
long long
ctl_json_int(json_t *o, const char *key, long long def)
{
	json_t	*v = json_object_get(o, key);

	return (json_is_integer(v) ? json_integer_value(v) : def);
}

/* A string member, or def. */
const char *
ctl_json_str(json_t *o, const char *key, const char *def)
{
	json_t	*v = json_object_get(o, key);

	return (json_is_string(v) ? json_string_value(v) : def);
}

/* A boolean member, or def. */
int
ctl_json_bool(json_t *o, const char *key, int def)
{
	json_t	*v = json_object_get(o, key);

	return (json_is_boolean(v) ? json_is_true(v) : def);
}
