/*
 * flame_prof — the commands that render one pass over the input (folded,
 * svg, heatmap, top, speedscope) and diff, which reads two.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flame_prof.h"
#include "fp/flame-tree.h"
#include "fp/flamegraph-svg.h"
#include "fp/folded.h"
#include "fp/heatmap-svg.h"
#include "fp/speedscope.h"
#include "fp/top.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"

static int
group_cmp(const void *a, const void *b)
{
	const struct fpp_group_table *x = a, *y = b;

	if (!x->value || !y->value)
		return !x->value - !y->value;
	return strcmp(x->value, y->value);
}

/* top --by: one table per value, in the order of the values, the
 * samples without one last. */
static int
write_group_tables(struct fpp_run *r, const struct fp_top_options *to, FILE *f)
{
	int rc = 0;

	/* no groups: no array either, and qsort() wants one */
	if (r->ngroups)
		qsort(r->groups, r->ngroups, sizeof(*r->groups), group_cmp);
	for (size_t i = 0; i < r->ngroups && rc == 0; i++) {
		/* the value is the node's text: shown, never acted on */
		r->esc.len = 0;
		if (r->groups[i].value)
			fp_text_puts_escaped(&r->esc, r->groups[i].value, NULL);
		else
			fp_text_putc(&r->esc, '-');
		fprintf(f, "%s== %s: %.*s (%" PRIu64 " samples)\n\n", i ? "\n" : "",
			fpp_field_title(&r->o->group_by), (int)r->esc.len,
			r->esc.buf, fp_func_table_samples(r->groups[i].table));
		rc = fp_top_write(r->groups[i].table, to, f);
	}
	return rc;
}

/* The subtitle: "N samples, A to B", and with a weight what the
 * graph's widths add up to */
static void
weighted_span(const struct fpp_run *r, const struct fp_flame_tree *tree,
	      char *dst, size_t size)
{
	char span[200];

	fpp_format_span(r, span, sizeof(span));
	if (r->o->weight < 0 || !tree || !r->matched) {
		snprintf(dst, size, "%s", span);
		return;
	}
	snprintf(dst, size, "%s: %" PRIu64 "%s in all (%s)",
		 fpp_weight_label(r->o), fp_flame_tree_root(tree)->weight[0],
		 fpp_weight_is_signed(r->o) && r->o->sign == FPP_SIGN_SPLIT ?
		 " grown and released" : "", span);
}

/*
 * A heat map of several nodes: the table of `flame_prof nodes` under it,
 * a line of text each, and each node's name as shown, for the cells'
 * titles (the sources of @r's heat map, in its order). Nothing for one
 * node.
 */
struct merged {
	char *table;		/* the text of the table */
	char **lines;		/* ... cut into lines */
	size_t nlines;
	char **sources;		/* the node names as shown */
	size_t nsources;
};

static void
merged_free(struct merged *m)
{
	free(m->table);
	free(m->lines);
	for (size_t i = 0; i < m->nsources; i++)
		free(m->sources[i]);
	free(m->sources);
}

static int
merged_build(struct fpp_run *r, struct fpp_nodes *nodes, struct merged *m)
{
	size_t size = 0, cap = 0;
	FILE *f;
	int rc;

	*m = (struct merged){ 0 };
	if (fpp_nodes_count(nodes) < 2)
		return 0;
	f = open_memstream(&m->table, &size);
	if (!f)
		return -errno;
	rc = fpp_nodes_write(nodes, f);
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	if (rc < 0)
		return rc;
	for (char *p = m->table, *nl; p && *p; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		FP_GROW(m->lines, cap, m->nlines + 1);
		m->lines[m->nlines++] = p;
	}
	m->sources = xzalloc((r->nheat_nodes + 1) * sizeof(*m->sources));
	for (size_t i = 0; i < r->nheat_nodes; i++) {
		struct fp_text t = { 0 };

		/* the node's name is text a node controls */
		if (r->heat_nodes[i])
			fp_text_puts_escaped(&t, r->heat_nodes[i], " ");
		else
			fp_text_putc(&t, '-');
		fp_text_putc(&t, '\0');
		m->sources[m->nsources++] = t.buf;
	}
	return 0;
}

static int
write_svg(const struct fpp_options *o, const struct fp_flame_tree *tree,
	  const char *path, const char *subtitle, bool diff)
{
	char title[160];
	struct fp_flamegraph_options fo = {
		.title = o->title ? o->title : title,
		.subtitle = subtitle,
		.unit = fpp_weight_label(o),
		.weighted = o->weight >= 0,
		.diff = diff,
		.inverted = o->inverted,
		.width = o->width,
		.minwidth = o->minwidth,
	};
	struct fpp_output out;
	int ex;

	/* a weighted graph's widths are the weight's, not time's */
	if (o->weight < 0)
		snprintf(title, sizeof(title), "%s", diff ? "Differential Flame Graph" :
			 "Flame Graph");
	else
		snprintf(title, sizeof(title), "%s of %s", diff ?
			 "Differential Flame Graph" : "Flame Graph",
			 fpp_weight_label(o));
	ex = fpp_output_open(&out, path);
	if (ex != FPP_EXIT_OK)
		return ex;
	return fpp_output_close(&out, fp_flamegraph_svg_write(tree, &fo, out.f));
}

int
fpp_cmd_render(const struct fpp_options *o, char *const *args, size_t nargs)
{
	struct fpp_run r = { .o = o };
	struct fpp_nodes *nodes = NULL;
	struct merged merged = { 0 };
	struct fpp_output out;
	char subtitle[256];
	int ex;

	switch (o->command) {
	case FPP_CMD_FOLDED:
	case FPP_CMD_SVG:
		r.tree = fp_flame_tree_new();
		break;
	case FPP_CMD_HEATMAP:
		r.heatmap = fp_heatmap_new(o->rows ? o->rows : 50);
		/* count what stock Flamescope's heat map counts, unless the
		 * user chose the statuses or a weight: then what they chose */
		r.skips_idle = o->weight < 0 && !o->status_filter;
		/* several nodes: one grid by wall-clock time, the table of
		 * nodes under it */
		nodes = fpp_nodes_new(&r);
		break;
	case FPP_CMD_TOP:
		r.table = fp_func_table_new();
		r.groups_by_table = o->group;
		/* where the node works: what the heat map counts */
		r.skips_idle = o->weight < 0 && !o->status_filter;
		break;
	case FPP_CMD_SPEEDSCOPE: {
		/* a process's samples follow each other in time; those of
		 * several processes (per status, all) are concurrent */
		bool timed = o->weight < 0 && o->profiles == FPP_PROFILES_PROCESS;
		struct fp_speedscope_options so = {
			.name = nargs == 1 ? args[0] : "flame_prof",
			.unit = timed ? "seconds" :
				(o->weight == FP_METRIC_MEMORY ||
				 o->weight == FP_METRIC_BINARY_BYTES) ? "bytes" : "none",
			.exporter = "flame_prof " FP_VERSION,
			.timed = timed,
		};
		const char *slash = strrchr(so.name, '/');

		if (slash && slash[1])
			so.name = slash + 1;
		r.speedscope = fp_speedscope_new(&so);
		break;
	}
	default:
		return FPP_EXIT_SOFTWARE;
	}

	ex = fpp_read_inputs(&r, args, nargs);
	if (ex != FPP_EXIT_OK)
		goto free_run;
	if (r.tree)
		fp_flame_tree_finish(r.tree);
	weighted_span(&r, r.tree, subtitle, sizeof(subtitle));

	if (o->command == FPP_CMD_SVG) {
		ex = write_svg(o, r.tree, o->output, subtitle, false);
		fpp_warn_saturated(o, fp_flame_tree_saturated(r.tree));
		goto free_run;
	}
	ex = fpp_output_open(&out, o->output);
	if (ex != FPP_EXIT_OK)
		goto free_run;
	switch (o->command) {
	case FPP_CMD_FOLDED:
		ex = fpp_output_close(&out, fp_folded_write(r.tree, 0, o->weight >= 0,
							out.f));
		break;
	case FPP_CMD_HEATMAP: {
		char idle[96], sub[160];
		struct fp_heatmap_options ho = {
			.title = o->title,
			.subtitle = o->weight >= 0 ? fpp_weight_label(o) :
				    r.idle_left_out ? idle : NULL,
			.unit = fpp_weight_label(o),
			.command = "flame_prof svg",
		};
		int rc = merged_build(&r, nodes, &merged);

		snprintf(idle, sizeof(idle), "%" PRIu64 " idle sample%s left out "
			 "(--status counts them)", r.idle_left_out,
			 r.idle_left_out == 1 ? "" : "s");
		if (rc == 0 && merged.nlines) {
			snprintf(sub, sizeof(sub), "%zu nodes%s%s",
				 fpp_nodes_count(nodes), ho.subtitle ? ", " : "",
				 ho.subtitle ? ho.subtitle : "");
			ho.subtitle = sub;
			ho.sources = (const char *const *)merged.sources;
			ho.nsources = merged.nsources;
			ho.notes = (const char *const *)merged.lines;
			ho.nnotes = merged.nlines;
		}
		if (rc == 0)
			rc = fp_heatmap_write(r.heatmap, &ho, out.f);
		ex = fpp_output_close(&out, rc);
		break;
	}
	case FPP_CMD_TOP: {
		struct fp_top_options to = {
			.limit = o->limit,
			.weight_name = o->weight < 0 ? NULL : fpp_weight_label(o),
			.sort = (enum fp_top_sort)o->sort,
			/* net sums hide what is grown and released again */
			.gross = fpp_weight_is_signed(o) && o->sign == FPP_SIGN_SPLIT,
		};

		ex = fpp_output_close(&out, r.groups_by_table ?
					write_group_tables(&r, &to, out.f) :
					fp_top_write(r.table, &to, out.f));
		break;
	}
	case FPP_CMD_SPEEDSCOPE:
		ex = fpp_output_close(&out, fp_speedscope_write(r.speedscope, out.f));
		break;
	default:
		ex = fpp_output_close(&out, 0);
		break;
	}
	fpp_warn_saturated(o, (r.tree && fp_flame_tree_saturated(r.tree)) ||
			  (r.table && fp_func_table_saturated(r.table)) ||
			  (r.heatmap && fp_heatmap_saturated(r.heatmap)));

free_run:
	merged_free(&merged);
	fpp_nodes_destroy(nodes);
	fp_flame_tree_destroy(r.tree);
	fp_heatmap_destroy(r.heatmap);
	fp_func_table_destroy(r.table);
	for (size_t i = 0; i < r.ngroups; i++) {
		free(r.groups[i].value);
		fp_func_table_destroy(r.groups[i].table);
	}
	free(r.groups);
	fp_speedscope_destroy(r.speedscope);
	fpp_run_free(&r);
	return ex;
}

int
fpp_cmd_diff(const struct fpp_options *o, char *const *args, size_t nargs)
{
	struct fp_flame_tree *tree = o->svg_output ? fp_flame_tree_new() : NULL;
	struct fpp_run side[2] = { { .o = o, .set = 0, .tree = tree },
			       { .o = o, .set = 1, .tree = tree } };
	struct fp_diff_options dopt = {
		.by = (enum fp_diff_by)o->by,
		.weighted = o->weight >= 0,
		.weight_name = o->weight_name,
		.threshold = o->threshold,
		.limit = o->limit,
	};
	struct fpp_output out;
	size_t regressions = 0;
	int ex = FPP_EXIT_OK, rc;

	if (nargs != 2) {
		fpp_fail("diff needs two inputs: BEFORE AFTER");
		fpp_usage_command(FPP_CMD_DIFF, stderr);
		ex = FPP_EXIT_USAGE;
		goto free_tree;
	}
	for (int i = 0; i < 2 && ex == FPP_EXIT_OK; i++) {
		side[i].table = fp_func_table_new();
		ex = fpp_read_inputs(&side[i], &args[i], 1);
		if (ex == FPP_EXIT_OK && side[i].matched == 0) {
			fpp_fail("%s: no samples to compare", args[i]);
			ex = FPP_EXIT_DATAERR;
		}
	}
	if (ex != FPP_EXIT_OK)
		goto free_sides;

	ex = fpp_output_open(&out, o->output);
	if (ex != FPP_EXIT_OK)
		goto free_sides;
	rc = fp_diff_write(side[0].table, side[1].table, &dopt, out.f,
			   &regressions);
	ex = fpp_output_close(&out, rc);
	if (ex == FPP_EXIT_OK && tree) {
		char subtitle[512], a[200], b[200];

		fpp_format_span(&side[0], a, sizeof(a));
		fpp_format_span(&side[1], b, sizeof(b));
		snprintf(subtitle, sizeof(subtitle), "before: %s; after: %s", a, b);
		fp_flame_tree_finish(tree);
		ex = write_svg(o, tree, o->svg_output, subtitle, true);
	}
	fpp_warn_saturated(o, fp_func_table_saturated(side[0].table) ||
			  fp_func_table_saturated(side[1].table) ||
			  (tree && fp_flame_tree_saturated(tree)));
	if (ex == FPP_EXIT_OK && regressions)
		ex = FPP_EXIT_REGRESSION;

free_sides:
	for (int i = 0; i < 2; i++) {
		fp_func_table_destroy(side[i].table);
		fpp_run_free(&side[i]);
	}
free_tree:
	fp_flame_tree_destroy(tree);
	return ex;
}

