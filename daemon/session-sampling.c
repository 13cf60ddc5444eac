/*
 * flame_profd — a node session's sampling: the set of processes sampled
 * round robin, the slots of the sample requests in flight, and with
 * --request helper the helper that samples on the node.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "session-int.h"
#include "loop.h"
#include "util-mem.h"

void
fpd_sampling_init(struct fpd_session *s)
{
	size_t cap = set_capacity(s->o), n = cap ? cap : 1;

	s->sm.set = xzalloc(n * sizeof(*s->sm.set));
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		s->sm.slots[i].pids = xzalloc(n * sizeof(*s->sm.slots[i].pids));
		s->sm.slots[i].idx = xzalloc(n * sizeof(*s->sm.slots[i].idx));
		s->sm.slots[i].asks = xzalloc(n * sizeof(*s->sm.slots[i].asks));
	}
	s->sm.busy = xzalloc(n * sizeof(*s->sm.busy));
	s->h.row_pids = xzalloc(n * sizeof(*s->h.row_pids));
	s->h.row_asks = xzalloc(n * sizeof(*s->h.row_asks));
	s->h.forget = xzalloc(n * sizeof(*s->h.forget));
}

void
fpd_sampling_release(struct fpd_session *s)
{
	free(s->sm.set);
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		free(s->sm.slots[i].pids);
		free(s->sm.slots[i].idx);
		free(s->sm.slots[i].asks);
	}
	free(s->sm.busy);
	free(s->h.row_pids);
	free(s->h.row_asks);
	free(s->h.forget);
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
	if (sm->nset)
		sm->cursor %= sm->nset;
	else
		sm->cursor = 0;
	fp_sampler_retain(s->sampler, sm->set, sm->nset);

	/* Requests in flight keep their pids: mark them in the new set, and
	 * point the requests at their new places, so that their replies
	 * free them there (a pid that left the set has no place). */
	sm->set_gen++;
	memset(sm->busy, 0, set_capacity(s->o) * sizeof(*sm->busy));
	for (int k = 0; k < MAX_INFLIGHT; k++) {
		struct sample_slot *slot = &sm->slots[k];

		if (!slot->r.active || slot->r.late)
			continue;
		for (size_t i = 0; i < slot->n; i++) {
			slot->idx[i] = set_find(sm->set, sm->nset, slot->pids[i]);
			if (slot->idx[i] != SIZE_MAX)
				sm->busy[slot->idx[i]] = true;
		}
		slot->gen = sm->set_gen;
	}
}

void
fpd_sampling_reset(struct fpd_session *s)
{
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		struct sample_slot *slot = &s->sm.slots[i];

		if (slot->r.active && !slot->r.late)
			fpd_report_skipped(&s->report, slot->n);
		slot->r.active = slot->r.late = false;
	}
	memset(s->sm.busy, 0, set_capacity(s->o) * sizeof(*s->sm.busy));
	s->sm.nset = 0;
	s->h.req_batch.active = false;
	s->h.told = false;
	/* a stop asked of a helper that is gone is as good as answered */
	s->h.done = s->h.stop_sent;
}

void
fpd_sampling_abandon(struct fpd_session *s)
{
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (s->sm.slots[i].r.active)
			fpd_report_skipped(&s->report, s->sm.slots[i].n);
	}
}

/* ---- writing ----------------------------------------------------------- */

/*
 * A decode of @probes probes and the rest in full went well: count it
 * and write its samples. A sample no file could take is counted skipped
 * by the recorder; a write error is logged and counted by the output,
 * with the segment it lost: neither stops the sampling.
 */
static void
take_samples(struct fpd_session *s, size_t probes)
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

static size_t
count_probes(const enum fp_ask *asks, size_t n)
{
	size_t probes = 0;

	for (size_t i = 0; i < n; i++)
		probes += asks[i] == FP_ASK_PROBE;
	return probes;
}

/* ---- sample requests ----------------------------------------------------- */

static struct sample_slot *
free_slot(struct fpd_session *s)
{
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (!s->sm.slots[i].r.active)
			return &s->sm.slots[i];
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
		s->sm.busy[slot->idx[i]] = true;
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
	struct sampling *sm = &s->sm;
	size_t share = (sm->nset + MAX_INFLIGHT - 1) / MAX_INFLIGHT;
	struct sample_slot *slot;

	while (live(s) && !s->run->stopping && !s->cost.breaker.open &&
	       sm->owed >= 1.0 && (slot = free_slot(s))) {
		size_t want = (size_t)sm->owed, k = 0, pos = sm->cursor;

		/* a request never takes more than its share of the set, and
		 * never a pid another request in flight holds (replies may
		 * overtake each other) */
		if (want > share)
			want = share;
		for (size_t seen = 0; seen < sm->nset && k < want; seen++) {
			if (!sm->busy[pos]) {
				slot->pids[k] = sm->set[pos];
				slot->idx[k] = pos;
				slot->asks[k] = ask_for(s, sm->set[pos]);
				k++;
			}
			pos = (pos + 1) % sm->nset;
		}
		if (k == 0)
			return;
		sm->cursor = pos;
		sm->owed -= (double)k;
		slot->gen = sm->set_gen;
		if (!slot_send(s, slot, k, now))
			return;
	}
}

void
fpd_sampling_tick(struct fpd_session *s, uint64_t now)
{
	struct sampling *sm = &s->sm;
	double per_us = (double)sm->nset * s->cost.budget.rate / 1e6;
	double cap;

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
	if (helper_mode(s)) {
		sm->owed = 0;	/* the helper keeps its own account */
		return;
	}
	/* Never owe more than a round (or two ticks' worth, for a small set
	 * sampled fast): what is beyond was missed. */
	cap = fmax((double)sm->nset, 2.0 * per_us * FPD_TICK_US);
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
	slot->r.active = false;
	if (slot->gen != s->sm.set_gen)
		return;		/* not in flight at the last rebuild */
	for (size_t i = 0; i < slot->n; i++) {
		if (slot->idx[i] != SIZE_MAX)
			s->sm.busy[slot->idx[i]] = false;
	}
}

void
fpd_sampling_slot_expired(struct fpd_session *s, struct sample_slot *slot)
{
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

void
fpd_sampling_on_sample(struct fpd_session *s, struct sample_slot *slot,
		       struct fp_reply *reply, uint64_t now)
{
	uint64_t rtt = now - slot->r.sent_mono;
	uint64_t stamp, us;
	size_t probes = count_probes(slot->asks, slot->n), running;
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
	take_samples(s, probes);
	follow_up(s, slot, now);
	sample_send(s, now);
}

struct sample_slot *
fpd_sampling_slot_of(struct fpd_session *s, uint64_t id)
{
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (s->sm.slots[i].r.active && s->sm.slots[i].r.id == id)
			return &s->sm.slots[i];
	}
	return NULL;
}

bool
fpd_sampling_in_flight(const struct fpd_session *s)
{
	if (helper_mode(s))
		return s->connected && s->h.stop_sent && !s->h.done;
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (s->sm.slots[i].r.active && !s->sm.slots[i].r.late)
			return true;
	}
	return false;
}

/* ---- the helper (--request helper) ------------------------------------- */

/* Tell the helper what changed: the set, the rate, a pause. */
void
fpd_helper_sync(struct fpd_session *s)
{
	struct helper *h = &s->h;
	bool paused = s->cost.breaker.open;
	int rc;

	if (!live(s) || h->stop_sent ||
	    (h->told && h->gen == s->sm.set_gen &&
	     h->rate == s->cost.budget.rate && h->paused == paused))
		return;
	rc = fp_node_helper_config(s->node, s->sm.set, s->sm.nset,
				   s->cost.budget.rate, s->o->idle_reuse, paused);
	if (rc == 0) {
		h->told = true;
		h->gen = s->sm.set_gen;
		h->rate = s->cost.budget.rate;
		h->paused = paused;
	}
	fpd_session_check_send(s, rc, "helper configuration");
}

/* Stopping: ask for what the helper has, once; the loop waits for it. */
void
fpd_helper_finish(struct fpd_session *s, uint64_t now)
{
	int rc;

	if (!live(s) || s->h.stop_sent)
		return;
	rc = fp_node_helper_stop(s->node);
	s->h.stop_sent = true;
	if (rc == 0)
		request_sent(&s->h.req_batch, fp_node_helper_id(s->node), now);
	else
		s->h.done = true;
	fpd_session_check_send(s, rc, "helper stop");
}

/*
 * A batch: rows of samples the helper took at the times they carry (the
 * node's clock, moved onto ours by what separates the two when it was
 * sent). Each row counts as a request of the cost model's; the age of
 * its rows stands in for round trips. Probed processes our sampler could
 * not take (it had dropped their stacks) are counted skipped and asked
 * in full next.
 */
void
fpd_helper_on_batch(struct fpd_session *s, const struct fp_reply *reply,
		    uint64_t now)
{
	struct helper *h = &s->h;
	size_t cap = set_capacity(s->o), nforget = 0;
	struct fp_batch b;
	struct fp_batch_row row;
	int64_t offset;
	uint64_t epoch = fpd_now_epoch_us();
	int rc;

	rc = fp_node_batch_open(reply, &b);
	if (rc == -EPROTO) {
		fpd_session_lose(s, "the helper failed");
		return;
	}
	if (rc < 0) {
		fpd_warn("could not decode a helper batch; its samples are lost");
		return;
	}
	request_sent(&h->req_batch, reply->id, now);
	if (b.last) {
		h->req_batch.active = false;
		h->done = true;
	}
	offset = (int64_t)epoch - (int64_t)b.sent_us;
	fpd_report_skipped(&s->report, b.skipped);
	s->report.target_us += b.work_us;
	s->report.requests++;
	while ((rc = fp_node_batch_row(&b, &row, h->row_pids, h->row_asks,
				       cap)) > 0) {
		uint64_t stamp = fpd_recorder_stamp(s->rec,
						    (uint64_t)((int64_t)row.time_us +
							       offset));
		size_t p = count_probes(h->row_asks, row.n), nstale, running;
		const size_t *stale;
		int n;

		if (epoch > stamp)
			fpd_report_rtt(&s->report, epoch - stamp);
		n = fp_sampler_decode(s->sampler, &row.results, h->row_pids,
				      h->row_asks, row.n, stamp,
				      fp_node_wordsize(s->node));
		if (n < 0) {
			fpd_warn("could not decode a helper row (%zu samples skipped)",
				 row.n);
			fpd_report_skipped(&s->report, row.n);
			continue;
		}
		/* the model alone: the helper's wall time on a busy node is
		 * mostly its wait to be scheduled between busy processes */
		running = fp_sampler_running(s->sampler);
		fpd_cost_samples(&s->cost, 0, row.n - p, running, p);
		take_samples(s, p);
		nstale = fp_sampler_stale(s->sampler, &stale);
		fpd_report_skipped(&s->report, nstale);
		for (size_t k = 0; k < nstale && nforget < cap; k++)
			h->forget[nforget++] = h->row_pids[stale[k]];
	}
	if (rc < 0)
		fpd_warn("could not decode a helper batch row; the rest of the batch is lost");
	if (nforget)
		fpd_session_check_send(s, fp_node_helper_forget(s->node, h->forget,
								nforget),
				       "helper forget");
}
