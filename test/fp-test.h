/*
 * flame_profd — thin assertion wrappers, so the test framework can be
 * swapped without touching every test.
 */
#pragma once

#include <check.h>

#define fp_assert(cond) ck_assert(cond)
#define fp_assert_int_eq(a, b) ck_assert_int_eq(a, b)
#define fp_assert_int_ne(a, b) ck_assert_int_ne(a, b)
#define fp_assert_int_ge(a, b) ck_assert_int_ge(a, b)
#define fp_assert_int_lt(a, b) ck_assert_int_lt(a, b)
#define fp_assert_str_eq(a, b) ck_assert_str_eq(a, b)
#define fp_assert_ptr_eq(a, b) ck_assert_ptr_eq(a, b)
#define fp_assert_ptr_null(p) ck_assert_ptr_null(p)
#define fp_assert_ptr_nonnull(p) ck_assert_ptr_nonnull(p)

/* Run one suite; returns the process exit status. */
static inline int
fp_test_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
