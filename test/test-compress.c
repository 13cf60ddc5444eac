/*
 * flame_profd — unit tests: output segments as zstd frames / gzip members,
 * and what survives of a damaged file (crash recovery relies on it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fp-test.h"
#include "../daemon/flame_profd.h"

static const char seg1[] = "# a\nrunning 0.1.0 [000] 1.000001: cpu-clock:\n\n";
static const char seg2[] = "waiting 0.2.0 [000] 2.000002: cpu-clock:\n\n";

/* file = frame(seg1) frame(seg2) */
static size_t
make_file(enum fpd_compress kind, unsigned char *buf, size_t *first)
{
	struct fpd_compressor *c = fpd_compressor_new(kind, 3);
	const void *out;
	size_t n, len = 0;

	fp_assert_int_eq(fpd_compress_segment(c, seg1, strlen(seg1), &out, &n), 0);
	memcpy(buf, out, n);
	len = *first = n;
	fp_assert_int_eq(fpd_compress_segment(c, seg2, strlen(seg2), &out, &n), 0);
	memcpy(buf + len, out, n);
	len += n;
	fpd_compressor_destroy(c);
	return len;
}

static const enum fpd_compress kinds[] = { FPD_COMPRESS_ZSTD, FPD_COMPRESS_GZIP };

START_TEST(whole)
{
	unsigned char buf[4096];
	size_t first, len = make_file(kinds[_i], buf, &first), plainlen;
	char *plain;

	fp_assert_int_eq(fpd_compress_valid_prefix(kinds[_i], buf, len, &plain, &plainlen),
			 (int)len);
	fp_assert_int_eq(plainlen, strlen(seg1) + strlen(seg2));
	fp_assert(strncmp(plain, seg1, strlen(seg1)) == 0);
	free(plain);
}
END_TEST

/* Cut inside the second segment: the first survives whole. */
START_TEST(truncated)
{
	unsigned char buf[4096];
	size_t first, len = make_file(kinds[_i], buf, &first), plainlen;
	char *plain;

	fp_assert_int_eq(fpd_compress_valid_prefix(kinds[_i], buf, len - 3, &plain,
						   &plainlen), (int)first);
	fp_assert_int_eq(plainlen, strlen(seg1));
	fp_assert_str_eq(plain, seg1);
	free(plain);
}
END_TEST

/* A damaged segment (bad checksum / CRC) counts for nothing, and neither
 * does anything after it. */
START_TEST(damaged)
{
	unsigned char buf[4096];
	size_t first, len = make_file(kinds[_i], buf, &first), plainlen;
	char *plain;
	ssize_t keep;

	buf[len - 5] ^= 0xff;	/* in the second segment's trailer */
	keep = fpd_compress_valid_prefix(kinds[_i], buf, len, &plain, &plainlen);
	fp_assert_int_eq(keep, (int)first);
	fp_assert_int_eq(plainlen, strlen(seg1));
	free(plain);

	len = make_file(kinds[_i], buf, &first);
	buf[first - 5] ^= 0xff;	/* in the first */
	keep = fpd_compress_valid_prefix(kinds[_i], buf, len, &plain, &plainlen);
	fp_assert_int_eq(keep, 0);
	fp_assert_int_eq(plainlen, 0);
	free(plain);
}
END_TEST

START_TEST(foreign)
{
	static const char text[] = "not compressed at all\n";
	char *plain;
	size_t plainlen;

	fp_assert_int_eq(fpd_compress_valid_prefix(kinds[_i], text, sizeof(text) - 1,
						   &plain, &plainlen), -EBADMSG);
	free(plain);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("compress");
	TCase *tc = tcase_create("segments");

	tcase_add_loop_test(tc, whole, 0, 2);
	tcase_add_loop_test(tc, truncated, 0, 2);
	tcase_add_loop_test(tc, damaged, 0, 2);
	tcase_add_loop_test(tc, foreign, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
