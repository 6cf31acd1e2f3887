/*
 * serve.h -- what Go's http.ServeContent and envd's GET /files decide for
 * a file's answer from the request's headers: the encoding (envd's
 * Accept-Encoding rules: q-values, "identity;q=0" and "*;q=0", identity
 * for a Range or conditional request, 406 when nothing acceptable can be
 * served), the preconditions (If-Match, If-Unmodified-Since: 412;
 * If-None-Match, If-Modified-Since: 304; If-Range) against the file's
 * modification time (no ETag: envd sets none), and the byte ranges
 * (206, one range or multipart/byteranges; 416 with "bytes *\/SIZE" when
 * none overlaps; ranges larger together than the file are ignored).
 *
 * serve_read() runs on the loop (it reads the request's headers);
 * serve_eval() and serve_part() on any thread (pure: they read the
 * struct serve_req only); serve_head() on the loop.
 */
#ifndef AGENTD_SERVE_H
#define AGENTD_SERVE_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct evkeyvalq;

#define SERVE_IDENTITY	0	/* the bytes as they are */
#define SERVE_GZIP	1	/* a gzip body (Content-Encoding: gzip) */
#define SERVE_REFUSE	2	/* 406: no encoding acceptable */

#define SERVE_BOUNDARY_LEN	32	/* hex digits of a multipart boundary */
#define SERVE_PART_HEAD_MAX	256	/* bytes of one part's head */
#define SERVE_TYPE_MAX		80	/* bytes of serve_type()'s answer */

/* What the request asks, copied from its headers (loop). */
struct serve_req {
	char	*range;
	char	*if_range;
	char	*if_match;
	char	*if_unmodified;
	char	*if_none_match;
	char	*if_modified;
	int	 enc;			/* SERVE_* */
	char	 boundary[SERVE_BOUNDARY_LEN + 1];
};

/* One byte range. */
struct serve_range {
	uint64_t	off;
	uint64_t	len;
};

/* The answer decided for a file of a size and a modification time. */
struct serve_ans {
	int			 status;	/* 200 206 304 412 416 */
	int			 nooverlap;	/* 416: Content-Range *\/SIZE */
	uint64_t		 size;		/* the file's */
	time_t			 mtime;
	struct serve_range	*ranges;	/* 206: nranges, malloc'd */
	size_t			 nranges;
	uint64_t		 body;		/* bytes of the answer's body */
};

/*
 * Copy the headers that matter from h and decide the encoding (gzip only
 * when gzip_ok: the build has zlib).  Never fails (allocation: fatal).
 */
void	serve_read(struct serve_req *, const struct evkeyvalq *h, int gzip_ok);
/* Free the copies (the struct itself is the caller's). */
void	serve_free(struct serve_req *);
/*
 * Decide the answer for a file of size bytes modified at mtime (0:
 * unknown).  0, or -1 without memory for the ranges (ans->ranges NULL).
 */
int	serve_eval(const struct serve_req *, uint64_t size, time_t mtime,
	    struct serve_ans *);
/* Free ans->ranges. */
void	serve_ans_free(struct serve_ans *);
/*
 * The head of multipart part i (i == nranges: the closing delimiter) in
 * buf (SERVE_PART_HEAD_MAX bytes); its length.
 */
size_t	serve_part(const struct serve_req *, const struct serve_ans *,
	    size_t i, char *buf);
/*
 * The answer's Content-Type: application/octet-stream, or
 * multipart/byteranges with the boundary (in buf, SERVE_TYPE_MAX bytes).
 */
const char *serve_type(const struct serve_req *, const struct serve_ans *,
	    char *buf);
/*
 * Add the answer's headers but Content-Type and Content-Length to out
 * (Last-Modified, Accept-Ranges, Content-Range, Vary, Content-Encoding).
 */
void	serve_head(const struct serve_req *, const struct serve_ans *,
	    struct evkeyvalq *out);

#endif /* AGENTD_SERVE_H */
