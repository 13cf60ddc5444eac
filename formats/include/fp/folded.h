/*
 * flame_profd — collapsed ("folded") stacks, the input of flamegraph.pl,
 * inferno and speedscope's importer.
 */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "fp/flame-tree.h"

/**
 * One line per node that ends samples of @set with a non-zero count:
 * the names from the root to that node joined with ';', a space and the
 * count (the self weight if @weighted, else the self samples). Depth
 * first in name order, so the output is stable for equal input.
 *
 * @return 0, or a negative errno on a write error.
 */
int
fp_folded_write(const struct fp_flame_tree *tree, int set, bool weighted,
		FILE *out);
