/*
 * flame_profd — unit tests: decoding sample, selection and pid replies
 * as the node sends them, built here with ei's encoder.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "fp/sample.h"
#include "fp/select.h"
#include "conn.h"
#include "etf.h"
#include "node-private.h"
#include "path.h"

#define NODE "app@host"

static void
enc_pid(ei_x_buff *x, unsigned num)
{
	erlang_pid p;

	memset(&p, 0, sizeof(p));
	strcpy(p.node, NODE);
	p.num = num;
	p.serial = 0;
	p.creation = 1234;
	ei_x_encode_pid(x, &p);
}

static void
enc_kv_long(ei_x_buff *x, const char *key, long v)
{
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, key);
	ei_x_encode_long(x, v);
}

struct proc {
	const char *status;
	const char *name;	/* NULL: [] */
	long reductions, memory, mq, heap, total_heap, stack, minor_gcs;
	long bin_vheap, bin_old_vheap;
	bool unicode_file;	/* file as a list of code points */
	bool with_initial_call;
	bool no_status;		/* leave {status, _} out */
	long line;		/* of the first frame; 0: 1263 */
};

/* One element of the zipwith result. */
static void
enc_proc(ei_x_buff *x, const struct proc *p)
{
	ei_x_encode_list_header(x, 11 + p->with_initial_call - p->no_status);

	if (!p->no_status) {
		ei_x_encode_tuple_header(x, 2);
		ei_x_encode_atom(x, "status");
		ei_x_encode_atom(x, p->status);
	}

	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "registered_name");
	if (p->name)
		ei_x_encode_atom_as(x, p->name, ERLANG_UTF8, ERLANG_UTF8);
	else
		ei_x_encode_empty_list(x);

	/* current_stacktrace: two frames, one with an args list */
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "current_stacktrace");
	ei_x_encode_list_header(x, 2);
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "lists");
	ei_x_encode_atom(x, "foldl_1");
	ei_x_encode_long(x, 3);
	ei_x_encode_list_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "file");
	if (p->unicode_file) {
		/* "ö.erl" as code points */
		long cps[] = { 0xf6, '.', 'e', 'r', 'l' };

		ei_x_encode_list_header(x, 5);
		for (int i = 0; i < 5; i++)
			ei_x_encode_long(x, cps[i]);
		ei_x_encode_empty_list(x);
	} else {
		ei_x_encode_string(x, "lists.erl");
	}
	enc_kv_long(x, "line", p->line ? p->line : 1263);
	ei_x_encode_empty_list(x);
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "erlang");
	ei_x_encode_atom(x, "+");
	ei_x_encode_list_header(x, 2);
	ei_x_encode_long(x, 1);
	ei_x_encode_long(x, 2);
	ei_x_encode_empty_list(x);
	ei_x_encode_empty_list(x);
	ei_x_encode_empty_list(x);

	enc_kv_long(x, "reductions", p->reductions);
	enc_kv_long(x, "memory", p->memory);
	enc_kv_long(x, "message_queue_len", p->mq);
	enc_kv_long(x, "total_heap_size", p->total_heap);
	enc_kv_long(x, "heap_size", p->heap);
	enc_kv_long(x, "stack_size", p->stack);

	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "garbage_collection");
	ei_x_encode_list_header(x, 3);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "max_heap_size");
	ei_x_encode_map_header(x, 0);
	enc_kv_long(x, "min_heap_size", 233);
	enc_kv_long(x, "minor_gcs", p->minor_gcs);
	ei_x_encode_empty_list(x);

	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "garbage_collection_info");
	ei_x_encode_list_header(x, 3);
	enc_kv_long(x, "heap_size", p->heap);
	enc_kv_long(x, "bin_vheap_size", p->bin_vheap);
	enc_kv_long(x, "bin_old_vheap_size", p->bin_old_vheap);
	ei_x_encode_empty_list(x);

	if (p->with_initial_call) {
		ei_x_encode_tuple_header(x, 2);
		ei_x_encode_atom(x, "initial_call");
		ei_x_encode_tuple_header(x, 3);
		ei_x_encode_atom(x, "proc_lib");
		ei_x_encode_atom(x, "init_p");
		ei_x_encode_long(x, 5);
	}
	ei_x_encode_empty_list(x);
}

static struct fp_reply
reply_of(ei_x_buff *x)
{
	return (struct fp_reply){ .id = 1, .buf = x->buff,
				   .len = (size_t)x->index, .index = 1 };
}

static const struct proc proc_a = {
	.status = "running", .name = "my_server",
	.reductions = 1000, .memory = 5000, .mq = 10, .heap = 300,
	.total_heap = 600, .stack = 20, .minor_gcs = 7,
	.bin_vheap = 100, .bin_old_vheap = 28, .with_initial_call = true,
};

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

	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 42, 8), 1);
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

/* [{status, S}] as the first of a pair */
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
		fp_assert_int_eq(fp_sampler_decode(s, &r, &pid, NULL, 1, 42, 8), 1);
		out = fp_sampler_samples(s, &n);
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

static void
enc_status(ei_x_buff *x, const char *status)
{
	ei_x_encode_list_header(x, 1);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "status");
	ei_x_encode_atom(x, status);
	ei_x_encode_empty_list(x);
}

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

	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 3, 7, 8), 1);
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
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 8, 8), -EBADMSG);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* What FP_ASK_PROBE asks: the items read without a signal. */
static void
enc_probe(ei_x_buff *x, const struct proc *p)
{
	ei_x_encode_list_header(x, 7);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "status");
	ei_x_encode_atom(x, p->status);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "registered_name");
	if (p->name)
		ei_x_encode_atom(x, p->name);
	else
		ei_x_encode_empty_list(x);
	enc_kv_long(x, "reductions", p->reductions);
	enc_kv_long(x, "message_queue_len", p->mq);
	enc_kv_long(x, "heap_size", p->heap);
	enc_kv_long(x, "stack_size", p->stack);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "garbage_collection");
	ei_x_encode_list_header(x, 1);
	enc_kv_long(x, "minor_gcs", p->minor_gcs);
	ei_x_encode_empty_list(x);
	ei_x_encode_empty_list(x);
}

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

static const struct proc proc_idle = {
	.status = "waiting", .name = "idler",
	.reductions = 1000, .memory = 5000, .mq = 2, .heap = 300,
	.total_heap = 600, .stack = 20, .minor_gcs = 7,
	.bin_vheap = 100, .bin_old_vheap = 28,
};

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
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, asks, 4, 3, 8), 2);
	out = fp_sampler_samples(s, &n);
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
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, asks, 4, 4, 8), -EBADMSG);
	fp_assert_int_eq(fp_sampler_stale(s, &stale), 0);
	fp_assert_int_eq(fp_sampler_running(s), 0);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* Frames and stacks seen before come from the decoder's caches, with ids
 * the writers key on; a changed stack is decoded anew. */
START_TEST(decode_cache)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	struct proc moved = proc_a;
	const struct fp_sample *out;
	struct fp_cache_stats st;
	uint64_t stack_id, plus_id;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	enc_proc(&x, &proc_a);
	enc_proc(&x, &proc_a);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);

	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 1, 8), 2);
	out = fp_sampler_samples(s, &n);
	stack_id = out[0].stack_id;
	plus_id = out[0].frames[1].id;
	fp_assert(stack_id != 0);
	fp_assert_int_eq(out[1].stack_id, stack_id);
	fp_assert(out[0].frames[0].id != 0 && plus_id != 0);
	fp_assert(out[0].frames[0].id != plus_id);
	fp_assert_int_eq(out[1].frames[1].id, plus_id);
	fp_assert_str_eq(out[1].frames[0].file, "lists.erl");
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.stack_misses, 1);
	fp_assert_int_eq(st.stack_hits, 1);
	fp_assert_int_eq(st.frame_misses, 2);

	/* again: both from the cache, through each process's last stack */
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 2, 8), 2);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(out[0].stack_id, stack_id);
	fp_assert_int_eq(out[1].stack_id, stack_id);
	fp_assert_int_eq(out[0].frames[0].line, 1263);
	fp_assert_str_eq(out[0].frames[1].module, "erlang");
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.stack_hits, 3);
	ei_x_free(&x);

	/* the first process moved to another line: a new stack whose second
	 * frame is the one cached before */
	moved.line = 1264;
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	enc_proc(&x, &moved);
	enc_proc(&x, &proc_a);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 3, 8), 2);
	out = fp_sampler_samples(s, &n);
	fp_assert(out[0].stack_id != 0 && out[0].stack_id != stack_id);
	fp_assert_int_eq(out[0].frames[0].line, 1264);
	fp_assert_int_eq(out[0].frames[1].id, plus_id);
	fp_assert_int_eq(out[1].stack_id, stack_id);
	fp_assert_int_eq(out[1].frames[0].line, 1263);

	/* dropped caches: the same content under new ids */
	fp_sampler_drop_caches(s);
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 4, 8), 2);
	out = fp_sampler_samples(s, &n);
	fp_assert(out[1].stack_id != stack_id);
	fp_assert_int_eq(out[1].frames[0].line, 1263);
	fp_assert_str_eq(out[1].frames[0].module, "lists");

	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/* Many distinct stacks: the caches are dropped when they outgrow their
 * bound, between two decodes, and what comes out stays right. */
START_TEST(decode_cache_bound)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[50];
	struct fp_cache_stats st;
	struct proc p = proc_a;
	long line = 1;

	for (int i = 0; i < 50; i++)
		pids[i] = (struct fp_pid){ (unsigned)(100 + i), 0 };
	for (int round = 0; round < 1600; round++) {
		const struct fp_sample *out;
		struct fp_reply r;
		ei_x_buff x;
		size_t n;

		ei_x_new_with_version(&x);
		ei_x_encode_list_header(&x, 50);
		for (int i = 0; i < 50; i++) {
			p.line = line + i;
			enc_proc(&x, &p);
		}
		ei_x_encode_empty_list(&x);
		r = reply_of(&x);
		fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 50, 1, 8), 50);
		out = fp_sampler_samples(s, &n);
		for (int i = 0; i < 50; i++) {
			fp_assert_int_eq(out[i].frames[0].line, line + i);
			fp_assert_str_eq(out[i].frames[0].file, "lists.erl");
			fp_assert_str_eq(out[i].frames[1].function, "+");
			fp_assert(out[i].stack_id != 0);
		}
		line += 50;
		ei_x_free(&x);
	}
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.stack_misses, 80000);
	fp_assert(st.clears >= 1);
	fp_sampler_destroy(s);
}
END_TEST

/* A sample batch arrives unchecked: cut anywhere, it is refused, and
 * nothing is read past the end (an exact-size copy, for the sanitizers). */
START_TEST(decode_unchecked_truncated)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	struct fp_reply r;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	enc_proc(&x, &proc_a);
	enc_proc(&x, &proc_a);
	ei_x_encode_empty_list(&x);

	for (int len = 1; len <= x.index; len++) {
		char *copy = malloc((size_t)len);

		memcpy(copy, x.buff, (size_t)len);
		r = (struct fp_reply){ .buf = copy, .len = (size_t)len, .index = 1 };
		/* twice: the second pass takes the cached paths */
		for (int pass = 0; pass < 2; pass++)
			fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 1, 8),
					 len == x.index ? 2 : -EBADMSG);
		free(copy);
	}
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
		ei_x_new_with_version(&x);
		ei_x_encode_list_header(&x, 1);
		enc_proc(&x, &p);
		ei_x_encode_empty_list(&x);
		r = reply_of(&x);
		fp_assert_int_eq(fp_sampler_decode(s, &r, &pid, NULL, 1, 1, 8), 1);
		out = fp_sampler_samples(s, &n);
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

START_TEST(decode_unicode_file)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pid = { 9, 1 };
	struct proc p = proc_a;
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	p.unicode_file = true;
	p.name = "s\xc3\xb6" "k";	/* UTF-8 atom */
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 1);
	enc_proc(&x, &p);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_decode(s, &r, &pid, NULL, 1, 1, 8), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_str_eq(out[0].frames[0].file, "\xc3\xb6.erl");
	fp_assert_str_eq(out[0].registered_name, "s\xc3\xb6" "k");
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

START_TEST(decode_proc_lib_initial_call)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[2] = { { 80, 0 }, { 81, 0 } };
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	/* [{my_server, init, ['Argument__1']}, false] */
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 2);
	ei_x_encode_tuple_header(&x, 3);
	ei_x_encode_atom(&x, "my_server");
	ei_x_encode_atom(&x, "init");
	ei_x_encode_list_header(&x, 1);
	ei_x_encode_atom(&x, "Argument__1");
	ei_x_encode_empty_list(&x);
	ei_x_encode_atom(&x, "false");
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_initial_calls(s, &r, pids, 2), 0);
	ei_x_free(&x);

	/* The sample's own proc_lib:init_p/5 does not override it, also
	 * after the process left the set and came back. */
	for (int round = 0; round < 2; round++) {
		ei_x_new_with_version(&x);
		ei_x_encode_list_header(&x, 1);
		enc_proc(&x, &proc_a);
		ei_x_encode_empty_list(&x);
		r = reply_of(&x);
		fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 1, 1, 8), 1);
		out = fp_sampler_samples(s, &n);
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

/* A dictionary read's {{dictionary, '$initial_call'}, {M, F, Arity}}. */
START_TEST(decode_dict_initial_call)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[3] = { { 80, 0 }, { 81, 0 }, { 82, 0 } };
	const struct fp_sample *out;
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 3);
	ei_x_encode_tuple_header(&x, 2);
	ei_x_encode_tuple_header(&x, 2);
	ei_x_encode_atom(&x, "dictionary");
	ei_x_encode_atom(&x, "$initial_call");
	ei_x_encode_tuple_header(&x, 3);
	ei_x_encode_atom(&x, "my_server");
	ei_x_encode_atom(&x, "init");
	ei_x_encode_long(&x, 1);
	ei_x_encode_tuple_header(&x, 2);	/* no such key */
	ei_x_encode_tuple_header(&x, 2);
	ei_x_encode_atom(&x, "dictionary");
	ei_x_encode_atom(&x, "$initial_call");
	ei_x_encode_atom(&x, "undefined");
	ei_x_encode_atom(&x, "undefined");	/* gone */
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_initial_calls(s, &r, pids, 3), 0);
	ei_x_free(&x);

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 1);
	enc_proc(&x, &proc_a);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 1, 1, 8), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_str_eq(out[0].initial_call.module, "my_server");
	fp_assert_int_eq(out[0].initial_call.arity, 1);
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

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 1);
	enc_proc(&x, p);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_decode(s, &r, &pid, NULL, 1, 1, 8), 1);
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
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 1, 8), -EBADMSG);
	fp_assert(fp_sampler_wants_initial_call(s, pids[0]));
	ei_x_free(&x);

	/* {badrpc, _} is refused too */
	r.badrpc = true;
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 2, 1, 8), -EBADMSG);
	fp_sampler_destroy(s);
}
END_TEST

/* ---- selection ---- */

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
	ei_x_encode_tuple_header(x, 5);
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

/*
 * One selection: plan, and answer as the node's scan would (the window
 * from the cursor, an integer position as lists:sublist/3 takes it), with
 * reds[pid.num - 100] (-1: dead). Returns the pids read.
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

/* Bounded scan: a window of scan_max moving by half, from the first
 * selection on; the hot process is found within 2 * N / scan_max
 * selections and kept once found. */
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
			reds[i] += i == HOT ? 1000 : 1;
		planned = scan(sel, reds, round * 1000000, keep, nkeep, 5,
			       NULL, 0, out, &n, &res);
		/* never more than scan_max, the first selections included
		 * (less where the window meets the end of the table) */
		fp_assert(planned <= MAX && planned > nkeep);
		fp_assert_int_eq(res.scanned, planned);
		fp_assert(!res.full);
		fp_assert_int_eq(res.processes, N);
		if (n > 0 && out[0].num == 100 + HOT && !found_at)
			found_at = round;
		if (found_at) {
			fp_assert_int_eq(out[0].num, 100 + HOT);
		}
		memcpy(keep, out, (size_t)n * sizeof(*out));
		nkeep = (size_t)n;
	}
	/* The first window is read twice; every process does a reduction a
	 * round, so five are kept from the second on and the window moves by
	 * 48: the 17th and 18th windows (starting at 723 and 771) hold it. */
	fp_assert_int_eq(found_at, 18);
	fp_assert(found_at <= 2 * N / MAX);
	fp_select_destroy(sel);
}
END_TEST

/* A caller's limit shrinks the scan; the first window is read twice, so
 * what is hot in it is found at the first ranking; a kept pid that is in
 * the window too is read once; the whole node is read when it fits. */
START_TEST(select_limit)
{
	enum { N = 50 };
	struct fp_select *sel = fp_select_new(1000);
	static long reds[N];
	struct fp_pid out[3], keep[1] = { { 101, 0 } };
	struct fp_select_result res;
	int n;

	send_processes(sel, N);
	fp_assert_int_eq(scan_limited(sel, reds, 1000000, NULL, 0, 10, 3,
				      NULL, 0, out, &n, &res), 10);
	fp_assert(!res.full);
	fp_assert(res.baseline);
	reds[1] = 500;
	reds[3] = 100;
	fp_assert_int_eq(scan_limited(sel, reds, 2000000, keep, 1, 10, 3,
				      NULL, 0, out, &n, &res), 10);
	/* the same window (100..108) and 101 kept: read once */
	fp_assert_int_eq(res.alive, 9);
	fp_assert_int_eq(n, 2);
	fp_assert_int_eq(out[0].num, 101);
	fp_assert_int_eq(out[1].num, 103);
	/* no limit: the whole node, and the rates go on */
	reds[1] = 1500;
	fp_assert_int_eq(scan(sel, reds, 3000000, keep, 1, 3, NULL, 0, out, &n,
			      &res), N);
	fp_assert(res.full);
	fp_assert_int_eq(n, 1);
	fp_assert_int_eq(out[0].num, 101);
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

/* The gate in front of ei: lengths, nesting, and no text floats. */
/* The head of a frame, {M, F, Arity, ...: the caller adds the location. */
static void
enc_mfa(ei_x_buff *x, const char *m, const char *f, long arity)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, m);
	ei_x_encode_atom(x, f);
	ei_x_encode_long(x, arity);
}

/* {lists, F, 1, [{file, "lists.erl"}, {line, Line}]}, atoms as @enc
 * (ERLANG_UTF8: SMALL_ATOM_UTF8_EXT; ERLANG_LATIN1: ATOM_EXT) */
static void
enc_frame(ei_x_buff *x, const char *f, long line, erlang_char_encoding enc)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom_as(x, "lists", ERLANG_UTF8, enc);
	ei_x_encode_atom_as(x, f, ERLANG_UTF8, enc);
	ei_x_encode_long(x, 1);
	ei_x_encode_list_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom_as(x, "file", ERLANG_UTF8, enc);
	ei_x_encode_string(x, "lists.erl");
	enc_kv_long(x, "line", line);
	ei_x_encode_empty_list(x);
}

/*
 * The straight-line frame skip: takes the shapes process_info sends,
 * leaves everything else to the general walk, and where it takes a frame
 * ends where the walk does; cut short anywhere it refuses (exact-size
 * copies, for the sanitizers).
 */
START_TEST(skip_frame)
{
	enum { FAST, WALK };
	static const struct {
		const char *what;
		int path;
	} cases[] = {
		{ "utf8 atoms, small line", FAST },
		{ "latin-1 atoms, line > 255", FAST },
		{ "no location", FAST },
		{ "args instead of arity", WALK },
		{ "file as code points", WALK },
		{ "error_info map", WALK },
		{ "three-tuple", WALK },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		ei_x_buff x;
		size_t start = 1, fast = 1, walk = 1;

		ei_x_new_with_version(&x);
		switch (c) {
		case 0: enc_frame(&x, "foldl", 12, ERLANG_UTF8); break;
		case 1: enc_frame(&x, "foldl", 70000, ERLANG_LATIN1); break;
		case 2:
			enc_mfa(&x, "erlang", "apply", 2);
			ei_x_encode_empty_list(&x);
			break;
		case 3:
			ei_x_encode_tuple_header(&x, 4);
			ei_x_encode_atom(&x, "erlang");
			ei_x_encode_atom(&x, "+");
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_long(&x, 1);
			ei_x_encode_empty_list(&x);
			ei_x_encode_empty_list(&x);
			break;
		case 4:
			enc_mfa(&x, "m", "f", 0);
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_tuple_header(&x, 2);
			ei_x_encode_atom(&x, "file");
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_long(&x, 0x3b1);
			ei_x_encode_empty_list(&x);
			ei_x_encode_empty_list(&x);
			break;
		case 5:
			enc_mfa(&x, "m", "f", 0);
			ei_x_encode_list_header(&x, 1);
			ei_x_encode_tuple_header(&x, 2);
			ei_x_encode_atom(&x, "error_info");
			ei_x_encode_map_header(&x, 0);
			ei_x_encode_empty_list(&x);
			break;
		case 6:
			ei_x_encode_tuple_header(&x, 3);
			ei_x_encode_atom(&x, "m");
			ei_x_encode_atom(&x, "f");
			ei_x_encode_long(&x, 0);
			break;
		}
		/* the whole frame */
		fp_assert_int_eq(etf_skip_frame((unsigned char *)x.buff,
						(size_t)x.index, &fast),
				 cases[c].path == FAST ? 0 : -1);
		fp_assert_int_eq(etf_skip_plain((unsigned char *)x.buff,
						(size_t)x.index, &walk), 0);
		fp_assert_int_eq(walk, (size_t)x.index);
		if (cases[c].path == FAST)
			fp_assert_int_eq(fast, walk);
		fast = walk = start;
		fp_assert_int_eq(etf_skip_frame_or_plain((unsigned char *)x.buff,
							 (size_t)x.index, &fast), 0);
		fp_assert_int_eq(fast, (size_t)x.index);

		/* cut short: refused by both */
		for (size_t len = 1; len < (size_t)x.index; len++) {
			unsigned char *copy = malloc(len);

			memcpy(copy, x.buff, len);
			fast = walk = start;
			fp_assert_int_eq(etf_skip_frame(copy, len, &fast), -1);
			fp_assert_int_eq(etf_skip_plain(copy, len, &walk), -1);
			fp_assert_int_eq(fast, start);
			free(copy);
		}
		ei_x_free(&x);
	}
}
END_TEST

/* A process with only a stack (and reductions): @order names the frames,
 * top first. */
static void
enc_stack_proc(ei_x_buff *x, const char *const *order, int n)
{
	ei_x_encode_list_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "current_stacktrace");
	ei_x_encode_list_header(x, n);
	for (int i = 0; i < n; i++)
		enc_frame(x, order[i], 10 + order[i][0], ERLANG_UTF8);
	ei_x_encode_empty_list(x);
	enc_kv_long(x, "reductions", 1);
	ei_x_encode_empty_list(x);
}

/*
 * New stacks made of known frames (a process moving through code it ran
 * before): each stack is new, each frame comes from the cache with the id
 * it had, and a stack another process sent is found by its bytes.
 */
START_TEST(decode_known_frames)
{
	static const char *const abc[] = { "a", "b", "c" },
			  *const cab[] = { "c", "a", "b" },
			  *const bc[] = { "b", "c" };
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[3] = { { 80, 0 }, { 81, 0 }, { 82, 0 } };
	const struct fp_sample *out;
	struct fp_cache_stats st;
	uint64_t ids[3];
	struct fp_reply r;
	ei_x_buff x;
	size_t n;

	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 1);
	enc_stack_proc(&x, abc, 3);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 1, 1, 8), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(out[0].nframes, 3);
	for (int i = 0; i < 3; i++) {
		ids[i] = out[0].frames[i].id;
		fp_assert(ids[i] != 0);
	}
	fp_assert_str_eq(out[0].frames[1].function, "b");
	fp_assert_int_eq(out[0].frames[2].line, 10 + 'c');
	ei_x_free(&x);

	/* the same process elsewhere, two others: c a b, a b c, b c */
	ei_x_new_with_version(&x);
	ei_x_encode_list_header(&x, 3);
	enc_stack_proc(&x, cab, 3);
	enc_stack_proc(&x, abc, 3);
	enc_stack_proc(&x, bc, 2);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	fp_assert_int_eq(fp_sampler_decode(s, &r, pids, NULL, 3, 2, 8), 3);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(out[0].frames[0].id, ids[2]);
	fp_assert_int_eq(out[0].frames[1].id, ids[0]);
	fp_assert_int_eq(out[0].frames[2].id, ids[1]);
	fp_assert_str_eq(out[0].frames[0].function, "c");
	fp_assert_str_eq(out[0].frames[0].file, "lists.erl");
	fp_assert_int_eq(out[2].nframes, 2);
	fp_assert_int_eq(out[2].frames[0].id, ids[1]);
	fp_assert(out[0].stack_id != out[1].stack_id);
	fp_assert(out[2].stack_id != out[1].stack_id);
	fp_sampler_cache_stats(s, &st);
	fp_assert_int_eq(st.frame_misses, 3);	/* the first three only */
	fp_assert_int_eq(st.stack_misses, 3);	/* abc, cab, bc */
	fp_assert_int_eq(st.stack_hits, 1);	/* abc from another process */

	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

/*
 * Stacks at the edges of the encoding: [] written as a LIST_EXT of none
 * (an empty stack), the same with a tail that is not [], a count the
 * bytes cannot hold, elements that are not frames.
 */
START_TEST(decode_stack_edges)
{
	static const struct {
		const char *bytes;
		int len;
		int result;
	} cases[] = {
		{ "l\0\0\0\0j", 6, 1 },
		{ "l\0\0\0\0a\1", 7, -EBADMSG },
		{ "l\x7f\xff\xff\xffj", 6, -EBADMSG },
		{ "l\0\0\0\3jjjj", 9, -EBADMSG },
	};
	struct fp_pid pid = { 80, 0 };

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct fp_sampler *s = fp_sampler_new();
		const struct fp_sample *out;
		struct fp_reply r;
		ei_x_buff x;
		size_t n;

		ei_x_new_with_version(&x);
		ei_x_encode_list_header(&x, 1);
		ei_x_encode_list_header(&x, 2);
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "current_stacktrace");
		ei_x_append_buf(&x, cases[c].bytes, cases[c].len);
		enc_kv_long(&x, "reductions", 1);
		ei_x_encode_empty_list(&x);
		ei_x_encode_empty_list(&x);
		r = reply_of(&x);
		/* twice: the second time through the caches */
		for (int pass = 0; pass < 2; pass++)
			fp_assert_int_eq(fp_sampler_decode(s, &r, &pid, NULL, 1,
							   1 + pass, 8),
					 cases[c].result);
		if (cases[c].result == 1) {
			out = fp_sampler_samples(s, &n);
			fp_assert_int_eq(n, 1);
			fp_assert_int_eq(out[0].nframes, 0);
			fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], 1);
		}
		ei_x_free(&x);
		fp_sampler_destroy(s);
	}
}
END_TEST

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

/* ---- --request helper: batches and the module's name ------------------ */

/* term_to_binary({Time, Pids, Asks, Results}) of a row: pid 80 in full
 * (@p's items in two lists) and, with @probe81, pid 81 probed. */
static void
enc_row(ei_x_buff *x, long time, const struct proc *p,
	const struct proc *probe81, const char *asks_override,
	int nasks_override)
{
	struct proc rest = *p;
	ei_x_buff row;
	char asks[2] = { FP_ASK_FULL, FP_ASK_PROBE };

	ei_x_new_with_version(&row);
	ei_x_encode_tuple_header(&row, 4);
	ei_x_encode_long(&row, time);
	ei_x_encode_list_header(&row, 1 + (probe81 != NULL));
	enc_pid(&row, 80);
	if (probe81)
		enc_pid(&row, 81);
	ei_x_encode_empty_list(&row);
	if (asks_override)
		ei_x_encode_binary(&row, asks_override, nasks_override);
	else
		ei_x_encode_binary(&row, asks, 1 + (probe81 != NULL));
	ei_x_encode_list_header(&row, 2 + (probe81 != NULL));
	rest.no_status = true;
	enc_status(&row, p->status);
	enc_proc(&row, &rest);
	if (probe81)
		enc_probe(&row, probe81);
	ei_x_encode_empty_list(&row);
	ei_x_encode_binary(x, row.buff, row.index);
	ei_x_free(&row);
}

static void
enc_batch_head(ei_x_buff *x, long rows, bool last)
{
	ei_x_encode_tuple_header(x, 6);
	ei_x_encode_atom(x, "flame_profd_batch");
	ei_x_encode_long(x, 1000);
	ei_x_encode_long(x, 77);
	ei_x_encode_long(x, 3);
	ei_x_encode_boolean(x, last);
	if (rows)
		ei_x_encode_list_header(x, rows);
}

/* A batch's rows decode into what fp_sampler_decode() takes. */
START_TEST(batch_rows)
{
	struct fp_sampler *s = fp_sampler_new();
	struct fp_pid pids[4];
	enum fp_ask asks[4];
	struct fp_batch b;
	struct fp_batch_row row;
	struct fp_reply r;
	struct proc idle1 = proc_idle;
	const struct fp_sample *out;
	size_t n;
	ei_x_buff x;

	idle1.reductions = 1001;	/* the full sample's signal */
	ei_x_new_with_version(&x);
	enc_batch_head(&x, 3, true);
	enc_row(&x, 500, &proc_a, NULL, NULL, 0);
	{
		/* pid 81 in full first, then probed */
		ei_x_buff rb;
		struct proc rest = proc_idle;
		char asks2[2] = { FP_ASK_FULL, FP_ASK_FULL };

		ei_x_new_with_version(&rb);
		ei_x_encode_tuple_header(&rb, 4);
		ei_x_encode_long(&rb, 520);
		ei_x_encode_list_header(&rb, 2);
		enc_pid(&rb, 80);
		enc_pid(&rb, 81);
		ei_x_encode_empty_list(&rb);
		ei_x_encode_binary(&rb, asks2, 2);
		ei_x_encode_list_header(&rb, 4);
		rest.no_status = true;
		for (int k = 0; k < 2; k++) {
			enc_status(&rb, "running");
			enc_proc(&rb, k ? &rest : &proc_a);
		}
		ei_x_encode_empty_list(&rb);
		ei_x_encode_binary(&x, rb.buff, rb.index);
		ei_x_free(&rb);
	}
	enc_row(&x, 540, &proc_a, &idle1, NULL, 0);
	ei_x_encode_empty_list(&x);
	r = reply_of(&x);
	r.checked = true;

	fp_assert_int_eq(fp_node_batch_open(&r, &b), 0);
	fp_assert_int_eq(b.sent_us, 1000);
	fp_assert_int_eq(b.work_us, 77);
	fp_assert_int_eq(b.skipped, 3);
	fp_assert(b.last);
	fp_assert_int_eq(b.rows, 3);

	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 1);
	fp_assert_int_eq(row.time_us, 500);
	fp_assert_int_eq(row.n, 1);
	fp_assert_int_eq(pids[0].num, 80);
	fp_assert_int_eq(asks[0], FP_ASK_FULL);
	fp_assert_int_eq(fp_sampler_decode(s, &row.results, pids, asks, row.n,
					   row.time_us, 8), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_str_eq(out[0].registered_name, "my_server");
	fp_assert_int_eq(out[0].value[FP_METRIC_REDUCTIONS], 1000);

	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 1);
	fp_assert_int_eq(row.n, 2);
	fp_assert_int_eq(fp_sampler_decode(s, &row.results, pids, asks, row.n,
					   row.time_us, 8), 2);

	/* the probe of 81 finds it where its full sample left it (plus
	 * that sample's signal): a sample without a stack of its own */
	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 1);
	fp_assert_int_eq(row.n, 2);
	fp_assert_int_eq(pids[1].num, 81);
	fp_assert_int_eq(asks[1], FP_ASK_PROBE);
	fp_assert_int_eq(fp_sampler_decode(s, &row.results, pids, asks, row.n,
					   row.time_us, 8), 2);
	fp_assert_int_eq(fp_sampler_reused(s), 1);
	out = fp_sampler_samples(s, &n);
	fp_assert_int_eq(out[1].time_us, 540);
	fp_assert_int_eq(out[1].nframes, 2);

	fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, 4), 0);
	ei_x_free(&x);
	fp_sampler_destroy(s);
}
END_TEST

START_TEST(batch_bad)
{
	struct fp_pid pids[4];
	enum fp_ask asks[4];
	struct fp_batch b;
	struct fp_batch_row row;
	struct fp_reply r;
	int open_rc = 0, row_rc = -EBADMSG;
	size_t max = 4;
	ei_x_buff x;

	ei_x_new_with_version(&x);
	switch (_i) {
	case 0:		/* the helper failed */
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "flame_profd_error");
		ei_x_encode_atom(&x, "badarg");
		open_rc = -EPROTO;
		break;
	case 1:		/* no batch */
		ei_x_encode_tuple_header(&x, 2);
		ei_x_encode_atom(&x, "flame_profd_batch");
		ei_x_encode_long(&x, 1);
		open_rc = -EBADMSG;
		break;
	case 2:		/* a negative count */
		ei_x_encode_tuple_header(&x, 6);
		ei_x_encode_atom(&x, "flame_profd_batch");
		ei_x_encode_long(&x, 1);
		ei_x_encode_long(&x, -5);
		ei_x_encode_long(&x, 0);
		ei_x_encode_boolean(&x, 0);
		ei_x_encode_empty_list(&x);
		open_rc = -EBADMSG;
		break;
	case 3:		/* asks shorter than the pids */
		enc_batch_head(&x, 1, false);
		enc_row(&x, 5, &proc_a, &proc_idle, "\0", 1);
		ei_x_encode_empty_list(&x);
		break;
	case 4:		/* an ask that is none */
		enc_batch_head(&x, 1, false);
		enc_row(&x, 5, &proc_a, NULL, "\7", 1);
		ei_x_encode_empty_list(&x);
		break;
	case 5:		/* more pids than room */
		enc_batch_head(&x, 1, false);
		enc_row(&x, 5, &proc_a, &proc_idle, NULL, 0);
		ei_x_encode_empty_list(&x);
		max = 1;
		break;
	case 6:		/* a row that is no term */
		enc_batch_head(&x, 1, false);
		ei_x_encode_binary(&x, "\203h\2a", 4);
		ei_x_encode_empty_list(&x);
		break;
	case 7:		/* a row that is not a binary */
		enc_batch_head(&x, 1, false);
		ei_x_encode_atom(&x, "row");
		ei_x_encode_empty_list(&x);
		break;
	}
	r = reply_of(&x);
	fp_assert_int_eq(fp_node_batch_open(&r, &b), open_rc);
	if (open_rc == 0)
		fp_assert_int_eq(fp_node_batch_row(&b, &row, pids, asks, max), row_rc);
	ei_x_free(&x);
}
END_TEST

/* The module's name is its first atom: renamed in place, same length. */
START_TEST(beam_rename)
{
	unsigned char *beam = malloc(fp_helper_beam_len);
	/* FOR1, BEAM, and an AtU8 chunk of the OTP 26 kind: a negative
	 * count, lengths as compact terms (18 takes two bytes) */
	unsigned char compact[] = "FOR1\0\0\0\x24" "BEAM" "AtU8\0\0\0\x18"
				  "\xff\xff\xff\xff\x08\x12" "flame_profd_helper";

	memcpy(beam, fp_helper_beam, fp_helper_beam_len);
	fp_assert(memmem(beam, fp_helper_beam_len, "flame_profd_helper", 18));
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "flame_profd_helper",
					  "fpdh_0123456789abc"), 0);
	fp_assert(!memmem(beam, fp_helper_beam_len, "flame_profd_helper", 18));
	fp_assert(memmem(beam, fp_helper_beam_len, "fpdh_0123456789abc", 18));
	/* no longer the module named */
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "flame_profd_helper",
					  "fpdh_0123456789abd"), -EINVAL);
	/* names of other lengths, short and foreign images */
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "fpdh_0123456789abc", "x"), -EINVAL);
	fp_assert_int_eq(node_beam_rename(beam, 40, "fpdh_0123456789abc",
					  "fpdh_0123456789abd"), -EINVAL);
	beam[0] = 'X';
	fp_assert_int_eq(node_beam_rename(beam, fp_helper_beam_len,
					  "fpdh_0123456789abc",
					  "fpdh_0123456789abd"), -EINVAL);

	fp_assert_int_eq(node_beam_rename(compact, sizeof(compact) - 1,
					  "flame_profd_helper",
					  "fpdh_0123456789abc"), 0);
	fp_assert(memmem(compact, sizeof(compact) - 1, "fpdh_0123456789abc", 18));
	free(beam);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("sample");
	TCase *tc;

	tc = tcase_create("decode");
	tcase_add_test(tc, decode_sample);
	tcase_add_test(tc, decode_pairs);
	tcase_add_test(tc, decode_tags);
	tcase_add_test(tc, decode_probe);
	tcase_add_loop_test(tc, decode_probe_stale, 0, 10);
	tcase_add_test(tc, decode_probe_mixed);
	tcase_add_test(tc, decode_cache);
	tcase_add_test(tc, decode_unchecked_truncated);
	tcase_add_test(tc, decode_cache_bound);
	tcase_add_test(tc, decode_known_frames);
	tcase_add_test(tc, skip_frame);
	tcase_add_test(tc, decode_stack_edges);
	tcase_add_test(tc, decode_deltas);
	tcase_add_test(tc, decode_unicode_file);
	tcase_add_test(tc, decode_proc_lib_initial_call);
	tcase_add_test(tc, decode_dict_initial_call);
	tcase_add_test(tc, proc_lib_call_asked_once);
	tcase_add_loop_test(tc, decode_bad, 0, 6);
	tcase_add_test(tc, decode_pids);
	tcase_add_test(tc, term_check);
	suite_add_tcase(s, tc);

	tc = tcase_create("select");
	tcase_add_test(tc, select_by_delta);
	tcase_add_test(tc, select_floor);
	tcase_add_test(tc, select_newborn);
	tcase_add_test(tc, select_many);
	tcase_add_test(tc, select_window);
	tcase_add_test(tc, select_limit);
	tcase_add_test(tc, select_bad);
	suite_add_tcase(s, tc);

	tc = tcase_create("helper");
	tcase_add_test(tc, batch_rows);
	tcase_add_loop_test(tc, batch_bad, 0, 8);
	tcase_add_test(tc, beam_rename);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
