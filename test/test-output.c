/*
 * flame_profd — unit tests: the output's files on a temporary directory,
 * written through the recorder (no node): a file is written under its
 * partial name and renamed when finished, holds whole segments, is
 * recovered after a kill, and retention deletes the oldest beyond the
 * limits.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp-test.h"
#include "fp/perf-file.h"
#include "options.h"
#include "util.h"
#include "compress.h"
#include "output.h"
#include "options.h"
#include "recorder.h"

#define NODE "a@b"
#define HEADER "# flame_profd test header\n"
#define N(a) (sizeof(a) / sizeof((a)[0]))

struct fixture {
	char dir[64];
	char node_dir[96];
	struct fpd_options o;
	struct fpd_output_config oc;
	struct fpd_recorder *rec;
	struct fpd_output *out;		/* the recorder's */
};

static const enum fpd_compress kinds[] = {
	FPD_COMPRESS_NONE, FPD_COMPRESS_GZIP, FPD_COMPRESS_ZSTD,
};

static void
fixture_init(struct fixture *fx, enum fpd_compress kind)
{
	memset(fx, 0, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/fp-output-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(fx->dir));
	snprintf(fx->node_dir, sizeof(fx->node_dir), "%s/%s", fx->dir, NODE);
	fx->oc = (struct fpd_output_config){
		.dir = fx->dir,
		.node = NODE,
		.header = HEADER,
		.options_json = "{}",
		.compress = kind,
		.level = 3,
		.rotate_us = 3600000000u,
		.file_mode = 0600,
		.dir_mode = 0700,
	};
}

/* The output and its recorder on the fixture's directory. */
static void
fixture_open(struct fixture *fx)
{
	fp_assert_int_eq(fpd_output_new(&fx->oc, &fx->out), 0);
	fx->rec = fpd_recorder_new(&fx->o, fx->out);
}

static void
fixture_close(struct fixture *fx)
{
	fpd_recorder_destroy(fx->rec);
	fx->rec = NULL;
	fx->out = NULL;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void
fixture_destroy(struct fixture *fx)
{
	fixture_close(fx);
	nftw(fx->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* A sample of @pid at @time_us, one frame deep. */
static int
write_sample(struct fixture *fx, unsigned pid, uint64_t time_us)
{
	struct fp_frame frame = { .module = "m", .function = "f", .arity = 1 };
	struct fp_sample smp = {
		.status = FP_STATUS_RUNNING,
		.pid = { pid, 0 },
		.time_us = time_us,
		.frames = &frame,
		.nframes = 1,
	};

	return fpd_recorder_write(fx->rec, &smp, FPD_RECORD_NODE);
}

/* What the node directory holds: finished files (their names, sorted,
 * into @names when not NULL) and partial files. */
static size_t
list_files(const struct fixture *fx, char (*names)[FP_PERF_NAME_MAX],
	   size_t max, size_t *partials)
{
	struct dirent **ents;
	char name[FP_PERF_NAME_MAX];
	size_t nfinished = 0;
	int n = scandir(fx->node_dir, &ents, NULL, alphasort);

	fp_assert_int_ge(n, 0);
	*partials = 0;
	for (int i = 0; i < n; i++) {
		const char *e = ents[i]->d_name;

		if (fp_perf_name_is_of(e, NODE)) {
			if (names && nfinished < max)
				snprintf(names[nfinished], FP_PERF_NAME_MAX, "%s", e);
			nfinished++;
		} else if (fp_perf_partial_parse(e, "", NODE, name)) {
			(*partials)++;
		}
		free(ents[i]);
	}
	free(ents);
	return nfinished;
}

static ssize_t
summarize(const struct fixture *fx, const char *name, enum fpd_compress kind,
	  struct fp_perf_summary *sum)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", fx->node_dir, name);
	return fp_perf_file_summarize(path, (enum fp_perf_compress)kind, sum);
}

/* The whole text of the file @name (decompressed), NUL-terminated. */
struct text {
	char *buf;
	size_t len;
	unsigned segments;
};

static void
add_segment(void *data, const char *text, size_t len)
{
	struct text *t = data;

	t->buf = realloc(t->buf, t->len + len + 1);
	fp_assert_ptr_nonnull(t->buf);
	memcpy(t->buf + t->len, text, len);
	t->len += len;
	t->buf[t->len] = '\0';
	t->segments++;
}

static struct text
read_text(const struct fixture *fx, const char *name, enum fpd_compress kind)
{
	struct text t = { 0 };
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fx->node_dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	fp_assert_int_ge(fd, 0);
	fp_assert(fp_perf_segments_scan((enum fp_perf_compress)kind, fd,
					FP_PERF_SEGMENT_TEXT_MAX, add_segment,
					&t) > 0);
	close(fd);
	return t;
}

static bool
file_has(const struct fixture *fx, const char *name, const char *text)
{
	char path[512], buf[65536];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fx->node_dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* ---- partial file, then rename ------------------------------------------ */

/*
 * While a file is written it has only its partial name (a reader never
 * sees half a file); finishing renames it, and the manifest lists it
 * with what it holds.
 */
START_TEST(partial_then_renamed)
{
	enum fpd_compress kind = kinds[_i];
	char names[4][FP_PERF_NAME_MAX];
	struct fp_perf_summary sum;
	struct fpd_output_totals totals;
	struct fixture fx;
	size_t partials;
	uint64_t t0 = fpd_now_epoch_us();

	fixture_init(&fx, kind);
	fixture_open(&fx);
	fp_assert(!fpd_output_is_open(fx.out));
	for (unsigned i = 0; i < 3; i++)
		fp_assert_int_eq(write_sample(&fx, 10 + i, t0 + i), 0);
	fp_assert(fpd_output_is_open(fx.out));
	fp_assert_int_eq(fpd_output_flush(fx.out), 0);
	fp_assert_int_eq(list_files(&fx, NULL, 0, &partials), 0);
	fp_assert_int_eq(partials, 1);

	fp_assert_int_eq(fpd_output_finish(fx.out), 0);
	fp_assert(!fpd_output_is_open(fx.out));
	fp_assert_int_eq(list_files(&fx, names, N(names), &partials), 1);
	fp_assert_int_eq(partials, 0);
	fp_assert(summarize(&fx, names[0], kind, &sum) > 0);
	fp_assert_int_eq(sum.samples, 3);
	fp_assert_int_eq(sum.first_us, t0);
	fp_assert_int_eq(sum.last_us, t0 + 2);
	fpd_output_totals(fx.out, &totals);
	fp_assert_int_eq(totals.written, 3);
	fp_assert_int_eq(totals.dropped, 0);
	fp_assert_int_eq(totals.unfinished, 0);
	fp_assert(file_has(&fx, "manifest.json", names[0]));
	fixture_destroy(&fx);
}
END_TEST

/* A file that never got a sample is never made; notes wait for one. */
START_TEST(notes_wait_for_a_sample)
{
	char names[2][FP_PERF_NAME_MAX];
	struct fixture fx;
	struct text t;
	size_t partials;
	char *note, *sample;

	fixture_init(&fx, FPD_COMPRESS_NONE);
	fixture_open(&fx);
	fpd_recorder_note(fx.rec, "first note");
	fp_assert(!fpd_output_is_open(fx.out));
	fp_assert_int_eq(fpd_output_finish(fx.out), 0);
	fp_assert_int_eq(list_files(&fx, NULL, 0, &partials), 0);
	fp_assert_int_eq(partials, 0);

	fp_assert_int_eq(write_sample(&fx, 7, fpd_now_epoch_us()), 0);
	fpd_recorder_note(fx.rec, "second note");
	fp_assert_int_eq(write_sample(&fx, 8, fpd_now_epoch_us()), 0);
	fp_assert_int_eq(fpd_output_finish(fx.out), 0);
	fp_assert_int_eq(list_files(&fx, names, N(names), &partials), 1);
	t = read_text(&fx, names[0], FPD_COMPRESS_NONE);
	fp_assert(strncmp(t.buf, HEADER, strlen(HEADER)) == 0);
	note = strstr(t.buf, "# flame_profd: ");
	sample = strstr(t.buf, "running 7/0 ");
	fp_assert_ptr_nonnull(note);
	fp_assert_ptr_nonnull(sample);
	fp_assert(strstr(note, "first note") != NULL);
	fp_assert(note < sample);
	fp_assert(strstr(sample, "second note") != NULL);
	fp_assert(strstr(sample, "second note") < strstr(sample, "running 8/0 "));
	free(t.buf);
	fixture_destroy(&fx);
}
END_TEST

/* Times handed over out of order are held to the file's order. */
START_TEST(times_never_go_backwards)
{
	char names[2][FP_PERF_NAME_MAX];
	struct fp_perf_summary sum;
	struct fixture fx;
	size_t partials;
	uint64_t t0 = fpd_now_epoch_us();

	fixture_init(&fx, FPD_COMPRESS_NONE);
	fixture_open(&fx);
	fp_assert_int_eq(write_sample(&fx, 1, t0 + 1000), 0);
	fp_assert_int_eq(write_sample(&fx, 2, t0), 0);
	fp_assert_int_eq(fpd_recorder_stamp(fx.rec, t0), t0 + 1000);
	fp_assert_int_eq(fpd_output_finish(fx.out), 0);
	fp_assert_int_eq(list_files(&fx, names, N(names), &partials), 1);
	fp_assert(summarize(&fx, names[0], FPD_COMPRESS_NONE, &sum) > 0);
	fp_assert_int_eq(sum.samples, 2);
	fp_assert_int_eq(sum.first_us, t0 + 1000);
	fp_assert_int_eq(sum.last_us, t0 + 1000);
	fp_assert_int_eq(fpd_recorder_samples(fx.rec), 2);
	fixture_destroy(&fx);
}
END_TEST

/* ---- write errors ---------------------------------------------------------- */

/*
 * A segment that cannot be written (here the file size limit, EFBIG, as
 * a full disk gives ENOSPC) is dropped and counted, the file cut back to
 * its whole segments, and the error returned by the write that filled
 * the segment; writing goes on once there is room again.
 */
START_TEST(write_error_returned_and_counted)
{
	char names[2][FP_PERF_NAME_MAX];
	struct fp_perf_summary sum;
	struct fpd_output_totals totals;
	struct rlimit old, lim;
	struct fixture fx;
	struct stat st;
	size_t partials;
	uint64_t t0 = fpd_now_epoch_us(), n = 0;
	int rc = 0;

	fixture_init(&fx, FPD_COMPRESS_NONE);
	fixture_open(&fx);
	fp_assert_int_eq(write_sample(&fx, 1, t0), 0);
	fp_assert_int_eq(fpd_output_flush(fx.out), 0);
	fp_assert_int_eq(list_files(&fx, NULL, 0, &partials), 0);

	/* no more room than the first segment takes */
	signal(SIGXFSZ, SIG_IGN);
	fp_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 64 * 1024;
	fp_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
	while (rc == 0 && n < 1000000)
		rc = write_sample(&fx, 2, t0 + ++n);
	fp_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
	fp_assert_int_eq(rc, -EFBIG);
	fpd_output_totals(fx.out, &totals);
	fp_assert_int_eq(totals.dropped, n);
	fp_assert_int_eq(fpd_recorder_samples(fx.rec), n + 1);

	fp_assert_int_eq(write_sample(&fx, 3, t0 + n + 1), 0);
	fp_assert_int_eq(fpd_output_finish(fx.out), 0);
	fp_assert_int_eq(list_files(&fx, names, N(names), &partials), 1);
	fp_assert(summarize(&fx, names[0], FPD_COMPRESS_NONE, &sum) > 0);
	fp_assert_int_eq(sum.samples, 2);
	fp_assert_int_eq(sum.last_us, t0 + n + 1);
	{
		char path[512], dropped[64];

		/* the file's manifest entry says what it lost */
		snprintf(dropped, sizeof(dropped), "\"dropped\": %llu",
			 (unsigned long long)n);
		fp_assert(file_has(&fx, "manifest.json", dropped));
		snprintf(path, sizeof(path), "%s/%s", fx.node_dir, names[0]);
		fp_assert_int_eq(stat(path, &st), 0);
		fp_assert(st.st_size < 64 * 1024);
	}
	fixture_destroy(&fx);
}
END_TEST

/* ---- segments ------------------------------------------------------------ */

/*
 * Each flush writes one segment (one zstd frame, one gzip member, or a
 * run of whole samples); the first one starts with the file's header.
 */
START_TEST(one_segment_per_flush)
{
	enum fpd_compress kind = kinds[_i];
	char names[2][FP_PERF_NAME_MAX];
	struct fixture fx;
	struct text t;
	size_t partials;
	uint64_t t0 = fpd_now_epoch_us();

	fixture_init(&fx, kind);
	fixture_open(&fx);
	for (unsigned seg = 0; seg < 3; seg++) {
		for (unsigned i = 0; i < 4; i++)
			fp_assert_int_eq(write_sample(&fx, seg * 4 + i,
						      t0 + seg * 4 + i), 0);
		fp_assert_int_eq(fpd_output_flush(fx.out), 0);
	}
	fp_assert_int_eq(fpd_output_flush(fx.out), 0);	/* nothing: no segment */
	fp_assert_int_eq(fpd_output_finish(fx.out), 0);
	fp_assert_int_eq(list_files(&fx, names, N(names), &partials), 1);
	t = read_text(&fx, names[0], kind);
	if (kind != FPD_COMPRESS_NONE)
		fp_assert_int_eq(t.segments, 3);
	fp_assert(strncmp(t.buf, HEADER, strlen(HEADER)) == 0);
	fp_assert_ptr_nonnull(strstr(t.buf, "running 11/0 "));
	free(t.buf);
	fixture_destroy(&fx);
}
END_TEST

/* ---- recovery -------------------------------------------------------------- */

/*
 * A run killed with a file open (the child exits without finishing it,
 * with half a segment at its end and one in memory) leaves the partial
 * file; the next start keeps its whole segments under a finished name
 * and lists it.
 */
START_TEST(partial_recovered_after_kill)
{
	enum fpd_compress kind = kinds[_i];
	char names[2][FP_PERF_NAME_MAX];
	struct fp_perf_summary sum;
	struct fpd_output_totals totals;
	struct fixture fx;
	size_t partials;
	uint64_t t0 = fpd_now_epoch_us();
	int status;
	pid_t pid;

	fixture_init(&fx, kind);
	pid = fork();
	fp_assert_int_ge(pid, 0);
	if (pid == 0) {
		static const char half[] = "running 99/0 [000] 1.000000: cpu-clock:";
		struct dirent *e;
		DIR *d;
		int fd = -1;

		fixture_open(&fx);
		for (unsigned i = 0; i < 5; i++)
			write_sample(&fx, 20 + i, t0 + i);
		fpd_output_flush(fx.out);
		write_sample(&fx, 30, t0 + 10);	/* in memory: lost */
		d = opendir(fx.node_dir);
		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.' && strstr(e->d_name, ".partial"))
				fd = openat(dirfd(d), e->d_name,
					    O_WRONLY | O_APPEND | O_CLOEXEC);
		}
		if (fd < 0 || write(fd, half, sizeof(half) - 1) < 0)
			_exit(2);
		_exit(0);	/* as if killed: nothing finished */
	}
	fp_assert_int_eq(waitpid(pid, &status, 0), pid);
	fp_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fp_assert_int_eq(list_files(&fx, NULL, 0, &partials), 0);
	fp_assert_int_eq(partials, 1);

	fixture_open(&fx);
	fp_assert_int_eq(list_files(&fx, names, N(names), &partials), 1);
	fp_assert_int_eq(partials, 0);
	fp_assert(summarize(&fx, names[0], kind, &sum) > 0);
	fp_assert_int_eq(sum.samples, 5);
	fp_assert_int_eq(sum.last_us, t0 + 4);
	fpd_output_totals(fx.out, &totals);
	fp_assert_int_eq(totals.unfinished, 0);
	fp_assert(file_has(&fx, "manifest.json", names[0]));
	fixture_destroy(&fx);
}
END_TEST

/* ---- retention ------------------------------------------------------------- */

/* --keep-files: the oldest finished files go, the newest stay. */
START_TEST(retention_keeps_the_newest)
{
	char before[5][FP_PERF_NAME_MAX], after[5][FP_PERF_NAME_MAX];
	char path[512];
	struct fixture fx;
	size_t partials, n;
	int fd;

	fixture_init(&fx, FPD_COMPRESS_ZSTD);
	fx.oc.keep_files = 2;
	fixture_open(&fx);
	for (unsigned f = 0; f < 4; f++) {
		fp_assert_int_eq(write_sample(&fx, f, fpd_now_epoch_us()), 0);
		fp_assert_int_eq(fpd_output_finish(fx.out), 0);
		n = list_files(&fx, before, N(before), &partials);
		fp_assert_int_eq(n, f < 2 ? f + 1 : 2);
	}
	/* a file not of our name is never touched */
	snprintf(path, sizeof(path), "%s/notes.txt", fx.node_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	fp_assert_int_ge(fd, 0);
	close(fd);
	fp_assert_int_eq(write_sample(&fx, 9, fpd_now_epoch_us()), 0);
	fp_assert_int_eq(fpd_output_finish(fx.out), 0);
	n = list_files(&fx, after, N(after), &partials);
	fp_assert_int_eq(n, 2);
	/* the one finished last is kept, and the newest before it */
	fp_assert_str_eq(after[0], before[1]);
	fp_assert(strcmp(after[1], before[1]) > 0);
	fp_assert_int_eq(access(path, F_OK), 0);
	fixture_destroy(&fx);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("output");
	TCase *tc = tcase_create("files");

	tcase_add_loop_test(tc, partial_then_renamed, 0, N(kinds));
	tcase_add_test(tc, notes_wait_for_a_sample);
	tcase_add_test(tc, times_never_go_backwards);
	suite_add_tcase(s, tc);
	tc = tcase_create("write errors");
	tcase_add_test(tc, write_error_returned_and_counted);
	suite_add_tcase(s, tc);
	tc = tcase_create("segments");
	tcase_add_loop_test(tc, one_segment_per_flush, 0, N(kinds));
	suite_add_tcase(s, tc);
	tc = tcase_create("recovery");
	tcase_add_loop_test(tc, partial_recovered_after_kill, 0, N(kinds));
	suite_add_tcase(s, tc);
	tc = tcase_create("retention");
	tcase_add_test(tc, retention_keeps_the_newest);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
