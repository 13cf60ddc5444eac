/*
 * flame_profd — unit tests: output segments as zstd frames / gzip members
 * (daemon/compress.c), and what survives of a damaged file when they are
 * read back (fp_perf_segments_scan(); crash recovery relies on it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#include "fp-test.h"
#include "../daemon/compress.h"

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

struct collected {
	char *text;
	size_t len;
	unsigned segments;
};

static void
collect(void *data, const char *text, size_t len)
{
	struct collected *c = data;

	c->text = realloc(c->text, c->len + len + 1);
	memcpy(c->text + c->len, text, len);
	c->len += len;
	c->text[c->len] = '\0';
	c->segments++;
}

static int
file_of(const void *data, size_t len)
{
	int fd = memfd_create("test-compress", MFD_CLOEXEC);

	fp_assert(fd >= 0);
	fp_assert_int_eq(write(fd, data, len), (ssize_t)len);
	return fd;
}

/* What a scan of @data keeps: its length, and the text of its segments
 * into *plain (caller frees). */
static ssize_t
valid_prefix(enum fpd_compress kind, const void *data, size_t len, char **plain,
	     size_t *plainlen)
{
	struct collected c = { NULL, 0, 0 };
	int fd = file_of(data, len);
	ssize_t keep = fp_perf_segments_scan((enum fp_perf_compress)kind, fd,
					     1 << 20, collect, &c);

	close(fd);
	*plain = c.text;
	*plainlen = c.len;
	return keep;
}

START_TEST(whole)
{
	unsigned char buf[4096];
	size_t first, len = make_file(kinds[_i], buf, &first), plainlen;
	char *plain;

	fp_assert_int_eq(valid_prefix(kinds[_i], buf, len, &plain, &plainlen),
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

	fp_assert_int_eq(valid_prefix(kinds[_i], buf, len - 3, &plain,
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
	keep = valid_prefix(kinds[_i], buf, len, &plain, &plainlen);
	fp_assert_int_eq(keep, (int)first);
	fp_assert_int_eq(plainlen, strlen(seg1));
	free(plain);

	len = make_file(kinds[_i], buf, &first);
	buf[first - 5] ^= 0xff;	/* in the first */
	keep = valid_prefix(kinds[_i], buf, len, &plain, &plainlen);
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

	fp_assert_int_eq(valid_prefix(kinds[_i], text, sizeof(text) - 1,
						   &plain, &plainlen), -EBADMSG);
	free(plain);
}
END_TEST

/*
 * A decompression bomb: one small frame or member of far more text than
 * any segment of ours. The scan keeps nothing and stops within its
 * bound, without holding the text.
 */
START_TEST(bomb)
{
	static char zeros[1 << 20];
	size_t cap = 1 << 20, len = 0;
	unsigned char *buf = malloc(cap);
	struct collected c = { NULL, 0, 0 };
	int fd;

	if (kinds[_i] == FPD_COMPRESS_ZSTD) {
		ZSTD_CCtx *cc = ZSTD_createCCtx();
		ZSTD_outBuffer o = { buf, cap, 0 };

		for (int i = 0; i < 256; i++) {	/* 256 MB of text */
			ZSTD_inBuffer in = { zeros, sizeof(zeros), 0 };

			while (in.pos < in.size)
				ZSTD_compressStream2(cc, &o, &in, ZSTD_e_continue);
		}
		while (ZSTD_compressStream2(cc, &o, &(ZSTD_inBuffer){ NULL, 0, 0 },
					    ZSTD_e_end) != 0)
			;
		len = o.pos;
		ZSTD_freeCCtx(cc);
	} else {
		z_stream z = { 0 };

		fp_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8,
					      Z_DEFAULT_STRATEGY), Z_OK);
		z.next_out = buf;
		z.avail_out = (uInt)cap;
		for (int i = 0; i < 256; i++) {
			z.next_in = (Bytef *)zeros;
			z.avail_in = sizeof(zeros);
			fp_assert_int_eq(deflate(&z, Z_NO_FLUSH), Z_OK);
		}
		fp_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
		len = cap - z.avail_out;
		deflateEnd(&z);
	}
	fp_assert(len < cap);
	fd = file_of(buf, len);
	fp_assert_int_eq(fp_perf_segments_scan((enum fp_perf_compress)kinds[_i],
					       fd, 4 << 20, collect, &c), 0);
	fp_assert_int_eq(c.segments, 0);
	close(fd);
	free(buf);
}
END_TEST

/* Plain text: whole samples are kept, the sample cut short is not. */
START_TEST(plain_text)
{
	char text[256];
	char *plain;
	size_t plainlen;
	int n = snprintf(text, sizeof(text), "%s%swaiting 0.3.0 [000] 3.0", seg1, seg2);

	fp_assert_int_eq(valid_prefix(FPD_COMPRESS_NONE, text, (size_t)n, &plain,
				      &plainlen), (int)(strlen(seg1) + strlen(seg2)));
	fp_assert_int_eq(plainlen, strlen(seg1) + strlen(seg2));
	free(plain);
}
END_TEST

/* Many segments, more than one read's worth: each whole, in order. */
START_TEST(many)
{
	struct fpd_compressor *comp = fpd_compressor_new(kinds[_i], 3);
	size_t cap = 4 << 20, len = 0;
	unsigned char *buf = malloc(cap);
	struct collected c = { NULL, 0, 0 };
	const void *out;
	size_t n;
	int fd;

	for (int i = 0; i < 2000; i++) {
		char seg[128];
		int sl = snprintf(seg, sizeof(seg),
				  "running 0.%d.0 [000] %d.000001: cpu-clock:\n\n", i, i);

		fp_assert_int_eq(fpd_compress_segment(comp, seg, (size_t)sl, &out, &n), 0);
		fp_assert(len + n <= cap);
		memcpy(buf + len, out, n);
		len += n;
	}
	fd = file_of(buf, len);
	fp_assert_int_eq(fp_perf_segments_scan((enum fp_perf_compress)kinds[_i],
					       fd, 1 << 20, collect, &c),
			 (ssize_t)len);
	fp_assert_int_eq(c.segments, 2000);
	fp_assert(strstr(c.text, "running 0.1999.0 [000] 1999.000001") != NULL);
	close(fd);
	free(c.text);
	free(buf);
	fpd_compressor_destroy(comp);
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
	tcase_add_loop_test(tc, bomb, 0, 2);
	tcase_add_loop_test(tc, many, 0, 2);
	tcase_add_test(tc, plain_text);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
