/*
 * flame_profd — a node session's sampling: the set of processes sampled
 * round robin and what is owed of them, shared by the samplers
 * (sampling.h), and the writing of what they take.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loop.h"
#include "session-int.h"
#include "util-mem.h"

/* The sampler of each request path: the slots ask, the helper is told. */
static const struct fpd_sampling_ops *const samplers[] = {
	[FP_REQUEST_REX] = &fpd_sampling_slots,
	[FP_REQUEST_EVAL] = &fpd_sampling_slots,
	[FP_REQUEST_HELPER] = &fpd_sampling_helper,
};

void
fpd_sampling_init(struct fpd_session *s)
{
	size_t cap = set_capacity(s->o), n = cap ? cap : 1;

	s->sm.set = xzalloc(n * sizeof(*s->sm.set));
	s->sm.ops = samplers[fp_node_request_path(s->node)];
	s->sm.state = s->sm.ops->new(s);
}

void
fpd_sampling_release(struct fpd_session *s)
{
	s->sm.ops->destroy(s->sm.state);
	free(s->sm.set);
}

/* ---- the sample set --------------------------------------------------- */

/* @pid's place in @set, or SIZE_MAX. */
static size_t
set_find(const struct fp_pid *set, size_t n, struct fp_pid pid)
{
	for (size_t i = 0; i < n; i++) {
		if (set[i].num == pid.num && set[i].serial == pid.serial)
			return i;
	}
	return SIZE_MAX;
}

static void
add_to_set(struct fpd_session *s, struct fp_pid pid)
{
	if (s->sm.nset < set_capacity(s->o) && set_find(s->sm.set, s->sm.nset, pid) == SIZE_MAX)
		s->sm.set[s->sm.nset++] = pid;
}

size_t
fpd_sampling_find(const struct fpd_session *s, struct fp_pid pid)
{
	return set_find(s->sm.set, s->sm.nset, pid);
}

void
fpd_sampling_rebuild(struct fpd_session *s)
{
	struct sampling *sm = &s->sm;
	const struct targets *t = &s->t;

	sm->nset = 0;
	for (size_t i = 0; i < s->o->npids; i++) {
		if (t->pin_state[i] == FP_PID_ALIVE)
			add_to_set(s, t->pinned[i]);
	}
	for (size_t i = 0; i < s->o->nnames; i++) {
		if (t->name_found[i])
			add_to_set(s, t->named[i]);
	}
	for (size_t i = 0; i < t->ntop; i++)
		add_to_set(s, t->top[i]);
	fp_sampler_retain(s->sampler, sm->set, sm->nset);
	sm->set_gen++;
	if (sm->ops->set_changed)
		sm->ops->set_changed(s);
}

void
fpd_sampling_connected(struct fpd_session *s, uint64_t now)
{
	if (s->sm.ops->connected)
		s->sm.ops->connected(s, now);
}

void
fpd_sampling_reset(struct fpd_session *s)
{
	if (s->sm.ops->reset)
		s->sm.ops->reset(s);
	s->sm.nset = 0;
}

void
fpd_sampling_abandon(struct fpd_session *s)
{
	if (s->sm.ops->abandon)
		s->sm.ops->abandon(s);
}

void
fpd_sampling_tick(struct fpd_session *s, uint64_t now)
{
	struct sampling *sm = &s->sm;
	double per_us = (double)sm->nset * s->cost.budget.rate / 1e6;

	if (sm->last_tick_mono)
		sm->owed += per_us * (double)(now - sm->last_tick_mono);
	sm->last_tick_mono = now;
	if (sm->nset == 0) {
		sm->owed = 0;
		return;
	}
	if (s->cost.breaker.open) {
		/* Paused: what falls due is counted, not owed. */
		fpd_report_skipped(&s->report, (uint64_t)sm->owed);
		sm->owed -= floor(sm->owed);
		return;
	}
	if (sm->ops->tick)
		sm->ops->tick(s, now);
}

void
fpd_sampling_sync(struct fpd_session *s)
{
	if (s->sm.ops->sync)
		s->sm.ops->sync(s);
}

bool
fpd_sampling_on_reply(struct fpd_session *s, struct fp_reply *reply,
		      uint64_t now)
{
	return s->sm.ops->on_reply && s->sm.ops->on_reply(s, reply, now);
}

void
fpd_sampling_expire(struct fpd_session *s, uint64_t now)
{
	if (s->sm.ops->expire)
		s->sm.ops->expire(s, now);
}

bool
fpd_sampling_in_flight(const struct fpd_session *s)
{
	return s->sm.ops->in_flight && s->sm.ops->in_flight(s);
}

void
fpd_sampling_drain(struct fpd_session *s, uint64_t now)
{
	if (s->sm.ops->drain)
		s->sm.ops->drain(s, now);
}

/* ---- writing ----------------------------------------------------------- */

/*
 * A sample no file could take is counted skipped by the recorder; a
 * write error is logged and counted by the output, with the segment it
 * lost: neither stops the sampling.
 */
void
fpd_sampling_take(struct fpd_session *s, size_t probes)
{
	const struct fp_sample *smp;
	size_t n;

	s->report.gone += fp_sampler_gone(s->sampler);
	s->report.probes += probes;
	s->report.reused += fp_sampler_reused(s->sampler);
	smp = fp_sampler_samples(s->sampler, &n);
	for (size_t i = 0; i < n; i++)
		fpd_recorder_write(s->rec, &smp[i], FPD_RECORD_NODE);
}

size_t
fpd_sampling_count_probes(const enum fp_ask *asks, size_t n)
{
	size_t probes = 0;

	for (size_t i = 0; i < n; i++)
		probes += asks[i] == FP_ASK_PROBE;
	return probes;
}
