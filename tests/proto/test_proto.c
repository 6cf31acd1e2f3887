/*
 * test_proto.c -- Check unit tests of proto/: every parser's happy path and
 * errors, base64, query strings, signal names, and every renderer, whose
 * output is parsed back with jansson and checked field by field.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <check.h>
#include <jansson.h>

#include "proto.h"

static const struct proto_limits lim = {
	.ring_bytes_default = 1u << 20,
	.ring_bytes_min = 4096,
	.ring_bytes_max = 64u << 20,
};

static void	 expect_err(int, const struct proto_err *, int, const char *,
		    const char *);
static int	 create(const char *, struct proto_create *,
		    struct proto_err *);
static json_t	*load(const struct proto_buf *);
static json_t	*render_json(const struct proto_session *,
		    const struct proto_window *, int64_t);
static void	 check_keys(json_t *, const char *const *);
static void	 fill(uint8_t *, size_t, uint32_t *);
static struct proto_session sample_session(void);
static Suite	*proto_suite(void);

/* Assert that a parser failed with this status, code and message part. */
static void
expect_err(int rc, const struct proto_err *err, int status, const char *code,
    const char *needle)
{
	ck_assert_int_eq(rc, -1);
	ck_assert_int_eq(err->status, status);
	ck_assert_str_eq(err->code, code);
	ck_assert_msg(strstr(err->message, needle) != NULL,
	    "message \"%s\" lacks \"%s\"", err->message, needle);
}

/* proto_parse_create on a C string. */
static int
create(const char *json, struct proto_create *c, struct proto_err *err)
{
	return (proto_parse_create(json, strlen(json), &lim, c, err));
}

/* Parse a buffer's bytes as JSON, failing the test when they are not. */
static json_t *
load(const struct proto_buf *b)
{
	json_error_t	 jerr;
	json_t		*j;

	ck_assert_int_eq(b->oom, 0);
	j = json_loadb(b->data, b->len, JSON_REJECT_DUPLICATES, &jerr);
	ck_assert_msg(j != NULL, "rendered JSON does not parse: %s: %.*s",
	    jerr.text, (int)(b->len > 400 ? 400 : b->len), b->data);
	return (j);
}

/* Render a session and parse it back. */
static json_t *
render_json(const struct proto_session *s, const struct proto_window *w,
    int64_t written)
{
	struct proto_buf	 b = { 0 };
	json_t			*j;

	proto_render_session(&b, s, w, written);
	j = load(&b);
	proto_buf_free(&b);
	return (j);
}

/* Assert that an object's keys are exactly these, in this order. */
static void
check_keys(json_t *o, const char *const *keys)
{
	const char	*k;
	json_t		*v;
	size_t		 i = 0;

	ck_assert(json_is_object(o));
	json_object_foreach(o, k, v) {
		ck_assert_msg(keys[i] != NULL, "extra key %s", k);
		ck_assert_str_eq(k, keys[i]);
		i++;
	}
	ck_assert_msg(keys[i] == NULL, "missing key %s", keys[i]);
}

/* Pseudo-random bytes (xorshift32), reproducible. */
static void
fill(uint8_t *p, size_t n, uint32_t *state)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		*state ^= *state << 13;
		*state ^= *state >> 17;
		*state ^= *state << 5;
		p[i] = (uint8_t)*state;
	}
}

static char *const sample_argv[] = { "/bin/sh", "-c", "make test", NULL };

/* A running tty session like API.md's example. */
static struct proto_session
sample_session(void)
{
	struct proto_session s = {
		.id = "s1", .pid = 4242, .tty = 1, .rows = 24, .cols = 80,
		.argv = sample_argv, .cwd = "/work", .user = "root",
		.exited = 0, .exit_code = 0, .signo = 0, .timed_out = 0,
		.started_ms = 1796209200000LL, .ended_ms = -1,
		.last_chunk = 17, .bytes_out = 81234,
	};

	return (s);
}

static const char *const session_keys[] = {
	"id", "pid", "tty", "rows", "cols", "argv", "cwd", "user", "state",
	"exit_code", "signal", "timed_out", "started_at", "ended_at",
	"last_chunk", "bytes_out", "oom_killed", "usage", "stdin_bytes", NULL
};

/* ---- create ---- */

START_TEST(create_cmd_defaults)
{
	struct proto_create	c;
	struct proto_err	e;

	ck_assert_int_eq(create("{\"cmd\": \"make test\"}", &c, &e), 0);
	ck_assert_str_eq(c.argv[0], "/bin/sh");
	ck_assert_str_eq(c.argv[1], "-c");
	ck_assert_str_eq(c.argv[2], "make test");
	ck_assert_ptr_null(c.argv[3]);
	ck_assert_ptr_null(c.env);
	ck_assert_ptr_null(c.cwd);
	ck_assert_ptr_null(c.user);
	ck_assert_int_eq(c.tty, 0);
	ck_assert_uint_eq(c.rows, 24);
	ck_assert_uint_eq(c.cols, 80);
	ck_assert_int_eq(c.stdin_open, 1);
	ck_assert_int_eq(c.timeout_ms, 0);
	ck_assert_int_eq(c.yield_ms, 0);
	ck_assert_int_eq(c.wait_ms, 0);
	ck_assert_uint_eq(c.max_bytes, 65536);
	ck_assert_uint_eq(c.ring_bytes, 1u << 20);
	ck_assert_str_eq(c.id, "");
	proto_create_free(&c);
	ck_assert_ptr_null(c.argv);
	proto_create_free(&c);		/* twice is fine */
}
END_TEST

START_TEST(create_cmd_shell_and_empty)
{
	struct proto_create	c;
	struct proto_err	e;

	ck_assert_int_eq(create("{\"cmd\":\"echo hi\",\"shell\":\"/bin/bash\"}",
	    &c, &e), 0);
	ck_assert_str_eq(c.argv[0], "/bin/bash");
	ck_assert_str_eq(c.argv[2], "echo hi");
	proto_create_free(&c);
	ck_assert_int_eq(create("{\"cmd\":\"\"}", &c, &e), 0);
	ck_assert_str_eq(c.argv[2], "");
	proto_create_free(&c);
	/* shell is ignored (but type-checked) with argv. */
	ck_assert_int_eq(create("{\"argv\":[\"ls\"],\"shell\":\"/bin/zsh\"}",
	    &c, &e), 0);
	ck_assert_str_eq(c.argv[0], "ls");
	ck_assert_ptr_null(c.argv[1]);
	proto_create_free(&c);
}
END_TEST

START_TEST(create_login)
{
	struct proto_create	c;
	struct proto_err	e;

	ck_assert_int_eq(create("{\"cmd\":\"env\",\"login\":true,"
	    "\"shell\":\"/bin/bash\"}", &c, &e), 0);
	ck_assert_str_eq(c.argv[0], "/bin/bash");
	ck_assert_str_eq(c.argv[1], "-lc");
	ck_assert_str_eq(c.argv[2], "env");
	proto_create_free(&c);
	ck_assert_int_eq(create("{\"cmd\":\"env\",\"login\":false}", &c,
	    &e), 0);
	ck_assert_str_eq(c.argv[1], "-c");
	proto_create_free(&c);
	ck_assert_int_eq(create("{\"argv\":[\"env\"],\"login\":true}", &c,
	    &e), -1);
	ck_assert_int_eq(e.status, 400);
	ck_assert_ptr_nonnull(strstr(e.message, "login"));
	ck_assert_int_eq(create("{\"cmd\":\"env\",\"login\":1}", &c, &e),
	    -1);
	ck_assert_str_eq(e.code, "invalid_request");
}
END_TEST

START_TEST(create_argv)
{
	struct proto_create	c;
	struct proto_err	e;

	ck_assert_int_eq(create("{\"argv\":[\"ls\",\"-la\",\"\",\"caf\\u00e9\"]}",
	    &c, &e), 0);
	ck_assert_str_eq(c.argv[0], "ls");
	ck_assert_str_eq(c.argv[1], "-la");
	ck_assert_str_eq(c.argv[2], "");
	ck_assert_str_eq(c.argv[3], "caf\xc3\xa9");
	ck_assert_ptr_null(c.argv[4]);
	proto_create_free(&c);
	/* null counts as absent. */
	ck_assert_int_eq(create("{\"argv\":[\"true\"],\"cmd\":null,\"cwd\":null,"
	    "\"tty\":null,\"env\":null,\"id\":null,\"rows\":null}", &c, &e), 0);
	ck_assert_str_eq(c.argv[0], "true");
	ck_assert_uint_eq(c.rows, 24);
	proto_create_free(&c);
}
END_TEST

START_TEST(create_all_fields)
{
	struct proto_create	c;
	struct proto_err	e;

	ck_assert_int_eq(create("{\"argv\":[\"vim\"],\"tty\":true,\"rows\":40,"
	    "\"cols\":120,\"cwd\":\"/work\",\"env\":{\"A\":\"1\",\"B\":\"\","
	    "\"LANG\":\"C.UTF-8\",\"X\":\"a=b\"},\"user\":\"nobody\","
	    "\"stdin\":false,\"timeout_ms\":5000,\"yield_ms\":100,"
	    "\"wait_ms\":200,\"max_bytes\":10,\"ring_bytes\":8192,"
	    "\"id\":\"a.b_c-1\"}", &c, &e), 0);
	ck_assert_str_eq(c.argv[0], "vim");
	ck_assert_int_eq(c.tty, 1);
	ck_assert_uint_eq(c.rows, 40);
	ck_assert_uint_eq(c.cols, 120);
	ck_assert_str_eq(c.cwd, "/work");
	ck_assert_str_eq(c.env[0], "A=1");
	ck_assert_str_eq(c.env[1], "B=");
	ck_assert_str_eq(c.env[2], "LANG=C.UTF-8");
	ck_assert_str_eq(c.env[3], "X=a=b");
	ck_assert_ptr_null(c.env[4]);
	ck_assert_str_eq(c.user, "nobody");
	ck_assert_int_eq(c.stdin_open, 0);
	ck_assert_int_eq(c.timeout_ms, 5000);
	ck_assert_int_eq(c.yield_ms, 100);
	ck_assert_int_eq(c.wait_ms, 200);
	ck_assert_uint_eq(c.max_bytes, 10);
	ck_assert_uint_eq(c.ring_bytes, 8192);
	ck_assert_str_eq(c.id, "a.b_c-1");
	proto_create_free(&c);
	/* An empty env object gives no env. */
	ck_assert_int_eq(create("{\"cmd\":\"x\",\"env\":{}}", &c, &e), 0);
	ck_assert_ptr_null(c.env);
	proto_create_free(&c);
}
END_TEST

/* "limits": three integers >= 0, memory 0 or at least 1 MiB, nothing else. */
START_TEST(create_limits)
{
	struct proto_create	c;
	struct proto_err	e;

	ck_assert_int_eq(create("{\"cmd\":\"x\",\"limits\":{\"memory_bytes\":"
	    "1048576,\"pids\":64,\"cpu_percent\":150}}", &c, &e), 0);
	ck_assert_uint_eq(c.limit_memory, 1048576);
	ck_assert_uint_eq(c.limit_pids, 64);
	ck_assert_uint_eq(c.limit_cpu, 150);
	proto_create_free(&c);
	ck_assert_int_eq(create("{\"cmd\":\"x\",\"limits\":{\"memory_bytes\":0}}",
	    &c, &e), 0);
	ck_assert_uint_eq(c.limit_memory, 0);
	proto_create_free(&c);
	ck_assert_int_eq(create("{\"cmd\":\"x\",\"limits\":null}", &c, &e), 0);
	ck_assert_uint_eq(c.limit_pids, 0);
	proto_create_free(&c);
	expect_err(create("{\"cmd\":\"x\",\"limits\":{\"memory_bytes\":1048575}}",
	    &c, &e), &e, 400, "invalid_request", "memory_bytes");
	expect_err(create("{\"cmd\":\"x\",\"limits\":{\"pids\":-1}}", &c, &e),
	    &e, 400, "invalid_request", "pids");
	expect_err(create("{\"cmd\":\"x\",\"limits\":{\"cpu_percent\":\"50\"}}",
	    &c, &e), &e, 400, "invalid_request", "cpu_percent");
	expect_err(create("{\"cmd\":\"x\",\"limits\":{\"pids\":1.5}}", &c, &e),
	    &e, 400, "invalid_request", "pids");
	expect_err(create("{\"cmd\":\"x\",\"limits\":{\"swap\":1}}", &c, &e),
	    &e, 400, "invalid_request", "limits.swap");
	expect_err(create("{\"cmd\":\"x\",\"limits\":[1]}", &c, &e), &e, 400,
	    "invalid_request", "limits");
}
END_TEST

START_TEST(create_boundaries_and_clamps)
{
	struct proto_create	c;
	struct proto_err	e;
	char			json[256];

	ck_assert_int_eq(create("{\"cmd\":\"x\",\"rows\":65535,\"cols\":1,"
	    "\"yield_ms\":60001,\"wait_ms\":1000000000000,"
	    "\"max_bytes\":1099511627776,\"timeout_ms\":9223372036854775807,"
	    "\"ring_bytes\":4096}", &c, &e), 0);
	ck_assert_uint_eq(c.rows, 65535);
	ck_assert_uint_eq(c.cols, 1);
	ck_assert_int_eq(c.yield_ms, PROTO_WAIT_MAX_MS);
	ck_assert_int_eq(c.wait_ms, PROTO_WAIT_MAX_MS);
	ck_assert_uint_eq(c.max_bytes, PROTO_MAX_BYTES_MAX);
	ck_assert_int_eq(c.timeout_ms, INT64_MAX);
	ck_assert_uint_eq(c.ring_bytes, 4096);
	proto_create_free(&c);

	ck_assert_int_eq(create("{\"cmd\":\"x\",\"ring_bytes\":67108864,"
	    "\"max_bytes\":0,\"yield_ms\":60000}", &c, &e), 0);
	ck_assert_uint_eq(c.ring_bytes, 64u << 20);
	ck_assert_uint_eq(c.max_bytes, 0);
	ck_assert_int_eq(c.yield_ms, 60000);
	proto_create_free(&c);

	snprintf(json, sizeof json, "{\"cmd\":\"x\",\"id\":\"%s\"}",
	    "0123456789012345678901234567890123456789012345678901234567890123");
	ck_assert_int_eq(create(json, &c, &e), 0);
	ck_assert_uint_eq(strlen(c.id), 64);
	proto_create_free(&c);

	/* Without limits, the documented defaults. */
	ck_assert_int_eq(proto_parse_create("{\"cmd\":\"x\"}", 11, NULL, &c, &e),
	    0);
	ck_assert_uint_eq(c.ring_bytes, 1u << 20);
	proto_create_free(&c);
}
END_TEST

START_TEST(create_cmd_xor_argv)
{
	struct proto_create	c;
	struct proto_err	e;

	expect_err(create("{\"cmd\":\"x\",\"argv\":[\"y\"]}", &c, &e), &e, 400,
	    "invalid_request", "'cmd' and 'argv'");
	ck_assert_ptr_null(c.argv);
	expect_err(create("{}", &c, &e), &e, 400, "invalid_request",
	    "'cmd' and 'argv'");
	expect_err(create("{\"tty\":true}", &c, &e), &e, 400,
	    "invalid_request", "'cmd' and 'argv'");
	expect_err(create("{\"cmd\":null,\"argv\":null}", &c, &e), &e, 400,
	    "invalid_request", "'cmd' and 'argv'");
}
END_TEST

/* Bodies with one wrong field, and the field the message must name. */
static const struct {
	const char	*json;
	const char	*field;
} create_bad[] = {
	{ "{\"cmd\":5}", "'cmd'" },
	{ "{\"cmd\":[\"ls\"]}", "'cmd'" },
	{ "{\"argv\":[]}", "'argv'" },
	{ "{\"argv\":\"ls -la\"}", "'argv'" },
	{ "{\"argv\":[1]}", "'argv'" },
	{ "{\"argv\":[\"a\",null]}", "'argv'" },
	{ "{\"argv\":{\"a\":\"b\"}}", "'argv'" },
	{ "{\"cmd\":\"x\",\"shell\":\"\"}", "'shell'" },
	{ "{\"cmd\":\"x\",\"shell\":1}", "'shell'" },
	{ "{\"argv\":[\"x\"],\"shell\":false}", "'shell'" },
	{ "{\"cmd\":\"x\",\"tty\":1}", "'tty'" },
	{ "{\"cmd\":\"x\",\"tty\":\"true\"}", "'tty'" },
	{ "{\"cmd\":\"x\",\"rows\":1.0}", "'rows'" },
	{ "{\"cmd\":\"x\",\"rows\":\"1\"}", "'rows'" },
	{ "{\"cmd\":\"x\",\"rows\":true}", "'rows'" },
	{ "{\"cmd\":\"x\",\"rows\":0}", "field 'rows' must be an integer in 1..65535" },
	{ "{\"cmd\":\"x\",\"rows\":65536}", "'rows'" },
	{ "{\"cmd\":\"x\",\"rows\":-1}", "'rows'" },
	{ "{\"cmd\":\"x\",\"cols\":0}", "field 'cols' must be an integer in 1..65535" },
	{ "{\"cmd\":\"x\",\"cols\":1e2}", "'cols'" },
	{ "{\"cmd\":\"x\",\"cwd\":\"\"}", "'cwd'" },
	{ "{\"cmd\":\"x\",\"cwd\":5}", "'cwd'" },
	{ "{\"cmd\":\"x\",\"user\":\"\"}", "'user'" },
	{ "{\"cmd\":\"x\",\"user\":0}", "'user'" },
	{ "{\"cmd\":\"x\",\"stdin\":0}", "'stdin'" },
	{ "{\"cmd\":\"x\",\"timeout_ms\":-1}", "field 'timeout_ms' must be an integer >= 0" },
	{ "{\"cmd\":\"x\",\"timeout_ms\":1.5}", "'timeout_ms'" },
	{ "{\"cmd\":\"x\",\"yield_ms\":-1}", "'yield_ms'" },
	{ "{\"cmd\":\"x\",\"yield_ms\":\"5\"}", "'yield_ms'" },
	{ "{\"cmd\":\"x\",\"wait_ms\":false}", "'wait_ms'" },
	{ "{\"cmd\":\"x\",\"max_bytes\":-1}", "'max_bytes'" },
	{ "{\"cmd\":\"x\",\"max_bytes\":65536.0}", "'max_bytes'" },
	{ "{\"cmd\":\"x\",\"ring_bytes\":4095}", "field 'ring_bytes' must be an integer in 4096..67108864" },
	{ "{\"cmd\":\"x\",\"ring_bytes\":67108865}", "'ring_bytes'" },
	{ "{\"cmd\":\"x\",\"ring_bytes\":\"1M\"}", "'ring_bytes'" },
	{ "{\"cmd\":\"x\",\"env\":[]}", "'env'" },
	{ "{\"cmd\":\"x\",\"env\":\"A=1\"}", "'env'" },
	{ "{\"cmd\":\"x\",\"env\":{\"\":\"x\"}}", "'env'" },
	{ "{\"cmd\":\"x\",\"env\":{\"A=B\":\"x\"}}", "'env'" },
	{ "{\"cmd\":\"x\",\"env\":{\"A\":\"1\",\"B\":1}}", "'env'" },
	{ "{\"cmd\":\"x\",\"env\":{\"A\":null}}", "'env'" },
	{ "{\"cmd\":\"x\",\"id\":\"\"}", "'id'" },
	{ "{\"cmd\":\"x\",\"id\":\"a/b\"}", "'id'" },
	{ "{\"cmd\":\"x\",\"id\":\"a b\"}", "'id'" },
	{ "{\"cmd\":\"x\",\"id\":\"caf\\u00e9\"}", "'id'" },
	{ "{\"cmd\":\"x\",\"id\":5}", "'id'" },
	{ "{\"cmd\":\"x\",\"id\":"
	  "\"01234567890123456789012345678901234567890123456789012345678901234\"}",
	  "'id'" },
};

START_TEST(create_bad_field)
{
	struct proto_create	c;
	struct proto_err	e;

	expect_err(create(create_bad[_i].json, &c, &e), &e, 400,
	    "invalid_request", create_bad[_i].field);
	/* A failed parse leaves nothing to free. */
	ck_assert_ptr_null(c.argv);
	ck_assert_ptr_null(c.env);
	ck_assert_ptr_null(c.cwd);
	ck_assert_ptr_null(c.user);
	proto_create_free(&c);
}
END_TEST

START_TEST(create_invalid_json)
{
	static const char *const bad[] = {
		" ", "{", "{\"cmd\":}", "[1", "{\"cmd\":\"a\"} x", "{cmd:1}",
		"{\"cmd\":\"\\u0000\"}", "{\"cmd\":\"a\",}",
		"{\"cmd\":\"x\",\"rows\":99999999999999999999999}",
		"{\"cmd\":\"\xff\"}",
	};
	struct proto_create	c;
	struct proto_err	e;
	size_t			i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect_err(create(bad[i], &c, &e), &e, 400, "invalid_json",
		    "line");
	/* An embedded NUL byte in the body. */
	expect_err(proto_parse_create("{\"cmd\":\"a\0b\"}", 13, &lim, &c, &e),
	    &e, 400, "invalid_json", "line");
	expect_err(proto_parse_create(NULL, 0, &lim, &c, &e), &e, 400,
	    "invalid_json", "empty");
	expect_err(proto_parse_create("{}", 0, &lim, &c, &e), &e, 400,
	    "invalid_json", "empty");
}
END_TEST

START_TEST(create_duplicates_unknown_toplevel)
{
	static const char *const notobj[] = {
		"[]", "\"x\"", "5", "null", "true", "[{\"cmd\":\"x\"}]",
	};
	struct proto_create	c;
	struct proto_err	e;
	size_t			i;

	expect_err(create("{\"cmd\":\"a\",\"cmd\":\"b\"}", &c, &e), &e, 400,
	    "invalid_json", "duplicate");
	expect_err(create("{\"cmd\":\"a\",\"env\":{\"A\":\"1\",\"A\":\"2\"}}", &c,
	    &e), &e, 400, "invalid_json", "duplicate");
	expect_err(create("{\"cmd\":\"x\",\"bogus\":1}", &c, &e), &e, 400,
	    "invalid_request", "unknown field 'bogus'");
	expect_err(create("{\"CMD\":\"x\"}", &c, &e), &e, 400,
	    "invalid_request", "unknown field 'CMD'");
	for (i = 0; i < sizeof notobj / sizeof notobj[0]; i++)
		expect_err(create(notobj[i], &c, &e), &e, 400, "invalid_request",
		    "body must be a JSON object");
}
END_TEST

START_TEST(id_valid)
{
	ck_assert(proto_id_valid("s1"));
	ck_assert(proto_id_valid("A-Z.a_z-09"));
	ck_assert(proto_id_valid("."));
	ck_assert(!proto_id_valid(""));
	ck_assert(!proto_id_valid(NULL));
	ck_assert(!proto_id_valid("a/b"));
	ck_assert(!proto_id_valid("a%2f"));
	ck_assert(!proto_id_valid("a\n"));
	ck_assert(proto_id_valid(
	    "0123456789012345678901234567890123456789012345678901234567890123"));
	ck_assert(!proto_id_valid(
	    "01234567890123456789012345678901234567890123456789012345678901234"));
}
END_TEST

/* ---- stdin ---- */

START_TEST(stdin_ok)
{
	struct proto_stdin	in;
	struct proto_err	e;
	const char		*j;

	j = "{\"data\":\"aGVsbG8=\"}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_uint_eq(in.len, 5);
	ck_assert_mem_eq(in.data, "hello", 5);
	ck_assert_int_eq(in.eof, 0);
	ck_assert_int_eq(in.yield_ms, 0);
	ck_assert_int_eq(in.wait_ms, 0);
	ck_assert_uint_eq(in.max_bytes, 65536);
	proto_stdin_free(&in);
	ck_assert_ptr_null(in.data);

	j = "{\"data\":\"aGVsbG8\"}";		/* unpadded */
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_mem_eq(in.data, "hello", 5);
	proto_stdin_free(&in);

	j = "{\"text\":\"ls -la\\n\\u00e9\",\"eof\":true,\"yield_ms\":5,"
	    "\"wait_ms\":70000,\"max_bytes\":3}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_uint_eq(in.len, 9);
	ck_assert_mem_eq(in.data, "ls -la\n\xc3\xa9", 9);
	ck_assert_int_eq(in.eof, 1);
	ck_assert_int_eq(in.yield_ms, 5);
	ck_assert_int_eq(in.wait_ms, 60000);
	ck_assert_uint_eq(in.max_bytes, 3);
	proto_stdin_free(&in);

	j = "{}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_ptr_null(in.data);
	ck_assert_uint_eq(in.len, 0);
	j = "{\"eof\":true}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_int_eq(in.eof, 1);
	ck_assert_uint_eq(in.len, 0);
	j = "{\"text\":\"\"}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_ptr_null(in.data);
	j = "{\"data\":\"\",\"text\":null}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_ptr_null(in.data);
	j = "{\"data\":\"AAEC/w==\"}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_mem_eq(in.data, "\x00\x01\x02\xff", 4);
	proto_stdin_free(&in);
}
END_TEST

START_TEST(stdin_errors)
{
	static const struct {
		const char	*json;
		const char	*code;
		const char	*needle;
	} bad[] = {
		{ "{\"data\":\"aGk=\",\"text\":\"hi\"}", "invalid_request",
		  "'data' and 'text'" },
		{ "{\"data\":\"!!!!\"}", "invalid_request",
		  "field 'data' must be standard base64" },
		{ "{\"data\":\"aGk=\\n\"}", "invalid_request", "'data'" },
		{ "{\"data\":\"aG k=\"}", "invalid_request", "'data'" },
		{ "{\"data\":\"aGk\"}", "", "" },	/* fine: unpadded */
		{ "{\"data\":\"a\"}", "invalid_request", "'data'" },
		{ "{\"data\":\"aGk-\"}", "invalid_request", "'data'" },
		{ "{\"data\":5}", "invalid_request", "'data'" },
		{ "{\"text\":[\"a\"]}", "invalid_request", "'text'" },
		{ "{\"eof\":\"true\"}", "invalid_request", "'eof'" },
		{ "{\"eof\":1}", "invalid_request", "'eof'" },
		{ "{\"yield_ms\":-5}", "invalid_request", "'yield_ms'" },
		{ "{\"wait_ms\":0.5}", "invalid_request", "'wait_ms'" },
		{ "{\"max_bytes\":\"10\"}", "invalid_request", "'max_bytes'" },
		{ "{\"input\":\"x\"}", "invalid_request",
		  "unknown field 'input'" },
		{ "{\"text\":\"a\",\"text\":\"b\"}", "invalid_json",
		  "duplicate" },
		{ "ls -la", "invalid_json", "line 1" },
		{ "[\"ls\"]", "invalid_request", "body must be a JSON object" },
	};
	struct proto_stdin	in;
	struct proto_err	e;
	size_t			i;
	int			rc;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		rc = proto_parse_stdin(bad[i].json, strlen(bad[i].json), &in,
		    &e);
		if (bad[i].code[0] == '\0') {
			ck_assert_int_eq(rc, 0);
			proto_stdin_free(&in);
			continue;
		}
		expect_err(rc, &e, 400, bad[i].code, bad[i].needle);
		ck_assert_ptr_null(in.data);
	}
}
END_TEST

/* ---- resize and signal ---- */

START_TEST(resize)
{
	static const struct {
		const char	*json;
		const char	*needle;
	} bad[] = {
		{ "{\"rows\":40}", "field 'cols' is required" },
		{ "{\"cols\":40}", "field 'rows' is required" },
		{ "{}", "'rows'" },
		{ "{\"rows\":0,\"cols\":80}", "field 'rows' must be an integer in 1..65535" },
		{ "{\"rows\":40,\"cols\":65536}", "'cols'" },
		{ "{\"rows\":40.0,\"cols\":80}", "'rows'" },
		{ "{\"rows\":\"40\",\"cols\":80}", "'rows'" },
		{ "{\"rows\":40,\"cols\":true}", "'cols'" },
		{ "{\"rows\":40,\"cols\":80,\"x\":1}", "unknown field 'x'" },
		{ "[40,80]", "body must be a JSON object" },
	};
	struct proto_err	e;
	unsigned		r = 7, c = 7;
	size_t			i;
	const char		*j;

	j = "{\"rows\": 40, \"cols\": 120}";
	ck_assert_int_eq(proto_parse_resize(j, strlen(j), &r, &c, &e), 0);
	ck_assert_uint_eq(r, 40);
	ck_assert_uint_eq(c, 120);
	j = "{\"cols\":65535,\"rows\":1}";
	ck_assert_int_eq(proto_parse_resize(j, strlen(j), &r, &c, &e), 0);
	ck_assert_uint_eq(r, 1);
	ck_assert_uint_eq(c, 65535);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		r = c = 7;
		expect_err(proto_parse_resize(bad[i].json, strlen(bad[i].json),
		    &r, &c, &e), &e, 400, "invalid_request", bad[i].needle);
		ck_assert_uint_eq(r, 7);
		ck_assert_uint_eq(c, 7);
	}
	j = "{\"rows\":1,\"rows\":2,\"cols\":3}";
	expect_err(proto_parse_resize(j, strlen(j), &r, &c, &e), &e, 400,
	    "invalid_json", "duplicate");
}
END_TEST

START_TEST(signal_body)
{
	static const struct {
		const char	*json;
		int		 signo;
	} ok[] = {
		{ "{\"signal\":\"SIGINT\"}", 2 },
		{ "{\"signal\":\"INT\"}", 2 },
		{ "{\"signal\":2}", 2 },
		{ "{\"signal\":\"9\"}", 9 },
		{ "{\"signal\":\"SIGKILL\"}", 9 },
		{ "{\"signal\":\"TERM\"}", 15 },
		{ "{\"signal\":64}", 64 },
		{ "{\"signal\":1}", 1 },
		{ "{\"signal\":\"SIG40\"}", 40 },
		{ "{\"signal\":\"WINCH\"}", 28 },
	};
	static const char *const bad[] = {
		"{\"signal\":\"SIGFOO\"}", "{\"signal\":\"sigint\"}",
		"{\"signal\":0}", "{\"signal\":65}", "{\"signal\":-1}",
		"{\"signal\":2.0}", "{\"signal\":true}", "{\"signal\":[2]}",
		"{\"signal\":\"\"}", "{}", "{\"signal\":null}",
		"{\"signal\":\"SIG\"}", "{\"signal\":\"0\"}",
		"{\"signal\":\" INT\"}",
	};
	struct proto_err	e;
	size_t			i;
	int			n, t;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		n = t = -7;
		ck_assert_int_eq(proto_parse_signal(ok[i].json,
		    strlen(ok[i].json), &n, &t, &e), 0);
		ck_assert_int_eq(n, ok[i].signo);
		ck_assert_int_eq(t, PROTO_TARGET_GROUP);
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		n = -7;
		expect_err(proto_parse_signal(bad[i], strlen(bad[i]), &n, &t,
		    &e), &e, 400, "invalid_request", "field 'signal'");
		ck_assert_int_eq(n, -7);
	}
	expect_err(proto_parse_signal("{\"sig\":2}", 9, &n, &t, &e), &e, 400,
	    "invalid_request", "unknown field 'sig'");
	expect_err(proto_parse_signal("{\"signal\":2", 11, &n, &t, &e), &e,
	    400, "invalid_json", "line");
}
END_TEST

START_TEST(signal_target)
{
	static const char *const bad[] = {
		"{\"signal\":2,\"target\":\"job\"}",
		"{\"signal\":2,\"target\":\"\"}",
		"{\"signal\":2,\"target\":1}",
		"{\"signal\":2,\"target\":\"Foreground\"}",
	};
	const char		*j;
	struct proto_err	 e;
	size_t			 i;
	int			 n, t;

	j = "{\"signal\":\"INT\",\"target\":\"foreground\"}";
	ck_assert_int_eq(proto_parse_signal(j, strlen(j), &n, &t, &e), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(t, PROTO_TARGET_FOREGROUND);
	j = "{\"target\":\"group\",\"signal\":15}";
	ck_assert_int_eq(proto_parse_signal(j, strlen(j), &n, &t, &e), 0);
	ck_assert_int_eq(n, 15);
	ck_assert_int_eq(t, PROTO_TARGET_GROUP);
	j = "{\"signal\":15,\"target\":null}";
	ck_assert_int_eq(proto_parse_signal(j, strlen(j), &n, &t, &e), 0);
	ck_assert_int_eq(t, PROTO_TARGET_GROUP);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		n = t = -7;
		expect_err(proto_parse_signal(bad[i], strlen(bad[i]), &n, &t,
		    &e), &e, 400, "invalid_request", "field 'target'");
		ck_assert_int_eq(n, -7);
		ck_assert_int_eq(t, -7);
	}
}
END_TEST

START_TEST(signal_names)
{
	static const struct {
		int		 signo;
		const char	*name;
	} known[] = {
		{ 1, "SIGHUP" }, { 2, "SIGINT" }, { 3, "SIGQUIT" },
		{ 6, "SIGABRT" }, { 9, "SIGKILL" }, { 10, "SIGUSR1" },
		{ 11, "SIGSEGV" }, { 13, "SIGPIPE" }, { 15, "SIGTERM" },
		{ 17, "SIGCHLD" }, { 19, "SIGSTOP" }, { 28, "SIGWINCH" },
		{ 29, "SIGIO" }, { 30, "SIGPWR" }, { 31, "SIGSYS" },
	};
	static const char *const unknown[] = {
		"", "SIG", "SIGKILLX", "kill", "Sigkill", "SIGRTMIN", "0", "65",
		"SIG0", "SIG65", "-9", "9x", "1000", " 9", "SIG 9",
	};
	const char	*name;
	size_t		 i;
	int		 n;

	for (i = 0; i < sizeof known / sizeof known[0]; i++) {
		ck_assert_str_eq(proto_signal_name(known[i].signo), known[i].name);
		ck_assert_int_eq(proto_signal_number(known[i].name),
		    known[i].signo);
		ck_assert_int_eq(proto_signal_number(known[i].name + 3),
		    known[i].signo);
	}
	/* Every named number round-trips; 1..31 are all named. */
	for (n = 1; n <= 31; n++) {
		name = proto_signal_name(n);
		ck_assert_ptr_nonnull(name);
		ck_assert_int_eq(proto_signal_number(name), n);
	}
	for (n = 32; n <= 70; n++)
		ck_assert_ptr_null(proto_signal_name(n));
	ck_assert_ptr_null(proto_signal_name(0));
	ck_assert_ptr_null(proto_signal_name(-1));
	ck_assert_int_eq(proto_signal_number("9"), 9);
	ck_assert_int_eq(proto_signal_number("64"), 64);
	ck_assert_int_eq(proto_signal_number("SIG40"), 40);
	ck_assert_int_eq(proto_signal_number("SIGIOT"), 6);
	ck_assert_int_eq(proto_signal_number("POLL"), 29);
	ck_assert_int_eq(proto_signal_number("CLD"), 17);
	ck_assert_str_eq(proto_signal_name(6), "SIGABRT");
	for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
		ck_assert_msg(proto_signal_number(unknown[i]) == -1,
		    "\"%s\" was taken", unknown[i]);
	ck_assert_int_eq(proto_signal_number(NULL), -1);
}
END_TEST

/* ---- query ---- */

START_TEST(query_defaults_and_all)
{
	struct proto_query	q;
	struct proto_err	e;

	ck_assert_int_eq(proto_parse_query(NULL, &q, &e), 0);
	ck_assert_uint_eq(q.cursor, 0);
	ck_assert_int_eq(q.wait_ms, 0);
	ck_assert_int_eq(q.yield_ms, 0);
	ck_assert_uint_eq(q.max_bytes, PROTO_MAX_BYTES_DEFAULT);
	ck_assert_int_eq(q.grace_ms, -1);
	ck_assert_int_eq(q.eof, 0);
	ck_assert_int_eq(proto_parse_query("", &q, &e), 0);
	ck_assert_uint_eq(q.max_bytes, PROTO_MAX_BYTES_DEFAULT);
	ck_assert_int_eq(q.grace_ms, -1);

	ck_assert_int_eq(proto_parse_query("cursor=3&wait_ms=100&max_bytes=10"
	    "&grace_ms=2000&eof=true&yield_ms=5", &q, &e), 0);
	ck_assert_uint_eq(q.cursor, 3);
	ck_assert_int_eq(q.wait_ms, 100);
	ck_assert_uint_eq(q.max_bytes, 10);
	ck_assert_int_eq(q.grace_ms, 2000);
	ck_assert_int_eq(q.eof, 1);
	ck_assert_int_eq(q.yield_ms, 5);
	ck_assert_uint_eq(q.limit, 0);
	ck_assert_uint_eq(q.after, 0);
	ck_assert_int_eq(proto_parse_query("limit=2&after=12", &q, &e), 0);
	ck_assert_uint_eq(q.limit, 2);
	ck_assert_uint_eq(q.after, 12);
}
END_TEST

START_TEST(query_port)
{
	struct proto_query	q;
	struct proto_err	e;
	const char		*bad[] = { "port=0", "port=65536", "port=x",
				    "port=", "port", "port=-1", "port=8%30x",
				    "port=99999999999999999999999" };
	size_t			 i;

	ck_assert_int_eq(proto_parse_query(NULL, &q, &e), 0);
	ck_assert_int_eq(q.port, -1);
	ck_assert_int_eq(proto_parse_query("port=8000&wait_ms=99999", &q, &e),
	    0);
	ck_assert_int_eq(q.port, 8000);
	ck_assert_int_eq(q.wait_ms, PROTO_WAIT_MAX_MS);
	ck_assert_int_eq(proto_parse_query("port=1&port=65535", &q, &e), 0);
	ck_assert_int_eq(q.port, 65535);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_int_eq(proto_parse_query(bad[i], &q, &e), -1);
		ck_assert_int_eq(e.status, 400);
		ck_assert_str_eq(e.code, "invalid_request");
		ck_assert_ptr_nonnull(strstr(e.message, "'port'"));
	}
}
END_TEST

START_TEST(query_decoding)
{
	struct proto_query	q;
	struct proto_err	e;

	ck_assert_int_eq(proto_parse_query("cursor=%31%32", &q, &e), 0);
	ck_assert_uint_eq(q.cursor, 12);
	ck_assert_int_eq(proto_parse_query("%63ursor=7&wait%5Fms=5", &q, &e), 0);
	ck_assert_uint_eq(q.cursor, 7);
	ck_assert_int_eq(q.wait_ms, 5);
	/* Unknown keys, empty pairs and odd ones are ignored. */
	ck_assert_int_eq(proto_parse_query("foo=bar&x&&=&==&cursor=2&"
	    "path=%2Ftmp%2Fa+b&averyveryverylongkeyname=zz&", &q, &e), 0);
	ck_assert_uint_eq(q.cursor, 2);
	/* The last of a repeated key wins. */
	ck_assert_int_eq(proto_parse_query("cursor=1&cursor=5&eof=1&eof=0", &q,
	    &e), 0);
	ck_assert_uint_eq(q.cursor, 5);
	ck_assert_int_eq(q.eof, 0);
	ck_assert_int_eq(proto_parse_query("cursor=18446744073709551615", &q,
	    &e), 0);
	ck_assert_uint_eq(q.cursor, UINT64_MAX);
	ck_assert_int_eq(proto_parse_query("cursor=0000000000000000000042", &q,
	    &e), 0);
	ck_assert_uint_eq(q.cursor, 42);
	/* eof spellings. */
	ck_assert_int_eq(proto_parse_query("eof", &q, &e), 0);
	ck_assert_int_eq(q.eof, 1);
	ck_assert_int_eq(proto_parse_query("eof=1", &q, &e), 0);
	ck_assert_int_eq(q.eof, 1);
	ck_assert_int_eq(proto_parse_query("eof=false", &q, &e), 0);
	ck_assert_int_eq(q.eof, 0);
	ck_assert_int_eq(proto_parse_query("eof=true&eof=0", &q, &e), 0);
	ck_assert_int_eq(q.eof, 0);
	ck_assert_int_eq(proto_parse_query("eof=%74rue", &q, &e), 0);
	ck_assert_int_eq(q.eof, 1);
}
END_TEST

START_TEST(query_clamps)
{
	struct proto_query	q;
	struct proto_err	e;

	ck_assert_int_eq(proto_parse_query("wait_ms=999999&yield_ms=60001&"
	    "max_bytes=99999999999&grace_ms=3600000", &q, &e), 0);
	ck_assert_int_eq(q.wait_ms, PROTO_WAIT_MAX_MS);
	ck_assert_int_eq(q.yield_ms, PROTO_WAIT_MAX_MS);
	ck_assert_uint_eq(q.max_bytes, PROTO_MAX_BYTES_MAX);
	ck_assert_int_eq(q.grace_ms, PROTO_GRACE_MAX_MS);
	ck_assert_int_eq(proto_parse_query("wait_ms=99999999999999999999999"
	    "&max_bytes=0&grace_ms=0", &q, &e), 0);
	ck_assert_int_eq(q.wait_ms, PROTO_WAIT_MAX_MS);
	ck_assert_uint_eq(q.max_bytes, 0);
	ck_assert_int_eq(q.grace_ms, 0);
}
END_TEST

START_TEST(query_errors)
{
	static const struct {
		const char	*q;
		const char	*code;
		const char	*needle;
	} bad[] = {
		{ "cursor=-1", "invalid_cursor", "'cursor'" },
		{ "cursor=abc", "invalid_cursor", "'cursor'" },
		{ "cursor=", "invalid_cursor", "'cursor'" },
		{ "cursor", "invalid_cursor", "'cursor'" },
		{ "cursor=1.5", "invalid_cursor", "'cursor'" },
		{ "cursor=+1", "invalid_cursor", "'cursor'" },
		{ "cursor=%2B1", "invalid_cursor", "'cursor'" },
		{ "cursor=18446744073709551616", "invalid_cursor", "'cursor'" },
		{ "cursor=0x10", "invalid_cursor", "'cursor'" },
		{ "after=s3", "invalid_cursor", "'after'" },
		{ "after=", "invalid_cursor", "'after'" },
		{ "limit=-1", "invalid_request", "'limit'" },
		{ "wait_ms=-5", "invalid_request", "'wait_ms'" },
		{ "wait_ms=", "invalid_request", "'wait_ms'" },
		{ "yield_ms=x", "invalid_request", "'yield_ms'" },
		{ "max_bytes=1e3", "invalid_request", "'max_bytes'" },
		{ "grace_ms=2s", "invalid_request", "'grace_ms'" },
		{ "grace_ms", "invalid_request", "'grace_ms'" },
		{ "grace_ms=3600001", "invalid_request", "at most 3600000" },
		{ "grace_ms=9223372036854775807", "invalid_request",
		    "'grace_ms'" },
		{ "grace_ms=99999999999999999999999", "invalid_request",
		    "'grace_ms'" },
		{ "eof=yes", "invalid_request", "'eof'" },
		{ "eof=TRUE", "invalid_request", "'eof'" },
		{ "eof=", "invalid_request", "'eof'" },
		{ "cursor=%2", "invalid_request", "percent-encoding" },
		{ "cursor=%zz", "invalid_request", "percent-encoding" },
		{ "x=%", "invalid_request", "percent-encoding" },
		{ "%g1=1", "invalid_request", "percent-encoding" },
		{ "wait_ms=0000000000000000000000000000000005", "invalid_request",
		  "'wait_ms'" },
		{ "cursor=1&wait_ms=-1", "invalid_request", "'wait_ms'" },
	};
	struct proto_query	q;
	struct proto_err	e;
	size_t			i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect_err(proto_parse_query(bad[i].q, &q, &e), &e, 400,
		    bad[i].code, bad[i].needle);
}
END_TEST

/* ---- base64 and buffers ---- */

START_TEST(b64_vectors)
{
	static const char *const vec[][2] = {
		{ "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" },
		{ "foobar", "Zm9vYmFy" },
	};
	struct proto_buf	 b = { 0 };
	uint8_t			*out;
	size_t			 i, n;

	for (i = 0; i < sizeof vec / sizeof vec[0]; i++) {
		b.len = 0;
		proto_b64_encode(&b, vec[i][0], strlen(vec[i][0]));
		ck_assert_uint_eq(b.len, strlen(vec[i][1]));
		ck_assert_uint_eq(proto_b64_encoded_len(strlen(vec[i][0])),
		    b.len);
		if (b.len > 0)
			ck_assert_mem_eq(b.data, vec[i][1], b.len);
		ck_assert_int_eq(proto_b64_decode(vec[i][1], strlen(vec[i][1]),
		    &out, &n), 0);
		ck_assert_uint_eq(n, strlen(vec[i][0]));
		if (n > 0)
			ck_assert_mem_eq(out, vec[i][0], n);
		else
			ck_assert_ptr_null(out);
		free(out);
	}
	/* Appends after what is there. */
	b.len = 0;
	proto_buf_append(&b, "x:", 2);
	proto_b64_encode(&b, "\xff\xfe", 2);
	ck_assert_uint_eq(b.len, 6);
	ck_assert_mem_eq(b.data, "x://4=", 6);
	proto_buf_free(&b);
}
END_TEST

START_TEST(b64_random_roundtrip)
{
	struct proto_buf	 b = { 0 };
	uint8_t			 data[300], *out;
	uint32_t		 seed = 0x9e3779b9u;
	size_t			 len, n, unpadded;
	int			 round;

	for (round = 0; round < 4; round++) {
		for (len = 0; len <= 300; len++) {
			fill(data, len, &seed);
			b.len = 0;
			proto_b64_encode(&b, data, len);
			ck_assert_uint_eq(b.len, proto_b64_encoded_len(len));
			ck_assert_uint_eq(b.len % 4, 0);
			ck_assert_int_eq(proto_b64_decode(b.data, b.len, &out,
			    &n), 0);
			ck_assert_uint_eq(n, len);
			if (len > 0)
				ck_assert_mem_eq(out, data, len);
			free(out);
			/* The same without its padding. */
			unpadded = b.len;
			while (unpadded > 0 && b.data[unpadded - 1] == '=')
				unpadded--;
			ck_assert_int_eq(proto_b64_decode(b.data, unpadded, &out,
			    &n), 0);
			ck_assert_uint_eq(n, len);
			if (len > 0)
				ck_assert_mem_eq(out, data, len);
			free(out);
		}
	}
	proto_buf_free(&b);
}
END_TEST

/*
 * The encoder (12 bytes a round while 16 are left, then a group at a time)
 * against the RFC's bit-by-bit definition, at every length up to 300 and
 * every alignment of the input, and it writes nothing past its length.
 */
START_TEST(b64_matches_reference)
{
	static const char	 abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkl"
	    "mnopqrstuvwxyz0123456789+/";
	struct proto_buf	 b = { 0 };
	uint8_t			 data[320];
	char			 ref[440];
	uint32_t		 seed = 0x2545f491u, v;
	size_t			 off, len, i, o;

	fill(data, sizeof data, &seed);
	for (off = 0; off < 8; off++) {
		for (len = 0; len <= 300; len++) {
			for (i = 0, o = 0; i < len; i += 3) {
				v = (uint32_t)data[off + i] << 16;
				if (i + 1 < len)
					v |= (uint32_t)data[off + i + 1] << 8;
				if (i + 2 < len)
					v |= data[off + i + 2];
				ref[o++] = abc[v >> 18];
				ref[o++] = abc[(v >> 12) & 63];
				ref[o++] = i + 1 < len ? abc[(v >> 6) & 63] : '=';
				ref[o++] = i + 2 < len ? abc[v & 63] : '=';
			}
			b.len = 0;
			proto_buf_append(&b, "<", 1);
			proto_b64_encode(&b, data + off, len);
			proto_buf_append(&b, ">", 1);
			ck_assert_uint_eq(b.len, o + 2);
			ck_assert_mem_eq(b.data + 1, ref, o);
			ck_assert_int_eq(b.data[o + 1], '>');
		}
	}
	proto_buf_free(&b);
}
END_TEST

START_TEST(b64_invalid)
{
	static const char *const bad[] = {
		"Z", "Zg=", "Zm9=v", "Zg==Zg==", "Zm9v\n", " Zm9v", "Zm9v ",
		"Zm-v", "Zm_v", "====", "Z===", "Zg=a", "Zm9vY", "Zm9vYg=",
		"Zm9vYg===", "\xff\xff\xff\xff", "Zm9v\r\n", "=Zm9",
	};
	uint8_t	*out = (uint8_t *)"sentinel";
	size_t	 i, n = 7;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ck_assert_msg(proto_b64_decode(bad[i], strlen(bad[i]), &out,
		    &n) == -1, "\"%s\" was taken", bad[i]);
		ck_assert_ptr_null(out);
		ck_assert_uint_eq(n, 0);
	}
	ck_assert_int_eq(proto_b64_decode("Zm\0v", 4, &out, &n), -1);
	/* Nonzero bits after the last byte are ignored. */
	ck_assert_int_eq(proto_b64_decode("Zh==", 4, &out, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(out[0], 'f');
	free(out);
	ck_assert_uint_eq(proto_b64_encoded_len(0), 0);
	ck_assert_uint_eq(proto_b64_encoded_len(1), 4);
	ck_assert_uint_eq(proto_b64_encoded_len(3), 4);
	ck_assert_uint_eq(proto_b64_encoded_len(4), 8);
}
END_TEST

START_TEST(buf_growth_and_oom)
{
	struct proto_buf	 b = { 0 };
	char			 big[1000], *p;
	size_t			 i;

	proto_buf_append(&b, "a", 1);
	ck_assert_uint_eq(b.cap, 256);
	for (i = 0; i < 300; i++)
		proto_buf_append(&b, "b", 1);
	ck_assert_uint_eq(b.len, 301);
	ck_assert_uint_eq(b.cap, 512);
	/* Appends that fill the room exactly, then one more byte. */
	b.len = 0;
	for (i = 0; i < 64; i++)
		proto_buf_append(&b, "01234567", 8);
	ck_assert_uint_eq(b.len, 512);
	ck_assert_uint_eq(b.cap, 512);
	proto_buf_append(&b, "8", 1);
	ck_assert_uint_eq(b.cap, 1024);
	ck_assert_mem_eq(b.data + 504, "012345678", 9);
	b.len = 0;
	proto_buf_u64(&b, 0);
	proto_buf_append(&b, " ", 1);
	proto_buf_u64(&b, 42);
	proto_buf_append(&b, " ", 1);
	proto_buf_u64(&b, UINT64_MAX);
	ck_assert_uint_eq(b.len, 25);
	ck_assert_mem_eq(b.data, "0 42 18446744073709551615", 25);
	b.len = 301;
	memset(b.data, 'b', 301);
	memset(big, 'x', sizeof big);
	proto_buf_printf(&b, "%d-%.*s-%s", 42, (int)sizeof big, big, "end");
	ck_assert_uint_eq(b.len, 301 + 3 + 1000 + 4);
	ck_assert_uint_eq(b.cap, 2048);
	ck_assert_mem_eq(b.data + 301, "42-xxx", 6);
	ck_assert_mem_eq(b.data + b.len - 4, "-end", 4);

	/* space: room but no length. */
	p = proto_buf_space(&b, 5000);
	ck_assert_ptr_eq(p, b.data + b.len);
	ck_assert_uint_eq(b.cap, 8192);
	ck_assert_uint_eq(b.len, 1308);
	memcpy(p, "zz", 2);
	b.len += 2;
	proto_buf_json_string(&b, "q", 1);
	ck_assert_mem_eq(b.data + 1308, "zz\"q\"", 5);

	/* An impossible size sets oom; later appends are ignored. */
	ck_assert_ptr_null(proto_buf_space(&b, SIZE_MAX - 10));
	ck_assert_int_eq(b.oom, 1);
	i = b.len;
	proto_buf_append(&b, "c", 1);
	proto_buf_printf(&b, "%s", "d");
	proto_b64_encode(&b, "e", 1);
	proto_buf_json_string(&b, "f", 1);
	ck_assert_uint_eq(b.len, i);
	ck_assert_ptr_null(proto_buf_space(&b, 1));
	proto_buf_free(&b);
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(b.oom, 0);
	ck_assert_uint_eq(b.len, 0);

	/* Growing from empty straight to a large size. */
	ck_assert_ptr_nonnull(proto_buf_space(&b, 100000));
	ck_assert_uint_eq(b.cap, 131072);
	proto_buf_free(&b);
	proto_buf_printf(&b, "%s", "");
	ck_assert_uint_eq(b.len, 0);
	proto_buf_free(&b);
}
END_TEST

START_TEST(fail_message)
{
	struct proto_err	e;
	char			long_name[600];

	ck_assert_int_eq(proto_fail(&e, 404, "not_found", "no session '%s'",
	    "abc"), -1);
	ck_assert_int_eq(e.status, 404);
	ck_assert_str_eq(e.code, "not_found");
	ck_assert_str_eq(e.message, "no session 'abc'");
	memset(long_name, 'n', sizeof long_name - 1);
	long_name[sizeof long_name - 1] = '\0';
	proto_fail(&e, 400, "invalid_request", "%s", long_name);
	ck_assert_uint_eq(strlen(e.message), PROTO_MESSAGE_MAX - 1);
	ck_assert_int_eq(proto_fail(NULL, 1, "x", "y"), -1);
}
END_TEST

/* ---- JSON strings and times ---- */

START_TEST(json_string_bytes)
{
	struct proto_buf	 b = { 0 };
	json_error_t		 jerr;
	json_t			*j;
	char			 c;
	int			 i;

	/* Each single byte renders to valid JSON meaning that byte, or U+FFFD. */
	for (i = 0; i < 256; i++) {
		c = (char)i;
		b.len = 0;
		proto_buf_json_string(&b, &c, 1);
		j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL,
		    &jerr);
		ck_assert_msg(j != NULL, "byte %d: %s", i, jerr.text);
		if (i < 0x80) {
			ck_assert_uint_eq(json_string_length(j), 1);
			ck_assert_int_eq(json_string_value(j)[0], i);
		} else
			ck_assert_str_eq(json_string_value(j), "\xef\xbf\xbd");
		json_decref(j);
	}
	b.len = 0;
	proto_buf_json_string(&b, "a\"b\\c\n\t\r\b\f\x01\x1f\x7f/", 14);
	ck_assert_uint_eq(b.len, strlen("\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\x7f/\""));
	ck_assert_mem_eq(b.data,
	    "\"a\\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\x7f/\"", b.len);
	proto_buf_free(&b);
}
END_TEST

START_TEST(json_string_utf8)
{
	static const struct {
		const char	*in;
		const char	*out;	/* the rendered literal */
	} vec[] = {
		{ "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80",
		  "\"h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9f\x98\x80\"" },
		{ "\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"" },	/* U+10FFFF */
		{ "\xc0\x80", "\"\\ufffd\\ufffd\"" },		/* overlong NUL */
		{ "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"" },	/* overlong */
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },	/* surrogate */
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" },
		{ "\xf5\x80", "\"\\ufffd\\ufffd\"" },
		{ "a\xe2\x82", "\"a\\ufffd\\ufffd\"" },		/* cut short */
		{ "\xe2\x82z", "\"\\ufffd\\ufffdz\"" },
		{ "\x80", "\"\\ufffd\"" },
	};
	struct proto_buf	b = { 0 };
	size_t			i;

	for (i = 0; i < sizeof vec / sizeof vec[0]; i++) {
		b.len = 0;
		proto_buf_json_string(&b, vec[i].in, strlen(vec[i].in));
		ck_assert_uint_eq(b.len, strlen(vec[i].out));
		ck_assert_mem_eq(b.data, vec[i].out, b.len);
	}
	proto_buf_free(&b);
}
END_TEST

START_TEST(json_string_random)
{
	struct proto_buf	 b = { 0 };
	json_error_t		 jerr;
	json_t			*j;
	uint8_t			 s[64];
	uint32_t		 seed = 12345;
	size_t			 len;
	int			 round;

	for (round = 0; round < 5000; round++) {
		len = (size_t)(round % 64);
		fill(s, len, &seed);
		if (round % 2)	/* mostly ASCII, so valid UTF-8 too */
			for (size_t k = 0; k < len; k++)
				s[k] &= 0x7f;
		b.len = 0;
		proto_buf_json_string(&b, (char *)s, len);
		j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL,
		    &jerr);
		ck_assert_msg(j != NULL, "%s", jerr.text);
		if (round % 2) {
			ck_assert_uint_eq(json_string_length(j), len);
			if (len > 0)
				ck_assert_mem_eq(json_string_value(j), s, len);
		}
		json_decref(j);
	}
	proto_buf_free(&b);
}
END_TEST

START_TEST(format_time)
{
	static const struct {
		int64_t		 ms;
		const char	*iso;
	} vec[] = {
		{ 0, "1970-01-01T00:00:00.000Z" },
		{ 1796209200000LL, "2026-12-02T11:00:00.000Z" },
		{ 951868799123LL, "2000-02-29T23:59:59.123Z" },
		{ 1709210096789LL, "2024-02-29T12:34:56.789Z" },
		{ -1, "1969-12-31T23:59:59.999Z" },
		{ -86400000LL, "1969-12-31T00:00:00.000Z" },
		{ INT64_MAX, "9999-12-31T23:59:59.999Z" },
		{ INT64_MIN, "0000-01-01T00:00:00.000Z" },
	};
	char		 out[25], ref[128];
	struct tm	 tm;
	time_t		 t;
	uint32_t	 seed = 77;
	int64_t		 ms;
	size_t		 i;
	uint8_t		 r[8];

	for (i = 0; i < sizeof vec / sizeof vec[0]; i++) {
		memset(out, '#', sizeof out);
		proto_format_time(vec[i].ms, out);
		ck_assert_str_eq(out, vec[i].iso);
	}
	/* Against gmtime_r, over 1900..2400. */
	for (i = 0; i < 20000; i++) {
		fill(r, sizeof r, &seed);
		memcpy(&ms, r, sizeof ms);
		ms = (int64_t)((uint64_t)ms % 15778800000000ULL) -
		    2208988800000LL;
		t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
		ck_assert_ptr_nonnull(gmtime_r(&t, &tm));
		snprintf(ref, sizeof ref, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		    tm.tm_min, tm.tm_sec, (int)(((ms % 1000) + 1000) % 1000));
		proto_format_time(ms, out);
		ck_assert_str_eq(out, ref);
	}
}
END_TEST

/* ---- rendering ---- */

/*
 * A window's answer fits in proto_window_len() plus the object's bytes: a
 * buffer reserved so is never grown (doubling took 8 MiB for a 4 MiB
 * window's 5.6 MB, too big to be kept for the next answer).
 */
START_TEST(render_window_len_is_enough)
{
	static char *const argv[] = { "head", "-c", "4M", NULL };
	static struct proto_chunk	ch[1024];
	struct proto_session	s = {
		.id = "s1", .pid = 7, .argv = argv, .cwd = "/", .user = "root",
		.started_ms = 0, .ended_ms = -1, .last_chunk = UINT64_MAX,
		.bytes_out = UINT64_MAX,
	};
	struct proto_window	w = {
		.chunks = ch, .cursor = UINT64_MAX, .dropped = UINT64_MAX,
		.more = 1, .head_tail = 1, .truncated_bytes = UINT64_MAX,
		.truncated_cursor = UINT64_MAX,
	};
	struct proto_buf	b = { 0 };
	uint8_t			*data;
	size_t			 i, n, len, want;

	data = calloc(1, 4u << 20);
	ck_assert_ptr_nonnull(data);
	for (n = 1; n <= 1024; n *= 4) {
		len = (4u << 20) / n - n % 3;	/* lengths of every residue */
		for (i = 0; i < n; i++) {
			ch[i].id = UINT64_MAX - n + i;
			ch[i].offset = UINT64_MAX - (4u << 20);
			ch[i].data = data;
			ch[i].len = len;
			ch[i].stream = PROTO_STREAM_STDERR;
		}
		w.n = n;
		want = proto_window_len(&w) + 4096;
		b.len = 0;
		free(b.data);
		b.data = NULL;
		b.cap = 0;
		ck_assert_int_eq(proto_buf_reserve(&b, want), 0);
		ck_assert_uint_eq(b.cap, want);
		proto_render_session(&b, &s, &w, INT64_MAX);
		ck_assert(!b.oom);
		ck_assert_uint_eq(b.cap, want);
		ck_assert_uint_gt(b.len, n * (len / 3 * 4));
	}
	/* Reserving less than the capacity changes nothing. */
	ck_assert_int_eq(proto_buf_reserve(&b, 10), 0);
	ck_assert_uint_eq(b.cap, want);
	proto_buf_free(&b);
	free(data);
}
END_TEST

START_TEST(render_exact)
{
	static char *const argv[] = { "ls", NULL };
	struct proto_session	s = {
		.id = "a", .pid = 7, .tty = 0, .rows = 24, .cols = 80,
		.argv = argv, .cwd = "/", .user = "root", .exited = 1,
		.exit_code = 0, .signo = 0, .timed_out = 0, .started_ms = 0,
		.ended_ms = 1500, .last_chunk = 1, .bytes_out = 3,
		.oom_killed = 1, .cpu_ms = 12, .memory_peak_bytes = -1,
		.pids_peak = 3,
	};
	static const uint8_t	data[] = { 'h', 'i', '\n' };
	struct proto_chunk	ch = {
		.id = 1, .offset = 0, .data = data, .len = 3,
		.stream = PROTO_STREAM_STDOUT,
	};
	struct proto_window	w = {
		.chunks = &ch, .n = 1, .cursor = 1, .dropped = 0, .more = 0,
		.eof = 1,
	};
	struct proto_buf	b = { 0 };
	static const char	session[] =
	    "{\"id\":\"a\",\"pid\":7,\"tty\":false,\"rows\":24,\"cols\":80,"
	    "\"argv\":[\"ls\"],\"cwd\":\"/\",\"user\":\"root\","
	    "\"state\":\"exited\",\"exit_code\":0,\"signal\":null,"
	    "\"timed_out\":false,\"started_at\":\"1970-01-01T00:00:00.000Z\","
	    "\"ended_at\":\"1970-01-01T00:00:01.500Z\",\"last_chunk\":1,"
	    "\"bytes_out\":3,\"oom_killed\":true,\"usage\":{\"cpu_ms\":12,"
	    "\"memory_peak_bytes\":null,\"pids_peak\":3},\"stdin_bytes\":0}";
	static const char	windowed[] =
	    "{\"written\":3,\"id\":\"a\",\"pid\":7,\"tty\":false,\"rows\":24,"
	    "\"cols\":80,\"argv\":[\"ls\"],\"cwd\":\"/\",\"user\":\"root\","
	    "\"state\":\"exited\",\"exit_code\":0,\"signal\":null,"
	    "\"timed_out\":false,\"started_at\":\"1970-01-01T00:00:00.000Z\","
	    "\"ended_at\":\"1970-01-01T00:00:01.500Z\",\"last_chunk\":1,"
	    "\"bytes_out\":3,\"oom_killed\":true,\"usage\":{\"cpu_ms\":12,"
	    "\"memory_peak_bytes\":null,\"pids_peak\":3},\"stdin_bytes\":0,"
	    "\"output\":[{\"id\":1,\"stream\":\"stdout\","
	    "\"offset\":0,\"data\":\"aGkK\"}],\"cursor\":1,"
	    "\"dropped_chunks\":0,\"more\":false,\"eof\":true}";

	proto_render_session(&b, &s, NULL, -1);
	ck_assert_uint_eq(b.len, sizeof session - 1);
	ck_assert_mem_eq(b.data, session, b.len);
	b.len = 0;
	proto_render_session(&b, &s, &w, 3);
	ck_assert_uint_eq(b.len, sizeof windowed - 1);
	ck_assert_mem_eq(b.data, windowed, b.len);
	proto_buf_free(&b);
}
END_TEST

START_TEST(render_running)
{
	struct proto_session	 s = sample_session();
	json_t			*j, *a;

	s.exit_code = 99;	/* not read while running */
	s.signo = 9;
	s.ended_ms = 5;
	j = render_json(&s, NULL, -1);
	check_keys(j, session_keys);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "s1");
	ck_assert(json_is_integer(json_object_get(j, "pid")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "pid")), 4242);
	ck_assert(json_is_true(json_object_get(j, "tty")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "rows")), 24);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "cols")), 80);
	a = json_object_get(j, "argv");
	ck_assert(json_is_array(a));
	ck_assert_uint_eq(json_array_size(a), 3);
	ck_assert_str_eq(json_string_value(json_array_get(a, 0)), "/bin/sh");
	ck_assert_str_eq(json_string_value(json_array_get(a, 1)), "-c");
	ck_assert_str_eq(json_string_value(json_array_get(a, 2)), "make test");
	ck_assert_str_eq(json_string_value(json_object_get(j, "cwd")), "/work");
	ck_assert_str_eq(json_string_value(json_object_get(j, "user")), "root");
	ck_assert_str_eq(json_string_value(json_object_get(j, "state")),
	    "running");
	ck_assert(json_is_null(json_object_get(j, "exit_code")));
	ck_assert(json_is_null(json_object_get(j, "signal")));
	ck_assert(json_is_false(json_object_get(j, "timed_out")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "started_at")),
	    "2026-12-02T11:00:00.000Z");
	ck_assert(json_is_null(json_object_get(j, "ended_at")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "last_chunk")),
	    17);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes_out")),
	    81234);
	json_decref(j);

	/* NULL strings render as null, a NULL argv as []. */
	s.cwd = NULL;
	s.user = NULL;
	s.argv = NULL;
	s.pid = 0;
	j = render_json(&s, NULL, -1);
	ck_assert(json_is_null(json_object_get(j, "cwd")));
	ck_assert(json_is_null(json_object_get(j, "user")));
	ck_assert_uint_eq(json_array_size(json_object_get(j, "argv")), 0);
	json_decref(j);
}
END_TEST

/* An envd tag renders as "labels": {"tag": ...}, last; none: no labels. */
START_TEST(render_labels)
{
	struct proto_session	 s = sample_session();
	json_t			*j, *l;

	j = render_json(&s, NULL, -1);
	ck_assert_ptr_null(json_object_get(j, "labels"));
	json_decref(j);
	s.tag = "web \"1\"";
	j = render_json(&s, NULL, -1);
	l = json_object_get(j, "labels");
	ck_assert(json_is_object(l));
	ck_assert_uint_eq(json_object_size(l), 1);
	ck_assert_str_eq(json_string_value(json_object_get(l, "tag")),
	    "web \"1\"");
	json_decref(j);
}
END_TEST

START_TEST(render_exited)
{
	static const struct {
		int		 code, signo, timed_out;
		const char	*signal;	/* NULL: null */
	} vec[] = {
		{ 0, 0, 0, NULL },
		{ 3, 0, 0, NULL },
		{ 137, 9, 1, "SIGKILL" },
		{ 143, 15, 0, "SIGTERM" },
		{ 129, 1, 0, "SIGHUP" },
		{ 168, 40, 0, "SIG40" },
		{ 192, 64, 0, "SIG64" },
	};
	struct proto_session	 s = sample_session();
	json_t			*j, *v;
	size_t			 i;

	for (i = 0; i < sizeof vec / sizeof vec[0]; i++) {
		s.exited = 1;
		s.exit_code = vec[i].code;
		s.signo = vec[i].signo;
		s.timed_out = vec[i].timed_out;
		s.ended_ms = 1796209205250LL;
		s.tty = 0;
		j = render_json(&s, NULL, -1);
		check_keys(j, session_keys);
		ck_assert_str_eq(json_string_value(json_object_get(j, "state")),
		    "exited");
		v = json_object_get(j, "exit_code");
		ck_assert(json_is_integer(v));
		ck_assert_int_eq(json_integer_value(v), vec[i].code);
		v = json_object_get(j, "signal");
		if (vec[i].signal == NULL)
			ck_assert(json_is_null(v));
		else
			ck_assert_str_eq(json_string_value(v), vec[i].signal);
		ck_assert(json_is_boolean(json_object_get(j, "timed_out")));
		ck_assert_int_eq(json_is_true(json_object_get(j, "timed_out")),
		    vec[i].timed_out);
		ck_assert(json_is_false(json_object_get(j, "tty")));
		ck_assert_str_eq(json_string_value(json_object_get(j,
		    "ended_at")), "2026-12-02T11:00:05.250Z");
		json_decref(j);
	}
	/* Big numbers and a negative exit code survive. */
	s.exit_code = -1;
	s.signo = 0;
	s.pid = 2147483647L;
	s.last_chunk = INT64_MAX;
	s.bytes_out = INT64_MAX;
	j = render_json(&s, NULL, -1);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")),
	    -1);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "pid")),
	    2147483647L);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "last_chunk")),
	    INT64_MAX);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes_out")),
	    INT64_MAX);
	json_decref(j);
}
END_TEST

START_TEST(render_window_head_tail)
{
	static const char *const keys[] = {
		"id", "pid", "tty", "rows", "cols", "argv", "cwd", "user",
		"state", "exit_code", "signal", "timed_out", "started_at",
		"ended_at", "last_chunk", "bytes_out", "oom_killed", "usage",
		"stdin_bytes", "output", "cursor",
		"dropped_chunks", "more", "eof", "truncated_bytes",
		"truncated_cursor", NULL
	};
	struct proto_session	 s = sample_session();
	struct proto_window	 w;
	json_t			*j;

	memset(&w, 0, sizeof w);
	w.cursor = 17;
	w.head_tail = 1;
	j = render_json(&s, &w, -1);
	check_keys(j, keys);
	ck_assert_int_eq(json_integer_value(json_object_get(j,
	    "truncated_bytes")), 0);
	ck_assert(json_is_null(json_object_get(j, "truncated_cursor")));
	json_decref(j);
	w.truncated_bytes = 12345;
	w.truncated_cursor = 9;
	j = render_json(&s, &w, -1);
	check_keys(j, keys);
	ck_assert_int_eq(json_integer_value(json_object_get(j,
	    "truncated_bytes")), 12345);
	ck_assert_int_eq(json_integer_value(json_object_get(j,
	    "truncated_cursor")), 9);
	json_decref(j);
}
END_TEST

START_TEST(budget_fields)
{
	struct proto_create	c;
	struct proto_stdin	in;
	struct proto_query	q;
	struct proto_err	e;
	const char		*j;

	ck_assert_int_eq(create("{\"cmd\":\"x\"}", &c, &e), 0);
	ck_assert_int_eq(c.idle_ms, 0);
	ck_assert_int_eq(c.head_tail, 0);
	proto_create_free(&c);
	ck_assert_int_eq(create("{\"cmd\":\"x\",\"idle_ms\":99999999,"
	    "\"head_tail\":true}", &c, &e), 0);
	ck_assert_int_eq(c.idle_ms, PROTO_WAIT_MAX_MS);
	ck_assert_int_eq(c.head_tail, 1);
	proto_create_free(&c);
	ck_assert_int_eq(create("{\"cmd\":\"x\",\"idle_ms\":-1}", &c, &e),
	    -1);
	ck_assert_ptr_nonnull(strstr(e.message, "idle_ms"));

	j = "{\"text\":\"a\",\"idle_ms\":250,\"head_tail\":true}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), 0);
	ck_assert_int_eq(in.idle_ms, 250);
	ck_assert_int_eq(in.head_tail, 1);
	proto_stdin_free(&in);
	j = "{\"text\":\"a\",\"head_tail\":1}";
	ck_assert_int_eq(proto_parse_stdin(j, strlen(j), &in, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.message, "head_tail"));

	ck_assert_int_eq(proto_parse_query("idle_ms=70000&head_tail", &q, &e),
	    0);
	ck_assert_int_eq(q.idle_ms, PROTO_WAIT_MAX_MS);
	ck_assert_int_eq(q.head_tail, 1);
	ck_assert_int_eq(proto_parse_query("head_tail=0&idle_ms=5", &q, &e), 0);
	ck_assert_int_eq(q.head_tail, 0);
	ck_assert_int_eq(q.idle_ms, 5);
	ck_assert_int_eq(proto_parse_query("head_tail=yes", &q, &e), -1);
	ck_assert_ptr_nonnull(strstr(e.message, "head_tail"));
	ck_assert_int_eq(proto_parse_query("idle_ms=-3", &q, &e), -1);
}
END_TEST

START_TEST(render_window)
{
	static const char *const keys[] = {
		"written", "id", "pid", "tty", "rows", "cols", "argv", "cwd",
		"user", "state", "exit_code", "signal", "timed_out",
		"started_at", "ended_at", "last_chunk", "bytes_out",
		"oom_killed", "usage", "stdin_bytes", "output",
		"cursor", "dropped_chunks", "more", "eof", NULL
	};
	static const char *const chunk_keys[] = {
		"id", "stream", "offset", "data", NULL
	};
	static const char *const streams[] = { "pty", "stdout", "stderr" };
	struct proto_session	 s = sample_session();
	struct proto_chunk	 ch[6];
	struct proto_window	 w;
	static uint8_t		 bytes[6][5000];
	uint32_t		 seed = 4242;
	uint64_t		 off = 80000;
	uint8_t			*dec;
	size_t			 i, n;
	json_t			*j, *out, *c;

	for (i = 0; i < 6; i++) {
		ch[i].id = 16 + i;
		ch[i].offset = off;
		ch[i].len = (uint32_t)(i * 997 % 5000);
		ch[i].data = bytes[i];
		ch[i].stream = (int)(i % 3);
		fill(bytes[i], ch[i].len, &seed);
		off += ch[i].len;
	}
	memset(&w, 0, sizeof w);
	w.chunks = ch;
	w.n = 6;
	w.cursor = 21;
	w.dropped = 15;
	w.more = 1;
	w.eof = 0;
	j = render_json(&s, &w, 12);
	check_keys(j, keys);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "written")), 12);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "s1");
	out = json_object_get(j, "output");
	ck_assert(json_is_array(out));
	ck_assert_uint_eq(json_array_size(out), 6);
	for (i = 0; i < 6; i++) {
		c = json_array_get(out, i);
		check_keys(c, chunk_keys);
		ck_assert_int_eq(json_integer_value(json_object_get(c, "id")),
		    (json_int_t)ch[i].id);
		ck_assert_str_eq(json_string_value(json_object_get(c,
		    "stream")), streams[i % 3]);
		ck_assert_int_eq(json_integer_value(json_object_get(c,
		    "offset")), (json_int_t)ch[i].offset);
		ck_assert(json_is_string(json_object_get(c, "data")));
		ck_assert_int_eq(proto_b64_decode(json_string_value(
		    json_object_get(c, "data")), json_string_length(
		    json_object_get(c, "data")), &dec, &n), 0);
		ck_assert_uint_eq(n, ch[i].len);
		if (n > 0)
			ck_assert_mem_eq(dec, bytes[i], n);
		free(dec);
	}
	ck_assert_int_eq(json_integer_value(json_object_get(j, "cursor")), 21);
	ck_assert_int_eq(json_integer_value(json_object_get(j,
	    "dropped_chunks")), 15);
	ck_assert(json_is_true(json_object_get(j, "more")));
	ck_assert(json_is_false(json_object_get(j, "eof")));
	json_decref(j);

	/* An empty window, without "written". */
	w.chunks = NULL;
	w.n = 0;
	w.cursor = 0;
	w.dropped = 0;
	w.more = 0;
	w.eof = 1;
	j = render_json(&s, &w, -1);
	check_keys(j, keys + 1);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "output")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "cursor")), 0);
	ck_assert(json_is_false(json_object_get(j, "more")));
	ck_assert(json_is_true(json_object_get(j, "eof")));
	json_decref(j);

	/* written 0 is rendered; strings with quotes are escaped. */
	s.id = "q\"id";
	s.cwd = "/tmp/a\\b\n";
	j = render_json(&s, NULL, 0);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "written")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "q\"id");
	ck_assert_str_eq(json_string_value(json_object_get(j, "cwd")),
	    "/tmp/a\\b\n");
	json_decref(j);
}
END_TEST

START_TEST(render_big_window)
{
	struct proto_session	 s = sample_session();
	struct proto_chunk	*ch;
	struct proto_window	 w = { 0 };
	struct proto_buf	 b = { 0 };
	static uint8_t		 data[65536];
	uint32_t		 seed = 1;
	size_t			 i;
	json_t			*j;

	fill(data, sizeof data, &seed);
	ch = calloc(64, sizeof *ch);
	ck_assert_ptr_nonnull(ch);
	for (i = 0; i < 64; i++) {
		ch[i].id = i + 1;
		ch[i].offset = i * sizeof data;
		ch[i].data = data;
		ch[i].len = sizeof data;
		ch[i].stream = PROTO_STREAM_PTY;
	}
	w.chunks = ch;
	w.n = 64;
	w.cursor = 64;
	proto_render_session(&b, &s, &w, -1);
	ck_assert_int_eq(b.oom, 0);
	ck_assert_uint_gt(b.len, 64 * 87381);
	j = load(&b);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "output")), 64);
	json_decref(j);
	proto_buf_free(&b);
	free(ch);
}
END_TEST

START_TEST(render_error)
{
	struct proto_session	 s = sample_session();
	struct proto_buf	 b = { 0 };
	struct proto_err	 e;
	static const char *const top[] = { "error", NULL };
	static const char *const both[] = { "error", "session", NULL };
	static const char *const inner[] = { "code", "message", NULL };
	static const char	 odd[] = "{\"\xc3\xa9\\\"\":1}";
	json_t			*j, *err;

	proto_fail(&e, 404, "not_found", "no session '%s'", "abc");
	proto_render_error(&b, &e, NULL);
	ck_assert_uint_eq(b.len, strlen("{\"error\":{\"code\":\"not_found\","
	    "\"message\":\"no session 'abc'\"}}"));
	ck_assert_mem_eq(b.data, "{\"error\":{\"code\":\"not_found\","
	    "\"message\":\"no session 'abc'\"}}", b.len);
	j = load(&b);
	check_keys(j, top);
	check_keys(json_object_get(j, "error"), inner);
	json_decref(j);

	b.len = 0;
	proto_fail(&e, 409, "session_exists", "session '%s' exists: \"%s\"\n",
	    "s1", "quoted");
	proto_render_error(&b, &e, &s);
	j = load(&b);
	check_keys(j, both);
	err = json_object_get(j, "error");
	check_keys(err, inner);
	ck_assert_str_eq(json_string_value(json_object_get(err, "code")),
	    "session_exists");
	ck_assert_str_eq(json_string_value(json_object_get(err, "message")),
	    "session 's1' exists: \"quoted\"\n");
	check_keys(json_object_get(j, "session"), session_keys);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j,
	    "session"), "id")), "s1");
	json_decref(j);

	/* A parser's error renders as is, even with odd bytes in it. */
	b.len = 0;
	ck_assert_int_eq(proto_parse_signal(odd, strlen(odd), NULL, NULL, &e),
	    -1);
	proto_render_error(&b, &e, NULL);
	j = load(&b);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j,
	    "error"), "message")), "unknown field '\xc3\xa9\"'");
	json_decref(j);
	proto_buf_free(&b);
}
END_TEST

START_TEST(render_list)
{
	struct proto_session	 s[3];
	struct proto_buf	 b = { 0 };
	static const char *const top[] = { "sessions", NULL };
	json_t			*j, *a;
	size_t			 i;

	proto_render_session_list(&b, NULL, 0);
	ck_assert_uint_eq(b.len, strlen("{\"sessions\":[]}"));
	ck_assert_mem_eq(b.data, "{\"sessions\":[]}", b.len);
	for (i = 0; i < 3; i++)
		s[i] = sample_session();
	s[1].id = "s2";
	s[1].exited = 1;
	s[1].exit_code = 1;
	s[1].ended_ms = 1796209200001LL;
	s[2].id = "s3";
	b.len = 0;
	proto_render_session_list(&b, s, 3);
	j = load(&b);
	check_keys(j, top);
	a = json_object_get(j, "sessions");
	ck_assert_uint_eq(json_array_size(a), 3);
	for (i = 0; i < 3; i++)
		check_keys(json_array_get(a, i), session_keys);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(a,
	    1), "id")), "s2");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(a,
	    1), "state")), "exited");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(a,
	    2), "id")), "s3");
	json_decref(j);
	/* A page names the rest with "next". */
	b.len = 0;
	proto_render_session_page(&b, s, 2, "7");
	j = load(&b);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "sessions")), 2);
	ck_assert_str_eq(json_string_value(json_object_get(j, "next")), "7");
	json_decref(j);
	proto_buf_free(&b);
}
END_TEST

START_TEST(render_parsed_create)
{
	struct proto_create	 c;
	struct proto_err	 e;
	struct proto_session	 s = sample_session();
	json_t			*j, *a;

	ck_assert_int_eq(create("{\"argv\":[\"printf\",\"%s\\n\",\"a\\\"b\","
	    "\"\\u001b[0m\"],\"cwd\":\"/tmp/d\\u00e9j\\u00e0\"}", &c, &e), 0);
	s.argv = c.argv;
	s.cwd = c.cwd;
	j = render_json(&s, NULL, -1);
	a = json_object_get(j, "argv");
	ck_assert_str_eq(json_string_value(json_array_get(a, 1)), "%s\n");
	ck_assert_str_eq(json_string_value(json_array_get(a, 2)), "a\"b");
	ck_assert_str_eq(json_string_value(json_array_get(a, 3)), "\x1b[0m");
	ck_assert_str_eq(json_string_value(json_object_get(j, "cwd")),
	    "/tmp/d\xc3\xa9j\xc3\xa0");
	json_decref(j);
	proto_create_free(&c);
}
END_TEST

/* user= of the files calls: query and JSON, bounds. */
START_TEST(files_user)
{
	struct proto_files_query	 q;
	struct proto_stat_req		 st;
	struct proto_fetch		 f;
	struct proto_err		 e;
	char				 body[600], name[PROTO_USER_MAX + 2];
	const char			*fetch = "{\"url\":\"http://h/\","
	    "\"path\":\"/a\",\"user\":\"nobody\"}";

	ck_assert_int_eq(proto_parse_files_query("path=/a&user=n%6Fbody", &q,
	    &e), 0);
	ck_assert_str_eq(q.user, "nobody");
	proto_files_query_free(&q);
	ck_assert_int_eq(proto_parse_files_query("path=/a", &q, &e), 0);
	ck_assert_ptr_null(q.user);
	proto_files_query_free(&q);
	ck_assert_int_eq(proto_parse_files_query("path=/a&user=", &q, &e), -1);
	ck_assert_int_eq(e.status, 400);
	ck_assert_int_eq(proto_parse_files_query("path=/a&user=a%00b", &q, &e),
	    -1);
	memset(name, 'u', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	snprintf(body, sizeof body, "path=/a&user=%s", name);
	ck_assert_int_eq(proto_parse_files_query(body, &q, &e), -1);
	name[PROTO_USER_MAX] = '\0';
	snprintf(body, sizeof body, "path=/a&user=%s", name);
	ck_assert_int_eq(proto_parse_files_query(body, &q, &e), 0);
	proto_files_query_free(&q);

	snprintf(body, sizeof body, "{\"paths\":[\"/\"],\"user\":\"0\"}");
	ck_assert_int_eq(proto_parse_stat(body, strlen(body), &st, &e), 0);
	ck_assert_str_eq(st.user, "0");
	proto_stat_req_free(&st);
	snprintf(body, sizeof body, "{\"paths\":[],\"user\":0}");
	ck_assert_int_eq(proto_parse_stat(body, strlen(body), &st, &e), -1);
	ck_assert_str_eq(e.code, "invalid_request");
	ck_assert_int_eq(proto_parse_fetch(fetch, strlen(fetch), &f, &e), 0);
	ck_assert_str_eq(f.user, "nobody");
	proto_fetch_free(&f);
	ck_assert_ptr_null(f.user);
}
END_TEST

/* All the cases. */
static Suite *
proto_suite(void)
{
	Suite	*s = suite_create("proto");
	TCase	*t;

	t = tcase_create("create");
	tcase_add_test(t, create_cmd_defaults);
	tcase_add_test(t, create_cmd_shell_and_empty);
	tcase_add_test(t, create_login);
	tcase_add_test(t, budget_fields);
	tcase_add_test(t, render_window_head_tail);
	tcase_add_test(t, create_argv);
	tcase_add_test(t, create_all_fields);
	tcase_add_test(t, create_limits);
	tcase_add_test(t, create_boundaries_and_clamps);
	tcase_add_test(t, create_cmd_xor_argv);
	tcase_add_loop_test(t, create_bad_field, 0,
	    (int)(sizeof create_bad / sizeof create_bad[0]));
	tcase_add_test(t, create_invalid_json);
	tcase_add_test(t, create_duplicates_unknown_toplevel);
	tcase_add_test(t, id_valid);
	suite_add_tcase(s, t);

	t = tcase_create("bodies");
	tcase_add_test(t, stdin_ok);
	tcase_add_test(t, stdin_errors);
	tcase_add_test(t, resize);
	tcase_add_test(t, signal_body);
	tcase_add_test(t, signal_target);
	tcase_add_test(t, signal_names);
	suite_add_tcase(s, t);

	t = tcase_create("query");
	tcase_add_test(t, query_defaults_and_all);
	tcase_add_test(t, query_decoding);
	tcase_add_test(t, query_port);
	tcase_add_test(t, query_clamps);
	tcase_add_test(t, query_errors);
	tcase_add_test(t, files_user);
	suite_add_tcase(s, t);

	t = tcase_create("base64_buf");
	tcase_add_test(t, b64_vectors);
	tcase_add_test(t, b64_random_roundtrip);
	tcase_add_test(t, b64_matches_reference);
	tcase_add_test(t, b64_invalid);
	tcase_add_test(t, buf_growth_and_oom);
	tcase_add_test(t, fail_message);
	suite_add_tcase(s, t);

	t = tcase_create("render");
	tcase_add_test(t, json_string_bytes);
	tcase_add_test(t, json_string_utf8);
	tcase_add_test(t, json_string_random);
	tcase_add_test(t, format_time);
	tcase_add_test(t, render_exact);
	tcase_add_test(t, render_window_len_is_enough);
	tcase_add_test(t, render_running);
	tcase_add_test(t, render_labels);
	tcase_add_test(t, render_exited);
	tcase_add_test(t, render_window);
	tcase_add_test(t, render_big_window);
	tcase_add_test(t, render_error);
	tcase_add_test(t, render_list);
	tcase_add_test(t, render_parsed_create);
	suite_add_tcase(s, t);
	return (s);
}

int
main(void)
{
	SRunner	*sr;
	int	 failed;

	json_object_seed(1);	/* no /dev/urandom read in the tests */
	sr = srunner_create(proto_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
