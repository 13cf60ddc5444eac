/*
 * flame_profd — sub-second offset heat map in SVG, like Flamescope's:
 * one column per second, one row per fraction of a second, the colour
 * of a cell the samples (or the summed metric) in that slice of time.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct fp_heatmap;

struct fp_heatmap_options {
	const char *title;		/* NULL: "Heat Map" */
	const char *subtitle;		/* NULL: none */
	const char *unit;		/* "samples", "memory_delta", ... */
	/* what a click on two cells suggests, e.g. "flame_prof svg FILE";
	 * NULL: "flame_prof svg" */
	const char *command;
	/* the names of the sources (fp_heatmap_add_from()), as shown; with
	 * more than one, each cell's title says which sources its sum
	 * comes from, the largest first */
	const char *const *sources;
	size_t nsources;
	/* lines of text under the map (a table: monospace), or none */
	const char *const *notes;
	size_t nnotes;
};

/**
 * @rows: rows per second (1..1000; 50 makes 20 ms cells).
 * Caller owns the result; free with fp_heatmap_destroy().
 */
struct fp_heatmap *
fp_heatmap_new(unsigned rows);

/** NULL is a no-op. */
void
fp_heatmap_destroy(struct fp_heatmap *map);

/** Add @value (1 for a sample; signed for a metric) at @time_us. */
void
fp_heatmap_add(struct fp_heatmap *map, uint64_t time_us, int64_t value);

/**
 * fp_heatmap_add() of source number @source (a node of several, say;
 * fp_heatmap_add() is source 0): the cells sum every source, and their
 * titles name the sources (fp_heatmap_options.sources).
 */
void
fp_heatmap_add_from(struct fp_heatmap *map, uint64_t time_us, int64_t value,
		    unsigned source);

/**
 * Widen the time axis to @time_us without adding to a cell: a sample the
 * caller leaves out of the map (an idle one) still stands in the span,
 * as in Flamescope, whose heat map spans every sample of the file.
 */
void
fp_heatmap_cover(struct fp_heatmap *map, uint64_t time_us);

/**
 * Write the SVG. Columns run from the first to the last second holding
 * a sample (added or covered); empty cells are left blank. Positive
 * sums are shaded white to red, negative ones white to blue, both
 * against the largest magnitude. Cells are <rect class="c"> with data-c
 * (column), data-r (row) and data-v (sum). A cell's sum that leaves the
 * 64-bit range is held at INT64_MAX/INT64_MIN; fp_heatmap_saturated()
 * says so afterwards.
 *
 * @return 0, or a negative errno on a write error.
 */
int
fp_heatmap_write(struct fp_heatmap *map,
		 const struct fp_heatmap_options *options, FILE *out);

/** Whether the last fp_heatmap_write() held a cell's sum at a bound. */
bool
fp_heatmap_saturated(const struct fp_heatmap *map);
