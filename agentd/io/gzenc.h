/*
 * gzenc.h -- a small gzip encoder for answers (envd's GET /files with
 * Accept-Encoding: gzip): deflate blocks with the fixed Huffman codes and
 * greedy LZ77 matches (a 3-byte hash, one candidate, 32 KiB back, within
 * one gzenc_write()'s input), a valid gzip stream (RFC 1951, 1952) that
 * any gunzip reads.  It compresses less than zlib's deflate (no dynamic
 * codes, no lazy matching), at a few KB of code instead of zlib's 27 KB
 * deflate and trees.  The CRC is zlib's crc32(), which inflate links
 * anyway.  No shared state: any thread, one encoder per stream.
 */
#ifndef AGENTD_GZENC_H
#define AGENTD_GZENC_H

#include <stddef.h>

struct gzenc;

/* Output bytes gzenc_write() may need for n input bytes. */
#define GZENC_BOUND(n)	((n) + (n) / 8 + 32)

/* A new encoder, or NULL without memory. */
struct gzenc	*gzenc_new(void);
/*
 * Compress n bytes of in (the gzip header first at the first call; with
 * last, the end of the stream and its trailer after them) into out, which
 * holds GZENC_BOUND(n) bytes; the bytes written.
 */
size_t		 gzenc_write(struct gzenc *, const void *in, size_t n, int last,
		    void *out);
/* Free an encoder. */
void		 gzenc_free(struct gzenc *);

#endif /* AGENTD_GZENC_H */
