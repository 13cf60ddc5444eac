/*
 * flame_profd — interactive SVG flame graph of a call tree: hover
 * details, click to zoom, search (our own script inside the SVG, no
 * external resources).
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "fp/flame-tree.h"

struct fp_flamegraph_options {
	const char *title;		/* NULL: "Flame Graph" */
	const char *subtitle;		/* NULL: none */
	const char *unit;		/* what a width counts: "samples",
					 * "reductions_delta", ... */
	bool weighted;			/* widths by weight, else by samples */
	/*
	 * Differential graph: widths from set 1 (AFTER), each frame
	 * coloured by the change of its share from set 0 (BEFORE): red
	 * grew, blue shrank.
	 */
	bool diff;
	bool inverted;			/* icicle: root at the top */
	unsigned width;			/* pixels, 0: 1200 */
	double minwidth;		/* frames narrower are left out, px;
					 * < 0: 0.1 */
};

/**
 * Write the SVG document. Frames are <g class="f"> elements with the
 * frame's offset, value and depth in data-o, data-v and data-d; the
 * script uses them to zoom without rounding.
 *
 * @return 0, or a negative errno on a write error.
 */
int
fp_flamegraph_svg_write(const struct fp_flame_tree *tree,
			const struct fp_flamegraph_options *options, FILE *out);
