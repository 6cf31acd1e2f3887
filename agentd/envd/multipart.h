/*
 * multipart.h -- a multipart/form-data body (RFC 7578) read in place:
 * the boundary from a Content-Type, then one part at a time, each with
 * its form name, its filename and its bytes (pointers into the body: no
 * copy).  Pure: no allocation, no I/O; safe on any thread.
 */
#ifndef AGENTD_MULTIPART_H
#define AGENTD_MULTIPART_H

#include <stddef.h>

#define MULTIPART_BOUNDARY_MAX	70	/* bytes of a boundary (RFC 2046) */
#define MULTIPART_NAME_MAX	4096	/* bytes of a name or filename */
#define MULTIPART_HEADERS_MAX	16384	/* bytes of a part's headers */

/* A body being read: set by multipart_init(), advanced by multipart_next(). */
struct multipart {
	const char	*body;
	size_t		 len;
	size_t		 off;		/* where the next part starts */
	int		 done;		/* the closing boundary was read */
	char		 delim[MULTIPART_BOUNDARY_MAX + 5];	/* "\r\n--" b */
	size_t		 delim_len;
};

/* A part. */
struct multipart_part {
	char		 name[MULTIPART_NAME_MAX];	/* "" when none */
	char		 filename[MULTIPART_NAME_MAX];	/* "" when none */
	int		 has_filename;
	const char	*data;
	size_t		 len;
};

/*
 * Take the boundary of a Content-Type ("multipart/form-data;
 * boundary=..."): 0, or -1 with cause (not multipart, no boundary, or one
 * RFC 2046 does not allow).
 */
int	multipart_init(struct multipart *, const char *content_type,
	    const char *body, size_t len, char *cause, size_t causelen);
/*
 * The next part: 1 with p filled, 0 at the end (the closing boundary), or
 * -1 with cause when the body is malformed (no opening boundary, a part
 * without its headers' end or its closing boundary, a header too long, a
 * Content-Disposition that is not form-data).
 */
int	multipart_next(struct multipart *, struct multipart_part *p,
	    char *cause, size_t causelen);

/*
 * A parameter of a header value such as `form-data; name="a";
 * filename="b"` (case-insensitive name; a quoted value unescaped): 1 with
 * out filled, 0 when absent, -1 when malformed or longer than outlen - 1.
 */
int	multipart_param(const char *value, size_t len, const char *param,
	    char *out, size_t outlen);

#endif /* AGENTD_MULTIPART_H */
