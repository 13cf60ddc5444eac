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

/**
 * Which dictionary keys replies carry (fp_node_set_extras(), the same
 * @extras): each sample's keys follow their order. Values are rendered
 * as text once per process while they stay the same: an atom, a number
 * or a printable UTF-8 binary as it is, anything else as Erlang prints
 * it, cut at FP_TAG_MAX bytes.
 */
void
fp_sampler_set_extras(struct fp_sampler *sampler,
		      const struct fp_extras *extras);

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
 * True when @pid was started by proc_lib (its own initial call, from a
 * sample, is proc_lib:init_p), proc_lib's answer is not known, it was
 * never asked in this process's life, and its memory at its last sample
 * is at most @max_memory bytes (-1: any). Asking copies the process's
 * dictionary on a node that cannot read one key of it
 * (fp_node_reads_dict_keys()): the bound keeps that copy small.
 */
bool
fp_sampler_wants_proc_lib_call(const struct fp_sampler *sampler,
			       struct fp_pid pid, int64_t max_memory);

/** @pids are being asked (fp_node_initial_call_request()): never again
 * in their lives, even if the answer is lost. */
void
fp_sampler_initial_calls_asked(struct fp_sampler *sampler,
			       const struct fp_pid *pids, size_t n);

/**
 * Take a fp_node_initial_call_request() reply for @pids (after
 * fp_reply_take_time()): processes started by proc_lib get the call
 * they were started with rather than proc_lib's, kept while they live.
 * A process whose answer is no such call (its '$initial_call' was set to
 * something else) keeps its own initial call; the others are not
 * affected.
 *
 * @return 0 or -EBADMSG.
 */
int
fp_sampler_initial_calls(struct fp_sampler *sampler,
			 const struct fp_reply *reply,
			 const struct fp_pid *pids, size_t n);

/**
 * Decode a fp_node_sample_request() reply for @pids, asked as @asks said
 * (NULL: every pid fully; a reply of one item list per pid is then taken
 * as one read each), stamp every sample with @time_us and compute deltas.
 * Processes that died in between are counted, not returned.
 *
 * A probed pid (FP_ASK_PROBE) gives a sample only if the process has not
 * run since its last sample: its reductions are where that sample left
 * them (plus the one reduction answering it cost, if it answered a
 * signal), and its queue length, heap and stack sizes and minor
 * collections are unchanged. Its stack, memory, total heap size and
 * binary bytes, which only running or receiving changes, are then those
 * of the last sample; the rest is fresh. A probed process that has run,
 * or whose last stack is no longer cached, gives no sample but is listed
 * by fp_sampler_stale(), to be asked in full.
 *
 * @return the number of samples, or -EBADMSG (history unchanged).
 */
int
fp_sampler_decode(struct fp_sampler *sampler, const struct fp_reply *reply,
		  const struct fp_pid *pids, const enum fp_ask *asks, size_t n,
		  uint64_t time_us, unsigned wordsize);

/**
 * The probed pids of the last decode that need a full sample, as indexes
 * into its @pids, in order. Owned by the sampler, valid as
 * fp_sampler_samples().
 */
size_t
fp_sampler_stale(const struct fp_sampler *sampler, const size_t **idx);

/** How many samples of the last decode were probes of idle processes. */
size_t
fp_sampler_reused(const struct fp_sampler *sampler);

/**
 * How many samples of the last decode were asked in full of a process
 * that was running or in a run queue (status running, runnable or
 * garbage_collecting): the dearest to take on a busy node.
 */
size_t
fp_sampler_running(const struct fp_sampler *sampler);

/**
 * True when the last sample of @pid found that it had not run since the
 * one before, and a probe of it could be answered (its stack is cached):
 * a process idle a moment ago is likely idle now.
 */
bool
fp_sampler_idle(const struct fp_sampler *sampler, struct fp_pid pid);

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
