/*
 * flame_profd — the cost budget (--max-overhead) and the circuit
 * breaker (budget.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fpd_budget {
	double max_pct;		/* 0: no budget */
	double rate_req, rate;	/* requested and effective samples/s */
	unsigned top_req, top;	/* requested and effective top-N */
	double min_rate;
	bool top_pending;	/* top changed; no selection has used it yet */
	bool burst;		/* fpd_budget_burst() until its end */
	double rate_normal;	/* ... and the request before it */
	unsigned top_normal;
};

/** A budget of @max_pct percent of the node's schedulers (0: none) for
 * sampling at @rate samples/s the top @top processes. */
void
fpd_budget_init(struct fpd_budget *b, double max_pct, double rate,
		unsigned top);

/**
 * Take the measured cost (percent of the node's schedulers) and adjust the
 * effective rate or top-N one step. Returns true, with @what saying what
 * changed and why, when something did. A change of top-N waits for
 * fpd_budget_top_applied() before the next one: until a selection has
 * used it, the cost still shows the old set.
 */
bool
fpd_budget_update(struct fpd_budget *b, double cost_pct, char *what,
		  size_t size);

/** A selection has ranked with the effective top-N. */
void
fpd_budget_top_applied(struct fpd_budget *b);

/**
 * A burst (a capture's after-window): the request becomes at least @rate
 * and @top (0: unchanged) until fpd_budget_burst_end(). Where the budget
 * has cut the rate or top-N below the request, it stays cut and comes up
 * only as fpd_budget_update() allows (the budget's cuts win); otherwise
 * the effective values take the burst's at once, and an update over
 * budget cuts them as any.
 * @return whether the effective top-N changed (a selection should use it).
 */
bool
fpd_budget_burst(struct fpd_budget *b, double rate, unsigned top);

/** The burst is over: the request is what it was, and the effective
 * values no more than it. @return whether the effective top-N changed. */
bool
fpd_budget_burst_end(struct fpd_budget *b);

struct fpd_breaker {
	bool open;		/* no requests but the probe */
	bool probing;		/* the probe is in flight */
	uint64_t open_until_us;	/* when to probe */
	uint64_t cooldown_us;	/* current pause; doubles while in trouble */
	uint64_t closed_at_us;
	unsigned trips;
};

/** Open (or keep open) the breaker at @now_us: no requests but the
 * probe for the cooldown, which doubles while the trouble lasts. */
void
fpd_breaker_trip(struct fpd_breaker *br, uint64_t now_us);

/** The probe found the node well: sampling resumes. */
void
fpd_breaker_close(struct fpd_breaker *br, uint64_t now_us);

/** Closed for @calm_us without trouble: the next cooldown starts short
 * again. */
void
fpd_breaker_calm(struct fpd_breaker *br, uint64_t now_us, uint64_t calm_us);
