/*
 * base64.c -- standard base64 (RFC 4648 section 4).  Encoding writes
 * straight into a proto_buf, so output chunks reach the answer with one
 * pass and no temporary copy.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define B64_BAD		0xff	/* not in the alphabet */

static size_t	b64_encode_wide(const uint8_t *, size_t, char *);
static inline uint64_t b64_pair(uint64_t);

static const char b64_alphabet[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/*
 * The encodings of every 12-bit value, two characters each (8 KiB): a group
 * of 3 bytes takes two lookups instead of four, about twice as fast.
 */
#define B64_ROW(c)							\
	c"A" c"B" c"C" c"D" c"E" c"F" c"G" c"H" c"I" c"J" c"K" c"L" c"M" \
	c"N" c"O" c"P" c"Q" c"R" c"S" c"T" c"U" c"V" c"W" c"X" c"Y" c"Z" \
	c"a" c"b" c"c" c"d" c"e" c"f" c"g" c"h" c"i" c"j" c"k" c"l" c"m" \
	c"n" c"o" c"p" c"q" c"r" c"s" c"t" c"u" c"v" c"w" c"x" c"y" c"z" \
	c"0" c"1" c"2" c"3" c"4" c"5" c"6" c"7" c"8" c"9" c"+" c"/"
static const char b64_pairs[2 * 4096 + 1] =
	B64_ROW("A") B64_ROW("B") B64_ROW("C") B64_ROW("D") B64_ROW("E")
	B64_ROW("F") B64_ROW("G") B64_ROW("H") B64_ROW("I") B64_ROW("J")
	B64_ROW("K") B64_ROW("L") B64_ROW("M") B64_ROW("N") B64_ROW("O")
	B64_ROW("P") B64_ROW("Q") B64_ROW("R") B64_ROW("S") B64_ROW("T")
	B64_ROW("U") B64_ROW("V") B64_ROW("W") B64_ROW("X") B64_ROW("Y")
	B64_ROW("Z") B64_ROW("a") B64_ROW("b") B64_ROW("c") B64_ROW("d")
	B64_ROW("e") B64_ROW("f") B64_ROW("g") B64_ROW("h") B64_ROW("i")
	B64_ROW("j") B64_ROW("k") B64_ROW("l") B64_ROW("m") B64_ROW("n")
	B64_ROW("o") B64_ROW("p") B64_ROW("q") B64_ROW("r") B64_ROW("s")
	B64_ROW("t") B64_ROW("u") B64_ROW("v") B64_ROW("w") B64_ROW("x")
	B64_ROW("y") B64_ROW("z") B64_ROW("0") B64_ROW("1") B64_ROW("2")
	B64_ROW("3") B64_ROW("4") B64_ROW("5") B64_ROW("6") B64_ROW("7")
	B64_ROW("8") B64_ROW("9") B64_ROW("+") B64_ROW("/");
#undef B64_ROW

/* Decode table: each alphabet byte's value, B64_BAD for every other byte. */
static const uint8_t b64_value[256] = {
#define X B64_BAD
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, 62, X, X, X, 63,
	52, 53, 54, 55, 56, 57, 58, 59, 60, 61, X, X, X, X, X, X,
	X, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
	15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, X, X, X, X, X,
	X, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
	41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
	X, X, X, X, X, X, X, X, X, X, X, X, X, X, X, X,
#undef X
};

/* Length of the padded encoding of len bytes (SIZE_MAX if it overflows). */
size_t
proto_b64_encoded_len(size_t len)
{
	size_t	groups = len / 3 + (len % 3 != 0);

	if (groups > SIZE_MAX / 4)
		return (SIZE_MAX);
	return (groups * 4);
}

/*
 * Encode whole groups of in[0..len) into out, 12 bytes into 16 characters
 * a round: a 64-bit load holds two groups, four pair lookups make one
 * 64-bit store (about twice as fast as a group at a time).  Stops while 16
 * bytes are left, as each load reads 2 bytes past the 6 it encodes; returns
 * the bytes encoded, a multiple of 3.  Little-endian only: elsewhere it
 * leaves everything to the caller's loop.
 */
static size_t
b64_encode_wide(const uint8_t *in, size_t len, char *out)
{
	size_t		i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t	x, y;

	for (; len - i >= 16; i += 12, out += 16) {
		memcpy(&x, in + i, 8);
		memcpy(&y, in + i + 6, 8);
		x = __builtin_bswap64(x);
		y = __builtin_bswap64(y);
		x = b64_pair(x >> 52) | b64_pair(x >> 40) << 16 |
		    b64_pair(x >> 28) << 32 | b64_pair(x >> 16) << 48;
		y = b64_pair(y >> 52) | b64_pair(y >> 40) << 16 |
		    b64_pair(y >> 28) << 32 | b64_pair(y >> 16) << 48;
		memcpy(out, &x, 8);
		memcpy(out + 8, &y, 8);
	}
#else
	(void)in;
	(void)len;
	(void)out;
#endif
	return (i);
}

/* The two characters of a 12-bit value (its low 12 bits), as they lie. */
static inline uint64_t
b64_pair(uint64_t v)
{
	uint16_t	c;

	memcpy(&c, b64_pairs + 2 * (v & 0xfff), 2);
	return (c);
}

/* Append the padded base64 of p[0..len) to b, encoding in place. */
void
proto_b64_encode(struct proto_buf *b, const void *p, size_t len)
{
	const uint8_t	*in = p;
	size_t		 n, i;
	char		*out;
	uint32_t	 v;

	if (len == 0)
		return;
	n = proto_b64_encoded_len(len);
	if (n == SIZE_MAX) {
		b->oom = 1;
		return;
	}
	if ((out = proto_buf_space(b, n)) == NULL)
		return;
	i = b64_encode_wide(in, len, out);
	out += i / 3 * 4;
	for (; len - i >= 3; i += 3) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		memcpy(out, b64_pairs + 2 * (v >> 12), 2);
		memcpy(out + 2, b64_pairs + 2 * (v & 0xfff), 2);
		out += 4;
	}
	if (len - i == 1) {
		v = (uint32_t)in[i] << 16;
		out[0] = b64_alphabet[v >> 18];
		out[1] = b64_alphabet[(v >> 12) & 63];
		out[2] = '=';
		out[3] = '=';
	} else if (len - i == 2) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[0] = b64_alphabet[v >> 18];
		out[1] = b64_alphabet[(v >> 12) & 63];
		out[2] = b64_alphabet[(v >> 6) & 63];
		out[3] = '=';
	}
	b->len += n;
}

/* Decode s[0..len), padded or not, into a malloc'd *out; -1 on bad input. */
int
proto_b64_decode(const char *s, size_t len, uint8_t **out, size_t *outlen)
{
	const uint8_t	*in = (const uint8_t *)s;
	size_t		 full, tail, n, i, o;
	uint8_t		*buf, a, b, c, d;

	*out = NULL;
	*outlen = 0;
	if (len == 0)
		return (0);

	/* Padding: "xx==" or "xxx=", and then the length is a multiple of 4. */
	if (len % 4 == 0 && in[len - 1] == '=') {
		len--;
		if (in[len - 1] == '=')
			len--;
	}
	tail = len % 4;
	if (tail == 1)
		return (-1);
	full = len / 4;
	n = full * 3 + (tail == 0 ? 0 : tail - 1);
	if ((buf = malloc(n)) == NULL)
		return (-1);

	for (i = 0, o = 0; i < full * 4; i += 4, o += 3) {
		a = b64_value[in[i]];
		b = b64_value[in[i + 1]];
		c = b64_value[in[i + 2]];
		d = b64_value[in[i + 3]];
		if ((a | b | c | d) & 0xc0)
			goto bad;
		buf[o] = (uint8_t)(a << 2 | b >> 4);
		buf[o + 1] = (uint8_t)(b << 4 | c >> 2);
		buf[o + 2] = (uint8_t)(c << 6 | d);
	}
	if (tail >= 2) {
		a = b64_value[in[i]];
		b = b64_value[in[i + 1]];
		if ((a | b) & 0xc0)
			goto bad;
		buf[o] = (uint8_t)(a << 2 | b >> 4);
		if (tail == 3) {
			c = b64_value[in[i + 2]];
			if (c & 0xc0)
				goto bad;
			buf[o + 1] = (uint8_t)(b << 4 | c >> 2);
		}
	}
	*out = buf;
	*outlen = n;
	return (0);
bad:
	free(buf);
	return (-1);
}
