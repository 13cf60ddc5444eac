/*
 * flame_profd — the slots: sample requests to the node (the rex and eval
 * request paths), a few in flight at a time, over the set round robin.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-log.h"
#include "loop.h"
#include "session-int.h"
#include "util.h"
#include "util-mem.h"

/* Sample requests in flight at once: on a busy node a request waits for
 * the sampled processes to be scheduled, and one at a time would cap the
 * rate at batch/rtt. Each takes other pids, so no process is in two. */
#define MAX_INFLIGHT 3

struct sample_slot {
	struct request r;
	struct fp_pid *pids;
	size_t *idx;			/* their places in set[] ... */
	uint64_t gen;			/* ... as of this set generation */
	enum fp_ask *asks;
	size_t n;
};

struct slots {
	struct sample_slot slot[MAX_INFLIGHT];
	bool *busy;			/* set[i] is in a request in flight */
	size_t cursor;			/* where the next request starts */
};

static struct slots *
slots_of(const struct fpd_session *s)
{
	return s->sm.state;
}

static struct sample_slot *
slot_of(struct request *r)
{
	return (struct sample_slot *)((char *)r - offsetof(struct sample_slot, r));
}

static void *
slots_new(struct fpd_session *s)
{
	size_t cap = set_capacity(s->o), n = cap ? cap : 1;
	struct slots *sl = xnew(struct slots);

	for (int i = 0; i < MAX_INFLIGHT; i++) {
		sl->slot[i].pids = xzalloc(n * sizeof(*sl->slot[i].pids));
		sl->slot[i].idx = xzalloc(n * sizeof(*sl->slot[i].idx));
		sl->slot[i].asks = xzalloc(n * sizeof(*sl->slot[i].asks));
	}
	sl->busy = xzalloc(n * sizeof(*sl->busy));
	return sl;
}

static void
slots_destroy(void *state)
{
	struct slots *sl = state;

	for (int i = 0; i < MAX_INFLIGHT; i++) {
		free(sl->slot[i].pids);
		free(sl->slot[i].idx);
		free(sl->slot[i].asks);
	}
	free(sl->busy);
	free(sl);
}

/* Requests in flight keep their pids: mark them in the new set, and point
 * the requests at their new places, so that their replies free them there
 * (a pid that left the set has no place). */
static void
slots_set_changed(struct fpd_session *s)
{
	struct slots *sl = slots_of(s);
	struct sampling *sm = &s->sm;

	if (sm->nset)
		sl->cursor %= sm->nset;
	else
		sl->cursor = 0;
	memset(sl->busy, 0, set_capacity(s->o) * sizeof(*sl->busy));
	for (int k = 0; k < MAX_INFLIGHT; k++) {
		struct sample_slot *slot = &sl->slot[k];

		if (!slot->r.active || slot->r.late)
			continue;
		for (size_t i = 0; i < slot->n; i++) {
			slot->idx[i] = fpd_sampling_find(s, slot->pids[i]);
			if (slot->idx[i] != SIZE_MAX)
				sl->busy[slot->idx[i]] = true;
		}
		slot->gen = sm->set_gen;
	}
}

static void
slots_reset(struct fpd_session *s)
{
	struct slots *sl = slots_of(s);

	for (int i = 0; i < MAX_INFLIGHT; i++) {
		struct sample_slot *slot = &sl->slot[i];

		if (slot->r.active && !slot->r.late)
			fpd_report_skipped(&s->report, slot->n);
		slot->r.active = slot->r.late = false;
	}
	memset(sl->busy, 0, set_capacity(s->o) * sizeof(*sl->busy));
}

static void
slots_abandon(struct fpd_session *s)
{
	struct slots *sl = slots_of(s);

	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (sl->slot[i].r.active)
			fpd_report_skipped(&s->report, sl->slot[i].n);
	}
}

static struct sample_slot *
free_slot(struct slots *sl)
{
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (!sl->slot[i].r.active)
			return &sl->slot[i];
	}
	return NULL;
}

/*
 * A process whose last sample found it had not run since the one before
 * is probed: if it still has not run, the probe gives its sample without
 * a signal (fp_sampler_decode()); if it has, it is asked in full at once.
 */
static enum fp_ask
ask_for(const struct fpd_session *s, struct fp_pid pid)
{
	if (fp_sampler_wants_initial_call(s->sampler, pid))
		return FP_ASK_FULL_IC;
	if (s->o->idle_reuse && fp_sampler_idle(s->sampler, pid))
		return FP_ASK_PROBE;
	return FP_ASK_FULL;
}

/* Ask for the first @n pids of @slot; false (the samples skipped) if the
 * request could not be sent. */
static bool
slot_send(struct fpd_session *s, struct sample_slot *slot, size_t n,
	  uint64_t now)
{
	struct slots *sl = slots_of(s);
	uint64_t id;
	int rc;

	slot->n = n;
	rc = fp_node_sample_request(s->node, slot->pids, slot->asks, n, &id);
	if (rc < 0) {
		fpd_report_skipped(&s->report, n);
		fpd_session_check_send(s, rc, "sample request");
		return false;
	}
	request_sent(&slot->r, id, now);
	s->report.requests++;
	for (size_t i = 0; i < n; i++)
		sl->busy[slot->idx[i]] = true;
	return true;
}

/*
 * Send what is owed: as many requests as there are free slots and pids no
 * request in flight holds. Called on every tick and on every reply, so a
 * small set sampled fast is not held to one request per tick.
 */
static void
sample_send(struct fpd_session *s, uint64_t now)
{
	struct slots *sl = slots_of(s);
	struct sampling *sm = &s->sm;
	size_t share = (sm->nset + MAX_INFLIGHT - 1) / MAX_INFLIGHT;
	struct sample_slot *slot;

	while (live(s) && !s->run->stopping && !s->cost.breaker.open &&
	       sm->owed >= 1.0 && (slot = free_slot(sl))) {
		size_t want = (size_t)sm->owed, k = 0, pos = sl->cursor;

		/* a request never takes more than its share of the set, and
		 * never a pid another request in flight holds (replies may
		 * overtake each other) */
		if (want > share)
			want = share;
		for (size_t seen = 0; seen < sm->nset && k < want; seen++) {
			if (!sl->busy[pos]) {
				slot->pids[k] = sm->set[pos];
				slot->idx[k] = pos;
				slot->asks[k] = ask_for(s, sm->set[pos]);
				k++;
			}
			pos = (pos + 1) % sm->nset;
		}
		if (k == 0)
			return;
		sl->cursor = pos;
		sm->owed -= (double)k;
		slot->gen = sm->set_gen;
		if (!slot_send(s, slot, k, now))
			return;
	}
}

static void
slots_tick(struct fpd_session *s, uint64_t now)
{
	struct sampling *sm = &s->sm;
	double per_us = (double)sm->nset * s->cost.budget.rate / 1e6;
	/* Never owe more than a round (or two ticks' worth, for a small set
	 * sampled fast): what is beyond was missed. */
	double cap = fmax((double)sm->nset, 2.0 * per_us * FPD_TICK_US);

	if (sm->owed > cap) {
		double missed = floor(sm->owed - cap);

		fpd_report_skipped(&s->report, (uint64_t)missed);
		sm->owed -= missed;
	}
	sample_send(s, now);
}

static void
slot_done(struct fpd_session *s, struct sample_slot *slot)
{
	struct slots *sl = slots_of(s);

	slot->r.active = false;
	if (slot->gen != s->sm.set_gen)
		return;		/* not in flight at the last rebuild */
	for (size_t i = 0; i < slot->n; i++) {
		if (slot->idx[i] != SIZE_MAX)
			sl->busy[slot->idx[i]] = false;
	}
}

/* A slot's request timed out: its samples are skipped, its pids kept
 * busy until the late reply. */
static void
slot_expired(struct fpd_session *s, struct request *r)
{
	struct sample_slot *slot = slot_of(r);

	slot_done(s, slot);
	slot->r.active = true;	/* taken until the late reply */
	fpd_report_skipped(&s->report, slot->n);
	fpd_recorder_note(s->rec, "sample request timed out: %zu samples skipped",
			  slot->n);
}

/*
 * The probed processes of a reply that had run since their last sample
 * are asked in full now, on the same slot: they stay busy, and a timeout
 * or a lost connection counts them as the slot's. No more is owed for
 * them; the probe was their turn.
 */
static void
follow_up(struct fpd_session *s, struct sample_slot *slot, uint64_t now)
{
	const size_t *stale;
	size_t nstale = fp_sampler_stale(s->sampler, &stale), m = 0;
	bool current = slot->gen == s->sm.set_gen;

	slot_done(s, slot);
	if (nstale == 0)
		return;
	if (!live(s) || s->run->stopping || s->cost.breaker.open || !current) {
		fpd_report_skipped(&s->report, nstale);
		return;
	}
	for (size_t k = 0; k < nstale; k++) {
		size_t j = stale[k];

		if (slot->idx[j] == SIZE_MAX) {
			/* it left the set meanwhile */
			fpd_report_skipped(&s->report, 1);
			continue;
		}
		slot->pids[m] = slot->pids[j];
		slot->idx[m] = slot->idx[j];
		slot->asks[m] = FP_ASK_FULL;
		m++;
	}
	if (m > 0)
		slot_send(s, slot, m, now);
}

static void
on_sample(struct fpd_session *s, struct request *r, struct fp_reply *reply,
	  uint64_t now)
{
	struct sample_slot *slot = slot_of(r);
	uint64_t rtt = now - slot->r.sent_mono;
	uint64_t stamp, us;
	size_t probes = fpd_sampling_count_probes(slot->asks, slot->n), running;
	int n;

	us = fpd_session_take_time(s, reply);
	fpd_report_rtt(&s->report, rtt);
	/* the samples were taken somewhere between send and reply */
	stamp = fpd_recorder_stamp(s->rec, fpd_now_epoch_us() - rtt / 2);
	n = fp_sampler_decode(s->sampler, reply, slot->pids, slot->asks, slot->n,
			      stamp, fp_node_wordsize(s->node));
	running = n < 0 ? 0 : fp_sampler_running(s->sampler);
	fpd_cost_samples(&s->cost, us, slot->n - probes, running, probes);
	if (n < 0) {
		slot_done(s, slot);
		fpd_warn("could not decode a sample reply (%zu samples skipped)",
			 slot->n);
		fpd_report_skipped(&s->report, slot->n);
		return;
	}
	fpd_sampling_take(s, probes);
	follow_up(s, slot, now);
	sample_send(s, now);
}

static const struct fpd_request_kind sample_request = {
	.what = "sample request",
	.on_reply = on_sample,
	.on_timeout = slot_expired,
	.trip = FPD_TRIP_CLOSED,
};

static bool
slots_on_reply(struct fpd_session *s, struct fp_reply *reply, uint64_t now)
{
	struct slots *sl = slots_of(s);

	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (fpd_request_take(s, &sl->slot[i].r, &sample_request, reply,
				     now))
			return true;
	}
	return false;
}

static void
slots_expire(struct fpd_session *s, uint64_t now)
{
	struct slots *sl = slots_of(s);

	for (int i = 0; i < MAX_INFLIGHT && live(s); i++)
		fpd_request_expire(s, &sl->slot[i].r, &sample_request, now);
}

static bool
slots_in_flight(const struct fpd_session *s)
{
	const struct slots *sl = slots_of(s);

	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (sl->slot[i].r.active && !sl->slot[i].r.late)
			return true;
	}
	return false;
}

const struct fpd_sampling_ops fpd_sampling_slots = {
	.new = slots_new,
	.destroy = slots_destroy,
	.set_changed = slots_set_changed,
	.tick = slots_tick,
	.on_reply = slots_on_reply,
	.expire = slots_expire,
	.in_flight = slots_in_flight,
	.reset = slots_reset,
	.abandon = slots_abandon,
};
