/*
 * flame_profd — pick the processes to sample: top-N by reductions delta.
 *
 * A scan is two requests: erlang:processes(), then the reductions of that
 * pid list (fp_node_reductions_request()). The ranking is by reductions
 * done since the previous scan (like etop), not lifetime totals; a process
 * born since then counts all its reductions. The first scan after
 * fp_select_reset() only sets the baseline.
 */
#pragma once

#include <stddef.h>

#include "fp/node.h"
#include "fp/term.h"

struct fp_select;

/** Caller owns the result; free with fp_select_destroy(). */
struct fp_select *
fp_select_new(void);

/** NULL is a no-op. */
void
fp_select_destroy(struct fp_select *sel);

/** Forget all history (a new connection: pids mean other processes). */
void
fp_select_reset(struct fp_select *sel);

/**
 * Take a processes() reply. The pid list is kept until the matching
 * reductions reply.
 *
 * @return the number of processes, or -EBADMSG.
 */
int
fp_select_processes(struct fp_select *sel, const struct fp_reply *reply);

struct fp_select_result {
	size_t scanned;		/* processes in the scan */
	size_t alive;		/* of which still alive at the reductions call */
	bool baseline;		/* no history yet: nothing was ranked */
};

/**
 * Take the reductions reply for the kept pid list, rank, and write at most
 * @top pids (largest delta first) to @out. Pids in @exclude are never
 * picked; processes with a zero delta are not picked either.
 *
 * @return the number of pids written, or -EBADMSG (the history is then
 *         unchanged), or -EINVAL when no pid list is kept.
 */
int
fp_select_reductions(struct fp_select *sel, const struct fp_reply *reply,
		     const struct fp_pid *exclude, size_t nexclude,
		     size_t top, struct fp_pid *out,
		     struct fp_select_result *result);
