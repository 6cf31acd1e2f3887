/*
 * test_evring.c -- Check unit tests of evring.c: the event feed's ring (ids,
 * the bounds by count and by bytes), its cursor rules (a gap, a cursor
 * after the newest, a read cut by max) and its filters.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "../checkmain.h"

#include "evring.h"
#include "util.h"

static Suite	*evring_suite(void);

/* Push an event whose JSON is its text. */
static uint64_t
push(struct evring *r, const char *type, const char *session,
    const char *json)
{
	return (evring_push(r, type, session, xstrdup(json), strlen(json)));
}

START_TEST(test_ids_and_read)
{
	struct evring		*r = evring_new(8, 1 << 20);
	struct evring_event	 out[8];
	struct evring_result	 res;
	uint64_t		 i;

	ck_assert_uint_eq(evring_newest(r), 0);
	ck_assert_int_eq(evring_read(r, 0, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 0);
	ck_assert_uint_eq(res.cursor, 0);
	ck_assert_uint_eq(res.dropped, 0);
	for (i = 1; i <= 5; i++)
		ck_assert_uint_eq(push(r, "a", NULL, "{}"), i);
	ck_assert_int_eq(evring_read(r, 0, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 5);
	for (i = 0; i < 5; i++)
		ck_assert_uint_eq(out[i].id, i + 1);
	ck_assert_uint_eq(res.cursor, 5);
	ck_assert_int_eq(evring_read(r, 3, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 2);
	ck_assert_uint_eq(out[0].id, 4);
	ck_assert_int_eq(evring_read(r, 5, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 0);
	ck_assert_uint_eq(res.cursor, 5);
	ck_assert_int_eq(evring_read(r, 6, NULL, out, 8, &res), -ERANGE);
	/* max cuts the read: the cursor is the last one returned */
	ck_assert_int_eq(evring_read(r, 0, NULL, out, 2, &res), 0);
	ck_assert_uint_eq(res.n, 2);
	ck_assert_uint_eq(res.cursor, 2);
	evring_free(r);
}
END_TEST

START_TEST(test_bound_by_count)
{
	struct evring		*r = evring_new(3, 1 << 20);
	struct evring_event	 out[8];
	struct evring_result	 res;
	struct evring_stats	 st;
	int			 i;

	for (i = 0; i < 10; i++)
		push(r, "a", "s", "{\"x\":1}");
	evring_stats(r, &st);
	ck_assert_uint_eq(st.newest, 10);
	ck_assert_uint_eq(st.held, 3);
	ck_assert_uint_eq(st.dropped, 7);
	ck_assert_int_eq(evring_read(r, 0, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.dropped, 7);
	ck_assert_uint_eq(res.n, 3);
	ck_assert_uint_eq(out[0].id, 8);
	ck_assert_uint_eq(res.cursor, 10);
	ck_assert_int_eq(evring_read(r, 7, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.dropped, 0);
	ck_assert_int_eq(evring_read(r, 5, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.dropped, 2);
	ck_assert_str_eq(out[0].json, "{\"x\":1}");
	ck_assert_str_eq(out[0].session, "s");
	evring_free(r);
}
END_TEST

START_TEST(test_bound_by_bytes)
{
	struct evring		*r;
	struct evring_stats	 st;
	char			 big[1001];
	int			 i;

	/* each event costs 1000 + 2 ("a\0") + EVRING_ENTRY_BYTES */
	r = evring_new(1000, 3 * (1000 + 2 + EVRING_ENTRY_BYTES));
	memset(big, 'x', 1000);
	big[1000] = '\0';
	for (i = 0; i < 5; i++)
		push(r, "a", NULL, big);
	evring_stats(r, &st);
	ck_assert_uint_eq(st.held, 3);
	ck_assert_uint_eq(st.bytes, 3 * (1000 + 2 + EVRING_ENTRY_BYTES));
	/* one event over the bound alone is still held, alone */
	push(r, "a", NULL, "{}");
	evring_free(r);
	r = evring_new(10, 16);
	push(r, "a", NULL, big);
	push(r, "a", NULL, big);
	evring_stats(r, &st);
	ck_assert_uint_eq(st.held, 1);
	ck_assert_uint_eq(st.newest, 2);
	evring_free(r);
}
END_TEST

START_TEST(test_filter_cursor)
{
	struct evring		*r = evring_new(100, 1 << 20);
	struct evring_filter	 f;
	struct evring_event	 out[8];
	struct evring_result	 res;
	char			 err[256];

	push(r, "session.created", "a", "{}");		/* 1 */
	push(r, "session.created", "b", "{}");		/* 2 */
	push(r, "port.opened", NULL, "{}");		/* 3 */
	push(r, "session.exited", "a", "{}");		/* 4 */
	push(r, "session.exited", "b", "{}");		/* 5 */
	push(r, "port.closed", NULL, "{}");		/* 6 */

	ck_assert_int_eq(evring_filter_set(&f, "a", NULL, err, sizeof err), 0);
	ck_assert_int_eq(evring_read(r, 0, &f, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 2);
	ck_assert_uint_eq(out[0].id, 1);
	ck_assert_uint_eq(out[1].id, 4);
	/* the cursor is the last event looked at, not the last kept */
	ck_assert_uint_eq(res.cursor, 6);
	/* cut by max: the cursor stops before the next kept one */
	ck_assert_int_eq(evring_read(r, 0, &f, out, 1, &res), 0);
	ck_assert_uint_eq(res.n, 1);
	ck_assert_uint_eq(res.cursor, 3);
	ck_assert_int_eq(evring_match(&f, "session.exited", "a"), 1);
	ck_assert_int_eq(evring_match(&f, "session.exited", "b"), 0);
	ck_assert_int_eq(evring_match(&f, "port.opened", NULL), 0);
	evring_filter_free(&f);

	ck_assert_int_eq(evring_filter_set(&f, NULL,
	    "session.exited,port.closed", err, sizeof err), 0);
	ck_assert_uint_eq(f.ntypes, 2);
	ck_assert_int_eq(evring_read(r, 0, &f, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 3);
	ck_assert_uint_eq(out[0].id, 4);
	ck_assert_uint_eq(out[2].id, 6);
	evring_filter_free(&f);

	ck_assert_int_eq(evring_filter_set(&f, "b", "session.exited", err,
	    sizeof err), 0);
	ck_assert_int_eq(evring_read(r, 0, &f, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 1);
	ck_assert_uint_eq(out[0].id, 5);
	evring_filter_free(&f);

	/* nothing kept: still looked at */
	ck_assert_int_eq(evring_filter_set(&f, "zzz", NULL, err, sizeof err),
	    0);
	ck_assert_int_eq(evring_read(r, 2, &f, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 0);
	ck_assert_uint_eq(res.cursor, 6);
	evring_filter_free(&f);
	evring_free(r);
}
END_TEST

START_TEST(test_filter_parse)
{
	struct evring_filter	 f;
	char			 err[256], many[400];
	size_t			 i;

	ck_assert_int_eq(evring_filter_set(&f, "", "", err, sizeof err), 0);
	ck_assert_ptr_null(f.session);
	ck_assert_uint_eq(f.ntypes, 0);
	ck_assert_int_eq(evring_match(&f, "x", NULL), 1);
	evring_filter_free(&f);
	ck_assert_int_eq(evring_filter_set(&f, NULL, "a,,b", err, sizeof err),
	    -1);
	ck_assert_ptr_nonnull(strstr(err, "types"));
	ck_assert_int_eq(evring_filter_set(&f, NULL, "a,", err, sizeof err),
	    -1);
	ck_assert_int_eq(evring_filter_set(&f, NULL, "Session.Created", err,
	    sizeof err), -1);
	ck_assert_int_eq(evring_filter_set(&f, NULL, "a b", err, sizeof err),
	    -1);
	many[0] = '\0';
	for (i = 0; i <= EVRING_TYPES_MAX; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many),
		    "%st%zu", i > 0 ? "," : "", i);
	ck_assert_int_eq(evring_filter_set(&f, NULL, many, err, sizeof err),
	    -1);
	ck_assert_ptr_nonnull(strstr(err, "at most"));
	*strrchr(many, ',') = '\0';
	ck_assert_int_eq(evring_filter_set(&f, NULL, many, err, sizeof err),
	    0);
	ck_assert_uint_eq(f.ntypes, EVRING_TYPES_MAX);
	evring_filter_free(&f);
}
END_TEST

/* A ring handed over (an upgrade) goes on with the old ids. */
START_TEST(test_resume)
{
	struct evring		*r = evring_new(8, 1 << 20);
	struct evring_event	 out[8];
	struct evring_result	 res;

	ck_assert_int_eq(evring_resume(r, 41, 3), 0);
	ck_assert_uint_eq(push(r, "a", NULL, "{}"), 42);
	ck_assert_int_eq(evring_resume(r, 1, 0), -EBUSY);
	ck_assert_int_eq(evring_read(r, 40, NULL, out, 8, &res), 0);
	ck_assert_uint_eq(res.n, 1);
	ck_assert_uint_eq(res.dropped, 1);
	ck_assert_uint_eq(out[0].id, 42);
	ck_assert_int_eq(evring_read(r, 43, NULL, out, 8, &res), -ERANGE);
	evring_free(r);
}
END_TEST

/* The suite. */
static Suite *
evring_suite(void)
{
	Suite	*s = suite_create("evring");
	TCase	*tc = tcase_create("evring");

	tcase_add_test(tc, test_ids_and_read);
	tcase_add_test(tc, test_bound_by_count);
	tcase_add_test(tc, test_bound_by_bytes);
	tcase_add_test(tc, test_filter_cursor);
	tcase_add_test(tc, test_filter_parse);
	tcase_add_test(tc, test_resume);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(evring_suite()));
}
