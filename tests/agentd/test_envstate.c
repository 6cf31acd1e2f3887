/*
 * test_envstate.c -- Check unit tests of envstate.c, what envd's /init set:
 * envVars replaced (as envd's ReplaceUserVars) and their limits,
 * E2B_EVENTS_ADDRESS beside them, stale timestamps, and the hand-over across an upgrade
 * (envstate_save() then envstate_load() gives back the same state, an item
 * it does not know is skipped, the next section is left to the caller).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <jansson.h>

#include "../checkmain.h"

#include "envstate.h"
#include "upgstate.h"
#include "util.h"

static Suite	*envstate_suite(void);

/* Save what is set now, forget it, and read it back from the state. */
static void
round_trip(const char *extra_key, const char *extra_value)
{
	struct upgstate_w	*w;
	struct upgstate		*r;
	const char		*key, *value;
	char			 cause[UPGSTATE_CAUSE_MAX];
	size_t			 len;
	int			 textfd, blobfd;

	w = upgstate_writer(cause, sizeof cause);
	ck_assert_ptr_nonnull(w);
	envstate_save(w);
	if (extra_key != NULL)
		upgstate_put(w, extra_key, "%s", extra_value);
	upgstate_section(w, "next");
	upgstate_put(w, "after", "1");
	ck_assert_int_eq(upgstate_finish(w, &textfd, &blobfd, cause,
	    sizeof cause), 0);
	envstate_free();
	r = upgstate_open(textfd, cause, sizeof cause);
	ck_assert_ptr_nonnull(r);
	while (upgstate_next(r, &key, &value, &len) == UPGSTATE_SECTION &&
	    strcmp(key, "envd") == 0)
		envstate_load(r);
	/* The next section is the caller's, given back whole. */
	ck_assert_str_eq(key, "next");
	ck_assert_int_eq(upgstate_next(r, &key, &value, &len), UPGSTATE_ITEM);
	ck_assert_str_eq(key, "after");
	upgstate_close(r);
	close(textfd);
}

START_TEST(test_round_trip)
{
	json_t	*vars;
	char	 cause[128];

	vars = json_pack("{ssssss}", "A", "1", "EQ", "a=b=c", "U", "caf\xc3\xa9 \n");
	ck_assert_int_eq(envstate_replace_vars(vars, cause, sizeof cause), 0);
	json_decref(vars);
	envstate_set_user("nobody");
	envstate_set_workdir("/tmp/a b");
	envstate_set_token_from_init(1);
	envstate_set_hyperloop("10.0.0.9");
	envstate_set_ca("-----BEGIN CERTIFICATE-----\nAAAA\n"
	    "-----END CERTIFICATE-----\n");
	ck_assert_int_eq(envstate_take_timestamp(2000), 1);
	envstate_set_mount("/mnt/a b", "life-1");
	envstate_set_mount("/mnt/c", "");
	envstate_set_mount("/mnt/gone", "x");
	envstate_set_mount("/mnt/gone", NULL);
	round_trip("unknown", "x");
	/* The mounts and their lifecycle came along. */
	ck_assert_str_eq(envstate_mount("/mnt/a b"), "life-1");
	ck_assert_str_eq(envstate_mount("/mnt/c"), "");
	ck_assert_ptr_null(envstate_mount("/mnt/gone"));
	ck_assert_str_eq(envstate_user(), "nobody");
	ck_assert_str_eq(envstate_workdir(), "/tmp/a b");
	ck_assert_int_eq(envstate_token_from_init(), 1);
	ck_assert_str_eq(envstate_hyperloop(), "10.0.0.9");
	ck_assert_str_eq(envstate_ca(), "-----BEGIN CERTIFICATE-----\nAAAA\n"
	    "-----END CERTIFICATE-----\n");
	/* The newest timestamp came along: an older /init is stale. */
	ck_assert_int_eq(envstate_take_timestamp(1999), 0);
	ck_assert_int_eq(envstate_take_timestamp(2000), 1);
	ck_assert_int_eq(json_object_size(envstate_vars()), 4);
	ck_assert_str_eq(json_string_value(json_object_get(envstate_vars(),
	    "E2B_EVENTS_ADDRESS")), "http://10.0.0.9");
	envstate_set_hyperloop("");
	ck_assert_int_eq(json_object_size(envstate_vars()), 3);
	ck_assert_str_eq(json_string_value(json_object_get(envstate_vars(),
	    "EQ")), "a=b=c");
	ck_assert_str_eq(json_string_value(json_object_get(envstate_vars(),
	    "U")), "caf\xc3\xa9 \n");
	ck_assert_str_eq(envstate_env()[0], "A=1");
	ck_assert_ptr_null(envstate_env()[3]);
	/* Twice: the same again. */
	round_trip(NULL, NULL);
	ck_assert_str_eq(envstate_user(), "nobody");
	ck_assert_int_eq(json_object_size(envstate_vars()), 3);
	envstate_free();
}
END_TEST

START_TEST(test_nothing_set)
{
	envstate_free();
	round_trip(NULL, NULL);
	ck_assert_ptr_null(envstate_workdir());
	ck_assert_ptr_null(envstate_vars());
	ck_assert_ptr_null(envstate_env()[0]);
	ck_assert_int_eq(envstate_token_from_init(), 0);
	if (geteuid() == 0)
		ck_assert_str_eq(envstate_user(), "root");
	/* The token's origin alone is saved too. */
	envstate_set_token_from_init(1);
	round_trip(NULL, NULL);
	ck_assert_int_eq(envstate_token_from_init(), 1);
	envstate_free();
}
END_TEST

START_TEST(test_merge_limits)
{
	json_t	*vars;
	char	 cause[128], name[32];
	int	 i;

	envstate_free();
	vars = json_pack("{si}", "A", 1);
	ck_assert_int_eq(envstate_replace_vars(vars, cause, sizeof cause), -1);
	json_decref(vars);
	vars = json_pack("{ss}", "A=B", "1");
	ck_assert_int_eq(envstate_replace_vars(vars, cause, sizeof cause), -1);
	json_decref(vars);
	vars = json_object();
	for (i = 0; i < ENVSTATE_VARS_MAX; i++) {
		snprintf(name, sizeof name, "V%d", i);
		json_object_set_new(vars, name, json_string("x"));
	}
	ck_assert_int_eq(envstate_replace_vars(vars, cause, sizeof cause), 0);
	/* One more: refused, nothing changed. */
	json_object_set_new(vars, "NEW", json_string("1"));
	ck_assert_int_eq(envstate_replace_vars(vars, cause, sizeof cause), -1);
	json_decref(vars);
	ck_assert_int_eq(json_object_size(envstate_vars()), ENVSTATE_VARS_MAX);
	ck_assert_ptr_null(json_object_get(envstate_vars(), "NEW"));
	/* The next set replaces the last, as envd's ReplaceUserVars. */
	vars = json_pack("{ss}", "NEW", "1");
	ck_assert_int_eq(envstate_replace_vars(vars, cause, sizeof cause), 0);
	json_decref(vars);
	ck_assert_int_eq(json_object_size(envstate_vars()), 1);
	/* E2B_EVENTS_ADDRESS is internal: an envVar does not override it. */
	envstate_set_hyperloop("fd00::1");
	vars = json_pack("{ss}", "E2B_EVENTS_ADDRESS", "mine");
	ck_assert_int_eq(envstate_replace_vars(vars, cause, sizeof cause), 0);
	json_decref(vars);
	ck_assert_str_eq(json_string_value(json_object_get(envstate_vars(),
	    "E2B_EVENTS_ADDRESS")), "http://fd00::1");
	ck_assert_str_eq(envstate_env()[0], "E2B_EVENTS_ADDRESS=http://fd00::1");
	ck_assert_ptr_null(envstate_env()[1]);
	envstate_free();
}
END_TEST

/* The suite. */
static Suite *
envstate_suite(void)
{
	Suite	*s = suite_create("envstate");
	TCase	*tc = tcase_create("state");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_nothing_set);
	tcase_add_test(tc, test_merge_limits);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (check_main(envstate_suite()));
}
