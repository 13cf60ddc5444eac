/*
 * flame_profd — unit tests: the selection scan: reductions deltas,
 * floors, windows, limits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "fp/sample.h"
#include "fp/select.h"
#include "node-private.h"
#include "sample-fixtures.h"
#include "util-mem.h"

/* The node the scans ask: pids 100 .. 100 + node_n - 1, in table order. */
static size_t node_n;

static void
send_processes(struct fp_select *sel, size_t n)
{
	(void)sel;
	node_n = n;
}

/* The reply's outside: {Us, {value, Value, Bindings}}, after which
 * fp_reply_take_time() leaves the reply at {value, ...}. */
static void
enc_scan_head(ei_x_buff *x, const char *tag, size_t count)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "value");
	ei_x_encode_tuple_header(x, strcmp(tag, "sweep") ? 5 : 6);
	ei_x_encode_atom(x, tag);
	ei_x_encode_ulong(x, count);
}

static void
enc_reds(ei_x_buff *x, long v)
{
	if (v < 0)
		ei_x_encode_atom(x, "undefined");
	else
		enc_kv_long(x, "reductions", v);
}

/* The node's sweep keeps the @len that did the most reductions (more
 * than none), the lower pid first among equals. */
static size_t
sweep_candidates(const long *reds, size_t len, unsigned *cands)
{
	size_t n = 0;

	for (size_t i = 0; i < node_n; i++) {
		size_t at = n;

		if (reds[i] <= 0)
			continue;
		while (at > 0 && reds[cands[at - 1] - 100] < reds[i])
			at--;
		if (at >= len)
			continue;
		if (n < len)
			n++;
		memmove(cands + at + 1, cands + at, (n - 1 - at) * sizeof(*cands));
		cands[at] = (unsigned)(100 + i);
	}
	return n;
}

/*
 * One selection: plan, and answer as the node's scan would (the window
 * from the cursor, an integer position as lists:sublist/3 takes it; or a
 * sweep), with reds[pid.num - 100] (-1: dead). Returns the pids read.
 */
static size_t
scan_limited(struct fp_select *sel, const long *reds, uint64_t now,
	     const struct fp_pid *keep, size_t nkeep, size_t limit, size_t top,
	     const struct fp_pid *exclude, size_t nexclude, struct fp_pid *out,
	     int *picked, struct fp_select_result *res)
{
	struct fp_scan plan;
	struct fp_reply r;
	ei_x_buff x;
	size_t start = 1, nwin, nread;
	long pos;

	fp_select_plan(sel, keep, nkeep, limit, &plan);
	fp_assert(plan.len >= 1 && plan.step >= 1 && plan.step <= plan.len);
	if (plan.cursor_len) {
		int index = 0;

		if (ei_decode_long(plan.cursor, &index, &pos) == 0)
			start = (size_t)pos;
	}
	ei_x_new_with_version(&x);
	if (node_n <= plan.max) {
		enc_scan_head(&x, "full", node_n);
		ei_x_encode_list_header(&x, (long)node_n);
		for (size_t i = 0; i < node_n; i++)
			enc_pid(&x, (unsigned)(100 + i));
		ei_x_encode_empty_list(&x);
		ei_x_encode_list_header(&x, (long)node_n);
		for (size_t i = 0; i < node_n; i++)
			enc_reds(&x, reds[i]);
		ei_x_encode_empty_list(&x);
		ei_x_encode_atom(&x, "start");
		nread = node_n;
	} else if (plan.sweep) {
		unsigned *cands = xzalloc(plan.len * sizeof(*cands));
		size_t nc = sweep_candidates(reds, plan.len, cands);

		/* as the node sends them: the least first */
		enc_scan_head(&x, "sweep", node_n);
		if (nc)
			ei_x_encode_list_header(&x, (long)nc);
		for (size_t i = nc; i-- > 0;)
			enc_pid(&x, cands[i]);
		ei_x_encode_empty_list(&x);
		if (plan.nkeep + nc)
			ei_x_encode_list_header(&x, (long)(plan.nkeep + nc));
		for (size_t i = 0; i < plan.nkeep; i++)
			enc_reds(&x, reds[plan.keep[i].num - 100]);
		for (size_t i = nc; i-- > 0;)
			enc_reds(&x, reds[cands[i] - 100]);
		ei_x_encode_empty_list(&x);
		ei_x_encode_atom(&x, "start");
		ei_x_encode_ulong(&x, node_n);
		nread = node_n + plan.nkeep;
		free(cands);
	} else {
		nwin = start - 1 + plan.len > node_n ? node_n - (start - 1) : plan.len;
		enc_scan_head(&x, "window", node_n);
		if (nwin)
			ei_x_encode_list_header(&x, (long)nwin);
		for (size_t i = 0; i < nwin; i++)
			enc_pid(&x, (unsigned)(100 + start - 1 + i));
		ei_x_encode_empty_list(&x);
		if (plan.nkeep + nwin)
			ei_x_encode_list_header(&x, (long)(plan.nkeep + nwin));
		for (size_t i = 0; i < plan.nkeep; i++)
			enc_reds(&x, reds[plan.keep[i].num - 100]);
		for (size_t i = 0; i < nwin; i++)
			enc_reds(&x, reds[start - 1 + i]);
		ei_x_encode_empty_list(&x);
		if (start + plan.step > node_n)
			ei_x_encode_atom(&x, "start");
		else
			ei_x_encode_long(&x, (long)(start + plan.step));
		nread = plan.nkeep + nwin;
	}
	ei_x_encode_empty_list(&x);	/* the bindings */
	r = reply_of(&x);
	*picked = fp_select_scan(sel, &r, now, exclude, nexclude, top, out, res);
	ei_x_free(&x);
	return nread;
}

static size_t
scan(struct fp_select *sel, const long *reds, uint64_t now,
     const struct fp_pid *keep, size_t nkeep, size_t top,
     const struct fp_pid *exclude, size_t nexclude, struct fp_pid *out,
     int *picked, struct fp_select_result *res)
{
	return scan_limited(sel, reds, now, keep, nkeep, 0, top, exclude,
			    nexclude, out, picked, res);
}

START_TEST(select_by_delta)
{
	struct fp_select *sel = fp_select_new(10000);
	/* lifetime totals favour 100 and 101; recent work favours 103, 104 */
	long base[6] = { 9000000, 8000000, 10, 10, 10, 10 };
	long next[6] = { 9000001, 8000000, 10, 5010, 9010, -1 };
	long more[6] = { 9000001, 8000000, 10, 5011, 9020, -1 };
	struct fp_pid exclude = { 104, 0 }, out[6];
	struct fp_select_result res;
	int n;

	send_processes(sel, 6);
	scan(sel, base, 1000000, NULL, 0, 3, NULL, 0, out, &n, &res);
	fp_assert(res.baseline);
	fp_assert_int_eq(n, 0);

	scan(sel, next, 2000000, NULL, 0, 3, NULL, 0, out, &n, &res);
	fp_assert(!res.baseline);
	fp_assert_int_eq(res.processes, 6);
	fp_assert_int_eq(res.scanned, 6);
	fp_assert_int_eq(res.alive, 5);
	fp_assert_int_eq(n, 3);
	fp_assert_int_eq(out[0].num, 104);	/* delta 9000 */
	fp_assert_int_eq(out[1].num, 103);	/* delta 5000 */
	fp_assert_int_eq(out[2].num, 100);	/* delta 1 */

	/* zero deltas are never picked; exclusions never */
	scan(sel, next, 3000000, NULL, 0, 3, &exclude, 1, out, &n, &res);
	fp_assert_int_eq(n, 0);
	scan(sel, more, 4000000, NULL, 0, 3, &exclude, 1, out, &n, &res);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].num, 103);
	fp_select_destroy(sel);
}
END_TEST

/* Below the floor, a process is not picked: a rate, not a delta. */
START_TEST(select_floor)
{
	struct fp_select *sel = fp_select_new(10000);
	long base[3] = { 10, 10, 10 };
	long next[3] = { 60, 510, 100010 };	/* over 2 s: 25, 250, 50000/s */
	struct fp_pid out[3];
	struct fp_select_result res;
	int n;

	fp_select_set_floor(sel, 100);
	send_processes(sel, 3);
	scan(sel, base, 1000000, NULL, 0, 3, NULL, 0, out, &n, &res);
	scan(sel, next, 3000000, NULL, 0, 3, NULL, 0, out, &n, &res);
	fp_assert_int_eq(n, 2);
	fp_assert_int_eq(out[0].num, 102);
	fp_assert_int_eq(out[1].num, 101);
	fp_select_destroy(sel);
}
END_TEST

/* A process born since the last full scan counts all its reductions. */
START_TEST(select_newborn)
{
	struct fp_select *sel = fp_select_new(10000);
	long a[3] = { 10, 10, -1 };
	long b[3] = { 20, 10, 500 };
	struct fp_pid out[3];
	struct fp_select_result res;
	int n;

	send_processes(sel, 2);
	scan(sel, a, 1000000, NULL, 0, 3, NULL, 0, out, &n, &res);
	send_processes(sel, 3);
	scan(sel, b, 2000000, NULL, 0, 3, NULL, 0, out, &n, &res);
	fp_assert_int_eq(n, 2);
	fp_assert_int_eq(out[0].num, 102);
	fp_assert_int_eq(out[1].num, 100);
	fp_select_destroy(sel);
}
END_TEST

START_TEST(select_many)
{
	struct fp_select *sel = fp_select_new(100000);
	enum { N = 20000, TOP = 100 };
	static long a[N], b[N];
	static struct fp_pid out[TOP];
	struct fp_select_result res;
	int n;

	for (int i = 0; i < N; i++) {
		a[i] = 1000;
		b[i] = 1000 + (i * 7919) % N;	/* a permutation of deltas */
	}
	send_processes(sel, N);
	scan(sel, a, 1000000, NULL, 0, TOP, NULL, 0, out, &n, &res);
	scan(sel, b, 2000000, NULL, 0, TOP, NULL, 0, out, &n, &res);
	fp_assert_int_eq(n, TOP);
	for (int i = 0; i < TOP; i++) {
		long delta = b[out[i].num - 100] - 1000;

		fp_assert_int_eq(delta, N - 1 - i);
	}
	fp_select_destroy(sel);
}
END_TEST

/* Bounded scan: after the first selection's sweep, a window of scan_max
 * moving by half; a process that turns hot after the sweep is found
 * within 2 * N / scan_max selections and kept once found. */
START_TEST(select_window)
{
	enum { N = 1000, MAX = 100, HOT = 777 };
	struct fp_select *sel = fp_select_new(MAX);
	static long reds[N];
	struct fp_pid out[5], keep[5];
	struct fp_select_result res;
	size_t nkeep = 0, found_at = 0;
	int n;

	send_processes(sel, N);
	for (size_t round = 1; round <= 2 * N / MAX + 2; round++) {
		size_t planned;

		for (int i = 0; i < N; i++)
			reds[i] += i == HOT && round > 1 ? 1000 : 1;
		planned = scan(sel, reds, round * 1000000, keep, nkeep, 5,
			       NULL, 0, out, &n, &res);
		fp_assert(!res.full);
		fp_assert_int_eq(res.processes, N);
		if (round == 1) {
			/* the sweep reads every process, sends back at most
			 * scan_max */
			fp_assert(res.sweep && res.baseline);
			fp_assert_int_eq(res.scanned, N);
			fp_assert_int_eq(planned, N);
			continue;
		}
		/* then never more than scan_max (less where the window
		 * meets the end of the table) */
		fp_assert(!res.sweep);
		fp_assert(planned <= MAX && planned > nkeep);
		fp_assert_int_eq(res.scanned, planned);
		if (n > 0 && out[0].num == 100 + HOT && !found_at)
			found_at = round;
		if (found_at) {
			fp_assert_int_eq(out[0].num, 100 + HOT);
		}
		memcpy(keep, out, (size_t)n * sizeof(*out));
		nkeep = (size_t)n;
	}
	/* The sweep, then the windows as they would be without it, one
	 * selection later: the first window is read twice; every process
	 * does a reduction a round, so five are kept and the window moves
	 * by 48: the 18th and 19th selections' windows (starting at 723 and
	 * 771) hold it. */
	fp_assert_int_eq(found_at, 19);
	fp_assert(found_at <= 2 * N / MAX);
	fp_select_destroy(sel);
}
END_TEST

/* A caller's limit shrinks the scan (and the sweep's reply); the first
 * window is read twice, so what is hot in it is found at its second
 * reading; a kept pid that is in the window too is read once; the whole
 * node is read when it fits. */
START_TEST(select_limit)
{
	enum { N = 50 };
	struct fp_select *sel = fp_select_new(1000);
	static long reds[N];
	struct fp_pid out[3], keep[1] = { { 101, 0 } };
	struct fp_select_result res;
	int n;

	send_processes(sel, N);
	/* a sweep of an idle node: nothing did a reduction, no candidate */
	fp_assert_int_eq(scan_limited(sel, reds, 1000000, NULL, 0, 10, 3,
				      NULL, 0, out, &n, &res), N);
	fp_assert(!res.full && res.sweep);
	fp_assert(res.baseline);
	fp_assert_int_eq(res.alive, 0);
	fp_assert_int_eq(scan_limited(sel, reds, 2000000, NULL, 0, 10, 3,
				      NULL, 0, out, &n, &res), 10);
	fp_assert(!res.baseline && !res.sweep);
	reds[1] = 500;
	reds[3] = 100;
	fp_assert_int_eq(scan_limited(sel, reds, 3000000, keep, 1, 10, 3,
				      NULL, 0, out, &n, &res), 10);
	/* the same window (100..108) and 101 kept: read once */
	fp_assert_int_eq(res.alive, 9);
	fp_assert_int_eq(n, 2);
	fp_assert_int_eq(out[0].num, 101);
	fp_assert_int_eq(out[1].num, 103);
	/* no limit: the whole node, and the rates go on */
	reds[1] = 1500;
	fp_assert_int_eq(scan(sel, reds, 4000000, keep, 1, 3, NULL, 0, out, &n,
			      &res), N);
	fp_assert(res.full);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].num, 101);
	fp_select_destroy(sel);
}
END_TEST

/* The sweep finds the busy processes wherever they are in the table (the
 * first, the middle, the last): its reply holds at most scan_max (and
 * at most 10000) candidates, read again at the next selection, which
 * ranks them; the windows then start at the beginning. */
START_TEST(select_sweep)
{
	enum { N = 200000, MAX = 500, BUSY = 4 };
	static const size_t at[] = { 0, N / 2, N - BUSY };
	struct fp_select *sel = fp_select_new(MAX);
	static long reds[N];
	struct fp_pid out[BUSY];
	struct fp_select_result res;
	struct fp_scan plan;
	size_t first = at[_i];
	int n;

	for (size_t i = 0; i < N; i++)
		reds[i] = i >= first && i < first + BUSY ? 100000 : 5 + i % 3;
	send_processes(sel, N);
	fp_assert_int_eq(scan(sel, reds, 1000000, NULL, 0, BUSY, NULL, 0, out,
			      &n, &res), N);
	fp_assert(res.sweep && res.baseline && !res.full);
	fp_assert_int_eq(res.scanned, N);
	fp_assert_int_eq(res.alive, MAX);
	fp_assert_int_eq(n, 0);
	for (size_t i = 0; i < N; i++)
		reds[i] += i >= first && i < first + BUSY ? 400000 + 1000 * (long)i : 1;
	/* the candidates, then the first window: scan_max in all */
	fp_assert_int_eq(scan(sel, reds, 2000000, NULL, 0, BUSY, NULL, 0, out,
			      &n, &res), MAX);
	fp_assert(!res.sweep && !res.baseline);
	fp_assert_int_eq(n, BUSY);
	for (int i = 0; i < BUSY; i++)
		fp_assert_int_eq(out[i].num, 100 + first + BUSY - 1 - (size_t)i);
	/* the first window is read again; no candidate is left */
	fp_select_plan(sel, out, BUSY, 0, &plan);
	fp_assert(!plan.sweep);
	fp_assert_int_eq(plan.nkeep, BUSY);
	fp_assert_int_eq(plan.cursor_len, 0);
	fp_select_destroy(sel);
}
END_TEST

/* A process that turns busy after the sweep, far from the windows, is
 * found by a sweep again: the current selection is read first and ranked
 * as at any selection, the new candidates at the next one. */
START_TEST(select_sweep_again)
{
	enum { N = 200000, MAX = 500 };
	struct fp_select *sel = fp_select_new(MAX);
	static long reds[N];
	struct fp_pid out[2], keep[1];
	struct fp_select_result res;
	struct fp_scan plan;
	int n;

	for (size_t i = 0; i < N; i++)
		reds[i] = i == 10 ? 1000 : 5;
	send_processes(sel, N);
	scan(sel, reds, 1000000, NULL, 0, 1, NULL, 0, out, &n, &res);
	fp_assert(res.sweep && res.baseline);
	reds[10] += 5000;
	scan(sel, reds, 2000000, NULL, 0, 1, NULL, 0, out, &n, &res);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].num, 110);
	keep[0] = out[0];
	/* the last process turns busy; a window does not reach it */
	reds[N - 1] += 1000000;
	reds[10] += 5000;
	scan(sel, reds, 3000000, keep, 1, 2, NULL, 0, out, &n, &res);
	fp_assert(!res.sweep);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].num, 110);

	fp_select_sweep_again(sel);
	fp_select_plan(sel, keep, 1, 0, &plan);
	fp_assert(plan.sweep);
	fp_assert_int_eq(plan.nkeep, 1);
	reds[10] += 5000;
	reds[N - 1] += 1000000;
	/* the pending plan is replaced: the sweep is planned again */
	fp_select_sweep_again(sel);
	fp_assert_int_eq(scan(sel, reds, 4000000, keep, 1, 2, NULL, 0, out, &n,
			      &res), N + 1);
	fp_assert(res.sweep && !res.baseline && !res.full);
	fp_assert_int_eq(n, 1);		/* the selection, ranked */
	fp_assert_int_eq(out[0].num, 110);
	reds[10] += 5000;
	reds[N - 1] += 1000000;
	/* cut short by the budget: the busiest candidates are read */
	scan_limited(sel, reds, 5000000, keep, 1, 3, 2, NULL, 0, out, &n, &res);
	fp_assert(!res.sweep);
	fp_assert_int_eq(n, 2);
	fp_assert_int_eq(out[0].num, 100 + N - 1);
	fp_assert_int_eq(out[1].num, 110);
	/* once: the plan after is a window again */
	fp_select_plan(sel, out, 2, 0, &plan);
	fp_assert(!plan.sweep);
	fp_select_destroy(sel);
}
END_TEST

/* A window reply of @n pids from position @from (reductions 1 each, no
 * keep read), the next window at @next. */
static int
window_reply(struct fp_select *sel, const struct fp_scan *plan, size_t count,
	     long from, size_t n, long next, uint64_t now, struct fp_pid *out,
	     struct fp_select_result *res)
{
	struct fp_reply r;
	ei_x_buff x;
	int rc;

	ei_x_new_with_version(&x);
	enc_scan_head(&x, "window", count);
	ei_x_encode_list_header(&x, (long)n);
	for (size_t i = 0; i < n; i++)
		enc_pid(&x, (unsigned)(100 + from - 1 + (long)i));
	ei_x_encode_empty_list(&x);
	ei_x_encode_list_header(&x, (long)(plan->nkeep + n));
	for (size_t i = 0; i < plan->nkeep + n; i++)
		enc_kv_long(&x, "reductions", 1);
	ei_x_encode_empty_list(&x);
	ei_x_encode_long(&x, next);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	rc = fp_select_scan(sel, &r, now, NULL, 0, 1, out, res);
	ei_x_free(&x);
	return rc;
}

/* A sweep that stopped early (its time ran out) says where: the windows
 * go on from there, and what it read is what it walked. A sweep's reply
 * is taken only for a sweep. */
START_TEST(select_sweep_partial)
{
	struct fp_select *sel = fp_select_new(100);
	struct fp_select_result res;
	struct fp_scan plan;
	struct fp_pid out[1];
	struct fp_reply r;
	ei_x_buff x;
	long pos = 0;
	int index = 0;

	fp_select_plan(sel, NULL, 0, 0, &plan);
	fp_assert(plan.sweep);
	ei_x_new_with_version(&x);
	enc_scan_head(&x, "sweep", 1000);
	ei_x_encode_list_header(&x, 1);
	enc_pid(&x, 107);
	ei_x_encode_empty_list(&x);
	ei_x_encode_list_header(&x, 1);
	enc_kv_long(&x, "reductions", 9000);
	ei_x_encode_empty_list(&x);
	ei_x_encode_long(&x, 401);	/* Next: where it stopped */
	ei_x_encode_long(&x, 400);	/* Read */
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_select_scan(sel, &r, 1000000, NULL, 0, 1, out, &res), 0);
	fp_assert(res.sweep && res.baseline);
	fp_assert_int_eq(res.scanned, 400);
	fp_assert_int_eq(res.processes, 1000);
	ei_x_free(&x);

	/* the candidate, then the window from the sweep's end */
	fp_select_plan(sel, NULL, 0, 0, &plan);
	fp_assert(!plan.sweep);
	fp_assert_int_eq(plan.nkeep, 1);
	fp_assert_int_eq(plan.keep[0].num, 107);
	fp_assert(plan.cursor_len > 0);
	fp_assert_int_eq(ei_decode_long(plan.cursor, &index, &pos), 0);
	fp_assert_int_eq(pos, 401);
	/* that first window is read twice, as the first of a round is: the
	 * pids past its end have no window before them */
	fp_assert_int_eq(window_reply(sel, &plan, 1000, 401, 50, 426, 2000000,
				      out, &res), 0);
	fp_select_plan(sel, NULL, 0, 0, &plan);
	index = 0;
	fp_assert_int_eq(ei_decode_long(plan.cursor, &index, &pos), 0);
	fp_assert_int_eq(pos, 401);
	fp_assert_int_eq(window_reply(sel, &plan, 1000, 401, 50, 426, 3000000,
				      out, &res), 0);
	fp_select_plan(sel, NULL, 0, 0, &plan);
	index = 0;
	fp_assert_int_eq(ei_decode_long(plan.cursor, &index, &pos), 0);
	fp_assert_int_eq(pos, 426);
	fp_assert_int_eq(window_reply(sel, &plan, 1000, 426, 50, 451, 4000000,
				      out, &res), 0);
	fp_select_plan(sel, NULL, 0, 0, &plan);
	index = 0;
	fp_assert_int_eq(ei_decode_long(plan.cursor, &index, &pos), 0);
	fp_assert_int_eq(pos, 451);

	/* a sweep's reply to a window's plan is refused */
	ei_x_new_with_version(&x);
	enc_scan_head(&x, "sweep", 1000);
	ei_x_encode_empty_list(&x);
	ei_x_encode_list_header(&x, 1);
	enc_kv_long(&x, "reductions", 9001);
	ei_x_encode_empty_list(&x);
	ei_x_encode_atom(&x, "start");
	ei_x_encode_long(&x, 1000);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_select_scan(sel, &r, 2000000, NULL, 0, 1, out, &res),
			 -EBADMSG);
	ei_x_free(&x);
	fp_select_destroy(sel);
}
END_TEST

START_TEST(select_bad)
{
	struct fp_select *sel = fp_select_new(10);
	struct fp_select_result res;
	struct fp_scan plan;
	struct fp_pid out[1];
	struct fp_reply r;
	ei_x_buff x;
	long reds[3] = { 1, 2, 3 };
	int n;

	ei_x_new_with_version(&x);
	ei_x_encode_atom(&x, "nope");
	r = reply_of(&x);
	/* no plan */
	fp_assert_int_eq(fp_select_scan(sel, &r, 1, NULL, 0, 1, out, &res), -EINVAL);
	/* no {value, ...} */
	fp_select_plan(sel, NULL, 0, 0, &plan);
	fp_assert_int_eq(fp_select_scan(sel, &r, 1, NULL, 0, 1, out, &res), -EBADMSG);
	ei_x_free(&x);

	/* reductions for fewer pids than read are refused, and the window
	 * stays where it was */
	fp_select_plan(sel, NULL, 0, 0, &plan);
	ei_x_new_with_version(&x);
	enc_scan_head(&x, "full", 3);
	ei_x_encode_list_header(&x, 3);
	for (unsigned i = 0; i < 3; i++)
		enc_pid(&x, 100 + i);
	ei_x_encode_empty_list(&x);
	ei_x_encode_list_header(&x, 1);
	enc_kv_long(&x, "reductions", 5);
	ei_x_encode_empty_list(&x);
	ei_x_encode_atom(&x, "start");
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_select_scan(sel, &r, 1, NULL, 0, 1, out, &res), -EBADMSG);
	fp_select_plan(sel, NULL, 0, 0, &plan);
	fp_assert_int_eq(plan.cursor_len, 0);
	ei_x_free(&x);

	/* a good one after it */
	send_processes(sel, 3);
	fp_assert_int_eq(scan(sel, reds, 1, NULL, 0, 1, NULL, 0, out, &n, &res), 3);
	fp_assert_int_eq(n, 0);
	fp_assert(res.baseline);
	fp_select_destroy(sel);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("sample-select");
	TCase *tc;

	tc = tcase_create("select");
	tcase_add_test(tc, select_by_delta);
	tcase_add_test(tc, select_floor);
	tcase_add_test(tc, select_newborn);
	tcase_add_test(tc, select_many);
	tcase_add_test(tc, select_window);
	tcase_add_test(tc, select_limit);
	tcase_add_loop_test(tc, select_sweep, 0, 3);
	tcase_add_test(tc, select_sweep_partial);
	tcase_add_test(tc, select_sweep_again);
	tcase_add_test(tc, select_bad);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
