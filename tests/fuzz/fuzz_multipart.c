/*
 * fuzz_multipart.c -- libFuzzer harness for agentd/envd/multipart.c: the
 * input's first line is a Content-Type, the rest the body.  Checked: no
 * crash or leak (ASan, UBSan); every part's bytes lie within the body, in
 * order, and its names are NUL-terminated within their buffers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FZ_MAX	(64u << 10)	/* bytes of input looked at */

/* Fail loudly: libFuzzer keeps the input. */
#define FZ_ASSERT(c) do {						\
	if (!(c)) {							\
		fprintf(stderr, "fuzz_multipart: %s:%d: %s\n", __FILE__,\
		    __LINE__, #c);					\
		abort();						\
	}								\
} while (0)

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct multipart_part	 p;
	struct multipart		 m;
	char				*ct, *body, cause[256];
	const char			*nl, *last;
	size_t				 ctlen, blen;
	int				 r, n = 0;

	if (size > FZ_MAX)
		size = FZ_MAX;
	nl = memchr(data, '\n', size);
	ctlen = nl != NULL ? (size_t)(nl - (const char *)data) : size;
	ct = malloc(ctlen + 1);
	memcpy(ct, data, ctlen);
	ct[ctlen] = '\0';
	blen = nl != NULL ? size - ctlen - 1 : 0;
	/* The body in a buffer of its own size: ASan sees any overread. */
	body = malloc(blen ? blen : 1);
	if (blen)
		memcpy(body, nl + 1, blen);
	if (multipart_init(&m, ct, body, blen, cause, sizeof cause) == 0) {
		last = body;
		while ((r = multipart_next(&m, &p, cause, sizeof cause)) == 1) {
			FZ_ASSERT(p.data >= last);
			FZ_ASSERT(p.data + p.len <= body + blen);
			FZ_ASSERT(memchr(p.name, '\0', sizeof p.name) != NULL);
			FZ_ASSERT(memchr(p.filename, '\0',
			    sizeof p.filename) != NULL);
			last = p.data + p.len;
			FZ_ASSERT(++n <= (int)blen);
		}
		FZ_ASSERT(r == 0 || (r == -1 && cause[0] != '\0'));
	}
	free(body);
	free(ct);
	return (0);
}
