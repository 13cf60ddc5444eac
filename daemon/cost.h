/*
 * flame_profd — the cost model: what flame_profd's requests cost the node,
 * as a share of its schedulers, fed to the budget and reported each
 * interval. It owns the budget and the circuit breaker (budget.c) it
 * drives.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "budget.h"
#include "options.h"

/* The budget looks at the last second of sampling (and the last
 * selection, spread over its interval), whatever --every is: a node is
 * never sampled over budget for more than about a second. */
#define FPD_BUDGET_WINDOW_US 1000000u

/* What flame_profd's requests cost the node, over some span of time. */
struct fpd_work {
	uint64_t scan_us;		/* selection scans, timer:tc */
	uint64_t scan_bytes;		/* ... their replies */
	uint64_t other_us;		/* initial-call reads, timer:tc */
	uint64_t sampled, scanned;	/* processes asked for */
	uint64_t running;		/* ... in full, found in a run queue */
	uint64_t probed;		/* ... with a probe only */
	uint64_t requests;		/* sample requests answered */
	double min_sample_us;		/* cheapest per process; <0: none */
};

struct fpd_cost {
	struct fpd_budget budget;
	struct fpd_breaker breaker;
	/* the node the cost is counted on */
	enum fp_request_path path;
	unsigned schedulers;		/* 1 while not connected */
	bool local;			/* on this host: our CPU is its */
	struct fpd_work interval;	/* in the interval (report.c) */
	struct fpd_work window;		/* sampling in the budget window */
	uint64_t window_mono;		/* the budget window's start */
	uint64_t window_cpu_us;		/* ... and our CPU time then */
	double select_us;		/* work of the last whole selection */
	double sweep_us;		/* ... of the last sweep; 0: none yet */
	double scan_pid_us;		/* ... per pid read; 0: none yet */
};

/** The cost model and budget of @o's options, the window starting at
 * @now_mono (our CPU time @cpu_us then). */
void
fpd_cost_init(struct fpd_cost *c, const struct fpd_options *o,
	      uint64_t now_mono, uint64_t cpu_us);

/** The node the cost is counted on: its request path, schedulers, and
 * whether it runs on this host; @schedulers 0: not connected. */
void
fpd_cost_set_node(struct fpd_cost *c, enum fp_request_path path,
		  unsigned schedulers, bool local);

/** Zero @w's counts, for a new interval or window. */
void
fpd_work_reset(struct fpd_work *w);

/**
 * A sample batch that took @us on the node (0: not timed): @full
 * processes asked in full, @running of them found in a run queue, @probes
 * probed; counted in the interval and in the budget window.
 */
void
fpd_cost_samples(struct fpd_cost *c, uint64_t us, size_t full,
		 size_t running, size_t probes);

/** A selection's scan: @us on the node, @n pids read, a reply of @bytes. */
void
fpd_cost_selection(struct fpd_cost *c, uint64_t us, size_t n, size_t bytes);

/** A sweep (the first selection of a connection, or a later one): @us
 * on the node, @n processes read, a reply of @bytes; counted in the
 * interval, and in the pace of the sweeps after it
 * (fpd_cost_sweep_period()). */
void
fpd_cost_sweep(struct fpd_cost *c, uint64_t us, size_t n, size_t bytes);

/**
 * How long after a sweep the next may start, in microseconds: @o's
 * --sweep-every, or longer where the last sweep's work, spread over that
 * time, would take more than a quarter of the budget (--max-overhead).
 */
uint64_t
fpd_cost_sweep_period(const struct fpd_cost *c, const struct fpd_options *o);

/** Other timed node work (initial-call reads), like a scan's. */
void
fpd_cost_other(struct fpd_cost *c, uint64_t us);

/** The node work in @w, in µs (measured, never below the model's floors). */
double
fpd_cost_work_us(const struct fpd_cost *c, const struct fpd_work *w);

/** @us of node work over @secs, in percent of the node's schedulers. */
double
fpd_cost_pct(const struct fpd_cost *c, double us, double secs);

/** @cpu_us of our own CPU over @secs, as fpd_cost_pct() when the node
 * runs on this host (0 elsewhere). */
double
fpd_cost_self_pct(const struct fpd_cost *c, uint64_t cpu_us, double secs);

/** A new budget window from @now, our CPU time reading @cpu_us. */
void
fpd_cost_window_start(struct fpd_cost *c, uint64_t now, uint64_t cpu_us);

/**
 * Once the budget window is over: the sampling of the last window plus
 * the last selection (spread over @every_us) against the budget, unless
 * @paused (breaker open, stopping) or nothing was sampled. Returns true
 * with @what set when the budget changed the rate or top-N.
 */
bool
fpd_cost_check(struct fpd_cost *c, uint64_t now, uint64_t every_us,
	       bool paused, char *what, size_t size);

/**
 * The most pids the next scan may read (0: --scan-max): see cost.c.
 * @nset the current selection, @scans_done on this connection; *skip
 * when this selection cannot be afforded at all; @skips counts those in
 * a row. A @ranking selection (the one after a sweep, which ranks its
 * candidates) is cut but never skipped.
 */
size_t
fpd_cost_scan_limit(struct fpd_cost *c, const struct fpd_options *o,
		    size_t nset, unsigned scans_done, bool ranking,
		    unsigned *skips, bool *skip);
