/*
 * flame_profd — decode sample replies and keep per-process history.
 *
 * The sampler remembers, per sampled pid, the previous metric values (for
 * deltas) and the initial call. Deltas:
 *  - gauges (memory, queue length, heap/stack sizes, binary bytes) are
 *    signed: value minus the previous value;
 *  - counters (reductions, minor_gcs) never go negative: when the value
 *    is below the previous one the counter was reset (minor_gcs at every
 *    full sweep) and the delta is the value itself, the count since the
 *    reset;
 *  - the first sample of a process has delta 0 for every metric.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "fp/node.h"
#include "fp/term.h"

struct fp_sampler;

/** Caller owns the result; free with fp_sampler_destroy(). */
struct fp_sampler *
fp_sampler_new(void);

/** NULL is a no-op. */
void
fp_sampler_destroy(struct fp_sampler *sampler);

/** Forget every process (a new connection). */
void
fp_sampler_reset(struct fp_sampler *sampler);

/** Forget the processes not in @pids (they left the selection). */
void
fp_sampler_retain(struct fp_sampler *sampler, const struct fp_pid *pids,
		  size_t n);

/** True when no initial call is known for @pid yet. */
bool
fp_sampler_wants_initial_call(const struct fp_sampler *sampler,
			      struct fp_pid pid);

/**
 * Take a proc_lib:initial_call/1 reply for @pids: processes started by
 * proc_lib get the call they were started with rather than proc_lib's.
 *
 * @return 0 or -EBADMSG.
 */
int
fp_sampler_initial_calls(struct fp_sampler *sampler,
			 const struct fp_reply *reply,
			 const struct fp_pid *pids, size_t n);

/**
 * Decode a fp_node_sample_request() reply for @pids, stamp every sample
 * with @time_us and compute deltas. Processes that died in between are
 * counted, not returned. The reply is a list of one item list per pid
 * ([{Item, Value}] or undefined), or of two per pid, merged into one
 * sample: the items read first, then the rest.
 *
 * @return the number of samples, or -EBADMSG (history unchanged).
 */
int
fp_sampler_decode(struct fp_sampler *sampler, const struct fp_reply *reply,
		  const struct fp_pid *pids, size_t n, uint64_t time_us,
		  unsigned wordsize);

/**
 * The samples of the last successful decode, valid until the next call
 * that changes the sampler. Owned by the sampler.
 */
const struct fp_sample *
fp_sampler_samples(const struct fp_sampler *sampler, size_t *n);

/** What the frame and stack caches saved, since the sampler was made. */
struct fp_cache_stats {
	uint64_t stack_hits, stack_misses;
	uint64_t frame_hits, frame_misses;
	uint64_t clears;
};

/** Forget every cached frame and stack (benchmarks: the cold case). */
void
fp_sampler_drop_caches(struct fp_sampler *sampler);

void
fp_sampler_cache_stats(const struct fp_sampler *sampler,
		       struct fp_cache_stats *stats);

/** Processes found dead in the last decode. */
size_t
fp_sampler_gone(const struct fp_sampler *sampler);
