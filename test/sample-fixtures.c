/*
 * flame_profd — unit tests: replies as the node sends them, built with
 * ei's encoder, shared by the test-sample-*.c files.
 */
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "sample-fixtures.h"

void
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

void
enc_kv_long(ei_x_buff *x, const char *key, long v)
{
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, key);
	ei_x_encode_long(x, v);
}

/* One element of the zipwith result. */
void
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

struct fp_reply
reply_of(ei_x_buff *x)
{
	return (struct fp_reply){ .id = 1, .buf = x->buff,
				   .len = (size_t)x->index, .index = 1 };
}

const struct proc proc_a = {
	.status = "running", .name = "my_server",
	.reductions = 1000, .memory = 5000, .mq = 10, .heap = 300,
	.total_heap = 600, .stack = 20, .minor_gcs = 7,
	.bin_vheap = 100, .bin_old_vheap = 28, .with_initial_call = true,
};

void
enc_status(ei_x_buff *x, const char *status)
{
	ei_x_encode_list_header(x, 1);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "status");
	ei_x_encode_atom(x, status);
	ei_x_encode_empty_list(x);
}

/* The first list of a full ask as the daemon asks it: status, registered
 * name (none), message queue length and reductions. */
void
enc_instant(ei_x_buff *x, const char *status, long mq, long reds)
{
	ei_x_encode_list_header(x, 4);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "status");
	ei_x_encode_atom(x, status);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "registered_name");
	ei_x_encode_empty_list(x);
	enc_kv_long(x, "message_queue_len", mq);
	enc_kv_long(x, "reductions", reds);
	ei_x_encode_empty_list(x);
}

/* What FP_ASK_PROBE asks: the items read without a signal. */
void
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

const struct proc proc_idle = {
	.status = "waiting", .name = "idler",
	.reductions = 1000, .memory = 5000, .mq = 2, .heap = 300,
	.total_heap = 600, .stack = 20, .minor_gcs = 7,
	.bin_vheap = 100, .bin_old_vheap = 28,
};

const struct fp_sample *
decode_expect(struct fp_sampler *s, const struct fp_reply *r,
	      const struct fp_pid *pids, const enum fp_ask *asks, size_t npids,
	      uint64_t time_us, int want, size_t *n)
{
	size_t got;

	fp_assert_int_eq(fp_sampler_decode(s, r, pids, asks, npids, time_us, 8),
			 want);
	return fp_sampler_samples(s, n ? n : &got);
}

struct fp_reply
reply_procs(ei_x_buff *x, const struct proc *const *procs, size_t n)
{
	ei_x_new_with_version(x);
	ei_x_encode_list_header(x, (long)n);
	for (size_t i = 0; i < n; i++)
		enc_proc(x, procs[i]);
	ei_x_encode_empty_list(x);
	return reply_of(x);
}
