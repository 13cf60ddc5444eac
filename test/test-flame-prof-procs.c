/*
 * flame_profd — unit tests: flame_prof procs (flame_prof/procs.c), the
 * whole command over a file the writer made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp-test.h"
#include "fp/perf-script.h"
#include "util-mem.h"

static const struct fp_frame crunch[] = {
	{ .module = "fp_demo", .function = "crunch", .arity = 1,
	  .file = "fp_demo.erl" },
};

/* A registered process, and two threads of the node as --perf writes
 * them: pid <0.0.TID>, the thread's name as label, status cpu. */
static const struct fp_sample samples[] = {
	{ .pid = { .num = 87, .serial = 0 }, .time_us = 1795247790000000,
	  .status = FP_STATUS_RUNNING, .registered_name = "fp_demo_busy",
	  .frames = crunch, .nframes = 1 },
	{ .pid = { .num = 0, .serial = 4242 }, .time_us = 1795247790000100,
	  .status = FP_STATUS_CPU, .label = "erts_sched_1",
	  .frames = crunch, .nframes = 1 },
	{ .pid = { .num = 0, .serial = 4242 }, .time_us = 1795247790000200,
	  .status = FP_STATUS_CPU, .label = "erts_sched_1",
	  .frames = crunch, .nframes = 1 },
	{ .pid = { .num = 0, .serial = 4250 }, .time_us = 1795247790000300,
	  .status = FP_STATUS_CPU, .label = "erts_dcpus_1",
	  .frames = crunch, .nframes = 1 },
};

/* A proc_lib process as a RabbitMQ connection reader shows: proc_lib's
 * call until the daemon has read the recorded one, then that one. */
#define READER(t, m, f, a) \
	{ .pid = { .num = 90, .serial = 0 }, .time_us = (t), \
	  .status = FP_STATUS_WAITING, .has_initial_call = true, \
	  .initial_call = { .module = (m), .function = (f), .arity = (a) }, \
	  .frames = crunch, .nframes = 1 }
static const struct fp_sample reader[] = {
	READER(1795247790000000, "proc_lib", "init_p", 5),
	READER(1795247791000000, "rabbit_reader", "init", 3),
	READER(1795247792000000, "rabbit_reader", "init", 3),
};

/* and one the record of which is never read (a large dictionary) */
static const struct fp_sample unread[] = {
	{ .pid = { .num = 91, .serial = 0 }, .time_us = 1795247790000000,
	  .status = FP_STATUS_WAITING, .has_initial_call = true,
	  .initial_call = { .module = "proc_lib", .function = "init_p", .arity = 5 },
	  .frames = crunch, .nframes = 1 },
};

struct procs_run {
	char dir[32], in[128], out[128];
	char *text;		/* what flame_prof procs wrote */
};

/* Writes the @n samples of @in into a file and runs flame_prof procs on
 * it with @format ("text", "csv" or "json"). */
static void
procs_run(struct procs_run *pr, const char *format,
	  const struct fp_sample *in, size_t n)
{
	struct fp_perf_options po = { 0 };
	struct fp_perf_writer *w;
	size_t len = 0;
	FILE *f;

	snprintf(pr->dir, sizeof(pr->dir), "/tmp/fp-test-procs-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(pr->dir));
	snprintf(pr->in, sizeof(pr->in), "%s/node.perf", pr->dir);
	snprintf(pr->out, sizeof(pr->out), "%s/procs.out", pr->dir);
	f = fopen(pr->in, "w");
	fp_assert_ptr_nonnull(f);
	fputs("# flame_profd test header\n", f);
	w = fp_perf_writer_new(&po);
	for (size_t i = 0; i < n; i++)
		fp_assert_int_eq(fp_perf_write_sample(w, f, &in[i]), 0);
	fp_perf_writer_destroy(w);
	fclose(f);

	char *argv[] = { "flame_prof", "procs", "--format", (char *)format,
			 "-o", pr->out, pr->in, NULL };
	optind = 0;	/* glibc: start getopt afresh */
	fp_assert_int_eq(fpp_main(7, argv), 0);
	f = fopen(pr->out, "r");
	fp_assert_ptr_nonnull(f);
	pr->text = NULL;
	fp_assert_int_eq(getdelim(&pr->text, &len, '\0', f) > 0, 1);
	fclose(f);
}

static void
procs_run_free(struct procs_run *pr)
{
	free(pr->text);
	unlink(pr->in);
	unlink(pr->out);
	fp_assert_int_eq(rmdir(pr->dir), 0);
}

#define NSETS(a) (sizeof(a) / sizeof(a[0]))

/* The table's row of @pid, without its newline; "" when absent. */
static char *
row_of(const char *text, const char *pid)
{
	const char *at = strstr(text, pid);
	size_t n = at ? strcspn(at, "\n") : 0;
	char *row = xzalloc(n + 1);

	if (at)
		memcpy(row, at, n);
	return row;
}

static void
assert_row_has(const char *text, const char *pid, const char *want)
{
	char *row = row_of(text, pid);

	fp_assert(strstr(row, want) != NULL);
	free(row);
}

START_TEST(thread_names)
{
	struct procs_run pr;
	char *row;

	procs_run(&pr, "text", samples, NSETS(samples));
	row = row_of(pr.text, "<0.0.4242>");
	fp_assert_int_eq(strlen(row) > 0, 1);
	fp_assert_str_eq(row + strlen(row) - strlen("erts_sched_1 (cpu 2)"),
			 "erts_sched_1 (cpu 2)");
	free(row);
	assert_row_has(pr.text, "<0.0.4250>", "erts_dcpus_1 (cpu 1)");
	/* a process keeps its registered name */
	assert_row_has(pr.text, "<0.87.0>", "fp_demo_busy (running 1)");
	procs_run_free(&pr);
}
END_TEST

/* the scripts' formats carry the threads' names too */
START_TEST(thread_names_csv_json)
{
	struct procs_run pr;

	procs_run(&pr, "csv", samples, NSETS(samples));
	fp_assert(strstr(pr.text, "pid,registered_name,initial_call,thread,samples,") ==
		  pr.text);
	assert_row_has(pr.text, "<0.0.4242>", "<0.0.4242>,,,erts_sched_1,2,");
	assert_row_has(pr.text, "<0.87.0>", "<0.87.0>,fp_demo_busy,,,1,");
	procs_run_free(&pr);

	procs_run(&pr, "json", samples, NSETS(samples));
	assert_row_has(pr.text, "<0.0.4250>",
		       "\"registered_name\": null, \"initial_call\": null, "
		       "\"thread\": \"erts_dcpus_1\", \"samples\": 1,");
	assert_row_has(pr.text, "<0.87.0>", "\"thread\": null,");
	procs_run_free(&pr);
}
END_TEST

/* proc_lib's call names a process only where nothing better was seen,
 * whichever comes first */
START_TEST(recorded_initial_call)
{
	const struct fp_sample late[] = { reader[1], reader[0] };
	const struct fp_sample *sets[] = { reader, late, unread };
	const size_t n[] = { NSETS(reader), NSETS(late), NSETS(unread) };
	const char *pid = _i == 2 ? "<0.91.0>" : "<0.90.0>";
	const char *mfa = _i == 2 ? "proc_lib:init_p/5" : "rabbit_reader:init/3";
	char want[64];
	struct procs_run pr;

	procs_run(&pr, "text", sets[_i], n[_i]);
	snprintf(want, sizeof(want), "  %s (waiting %zu)", mfa, n[_i]);
	assert_row_has(pr.text, pid, want);
	procs_run_free(&pr);

	procs_run(&pr, "csv", sets[_i], n[_i]);
	snprintf(want, sizeof(want), ",%s,", mfa);
	assert_row_has(pr.text, pid, want);
	procs_run_free(&pr);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("flame-prof-procs");
	TCase *tc = tcase_create("names");

	tcase_add_test(tc, thread_names);
	tcase_add_test(tc, thread_names_csv_json);
	tcase_add_loop_test(tc, recorded_initial_call, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
