/*
 * flame_profd — unit tests: the duration, size and choice parsers both
 * programs use (util/util-parse.c): every unit taken, every input refused.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "fp-test.h"
#include "util-parse.h"

#define BIG 18000000000000000000ULL

static const struct {
	const char *text;
	uint64_t max;
	int rc;
	uint64_t us;
} durations[] = {
	/* every unit, and a bare number */
	{ "250us", BIG, 0, 250 },
	{ "500ms", BIG, 0, 500000 },
	{ "5s", BIG, 0, 5000000 },
	{ "2m", BIG, 0, 120000000 },
	{ "1h", BIG, 0, 3600000000ULL },
	{ "2d", BIG, 0, 172800000000ULL },
	{ "3", BIG, 0, 3000000 },
	/* the numbers strtod() reads */
	{ "1.5s", BIG, 0, 1500000 },
	{ "1.5m", BIG, 0, 90000000 },
	{ ".5", BIG, 0, 500000 },
	{ "2e3ms", BIG, 0, 2000000 },
	{ "0", BIG, 0, 0 },
	{ "0.0000004", BIG, 0, 0 },
	{ "0.0000006", BIG, 0, 1 },
	{ " 5s", BIG, 0, 5000000 },
	/* the bound */
	{ "1e17us", 100000000000000000ULL, 0, 100000000000000000ULL },
	{ "1.1e17us", 100000000000000000ULL, -ERANGE, 0 },
	{ "1e30h", 100000000000000000ULL, -ERANGE, 0 },
	{ "1e30", BIG, -ERANGE, 0 },
	{ "5000000d", BIG, 0, 432000000000000000ULL },
	/* refused */
	{ "", BIG, -EINVAL, 0 },
	{ "s", BIG, -EINVAL, 0 },
	{ "banana", BIG, -EINVAL, 0 },
	{ "5x", BIG, -EINVAL, 0 },
	{ "5S", BIG, -EINVAL, 0 },
	{ "5sec", BIG, -EINVAL, 0 },
	{ "5 s", BIG, -EINVAL, 0 },
	{ "5s ", BIG, -EINVAL, 0 },
	{ "5ss", BIG, -EINVAL, 0 },
	{ "-5s", BIG, -EINVAL, 0 },
	{ "+5s", BIG, -EINVAL, 0 },
	{ " -5s", BIG, -EINVAL, 0 },
	{ "inf", BIG, -EINVAL, 0 },
	{ "nan", BIG, -EINVAL, 0 },
	{ "1e400", BIG, -EINVAL, 0 },
};

START_TEST(duration)
{
	uint64_t us = 12345;
	int rc = parse_duration(durations[_i].text, durations[_i].max, &us);

	ck_assert_msg(rc == durations[_i].rc, "\"%s\": %d, not %d",
		      durations[_i].text, rc, durations[_i].rc);
	if (rc == 0)
		ck_assert_uint_eq(us, durations[_i].us);
	else
		ck_assert_uint_eq(us, 12345);	/* untouched */
}
END_TEST

START_TEST(duration_null)
{
	uint64_t us;

	fp_assert_int_eq(parse_duration(NULL, BIG, &us), -EINVAL);
	fp_assert_int_eq(parse_size(NULL, BIG, &us), -EINVAL);
}
END_TEST

#define KI 1024ULL

static const struct {
	const char *text;
	uint64_t max;
	int rc;
	uint64_t bytes;
} sizes[] = {
	/* every unit, either case, with B, iB or nothing after it */
	{ "100", BIG, 0, 100 },
	{ "8k", BIG, 0, 8 * KI },
	{ "8K", BIG, 0, 8 * KI },
	{ "8KB", BIG, 0, 8 * KI },
	{ "8KiB", BIG, 0, 8 * KI },
	{ "64m", BIG, 0, 64 * KI * KI },
	{ "64M", BIG, 0, 64 * KI * KI },
	{ "64MiB", BIG, 0, 64 * KI * KI },
	{ "2g", BIG, 0, 2 * KI * KI * KI },
	{ "2G", BIG, 0, 2 * KI * KI * KI },
	{ "2GB", BIG, 0, 2 * KI * KI * KI },
	{ "3t", BIG, 0, 3 * KI * KI * KI * KI },
	{ "3TiB", BIG, 0, 3 * KI * KI * KI * KI },
	{ "1.5k", BIG, 0, 1536 },
	{ " 1k", BIG, 0, 1024 },
	/* the bound */
	{ "1e18", 1000000000000000000ULL, 0, 1000000000000000000ULL },
	{ "1e6T", 1000000000000000000ULL, -ERANGE, 0 },
	/* refused */
	{ "", BIG, -EINVAL, 0 },
	{ "K", BIG, -EINVAL, 0 },
	{ "100B", BIG, -EINVAL, 0 },	/* B and iB only after a unit */
	{ "100iB", BIG, -EINVAL, 0 },
	{ "8X", BIG, -EINVAL, 0 },
	{ "8Ki", BIG, -EINVAL, 0 },
	{ "8kb", BIG, -EINVAL, 0 },
	{ "8KBB", BIG, -EINVAL, 0 },
	{ "8K ", BIG, -EINVAL, 0 },
	{ "8 K", BIG, -EINVAL, 0 },
	{ "-8K", BIG, -EINVAL, 0 },
	{ "+8K", BIG, -EINVAL, 0 },
	{ "inf", BIG, -EINVAL, 0 },
	{ "nan", BIG, -EINVAL, 0 },
};

START_TEST(size)
{
	uint64_t bytes = 12345;
	int rc = parse_size(sizes[_i].text, sizes[_i].max, &bytes);

	ck_assert_msg(rc == sizes[_i].rc, "\"%s\": %d, not %d", sizes[_i].text,
		      rc, sizes[_i].rc);
	if (rc == 0)
		ck_assert_uint_eq(bytes, sizes[_i].bytes);
	else
		ck_assert_uint_eq(bytes, 12345);
}
END_TEST

static const char *const choices[] = { "zstd", "gzip", "none", NULL };

static const struct {
	const char *text;
	int rc;
} choice_cases[] = {
	{ "zstd", 0 },
	{ "gzip", 1 },
	{ "none", 2 },
	/* byte for byte: no case folding, no prefixes, no padding */
	{ "ZSTD", -EINVAL },
	{ "zst", -EINVAL },
	{ "zstd ", -EINVAL },
	{ "", -EINVAL },
};

START_TEST(choice)
{
	fp_assert_int_eq(parse_enum(choice_cases[_i].text, choices), choice_cases[_i].rc);
}
END_TEST

/* An empty table takes nothing. */
START_TEST(choice_empty)
{
	static const char *const none[] = { NULL };

	fp_assert_int_eq(parse_enum("", none), -EINVAL);
	fp_assert_int_eq(parse_enum("zstd", none), -EINVAL);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("util-parse");
	TCase *tc = tcase_create("duration");

	tcase_add_loop_test(tc, duration, 0, sizeof(durations) / sizeof(durations[0]));
	tcase_add_test(tc, duration_null);
	suite_add_tcase(s, tc);
	tc = tcase_create("size");
	tcase_add_loop_test(tc, size, 0, sizeof(sizes) / sizeof(sizes[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("choice");
	tcase_add_loop_test(tc, choice, 0, sizeof(choice_cases) / sizeof(choice_cases[0]));
	tcase_add_test(tc, choice_empty);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
