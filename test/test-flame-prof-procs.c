/*
 * flame_profd — unit tests: flame_prof procs (flame_prof/procs.c), the
 * whole command over a file the writer made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp-test.h"
#include "fp/perf-script.h"
#include "util-mem.h"

/* flame_prof/main.c's main(), renamed in this build of it */
int
fpp_cli_main(int argc, char **argv);

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

START_TEST(thread_names)
{
	char dir[] = "/tmp/fp-test-procs-XXXXXX", in[128], out[128];
	struct fp_perf_options po = { 0 };
	struct fp_perf_writer *w;
	char *text = NULL, *row;
	size_t len = 0;
	FILE *f;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(in, sizeof(in), "%s/node.perf", dir);
	snprintf(out, sizeof(out), "%s/procs.txt", dir);
	f = fopen(in, "w");
	fp_assert_ptr_nonnull(f);
	fputs("# flame_profd test header\n", f);
	w = fp_perf_writer_new(&po);
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
		fp_assert_int_eq(fp_perf_write_sample(w, f, &samples[i]), 0);
	fp_perf_writer_destroy(w);
	fclose(f);

	char *argv[] = { "flame_prof", "procs", "-o", out, in, NULL };
	optind = 0;	/* glibc: start getopt afresh */
	fp_assert_int_eq(fpp_cli_main(5, argv), 0);
	f = fopen(out, "r");
	fp_assert_ptr_nonnull(f);
	fp_assert_int_eq(getdelim(&text, &len, '\0', f) > 0, 1);
	fclose(f);

	row = row_of(text, "<0.0.4242>");
	fp_assert_int_eq(strlen(row) > 0, 1);
	fp_assert_str_eq(row + strlen(row) - strlen("erts_sched_1 (cpu 2)"),
			 "erts_sched_1 (cpu 2)");
	free(row);
	row = row_of(text, "<0.0.4250>");
	fp_assert(strstr(row, "erts_dcpus_1 (cpu 1)") != NULL);
	free(row);
	/* a process keeps its registered name */
	row = row_of(text, "<0.87.0>");
	fp_assert(strstr(row, "fp_demo_busy (running 1)") != NULL);
	free(row);

	free(text);
	unlink(in);
	unlink(out);
	fp_assert_int_eq(rmdir(dir), 0);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("flame-prof-procs");
	TCase *tc = tcase_create("names");

	tcase_add_test(tc, thread_names);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
