/*
 * flame_profd — the cost budget and the circuit breaker.
 *
 * Cost is the work flame_profd's requests do on the node, as a share of
 * the interval times the node's schedulers. Each heavy request runs inside
 * timer:tc/3 there; on a busy node most of that wall time is the rex
 * worker waiting for sampled processes to be scheduled out (they answer
 * process_info then), so the cost model estimates the work as the cheapest time
 * per process seen in the interval times the processes asked for
 * (cost.c).
 *
 * Over budget, the sample rate comes down first (it is what costs), then
 * the top-N; with room to spare (below half the budget) they go back up,
 * top-N first, a step per check (once a second, cost.c); a change of top-N
 * waits for the selection that uses it before the next.
 *
 * The breaker stops all requests when the node is in trouble (a request
 * timed out, or its run queues are long), and probes it with one cheap
 * request after a pause that doubles while trouble lasts.
 */
#include <math.h>
#include <stdio.h>

#include "budget.h"

#define COOLDOWN_MIN_US 2000000u
#define COOLDOWN_MAX_US 60000000u

void
fpd_budget_init(struct fpd_budget *b, double max_pct, double rate,
		unsigned top)
{
	b->max_pct = max_pct;
	b->rate_req = b->rate = rate;
	b->top_req = b->top = top;
	b->top_pending = false;
	b->burst = false;
	b->min_rate = rate < 1.0 ? rate : 1.0;
}

bool
fpd_budget_update(struct fpd_budget *b, double cost_pct, char *what,
		  size_t size)
{
	if (b->max_pct <= 0)
		return false;

	if (cost_pct > b->max_pct) {
		double f = b->max_pct / cost_pct * 0.9;

		if (b->rate > b->min_rate) {
			double r = fmax(b->min_rate, b->rate * f);

			snprintf(what, size, "cost %.2f%% over budget %.2f%%: rate %g -> %g/s",
				 cost_pct, b->max_pct, b->rate, r);
			b->rate = r;
			return true;
		}
		if (b->top > 1 && !b->top_pending) {
			unsigned t = (unsigned)fmax(1.0, floor(b->top * f));

			if (t == b->top)
				t = b->top - 1;
			snprintf(what, size, "cost %.2f%% over budget %.2f%%: top %u -> %u",
				 cost_pct, b->max_pct, b->top, t);
			b->top = t;
			b->top_pending = true;
			return true;
		}
		return false;
	}
	if (cost_pct < b->max_pct / 2) {
		if (b->top < b->top_req) {
			unsigned t = b->top * 2 > b->top_req ? b->top_req : b->top * 2;

			if (t == b->top)
				t++;
			if (b->top_pending)
				return false;
			snprintf(what, size, "cost %.2f%% under budget %.2f%%: top %u -> %u",
				 cost_pct, b->max_pct, b->top, t);
			b->top = t;
			b->top_pending = true;
			return true;
		}
		if (b->rate < b->rate_req) {
			double r = fmin(b->rate_req, b->rate * 1.5);

			snprintf(what, size, "cost %.2f%% under budget %.2f%%: rate %g -> %g/s",
				 cost_pct, b->max_pct, b->rate, r);
			b->rate = r;
			return true;
		}
	}
	return false;
}

bool
fpd_budget_burst(struct fpd_budget *b, double rate, unsigned top)
{
	bool rate_whole = b->rate >= b->rate_req, top_whole = b->top >= b->top_req;
	unsigned old_top = b->top;

	if (b->burst)
		return false;
	b->burst = true;
	b->rate_normal = b->rate_req;
	b->top_normal = b->top_req;
	if (rate > b->rate_req)
		b->rate_req = rate;
	if (top > b->top_req)
		b->top_req = top;
	if (rate_whole)
		b->rate = b->rate_req;
	if (top_whole && !b->top_pending)
		b->top = b->top_req;
	if (b->top != old_top)
		b->top_pending = true;
	return b->top != old_top;
}

bool
fpd_budget_burst_end(struct fpd_budget *b)
{
	unsigned old_top = b->top;

	if (!b->burst)
		return false;
	b->burst = false;
	b->rate_req = b->rate_normal;
	b->top_req = b->top_normal;
	if (b->rate > b->rate_req)
		b->rate = b->rate_req;
	if (b->top > b->top_req)
		b->top = b->top_req;
	if (b->top != old_top)
		b->top_pending = true;
	return b->top != old_top;
}

void
fpd_budget_top_applied(struct fpd_budget *b)
{
	b->top_pending = false;
}

void
fpd_breaker_trip(struct fpd_breaker *br, uint64_t now_us)
{
	br->cooldown_us = br->cooldown_us ? br->cooldown_us * 2 : COOLDOWN_MIN_US;
	if (br->cooldown_us > COOLDOWN_MAX_US)
		br->cooldown_us = COOLDOWN_MAX_US;
	br->open = true;
	br->probing = false;
	br->open_until_us = now_us + br->cooldown_us;
	br->trips++;
}

void
fpd_breaker_close(struct fpd_breaker *br, uint64_t now_us)
{
	br->open = false;
	br->probing = false;
	br->closed_at_us = now_us;
}

void
fpd_breaker_calm(struct fpd_breaker *br, uint64_t now_us, uint64_t calm_us)
{
	/* Quiet for long enough: the next trouble starts from a short pause. */
	if (!br->open && br->cooldown_us && now_us - br->closed_at_us >= calm_us)
		br->cooldown_us = 0;
}
