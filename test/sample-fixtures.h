/*
 * flame_profd — unit tests: replies as the node sends them
 * (sample-fixtures.c), shared by the test-sample-*.c files.
 */
#pragma once

#include <ei.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/sample.h"

#define NODE "app@host"

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

/* A pid of NODE. */
void
enc_pid(ei_x_buff *x, unsigned num);

/* {Key, V} */
void
enc_kv_long(ei_x_buff *x, const char *key, long v);

/* One element of the zipwith result: @p's items, a two-frame stack. */
void
enc_proc(ei_x_buff *x, const struct proc *p);

/* [{status, S}] as the first of a pair */
void
enc_status(ei_x_buff *x, const char *status);

/* The first list of a full ask: status, registered_name,
 * message_queue_len, reductions. */
void
enc_instant(ei_x_buff *x, const char *status, long mq, long reds);

/* What FP_ASK_PROBE asks: the items read without a signal. */
void
enc_probe(ei_x_buff *x, const struct proc *p);

/* [P1, P2, ...]: a sample reply of @n processes, into a new @x. */
struct fp_reply
reply_procs(ei_x_buff *x, const struct proc *const *procs, size_t n);

/* The reply whose result is @x's term (after its version byte). */
struct fp_reply
reply_of(ei_x_buff *x);

/* fp_sampler_decode() of @r (wordsize 8), asserted to return @want; the
 * samples, and their count into *n unless NULL. */
const struct fp_sample *
decode_expect(struct fp_sampler *s, const struct fp_reply *r,
	      const struct fp_pid *pids, const enum fp_ask *asks, size_t npids,
	      uint64_t time_us, int want, size_t *n);

/* A busy process and an idle one. */
extern const struct proc proc_a, proc_idle;
