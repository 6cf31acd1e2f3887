/*
 * gzenc.c -- a small gzip encoder: fixed-Huffman deflate (see gzenc.h).
 */
#ifdef AGENTD_ZLIB
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "gzenc.h"

#define GZENC_HASH_BITS	14		/* the match table: 16384 slots */
#define GZENC_WINDOW	32768		/* bytes a match reaches back */
#define GZENC_MATCH_MAX	258

/* An encoder's state. */
struct gzenc {
	uLong		 crc;
	uint32_t	 size;		/* input bytes, modulo 2^32 */
	uint64_t	 bits;		/* pending output bits, LSB first */
	int		 nbits;
	int		 started;
	uint32_t	 head[1 << GZENC_HASH_BITS];	/* last position + 1 */
};

/* An output cursor. */
struct gzenc_out {
	struct gzenc	*z;
	uint8_t		*p;
};

static const uint16_t	gzenc_lbase[29] = { 3, 4, 5, 6, 7, 8, 9, 10, 11, 13,
	15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195,
	227, 258 };
static const uint16_t	gzenc_dbase[30] = { 1, 2, 3, 4, 5, 7, 9, 13, 17, 25,
	33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073,
	4097, 6145, 8193, 12289, 16385, 24577 };

static void	gzenc_put(struct gzenc_out *, uint32_t, int);
static void	gzenc_code(struct gzenc_out *, uint32_t, int);
static void	gzenc_sym(struct gzenc_out *, int);
static void	gzenc_match(struct gzenc_out *, size_t, size_t);

/* A new encoder. */
struct gzenc *
gzenc_new(void)
{
	struct gzenc	*z;

	if ((z = calloc(1, sizeof *z)) != NULL)
		z->crc = crc32(0, NULL, 0);
	return (z);
}

/* Free an encoder. */
void
gzenc_free(struct gzenc *z)
{
	free(z);
}

/* Append n bits of v, LSB first. */
static void
gzenc_put(struct gzenc_out *o, uint32_t v, int n)
{
	struct gzenc	*z = o->z;

	z->bits |= (uint64_t)v << z->nbits;
	z->nbits += n;
	while (z->nbits >= 8) {
		*o->p++ = (uint8_t)z->bits;
		z->bits >>= 8;
		z->nbits -= 8;
	}
}

/* Append a Huffman code of n bits, MSB first. */
static void
gzenc_code(struct gzenc_out *o, uint32_t c, int n)
{
	uint32_t	r = 0;
	int		i;

	for (i = 0; i < n; i++, c >>= 1)
		r = r << 1 | (c & 1);
	gzenc_put(o, r, n);
}

/* A literal/length symbol, in the fixed code. */
static void
gzenc_sym(struct gzenc_out *o, int s)
{
	if (s < 144)
		gzenc_code(o, 0x30 + (uint32_t)s, 8);
	else if (s < 256)
		gzenc_code(o, 0x190 + (uint32_t)s - 144, 9);
	else if (s < 280)
		gzenc_code(o, (uint32_t)s - 256, 7);
	else
		gzenc_code(o, 0xc0 + (uint32_t)s - 280, 8);
}

/* A match of len bytes dist back. */
static void
gzenc_match(struct gzenc_out *o, size_t len, size_t dist)
{
	int	k;

	for (k = 28; gzenc_lbase[k] > len; k--)
		;
	gzenc_sym(o, 257 + k);
	gzenc_put(o, (uint32_t)(len - gzenc_lbase[k]), k < 8 || k == 28 ? 0 :
	    (k - 4) / 4);
	for (k = 29; gzenc_dbase[k] > dist; k--)
		;
	gzenc_code(o, (uint32_t)k, 5);
	gzenc_put(o, (uint32_t)(dist - gzenc_dbase[k]), k < 4 ? 0 :
	    (k - 2) / 2);
}

/* Compress n bytes of in into out. */
size_t
gzenc_write(struct gzenc *z, const void *in, size_t n, int last, void *out)
{
	static const uint8_t	 hdr[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0,
	    0xff };
	struct gzenc_out	 o = { z, out };
	const uint8_t		*b = in;
	uint32_t		 h, cand;
	size_t			 i = 0, len, max;

	if (!z->started) {
		memcpy(o.p, hdr, sizeof hdr);
		o.p += sizeof hdr;
		z->started = 1;
	}
	if (n > 0) {
		z->crc = crc32(z->crc, b, (uInt)n);
		z->size += (uint32_t)n;
		memset(z->head, 0, sizeof z->head);
		gzenc_put(&o, 2, 3);	/* not final, fixed codes */
		while (i < n) {
			len = 0;
			if (i + 3 <= n) {
				h = ((uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 |
				    b[i + 2]) * 2654435761u >> (32 - GZENC_HASH_BITS);
				cand = z->head[h];
				z->head[h] = (uint32_t)i + 1;
				max = n - i < GZENC_MATCH_MAX ? n - i :
				    GZENC_MATCH_MAX;
				if (cand != 0 && i - (cand - 1) <= GZENC_WINDOW)
					while (len < max &&
					    b[cand - 1 + len] == b[i + len])
						len++;
			}
			if (len >= 3) {
				gzenc_match(&o, len, i - (cand - 1));
				i += len;
			} else
				gzenc_sym(&o, b[i++]);
		}
		gzenc_sym(&o, 256);
	}
	if (last) {
		gzenc_put(&o, 3, 3);	/* final, fixed codes, empty */
		gzenc_sym(&o, 256);
		gzenc_put(&o, 0, (8 - z->nbits) & 7);
		gzenc_put(&o, (uint32_t)z->crc, 32);
		gzenc_put(&o, z->size, 32);
	}
	return ((size_t)(o.p - (uint8_t *)out));
}
#endif /* AGENTD_ZLIB */
