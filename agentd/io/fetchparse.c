/*
 * fetchparse.c -- the pure parsers of fetch.c's HTTP client (fetchparse.h).
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetchparse.h"
#include "util.h"	/* cause_set */

static int	fetchparse_fail(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));
static int	fetchparse_oom(char *, size_t);

/* Say why in cause; errno EINVAL; return -1. */
static int
fetchparse_fail(char *cause, size_t len, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	cause_vset(cause, len, fmt, ap);
	va_end(ap);
	errno = EINVAL;
	return (-1);
}

/* An allocation failed: errno ENOMEM; return -1. */
static int
fetchparse_oom(char *cause, size_t len)
{
	cause_set(cause, len, "out of memory");
	errno = ENOMEM;
	return (-1);
}

/* Take an absolute http(s) URL apart. */
int
fetchparse_url(const char *url, struct fetch_url *u, char *cause,
    size_t causelen)
{
	const char	*p, *auth, *end, *hend, *colon = NULL;
	size_t		 hlen;
	unsigned long	 port;
	char		*e;
	unsigned char	 addr[16];
	int		 n;

	memset(u, 0, sizeof *u);
	if (strncasecmp(url, "http://", 7) == 0)
		auth = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0) {
		auth = url + 8;
		u->tls = 1;
	} else
		return (fetchparse_fail(cause, causelen, "url: only http:// "
		    "and https:// are supported: %.160s", url));
	for (p = url; *p != '\0'; p++) {
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return (fetchparse_fail(cause, causelen, "url: spaces "
			    "or control bytes in %.160s", url));
	}
	end = auth + strcspn(auth, "/?#");
	u->origin_len = (size_t)(end - url);
	if (memchr(auth, '@', (size_t)(end - auth)) != NULL)
		return (fetchparse_fail(cause, causelen, "url: credentials "
		    "in the URL are not supported"));
	if (*auth == '[') {
		if ((hend = memchr(auth, ']', (size_t)(end - auth))) == NULL)
			goto bad;
		hlen = (size_t)(hend - auth - 1);
		if (hlen == 0 || hlen > FETCH_HOST_MAX)
			goto bad;
		memcpy(u->host, auth + 1, hlen);
		u->host[hlen] = '\0';
		if (inet_pton(AF_INET6, u->host, addr) != 1)
			goto bad;
		u->ip = 1;
		p = hend + 1;
		if (p < end) {
			if (*p != ':')
				goto bad;
			colon = p;
		}
	} else {
		colon = memchr(auth, ':', (size_t)(end - auth));
		hlen = (size_t)((colon != NULL ? colon : end) - auth);
		if (hlen == 0 || hlen > FETCH_HOST_MAX)
			goto bad;
		memcpy(u->host, auth, hlen);
		u->host[hlen] = '\0';
		if (strspn(u->host, "abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != hlen)
			goto bad;
		u->ip = inet_pton(AF_INET, u->host, addr) == 1;
	}
	if (colon != NULL && colon + 1 < end) {
		errno = 0;
		port = strtoul(colon + 1, &e, 10);
		if (e != end || port == 0 || port > 65535 || colon[1] == '+' ||
		    colon[1] == '-')
			goto bad;
		snprintf(u->port, sizeof u->port, "%lu", port);
	} else
		snprintf(u->port, sizeof u->port, "%s", u->tls ? "443" : "80");
	if (strcmp(u->port, u->tls ? "443" : "80") == 0)
		snprintf(u->hostport, sizeof u->hostport, "%s%s%s",
		    *auth == '[' ? "[" : "", u->host, *auth == '[' ? "]" : "");
	else
		snprintf(u->hostport, sizeof u->hostport, "%s%s%s:%s",
		    *auth == '[' ? "[" : "", u->host, *auth == '[' ? "]" : "",
		    u->port);
	/* The target: path and query, no fragment. */
	hlen = strcspn(end, "#");
	if (hlen == 0 || *end == '#')
		n = (u->target = strdup("/")) == NULL ? -1 : 1;
	else if (*end == '?')
		n = asprintf(&u->target, "/%.*s", (int)hlen, end);
	else
		n = asprintf(&u->target, "%.*s", (int)hlen, end);
	if (n < 0) {
		u->target = NULL;
		return (fetchparse_oom(cause, causelen));
	}
	return (0);
bad:
	return (fetchparse_fail(cause, causelen, "url: bad host or port in "
	    "%.160s", url));
}

/* The absolute URL a Location names, relative to url. */
char *
fetchparse_resolve(const char *url, const struct fetch_url *u,
    const char *loc, char *cause, size_t causelen)
{
	const char	*q, *slash;
	char		*out;
	size_t		 plen;
	int		 n;

	if (strncasecmp(loc, "http://", 7) == 0 ||
	    strncasecmp(loc, "https://", 8) == 0)
		n = (out = strdup(loc)) == NULL ? -1 : 0;
	else if (strncmp(loc, "//", 2) == 0)
		n = asprintf(&out, "%s:%s", u->tls ? "https" : "http", loc);
	else if (strchr(loc, ':') != NULL &&
	    strcspn(loc, ":") < strcspn(loc, "/?#")) {
		fetchparse_fail(cause, causelen, "redirect to an unsupported "
		    "URL: %.160s", loc);
		return (NULL);
	} else if (*loc == '/')
		n = asprintf(&out, "%.*s%s", (int)u->origin_len, url, loc);
	else {
		/* Relative to the folder of the current path. */
		q = u->target + strcspn(u->target, "?");
		for (slash = q; slash > u->target && slash[-1] != '/'; slash--)
			;
		plen = (size_t)(slash - u->target);
		if (*loc == '?')
			plen = (size_t)(q - u->target);
		n = asprintf(&out, "%.*s%.*s%s", (int)u->origin_len, url,
		    (int)plen, u->target, loc);
	}
	if (n < 0) {
		fetchparse_oom(cause, causelen);
		return (NULL);
	}
	return (out);
}

/* A status line into h. */
int
fetchparse_status(const char *line, struct fetch_head *h)
{
	memset(h, 0, sizeof *h);
	if (strncmp(line, "HTTP/1.", 7) != 0 || line[7] == '\0' ||
	    line[8] != ' ' || strspn(line + 9, "0123456789") != 3 ||
	    (line[12] != ' ' && line[12] != '\0'))
		return (fetchparse_fail(NULL, 0, "not HTTP/1.x"));
	h->status = (line[9] - '0') * 100 + (line[10] - '0') * 10 +
	    (line[11] - '0');
	snprintf(h->reason, sizeof h->reason, "%s",
	    line[12] == ' ' ? line + 13 : "");
	return (0);
}

/* One header line into h. */
int
fetchparse_header(char *line, struct fetch_head *h, char *cause,
    size_t causelen)
{
	char		*v, *e;
	uint64_t	 len;

	if ((v = strchr(line, ':')) == NULL)
		return (0);
	*v++ = '\0';
	v += strspn(v, " \t");
	for (e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t');)
		*--e = '\0';
	if (strcasecmp(line, "Content-Length") == 0) {
		errno = 0;
		len = strtoull(v, &e, 10);
		if (*v < '0' || *v > '9' || *e != '\0' || errno != 0 ||
		    (h->has_length && len != h->length))
			return (fetchparse_fail(cause, causelen, "a bad "
			    "Content-Length in the answer: %.40s", v));
		h->has_length = 1;
		h->length = len;
	} else if (strcasecmp(line, "Transfer-Encoding") == 0) {
		e = v + strlen(v);
		h->chunked = e - v >= 7 && strcasecmp(e - 7, "chunked") == 0;
	} else if (strcasecmp(line, "Location") == 0) {
		free(h->location);
		if ((h->location = strdup(v)) == NULL)
			return (fetchparse_oom(cause, causelen));
	}
	return (0);
}

/*
 * A chunk-size line: hex digits only (no sign, blanks or "0x" before them,
 * as strtoull would take), at most 64 bits of them.
 */
int
fetchparse_chunk_size(const char *line, uint64_t *size)
{
	static const char	 hex[] = "0123456789abcdef";
	size_t			 n, i;
	uint64_t		 v = 0;

	n = strspn(line, "0123456789abcdefABCDEF");
	if (n == 0 || (line[n] != '\0' && line[n] != ';' && line[n] != ' ' &&
	    line[n] != '\t'))
		return (fetchparse_fail(NULL, 0, "a bad chunk size"));
	for (i = 0; i < n; i++) {
		if (v >> 60 != 0)
			return (fetchparse_fail(NULL, 0, "chunk size overflow"));
		v = v << 4 | (uint64_t)(strchr(hex, line[i] | 0x20) - hex);
	}
	*size = v;
	return (0);
}
