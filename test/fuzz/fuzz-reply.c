/*
 * flame_profd — fuzz target: everything the node can send us.
 *
 * Input: one message as it arrives (version byte, then a term). It goes
 * through the same gate as real traffic (node_term_check) and, if it
 * passes, through every decoder: the reply envelope, a sample batch, a
 * selection, a pid list and an initial-call list.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp/sample.h"
#include "fp/select.h"
#include "node-private.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fp_pid pids[4096];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fp_reply reply = { 0 };
	struct fp_select_result res;
	struct fp_pid out[8];
	const struct fp_pid *plan;
	char *buf;
	int index = 1, count = 0, type, n;

	if (size < 1 || data[0] != 131 || size > (1u << 20))
		return 0;
	/* an exact-size copy, so reads past the end are caught */
	buf = malloc(size);
	memcpy(buf, data, size);
	if (node_term_check(buf, size, 1) < 0)
		goto out;

	node_parse_reply(buf, &reply);

	reply = (struct fp_reply){ .buf = buf, .index = 1 };
	if (ei_get_type(buf, &index, &type, &count) < 0)
		goto out;
	n = (type == ERL_LIST_EXT && count > 0) ?
	    (count < 4096 ? count : 4096) : 0;
	for (int i = 0; i < n; i++)
		pids[i] = (struct fp_pid){ (uint32_t)i, 0 };

	{
		struct fp_sampler *s = fp_sampler_new();
		size_t ns;

		fp_sampler_decode(s, &reply, pids, (size_t)n, 1, 8);
		fp_sampler_samples(s, &ns);
		/* twice: deltas against the first */
		fp_sampler_decode(s, &reply, pids, (size_t)n, 2, 8);
		fp_sampler_initial_calls(s, &reply, pids, (size_t)n);
		fp_sampler_destroy(s);
	}
	{
		struct fp_select *sel = fp_select_new(64);

		if (fp_select_processes(sel, &reply) >= 0) {
			fp_select_plan(sel, pids, n < 8 ? (size_t)n : 8, &plan);
			fp_select_reductions(sel, &reply, 1, NULL, 0, 8, out, &res);
		}
		fp_select_destroy(sel);
	}
	fp_node_decode_pids(&reply, out, 8);
out:
	free(buf);
	return 0;
}
