/*
 * flame_profd — unit tests: the sliding window of flame_prof top
 * --follow (flame_prof/window.c), and reading a file that grows
 * (fp_perf_segments_scan_at(), fp_perf_reader_open_text()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp-test.h"
#include "fp/perf-file.h"
#include "util-buf.h"

#define SEC 1000000ULL
#define T0 (1795247790ULL * SEC)

static void
add(struct fpp_window *w, uint64_t t, bool idle, const char *process,
    const char *const *frames, size_t n)
{
	struct fpp_window_sample s = {
		.time_us = t, .status = idle ? FP_STATUS_WAITING : FP_STATUS_RUNNING,
		.idle = idle, .frames = frames, .nframes = n, .process = process,
	};

	fpp_window_add(w, &s);
}

static const struct fpp_window_row *
row(const struct fpp_window_row *rows, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	}
	return NULL;
}

/* leaf first */
static const char *const rec3[] = { "m:f/1", "m:f/1", "m:g/0" };
static const char *const leaf_g[] = { "m:g/0" };
static const char *const loop[] = { "m:loop/0" };

START_TEST(counts)
{
	struct fpp_window *w = fpp_window_new(10 * SEC);
	const struct fpp_window_row *rows;
	struct fpp_window_summary sum;
	size_t n;

	add(w, T0, false, "a", rec3, 3);
	add(w, T0 + 1000, false, "a", rec3, 3);
	add(w, T0 + 2000, false, "b", leaf_g, 1);
	add(w, T0 + 3000, true, "c", loop, 1);

	n = fpp_window_rows(w, FPP_VIEW_FUNCTIONS, false, &rows, &sum);
	fp_assert_int_eq(n, 2);
	/* by self: f 2, g 1; recursion counts once in total */
	fp_assert_str_eq(rows[0].name, "m:f/1");
	fp_assert_int_eq(rows[0].self, 2);
	fp_assert_int_eq(rows[0].total, 2);
	fp_assert_str_eq(rows[1].name, "m:g/0");
	fp_assert_int_eq(rows[1].self, 1);
	fp_assert_int_eq(rows[1].total, 3);
	/* an idle sample is in the summary and the processes, in no function */
	fp_assert_int_eq(sum.samples, 4);
	fp_assert_int_eq(sum.idle, 1);
	fp_assert_int_eq(sum.status[FP_STATUS_RUNNING], 3);
	fp_assert_int_eq(sum.status[FP_STATUS_WAITING], 1);
	fp_assert_int_eq(sum.seconds, 1);
	fp_assert(sum.newest_us == T0 + 3000);
	fp_assert_ptr_null(row(rows, n, "m:loop/0"));

	n = fpp_window_rows(w, FPP_VIEW_FUNCTIONS, true, &rows, NULL);
	fp_assert_str_eq(rows[0].name, "m:g/0");

	n = fpp_window_rows(w, FPP_VIEW_PROCESSES, false, &rows, NULL);
	fp_assert_int_eq(n, 3);
	fp_assert_str_eq(rows[0].name, "a");
	fp_assert_int_eq(rows[0].self, 2);
	/* ties by name */
	fp_assert_str_eq(rows[1].name, "b");
	fp_assert_str_eq(rows[2].name, "c");
	fpp_window_destroy(w);
}
END_TEST

START_TEST(sliding)
{
	struct fpp_window *w = fpp_window_new(3 * SEC);
	const struct fpp_window_row *rows;
	struct fpp_window_summary sum;
	size_t n;

	/* one sample a second for 5 s: the window holds the last 3 */
	for (int i = 0; i < 5; i++)
		add(w, T0 + (uint64_t)i * SEC + 10, false, "p", i < 2 ? loop : leaf_g, 1);
	n = fpp_window_rows(w, FPP_VIEW_FUNCTIONS, false, &rows, &sum);
	fp_assert_int_eq(sum.samples, 3);
	fp_assert_int_eq(sum.seconds, 3);
	fp_assert_int_eq(n, 1);
	fp_assert_str_eq(rows[0].name, "m:g/0");
	fp_assert_int_eq(rows[0].self, 3);

	/* older than the window: not counted */
	add(w, T0 + SEC, false, "p", loop, 1);
	fpp_window_rows(w, FPP_VIEW_FUNCTIONS, false, &rows, &sum);
	fp_assert_int_eq(sum.samples, 3);
	/* late, but inside it: counted */
	add(w, T0 + 2 * SEC + 500, false, "p", loop, 1);
	n = fpp_window_rows(w, FPP_VIEW_FUNCTIONS, false, &rows, &sum);
	fp_assert_int_eq(sum.samples, 4);
	fp_assert_ptr_nonnull(row(rows, n, "m:loop/0"));

	/* a jump past the whole window leaves only the new second */
	add(w, T0 + 100 * SEC, false, "q", loop, 1);
	n = fpp_window_rows(w, FPP_VIEW_PROCESSES, false, &rows, &sum);
	fp_assert_int_eq(sum.samples, 1);
	fp_assert_int_eq(n, 1);
	fp_assert_str_eq(rows[0].name, "q");
	fpp_window_destroy(w);
}
END_TEST

/* the window's seconds: rounded up, at least one */
static const struct {
	uint64_t window_us;
	int kept;		/* of one sample a second over 20 s */
} sizes[] = {
	{ 0, 1 }, { 1, 1 }, { SEC, 1 }, { 2500000, 3 }, { 10 * SEC, 10 },
	{ 3600 * SEC, 20 },
};

START_TEST(window_sizes)
{
	struct fpp_window *w = fpp_window_new(sizes[_i].window_us);
	const struct fpp_window_row *rows;
	struct fpp_window_summary sum;

	for (int i = 0; i < 20; i++)
		add(w, T0 + (uint64_t)i * SEC, false, NULL, loop, 1);
	fpp_window_rows(w, FPP_VIEW_FUNCTIONS, false, &rows, &sum);
	fp_assert_int_eq(sum.samples, sizes[_i].kept);
	fp_assert_int_eq(sum.seconds, sizes[_i].kept);
	fpp_window_destroy(w);
}
END_TEST

START_TEST(values)
{
	struct fpp_window *w = fpp_window_new(10 * SEC);
	const struct fpp_window_row *rows;
	struct fpp_window_sample s = { .time_us = T0, .frames = loop, .nframes = 1 };
	size_t n;

	s.value = "req-1";
	fpp_window_add(w, &s);
	fpp_window_add(w, &s);
	s.value = "-";
	fpp_window_add(w, &s);
	n = fpp_window_rows(w, FPP_VIEW_FIELD, false, &rows, NULL);
	fp_assert_int_eq(n, 2);
	fp_assert_str_eq(rows[0].name, "req-1");
	fp_assert_int_eq(rows[0].self, 2);
	fp_assert_int_eq(rows[0].total, 2);
	fpp_window_destroy(w);
}
END_TEST

/* ---- a file that grows ---- */

#define METRICS \
	"\tmetric_erlang_reductions: 0, 0\tmetric_erlang_memory: 0, 0" \
	"\tmetric_erlang_message_queue_len: 0, 0\tmetric_erlang_total_heap_size: 0, 0" \
	"\tmetric_erlang_heap_size: 0, 0\tmetric_erlang_stack_size: 0, 0" \
	"\tmetric_erlang_binary_bytes: 0, 0\tmetric_erlang_minor_gcs: 0, 0"
static const char sample_a[] =
	"running 1/0 [000] 1795247790.000001: cpu-clock:" METRICS "\n"
	"\t0000000000000000 m:a/0 (m.erl)\n\n";
static const char note[] = "# flame_profd: 2026-11-21T08:11:00.000000Z interval: x=1\n";
static const char sample_b[] =
	"running 2/0 [000] 1795247791.000001: cpu-clock:" METRICS "\n"
	"\t0000000000000000 m:b/0 (m.erl)\n\n";

struct seen {
	struct fp_text text;
	int segments;
};

static void
on_segment(void *data, const char *text, size_t len)
{
	struct seen *s = data;

	s->segments++;
	fp_text_put(&s->text, text, len);
}

static int
count_record(void *data, const struct fp_perf_record *rec)
{
	int *n = data;

	(void)rec;
	(*n)++;
	return 0;
}

START_TEST(growing_plain)
{
	char path[] = "/tmp/fp-window-XXXXXX";
	int fd = mkstemp(path);
	struct seen seen = { 0 };
	struct fp_perf_reader *r;
	ssize_t good;
	int records = 0;

	fp_assert_int_ge(fd, 0);
	unlink(path);
	/* a whole sample and half of the next: only the first is handed */
	fp_assert_int_eq(write(fd, sample_a, strlen(sample_a)), (int)strlen(sample_a));
	fp_assert_int_eq(write(fd, note, strlen(note)), (int)strlen(note));
	fp_assert_int_eq(write(fd, sample_b, 20), 20);
	good = fp_perf_segments_scan_at(FP_PERF_PLAIN, fd, 0, 1 << 20, on_segment, &seen);
	fp_assert_int_eq(good, (int)strlen(sample_a));
	fp_assert_int_eq(seen.segments, 1);
	/* nothing new: nothing handed */
	fp_assert_int_eq(fp_perf_segments_scan_at(FP_PERF_PLAIN, fd, good, 1 << 20,
						  on_segment, &seen), good);
	fp_assert_int_eq(seen.segments, 1);
	/* the rest: from where the last look ended, the note with it */
	fp_assert_int_eq(write(fd, sample_b + 20, strlen(sample_b) - 20),
			 (int)(strlen(sample_b) - 20));
	good = fp_perf_segments_scan_at(FP_PERF_PLAIN, fd, good, 1 << 20, on_segment, &seen);
	fp_assert_int_eq(good, (int)(strlen(sample_a) + strlen(note) + strlen(sample_b)));
	fp_assert_int_eq(seen.segments, 2);
	fp_assert_int_eq(seen.text.len, (int)good);

	/* the text read as a file */
	fp_assert_int_eq(fp_perf_reader_open_text("t", seen.text.buf, seen.text.len, &r), 0);
	fp_assert_int_eq(fp_perf_read(r, count_record, &records), 0);
	fp_assert_int_eq(records, 2);
	fp_perf_reader_destroy(r);
	/* cut inside a sample: the reader says so */
	fp_assert_int_eq(fp_perf_reader_open_text("t", seen.text.buf, 20, &r), 0);
	fp_assert_int_eq(fp_perf_read(r, count_record, &records), -EBADMSG);
	fp_perf_reader_destroy(r);
	close(fd);
	fp_text_free(&seen.text);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("flame-prof-window");
	TCase *tc = tcase_create("window");

	tcase_add_test(tc, counts);
	tcase_add_test(tc, sliding);
	tcase_add_loop_test(tc, window_sizes, 0, sizeof(sizes) / sizeof(sizes[0]));
	tcase_add_test(tc, values);
	suite_add_tcase(s, tc);
	tc = tcase_create("growing file");
	tcase_add_test(tc, growing_plain);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
