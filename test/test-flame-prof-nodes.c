/*
 * flame_profd — unit tests: the views of several nodes' files at once:
 * one heat map over every node's samples, aligned by wall-clock time,
 * its cells saying which nodes they hold and the table of nodes under
 * it; --where node= leaves one node's map, without either.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp-test.h"
#include "fp/perf-script.h"

#define T0 1795247790000000ULL	/* a whole second */
#define EVIL "ev\x1b[2Jil@h"	/* a node name a terminal would act on */

static const struct fp_frame crunch[] = {
	{ .module = "fp_demo", .function = "crunch", .arity = 1 },
};
static const struct fp_frame loop[] = {
	{ .module = "fp_demo", .function = "loop", .arity = 0 },
};

struct node_file {
	const char *node;
	const char *note;	/* an interval note of the daemon's */
	const struct fp_frame *frames;
	uint64_t offsets_us[4];	/* after T0; 0 ends (the first is taken) */
};

/* a@h and b@h have a sample in the first 20 ms of the first second
 * each; a@h's run started a second before b@h's ended */
static const struct node_file files[] = {
	{ "a@h", "flame_profd: 2026-11-27T11:00:00.000Z interval: selected=1 "
		 "pinned=0 samples=3 achieved=9.5/s cost=0.50% rate=10",
	  crunch, { 100, 500000, 1200000 } },
	{ "b@h", "flame_profd: 2026-11-27T11:00:00.000Z interval: selected=1 "
		 "pinned=0 samples=2 achieved=4.0/s cost=0.25% rate=10",
	  loop, { 200, 2500000 } },
	{ EVIL, "flame_profd: 2026-11-27T11:00:00.000Z interval: samples=1",
	  loop, { 2600000 } },
};

#define NFILES (sizeof(files) / sizeof(files[0]))

struct tree {
	char dir[40];
	char sub[NFILES][128], path[NFILES][256], out[128];
};

/* DIR/<node>/<node>.perf for each node, as the daemon lays them out. */
static void
tree_make(struct tree *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/fp-test-nodes-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(t->dir));
	snprintf(t->out, sizeof(t->out), "%s/out.svg", t->dir);
	for (size_t i = 0; i < NFILES; i++) {
		struct fp_perf_options po = { 0 };
		struct fp_perf_writer *w = fp_perf_writer_new(&po);
		FILE *f;

		snprintf(t->sub[i], sizeof(t->sub[i]), "%s/n%zu", t->dir, i);
		fp_assert_int_eq(mkdir(t->sub[i], 0700), 0);
		snprintf(t->path[i], sizeof(t->path[i]), "%s/n%zu.perf", t->sub[i], i);
		f = fopen(t->path[i], "w");
		fp_assert_ptr_nonnull(f);
		fprintf(f, "# node: %s\n# %s\n", files[i].node, files[i].note);
		for (size_t k = 0; k < 4 && (k == 0 || files[i].offsets_us[k]); k++) {
			struct fp_sample s = {
				.pid = { .num = 80 + (uint32_t)i, .serial = 0 },
				.time_us = T0 + files[i].offsets_us[k],
				.status = FP_STATUS_RUNNING,
				.frames = files[i].frames, .nframes = 1,
			};

			fp_assert_int_eq(fp_perf_write_sample(w, f, &s), 0);
		}
		fp_perf_writer_destroy(w);
		fp_assert_int_eq(fclose(f), 0);
	}
}

static void
tree_remove(struct tree *t)
{
	unlink(t->out);
	for (size_t i = 0; i < NFILES; i++) {
		unlink(t->path[i]);
		rmdir(t->sub[i]);
	}
	fp_assert_int_eq(rmdir(t->dir), 0);
}

/* flame_prof @args... -o OUT DIR: what it wrote */
static char *
run(struct tree *t, const char *const *args)
{
	char *argv[16], *text = NULL;
	int argc = 0;
	size_t cap = 0;
	FILE *f;

	argv[argc++] = "flame_prof";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc++] = "-o";
	argv[argc++] = t->out;
	argv[argc++] = t->dir;
	argv[argc] = NULL;
	optind = 0;	/* glibc: start getopt afresh */
	fp_assert_int_eq(fpp_main(argc, argv), 0);
	f = fopen(t->out, "r");
	fp_assert_ptr_nonnull(f);
	fp_assert_int_eq(getdelim(&text, &cap, '\0', f) > 0, 1);
	fclose(f);
	return text;
}

/* One grid over every node: a cell holding samples of two nodes names
 * both, the table of nodes stands under the map, and no byte of a
 * node's name reaches it unescaped. */
START_TEST(heatmap_merged)
{
	static const char *const args[] = { "heatmap", NULL };
	struct tree t;
	char *svg;

	tree_make(&t);
	svg = run(&t, args);
	fp_assert_ptr_nonnull(strstr(svg, ">3 nodes, 3 s from "));
	fp_assert_ptr_nonnull(strstr(svg, "<title>+0s 0-20 ms: 2 samples (a@h 1, b@h 1)</title>"));
	fp_assert_ptr_nonnull(strstr(svg, "<title>+2s 500-520 ms: 1 samples (b@h 1)</title>"));
	fp_assert_ptr_nonnull(strstr(svg, "<g id=\"notes\">"));
	fp_assert_ptr_nonnull(strstr(svg, ">NODE "));
	/* each node's row: its samples, achieved rate and hottest function */
	fp_assert_ptr_nonnull(strstr(svg, ">a@h "));
	fp_assert_ptr_nonnull(strstr(svg, " 9.5 "));
	fp_assert_ptr_nonnull(strstr(svg, "fp_demo:crunch/1 (100.0%)"));
	fp_assert_ptr_nonnull(strstr(svg, ">b@h "));
	fp_assert_ptr_nonnull(strstr(svg, " 4.0 "));
	fp_assert_ptr_nonnull(strstr(svg, "fp_demo:loop/0 (100.0%)"));
	fp_assert_ptr_null(strchr(svg, '\x1b'));
	fp_assert_ptr_nonnull(strstr(svg, "(ev\\x1B[2Jil@h 1)"));
	fp_assert_ptr_nonnull(strstr(svg, ">ev\\x1B[2Jil@h "));
	free(svg);
	tree_remove(&t);
}
END_TEST

/* --where node= leaves one node: its own map, no table, no sources. */
START_TEST(heatmap_one_node)
{
	static const char *const args[] = { "heatmap", "--where", "node=b@h", NULL };
	struct tree t;
	char *svg;

	tree_make(&t);
	svg = run(&t, args);
	fp_assert_ptr_null(strstr(svg, "nodes, "));
	fp_assert_ptr_null(strstr(svg, "<g id=\"notes\">"));
	fp_assert_ptr_nonnull(strstr(svg, "<title>+0s 0-20 ms: 1 samples</title>"));
	fp_assert_ptr_nonnull(strstr(svg, "<title>+2s 500-520 ms: 1 samples</title>"));
	fp_assert_ptr_null(strstr(svg, "a@h"));
	free(svg);
	tree_remove(&t);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("flame-prof-nodes");
	TCase *tc = tcase_create("heatmap");

	tcase_add_test(tc, heatmap_merged);
	tcase_add_test(tc, heatmap_one_node);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
