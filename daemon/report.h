/*
 * flame_profd — the interval line: what a node session did over the last
 * --every, logged and written into the file as a note.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cost.h"
#include "recorder.h"

#define FPD_REPORT_RTT_MAX 4096		/* round trips kept per interval */

struct fp_sampler;

struct fpd_report {
	struct fpd_recorder *rec;	/* not owned */
	uint64_t interval_mono;		/* the interval's start */
	uint64_t interval_cpu_us;	/* ... and our CPU time then */
	uint64_t skipped, gone;
	struct fpd_recorder_stats recorded;	/* the recorder's, at its start */
	uint64_t requests;		/* sample requests sent */
	uint64_t probes, reused;	/* probes sent; samples they gave */
	uint64_t target_us;		/* node-side time of our requests */
	uint64_t scans_cut;		/* selections the budget shrank */
	uint64_t scans_skipped;		/* ... or could not afford at all */
	uint64_t dropped_before;	/* fpd_output_dropped() at its start */
	uint32_t rtt_us[FPD_REPORT_RTT_MAX];
	size_t nrtt;
};

/** An interval starting at @now_mono (our CPU time @cpu_us then), of the
 * samples @rec (not owned) records. */
void
fpd_report_init(struct fpd_report *r, struct fpd_recorder *rec,
		uint64_t now_mono, uint64_t cpu_us);

/** Samples that were due and not taken: the interval line and the file. */
void
fpd_report_skipped(struct fpd_report *r, uint64_t n);

/** A sample request's round trip (or a helper row's age), @us. */
void
fpd_report_rtt(struct fpd_report *r, uint64_t us);

/**
 * The line for the interval that ends at @now (when @connected and the
 * interval is long enough to say something: returns true then), and a
 * new interval. @nset processes selected, @pinned of them --pid and
 * --name targets.
 */
bool
fpd_report_interval(struct fpd_report *r, struct fpd_cost *c,
		    struct fp_sampler *sampler,
		    bool connected, size_t nset, size_t pinned, uint64_t now);
