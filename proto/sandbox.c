/*
 * sandbox.c -- the data of the sandbox endpoints: the body of POST
 * /v1/sandbox/resumed.  Pure: no I/O.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "internal.h"
#include "proto.h"

static const char *const proto_resumed_fields[] = {
	"unix_ms", "entropy", NULL
};

/* Whether body[0..len) is only JSON whitespace (an empty body). */
static int
proto_blank(const char *body, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++) {
		if (strchr(" \t\r\n", body[i]) == NULL || body[i] == '\0')
			return (0);
	}
	return (1);
}

/* POST /v1/sandbox/resumed: unix_ms and entropy, both optional. */
int
proto_parse_resumed(const char *body, size_t len, struct proto_resumed *r,
    struct proto_err *err)
{
	json_t		*root, *v;
	uint8_t		*buf;
	size_t		 n;

	memset(r, 0, sizeof *r);
	r->unix_ms = -1;
	if (body == NULL || proto_blank(body, len))
		return (0);
	if (proto_load(body, len, proto_resumed_fields, &root, err) != 0)
		return (-1);
	if ((v = json_object_get(root, "unix_ms")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > PROTO_UNIX_MS_MAX) {
			json_decref(root);
			return (proto_fail(err, 400, "invalid_request",
			    "field 'unix_ms' must be an integer of "
			    "milliseconds since the epoch, 0 to %lld",
			    (long long)PROTO_UNIX_MS_MAX));
		}
		r->unix_ms = json_integer_value(v);
	}
	if ((v = json_object_get(root, "entropy")) != NULL) {
		if (!json_is_string(v) || proto_b64_decode(json_string_value(v),
		    json_string_length(v), &buf, &n) != 0) {
			json_decref(root);
			return (proto_fail(err, 400, "invalid_request",
			    "field 'entropy' must be standard base64"));
		}
		if (n < PROTO_ENTROPY_MIN || n > PROTO_ENTROPY_MAX) {
			free(buf);
			json_decref(root);
			return (proto_fail(err, 400, "invalid_request",
			    "field 'entropy' holds %zu bytes; it must hold "
			    "%d to %d", n, PROTO_ENTROPY_MIN,
			    PROTO_ENTROPY_MAX));
		}
		memcpy(r->entropy, buf, n);
		r->entropy_len = n;
		explicit_bzero(buf, n);
		free(buf);
	}
	json_decref(root);
	return (0);
}
