/*
 * flame_profd — differential summary of two profiles.
 *
 * Shares, not counts, are compared: BEFORE and AFTER rarely hold the
 * same number of samples (another duration, another rate, another top-N
 * selection), and a CI gate must not fail because a run was longer.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp/top.h"
#include "util-mem.h"

struct row {
	const char *name;
	double before, after;	/* percent */
};

static double
pct_of(const struct fp_func_table *t, const struct fp_func_stats *s,
       const struct fp_diff_options *o)
{
	double part, whole;

	if (!s)
		return 0.0;
	if (o->weighted) {
		part = (double)(o->by == FP_DIFF_TOTAL ? s->total_weight :
							 s->self_weight);
		whole = (double)fp_func_table_abs_weight(t);
	} else {
		part = (double)(o->by == FP_DIFF_TOTAL ? s->total_samples :
							 s->self_samples);
		whole = (double)fp_func_table_samples(t);
	}
	return whole > 0 ? 100.0 * part / whole : 0.0;
}

static int
by_delta(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	double dx = x->after - x->before, dy = y->after - y->before;

	if (dx != dy)
		return dx > dy ? -1 : 1;
	return strcmp(x->name, y->name);
}

static void
collect(const struct fp_func_table *from, const struct fp_func_table *other,
	bool from_is_after, const struct fp_diff_options *o, struct row *rows,
	size_t *n)
{
	for (size_t i = 0; i < fp_func_table_count(from); i++) {
		const struct fp_func_stats *s = fp_func_table_at(from, i);
		const struct fp_func_stats *t = fp_func_table_find(other, s->name);

		/* functions present on both sides are collected from AFTER */
		if (!from_is_after && t)
			continue;
		rows[*n].name = s->name;
		if (from_is_after) {
			rows[*n].after = pct_of(from, s, o);
			rows[*n].before = pct_of(other, t, o);
		} else {
			rows[*n].before = pct_of(from, s, o);
			rows[*n].after = 0.0;
		}
		(*n)++;
	}
}

int
fp_diff_write(const struct fp_func_table *before,
	      const struct fp_func_table *after,
	      const struct fp_diff_options *o, FILE *out, size_t *regressions)
{
	size_t cap = fp_func_table_count(before) + fp_func_table_count(after);
	struct row *rows = xzalloc((cap ? cap : 1) * sizeof(*rows));
	size_t n = 0, shown = 0;
	int rc = 0;

	*regressions = 0;
	collect(after, before, true, o, rows, &n);
	collect(before, after, false, o, rows, &n);
	qsort(rows, n, sizeof(*rows), by_delta);

	fprintf(out, "before: %" PRIu64 " samples\n", fp_func_table_samples(before));
	fprintf(out, "after: %" PRIu64 " samples\n", fp_func_table_samples(after));
	fprintf(out, "share: %s %s\n", o->by == FP_DIFF_TOTAL ? "total" : "self",
		o->weighted ? o->weight_name : "samples");
	fprintf(out, "threshold: +%.2f percentage points\n\n", o->threshold);
	fprintf(out, "%8s %8s %8s  %-10s  %s\n", "BEFORE%", "AFTER%", "DELTA",
		"VERDICT", "FUNCTION");
	for (size_t i = 0; i < n; i++) {
		double d = rows[i].after - rows[i].before;
		bool regression = d > o->threshold;

		if (regression)
			(*regressions)++;
		/* below display precision: not a change worth a row */
		if (fabs(d) < 0.005)
			continue;
		if (o->limit && shown >= o->limit && !regression)
			continue;
		shown++;
		fprintf(out, "%7.2f%% %7.2f%% %+8.2f  %-10s  %s\n",
			rows[i].before, rows[i].after, d,
			regression ? "REGRESSION" : (d > 0 ? "grew" : "shrank"),
			rows[i].name);
	}
	fprintf(out, "\n%zu function%s over the threshold\n", *regressions,
		*regressions == 1 ? "" : "s");
	free(rows);
	if (fflush(out) != 0 || ferror(out))
		rc = errno ? -errno : -EIO;
	return rc;
}
