/*
 * flame_profd — unit tests: flame_prof's renderers. Folded stacks, top
 * tables, diff summaries and speedscope JSON byte for byte against golden
 * files (FP_REGENERATE_GOLDEN=1 rewrites them); the SVGs by structure.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp-test.h"
#include "fp/flame-tree.h"
#include "fp/flamegraph-svg.h"
#include "fp/folded.h"
#include "fp/heatmap-svg.h"
#include "fp/perf-script-read.h"
#include "fp/speedscope.h"
#include "fp/top.h"
#include "util-mem.h"

/* What the tests feed: the same stacks flame_prof builds by default
 * (status first, then the frames root first). */
struct load {
	struct fp_flame_tree *tree;
	int set;
	struct fp_func_table *table;
	struct fp_speedscope *speedscope;
	struct fp_heatmap *heatmap;
	bool per_status;	/* speedscope: a profile per status */
	bool memory_delta;	/* weight memory_delta, split by sign */
};

static int
feed(void *data, const struct fp_perf_record *rec)
{
	struct load *l = data;
	const char *names[80], *files[80];
	size_t n = 0, ngroups;
	int64_t w = l->memory_delta ? rec->delta[FP_METRIC_MEMORY] : 1;
	uint64_t mag = w < 0 ? (uint64_t)-w : (uint64_t)w;

	fp_assert(rec->nframes < 70);
	if (l->table)
		fp_func_table_add(l->table, rec->status, rec->frames,
				  rec->nframes, w);
	if (l->heatmap)
		fp_heatmap_add(l->heatmap, rec->time_us, w);
	if (w == 0)
		return 0;
	if (l->memory_delta) {
		names[n] = w > 0 ? "[+memory_delta]" : "[-memory_delta]";
		files[n++] = NULL;
	}
	if (!l->per_status) {
		names[n] = fp_status_name(rec->status);
		files[n++] = NULL;
	}
	ngroups = n;
	for (uint32_t i = rec->nframes; i-- > 0;) {
		names[n] = rec->frames[i];
		files[n++] = rec->files[i];
	}
	if (l->tree)
		fp_flame_tree_add(l->tree, l->set, names, files, n, ngroups, mag);
	if (l->speedscope) {
		char profile[256];

		/* flame_prof's default: a profile per process */
		if (l->per_status)
			snprintf(profile, sizeof(profile), "%s",
				 fp_status_name(rec->status));
		else if (rec->registered_name)
			snprintf(profile, sizeof(profile), "%s <0.%u.%u>",
				 rec->registered_name, rec->pid.num, rec->pid.serial);
		else
			snprintf(profile, sizeof(profile), "<0.%u.%u>%s%s",
				 rec->pid.num, rec->pid.serial,
				 rec->initial_call ? " " : "",
				 rec->initial_call ? rec->initial_call : "");
		fp_speedscope_add(l->speedscope, profile, names, files, n, mag,
				  rec->time_us);
	}
	return 0;
}

static void
load_file(const char *name, struct load *l)
{
	const char *dir = getenv("FP_GOLDEN_DIR");
	char path[4096];
	struct fp_perf_reader *r = NULL;

	fp_assert_ptr_nonnull(dir);
	snprintf(path, sizeof(path), "%s/flame_prof/%s", dir, name);
	fp_assert_int_eq(fp_perf_reader_open(path, &r), 0);
	fp_assert_int_eq(fp_perf_read(r, feed, l), 0);
	fp_perf_reader_destroy(r);
	if (l->tree)
		fp_flame_tree_finish(l->tree);
}

static void
check_golden(const char *name, const char *got)
{
	const char *dir = getenv("FP_GOLDEN_DIR");
	char path[4096];
	char *want;
	size_t len;
	FILE *f;

	fp_assert_ptr_nonnull(dir);
	snprintf(path, sizeof(path), "%s/flame_prof/%s", dir, name);
	if (getenv("FP_REGENERATE_GOLDEN")) {
		f = fopen(path, "w");
		fp_assert_ptr_nonnull(f);
		fputs(got, f);
		fclose(f);
	}
	f = fopen(path, "r");
	fp_assert_ptr_nonnull(f);
	want = xzalloc(1 << 22);
	len = fread(want, 1, (1 << 22) - 1, f);
	fclose(f);
	want[len] = '\0';
	if (strcmp(want, got) != 0)
		fprintf(stderr, "--- %s differs; got:\n%s", path, got ? got : "(null)");
	fp_assert_str_eq(want, got);
	free(want);
}

struct mem {
	char *buf;
	size_t len;
	FILE *f;
};

static FILE *
mem_open(struct mem *m)
{
	m->buf = NULL;
	m->len = 0;
	m->f = open_memstream(&m->buf, &m->len);
	return m->f;
}

static char *
mem_close(struct mem *m)
{
	fclose(m->f);
	return m->buf;
}

static size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* ---- folded ---- */

static const struct {
	const char *input;
	bool memory_delta;
	const char *golden;
} folded_cases[] = {
	{ "demo.perf", false, "demo.folded" },
	{ "edge.perf", false, "edge.folded" },
	{ "edge.perf", true, "edge.memory_delta.folded" },
};

START_TEST(folded_golden)
{
	struct load l = { .tree = fp_flame_tree_new(),
			  .memory_delta = folded_cases[_i].memory_delta };
	struct mem m;
	char *got;

	load_file(folded_cases[_i].input, &l);
	fp_assert_int_eq(fp_folded_write(l.tree, 0, l.memory_delta, mem_open(&m)), 0);
	got = mem_close(&m);
	check_golden(folded_cases[_i].golden, got);
	/* no line holds an empty frame, every count is positive */
	fp_assert(strstr(got, ";;") == NULL);
	fp_assert(strstr(got, " 0\n") == NULL);
	free(got);
	fp_flame_tree_destroy(l.tree);
}
END_TEST

/* The walk visits a node before its children, siblings by name, and
 * skips a subtree when told not to descend; a walk of a subtree stays in
 * it. */
START_TEST(tree_walk)
{
	static const char *const s1[] = { "a", "b", "c" };
	static const char *const s2[] = { "a", "d" };
	static const char *const s3[] = { "e" };
	struct fp_flame_tree *tree = fp_flame_tree_new();
	const struct fp_flame_node *n, *a = NULL;
	struct fp_flame_walk walk;
	char order[16];
	size_t len = 0;

	fp_flame_tree_add(tree, 0, s3, NULL, 1, 0, 1);
	fp_flame_tree_add(tree, 0, s1, NULL, 3, 0, 1);
	fp_flame_tree_add(tree, 0, s2, NULL, 2, 0, 1);
	fp_flame_tree_finish(tree);

	for (n = fp_flame_walk_start(&walk, fp_flame_tree_root(tree)); n;
	     n = fp_flame_walk_next(&walk, true))
		order[len++] = n->depth ? n->name[0] : '/';
	order[len] = '\0';
	fp_assert_str_eq(order, "/abcde");

	len = 0;
	for (n = fp_flame_walk_start(&walk, fp_flame_tree_root(tree)); n;
	     n = fp_flame_walk_next(&walk, strcmp(n->name, "b") != 0)) {
		order[len++] = n->depth ? n->name[0] : '/';
		if (strcmp(n->name, "a") == 0)
			a = n;
	}
	order[len] = '\0';
	fp_assert_str_eq(order, "/abde");

	len = 0;
	for (n = fp_flame_walk_start(&walk, a); n; n = fp_flame_walk_next(&walk, true))
		order[len++] = n->name[0];
	order[len] = '\0';
	fp_assert_str_eq(order, "abcd");

	len = 0;
	for (n = fp_flame_walk_start(&walk, fp_flame_tree_root(tree)); n;
	     n = fp_flame_walk_next(&walk, false))
		order[len++] = n->depth ? n->name[0] : '/';
	order[len] = '\0';
	fp_assert_str_eq(order, "/");
	fp_flame_tree_destroy(tree);
}
END_TEST

/* Counts add up: the folded lines of the demo sum to its samples. */
START_TEST(folded_sums)
{
	struct load l = { .tree = fp_flame_tree_new() };
	struct mem m;
	char *got, *line, *save = NULL;
	unsigned long long sum = 0;

	load_file("demo.perf", &l);
	fp_assert_int_eq(fp_folded_write(l.tree, 0, false, mem_open(&m)), 0);
	got = mem_close(&m);
	for (line = strtok_r(got, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		sum += strtoull(strrchr(line, ' ') + 1, NULL, 10);
	fp_assert_int_eq(sum, 36);
	fp_assert_int_eq(fp_flame_tree_root(l.tree)->samples[0], 36);
	free(got);
	fp_flame_tree_destroy(l.tree);
}
END_TEST

/* ---- top and diff ---- */

static const struct {
	const char *input;
	bool memory_delta;
	enum fp_top_sort sort;
	size_t limit;
	const char *golden;
} top_cases[] = {
	{ "demo.perf", false, FP_TOP_SELF, 0, "demo.top" },
	{ "demo.perf", false, FP_TOP_TOTAL, 5, "demo.top-total-5" },
	{ "edge.perf", true, FP_TOP_WEIGHT_SELF, 0, "edge.memory_delta.top" },
};

/* An allocator that releases what it grows nets 0: the gross columns
 * and sort keys still rank it. */
START_TEST(top_gross)
{
	struct fp_func_table *t = fp_func_table_new();
	const char *alloc[] = { "m:alloc/1", "m:main/0" };
	const char *idle[] = { "m:idle/0", "m:main/0" };
	struct fp_top_options o = {
		.weight_name = "memory_delta",
		.sort = FP_TOP_GROSS_GROWTH,
		.gross = true,
	};
	const struct fp_func_stats *st;
	struct mem m;
	char *got, *row;

	fp_func_table_add(t, FP_STATUS_RUNNING, alloc, 2, 950000);
	fp_func_table_add(t, FP_STATUS_RUNNING, alloc, 2, -950000);
	fp_func_table_add(t, FP_STATUS_WAITING, idle, 2, 10);
	st = fp_func_table_find(t, "m:alloc/1");
	fp_assert(st->self_weight == 0 && st->self_growth == 950000 &&
		  st->self_release == 950000);
	st = fp_func_table_find(t, "m:main/0");
	fp_assert(st->total_weight == 10 && st->total_growth == 950010 &&
		  st->total_release == 950000);

	fp_assert_int_eq(fp_top_write(t, &o, mem_open(&m)), 0);
	got = mem_close(&m);
	/* first row: the allocator, net 0, 950000 either way */
	row = strstr(got, "FUNCTION\n");
	fp_assert(row && strstr(got, "+W_SELF         -W_SELF  FUNCTION\n"));
	row += strlen("FUNCTION\n");
	fp_assert(strncmp(row, "        2  66.67%         2  66.67%               0    0.00%"
			       "               0    0.00%          950000          950000"
			       "  m:alloc/1\n", 124) == 0);
	fp_assert(strstr(got, "m:alloc/1") < strstr(got, "m:idle/0"));
	free(got);

	o.sort = FP_TOP_GROSS_RELEASE;
	o.limit = 1;
	fp_assert_int_eq(fp_top_write(t, &o, mem_open(&m)), 0);
	got = mem_close(&m);
	fp_assert(strstr(got, "m:alloc/1") && !strstr(got, "m:idle/0"));
	free(got);
	fp_func_table_destroy(t);
}
END_TEST

/* idle samples counted in the summary, in no row; rows' shares of the rest */
START_TEST(top_unranked)
{
	struct fp_func_table *t = fp_func_table_new();
	const char *work[] = { "m:work/0", "m:main/0" };
	struct fp_top_options o = { .sort = FP_TOP_SELF };
	struct mem m;
	char *got, *row;

	fp_func_table_add(t, FP_STATUS_RUNNING, work, 2, 1);
	fp_func_table_add_unranked(t, FP_STATUS_WAITING);
	fp_func_table_add_unranked(t, FP_STATUS_WAITING);
	fp_func_table_add_unranked(t, FP_STATUS_SUSPENDED);
	fp_assert(fp_func_table_samples(t) == 4);
	fp_assert(fp_func_table_status_samples(t, FP_STATUS_WAITING) == 2);
	fp_assert(fp_func_table_find(t, "m:work/0")->self_samples == 1);

	fp_assert_int_eq(fp_top_write(t, &o, mem_open(&m)), 0);
	got = mem_close(&m);
	fp_assert(strncmp(got, "samples: 4\n", 11) == 0);
	fp_assert(strstr(got, "\nidle: 3 samples (waiting, suspended, SLEEP) left out of "
			      "the rows; --status counts them\n\n"));
	row = strstr(got, "FUNCTION\n");
	fp_assert(row);
	row += strlen("FUNCTION\n");
	fp_assert(strncmp(row, "        1 100.00%         1 100.00%  m:work/0\n", 44) == 0);
	free(got);

	/* nothing left out: no idle line */
	fp_func_table_destroy(t);
	t = fp_func_table_new();
	fp_func_table_add(t, FP_STATUS_WAITING, work, 2, 1);
	fp_assert_int_eq(fp_top_write(t, &o, mem_open(&m)), 0);
	got = mem_close(&m);
	fp_assert(!strstr(got, "idle:"));
	free(got);
	fp_func_table_destroy(t);
}
END_TEST

START_TEST(top_golden)
{
	struct load l = { .table = fp_func_table_new(),
			  .memory_delta = top_cases[_i].memory_delta };
	struct fp_top_options o = {
		.limit = top_cases[_i].limit,
		.weight_name = l.memory_delta ? "memory_delta" : NULL,
		.sort = top_cases[_i].sort,
		.gross = l.memory_delta,
	};
	struct mem m;
	char *got;

	load_file(top_cases[_i].input, &l);
	fp_assert_int_eq(fp_top_write(l.table, &o, mem_open(&m)), 0);
	got = mem_close(&m);
	check_golden(top_cases[_i].golden, got);
	free(got);
	fp_func_table_destroy(l.table);
}
END_TEST

/* Recursion counts once in a total; self only at the leaf. */
START_TEST(top_recursion)
{
	struct fp_func_table *t = fp_func_table_new();
	const char *a[] = { "m:leaf/0", "m:rec/1", "m:rec/1", "m:rec/1", "m:top/0" };
	const char *b[] = { "m:rec/1", "m:top/0" };
	const struct fp_func_stats *s;

	fp_func_table_add(t, FP_STATUS_RUNNING, a, 5, 10);
	fp_func_table_add(t, FP_STATUS_WAITING, b, 2, -4);
	fp_func_table_add(t, FP_STATUS_WAITING, NULL, 0, 1);
	fp_assert_int_eq(fp_func_table_samples(t), 3);
	fp_assert_int_eq(fp_func_table_abs_weight(t), 15);
	fp_assert_int_eq(fp_func_table_net_weight(t), 7);
	fp_assert_int_eq(fp_func_table_status_samples(t, FP_STATUS_WAITING), 2);
	s = fp_func_table_find(t, "m:rec/1");
	fp_assert_ptr_nonnull(s);
	fp_assert_int_eq(s->total_samples, 2);
	fp_assert_int_eq(s->self_samples, 1);
	fp_assert_int_eq(s->total_weight, 6);
	fp_assert_int_eq(s->self_weight, -4);
	s = fp_func_table_find(t, "m:leaf/0");
	fp_assert_int_eq(s->self_samples, 1);
	fp_assert_ptr_null(fp_func_table_find(t, "m:none/0"));
	fp_func_table_destroy(t);
}
END_TEST

START_TEST(diff_golden)
{
	struct load before = { .table = fp_func_table_new() };
	struct load after = { .table = fp_func_table_new() };
	struct fp_diff_options o = { .by = _i ? FP_DIFF_TOTAL : FP_DIFF_SELF,
				     .threshold = 5.0 };
	size_t regressions = 99;
	struct mem m;
	char *got;

	load_file("demo.perf", &before);
	load_file("edge.perf", &after);
	fp_assert_int_eq(fp_diff_write(before.table, after.table, &o,
				       mem_open(&m), &regressions), 0);
	got = mem_close(&m);
	check_golden(_i ? "demo-edge.total.diff" : "demo-edge.diff", got);
	fp_assert_int_eq(regressions, count(got, "REGRESSION"));
	fp_assert(regressions > 0);
	free(got);

	/* a profile against itself: no change, no regression */
	fp_assert_int_eq(fp_diff_write(before.table, before.table, &o,
				       mem_open(&m), &regressions), 0);
	got = mem_close(&m);
	fp_assert_int_eq(regressions, 0);
	fp_assert(strstr(got, "grew") == NULL && strstr(got, "shrank") == NULL);
	free(got);
	fp_func_table_destroy(before.table);
	fp_func_table_destroy(after.table);
}
END_TEST

/* ---- speedscope ---- */

/* Timed: seconds since the first sample of all; the time before a
 * profile's first sample and a long gap are empty samples. */
START_TEST(speedscope_timed)
{
	struct fp_speedscope_options o = {
		.unit = "seconds", .timed = true,
	};
	struct fp_speedscope *ss = fp_speedscope_new(&o);
	const char *a[] = { "running", "m:a/0" }, *b[] = { "waiting", "m:b/0" };
	struct mem m;
	char *got;

	/* p: 1.0 s, 1.1 s, 1.2 s, then 9.0 s (a gap); q: 1.05 s once */
	fp_speedscope_add(ss, "p", a, NULL, 2, 1, 1000000);
	fp_speedscope_add(ss, "q", b, NULL, 2, 1, 1050000);
	fp_speedscope_add(ss, "p", a, NULL, 2, 1, 1100000);
	fp_speedscope_add(ss, "p", b, NULL, 2, 1, 1200000);
	fp_speedscope_add(ss, "p", a, NULL, 2, 1, 9000000);
	fp_assert_int_eq(fp_speedscope_write(ss, mem_open(&m)), 0);
	got = mem_close(&m);
	fp_assert(strstr(got, "{\"type\": \"sampled\", \"name\": \"p\", \"unit\": \"seconds\",\n"
			 "\"samples\": [\n[0,1],\n[0,1],\n[2,3],\n[],\n[0,1]\n],\n"
			 "\"startValue\": 0, \"endValue\": 8.100000,\n"
			 "\"weights\": [0.100000,0.100000,0.100000,7.700000,0.100000]}") != NULL);
	/* q starts 0.05 s in and, sampled once, lasts a millisecond */
	fp_assert(strstr(got, "\"samples\": [\n[],\n[2,3]\n],\n"
			 "\"startValue\": 0, \"endValue\": 0.051000,\n"
			 "\"weights\": [0.050000,0.001000]}") != NULL);
	free(got);
	fp_speedscope_destroy(ss);
}
END_TEST

START_TEST(speedscope_golden)
{
	struct fp_speedscope_options o = {
		.name = _i ? "edge.perf" : "demo.perf",
		.unit = _i ? "bytes" : "seconds",
		.exporter = "flame_prof " FP_VERSION,
		.timed = _i == 0,
	};
	struct load l = { .speedscope = fp_speedscope_new(&o),
			  .per_status = _i == 1, .memory_delta = _i == 1 };
	struct mem m;
	char *got;

	load_file(_i ? "edge.perf" : "demo.perf", &l);
	fp_assert_int_eq(fp_speedscope_write(l.speedscope, mem_open(&m)), 0);
	got = mem_close(&m);
	check_golden(_i ? "edge.per-status.memory_delta.speedscope.json" :
			  "demo.speedscope.json", got);
	free(got);
	fp_speedscope_destroy(l.speedscope);
}
END_TEST

static const struct {
	const char *in;
	const char *out;
} json_cases[] = {
	{ "plain", "\"plain\"" },
	{ "q\"b\\", "\"q\\\"b\\\\\"" },
	{ "tab\tnl\n", "\"tab\\u0009nl\\u000a\"" },
	{ "m\xc3\xb6" "d", "\"m\xc3\xb6" "d\"" },
	{ "bad\xff" "x", "\"bad\\ufffdx\"" },
	{ "cut\xc3", "\"cut\\ufffd\"" },
	{ "sur\xed\xa0\x80", "\"sur\\ufffd\\ufffd\\ufffd\"" },
	{ "csi\xc2\x9b" "1", "\"csi\\u009b1\"" },
	{ "nbsp\xc2\xa0", "\"nbsp\xc2\xa0\"" },
};

START_TEST(json_escape)
{
	struct mem m;
	char *got;

	fp_json_write_string(mem_open(&m), json_cases[_i].in);
	got = mem_close(&m);
	fp_assert_str_eq(got, json_cases[_i].out);
	free(got);
}
END_TEST

/* ---- SVG ---- */

static char *
render_svg(const char *input, bool memory_delta, double minwidth)
{
	struct load l = { .tree = fp_flame_tree_new(), .memory_delta = memory_delta };
	struct fp_flamegraph_options o = {
		.title = "T <&> \"q\"",
		.unit = memory_delta ? "memory_delta" : "samples",
		.weighted = memory_delta,
		.minwidth = minwidth,
	};
	struct mem m;
	char *got;

	load_file(input, &l);
	fp_assert_int_eq(fp_flamegraph_svg_write(l.tree, &o, mem_open(&m)), 0);
	got = mem_close(&m);
	fp_flame_tree_destroy(l.tree);
	return got;
}

START_TEST(svg_structure)
{
	char *svg = render_svg("edge.perf", false, 0);
	struct load l = { .tree = fp_flame_tree_new() };

	load_file("edge.perf", &l);
	/* one frame per node, and the root */
	fp_assert_int_eq(count(svg, "<g class=\"f\""), fp_flame_tree_size(l.tree) + 1);
	/* the root spans the width between the paddings */
	fp_assert(strstr(svg, "<g class=\"f\" data-o=\"0\" data-v=\"8\" data-d=\"0\"><title>all (8 samples, 100.00%)</title>"
			      "<rect x=\"10.00\" y=\"") != NULL);
	fp_assert(strstr(svg, "width=\"1180.00\"") != NULL);
	/* escaped names, title and attributes */
	fp_assert(strstr(svg, "<title>weird:&apos;&lt;&amp;&gt;&apos;/0 (1 samples, 12.50%)</title>") != NULL);
	fp_assert(strstr(svg, ">T &lt;&amp;&gt; &quot;q&quot;</text>") != NULL);
	fp_assert(strstr(svg, "<&>") == NULL);
	/* the running stack holds 2 of 8 samples: 295 px */
	fp_assert(strstr(svg, "data-v=\"2\" data-d=\"1\"><title>running (2 samples, 25.00%)</title><rect x=\"") != NULL);
	fp_assert(strstr(svg, "width=\"295.00\"") != NULL);
	fp_assert(count(svg, "<script") == 1);
	fp_assert(count(svg, "]]>") == 2);
	free(svg);
	fp_flame_tree_destroy(l.tree);
}
END_TEST

START_TEST(svg_weighted)
{
	char *svg = render_svg("edge.perf", true, 0);

	/* |deltas|: 4096 + 4000 + 2048 + 10000 + 1000 + 500 = 21644 */
	fp_assert(strstr(svg, "data-total=\"21644\"") != NULL);
	fp_assert(strstr(svg, "<title>[+memory_delta] (13048 memory_delta, 60.28%, 3 samples)</title>") != NULL);
	fp_assert(strstr(svg, "<title>[-memory_delta] (8596 memory_delta, 39.72%, 3 samples)</title>") != NULL);
	free(svg);
}
END_TEST

/* Frames under --minwidth go, with everything above them. */
START_TEST(svg_minwidth)
{
	char *all = render_svg("demo.perf", false, 0);
	char *some = render_svg("demo.perf", false, 40);

	fp_assert(count(some, "<g class=\"f\"") < count(all, "<g class=\"f\""));
	fp_assert(count(some, "<g class=\"f\"") > 3);
	free(all);
	free(some);
}
END_TEST

START_TEST(svg_diff)
{
	struct fp_flame_tree *tree = fp_flame_tree_new();
	struct load before = { .tree = tree, .set = 0 };
	struct load after = { .tree = tree, .set = 1 };
	struct fp_flamegraph_options o = { .diff = true, .unit = "samples",
					   .minwidth = 0 };
	struct mem m;
	char *svg;

	load_file("demo.perf", &before);
	load_file("edge.perf", &after);
	fp_assert_int_eq(fp_flamegraph_svg_write(tree, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	/* widths from AFTER (8 samples), colours by change */
	fp_assert(strstr(svg, "data-total=\"8\"") != NULL);
	fp_assert(strstr(svg, "fill=\"rgb(255,") != NULL);	/* grew: red */
	fp_assert(strstr(svg, ",255)\"/>") != NULL);		/* shrank: blue */
	fp_assert(strstr(svg, "; before 83.33%, change -58.33 points)") != NULL);
	free(svg);
	fp_flame_tree_destroy(tree);
}
END_TEST

START_TEST(heatmap_structure)
{
	struct load l = { .heatmap = fp_heatmap_new(50) };
	struct fp_heatmap_options o = { .title = "H&M", .unit = "samples",
					.command = "flame_prof svg 'a b'" };
	struct mem m;
	char *svg;

	load_file("edge.perf", &l);
	fp_assert_int_eq(fp_heatmap_write(l.heatmap, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	/* 8 samples in 8 distinct 20 ms cells over 3 seconds */
	fp_assert_int_eq(count(svg, "<rect class=\"c\""), 8);
	fp_assert(strstr(svg, "data-t0=\"1795248000\" data-rows=\"50\"") != NULL);
	fp_assert(strstr(svg, "data-c=\"0\" data-r=\"0\" data-v=\"1\"><title>+0s 0-20 ms: 1 samples</title>") != NULL);
	fp_assert(strstr(svg, "data-c=\"1\" data-r=\"49\" data-v=\"1\"><title>+1s 980-1000 ms: 1 samples</title>") != NULL);
	fp_assert(strstr(svg, "data-c=\"2\" data-r=\"25\"") != NULL);
	fp_assert(strstr(svg, ">H&amp;M</text>") != NULL);
	fp_assert(strstr(svg, "data-command=\"flame_prof svg &apos;a b&apos;\"") != NULL);
	fp_assert(strstr(svg, "3 s from 2026-11-21T08:00:00.000Z") != NULL);
	free(svg);
	fp_heatmap_destroy(l.heatmap);

	/* signed sums: red for growth, blue for release */
	l.heatmap = fp_heatmap_new(10);
	l.memory_delta = true;
	load_file("edge.perf", &l);
	fp_assert_int_eq(fp_heatmap_write(l.heatmap, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	fp_assert(strstr(svg, "data-v=\"-4096\"") != NULL);
	fp_assert(strstr(svg, "data-v=\"10000\"") != NULL);
	fp_assert(strstr(svg, "fill=\"rgb(175,0,0)\"") != NULL);	/* the largest */
	free(svg);
	fp_heatmap_destroy(l.heatmap);
}
END_TEST

START_TEST(heatmap_too_big)
{
	struct fp_heatmap *h = fp_heatmap_new(1000);
	struct fp_heatmap_options o = { 0 };
	struct mem m;

	fp_heatmap_add(h, 1000000, 1);
	fp_heatmap_add(h, 1000000ULL * 86400 * 10, 1);
	fp_assert_int_eq(fp_heatmap_write(h, &o, mem_open(&m)), -E2BIG);
	free(mem_close(&m));
	fp_heatmap_destroy(h);
}
END_TEST

/* Samples of several sources in one grid: a cell sums them all, its
 * title names the three largest (by magnitude, the first source on a
 * tie) and how many more; the notes stand under the map, escaped. */
START_TEST(heatmap_sources)
{
	static const char *const names[] = { "a@h", "b@h", "c@h", "d@h", "e<f@h" };
	static const char *const notes[] = { "NODE SAMPLES", "a@h <1>" };
	struct fp_heatmap *h = fp_heatmap_new(10);
	struct fp_heatmap_options o = { .sources = names, .nsources = 5,
					.notes = notes, .nnotes = 2 };
	static const int64_t values[] = { 1, 5, -3, 2, 3 };
	struct mem m;
	char *svg;

	/* out of order, as files of several nodes come */
	for (unsigned i = 5; i-- > 0;)
		fp_heatmap_add_from(h, 1795248000010000ULL + i, values[i], i);
	fp_heatmap_add_from(h, 1795248001000000ULL, 1, 4);
	fp_heatmap_add(h, 1795248001000001ULL, 1);
	fp_assert_int_eq(fp_heatmap_write(h, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	fp_assert_int_eq(count(svg, "<rect class=\"c\""), 2);
	fp_assert(strstr(svg, "data-v=\"8\"><title>+0s 0-100 ms: 8 samples "
			      "(b@h 5, c@h -3, e&lt;f@h 3, 2 more)</title>") != NULL);
	fp_assert(strstr(svg, "<title>+1s 0-100 ms: 2 samples (a@h 1, e&lt;f@h 1)</title>") != NULL);
	fp_assert(strstr(svg, "<g id=\"notes\">") != NULL);
	fp_assert(strstr(svg, ">a@h &lt;1&gt;</text>") != NULL);
	free(svg);

	/* one source: no names in the titles, whatever was added from */
	o.nsources = 1;
	o.nnotes = 0;
	fp_assert_int_eq(fp_heatmap_write(h, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	fp_assert(strstr(svg, "<title>+1s 0-100 ms: 2 samples</title>") != NULL);
	fp_assert(strstr(svg, "notes") == NULL);
	free(svg);
	fp_heatmap_destroy(h);
}
END_TEST

/* A covered time widens the columns and fills no cell: idle samples
 * left out of the map still stand in its span. */
START_TEST(heatmap_cover)
{
	struct fp_heatmap *h = fp_heatmap_new(10);
	struct fp_heatmap_options o = { 0 };
	struct mem m;
	char *svg;

	fp_heatmap_cover(h, 1795248000500000ULL);
	fp_heatmap_add(h, 1795248001000000ULL, 1);
	fp_heatmap_cover(h, 1795248003999999ULL);
	fp_assert_int_eq(fp_heatmap_write(h, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	fp_assert_int_eq(count(svg, "<rect class=\"c\""), 1);
	fp_assert(strstr(svg, "data-c=\"1\" data-r=\"0\" data-v=\"1\"") != NULL);
	fp_assert(strstr(svg, "4 s from 2026-11-21T08:00:00.000Z") != NULL);
	free(svg);
	fp_heatmap_destroy(h);
}
END_TEST

/* An empty tree still makes a valid document. */
START_TEST(svg_empty)
{
	struct fp_flame_tree *t = fp_flame_tree_new();
	struct fp_flamegraph_options o = { .minwidth = -1 };
	struct mem m;
	char *svg;

	fp_flame_tree_finish(t);
	fp_assert_int_eq(fp_flamegraph_svg_write(t, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	fp_assert_int_eq(count(svg, "<g class=\"f\""), 0);
	fp_assert(strstr(svg, "</svg>\n") != NULL);
	free(svg);
	fp_flame_tree_destroy(t);
}
END_TEST

/*
 * A label too long for its frame keeps its end (function and arity) and
 * loses its start, at a UTF-8 boundary; a short one stays whole.
 */
START_TEST(svg_label_cut)
{
	struct fp_flame_tree *t = fp_flame_tree_new();
	const char *a[] = { "running", "anonymous fn/1 in RwEx.Client.loop/1" };
	const char *b[] = { "running", "zz:'\xc3\xb6'/12" };
	const char *c[] = { "waiting", "gen:f/0" };
	struct fp_flamegraph_options o = { .width = 200, .minwidth = -1 };
	struct mem m;
	char *svg;

	fp_flame_tree_add(t, 0, a, NULL, 2, 1, 1);
	fp_flame_tree_add(t, 0, b, NULL, 2, 1, 1);
	fp_flame_tree_add(t, 0, c, NULL, 2, 1, 2);
	fp_flame_tree_finish(t);
	fp_assert_int_eq(fp_flamegraph_svg_write(t, &o, mem_open(&m)), 0);
	svg = mem_close(&m);
	/* 60 px: 7 characters, ".." and the last 5 */
	fp_assert(strstr(svg, ">..oop/1</text>") != NULL);
	/* the cut would split the two bytes of U+00F6: the whole character
	 * is left out */
	fp_assert(strstr(svg, ">..&apos;/12</text>") != NULL);
	fp_assert(strstr(svg, ">gen:f/0</text>") != NULL);
	free(svg);
	fp_flame_tree_destroy(t);
}
END_TEST

START_TEST(write_errors)
{
	struct fp_flame_tree *t = fp_flame_tree_new();
	const char *names[] = { "running", "m:f/0" };
	FILE *f = fopen("/dev/full", "w");

	if (!f)
		return;
	setvbuf(f, NULL, _IONBF, 0);
	fp_flame_tree_add(t, 0, names, NULL, 2, 1, 1);
	fp_flame_tree_finish(t);
	fp_assert_int_lt(fp_folded_write(t, 0, false, f), 0);
	clearerr(f);
	fp_assert_int_lt(fp_flamegraph_svg_write(t, &(struct fp_flamegraph_options){ 0 }, f), 0);
	fclose(f);
	fp_flame_tree_destroy(t);
}
END_TEST

/* Sums past the 64-bit range are held at the bound and flagged, never
 * wrapped: three INT64_MAX weights, and three of the other sign. */
START_TEST(sums_saturate)
{
	const char *frames[] = { "m:f/0", "m:g/0" };
	struct fp_func_table *t = fp_func_table_new();
	struct fp_func_table *neg = fp_func_table_new();
	struct fp_flame_tree *tree = fp_flame_tree_new();
	struct fp_heatmap *map = fp_heatmap_new(10);
	const struct fp_func_stats *st;
	struct fp_heatmap_options ho = { 0 };
	FILE *devnull = fopen("/dev/null", "w");

	fp_assert_ptr_nonnull(devnull);
	fp_func_table_add(t, FP_STATUS_RUNNING, frames, 2, INT64_MAX);
	fp_assert(!fp_func_table_saturated(t));
	for (int i = 0; i < 2; i++) {
		fp_func_table_add(t, FP_STATUS_RUNNING, frames, 2, INT64_MAX);
		fp_func_table_add(neg, FP_STATUS_RUNNING, frames, 2, INT64_MIN);
		fp_flame_tree_add(tree, 0, frames, NULL, 2, 0, UINT64_MAX / 2 + 1);
		fp_heatmap_add(map, 1000000, INT64_MAX);
	}
	fp_assert(fp_func_table_saturated(t));
	fp_assert_int_eq(fp_func_table_net_weight(t), INT64_MAX);
	fp_assert(fp_func_table_abs_weight(t) == UINT64_MAX);
	st = fp_func_table_find(t, "m:f/0");
	fp_assert(st->self_weight == INT64_MAX && st->total_weight == INT64_MAX);
	fp_assert(fp_func_table_saturated(neg));
	fp_assert(fp_func_table_net_weight(neg) == INT64_MIN);
	fp_assert(fp_func_table_abs_weight(neg) == UINT64_MAX);
	st = fp_func_table_find(neg, "m:g/0");
	fp_assert(st->total_weight == INT64_MIN);

	fp_assert(fp_flame_tree_saturated(tree));
	fp_flame_tree_finish(tree);
	fp_assert(fp_flame_tree_root(tree)->weight[0] == UINT64_MAX);

	fp_assert(!fp_heatmap_saturated(map));
	fp_assert_int_eq(fp_heatmap_write(map, &ho, devnull), 0);
	fp_assert(fp_heatmap_saturated(map));

	fclose(devnull);
	fp_heatmap_destroy(map);
	fp_flame_tree_destroy(tree);
	fp_func_table_destroy(neg);
	fp_func_table_destroy(t);
}
END_TEST

#define N(a) (int)(sizeof(a) / sizeof(a[0]))

static Suite *
suite(void)
{
	Suite *s = suite_create("flame-prof-render");
	TCase *tc;

	tc = tcase_create("golden");
	tcase_add_loop_test(tc, folded_golden, 0, N(folded_cases));
	tcase_add_test(tc, folded_sums);
	tcase_add_test(tc, tree_walk);
	tcase_add_loop_test(tc, top_golden, 0, N(top_cases));
	tcase_add_test(tc, top_recursion);
	tcase_add_test(tc, top_gross);
	tcase_add_test(tc, top_unranked);
	tcase_add_loop_test(tc, diff_golden, 0, 2);
	tcase_add_loop_test(tc, speedscope_golden, 0, 2);
	tcase_add_test(tc, speedscope_timed);
	tcase_add_loop_test(tc, json_escape, 0, N(json_cases));
	suite_add_tcase(s, tc);

	tc = tcase_create("svg");
	tcase_add_test(tc, svg_structure);
	tcase_add_test(tc, svg_weighted);
	tcase_add_test(tc, svg_minwidth);
	tcase_add_test(tc, svg_diff);
	tcase_add_test(tc, svg_empty);
	tcase_add_test(tc, svg_label_cut);
	tcase_add_test(tc, heatmap_structure);
	tcase_add_test(tc, heatmap_too_big);
	tcase_add_test(tc, heatmap_cover);
	tcase_add_test(tc, heatmap_sources);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_test(tc, write_errors);
	tcase_add_test(tc, sums_saturate);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
