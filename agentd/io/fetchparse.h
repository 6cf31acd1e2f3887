/*
 * fetchparse.h -- the parsers of fetch.c's HTTP client, as pure functions:
 * a URL taken apart, a redirect's Location resolved, a response's status
 * line and header lines, a chunk-size line.  No I/O, no globals, no logging
 * and no fatal path (of util.c only cause_set): any thread may call them, and tests/fuzz/fuzz_fetch.c
 * feeds them raw bytes.
 *
 * Errors: -1 (or NULL) with errno EINVAL and, where a cause buffer is
 * given, the reason in it (for the caller's answer); or errno ENOMEM when
 * an allocation failed.
 */
#ifndef AGENTD_FETCHPARSE_H
#define AGENTD_FETCHPARSE_H

#include <stddef.h>
#include <stdint.h>

#define FETCH_HOST_MAX		255		/* bytes of a host name */

/* A URL taken apart. */
struct fetch_url {
	int	 tls;
	int	 ip;			/* host is an IP literal */
	char	 host[FETCH_HOST_MAX + 1];	/* no brackets */
	char	 port[8];
	char	 hostport[FETCH_HOST_MAX + 16];	/* for Host: */
	size_t	 origin_len;		/* bytes of "scheme://authority" in url */
	char	*target;		/* "/path?query", malloc'd */
};

/* The answer's head. */
struct fetch_head {
	int		 status;
	char		 reason[64];
	int		 chunked;
	int		 has_length;
	uint64_t	 length;
	char		*location;		/* malloc'd */
};

/*
 * Take an absolute http:// or https:// URL apart into u: no credentials,
 * no spaces or control bytes, a host name of [A-Za-z0-9.-_] or an IP
 * literal ([v6] in brackets), a port 1-65535; the fragment is dropped.
 * 0 (free u->target after), or -1 with cause and u->target NULL.
 */
int	 fetchparse_url(const char *url, struct fetch_url *u, char *cause,
	    size_t causelen);

/*
 * The absolute URL that a Location names, relative to url (u is its
 * parse): absolute, scheme-relative ("//host/x"), absolute-path, or
 * relative to the current path's folder (or query).  Malloc'd; NULL with
 * cause for a scheme other than http(s).  The result is not parsed yet.
 */
char	*fetchparse_resolve(const char *url, const struct fetch_url *u,
	    const char *loc, char *cause, size_t causelen);

/*
 * A status line, "HTTP/1.x NNN[ reason]", into h->status and h->reason
 * (the rest of h is cleared; free h->location first).  0 or -1.
 */
int	 fetchparse_status(const char *line, struct fetch_head *h);

/*
 * One header line (changed in place: the name is cut at its ':') into h:
 * Content-Length (digits only; a second one must agree), Transfer-Encoding
 * (chunked when it ends so), Location (copied).  Lines without ':' and
 * other names are ignored.  0, or -1 with cause.
 */
int	 fetchparse_header(char *line, struct fetch_head *h, char *cause,
	    size_t causelen);

/* A chunk-size line (hex, then nothing, ';' extensions or blanks). 0/-1. */
int	 fetchparse_chunk_size(const char *line, uint64_t *size);

#endif /* AGENTD_FETCHPARSE_H */
