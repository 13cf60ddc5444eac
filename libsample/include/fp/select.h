/*
 * flame_profd — pick the processes to sample: top-N by reductions rate.
 *
 * A selection reads the reductions of a planned list of pids in one
 * request (fp_node_reductions_request()). The ranking is by reductions
 * done since the process was last read (like etop), divided by the time
 * since then: not lifetime totals.
 *
 * Cost is bounded by @scan_max: on a node with more processes, each
 * selection reads the current selection plus a window of the others. The
 * window moves on by half its size each time, so every pid in it was read
 * the time before and has a delta; the whole node is covered every
 * 2 * processes / scan_max selections, while a hot process, once picked,
 * is read every time. The full pid list (erlang:processes()) is refreshed
 * when the window has gone round, and at least every FP_SELECT_REFRESH
 * selections. The first two selections after fp_select_new() or
 * fp_select_reset() (the baseline and the first ranking) read every
 * process, once, so that hot processes are found at once.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/node.h"
#include "fp/term.h"

#define FP_SELECT_REFRESH 4

struct fp_select;

/**
 * @param scan_max the most pids read per selection (at least 1)
 * Caller owns the result; free with fp_select_destroy().
 */
struct fp_select *
fp_select_new(size_t scan_max);

/** NULL is a no-op. */
void
fp_select_destroy(struct fp_select *sel);

/** Forget all history (a new connection: pids mean other processes). */
void
fp_select_reset(struct fp_select *sel);

/** True when the next selection should start with erlang:processes(). */
bool
fp_select_needs_processes(const struct fp_select *sel);

/**
 * Take a processes() reply as the node's pid list.
 *
 * @return the number of processes, or -EBADMSG (the old list is kept).
 */
int
fp_select_processes(struct fp_select *sel, const struct fp_reply *reply);

/**
 * Plan the pids to read next: @keep first (the current selection, so hot
 * processes are compared every time), then the window.
 *
 * @param[out] pids owned by @sel, valid until the next call on it
 * @return the number of pids planned (0 before any processes() reply)
 */
size_t
fp_select_plan(struct fp_select *sel, const struct fp_pid *keep, size_t nkeep,
	       const struct fp_pid **pids);

struct fp_select_result {
	size_t processes;	/* in the node's pid list */
	size_t scanned;		/* read this time */
	size_t alive;		/* of which still alive */
	bool baseline;		/* no history yet: nothing was ranked */
};

/**
 * Take the reductions reply for the last plan, rank, and write at most
 * @top pids (highest rate first) to @out. Pids in @exclude are never
 * picked; processes that did no reductions are not picked either.
 *
 * @param now_us a monotonic time in microseconds
 * @return the number of pids written, or -EBADMSG (history unchanged), or
 *         -EINVAL when there is no plan.
 */
int
fp_select_reductions(struct fp_select *sel, const struct fp_reply *reply,
		     uint64_t now_us, const struct fp_pid *exclude,
		     size_t nexclude, size_t top, struct fp_pid *out,
		     struct fp_select_result *result);
