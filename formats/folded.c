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
#include "util-mem.h"

int
fp_folded_write(const struct fp_flame_tree *tree, int set, bool weighted,
		FILE *out)
{
	const struct fp_flame_node *n;
	struct fp_flame_walk walk;
	size_t cap = 4096, *mark, len = 0;
	char *path = xzalloc(cap);
	bool descend = true;
	int rc = 0;

	mark = xzalloc((fp_flame_tree_depth(tree) + 2) * sizeof(*mark));
	fp_flame_walk_start(&walk, fp_flame_tree_root(tree));
	/* the root (no name) is in no line: its children start them */
	while ((n = fp_flame_walk_next(&walk, descend))) {
		size_t name_len = strlen(n->name);
		uint64_t count = weighted ? n->self_weight[set] :
					    n->self_samples[set];

		/* path holds the names of the ancestors of n */
		len = mark[n->depth - 1];
		if (len + name_len + 2 > cap) {
			while (len + name_len + 2 > cap)
				cap *= 2;
			path = xrealloc(path, cap);
		}
		if (n->depth > 1)
			path[len++] = ';';
		memcpy(path + len, n->name, name_len);
		len += name_len;
		mark[n->depth] = len;

		if (count > 0) {
			fwrite(path, 1, len, out);
			fprintf(out, " %" PRIu64 "\n", count);
		}
		descend = n->samples[set] > 0;
	}
	if (fflush(out) != 0 || ferror(out))
		rc = errno ? -errno : -EIO;
	free(mark);
	free(path);
	return rc;
}
