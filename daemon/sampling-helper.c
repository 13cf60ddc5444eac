/*
 * flame_profd — the helper (--request helper): the module on the node
 * samples the set at the rate it is told, and sends what it took in
 * batches; we write them and tell it what changed.
 */
#include <errno.h>
#include <stdlib.h>

#include "daemon-log.h"
#include "session-int.h"
#include "util.h"
#include "util-mem.h"

struct helper {
	struct request req_batch;	/* active while one is expected */
	bool stop_sent, done;
	uint64_t gen;			/* what the helper was last told */
	double rate;
	bool paused, told;
	struct fp_pid *row_pids;
	enum fp_ask *row_asks;
	struct fp_pid *forget;
};

static struct helper *
helper_of(const struct fpd_session *s)
{
	return s->sm.state;
}

static void *
helper_new(struct fpd_session *s)
{
	size_t cap = set_capacity(s->o), n = cap ? cap : 1;
	struct helper *h = xnew(struct helper);

	h->row_pids = xzalloc(n * sizeof(*h->row_pids));
	h->row_asks = xzalloc(n * sizeof(*h->row_asks));
	h->forget = xzalloc(n * sizeof(*h->forget));
	return h;
}

static void
helper_destroy(void *state)
{
	struct helper *h = state;

	free(h->row_pids);
	free(h->row_asks);
	free(h->forget);
	free(h);
}

/* Tell the helper what changed: the set, the rate, a pause. */
static void
helper_sync(struct fpd_session *s)
{
	struct helper *h = helper_of(s);
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

static void
helper_connected(struct fpd_session *s, uint64_t now)
{
	struct helper *h = helper_of(s);

	fpd_recorder_note(s->rec, "helper module %s loaded on %s",
			  fp_node_helper_module(s->node), s->o->node);
	request_sent(&h->req_batch, fp_node_helper_id(s->node), now);
	h->told = false;
	helper_sync(s);
}

/* The helper keeps its own account of what is due. */
static void
helper_tick(struct fpd_session *s, uint64_t now)
{
	(void)now;
	s->sm.owed = 0;
}

/* Stopping: ask for what the helper has, once; the loop waits for it. */
static void
helper_drain(struct fpd_session *s, uint64_t now)
{
	struct helper *h = helper_of(s);
	int rc;

	if (!live(s) || h->stop_sent)
		return;
	rc = fp_node_helper_stop(s->node);
	h->stop_sent = true;
	if (rc == 0)
		request_sent(&h->req_batch, fp_node_helper_id(s->node), now);
	else
		h->done = true;
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
static void
on_batch(struct fpd_session *s, const struct fp_reply *reply, uint64_t now)
{
	struct helper *h = helper_of(s);
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
		size_t p = fpd_sampling_count_probes(h->row_asks, row.n);
		size_t nstale, running;
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
		fpd_sampling_take(s, p);
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

/* Batches come unasked, each under the helper's id, whether or not one
 * is waited for. */
static bool
helper_on_reply(struct fpd_session *s, struct fp_reply *reply, uint64_t now)
{
	if (reply->id != fp_node_helper_id(s->node))
		return false;
	on_batch(s, reply, now);
	return true;
}

static const struct fpd_request_kind helper_batch = {
	.what = "helper batch",
	.trip = FPD_TRIP_CLOSED,
	.waits_anew = true,
};

/* A batch not come within --timeout is waited for anew (the helper sends
 * what it has once a second); while stopping, long enough is enough. */
static void
helper_expire(struct fpd_session *s, uint64_t now)
{
	struct helper *h = helper_of(s);

	fpd_request_expire(s, &h->req_batch, &helper_batch, now);
	if (h->stop_sent && !h->req_batch.active)
		h->done = true;	/* waited long enough */
	else if (!h->req_batch.active && live(s))
		request_sent(&h->req_batch, fp_node_helper_id(s->node), now);
}

static bool
helper_in_flight(const struct fpd_session *s)
{
	const struct helper *h = helper_of(s);

	return s->connected && h->stop_sent && !h->done;
}

static void
helper_reset(struct fpd_session *s)
{
	struct helper *h = helper_of(s);

	h->req_batch.active = false;
	h->told = false;
	/* a stop asked of a helper that is gone is as good as answered */
	h->done = h->stop_sent;
}

const struct fpd_sampling_ops fpd_sampling_helper = {
	.new = helper_new,
	.destroy = helper_destroy,
	.connected = helper_connected,
	.tick = helper_tick,
	.sync = helper_sync,
	.on_reply = helper_on_reply,
	.expire = helper_expire,
	.in_flight = helper_in_flight,
	.drain = helper_drain,
	.reset = helper_reset,
};
