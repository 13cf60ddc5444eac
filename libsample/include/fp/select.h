/*
 * flame_profd — pick the processes to sample: top-N by reductions rate.
 *
 * A selection is one scan (fp_node_scan_request()): the reductions of the
 * current selection and of a window of the node's process table, cut on
 * the node. The ranking is by reductions done since the process was last
 * read (like etop), divided by the time since then: not lifetime totals.
 *
 * Cost is bounded by @scan_max from the first selection on: no scan reads
 * more than scan_max processes and no reply carries more than about
 * scan_max pids. A node with at most scan_max processes is read whole
 * every time. On a bigger one each selection reads the current selection
 * (so hot processes are compared every time) plus a window of the others
 * that moves on by half its size, so every pid in it was read the time
 * before and has a delta: the whole node is covered every
 * 2 * processes / scan_max selections. The window's position is a term
 * the node gave (a position in erlang:processes(), or a process iterator
 * on OTP 28 and later), kept here between selections.
 *
 * So that a busy process is found at once wherever it is in the table,
 * the first selection after a connect (or a reset) is a sweep: the node
 * reads every process and answers with only the (at most 10000, and at
 * most scan_max) that did the most reductions in their lives; the next
 * selection reads them again with the first window and ranks them by
 * delta. A sweep's node time grows with the node (a microsecond or two a
 * process), its reply does not; it stops after the time the caller
 * gives it (struct fp_scan's sweep_ms), and the windows go on from there.
 * The caller may sweep again later (fp_select_sweep_again()), so that a
 * process that turns busy on a big node is not left to the windows.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/node.h"
#include "fp/term.h"

struct fp_select;

/**
 * @param scan_max the most pids read per selection (at least 2)
 * Caller owns the result; free with fp_select_destroy().
 */
struct fp_select *
fp_select_new(size_t scan_max);

/** NULL is a no-op. */
void
fp_select_destroy(struct fp_select *sel);

/**
 * Processes that did fewer than @reductions_per_s reductions a second
 * since they were last read are not picked (0, the default: any that did
 * some). A quiet node's top-N is then not filled with housekeeping that
 * wakes a few times a minute.
 */
void
fp_select_set_floor(struct fp_select *sel, double reductions_per_s);

/** Forget all history (a new connection: pids mean other processes). */
void
fp_select_reset(struct fp_select *sel);

/**
 * Make the next plan a sweep again, history kept: the current selection
 * is read first and ranked as at any selection, and the sweep's
 * candidates are read again and ranked by the plan after it. A process
 * that turned busy after the last sweep is then found wherever the
 * windows are. The windows start again where the sweep stopped.
 */
void
fp_select_sweep_again(struct fp_select *sel);

/**
 * Plan the next scan: @keep first (the current selection, so hot
 * processes are compared every time), and the last sweep's candidates
 * once, then the window, at most @limit pids in all (0 or more than
 * scan_max: scan_max) — a caller that cannot afford a whole scan asks
 * for less. With no history (the first plan, or after
 * fp_select_reset()) the plan is a sweep.
 *
 * @param[out] scan what to send; it points into @sel and @keep, valid
 *             until the next call on @sel
 */
void
fp_select_plan(struct fp_select *sel, const struct fp_pid *keep, size_t nkeep,
	       size_t limit, struct fp_scan *scan);

struct fp_select_result {
	size_t processes;	/* on the node (process_count) */
	size_t scanned;		/* read this time */
	size_t alive;		/* of which still alive */
	bool full;		/* the whole node was read */
	bool sweep;		/* a sweep: scanned is what it walked */
	bool baseline;		/* no history yet: nothing was ranked */
};

/**
 * Take the reply to the last planned scan (after fp_reply_take_time()),
 * rank, and write at most @top pids (highest rate first) to @out. Pids
 * in @exclude are never picked; processes that did no reductions, or
 * fewer a second than the floor (fp_select_set_floor()), are not picked
 * either.
 *
 * @param now_us a monotonic time in microseconds
 * @return the number of pids written, or -EBADMSG (history and window
 *         unchanged), or -EINVAL when there is no plan.
 */
int
fp_select_scan(struct fp_select *sel, const struct fp_reply *reply,
	       uint64_t now_us, const struct fp_pid *exclude, size_t nexclude,
	       size_t top, struct fp_pid *out, struct fp_select_result *result);
