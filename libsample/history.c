/*
 * flame_profd — each sampled process's history: the last values (for
 * deltas), the last stack (for probes that find it idle), its names.
 */
#include <stdlib.h>
#include <string.h>

#include "fp/sample.h"
#include "sampler-private.h"

void
sampler_proc_release(struct proc_state *st, size_t ntags)
{
	free(st->ic_module);
	free(st->ic_function);
	st->ic_module = st->ic_function = NULL;
	for (size_t k = 0; st->tags && k < ntags; k++) {
		free(st->tags[k].raw);
		free(st->tags[k].text);
	}
	free(st->tags);
	st->tags = NULL;
}

void
fp_sampler_retain(struct fp_sampler *s, const struct fp_pid *pids, size_t n)
{
	struct pidmap keep;
	size_t it = 0;
	uint64_t key;
	void *v;

	pidmap_init(&keep, sizeof(struct proc_state));
	for (size_t i = 0; i < n; i++) {
		struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pids[i]));
		bool created;

		if (st && !pidmap_find(&keep, fp_pid_key(pids[i]))) {
			memcpy(pidmap_insert(&keep, fp_pid_key(pids[i]), &created),
			       st, sizeof(*st));
			/* ownership of the strings moved to keep */
			st->ic_module = st->ic_function = NULL;
			st->tags = NULL;
		}
	}
	while (pidmap_next(&s->procs, &it, &key, &v))
		sampler_proc_release(v, s->ntags);
	pidmap_release(&s->procs);
	s->procs = keep;
}

void
sampler_apply_history(struct fp_sampler *s, const char *buf, size_t i,
		      const struct cached_stack *stack, bool reused)
{
	struct fp_sample *smp = &s->samples[i];
	int64_t reds = smp->value[FP_METRIC_REDUCTIONS];
	struct proc_state *st;
	bool created;

	st = pidmap_insert(&s->procs, fp_pid_key(smp->pid), &created);
	sampler_apply_tags(s, buf, i, st, reused);
	st->last_stack = stack;
	st->last_gen = s->cache_gen;
	st->idle = reused || (st->have_prev && reds == st->expect_reds);
	/* a full sample is a signal the process answered after reading its
	 * reductions; a reused one read them without */
	st->expect_reds = reused ? reds : reds + 1;
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		int64_t v = smp->value[m], d = 0;

		if (st->have_prev) {
			/* Saturate rather than wrap on absurd values. */
			if (__builtin_sub_overflow(v, st->prev[m], &d))
				d = v < st->prev[m] ? INT64_MIN : INT64_MAX;
			if (fp_metric_is_counter((enum fp_metric)m) && d < 0)
				d = v;	/* reset: count since the reset */
		}
		smp->delta[m] = d;
		st->prev[m] = v;
	}
	smp->has_delta = st->have_prev;
	st->have_prev = true;
	st->prev_us = smp->time_us;

	/* The node's own initial_call names proc_lib for every OTP
	 * process; proc_lib's answer, once we have it, is the useful one
	 * (remembered while the process lives, in the set or not). */
	if (smp->has_initial_call && !st->ic_from_proc_lib) {
		const struct ic_memo *memo = pidmap_find(&s->ic_memo,
							 fp_pid_key(smp->pid));

		if (memo && memo->module) {
			sampler_set_initial_call(st, memo->module, memo->function,
					 memo->arity);
			st->ic_from_proc_lib = true;
		} else {
			sampler_set_initial_call(st, smp->initial_call.module,
					 smp->initial_call.function,
					 smp->initial_call.arity);
		}
	}
	if (st->ic_module) {
		smp->has_initial_call = true;
		smp->initial_call.module = st->ic_module;
		smp->initial_call.function = st->ic_function;
		smp->initial_call.arity = st->ic_arity;
		smp->initial_call.file = NULL;
		smp->initial_call.line = 0;
	}
}

/*
 * A probe of a process that has not run since its last sample: the
 * reductions where that sample left them, nothing that running or
 * receiving changes moved, and the stack still cached. Then the sample is
 * the old one with the fresh values.
 */
bool
sampler_reuse_probe(struct fp_sampler *s, const struct proc_state *st,
		    struct fp_sample *smp, const struct cached_stack **used)
{
	static const enum fp_metric same[] = {
		FP_METRIC_MESSAGE_QUEUE_LEN, FP_METRIC_HEAP_SIZE,
		FP_METRIC_STACK_SIZE, FP_METRIC_MINOR_GCS,
	};
	static const enum fp_metric kept[] = {
		FP_METRIC_MEMORY, FP_METRIC_TOTAL_HEAP_SIZE,
		FP_METRIC_BINARY_BYTES,
	};

	if (!st || !st->have_prev || !st->last_stack ||
	    st->last_gen != s->cache_gen)
		return false;
	if (smp->status != FP_STATUS_WAITING && smp->status != FP_STATUS_RUNNABLE &&
	    smp->status != FP_STATUS_SUSPENDED)
		return false;
	if (smp->value[FP_METRIC_REDUCTIONS] != st->expect_reds)
		return false;
	for (size_t k = 0; k < sizeof(same) / sizeof(same[0]); k++) {
		if (smp->value[same[k]] != st->prev[same[k]])
			return false;
	}
	for (size_t k = 0; k < sizeof(kept) / sizeof(kept[0]); k++)
		smp->value[kept[k]] = st->prev[kept[k]];
	sampler_copy_stack(s, st->last_stack, smp, used);
	return true;
}

bool
fp_sampler_idle(const struct fp_sampler *s, struct fp_pid pid)
{
	const struct proc_state *st = pidmap_find(&s->procs, fp_pid_key(pid));

	return st && st->idle && st->last_stack && st->last_gen == s->cache_gen;
}

