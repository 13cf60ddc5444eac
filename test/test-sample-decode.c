/*
 * flame_profd — unit tests: decoding sample replies: items, pairs,
 * probes, deltas, tags, initial calls, malformed replies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "util-escape.h"
#include "fp/sample.h"
#include "conn.h"
#include "etf.h"
#include "sample-fixtures.h"

START_TEST(decode_sample)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	enc_proc(&x, &proc_a);
	ei_x_encode_atom(&x, "undefined");	/* died meanwhile */
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);

	decode_expect(s, &r, pids, NULL, 2, 42, 1, NULL);
	fp_assert_int_eq(fp_sampler_gone(s), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].pid.num, 80);
	fp_assert_int_eq(out[0].time_us, 42);
	fp_assert_int_eq(out[0].status, FP_STATUS_RUNNING);
	fp_assert_str_eq(out[0].registered_name, "my_server");
	fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], 1000);
	fp_assert_int_eq(out[0].value[FP_METRIC_MESSAGE_QUEUE_LEN], 10);
	fp_assert_int_eq(out[0].value[FP_METRIC_MINOR_GCS], 7);
	fp_assert_int_eq(out[0].value[FP_METRIC_BINARY_BYTES], 128 * 8);
	fp_assert_int_eq(out[0].value[FP_METRIC_HEAP_SIZE], 300);
	for (int m = 0; m < FP_METRIC_COUNT; m++)
		fp_assert_int_eq(out[0].delta[m], 0);
	fp_assert_int_eq(out[0].nframes, 2);
	fp_assert_str_eq(out[0].frames[0].module, "lists");
	fp_assert_str_eq(out[0].frames[0].function, "foldl_1");
	fp_assert_int_eq(out[0].frames[0].arity, 3);
	fp_assert_str_eq(out[0].frames[0].file, "lists.erl");
	fp_assert_int_eq(out[0].frames[0].line, 1263);
	fp_assert_str_eq(out[0].frames[1].function, "+");
	fp_assert_int_eq(out[0].frames[1].arity, 2);
	fp_assert_ptr_null(out[0].frames[1].file);
	fp_assert(out[0].has_initial_call);
	fp_assert_str_eq(out[0].initial_call.module, "proc_lib");

	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* [{status, _}, {label, L}, {{dictionary, K}, V}...]: @label NULL for
 * undefined */
static void
enc_tagged(ei_x_buff *x, const char *label, const char *rid)
{
	ei_x_encode_list_header(x, 1);
	ei_x_encode_list_header(x, 6);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "status");
	ei_x_encode_atom(x, "waiting");
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "label");
	if (label) {
		ei_x_encode_tuple_header(x, 2);
		ei_x_encode_atom(x, label);
		ei_x_encode_long(x, 1);
	} else {
		ei_x_encode_atom(x, "undefined");
	}
	/* a key asked for, a binary (an Elixir string) */
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "dictionary");
	ei_x_encode_atom(x, "tenant");
	ei_x_encode_binary(x, "acme corp", 9);
	/* a key not asked for: skipped */
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "dictionary");
	ei_x_encode_atom(x, "other");
	ei_x_encode_long(x, 5);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "dictionary");
	ei_x_encode_atom(x, "$logger_metadata$");
	ei_x_encode_map_header(x, 2);
	ei_x_encode_atom(x, "domain");
	ei_x_encode_list_header(x, 1);
	ei_x_encode_atom(x, "elixir");
	ei_x_encode_empty_list(x);
	ei_x_encode_atom(x, "request_id");
	ei_x_encode_binary(x, rid, (long)strlen(rid));
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "dictionary");
	ei_x_encode_atom(x, "$callers");
	ei_x_encode_list_header(x, 2);
	enc_pid(x, 101);
	enc_pid(x, 90);
	ei_x_encode_empty_list(x);
	ei_x_encode_empty_list(x);
	ei_x_encode_empty_list(x);
}

/* Labels, keys, Logger metadata keys and callers: rendered once, kept
 * while the bytes stay, dropped when the process has none any more. */
START_TEST(decode_tags)
{
	static const char *const keys[] = { "tenant", "absent" };
	static const char *const logger_keys[] = { "request_id" };
	struct fp_extras e = { .keys = keys, .nkeys = 2, .logger_keys = logger_keys,
			       .nlogger_keys = 1, .callers = true };
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 80, 0 };
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	fp_sampler_set_extras(s, &e);
	for (int round = 0; round < 3; round++) {
		ei_x_new_with_version(&x);
		enc_tagged(&x, round < 2 ? "rw_pool" : NULL, round ? "req-8" : "req-7");
		r = reply_of(&x);
		out = decode_expect(s, &r, &pid, NULL, 1, 42, 1, &n);
		fp_assert_int_eq(n, 1);
		if (round < 2)
			fp_assert_str_eq(out[0].label, "{rw_pool,1}");
		else
			fp_assert_ptr_null(out[0].label);
		fp_assert_int_eq(out[0].nkeys, 3);
		fp_assert_str_eq(out[0].keys[0], "acme corp");
		fp_assert_ptr_null(out[0].keys[1]);
		fp_assert_str_eq(out[0].keys[2], round ? "req-8" : "req-7");
		fp_assert_str_eq(out[0].callers, "<0.101.0>,<0.90.0>");
		ei_x_free(&x);
	}
	fp_sampler_destroy(s);
}
END_TEST

/* Two item lists per pid (what the caller read, then what the process
 * answered) make one sample; undefined in either makes it gone. */
START_TEST(decode_pairs)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[3] = { { 80, 0 }, { 81, 0 }, { 82, 0 } };
	struct proc rest = proc_a;
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	rest.no_status = true;
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 6);
	enc_status(&x, "runnable");
	enc_proc(&x, &rest);
	ei_x_encode_atom(&x, "undefined");	/* gone before both */
	ei_x_encode_atom(&x, "undefined");
	enc_status(&x, "waiting");		/* gone in between */
	ei_x_encode_atom(&x, "undefined");
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);

	decode_expect(s, &r, pids, NULL, 3, 7, 1, NULL);
	fp_assert_int_eq(fp_sampler_gone(s), 2);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].pid.num, 80);
	fp_assert_int_eq(out[0].status, FP_STATUS_RUNNABLE);
	fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], 1000);
	fp_assert_int_eq(out[0].nframes, 2);
	fp_assert_str_eq(out[0].frames[0].function, "foldl_1");
	fp_assert_str_eq(out[0].registered_name, "my_server");

	/* neither n nor 2n elements */
	decode_expect(s, &r, pids, NULL, 2, 8, -EBADMSG, NULL);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/*
 * A process that answered its status itself reads `running`; with
 * messages in its queue then, and next to no reductions before it
 * answered the second list, a message had woken it and it was waiting
 * for a scheduler: the sample is `runnable`. One that worked on keeps
 * `running`. The metrics are still the second list's. (proc_a did 1000
 * reductions when it answered the second list.)
 */
static const struct {
	const char *answered;
	long queued, reds;
	enum fp_status want;
} woken_cases[] = {
	{ "running", 1, 990, FP_STATUS_RUNNABLE },
	{ "running", 3, 1, FP_STATUS_RUNNABLE },	/* 999 */
	{ "running", 1, 0, FP_STATUS_RUNNING },		/* 1000 */
	{ "running", 0, 990, FP_STATUS_RUNNING },
	{ "waiting", 0, 1000, FP_STATUS_WAITING },
	{ "runnable", 3, 1000, FP_STATUS_RUNNABLE },
	{ "garbage_collecting", 2, 1000, FP_STATUS_GARBAGE_COLLECTING },
	{ "suspended", 1, 1000, FP_STATUS_SUSPENDED },
};

START_TEST(decode_woken)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 80, 0 };
	enum fp_ask ask = FP_ASK_FULL;
	struct proc rest = proc_a;
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	rest.no_status = true;
	rest.with_initial_call = false;
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	enc_instant(&x, woken_cases[_i].answered, woken_cases[_i].queued,
		    woken_cases[_i].reds);
	enc_proc(&x, &rest);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);

	out = decode_expect(s, &r, &pid, &ask, 1, 7, 1, &n);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].status, woken_cases[_i].want);
	fp_assert_int_eq(out[0].value[FP_METRIC_MESSAGE_QUEUE_LEN], proc_a.mq);
	fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], proc_a.reductions);
	fp_assert_int_eq(out[0].nframes, 2);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* A busy process (80) and a server (81) asked in full at @t_us: each
 * answers its status `running` with 2 messages queued and works 5000
 * reductions before its second answer; they have done @busy_reds and
 * @server_reds in all by then. The server's status is returned. */
static enum fp_status
decode_rates(struct fp_sampler *s, uint64_t t_us, long busy_reds,
	     long server_reds)
{
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	enum fp_ask asks[2] = { FP_ASK_FULL, FP_ASK_FULL };
	struct proc busy = proc_a, server = proc_a;
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	busy.no_status = server.no_status = true;
	busy.with_initial_call = server.with_initial_call = false;
	busy.reductions = busy_reds;
	server.reductions = server_reds;
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 4);
	enc_instant(&x, "running", 2, busy_reds - 5000);
	enc_proc(&x, &busy);
	enc_instant(&x, "running", 2, server_reds - 5000);
	enc_proc(&x, &server);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	out = decode_expect(s, &r, pids, asks, 2, t_us, 2, &n);
	ei_x_free(&x);
	fp_assert_int_eq(out[0].status, FP_STATUS_RUNNING);
	return out[1].status;
}

/*
 * One that worked on after answering keeps `running` when it keeps a
 * scheduler busy; one whose reductions a second since its last sample
 * are under a tenth of the busiest sampled process's was far likelier in
 * a run queue with its messages: `runnable`. Without a last sample to
 * measure from, `running` stays.
 */
START_TEST(decode_slow_server)
{
	struct fp_sampler *s = fp_sampler_new();

	/* no rate yet */
	fp_assert_int_eq(decode_rates(s, 1000000, 100000, 100000),
			 FP_STATUS_RUNNING);
	/* 100 ms later: the busy one did 1 000 000 (10 M/s), the server
	 * 60 000 (600 k/s, 6%) */
	fp_assert_int_eq(decode_rates(s, 1100000, 1100000, 160000),
			 FP_STATUS_RUNNABLE);
	/* the server at half the busy one's rate */
	fp_assert_int_eq(decode_rates(s, 1200000, 2100000, 660000),
			 FP_STATUS_RUNNING);
	/* ten minutes on, the busiest rate forgotten: both at 1/s */
	fp_assert_int_eq(decode_rates(s, 601200000, 2100600, 660600),
			 FP_STATUS_RUNNING);
	fp_sampler_destroy(s);
}
END_TEST

/* One pid asked as @ask: a reply of @p's items, decoded. */
static int
decode_as(struct fp_sampler *s, struct fp_pid pid, enum fp_ask ask,
	  const struct proc *p, uint64_t t)
{
	struct proc rest = *p;
	struct fp_reply r;
	ei_x_buff x;
	int rc;

	ei_x_new_with_version(&x);
	if (ask == FP_ASK_PROBE) {
		ei_x_encode_list_header(&x, 1);
		enc_probe(&x, p);
	} else {
		rest.no_status = true;
		rest.with_initial_call = false;
		ei_x_encode_list_header(&x, 2);
		enc_status(&x, p->status);
		enc_proc(&x, &rest);
	}
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	rc = fp_sampler_decode(s, &r, &pid, &ask, 1, t, 8);
	ei_x_free(&x);
	return rc;
}

/*
 * A probe gives a sample only when the process has not run since its
 * last one: reductions where that sample left them (one more after a
 * full sample, whose signal cost it one), nothing else moved. The sample
 * keeps that sample's stack and memory figures and takes the rest fresh.
 */
START_TEST(decode_probe)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 80, 0 };
	struct proc p = proc_idle;
	const struct fp_sample *out;
	const size_t *stale;
	uint64_t stack_id;
	size_t n;

	/* a first sample says nothing about running since the one before */
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_FULL, &p, 1), 1);
	fp_assert(!fp_sampler_idle(s, pid));
	stack_id = fp_sampler_samples(s, &n)[0].stack_id;
	fp_assert(stack_id != 0);

	/* only the signal of the first one in between: idle */
	p.reductions = 1001;
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_FULL, &p, 2), 1);
	fp_assert(fp_sampler_idle(s, pid));

	/* probed: reductions 1002, one for the last full sample's signal */
	p.reductions = 1002;
	p.memory = p.total_heap = p.bin_vheap = p.bin_old_vheap = 0;
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_PROBE, &p, 3), 1);
	fp_assert_int_eq(fp_sampler_reused(s), 1);
	fp_assert_int_eq(fp_sampler_stale(s, &stale), 0);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].time_us, 3);
	fp_assert_int_eq(out[0].status, FP_STATUS_WAITING);
	fp_assert_str_eq(out[0].registered_name, "idler");
	fp_assert_int_eq(out[0].stack_id, stack_id);
	fp_assert_int_eq(out[0].nframes, 2);
	fp_assert_str_eq(out[0].frames[0].function, "foldl_1");
	fp_assert_int_eq(out[0].frames[0].line, 1263);
	fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], 1002);
	fp_assert_int_eq(out[0].delta[FP_METRIC_REDUCTIONS], 1);
	fp_assert_int_eq(out[0].value[FP_METRIC_MEMORY], 5000);
	fp_assert_int_eq(out[0].value[FP_METRIC_TOTAL_HEAP_SIZE], 600);
	fp_assert_int_eq(out[0].value[FP_METRIC_BINARY_BYTES], 128 * 8);
	fp_assert_int_eq(out[0].value[FP_METRIC_MESSAGE_QUEUE_LEN], 2);
	fp_assert_int_eq(out[0].value[FP_METRIC_MINOR_GCS], 7);
	for (int m = 1; m < FP_METRIC_COUNT; m++)
		fp_assert_int_eq(out[0].delta[m], 0);
	fp_assert(fp_sampler_idle(s, pid));

	/* a probe costs nothing: the same reductions again */
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_PROBE, &p, 4), 1);
	fp_assert_int_eq(fp_sampler_samples(s, &n)[0].delta[FP_METRIC_REDUCTIONS], 0);

	/* one reduction more: it ran (a receive timeout costs just one) */
	p.reductions = 1003;
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_PROBE, &p, 5), 0);
	fp_assert_int_eq(fp_sampler_reused(s), 0);
	fp_assert_int_eq(fp_sampler_stale(s, &stale), 1);
	fp_assert_int_eq(stale[0], 0);

	/* its full sample, asked next, finds it where the probe did: idle
	 * again; the deltas run from the last sample */
	p = proc_idle;
	p.reductions = 1003;
	p.line = 1270;
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_FULL, &p, 6), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(out[0].delta[FP_METRIC_REDUCTIONS], 1);
	fp_assert_int_eq(out[0].frames[0].line, 1270);
	fp_assert(fp_sampler_idle(s, pid));

	/* the probe after it reuses the new stack */
	p.reductions = 1004;
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_PROBE, &p, 7), 1);
	fp_assert_int_eq(fp_sampler_samples(s, &n)[0].frames[0].line, 1270);

	/* a probe is no signal: a full sample at 1004 has not run either */
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_FULL, &p, 8), 1);
	fp_assert(fp_sampler_idle(s, pid));
	/* that one's signal and one more: it ran */
	p.reductions = 1006;
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_FULL, &p, 9), 1);
	fp_assert(!fp_sampler_idle(s, pid));
	fp_sampler_destroy(s);
}
END_TEST

/* Anything that running or receiving changes makes a probe stale. */
START_TEST(decode_probe_stale)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 80, 0 };
	struct proc p = proc_idle;
	const size_t *stale;

	fp_assert_int_eq(decode_as(s, pid, FP_ASK_FULL, &p, 1), 1);
	p.reductions++;
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_FULL, &p, 2), 1);
	p.reductions++;
	switch (_i) {
	case 0: p.status = "running"; break;
	case 1: p.status = "garbage_collecting"; break;
	case 2: p.mq++; break;				/* a message came */
	case 3: p.heap += 10; break;
	case 4: p.stack--; break;
	case 5: p.minor_gcs++; break;
	case 6: p.reductions += 5; break;
	case 7: p.reductions--; break;			/* not the signal's +1 */
	case 8: fp_sampler_drop_caches(s); break;	/* stack gone */
	case 9: pid.num = 81; break;			/* never sampled */
	}
	fp_assert_int_eq(decode_as(s, pid, FP_ASK_PROBE, &p, 3), 0);
	fp_assert_int_eq(fp_sampler_stale(s, &stale), 1);
	fp_assert_int_eq(fp_sampler_reused(s), 0);
	fp_sampler_destroy(s);
}
END_TEST

/* Probes and full samples in one reply: one item list per probe, two per
 * full sample; gone processes are counted as ever. */
START_TEST(decode_probe_mixed)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[4] = { { 80, 0 }, { 81, 0 }, { 82, 0 }, { 83, 0 } };
	enum fp_ask asks[4] = { FP_ASK_PROBE, FP_ASK_FULL, FP_ASK_PROBE,
				FP_ASK_PROBE };
	struct proc p = proc_idle, rest = proc_a;
	const struct fp_sample *out;
	const size_t *stale;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	fp_assert_int_eq(decode_as(s, pids[0], FP_ASK_FULL, &p, 1), 1);
	p.reductions++;
	fp_assert_int_eq(decode_as(s, pids[0], FP_ASK_FULL, &p, 2), 1);
	p.reductions++;

	rest.no_status = true;
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 5);
	enc_probe(&x, &p);			/* 80: idle */
	enc_status(&x, "running");		/* 81: full */
	enc_proc(&x, &rest);
	ei_x_encode_atom(&x, "undefined");	/* 82: gone */
	enc_probe(&x, &p);			/* 83: unknown, stale */
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	out = decode_expect(s, &r, pids, asks, 4, 3, 2, &n);
	fp_assert_int_eq(out[0].pid.num, 80);
	fp_assert_int_eq(out[0].nframes, 2);
	fp_assert_int_eq(out[1].pid.num, 81);
	fp_assert_int_eq(out[1].status, FP_STATUS_RUNNING);
	fp_assert_int_eq(fp_sampler_gone(s), 1);
	fp_assert_int_eq(fp_sampler_reused(s), 1);
	/* only 81, asked in full, was in a run queue */
	fp_assert_int_eq(fp_sampler_running(s), 1);
	fp_assert_int_eq(fp_sampler_stale(s, &stale), 1);
	fp_assert_int_eq(stale[0], 3);

	/* the lists must be as many as the asks say */
	asks[2] = FP_ASK_FULL;
	decode_expect(s, &r, pids, asks, 4, 4, -EBADMSG, NULL);
	fp_assert_int_eq(fp_sampler_stale(s, &stale), 0);
	fp_assert_int_eq(fp_sampler_running(s), 0);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

START_TEST(decode_deltas)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 80, 0 };
	struct proc p = proc_a;
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	p.with_initial_call = false;
	for (int round = 0; round < 3; round++) {
		r = reply_procs(&x, (const struct proc *[]){ &p }, 1);
		out = decode_expect(s, &r, &pid, NULL, 1, 1, 1, &n);
		fp_assert_int_eq(out[0].has_delta, round > 0);
		if (round == 1) {
			/* counters grow, gauges go down: signed deltas */
			fp_assert_int_eq(out[0].delta[FP_METRIC_REDUCTIONS], 500);
			fp_assert_int_eq(out[0].delta[FP_METRIC_MEMORY], -1000);
			fp_assert_int_eq(out[0].delta[FP_METRIC_MESSAGE_QUEUE_LEN], -10);
			fp_assert_int_eq(out[0].delta[FP_METRIC_MINOR_GCS], 3);
		} else if (round == 2) {
			/* minor_gcs reset by a full sweep: count since reset */
			fp_assert_int_eq(out[0].delta[FP_METRIC_MINOR_GCS], 2);
			fp_assert_int_eq(out[0].delta[FP_METRIC_REDUCTIONS], 100);
		}
		ei_x_free(&x);
		if (round == 0) {
			p.reductions += 500;
			p.memory -= 1000;
			p.mq = 0;
			p.minor_gcs = 10;
		} else {
			p.reductions += 100;
			p.minor_gcs = 2;
		}
	}
	/* Leaving the selection forgets the history. */
	fp_sampler_retain(s, NULL, 0);
	fp_assert(fp_sampler_wants_initial_call(s, pid));
	fp_sampler_destroy(s);
}
END_TEST

/* Replace every "aQb" in the encoded reply by "a\0b". */
static void
nul_for_q(ei_x_buff *x)
{
	for (int i = 0; i + 3 <= x->index; i++) {
		if (memcmp(x->buff + i, "aQb", 3) == 0)
			x->buff[i + 1] = '\0';
	}
}

/* An atom holding a NUL ('a\0b') is not cut at it: registered names,
 * frames and initial calls carry it as FP_NUL_CARRIER, apart from 'a'. */
START_TEST(decode_atom_nul)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 80, 0 };
	struct proc p = proc_a;
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;
	/* SMALL_ATOM_UTF8_EXT 'a\0b', ATOM_EXT (latin-1) '\xe9\0' */
	static const char utf8[] = { 119, 3, 'a', 0, 'b' };
	static const char latin1[] = { 100, 0, 2, (char)0xe9, 0 };
	char atom[MAXATOMLEN_UTF8];
	int index = 0;

	fp_assert_int_eq(etf_decode_atom(utf8, &index, atom), 0);
	fp_assert_int_eq(index, 5);
	fp_assert_str_eq(atom, "a" FP_NUL_CARRIER "b");
	index = 0;
	fp_assert_int_eq(etf_decode_atom(latin1, &index, atom), 0);
	fp_assert_str_eq(atom, "\xc3\xa9" FP_NUL_CARRIER);

	p.name = "aQb";
	r = reply_procs(&x, (const struct proc *[]){ &p }, 1);
	nul_for_q(&x);
	out = decode_expect(s, &r, &pid, NULL, 1, 1, 1, &n);
	fp_assert_str_eq(out[0].registered_name, "a" FP_NUL_CARRIER "b");
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* {my_server, init, @arity} */
static void
encode_mfa(ei_x_buff *x, long arity)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "my_server");
	ei_x_encode_atom(x, "init");
	ei_x_encode_long(x, arity);
}

START_TEST(decode_proc_lib_initial_call)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	/* {value, [{my_server, init, 1}, undefined], Bindings} */
	ei_x_new_with_version(&x);
	ei_x_encode_tuple_header(&x, 3);
	ei_x_encode_atom(&x, "value");
	ei_x_encode_list_header(&x, 2);
	encode_mfa(&x, 1);
	ei_x_encode_atom(&x, "undefined");
	ei_x_encode_empty_list(&x);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_initial_calls(s, &r, pids, 2), 0);
	ei_x_free(&x);

	/* The sample's own proc_lib:init_p/5 does not override it, also
	 * after the process left the set and came back. */
	for (int round = 0; round < 2; round++) {
		r = reply_procs(&x, (const struct proc *[]){ &proc_a }, 1);
		out = decode_expect(s, &r, pids, NULL, 1, 1, 1, &n);
		fp_assert_str_eq(out[0].initial_call.module, "my_server");
		fp_assert_str_eq(out[0].initial_call.function, "init");
		fp_assert_int_eq(out[0].initial_call.arity, 1);
		fp_assert(!fp_sampler_wants_initial_call(s, pids[0]));
		fp_assert(!fp_sampler_wants_proc_lib_call(s, pids[0], -1));
		ei_x_free(&x);
		fp_sampler_retain(s, NULL, 0);
	}
	fp_sampler_destroy(s);
}
END_TEST

/*
 * An answer that is no call is its process's alone: the node's odd for a
 * '$initial_call' of another shape, and (should a node send it anyway)
 * an arity no function has or a term of another shape. Each process
 * after it keeps the call it was asked for.
 */
START_TEST(decode_initial_call_odd_neighbours)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[5] = { { 80, 0 }, { 81, 0 }, { 82, 0 }, { 83, 0 },
				  { 84, 0 } };
	struct fp_reply r;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	ei_x_encode_tuple_header(&x, 3);
	ei_x_encode_atom(&x, "value");
	ei_x_encode_list_header(&x, 5);
	ei_x_encode_atom(&x, "odd");
	encode_mfa(&x, 300);
	ei_x_encode_tuple_header(&x, 2);
	ei_x_encode_binary(&x, "x", 1);
	ei_x_encode_long(&x, -1);
	encode_mfa(&x, -1);
	encode_mfa(&x, 2);
	ei_x_encode_empty_list(&x);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_initial_calls(s, &r, pids, 5), 0);
	ei_x_free(&x);

	for (size_t i = 0; i < 5; i++) {
		struct proc p = proc_a;		/* proc_lib:init_p/5 */
		const struct fp_sample *out;
		size_t n;

		r = reply_procs(&x, (const struct proc *[]){ &p }, 1);
		out = decode_expect(s, &r, &pids[i], NULL, 1, 1, 1, &n);
		if (i == 4) {
			fp_assert_str_eq(out[0].initial_call.module, "my_server");
			fp_assert_int_eq(out[0].initial_call.arity, 2);
		} else {
			fp_assert_str_eq(out[0].initial_call.module, "proc_lib");
			fp_assert_int_eq(out[0].initial_call.arity, 5);
		}
		ei_x_free(&x);
	}
	fp_sampler_destroy(s);
}
END_TEST

/* A reply that is no eval value, or a list of another length: refused
 * whole. */
START_TEST(decode_initial_call_refused)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	struct fp_reply r;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	encode_mfa(&x, 1);
	encode_mfa(&x, 1);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_initial_calls(s, &r, pids, 2), -EBADMSG);
	ei_x_free(&x);

	ei_x_new_with_version(&x);
	ei_x_encode_tuple_header(&x, 3);
	ei_x_encode_atom(&x, "value");
	ei_x_encode_list_header(&x, 1);
	encode_mfa(&x, 1);
	ei_x_encode_empty_list(&x);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_initial_calls(s, &r, pids, 2), -EBADMSG);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* One sample of @p as @pid, decoded. */
static void
decode_one_proc(struct fp_sampler *s, const struct proc *p, struct fp_pid pid)
{
	struct fp_reply r;
	ei_x_buff x;

	r = reply_procs(&x, (const struct proc *[]){ p }, 1);
	decode_expect(s, &r, &pid, NULL, 1, 1, 1, NULL);
	ei_x_free(&x);
}

/* Who is asked proc_lib:initial_call/1: processes proc_lib started, once
 * in their life, and where the copy costs, only small ones. */
START_TEST(proc_lib_call_asked_once)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 90, 0 };
	struct proc p = proc_a;		/* proc_lib:init_p/5, memory 5000 */

	fp_assert(!fp_sampler_wants_proc_lib_call(s, pid, -1));	/* no sample yet */
	decode_one_proc(s, &p, pid);
	fp_assert(fp_sampler_wants_proc_lib_call(s, pid, -1));
	fp_assert(fp_sampler_wants_proc_lib_call(s, pid, p.memory));
	fp_assert(!fp_sampler_wants_proc_lib_call(s, pid, p.memory - 1));

	/* asked, the answer lost: never again, in the set or back in it */
	fp_sampler_initial_calls_asked(s, &pid, 1);
	fp_assert(!fp_sampler_wants_proc_lib_call(s, pid, -1));
	fp_sampler_retain(s, NULL, 0);
	decode_one_proc(s, &p, pid);
	fp_assert(!fp_sampler_wants_proc_lib_call(s, pid, -1));

	/* a new connection: pids may mean other processes */
	fp_sampler_reset(s);
	decode_one_proc(s, &p, pid);
	fp_assert(fp_sampler_wants_proc_lib_call(s, pid, -1));
	fp_sampler_destroy(s);
}
END_TEST

/* Replies that must be refused whole, leaving the history alone. */
START_TEST(decode_bad)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 1, 0 }, { 2, 0 } };
	struct fp_reply r;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	switch (_i) {
	case 0:		/* not a list */
		ei_x_encode_atom(&x, "ok");
		break;
	case 1:		/* wrong length */
		ei_x_encode_list_header(&x, 1);
		ei_x_encode_atom(&x, "undefined");
		ei_x_encode_empty_list(&x);
		break;
	case 2:		/* element not a proplist */
		ei_x_encode_list_header(&x, 2);
		ei_x_encode_long(&x, 5);
		ei_x_encode_atom(&x, "undefined");
		ei_x_encode_empty_list(&x);
		break;
	case 3:		/* reductions not an integer */
		ei_x_encode_list_header(&x, 2);
		ei_x_encode_list_header(&x, 1);
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "reductions");
		ei_x_encode_atom(&x, "lots");
		ei_x_encode_empty_list(&x);
		ei_x_encode_atom(&x, "undefined");
		ei_x_encode_empty_list(&x);
		break;
	case 4:		/* frame tuple of the wrong size */
		ei_x_encode_list_header(&x, 2);
		ei_x_encode_list_header(&x, 1);
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "current_stacktrace");
		ei_x_encode_list_header(&x, 1);
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "m");
		ei_x_encode_atom(&x, "f");
		ei_x_encode_empty_list(&x);
		ei_x_encode_empty_list(&x);
		ei_x_encode_atom(&x, "undefined");
		ei_x_encode_empty_list(&x);
		break;
	case 5:		/* truncated buffer */
		ei_x_encode_list_header(&x, 2);
		enc_proc(&x, &proc_a);
		x.index -= 20;
		break;
	}
	r = reply_of(&x);
	if (_i == 5)
		x.buff[x.index] = 0;	/* garbage where the tail was */
	decode_expect(s, &r, pids, NULL, 2, 1, -EBADMSG, NULL);
	fp_assert(fp_sampler_wants_initial_call(s, pids[0]));
	ei_x_free(&x);

	/* {badrpc, _} is refused too */
	r.badrpc = true;
	decode_expect(s, &r, pids, NULL, 2, 1, -EBADMSG, NULL);
	fp_sampler_destroy(s);
}
END_TEST

/* A term for a log line (a badrpc reason): printed by ei, then under the
 * rule for node text, cut at @max bytes of the print. */
START_TEST(term_text)
{
	ei_x_buff x;
	char *t;

	ei_x_new(&x);
	ei_x_encode_tuple_header(&x, 2);
	ei_x_encode_atom(&x, "EXIT");
	ei_x_encode_atom(&x, "evil\x1b]0;t\x07\n2026 flame_profd error: forged");
	t = etf_term_text(x.buff, 0, 300);
	fp_assert(strchr(t, '\n') == NULL && strchr(t, '\x1b') == NULL);
	fp_assert(strstr(t, "evil\\x1B]0;t\\x07\\x0A2026 flame_profd error: forged") != NULL);
	free(t);
	t = etf_term_text(x.buff, 0, 8);
	fp_assert_int_eq(strlen(t), 8 + 3);
	fp_assert(strcmp(t + 8, "...") == 0);
	free(t);
	ei_x_free(&x);
}
END_TEST

/* The gate in front of ei: lengths, nesting, and no text floats. */
START_TEST(term_check)
{
	ei_x_buff x;
	char deep[4096];
	size_t n = 0;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	ei_x_encode_double(&x, 1.5);		/* NEW_FLOAT_EXT */
	ei_x_encode_string(&x, "abc");
	ei_x_encode_empty_list(&x);
	fp_assert_int_eq(etf_term_check(x.buff, (size_t)x.index, 1), 0);
	fp_assert_int_eq(etf_term_check(x.buff, (size_t)x.index - 1, 1), -EBADMSG);
	fp_assert_int_eq(etf_term_check(x.buff, (size_t)x.index + 1, 1), -EBADMSG);
	ei_x_free(&x);

	/* a string claiming more bytes than there are */
	{
		char s[] = { (char)131, 'k', 0x7f, 0x7f, 'a' };

		fp_assert_int_eq(etf_term_check(s, sizeof(s), 1), -EBADMSG);
	}
	/* a 31-byte text float with no NUL: ei would sscanf past it */
	{
		char f[33] = { (char)131, 'c' };

		memset(f + 2, '1', 31);
		fp_assert_int_eq(etf_term_check(f, sizeof(f), 1), -EBADMSG);
	}
	/* 300 nested one-element lists */
	deep[n++] = (char)131;
	for (int i = 0; i < 300; i++) {
		deep[n++] = 'l';
		deep[n++] = 0; deep[n++] = 0; deep[n++] = 0; deep[n++] = 1;
	}
	deep[n++] = 'j';
	for (int i = 0; i < 300; i++)
		deep[n++] = 'j';
	fp_assert_int_eq(etf_term_check(deep, n, 1), -EBADMSG);
}
END_TEST

START_TEST(decode_pids)
{
	struct fp_pid out[3];
	bool found[3];
	struct fp_reply r;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 3);
	enc_pid(&x, 7);
	ei_x_encode_atom(&x, "undefined");
	enc_pid(&x, 9);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_decode_whereis(&r, out, found, 3), 0);
	fp_assert(found[0] && !found[1] && found[2]);
	fp_assert_int_eq(out[0].num, 7);
	fp_assert_int_eq(out[2].num, 9);
	/* a reply for another number of names */
	fp_assert_int_eq(fp_node_decode_whereis(&r, out, found, 2), -EBADMSG);
	ei_x_free(&x);
}
END_TEST

struct peers_seen {
	char names[4][64];
	size_t n;
};

static void
peer_seen(const char *name, void *data)
{
	struct peers_seen *seen = data;

	if (seen->n < 4)
		snprintf(seen->names[seen->n], sizeof(seen->names[0]), "%s", name);
	seen->n++;
}

/* erlang:nodes()'s reply: every name in order, or none at all when any
 * element is no atom or the list is improper. */
START_TEST(decode_peers)
{
	struct peers_seen seen = { 0 };
	struct fp_reply r;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	ei_x_encode_atom(&x, "a@h1");
	ei_x_encode_atom(&x, "b@h2.example");
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_decode_peers(&r, peer_seen, &seen), 2);
	fp_assert_int_eq(seen.n, 2);
	fp_assert_str_eq(seen.names[0], "a@h1");
	fp_assert_str_eq(seen.names[1], "b@h2.example");
	ei_x_free(&x);

	seen.n = 0;
	ei_x_new_with_version(&x);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_decode_peers(&r, peer_seen, &seen), 0);
	fp_assert_int_eq(seen.n, 0);
	ei_x_free(&x);

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	ei_x_encode_atom(&x, "a@h1");
	ei_x_encode_long(&x, 7);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_decode_peers(&r, peer_seen, &seen), -EBADMSG);
	fp_assert_int_eq(seen.n, 0);
	ei_x_free(&x);

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 1);
	ei_x_encode_atom(&x, "a@h1");
	ei_x_encode_atom(&x, "tail");
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_decode_peers(&r, peer_seen, &seen), -EBADMSG);
	fp_assert_int_eq(seen.n, 0);
	ei_x_free(&x);

	ei_x_new_with_version(&x);
	ei_x_encode_atom(&x, "nonode@nohost");
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_decode_peers(&r, peer_seen, &seen), -EBADMSG);
	fp_assert_int_eq(seen.n, 0);
	ei_x_free(&x);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("sample-decode");
	TCase *tc;

	tc = tcase_create("decode");
	tcase_add_test(tc, decode_sample);
	tcase_add_test(tc, decode_pairs);
	tcase_add_loop_test(tc, decode_woken, 0,
			    sizeof(woken_cases) / sizeof(woken_cases[0]));
	tcase_add_test(tc, decode_slow_server);
	tcase_add_test(tc, decode_tags);
	tcase_add_test(tc, decode_probe);
	tcase_add_loop_test(tc, decode_probe_stale, 0, 10);
	tcase_add_test(tc, decode_probe_mixed);
	tcase_add_test(tc, decode_deltas);
	tcase_add_test(tc, decode_atom_nul);
	tcase_add_test(tc, decode_proc_lib_initial_call);
	tcase_add_test(tc, decode_initial_call_odd_neighbours);
	tcase_add_test(tc, decode_initial_call_refused);
	tcase_add_test(tc, proc_lib_call_asked_once);
	tcase_add_loop_test(tc, decode_bad, 0, 6);
	tcase_add_test(tc, decode_pids);
	tcase_add_test(tc, decode_peers);
	tcase_add_test(tc, term_check);
	tcase_add_test(tc, term_text);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
