/*
 * test_upgstate.c -- Check unit tests of upgstate.c, the state one agentd
 * hands its successor on an upgrade: a round trip (sections, escaped
 * values, the blob), and states refused whole (truncated, corrupt, a
 * foreign version, a blob cut short) or read with a garbled line skipped.
 */
#include <sys/mman.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "../checkmain.h"

#include "upgstate.h"
#include "util.h"

static Suite	*upgstate_suite(void);

/* Write the state every test starts from; its two fds. */
static void
make_state(int *textfd, int *blobfd)
{
	struct upgstate_w	*w;
	char			 cause[UPGSTATE_CAUSE_MAX];
	static const uint8_t	 bytes[] = { 0, 1, 2, '\n', '\\', 0xff };

	w = upgstate_writer(cause, sizeof cause);
	ck_assert_ptr_nonnull(w);
	upgstate_put(w, "version", "%s", "0.1.0");
	upgstate_section(w, "session");
	upgstate_put(w, "id", "s%d", 1);
	upgstate_put_bytes(w, "argv", bytes, sizeof bytes);
	ck_assert_uint_eq(upgstate_blob(w, "hello", 5), 0);
	ck_assert_uint_eq(upgstate_blob(w, "world", 5), 5);
	upgstate_put(w, "chunk", "1 0 0 5");
	upgstate_section(w, "events");
	upgstate_put(w, "next", "%" PRIu64, UINT64_MAX);
	ck_assert_int_eq(upgstate_finish(w, textfd, blobfd, cause,
	    sizeof cause), 0);
}

/* The state's text, malloc'd, NUL-terminated. */
static char *
slurp(int fd, size_t *len)
{
	char	*buf;
	off_t	 n = lseek(fd, 0, SEEK_END);

	buf = xmalloc((size_t)n + 1);
	ck_assert_int_eq(pread(fd, buf, (size_t)n, 0), n);
	buf[n] = '\0';
	*len = (size_t)n;
	return (buf);
}

/* Replace fd's text by buf. */
static void
rewrite(int fd, const char *buf, size_t len)
{
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(pwrite(fd, buf, len, 0), (ssize_t)len);
}

/* Replace fd's text by body with a header and a right checksum. */
static void
rewrite_signed(int fd, const char *body)
{
	char	*buf;
	char	 sum[48];
	size_t	 len;

	len = strlen(body);
	snprintf(sum, sizeof sum, "checksum=%016" PRIx64 "\n",
	    upgstate_checksum(body, len));
	buf = xmalloc(len + strlen(sum) + 1);
	memcpy(buf, body, len);
	strcpy(buf + len, sum);
	rewrite(fd, buf, strlen(buf));
	free(buf);
}

START_TEST(test_round_trip)
{
	struct upgstate	*r;
	const char	*key, *value;
	const uint8_t	*b;
	char		 cause[UPGSTATE_CAUSE_MAX];
	size_t		 len;
	uint64_t	 u;
	int		 textfd, blobfd;

	make_state(&textfd, &blobfd);
	r = upgstate_open(textfd, cause, sizeof cause);
	ck_assert_msg(r != NULL, "%s", cause);
	ck_assert_int_eq(upgstate_blob_fd(r), blobfd);
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_str_eq(key, "version");
	ck_assert_str_eq(value, "0.1.0");
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len),
	    UPGSTATE_SECTION);
	ck_assert_str_eq(key, "session");
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_str_eq(value, "s1");
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_str_eq(key, "argv");
	ck_assert_uint_eq(len, 6);
	ck_assert(memcmp(value, "\0\1\2\n\\\xff", 6) == 0);
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_str_eq(value, "1 0 0 5");
	b = upgstate_blob_at(r, 0, 10);
	ck_assert_ptr_nonnull(b);
	ck_assert(memcmp(b, "helloworld", 10) == 0);
	ck_assert_ptr_null(upgstate_blob_at(r, 6, 5));
	ck_assert_ptr_null(upgstate_blob_at(r, UINT64_MAX, 2));
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len),
	    UPGSTATE_SECTION);
	ck_assert_str_eq(key, "events");
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_int_eq(upgstate_u64(value, &u), 0);
	ck_assert_uint_eq(u, UINT64_MAX);
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_END);
	upgstate_close(r);	/* closes blobfd */
	ck_assert_int_eq(fcntl(blobfd, F_GETFD), -1);
	close(textfd);
}
END_TEST

START_TEST(test_truncated)
{
	char	 cause[UPGSTATE_CAUSE_MAX], *buf;
	size_t	 len, cut;
	int	 textfd, blobfd;

	make_state(&textfd, &blobfd);
	buf = slurp(textfd, &len);
	/* Every cut short of the whole is refused. */
	for (cut = 0; cut < len; cut++) {
		rewrite(textfd, buf, cut);
		ck_assert_msg(upgstate_open(textfd, cause, sizeof cause) ==
		    NULL, "a state cut at %zu of %zu read", cut, len);
	}
	rewrite(textfd, buf, len - 1);
	ck_assert_ptr_null(upgstate_open(textfd, cause, sizeof cause));
	ck_assert_str_eq(cause, "truncated (no last line)");
	free(buf);
	close(textfd);
	close(blobfd);
}
END_TEST

START_TEST(test_corrupt)
{
	char	 cause[UPGSTATE_CAUSE_MAX], want[64], *buf;
	size_t	 len, i;
	int	 textfd, blobfd;

	make_state(&textfd, &blobfd);
	buf = slurp(textfd, &len);
	/* One byte changed anywhere before the checksum line. */
	for (i = 0; i < len - 26; i++) {
		buf[i] ^= 0x20;
		rewrite(textfd, buf, len);
		ck_assert_msg(upgstate_open(textfd, cause, sizeof cause) ==
		    NULL, "byte %zu changed, read", i);
		buf[i] ^= 0x20;
	}
	rewrite(textfd, buf, len);
	/* The blob changed under a good text. */
	ck_assert_int_eq(pwrite(blobfd, "J", 1, 0), 1);
	ck_assert_ptr_null(upgstate_open(textfd, cause, sizeof cause));
	ck_assert_str_eq(cause, "blob checksum mismatch");
	/* A state refused closes the blob it names. */
	ck_assert_int_eq(fcntl(blobfd, F_GETFD), -1);
	free(buf);
	close(textfd);
	/* The blob cut short. */
	make_state(&textfd, &blobfd);
	ck_assert_int_eq(ftruncate(blobfd, 3), 0);
	ck_assert_ptr_null(upgstate_open(textfd, cause, sizeof cause));
	snprintf(want, sizeof want, "blob fd %d: missing or short", blobfd);
	ck_assert_str_eq(cause, want);
	ck_assert_int_eq(fcntl(blobfd, F_GETFD), -1);
	close(textfd);
}
END_TEST

START_TEST(test_foreign_version)
{
	struct upgstate	*r;
	char		 cause[UPGSTATE_CAUSE_MAX], body[256];
	int		 textfd, blobfd;

	make_state(&textfd, &blobfd);
	snprintf(body, sizeof body, "%s 2\nblob-fd=%d\nblob-bytes=0\n"
	    "blob-checksum=cbf29ce484222325\n", UPGSTATE_MAGIC, blobfd);
	rewrite_signed(textfd, body);
	ck_assert_ptr_null(upgstate_open(textfd, cause, sizeof cause));
	ck_assert_str_eq(cause, "foreign version: agentd-upgrade-state 2");
	rewrite_signed(textfd, "something else\n");
	ck_assert_ptr_null(upgstate_open(textfd, cause, sizeof cause));
	ck_assert_str_eq(cause, "not an agentd state");
	/* The same body under version 1 reads. */
	snprintf(body, sizeof body, "%s 1\nblob-fd=%d\nblob-bytes=0\n"
	    "blob-checksum=cbf29ce484222325\n", UPGSTATE_MAGIC, blobfd);
	rewrite_signed(textfd, body);
	r = upgstate_open(textfd, cause, sizeof cause);
	ck_assert_msg(r != NULL, "%s", cause);
	upgstate_close(r);
	close(textfd);
}
END_TEST

START_TEST(test_garbled_skipped)
{
	struct upgstate	*r;
	const char	*key, *value;
	char		 cause[UPGSTATE_CAUSE_MAX], body[512];
	size_t		 len;
	int		 textfd, blobfd;

	make_state(&textfd, &blobfd);
	snprintf(body, sizeof body, "%s 1\nblob-fd=%d\nblob-bytes=10\n"
	    "blob-checksum=%016" PRIx64 "\n[bad section\nno equals sign\n"
	    "Bad-Key=1\nbad=\\q\n[session]\nid=s1\n\nlast=\\x4\n"
	    "ok=\\x41\n", UPGSTATE_MAGIC, blobfd,
	    upgstate_checksum("helloworld", 10));
	rewrite_signed(textfd, body);
	r = upgstate_open(textfd, cause, sizeof cause);
	ck_assert_msg(r != NULL, "%s", cause);
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len),
	    UPGSTATE_SECTION);
	ck_assert_str_eq(key, "session");
	ck_assert_uint_eq(upgstate_line(r), 9);
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_str_eq(key, "id");
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_str_eq(key, "ok");
	ck_assert_str_eq(value, "A");
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_END);
	upgstate_close(r);
	close(textfd);
}
END_TEST

START_TEST(test_numbers)
{
	uint64_t	u;
	int64_t		i;

	ck_assert_int_eq(upgstate_u64("18446744073709551615", &u), 0);
	ck_assert_uint_eq(u, UINT64_MAX);
	ck_assert_int_eq(upgstate_u64("18446744073709551616", &u), -1);
	ck_assert_int_eq(upgstate_u64("-1", &u), -1);
	ck_assert_int_eq(upgstate_u64("1x", &u), -1);
	ck_assert_int_eq(upgstate_u64("", &u), -1);
	ck_assert_int_eq(upgstate_i64("-5", &i), 0);
	ck_assert_int_eq(i, -5);
	ck_assert_int_eq(upgstate_i64("", &i), -1);
}
END_TEST

/* The suite. */
static Suite *
upgstate_suite(void)
{
	Suite	*s = suite_create("upgstate");
	TCase	*tc = tcase_create("format");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_corrupt);
	tcase_add_test(tc, test_foreign_version);
	tcase_add_test(tc, test_garbled_skipped);
	tcase_add_test(tc, test_numbers);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(upgstate_suite()));
}
