/*
 * fuzz_fetch.c -- libFuzzer harness for fetch.c's parsers (fetchparse.c):
 * the input, as text, goes to each of them.
 *
 * Byte 0 picks the parser: 0 a URL, then a Location after the first '\n'
 * resolved against it (and the result parsed again); 1 a status line;
 * 2 header lines, one per '\n'; 3 a chunk-size line.  Checked: no crash or
 * leak (ASan, UBSan); a parsed URL's parts are within their buffers, its
 * port is 1-65535 and its target starts with '/' and holds no '#' or
 * blank; a status is three digits; a Content-Length agrees with itself.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fetchparse.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void	fz_check_url(const struct fetch_url *);
static void	fz_url(char *);
static void	fz_head(char *);

#define FZ_MAX	(64u << 10)	/* bytes of input looked at */

/* Fail loudly: libFuzzer keeps the input. */
#define FZ_ASSERT(c) do {						\
	if (!(c)) {							\
		fprintf(stderr, "fuzz_fetch: %s:%d: %s\n", __FILE__,	\
		    __LINE__, #c);					\
		abort();						\
	}								\
} while (0)

/* What a parsed URL promises. */
static void
fz_check_url(const struct fetch_url *u)
{
	unsigned long	port;
	const char	*p;

	FZ_ASSERT(memchr(u->host, '\0', sizeof u->host) != NULL);
	FZ_ASSERT(u->host[0] != '\0');
	FZ_ASSERT(memchr(u->hostport, '\0', sizeof u->hostport) != NULL);
	port = strtoul(u->port, NULL, 10);
	FZ_ASSERT(port >= 1 && port <= 65535);
	FZ_ASSERT(u->target != NULL && u->target[0] == '/');
	for (p = u->target; *p != '\0'; p++)
		FZ_ASSERT(*p != '#' && (unsigned char)*p > ' ' && *p != 0x7f);
}

/* A URL, and a Location against it. */
static void
fz_url(char *s)
{
	struct fetch_url	 u, v;
	char			 cause[256], *loc, *out;

	loc = strchr(s, '\n');
	if (loc != NULL)
		*loc++ = '\0';
	if (fetchparse_url(s, &u, cause, sizeof cause) != 0) {
		FZ_ASSERT(errno == EINVAL || errno == ENOMEM);
		FZ_ASSERT(u.target == NULL);
		return;
	}
	fz_check_url(&u);
	FZ_ASSERT(u.origin_len <= strlen(s));
	if (loc != NULL) {
		out = fetchparse_resolve(s, &u, loc, cause, sizeof cause);
		if (out != NULL) {
			if (fetchparse_url(out, &v, cause, sizeof cause) == 0) {
				fz_check_url(&v);
				free(v.target);
			}
			free(out);
		}
	}
	free(u.target);
}

/* Header lines into one head. */
static void
fz_head(char *s)
{
	struct fetch_head	 h;
	char			 cause[256], *line, *next;
	uint64_t		 len = 0;
	int			 had = 0;

	memset(&h, 0, sizeof h);
	for (line = s; line != NULL; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (fetchparse_header(line, &h, cause, sizeof cause) != 0)
			break;
		if (had)
			FZ_ASSERT(h.has_length && h.length == len);
		if (h.has_length) {
			had = 1;
			len = h.length;
		}
	}
	free(h.location);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fetch_head	 h;
	uint64_t		 n;
	char			*s;

	if (size < 1 || size > FZ_MAX)
		return (0);
	if ((s = malloc(size)) == NULL)
		return (0);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	switch (data[0] & 3) {
	case 0:
		fz_url(s);
		break;
	case 1:
		if (fetchparse_status(s, &h) == 0)
			FZ_ASSERT(h.status >= 0 && h.status <= 999 &&
			    memchr(h.reason, '\0', sizeof h.reason) != NULL);
		break;
	case 2:
		fz_head(s);
		break;
	default:
		(void)fetchparse_chunk_size(s, &n);
		break;
	}
	free(s);
	return (0);
}
