/*
 * internal.h -- helpers shared by proto's own files (parse.c, query.c,
 * files.c); not part of proto's contract.
 */
#ifndef PROTO_INTERNAL_H
#define PROTO_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include "proto.h"

#define PROTO_NAME_SHOWN	64	/* bytes of a client's key in a message */

/* Fill err with 500 internal_error "out of memory" and return -1. */
int	proto_oom(struct proto_err *);

/*
 * Parse body as a JSON object holding only the known fields (a
 * NULL-terminated list).  Returns 0 with *out set (the caller's to
 * json_decref), or -1 with err: invalid_json, or invalid_request for a top
 * level that is not an object or an unknown field.
 */
int	proto_load(const char *body, size_t len, const char *const *known,
	    json_t **out, struct proto_err *);

/* The value of a hex digit, or -1. */
int	proto_hex(int c);

/*
 * Percent-decode s[0..len) into out (at most size bytes; '+' is a space);
 * the decoded length goes to *outlen, which may exceed size.  -1 on a bad
 * escape.
 */
int	proto_unescape(const char *s, size_t len, char *out, size_t size,
	    size_t *outlen);

#endif /* PROTO_INTERNAL_H */
