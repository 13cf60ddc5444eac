/*
 * flame_profd — unit tests: the names of flame_profd's files and what the
 * whole segments of a file hold (formats/perf-file.c, perf-segments.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#include "fp-test.h"
#include "fp/perf-file.h"
#include "fp/perf-script-read.h"

/* 2026-11-21T07:56:30.018Z */
#define MS 1795247790018ULL

START_TEST(name_format)
{
	char buf[FP_PERF_NAME_MAX];

	fp_assert_int_eq(fp_perf_name_format(buf, sizeof(buf), "app@host", MS,
					     FP_PERF_ZSTD), 0);
	fp_assert_str_eq(buf, "app@host.20261121T075630.018Z.perf.zst");
	fp_assert_int_eq(fp_perf_name_format(buf, sizeof(buf), "a", MS,
					     FP_PERF_GZIP), 0);
	fp_assert_str_eq(buf, "a.20261121T075630.018Z.perf.gz");
	fp_assert_int_eq(fp_perf_name_format(buf, sizeof(buf), "a", 0,
					     FP_PERF_PLAIN), 0);
	fp_assert_str_eq(buf, "a.19700101T000000.000Z.perf");
	fp_assert_int_eq(fp_perf_name_format(buf, 20, "a", MS, FP_PERF_PLAIN),
			 -ENAMETOOLONG);
}
END_TEST

static const struct {
	const char *name;
	bool ok;
	size_t node_len;
	uint64_t ms;
	enum fp_perf_compress kind;
} names[] = {
	{ "app@host.20261121T075630.018Z.perf.zst", true, 8, MS, FP_PERF_ZSTD },
	{ "app@host.20261121T075630.018Z.perf.gz", true, 8, MS, FP_PERF_GZIP },
	{ "app@host.20261121T075630.018Z.perf", true, 8, MS, FP_PERF_PLAIN },
	/* a node name may hold dots, and what looks like a name */
	{ "a.perf.b.20261121T075630.018Z.perf", true, 8, MS, FP_PERF_PLAIN },
	{ "x.20261121T075630.018Z.perf.20261121T075630.018Z.perf", true, 27,
	  MS, FP_PERF_PLAIN },
	{ "a.20281231T235960.999Z.perf", true, 1, 1861920000999ULL,
	  FP_PERF_PLAIN },
	{ "a.20261121T075630.018Z.perf.bz2", false, 0, 0, 0 },
	{ "a.20261121T075630.018Z.perf.gz.partial", false, 0, 0, 0 },
	{ "a.20261121T075630.018Z.perf.zst.tmp", false, 0, 0, 0 },
	{ "a.20261121T075630.018.perf", false, 0, 0, 0 },
	{ "a.20261121T075630Z.perf", false, 0, 0, 0 },
	{ "a.20261121 075630.018Z.perf", false, 0, 0, 0 },
	{ "a.2026112xT075630.018Z.perf", false, 0, 0, 0 },
	{ "a.20261121T075630.0x8Z.perf", false, 0, 0, 0 },
	{ "a_20261121T075630.018Z.perf", false, 0, 0, 0 },
	{ "a.20261321T075630.018Z.perf", false, 0, 0, 0 },	/* month 13 */
	{ "a.20261100T075630.018Z.perf", false, 0, 0, 0 },	/* day 0 */
	{ "a.20261121T245630.018Z.perf", false, 0, 0, 0 },	/* hour 24 */
	{ "a.20261121T076030.018Z.perf", false, 0, 0, 0 },	/* minute 60 */
	{ "a.20261121T075661.018Z.perf", false, 0, 0, 0 },	/* second 61 */
	{ "20261121T075630.018Z.perf", false, 0, 0, 0 },
	{ ".perf", false, 0, 0, 0 },
	{ "", false, 0, 0, 0 },
};

START_TEST(name_parse)
{
	struct fp_perf_name parsed = { 0 };
	bool ok = fp_perf_name_parse(names[_i].name, &parsed);

	ck_assert_msg(ok == names[_i].ok, "%s", names[_i].name);
	if (!ok)
		return;
	fp_assert_int_eq(parsed.node_len, names[_i].node_len);
	ck_assert_uint_eq(parsed.epoch_ms, names[_i].ms);
	fp_assert_int_eq(parsed.kind, names[_i].kind);
	fp_assert(fp_perf_name_parse(names[_i].name, NULL));
}
END_TEST

START_TEST(name_round_trip)
{
	static const uint64_t times[] = { 0, 999, MS, 4102444799999ULL };
	char buf[FP_PERF_NAME_MAX];
	struct fp_perf_name parsed;

	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
		for (int k = FP_PERF_PLAIN; k <= FP_PERF_ZSTD; k++) {
			fp_perf_name_format(buf, sizeof(buf), "n@h", times[i],
					    (enum fp_perf_compress)k);
			fp_assert(fp_perf_name_parse(buf, &parsed));
			ck_assert_uint_eq(parsed.epoch_ms, times[i]);
			fp_assert_int_eq(parsed.kind, k);
			fp_assert_int_eq(parsed.node_len, 3);
			fp_assert(fp_perf_name_is_of(buf, "n@h"));
		}
	}
}
END_TEST

START_TEST(name_of_node)
{
	const char *name = "app@host.20261121T075630.018Z.perf.zst";

	fp_assert(fp_perf_name_is_of(name, "app@host"));
	fp_assert(!fp_perf_name_is_of(name, "app@hos"));
	fp_assert(!fp_perf_name_is_of(name, "pp@host"));
	fp_assert(!fp_perf_name_is_of(name, "app@host.2"));
	fp_assert(!fp_perf_name_is_of(name, ""));
	fp_assert(!fp_perf_name_is_of("app@host.x", "app@host"));
}
END_TEST

START_TEST(name_kind)
{
	enum fp_perf_compress kind = FP_PERF_GZIP;

	fp_assert(fp_perf_name_kind("x.perf", &kind));
	fp_assert_int_eq(kind, FP_PERF_PLAIN);
	fp_assert(fp_perf_name_kind("x.perf.gz", &kind));
	fp_assert_int_eq(kind, FP_PERF_GZIP);
	fp_assert(fp_perf_name_kind("x.perf.zst", &kind));
	fp_assert_int_eq(kind, FP_PERF_ZSTD);
	fp_assert(fp_perf_name_kind("x.perf.zst", NULL));
	fp_assert(!fp_perf_name_kind(".perf", NULL));
	fp_assert(!fp_perf_name_kind("x.perf.bz2", NULL));
	fp_assert(!fp_perf_name_kind("x.perfx", NULL));
	fp_assert_str_eq(fp_perf_compress_suffix(FP_PERF_PLAIN), "");
	fp_assert_str_eq(fp_perf_compress_suffix(FP_PERF_GZIP), ".gz");
	fp_assert_str_eq(fp_perf_compress_suffix(FP_PERF_ZSTD), ".zst");
}
END_TEST

START_TEST(partial)
{
	char buf[FP_PERF_PARTIAL_MAX], name[FP_PERF_NAME_MAX];
	const char *final = "a@h.20261121T075630.018Z.perf.zst";

	fp_assert_int_eq(fp_perf_partial_format(buf, sizeof(buf), final), 0);
	fp_assert_str_eq(buf, ".a@h.20261121T075630.018Z.perf.zst.partial");
	fp_assert(fp_perf_partial_parse(buf, "", "a@h", name));
	fp_assert_str_eq(name, final);
	fp_assert(!fp_perf_partial_parse(buf, "", "b@h", name));
	fp_assert(!fp_perf_partial_parse(buf, ".unrecoverable", "a@h", name));
	fp_assert(fp_perf_partial_parse(
		".a@h.20261121T075630.018Z.perf.zst.partial.unrecoverable",
		".unrecoverable", "a@h", name));
	fp_assert_str_eq(name, final);
	fp_assert(!fp_perf_partial_parse(
		".a@h.20261121T075630.018Z.perf.zst.partial.unrecoverable",
		"", "a@h", name));
	fp_assert(!fp_perf_partial_parse(final, "", "a@h", name));
	fp_assert(!fp_perf_partial_parse(".partial", "", "a@h", name));
	fp_assert(!fp_perf_partial_parse("..partial", "", "a@h", name));
	fp_assert(!fp_perf_partial_parse(
		"a@h.20261121T075630.018Z.perf.zst.partial", "", "a@h", name));
	fp_assert_int_eq(fp_perf_partial_format(buf, 10, final), -ENAMETOOLONG);
}
END_TEST

START_TEST(node_name)
{
	static const char *const cases[][2] = {
		{ "app@host", "app@host" },
		{ "app@host.example.com", "app@host.example.com" },
		{ "a b/c:d\xc3\xa9", "a_b_c_d__" },
		{ ".hidden@h", "_hidden@h" },
		{ "x-y_z@1.2", "x-y_z@1.2" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *s = fp_perf_node_name(cases[i][0]);

		fp_assert_str_eq(s, cases[i][1]);
		free(s);
	}
}
END_TEST

/* ---- what whole segments hold ------------------------------------------ */

static char dir[] = "/tmp/test-perf-file.XXXXXX";

struct expect {
	uint64_t samples, first_us, last_us;
};

static int
tally(void *data, const struct fp_perf_record *rec)
{
	struct expect *e = data;

	if (!e->samples || rec->time_us < e->first_us)
		e->first_us = rec->time_us;
	if (rec->time_us > e->last_us)
		e->last_us = rec->time_us;
	e->samples++;
	return 0;
}

/* What the reader finds in @text: the samples the summary must count. */
static struct expect
expect_of(const char *text, size_t len)
{
	char path[64];
	struct fp_perf_reader *r;
	struct expect e = { 0 };
	FILE *f;

	snprintf(path, sizeof(path), "%s/expect", dir);
	f = fopen(path, "w");
	fp_assert_ptr_nonnull(f);
	fwrite(text, 1, len, f);
	fclose(f);
	fp_assert_int_eq(fp_perf_reader_open(path, &r), 0);
	fp_perf_read(r, tally, &e);
	fp_perf_reader_destroy(r);
	unlink(path);
	return e;
}

static char *
golden(size_t *len)
{
	const char *gdir = getenv("FP_GOLDEN_DIR");
	char path[4096];
	char *text;
	FILE *f;
	long n;

	fp_assert_ptr_nonnull(gdir);
	snprintf(path, sizeof(path), "%s/basic.perf", gdir);
	f = fopen(path, "r");
	fp_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = malloc((size_t)n + 1);
	fp_assert_int_eq(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return text;
}

static size_t
compress_one(enum fp_perf_compress kind, const char *text, size_t len,
	     unsigned char *out, size_t cap)
{
	if (kind == FP_PERF_ZSTD) {
		size_t n = ZSTD_compress(out, cap, text, len, 3);

		fp_assert(!ZSTD_isError(n));
		return n;
	} else {
		z_stream z = { 0 };
		size_t n;

		fp_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8,
					      Z_DEFAULT_STRATEGY), Z_OK);
		z.next_in = (Bytef *)(uintptr_t)text;
		z.avail_in = (uInt)len;
		z.next_out = out;
		z.avail_out = (uInt)cap;
		fp_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
		n = cap - z.avail_out;
		deflateEnd(&z);
		return n;
	}
}

/*
 * @text as a file of @kind, one segment per sample (the header with the
 * first), into @path; @ends gets the file offset after each segment and
 * @text_ends the text offset. @return the number of segments.
 */
static size_t
write_segments(const char *path, enum fp_perf_compress kind, const char *text,
	       size_t len, off_t *ends, size_t *text_ends)
{
	static unsigned char buf[1 << 16];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t start = 0, nseg = 0;
	off_t off = 0;

	fp_assert(fd >= 0);
	while (start < len) {
		const char *end = strstr(text + start, "\n\n");
		size_t seglen = (end ? (size_t)(end - text) + 2 : len) - start;
		size_t n = seglen;
		const void *data = text + start;

		if (kind != FP_PERF_PLAIN) {
			n = compress_one(kind, text + start, seglen, buf, sizeof(buf));
			data = buf;
		}
		fp_assert_int_eq(write(fd, data, n), (ssize_t)n);
		off += (off_t)n;
		start += seglen;
		ends[nseg] = off;
		text_ends[nseg++] = start;
	}
	close(fd);
	return nseg;
}

static const enum fp_perf_compress all_kinds[] = {
	FP_PERF_PLAIN, FP_PERF_GZIP, FP_PERF_ZSTD,
};

static void
check_summary(const char *path, enum fp_perf_compress kind, ssize_t want,
	      const struct expect *e)
{
	struct fp_perf_summary s;
	ssize_t got = fp_perf_file_summarize(path, kind, &s);

	fp_assert_int_eq(got, want);
	ck_assert_uint_eq(s.samples, e->samples);
	if (e->samples) {
		ck_assert_uint_eq(s.first_us, e->first_us);
		ck_assert_uint_eq(s.last_us, e->last_us);
	}
}

/* A whole file: every sample, the reader's count; its size. */
START_TEST(summary_whole)
{
	enum fp_perf_compress kind = all_kinds[_i];
	size_t len, text_ends[64], nseg;
	off_t ends[64];
	char *text = golden(&len), path[64];
	struct expect e = expect_of(text, len);
	struct fp_perf_summary s;

	fp_assert(e.samples >= 2);
	fp_assert(e.first_us != e.last_us);
	snprintf(path, sizeof(path), "%s/whole", dir);
	nseg = write_segments(path, kind, text, len, ends, text_ends);
	check_summary(path, kind, ends[nseg - 1], &e);
	fp_perf_file_summarize(path, kind, &s);
	fp_assert_int_eq(s.size, ends[nseg - 1]);
	unlink(path);
	free(text);
}
END_TEST

/* Cut inside the last segment: only the samples before it count. */
START_TEST(summary_cut)
{
	enum fp_perf_compress kind = all_kinds[_i];
	size_t len, text_ends[64], nseg;
	off_t ends[64];
	char *text = golden(&len), path[64];
	struct expect e;

	snprintf(path, sizeof(path), "%s/cut", dir);
	nseg = write_segments(path, kind, text, len, ends, text_ends);
	fp_assert(nseg >= 3);
	fp_assert_int_eq(truncate(path, ends[nseg - 1] - 5), 0);
	e = expect_of(text, text_ends[nseg - 2]);
	fp_assert(e.samples > 0);
	check_summary(path, kind, ends[nseg - 2], &e);

	/* nothing whole */
	fp_assert_int_eq(truncate(path, ends[0] - 1), 0);
	e = (struct expect){ 0 };
	check_summary(path, kind, 0, &e);
	unlink(path);
	free(text);
}
END_TEST

/* An empty frame or member (no text at all) is a whole segment. */
START_TEST(summary_empty_segment)
{
	static unsigned char buf[1 << 16];
	enum fp_perf_compress kind = all_kinds[_i + 1];
	size_t len, n;
	char *text = golden(&len), path[64];
	struct expect e = expect_of(text, len);
	off_t total = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/empty", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fp_assert(fd >= 0);
	n = compress_one(kind, "", 0, buf, sizeof(buf));
	fp_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	total += (off_t)n;
	n = compress_one(kind, text, len, buf, sizeof(buf));
	fp_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	total += (off_t)n;
	n = compress_one(kind, "", 0, buf, sizeof(buf));
	fp_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	total += (off_t)n;
	close(fd);
	check_summary(path, kind, total, &e);
	unlink(path);
	free(text);
}
END_TEST

/* A sample off the grammar ends the count, even inside whole segments. */
START_TEST(summary_off_grammar)
{
	static const char bad[] = "this is no sample\n\n";
	enum fp_perf_compress kind = all_kinds[_i];
	size_t len, text_ends[64], nseg;
	off_t ends[64];
	char *text = golden(&len), path[64], *mixed;
	size_t first_two;
	struct expect e;

	/* the header and first sample, the bad one, the rest */
	snprintf(path, sizeof(path), "%s/bad", dir);
	nseg = write_segments(path, kind, text, len, ends, text_ends);
	fp_assert(nseg >= 3);
	first_two = text_ends[0];
	mixed = malloc(len + sizeof(bad));
	memcpy(mixed, text, first_two);
	memcpy(mixed + first_two, bad, sizeof(bad) - 1);
	memcpy(mixed + first_two + sizeof(bad) - 1, text + first_two,
	       len - first_two);
	nseg = write_segments(path, kind, mixed, len + sizeof(bad) - 1, ends,
			      text_ends);
	e = expect_of(text, first_two);
	fp_assert_int_eq(e.samples, 1);
	check_summary(path, kind, ends[nseg - 1], &e);
	unlink(path);
	free(mixed);
	free(text);
}
END_TEST

START_TEST(summary_errors)
{
	struct fp_perf_summary s;
	char path[64], link[64];
	int fd;

	snprintf(path, sizeof(path), "%s/none", dir);
	fp_assert_int_eq(fp_perf_file_summarize(path, FP_PERF_ZSTD, &s), -ENOENT);
	fp_assert_int_eq(s.size, 0);
	fp_assert_int_eq(fp_perf_file_summarize(dir, FP_PERF_ZSTD, &s), -EINVAL);

	snprintf(path, sizeof(path), "%s/text", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fp_assert_int_eq(write(fd, "# plain\n", 8), 8);
	close(fd);
	fp_assert_int_eq(fp_perf_file_summarize(path, FP_PERF_ZSTD, &s), -EBADMSG);
	fp_assert_int_eq(s.size, 8);
	fp_assert_int_eq(fp_perf_file_summarize(path, FP_PERF_GZIP, &s), -EBADMSG);
	/* plain text without a whole sample */
	fp_assert_int_eq(fp_perf_file_summarize(path, FP_PERF_PLAIN, &s), 0);

	snprintf(link, sizeof(link), "%s/link", dir);
	fp_assert_int_eq(symlink(path, link), 0);
	fp_assert_int_eq(fp_perf_file_summarize(link, FP_PERF_PLAIN, &s), -ELOOP);
	unlink(link);
	unlink(path);
}
END_TEST

static void
setup(void)
{
	fp_assert_ptr_nonnull(mkdtemp(dir));
}

static void
teardown(void)
{
	rmdir(dir);
}

static Suite *
suite(void)
{
	Suite *s = suite_create("perf-file");
	TCase *tc = tcase_create("names");

	tcase_add_test(tc, name_format);
	tcase_add_loop_test(tc, name_parse, 0, sizeof(names) / sizeof(names[0]));
	tcase_add_test(tc, name_round_trip);
	tcase_add_test(tc, name_of_node);
	tcase_add_test(tc, name_kind);
	tcase_add_test(tc, partial);
	tcase_add_test(tc, node_name);
	suite_add_tcase(s, tc);

	tc = tcase_create("segments");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, summary_whole, 0, 3);
	tcase_add_loop_test(tc, summary_cut, 0, 3);
	tcase_add_loop_test(tc, summary_off_grammar, 0, 3);
	tcase_add_loop_test(tc, summary_empty_segment, 0, 2);
	tcase_add_test(tc, summary_errors);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
