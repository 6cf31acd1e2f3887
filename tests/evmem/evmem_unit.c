/*
 * evmem_unit.c -- Check tests for agentd/evmem.c: libevent's allocator that
 * keeps freed blocks by size class, within a byte budget.
 */
#include <check.h>

#include "../checkmain.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "evmem.h"

#define LARGE	(EVMEM_MAX * 2)	/* bytes, above every class */
#define T_CHURN	256	/* blocks one churn allocates and frees */

/* A freed block is the next one of its class handed out. */
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

/*
 * A size takes a block of its class: 1000 and 1024 share one, 1025 does
 * not; small sizes (a header's strdup) are kept too.
 */
START_TEST(test_classes)
{
	unsigned char	*p, *q;
	size_t		 before;

	p = evmem_malloc(1024);
	evmem_free(p);
	q = evmem_malloc(1000);
	ck_assert_ptr_eq(q, p);
	memset(q, 2, 1024);	/* the whole class is the caller's */
	evmem_free(q);
	q = evmem_malloc(1025);
	ck_assert_ptr_ne(q, p);
	memset(q, 3, 1025);
	evmem_free(q);

	p = evmem_malloc(5);
	memcpy(p, "Host", 5);
	evmem_free(p);
	before = evmem_kept();
	q = evmem_malloc(12);
	ck_assert_ptr_eq(q, p);
	memset(q, 4, 12);
	ck_assert_uint_lt(evmem_kept(), before);
	evmem_free(q);
	q = evmem_malloc(13);	/* the next class */
	ck_assert_ptr_ne(q, p);
	evmem_free(q);

	/* Above the largest class: malloc's, never kept. */
	before = evmem_kept();
	p = evmem_malloc(LARGE);
	ck_assert_ptr_nonnull(p);
	memset(p, 4, LARGE);
	evmem_free(p);
	ck_assert_uint_eq(evmem_kept(), before);
	evmem_free(NULL);
}
END_TEST

/*
 * realloc is malloc's and keeps the bytes; a resized block is then kept
 * in the largest class it holds whole (3000 bytes: 2 KiB), never a larger.
 */
START_TEST(test_realloc)
{
	unsigned char	*p, *q;
	size_t		 i;

	p = evmem_realloc(NULL, 100);
	ck_assert_ptr_nonnull(p);
	for (i = 0; i < 100; i++)
		p[i] = (unsigned char)i;
	p = evmem_realloc(p, 3000);
	ck_assert_ptr_nonnull(p);
	for (i = 0; i < 100; i++)
		ck_assert_uint_eq(p[i], i);
	memset(p, 5, 3000);
	evmem_free(p);
	q = evmem_malloc(2100);	/* class 3 KiB: more than p holds */
	ck_assert_ptr_ne(q, p);
	evmem_free(q);
	q = evmem_malloc(2048);
	ck_assert_ptr_eq(q, p);
	memset(q, 6, 2048);
	evmem_free(q);
}
END_TEST

/*
 * A block realloc'd in place is kept by the size it has now, not the class
 * it was handed out in (200 bytes shrunk to 28: class 28, not 204).
 */
START_TEST(test_realloc_in_place)
{
	unsigned char	*p, *q;

	p = evmem_malloc(200);
	memset(p, 7, 200);
	p = evmem_realloc(p, 28);
	ck_assert_ptr_nonnull(p);
	evmem_free(p);
	q = evmem_malloc(200);
	ck_assert_ptr_ne(q, p);
	memset(q, 8, 200);
	evmem_free(q);
	q = evmem_malloc(28);
	ck_assert_ptr_eq(q, p);
	evmem_free(q);
}
END_TEST

/* Allocate T_CHURN blocks of n bytes, then free them all. */
static void
t_churn(size_t n)
{
	void	*p[T_CHURN];
	int	 i;

	for (i = 0; i < T_CHURN; i++)
		p[i] = evmem_malloc(n);
	for (i = 0; i < T_CHURN; i++)
		evmem_free(p[i]);
}

/* What is kept never passes the budget, nor a class its quarter of it. */
START_TEST(test_budget)
{
	t_churn(EVMEM_MAX);
	ck_assert_uint_le(evmem_kept(), EVMEM_KEEP_BYTES / 4);
	ck_assert_uint_ge(evmem_kept(), EVMEM_KEEP_BYTES / 4 - 2 * EVMEM_MAX);
	t_churn(EVMEM_MAX / 2);
	t_churn(EVMEM_MAX / 4);
	t_churn(EVMEM_MAX / 8);
	t_churn(EVMEM_MAX / 16);
	ck_assert_uint_le(evmem_kept(), EVMEM_KEEP_BYTES);
	ck_assert_uint_ge(evmem_kept(), EVMEM_KEEP_BYTES - 2 * EVMEM_MAX);
}
END_TEST

/* Another thread's allocation: malloc's, not a kept block. */
static void *
other_malloc(void *arg)
{
	return (evmem_malloc(*(size_t *)arg));
}

/* Another thread's free: free()'s, not kept. */
static void *
other_free(void *arg)
{
	evmem_free(arg);
	return (NULL);
}

/* Another thread's free and then malloc (two steps). */
static void *
other_free_malloc(void *arg)
{
	void	**pp = arg;

	evmem_free(pp[0]);
	pp[1] = evmem_malloc(20);
	return (NULL);
}

/*
 * A block freed on another thread, and one handed out there, are kept by
 * their own class when the keeper frees them.
 */
START_TEST(test_other_thread_classes)
{
	pthread_t	 t;
	void		*pp[2], *q;

	pp[0] = evmem_malloc(200);
	ck_assert_int_eq(pthread_create(&t, NULL, other_free_malloc, pp), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	evmem_free(pp[1]);
	q = evmem_malloc(200);
	ck_assert_ptr_ne(q, pp[1]);
	memset(q, 9, 200);
	evmem_free(q);
	q = evmem_malloc(20);
	ck_assert_ptr_eq(q, pp[1]);
	evmem_free(q);
}
END_TEST

/* Only the thread that installed evmem keeps blocks and takes them. */
START_TEST(test_keeper_only)
{
	pthread_t	 t;
	size_t		 n = 256, before;
	void		*p, *q;

	p = evmem_malloc(n);
	evmem_free(p);
	before = evmem_kept();
	ck_assert_int_eq(pthread_create(&t, NULL, other_malloc, &n), 0);
	ck_assert_int_eq(pthread_join(t, &q), 0);
	ck_assert_ptr_ne(q, p);
	ck_assert_uint_eq(evmem_kept(), before);
	ck_assert_int_eq(pthread_create(&t, NULL, other_free, q), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(evmem_kept(), before);
	q = evmem_malloc(n);	/* the keeper's: the kept block */
	ck_assert_ptr_eq(q, p);
	evmem_free(q);
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
	tcase_add_test(tc, test_realloc);
	tcase_add_test(tc, test_budget);
	tcase_add_test(tc, test_keeper_only);
	tcase_add_test(tc, test_realloc_in_place);
	tcase_add_test(tc, test_other_thread_classes);
	suite_add_tcase(s, tc);
	return (s);
}

/* Run the suite; the exit status says whether everything passed. */
int
main(void)
{
	evmem_install();	/* this thread keeps blocks */
	return (check_main(evmem_suite()));
}
