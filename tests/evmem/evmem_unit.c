/*
 * evmem_unit.c -- Check tests for agentd/evmem.c: libevent's allocator that
 * keeps freed buffer blocks by size class, within a byte budget.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "evmem.h"

/* A freed chain-sized block is the next one of its class handed out. */
START_TEST(test_reuse)
{
	void	*a, *b;

	a = evmem_malloc(1024);
	ck_assert_ptr_nonnull(a);
	memset(a, 1, 1024);
	evmem_free(a);
	ck_assert_uint_ge(evmem_kept(), 1024);
	b = evmem_malloc(1024);
	ck_assert_ptr_eq(a, b);
	evmem_free(b);
}
END_TEST

/* Only a class's exact size takes a kept block; a kept block is big enough. */
START_TEST(test_classes)
{
	unsigned char	*p, *q;
	size_t		 before;

	p = evmem_malloc(4096);
	evmem_free(p);
	before = evmem_kept();
	/* 3000 is no class's size: malloc's, and the 4 KiB block stays. */
	q = evmem_malloc(3000);
	ck_assert_uint_eq(evmem_kept(), before);
	free(q);
	/* The class's size takes it, and it holds the whole size. */
	q = evmem_malloc(4096);
	ck_assert_ptr_eq(q, p);
	ck_assert_uint_eq(evmem_kept(), before - 4096);
	memset(q, 2, 4096);
	q = evmem_realloc(q, 8192);
	ck_assert_ptr_nonnull(q);
	ck_assert_uint_eq(q[4095], 2);
	memset(q, 3, 8192);
	evmem_free(q);
	/* Too small, or twice the largest class and more: not kept. */
	before = evmem_kept();
	evmem_free(evmem_malloc(64));
	evmem_free(evmem_malloc(EVMEM_MAX * 2));
	ck_assert_uint_eq(evmem_kept(), before);
	evmem_free(NULL);
}
END_TEST

/* What is kept never passes the budget. */
START_TEST(test_budget)
{
	void	*p[64];
	int	 i;

	for (i = 0; i < 64; i++)
		p[i] = evmem_malloc(EVMEM_MAX);
	for (i = 0; i < 64; i++)
		evmem_free(p[i]);
	ck_assert_uint_le(evmem_kept(), EVMEM_KEEP_BYTES);
	ck_assert_uint_ge(evmem_kept(), EVMEM_KEEP_BYTES - EVMEM_MAX);
}
END_TEST

/* The suite. */
static Suite *
evmem_suite(void)
{
	Suite	*s = suite_create("evmem");
	TCase	*tc = tcase_create("evmem");

	tcase_add_test(tc, test_reuse);
	tcase_add_test(tc, test_classes);
	tcase_add_test(tc, test_budget);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run the suite; the exit status says whether everything passed. */
int
main(void)
{
	SRunner	*sr = srunner_create(evmem_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
