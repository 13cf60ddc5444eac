/*
 * flame_profd — fuzz target: everything the node can send us.
 *
 * Input: one message as it arrives (version byte, then a term). It goes
 * through the envelope parser as real traffic does, and its bytes, taken
 * as a bare result, through every decoder: a sample batch, a selection, a
 * pid list, an initial-call list, a timer:tc pair, a helper batch and its
 * rows, a --trace hand-over (its events into the stacks). Unchecked first (sample
 * batches arrive unchecked, so every decoder must check what it reads),
 * then, if they pass the arrival check, checked.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp/sample.h"
#include "fp/select.h"
#include "fp/trace.h"
#include "conn.h"
#include "etf.h"
#include "node-private.h"
#include "trace-agg.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fp_pid pids[4096];
static enum fp_ask asks[4096];

/* erlang:nodes()'s names, each read whole (as fleet.c copies them) */
static void
count_peer(const char *name, void *data)
{
	size_t *peers = data;

	*peers += strlen(name) > 0;
}

static void
count_stack(const struct fp_trace_stack *st, void *data)
{
	size_t *frames = data;

	*frames += st->nframes + (size_t)(st->units > 0);
}

static void
decode_all(struct fp_reply *reply, int n)
{
	size_t peers = 0;
	struct fp_select_result res;
	struct fp_pid out[8];
	bool found[8];
	struct fp_reply timed = *reply;
	uint64_t us;

	{
		struct fp_sampler *s = fp_sampler_new();
		size_t ns;

		fp_sampler_decode(s, reply, pids, NULL, (size_t)n, 1, 8);
		fp_sampler_samples(s, &ns);
		/* twice: deltas and the caches against the first */
		fp_sampler_decode(s, reply, pids, NULL, (size_t)n, 2, 8);
		/* the same list as two item lists per pid, as the daemon asks */
		if (n > 0 && n % 2 == 0) {
			fp_sampler_decode(s, reply, pids, NULL, (size_t)n / 2, 3, 8);
			fp_sampler_decode(s, reply, pids, NULL, (size_t)n / 2, 4, 8);
		}
		/* probes, alone and between full samples, against the
		 * history the decodes above left */
		if (n > 0) {
			size_t k = 0, lists = 0;

			for (int i = 0; i < n; i++)
				asks[i] = FP_ASK_PROBE;
			fp_sampler_decode(s, reply, pids, asks, (size_t)n, 5, 8);
			while (lists < (size_t)n) {
				asks[k] = k % 2 || lists + 2 > (size_t)n ?
					  FP_ASK_PROBE : FP_ASK_FULL;
				lists += asks[k] == FP_ASK_PROBE ? 1 : 2;
				k++;
			}
			fp_sampler_decode(s, reply, pids, asks, k, 6, 8);
		}
		fp_sampler_initial_calls(s, reply, pids, (size_t)n);
		fp_sampler_destroy(s);
	}
	{
		struct fp_select *sel = fp_select_new(64);
		struct fp_scan plan;

		/* twice: the second against the first's history and cursor */
		for (int i = 0; i < 2; i++) {
			fp_select_plan(sel, pids, n > 0 && n < 8 ? (size_t)n : 8, 0,
				       &plan);
			fp_select_scan(sel, reply, 1 + (uint64_t)i, NULL, 0, 8,
				       out, &res);
		}
		fp_select_destroy(sel);
	}
	{
		struct fp_sampler *s = fp_sampler_new();
		struct fp_batch b;
		struct fp_batch_row row;

		if (fp_node_batch_open(reply, &b) == 0) {
			while (fp_node_batch_row(&b, &row, pids, asks, 4096) > 0)
				fp_sampler_decode(s, &row.results, pids, asks,
						  row.n, row.time_us, 8);
		}
		fp_sampler_destroy(s);
	}
	{
		struct fp_trace *t = fp_trace_new();
		struct fp_trace_result tres;

		/* not started: refused; then twice into one aggregate, the
		 * second hand-over over the first's stacks and remainders */
		fp_trace_decode(t, reply, &tres, count_stack, &peers);
		trace_attach(t, 4, 100);
		fp_trace_decode(t, reply, &tres, count_stack, &peers);
		fp_trace_decode(t, reply, &tres, count_stack, &peers);
		fp_trace_destroy(t);
	}
	fp_node_decode_whereis(reply, out, found, 8);
	fp_node_decode_peers(reply, count_peer, &peers);
	if (fp_reply_take_time(&timed, &us) == 0) {
		struct fp_sampler *s = fp_sampler_new();

		fp_sampler_decode(s, &timed, pids, NULL, 1, 1, 8);
		fp_sampler_destroy(s);
		fp_node_decode_peers(&timed, count_peer, &peers);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fp_reply reply = { 0 };
	char *buf;
	int n = 0;

	if (size < 1 || data[0] != 131 || size > (1u << 20))
		return 0;
	/* an exact-size copy, so reads past the end are caught */
	buf = malloc(size);
	memcpy(buf, data, size);

	/* the envelope, as every message from a node */
	if (node_parse_reply(buf, size, &reply) == 1)
		decode_all(&reply, 1);

	/* the bytes as a bare result: unchecked, as a sample batch arrives
	 * (every decoder must check what it reads), and, if it passes the
	 * arrival check, checked */
	if (size >= 6 && (unsigned char)buf[1] == ERL_LIST_EXT) {
		uint32_t c = ((uint32_t)(unsigned char)buf[2] << 24) |
			     ((uint32_t)(unsigned char)buf[3] << 16) |
			     ((uint32_t)(unsigned char)buf[4] << 8) |
			     (uint32_t)(unsigned char)buf[5];

		n = c < 4096 ? (int)c : 4096;
	}
	for (int i = 0; i < n; i++)
		pids[i] = (struct fp_pid){ (uint32_t)i, 0 };
	reply = (struct fp_reply){ .buf = buf, .len = size, .index = 1 };
	decode_all(&reply, n);
	if (etf_term_check(buf, size, 1) == 0) {
		reply.checked = true;
		decode_all(&reply, n);
	}
	free(buf);
	return 0;
}
