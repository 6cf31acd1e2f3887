/*
 * checkmain.h -- the end of every Check unit test: run its suite, print
 * Check's summary, exit 0 when every test passed, 1 otherwise.
 */
#ifndef TESTS_CHECKMAIN_H
#define TESTS_CHECKMAIN_H

#include <stdlib.h>

#include <check.h>

/* Run s (freed here) and return main()'s exit status. */
static inline int
check_main(Suite *s)
{
	SRunner	*sr;
	int	 failed;

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}

#endif /* TESTS_CHECKMAIN_H */
