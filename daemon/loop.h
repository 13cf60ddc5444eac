/*
 * flame_profd — the event loop: a timerfd ticks the sources, a signalfd
 * turns signals into events, and each source's descriptor delivers its
 * input. The loop only waits and dispatches.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "source.h"

#define FPD_TICK_US 20000u	/* one heat-map row */

struct fpd_loop;

/**
 * @duration_us: stop after this long (0: until stopped); @user: the user
 * the daemon runs as (--user), or NULL, for the advice on a log file it
 * cannot reopen.
 * Signals are blocked from here on. The caller frees *@out with
 * fpd_loop_destroy().
 * @return 0, or a negative errno (logged with fpd_fatal()) when the timer
 *         or the signals cannot be set up.
 */
int
fpd_loop_new(uint64_t duration_us, const char *user, struct fpd_loop **out);

/** NULL is a no-op; the sources added are not the loop's to destroy. */
void
fpd_loop_destroy(struct fpd_loop *loop);

/** The stop state the loop's sources share (owned by the loop). */
struct fpd_run_state *
fpd_loop_run_state(struct fpd_loop *loop);

/** Add a source (not owned). */
void
fpd_loop_add(struct fpd_loop *loop, struct fpd_source *src);

/** Run until stopped; the exit code so far (struct fpd_run_state). */
int
fpd_loop_run(struct fpd_loop *loop);

/** Whether a --duration run stopped because its time was up. */
bool
fpd_loop_duration_over(const struct fpd_loop *loop);

/**
 * For the waits a source makes outside the loop (fp_node_set_give_up()):
 * reads the signals as the loop does, and is true once a stop asked
 * STOP_GRACE_US ago has not been honoured. @data is the loop.
 */
bool
fpd_loop_give_up(void *data);
