/*
 * flame_profd — unit tests: the cost budget and the circuit breaker.
 */
#include <string.h>

#include "fp-test.h"
#include "../daemon/budget.h"
#include "../daemon/cost.h"

START_TEST(budget_off)
{
	struct fpd_budget b;
	char what[128];

	fpd_budget_init(&b, 0, 10, 100);
	fp_assert(!fpd_budget_update(&b, 90, what, sizeof(what)));
	fp_assert(b.rate == 10 && b.top == 100);
}
END_TEST

/* Over budget: rate first, down to the floor, then top-N; back up, top
 * first, then rate, never past what was asked for. */
START_TEST(budget_steps)
{
	struct fpd_budget b;
	char what[128];
	int steps = 0;

	fpd_budget_init(&b, 2.0, 10, 100);
	fp_assert(fpd_budget_update(&b, 4.0, what, sizeof(what)));
	fp_assert(strstr(what, "rate 10 -> 4.5") != NULL);
	fp_assert(b.top == 100);
	while (b.rate > b.min_rate && steps++ < 20)
		fpd_budget_update(&b, 4.0, what, sizeof(what));
	fp_assert(b.rate == 1.0);
	fp_assert(b.top == 100);
	fp_assert(fpd_budget_update(&b, 4.0, what, sizeof(what)));
	fp_assert_int_eq(b.top, 45);
	/* no selection has used top 45 yet: the cost still shows 100 */
	fp_assert(!fpd_budget_update(&b, 4.0, what, sizeof(what)));
	fp_assert(!fpd_budget_update(&b, 0.5, what, sizeof(what)));
	fp_assert_int_eq(b.top, 45);
	fpd_budget_top_applied(&b);
	/* within budget: nothing moves */
	fp_assert(!fpd_budget_update(&b, 1.5, what, sizeof(what)));
	/* room: top back first, then the rate */
	fp_assert(fpd_budget_update(&b, 0.5, what, sizeof(what)));
	fp_assert_int_eq(b.top, 90);
	fp_assert(!fpd_budget_update(&b, 0.5, what, sizeof(what)));
	fpd_budget_top_applied(&b);
	fp_assert(fpd_budget_update(&b, 0.5, what, sizeof(what)));
	fp_assert_int_eq(b.top, 100);
	fpd_budget_top_applied(&b);
	fp_assert(b.rate == 1.0);
	steps = 0;
	while (fpd_budget_update(&b, 0.1, what, sizeof(what)) && steps++ < 20)
		;
	fp_assert(b.rate == 10);
	fp_assert_int_eq(b.top, 100);
	/* at the floor with top 1 there is nothing left to give */
	fpd_budget_init(&b, 1.0, 0.5, 1);
	fp_assert(!fpd_budget_update(&b, 50, what, sizeof(what)));
}
END_TEST

/* A burst raises the request; the budget's cuts win, and its end puts
 * the request back with the effective values no higher. */
START_TEST(budget_burst)
{
	struct fpd_budget b;
	char what[160];

	fpd_budget_init(&b, 5.0, 10, 100);
	fp_assert(fpd_budget_burst(&b, 100, 200));
	fp_assert(b.rate == 100 && b.top == 200 && b.top_pending);
	fp_assert(!fpd_budget_burst(&b, 100, 200));	/* one at a time */
	fpd_budget_top_applied(&b);
	/* over budget: the burst's rate is cut like any */
	fp_assert(fpd_budget_update(&b, 20.0, what, sizeof(what)));
	fp_assert(b.rate < 100);
	fp_assert(fpd_budget_burst_end(&b));
	fp_assert(b.rate_req == 10 && b.top_req == 100);
	fp_assert(b.rate <= 10 && b.top == 100);
	fp_assert(!fpd_budget_burst_end(&b));

	/* a budget that has cut the rate keeps it cut: the burst raises
	 * only the request, and the room below half the budget brings it up
	 * a step at a time */
	fpd_budget_init(&b, 5.0, 10, 100);
	fp_assert(fpd_budget_update(&b, 10.0, what, sizeof(what)));
	fp_assert(b.rate < 10);
	fp_assert(!fpd_budget_burst(&b, 100, 0));
	fp_assert(b.rate < 10 && b.rate_req == 100 && b.top == 100);
	fp_assert(fpd_budget_update(&b, 1.0, what, sizeof(what)));
	fp_assert(b.rate < 15);
	fp_assert(!fpd_budget_burst_end(&b));
	fp_assert(b.rate_req == 10 && b.rate <= 10);

	/* no budget: the burst's values at once */
	fpd_budget_init(&b, 0, 10, 100);
	fp_assert(!fpd_budget_burst(&b, 50, 0));
	fp_assert(b.rate == 50 && b.top == 100);
	fpd_budget_burst_end(&b);
	fp_assert(b.rate == 10);
}
END_TEST

START_TEST(breaker)
{
	struct fpd_breaker br = { 0 };
	uint64_t t = 1000000;

	fpd_breaker_trip(&br, t);
	fp_assert(br.open);
	ck_assert_uint_eq(br.open_until_us - t, 2000000);
	fpd_breaker_trip(&br, t);
	ck_assert_uint_eq(br.cooldown_us, 4000000);
	for (int i = 0; i < 10; i++)
		fpd_breaker_trip(&br, t);
	ck_assert_uint_eq(br.cooldown_us, 60000000);
	fpd_breaker_close(&br, t);
	fp_assert(!br.open);
	/* not calm long enough: the pause stays long */
	fpd_breaker_calm(&br, t + 1000, 30000000);
	ck_assert_uint_eq(br.cooldown_us, 60000000);
	fpd_breaker_calm(&br, t + 31000000, 30000000);
	ck_assert_uint_eq(br.cooldown_us, 0);
	ck_assert_uint_eq(br.trips, 12);
}
END_TEST

/* A sweep's work is the interval's, not each selection's: the budget's
 * per-selection cost and the next scan's limit keep the last window's. */
START_TEST(cost_sweep)
{
	struct fpd_options o = { .max_overhead = 5.0, .rate = 10, .top = 100,
				 .every_us = 5000000, .scan_max = 50000 };
	struct fpd_cost c;
	double select_us, pid_us;

	fpd_cost_init(&c, &o, 0, 0);
	fpd_cost_selection(&c, 30000, 50000, 2500000);
	select_us = c.select_us;
	pid_us = c.scan_pid_us;
	fp_assert(select_us > 0 && pid_us > 0);
	fpd_cost_sweep(&c, 1400000, 1000000, 490000);
	fp_assert(c.select_us == select_us && c.scan_pid_us == pid_us);
	fp_assert_int_eq(c.interval.scan_us, 30000 + 1400000);
	fp_assert_int_eq(c.interval.scanned, 50000 + 1000000);
	fp_assert_int_eq(c.interval.scan_bytes, 2500000 + 490000);
}
END_TEST

/* The sweeps after the first come every --sweep-every, or as often as a
 * quarter of the budget pays for the last one's work. */
START_TEST(cost_sweep_period)
{
	struct fpd_options o = { .max_overhead = 5.0, .rate = 10, .top = 100,
				 .every_us = 5000000, .scan_max = 50000,
				 .sweep_every_us = 30000000 };
	struct fpd_cost c;

	fpd_cost_init(&c, &o, 0, 0);
	fpd_cost_set_node(&c, FP_REQUEST_REX, 2, false);
	/* none yet */
	fp_assert_int_eq(fpd_cost_sweep_period(&c, &o), 30000000);
	/* 1M processes in 0.4 s: counted at 0.65 µs each, 26 s at 2.5% */
	fpd_cost_sweep(&c, 400000, 1000000, 490000);
	fp_assert_int_eq(fpd_cost_sweep_period(&c, &o), 30000000);
	/* 1.4 s: 56 s */
	fpd_cost_sweep(&c, 1400000, 1000000, 490000);
	fp_assert_int_ge(fpd_cost_sweep_period(&c, &o), 56000000);
	fp_assert(fpd_cost_sweep_period(&c, &o) <= 57000000);
	/* eight schedulers: 14 s, so --sweep-every */
	fpd_cost_set_node(&c, FP_REQUEST_REX, 8, false);
	fp_assert_int_eq(fpd_cost_sweep_period(&c, &o), 30000000);
	/* no budget: --sweep-every */
	fpd_cost_set_node(&c, FP_REQUEST_REX, 2, false);
	c.budget.max_pct = 0;
	fp_assert_int_eq(fpd_cost_sweep_period(&c, &o), 30000000);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("budget");
	TCase *tc = tcase_create("budget");

	tcase_add_test(tc, budget_off);
	tcase_add_test(tc, budget_steps);
	tcase_add_test(tc, budget_burst);
	tcase_add_test(tc, breaker);
	tcase_add_test(tc, cost_sweep);
	tcase_add_test(tc, cost_sweep_period);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
