/*
 * flame_profd — collapsed stacks writer.
 *
 * Frame names never hold ';' (the perf-script writer escapes it), so a
 * line splits back into the same frames; the status and the other group
 * frames are plain words.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fp/folded.h"
#include "util-buf.h"
#include "util-mem.h"

int
fp_folded_write(const struct fp_flame_tree *tree, int set, bool weighted,
		FILE *out)
{
	const struct fp_flame_node *n;
	struct fp_flame_walk walk;
	struct fp_text path = { 0 };
	size_t *mark;
	bool descend = true;
	int rc = 0;

	mark = xzalloc((fp_flame_tree_depth(tree) + 2) * sizeof(*mark));
	fp_flame_walk_start(&walk, fp_flame_tree_root(tree));
	/* the root (no name) is in no line: its children start them */
	while ((n = fp_flame_walk_next(&walk, descend))) {
		uint64_t count = weighted ? n->self_weight[set] :
					    n->self_samples[set];

		/* path holds the names of the ancestors of n */
		path.len = mark[n->depth - 1];
		if (n->depth > 1)
			fp_text_putc(&path, ';');
		fp_text_puts(&path, n->name);
		mark[n->depth] = path.len;

		if (count > 0) {
			fwrite(path.buf, 1, path.len, out);
			fprintf(out, " %" PRIu64 "\n", count);
		}
		descend = n->samples[set] > 0;
	}
	if (fflush(out) != 0 || ferror(out))
		rc = errno ? -errno : -EIO;
	free(mark);
	fp_text_free(&path);
	return rc;
}
