/*
 * proto.c -- the module's common pieces: the error struct and the growable
 * output buffer that every renderer appends to.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define PROTO_BUF_MIN	256	/* bytes of a buffer's first allocation */

static int	proto_buf_grow(struct proto_buf *, size_t);

/* Fill err with status, code and a formatted message; return -1. */
int
proto_fail(struct proto_err *err, int status, const char *code,
    const char *fmt, ...)
{
	va_list	ap;

	if (err == NULL)
		return (-1);
	err->status = status;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return (-1);
}

/* Ensure room for n more bytes, doubling from PROTO_BUF_MIN; -1 on oom. */
static int
proto_buf_grow(struct proto_buf *b, size_t n)
{
	size_t	 need, cap;
	char	*p;

	if (b->oom)
		return (-1);
	if (n <= b->cap - b->len)
		return (0);
	if (n > SIZE_MAX - b->len)
		goto oom;
	need = b->len + n;
	cap = b->cap < PROTO_BUF_MIN ? PROTO_BUF_MIN : b->cap;
	while (cap < need) {
		if (cap > SIZE_MAX / 2) {
			cap = need;
			break;
		}
		cap *= 2;
	}
	if ((p = realloc(b->data, cap)) == NULL)
		goto oom;
	b->data = p;
	b->cap = cap;
	return (0);
oom:
	b->oom = 1;
	return (-1);
}

/* Grow the capacity to exactly cap bytes, if less; -1 on oom (b unchanged). */
int
proto_buf_reserve(struct proto_buf *b, size_t cap)
{
	char	*p;

	if (b->oom || cap <= b->cap)
		return (b->oom ? -1 : 0);
	if ((p = realloc(b->data, cap)) == NULL)
		return (-1);
	b->data = p;
	b->cap = cap;
	return (0);
}

/* Make room for n more bytes and return where they go; len is unchanged. */
char *
proto_buf_space(struct proto_buf *b, size_t n)
{
	if (proto_buf_grow(b, n) != 0)
		return (NULL);
	return (b->data + b->len);
}

/* Grow, then append len bytes (proto_buf_append's slow path). */
void
proto_buf_append_grow(struct proto_buf *b, const void *p, size_t len)
{
	if (len == 0 || proto_buf_grow(b, len) != 0)
		return;
	memcpy(b->data + b->len, p, len);
	b->len += len;
}

/* Append an unsigned decimal. */
void
proto_buf_u64(struct proto_buf *b, uint64_t n)
{
	char	tmp[20];
	size_t	i = sizeof tmp;

	do {
		tmp[--i] = (char)('0' + n % 10);
		n /= 10;
	} while (n != 0);
	proto_buf_append(b, tmp + i, sizeof tmp - i);
}

/* Append printf-formatted text (no terminating NUL is kept in len). */
void
proto_buf_printf(struct proto_buf *b, const char *fmt, ...)
{
	va_list	ap;
	size_t	room;
	int	n;

	/* The +1 keeps room for vsnprintf's NUL, which len then leaves out. */
	if (proto_buf_grow(b, 1) != 0)
		return;
	room = b->cap - b->len;
	va_start(ap, fmt);
	n = vsnprintf(b->data + b->len, room, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if ((size_t)n >= room) {
		if (proto_buf_grow(b, (size_t)n + 1) != 0)
			return;
		va_start(ap, fmt);
		n = vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = 1;
			return;
		}
	}
	b->len += (size_t)n;
}

/* Free the buffer's memory and zero it. */
void
proto_buf_free(struct proto_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->oom = 0;
}
