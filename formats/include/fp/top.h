/*
 * flame_profd — per-function totals over a stream of samples, and the
 * "top" table of the hottest functions.
 *
 * A function's self count is the samples with it as the leaf frame; its
 * total count is the samples with it anywhere on the stack, counted once
 * per sample however deep the recursion.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fp/term.h"

struct fp_func_table;

struct fp_func_stats {
	const char *name;		/* owned by the table */
	uint64_t self_samples;
	uint64_t total_samples;
	int64_t self_weight;		/* signed sums of the weight */
	int64_t total_weight;
	/* gross sums of the positive and (by magnitude) negative weights:
	 * what a net sum of 0 can hide */
	uint64_t self_growth;
	uint64_t self_release;
	uint64_t total_growth;
	uint64_t total_release;
};

/** Caller owns the result; free with fp_func_table_destroy(). */
struct fp_func_table *
fp_func_table_new(void);

/** NULL is a no-op. */
void
fp_func_table_destroy(struct fp_func_table *table);

/**
 * Count one sample: @frames leaf first (strings are copied), its status
 * and its weight (1 when weighing by samples; may be negative).
 */
void
fp_func_table_add(struct fp_func_table *table, enum fp_status status,
		  const char *const *frames, size_t nframes, int64_t weight);

/**
 * Count a sample in the summary (samples, statuses) but in no row: an
 * idle sample left out of a table of where the node works. The rows'
 * shares are of the samples in rows.
 */
void
fp_func_table_add_unranked(struct fp_func_table *table, enum fp_status status);

/** Samples added, also those with an empty stack or in no row. */
uint64_t
fp_func_table_samples(const struct fp_func_table *table);

/** Samples added with @status. */
uint64_t
fp_func_table_status_samples(const struct fp_func_table *table,
			     enum fp_status status);

/** Sum of |weight| over the samples added: the 100% of weight shares. */
uint64_t
fp_func_table_abs_weight(const struct fp_func_table *table);

/** Signed sum of the weights of the samples added. */
int64_t
fp_func_table_net_weight(const struct fp_func_table *table);

/** Number of distinct functions. */
/**
 * Whether a weight sum (net, absolute, a function's self or total) left
 * the 64-bit range: it is then held at INT64_MAX/INT64_MIN (UINT64_MAX
 * for the absolute sum) instead of wrapping, and the caller warns.
 */
bool
fp_func_table_saturated(const struct fp_func_table *table);

size_t
fp_func_table_count(const struct fp_func_table *table);

/** The @i-th function (0 <= i < count) in insertion order; owned by the table. */
const struct fp_func_stats *
fp_func_table_at(const struct fp_func_table *table, size_t i);

/** The function named @name (written form), or NULL. */
const struct fp_func_stats *
fp_func_table_find(const struct fp_func_table *table, const char *name);

enum fp_top_sort {
	FP_TOP_SELF = 0,	/* self samples */
	FP_TOP_TOTAL,		/* total samples */
	FP_TOP_WEIGHT_SELF,	/* self weight */
	FP_TOP_WEIGHT_TOTAL,	/* total weight */
	FP_TOP_GROSS_GROWTH,	/* self growth: the sum of positive weights */
	FP_TOP_GROSS_RELEASE,	/* self release: negative weights by magnitude */
};

struct fp_top_options {
	size_t limit;			/* rows, 0 for all */
	const char *weight_name;	/* NULL: sample columns only */
	enum fp_top_sort sort;
	bool gross;			/* +W_SELF, -W_SELF columns too */
};

/**
 * Write the table: a summary (samples, weight, statuses), then one row
 * per function, sorted by @options->sort descending, ties by name.
 * Weight shares are of fp_func_table_abs_weight(), so a signed metric
 * shows negative shares for functions that release.
 *
 * @return 0, or a negative errno on a write error.
 */
int
fp_top_write(const struct fp_func_table *table,
	     const struct fp_top_options *options, FILE *out);

enum fp_diff_by {
	FP_DIFF_SELF = 0,
	FP_DIFF_TOTAL,
};

struct fp_diff_options {
	enum fp_diff_by by;
	bool weighted;			/* shares of weight, not of samples */
	const char *weight_name;	/* for the summary line */
	double threshold;		/* percentage points */
	size_t limit;			/* rows, 0 for all */
};

/**
 * Compare the share of every function in @before and @after and write a
 * table of the changes, biggest growth first. A function whose share
 * grew by more than @options->threshold percentage points is marked
 * REGRESSION and counted in @regressions.
 *
 * @return 0, or a negative errno on a write error.
 */
int
fp_diff_write(const struct fp_func_table *before,
	      const struct fp_func_table *after,
	      const struct fp_diff_options *options, FILE *out,
	      size_t *regressions);
