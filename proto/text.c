/*
 * text.c -- output as JSON text (encoding=text): UTF-8 validation, the
 * exact escaped length, escaping straight into the answer, cuts on UTF-8
 * boundaries, and cursors that point inside a chunk.
 */
#include <stdint.h>
#include <string.h>

#include "proto.h"

#define TEXT_ONES	0x0101010101010101ull
#define TEXT_HIGHS	0x8080808080808080ull
#define TEXT_SHIFT	32	/* bits of a cursor's chunk id */
#define TEXT_SKIP_MAX	((1u << 21) - 1) /* bytes into a chunk a cursor
					   says: the cursor stays below 2^53 */

static size_t	text_plain(const uint8_t *, size_t);

/* Extra bytes each ASCII byte takes escaped: 1 for \n and the like, 5 for \u00XX. */
static const uint8_t text_extra[128] = {
	5, 5, 5, 5, 5, 5, 5, 5, 1, 1, 1, 5, 1, 1, 5, 5,
	5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5,
	0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/*
 * Bytes at the start of p[0..len) that are ASCII needing no escape (no
 * control, '"', '\\'), 8 at a time: a block's lowest flagged byte is the
 * first that is not (a borrow only flags bytes above a real one).
 */
static size_t
text_plain(const uint8_t *p, size_t len)
{
	size_t		i = 0;
	uint64_t	x, q, s, m;

	for (; len - i >= 8; i += 8) {
		memcpy(&x, p + i, 8);
		q = x ^ (TEXT_ONES * '"');
		s = x ^ (TEXT_ONES * '\\');
		m = ((x - TEXT_ONES * 0x20) | (q - TEXT_ONES) |
		    (s - TEXT_ONES) | x) & TEXT_HIGHS;
		if (m != 0) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return (i + (size_t)__builtin_ctzll(m) / 8);
#else
			break;
#endif
		}
	}
	while (i < len && p[i] < 0x80 && text_extra[p[i]] == 0)
		i++;
	return (i);
}

/* The escaped length of p[0..len), or SIZE_MAX when it is not UTF-8. */
size_t
proto_text_len(const uint8_t *p, size_t len)
{
	size_t		i = 0, out = len, n;

	while (i < len) {
		if ((i += text_plain(p + i, len - i)) >= len)
			break;
		if (p[i] < 0x80) {
			out += text_extra[p[i++]];
			continue;
		}
		if ((n = proto_utf8_len(p + i, len - i)) == 0)
			return (SIZE_MAX);
		i += n;
	}
	return (out);
}

/* Write p[0..len) (valid UTF-8) escaped as JSON string contents into out. */
size_t
proto_text_write(char *out, const uint8_t *p, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t		i = 0, run, o = 0;
	uint8_t		c;

	while (i < len) {
		/* The longest run that needs no escape goes in one copy. */
		for (run = i; run < len; run++) {
			run += text_plain(p + run, len - run);
			if (run >= len)
				break;
			c = p[run];
			if (c < 0x80)
				break;	/* to escape */
			/* Valid UTF-8 (proto_text_len said): 2 to 4 bytes. */
			run += c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
		}
		memcpy(out + o, p + i, run - i);
		o += run - i;
		if ((i = run) >= len)
			break;
		c = p[i++];
		out[o++] = '\\';
		switch (c) {
		case '"':
		case '\\':
			out[o++] = (char)c;
			break;
		case '\n':
			out[o++] = 'n';
			break;
		case '\r':
			out[o++] = 'r';
			break;
		case '\t':
			out[o++] = 't';
			break;
		case '\b':
			out[o++] = 'b';
			break;
		case '\f':
			out[o++] = 'f';
			break;
		default:
			memcpy(out + o, "u00", 3);
			out[o + 3] = hex[c >> 4];
			out[o + 4] = hex[c & 15];
			o += 5;
			break;
		}
	}
	return (o);
}

/*
 * Append p[0..len) escaped (no quotes); -1 (nothing appended) if not UTF-8.
 * One pass: runs that need no escape, valid multibyte sequences included,
 * go in one copy each; an invalid byte undoes what was appended.
 */
int
proto_text_encode(struct proto_buf *b, const uint8_t *p, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t		i = 0, run, n, start = b->len;
	char		esc[6] = { '\\', 'u', '0', '0' };
	uint8_t		c;

	while (i < len) {
		for (run = i;;) {
			if ((run += text_plain(p + run, len - run)) >= len ||
			    p[run] < 0x80)
				break;
			if ((n = proto_utf8_len(p + run, len - run)) == 0) {
				if (!b->oom)
					b->len = start;
				return (-1);
			}
			run += n;
		}
		proto_buf_append(b, p + i, run - i);
		if (run >= len)
			break;
		c = p[run];
		i = run + 1;
		esc[1] = c == '"' ? '"' : c == '\\' ? '\\' : c == '\n' ? 'n' :
		    c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' :
		    c == '\f' ? 'f' : 'u';
		if (esc[1] != 'u') {
			proto_buf_append(b, esc, 2);
			continue;
		}
		esc[4] = hex[c >> 4];
		esc[5] = hex[c & 15];
		proto_buf_append(b, esc, 6);
	}
	return (0);
}

/* The largest cut at or before end that splits no UTF-8 sequence. */
size_t
proto_utf8_cut(const uint8_t *p, size_t end)
{
	size_t	i = end, n;
	uint8_t	c;

	while (i > 0 && end - i < 3 && (p[i - 1] & 0xc0) == 0x80)
		i--;
	if (i == 0)
		return (end);
	c = p[i - 1];
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return (end);
	return (i - 1 + n > end ? i - 1 : end);
}

/*
 * Whether p[0..len), not UTF-8, is so only at its ends: *lead continuation
 * bytes first (a character begun in the chunk before), *tail bytes of a
 * character cut short last (at most 3 each), UTF-8 between, not empty.
 */
int
proto_text_ends(const uint8_t *p, size_t len, size_t *lead, size_t *tail)
{
	size_t	l = 0, t;

	while (l < len && l < 3 && (p[l] & 0xc0) == 0x80)
		l++;
	t = len - proto_utf8_cut(p, len);
	if ((l == 0 && t == 0) || l + t >= len ||
	    proto_text_len(p + l, len - l - t) == SIZE_MAX)
		return (0);
	*lead = l;
	*tail = t;
	return (1);
}

/* Split a cursor into the chunk id it follows and the bytes of the next. */
void
proto_cursor_split(uint64_t cursor, uint64_t newest, uint64_t *after,
    size_t *skip)
{
	*after = cursor;
	*skip = 0;
	/* Ids past 2^32 are never cut inside: the cursor is the id. */
	if (cursor >> TEXT_SHIFT == 0 || newest >> TEXT_SHIFT != 0 ||
	    (cursor & 0xffffffffull) == 0)
		return;
	*skip = (size_t)(cursor >> TEXT_SHIFT);
	*after = (cursor & 0xffffffffull) - 1;
}

/* The cursor after taken bytes of chunk id; 0 when it cannot say it. */
uint64_t
proto_cursor_make(uint64_t id, size_t taken)
{
	if (id == 0 || id >> TEXT_SHIFT != 0 || taken == 0 ||
	    taken > TEXT_SKIP_MAX)
		return (0);
	return ((uint64_t)taken << TEXT_SHIFT | id);
}

/* PROTO_ENC_* of an encoding's name, or -1. */
int
proto_encoding(const char *s, size_t len)
{
	if (len == 6 && memcmp(s, "base64", 6) == 0)
		return (PROTO_ENC_BASE64);
	if (len == 4 && memcmp(s, "text", 4) == 0)
		return (PROTO_ENC_TEXT);
	return (-1);
}

/* The longest prefix of p[0..len) made of whole valid UTF-8 sequences. */
size_t
proto_utf8_valid(const uint8_t *p, size_t len)
{
	size_t		i = 0, n;
	uint64_t	x;

	while (i < len) {
		for (; len - i >= 8; i += 8) {
			memcpy(&x, p + i, 8);
			if ((x & TEXT_HIGHS) != 0)
				break;
		}
		while (i < len && p[i] < 0x80)
			i++;
		if (i >= len || (n = proto_utf8_len(p + i, len - i)) == 0)
			break;
		i += n;
	}
	return (i);
}
