/*
 * httpcore.h -- what the HTTP layer's two halves share: the size limits of
 * a request, the token check, the HTTP date and the answers' counters.
 *
 * A leaf below http.c (listeners, routing, answers) and conn.c (a
 * connection's admission and deadlines), so that http.c drives conn.c and
 * neither reaches back into the other.  Event loop thread only.
 */
#ifndef AGENTD_HTTPCORE_H
#define AGENTD_HTTPCORE_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_BODY_SLACK		65536	/* bytes evhttp reads past --max-body */
#define HTTP_HEADERS_MAX	(64 * 1024) /* bytes of request line and headers */

/*
 * The token TCP requests must carry (len bytes, not NUL-terminated; NULL:
 * none).  The memory is the caller's and must outlive the listeners.
 */
void	httpcore_token(const char *token, size_t len);

/*
 * Whether a TCP request's Authorization (Bearer) or X-Access-Token value
 * carries the token, either will do; always when none is configured.  The
 * values need no NUL; NULL when absent.
 */
int	http_token_ok(const char *authorization, size_t alen,
	    const char *xtoken, size_t xlen);

/* Write an HTTP date of now (len 30 at least). */
void	http_date(char *buf, size_t len);

/* Requests answered, by status code, for /metrics. */
struct http_code_count {
	int		 code;
	uint64_t	 count;
};
size_t	http_code_counts(const struct http_code_count **);
/* Count an answer by its status code. */
void	http_count(int code);

#endif /* AGENTD_HTTPCORE_H */
