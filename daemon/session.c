/*
 * flame_profd — a node session: the loss of its connection, the dispatch
 * of replies, request timeouts, the circuit breaker's health probes, and
 * the source the loop sees.
 *
 * Nothing here tears the connection down from inside a handler: a handler
 * records the loss (fpd_session_lose()) and the loop settles it once the
 * handler has returned (settle()), so every step after a failed send sees
 * a session that sends nothing more (live()) rather than one gone from
 * under it.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "daemon-log.h"
#include "options.h"
#include "output.h"
#include "session-int.h"
#include "util.h"
#include "util-mem.h"

/* A node that answers nothing for this many request timeouts in a row is
 * treated as gone (a stopped VM keeps its socket open). */
#define MAX_TIMEOUTS 3
/* The breaker's pause starts short again after this many --every
 * without trouble. */
#define BREAKER_CALM_INTERVALS 6
/* a health probe this slow, with long run queues, trips the breaker */
#define BREAKER_SLOW_US 100000u

/* The loss a handler recorded: the file is finished, what was in flight
 * skipped, and a reconnect planned. */
void
fpd_session_settle(struct fpd_source *src)
{
	struct fpd_session *s = (struct fpd_session *)src;
	const char *why = s->lost;
	uint64_t now;

	if (!why)
		return;
	now = fpd_now_mono_us();
	s->lost = NULL;
	/* each loss is news, and reconnects back off */
	if (s->run->stopping)
		fpd_warn_event("lost connection to %s: %s", s->o->node, why);
	else
		fpd_warn_event("lost connection to %s: %s; reconnecting",
			       s->o->node, why);
	fpd_recorder_note(s->rec, "lost connection to %s: %s", s->o->node, why);
	fpd_sampling_reset(s);
	fpd_output_finish(s->out);
	fp_node_disconnect(s->node);
	s->connected = false;
	fpd_cost_set_node(&s->cost, fp_node_request_path(s->node), 0, false);
	fpd_targets_reset(s);
	s->req_health.active = s->req_health.late = false;
	s->req_peers.active = s->req_peers.late = false;
	s->req_trace.active = s->req_trace.late = false;
	fpd_trace_lost(s->trace);
	s->cost.breaker.open = s->cost.breaker.probing = false;
	s->timeouts = 0;
	s->backoff_us = BACKOFF_MIN_US;
	s->reconnect_at = now + s->backoff_us;
}

/* ---- circuit breaker --------------------------------------------------- */

static void
trip(struct fpd_session *s, uint64_t now, const char *why)
{
	struct fpd_breaker *br = &s->cost.breaker;
	bool was_open = br->open;

	fpd_breaker_trip(br, now);
	fpd_warn("circuit breaker %s: %s; sampling paused for %.0f s",
		 was_open ? "stays open" : "open", why,
		 (double)br->cooldown_us / 1e6);
	fpd_recorder_note(s->rec, "circuit breaker %s: %s; sampling paused for %.0f s",
			  was_open ? "stays open" : "open", why,
			  (double)br->cooldown_us / 1e6);
	fpd_output_event(s->out);
}

void
fpd_session_send_health(struct fpd_session *s, uint64_t now)
{
	uint64_t id;
	int rc;

	if (s->req_health.active)
		return;
	rc = fp_node_health_request(s->node, &id);
	if (rc == 0)
		request_sent(&s->req_health, id, now);
	fpd_session_check_send(s, rc, "health request");
}

/*
 * Long run queues alone are a node at work, not a node in trouble: a pool
 * of short-lived workers keeps hundreds of processes queued while the
 * node answers in milliseconds, and pausing for that left such nodes with
 * no sample at all. The queues trip the breaker only when the health
 * probe, which waits in those queues like any request, is slow to come
 * back too; a node that answers slowly or not at all (request timeouts)
 * is still left alone. A limit given with --breaker-run-queue is taken
 * as it is said: the queues alone trip it.
 */
static bool
runq_trouble(const struct fpd_session *s, int64_t runq, uint64_t rtt)
{
	return runq > (int64_t)s->runq_limit &&
	       (s->o->breaker_run_queue || rtt >= BREAKER_SLOW_US);
}

static void
on_health(struct fpd_session *s, struct request *r, struct fp_reply *reply,
	  uint64_t now)
{
	struct fpd_breaker *br = &s->cost.breaker;
	uint64_t rtt = now - r->sent_mono;
	int64_t runq = -1;
	char why[128];

	fp_node_decode_int(reply, &runq);
	if (runq >= 0)	/* the flight recorder's run_queue triggers */
		fpd_recorder_gauge(s->rec, FPD_GAUGE_RUN_QUEUE, runq);
	if (br->probing) {
		if (runq >= 0 && !runq_trouble(s, runq, rtt) &&
		    rtt < s->o->timeout_us / 2) {
			fpd_breaker_close(br, now);
			fpd_cost_window_start(&s->cost, now, fpd_cpu_us());
			fpd_info("circuit breaker closed: run queues %lld, probe %.1f ms; sampling resumes",
				 (long long)runq, (double)rtt / 1000.0);
			fpd_recorder_note(s->rec, "circuit breaker closed: run queues %lld, probe %.1f ms",
					  (long long)runq, (double)rtt / 1000.0);
			s->sm.last_tick_mono = 0;
			s->sm.owed = 0;
		} else {
			snprintf(why, sizeof(why), "probe: run queues %lld, %.1f ms",
				 (long long)runq, (double)rtt / 1000.0);
			trip(s, now, why);
		}
		return;
	}
	if (runq_trouble(s, runq, rtt)) {
		snprintf(why, sizeof(why), "run queues at %lld (limit %u), probe %.1f ms",
			 (long long)runq, s->runq_limit, (double)rtt / 1000.0);
		trip(s, now, why);
	}
}

/* A late reply to the breaker's probe: the probe it was is sent again. */
static void
health_late(struct fpd_session *s, uint64_t now)
{
	if (s->cost.breaker.probing)
		fpd_session_send_health(s, now);
}

/* ---- requests ------------------------------------------------------------ */

int
fpd_session_ask_peers(struct fpd_session *s, uint64_t now,
		      void (*each)(const char *name, void *data), void *data)
{
	uint64_t id;
	int rc;

	if (!live(s))
		return -ENOTCONN;
	if (s->req_peers.active)
		return -EBUSY;
	rc = fp_node_peers_request(s->node, &id);
	if (rc == 0) {
		request_sent(&s->req_peers, id, now);
		s->on_peer = each;
		s->peer_data = data;
	}
	fpd_session_check_send(s, rc, "nodes request");
	return rc == 0 ? 0 : -ENOTCONN;
}

static void
on_peers(struct fpd_session *s, struct request *r, struct fp_reply *reply,
	 uint64_t now)
{
	int n;

	(void)r;
	(void)now;
	fpd_cost_other(&s->cost, fpd_session_take_time(s, reply));
	if (!s->on_peer)
		return;
	n = fp_node_decode_peers(reply, s->on_peer, s->peer_data);
	if (n < 0)
		fpd_warn("the node's answer to erlang:nodes() is no list of node names");
	else
		s->on_peer(NULL, s->peer_data);
}

static void
on_scan(struct fpd_session *s, struct request *r, struct fp_reply *reply,
	uint64_t now)
{
	(void)r;
	fpd_targets_on_scan(s, reply, now);
}

static void
on_whereis(struct fpd_session *s, struct request *r, struct fp_reply *reply,
	   uint64_t now)
{
	(void)r;
	(void)now;
	fpd_targets_on_whereis(s, reply);
}

static void
on_alive(struct fpd_session *s, struct request *r, struct fp_reply *reply,
	 uint64_t now)
{
	(void)r;
	(void)now;
	fpd_targets_on_alive(s, reply);
}

static void
on_initial_calls(struct fpd_session *s, struct request *r,
		 struct fp_reply *reply, uint64_t now)
{
	(void)r;
	(void)now;
	fpd_targets_on_initial_calls(s, reply);
}

static void
on_trace(struct fpd_session *s, struct request *r, struct fp_reply *reply,
	 uint64_t now)
{
	(void)r;
	(void)now;
	fpd_trace_on_reply(s->trace, reply);
}

/*
 * The session's own requests, beside the sampler's. Only the scan's
 * timeout trips the breaker: the others are small, and the health
 * probe's trips it only while it probes.
 */
static const struct {
	size_t offset;			/* of its struct request in the session */
	struct fpd_request_kind kind;
} requests[] = {
	{ offsetof(struct fpd_session, t.req_scan),
	  { "selection scan", on_scan, .trip = FPD_TRIP_CLOSED } },
	{ offsetof(struct fpd_session, t.req_whereis),
	  { "whereis request", on_whereis, .trip = FPD_TRIP_NEVER } },
	{ offsetof(struct fpd_session, t.req_init),
	  { "initial_call request", on_initial_calls, .trip = FPD_TRIP_NEVER } },
	{ offsetof(struct fpd_session, t.req_alive),
	  { "is_process_alive request", on_alive, .trip = FPD_TRIP_NEVER } },
	{ offsetof(struct fpd_session, req_peers),
	  { "nodes request", on_peers, .trip = FPD_TRIP_NEVER } },
	{ offsetof(struct fpd_session, req_trace),
	  { "trace request", on_trace, .trip = FPD_TRIP_NEVER } },
	{ offsetof(struct fpd_session, req_health),
	  { "health probe", on_health, .on_late = health_late,
	    .trip = FPD_TRIP_PROBE } },
};

static struct request *
request_at(struct fpd_session *s, size_t i)
{
	return (struct request *)((char *)s + requests[i].offset);
}

bool
fpd_request_take(struct fpd_session *s, struct request *r,
		 const struct fpd_request_kind *kind, struct fp_reply *reply,
		 uint64_t now)
{
	if (!r->active || r->id != reply->id)
		return false;
	if (fpd_request_answered(r, now, kind->what))
		kind->on_reply(s, r, reply, now);
	else if (kind->on_late)
		kind->on_late(s, now);
	return true;
}

static void
dispatch(struct fpd_session *s, struct fp_reply *reply, uint64_t now)
{
	if (fpd_sampling_on_reply(s, reply, now))
		return;
	if (reply->id && reply->id == fp_node_watch_id(s->node)) {
		fpd_session_on_watch(s, reply);
		return;
	}
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		if (fpd_request_take(s, request_at(s, i), &requests[i].kind,
				     reply, now))
			return;
	}
	fpd_debug("late reply %llu dropped", (unsigned long long)reply->id);
}

static void
input(struct fpd_source *src)
{
	struct fpd_session *s = (struct fpd_session *)src;
	struct fp_reply reply;
	uint64_t now;
	int rc;

	if (!live(s))
		return;
	rc = fp_node_receive(s->node, timeout_ms(s), &reply);
	now = fpd_now_mono_us();
	if (rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -ECANCELED) {
		fpd_session_lose(s, rc == -ETIMEDOUT ? "a message stalled halfway" :
				 rc == -ECANCELED ? "stopped with a message half read" :
				 "connection closed");
		return;
	}
	if (rc <= 0) {
		if (rc < 0)
			fpd_debug("dropped a message: %s", strerror(-rc));
		return;
	}
	s->timeouts = 0;
	dispatch(s, &reply, now);
}

/* ---- timeouts ------------------------------------------------------------ */

/*
 * A request unanswered for --timeout becomes late (struct request); the
 * helper's batches, which we do not ask for, are simply waited for anew.
 * A late request still unanswered after another --timeout counts as
 * another timeout: nothing new is sent to a node that stopped answering,
 * and it must still be given up on.
 */
void
fpd_request_expire(struct fpd_session *s, struct request *r,
		   const struct fpd_request_kind *kind, uint64_t now)
{
	const char *what = kind->what;
	uint64_t since = r->counted_mono;
	bool again = r->late;

	if (!r->active || now - since < s->o->timeout_us)
		return;
	if (again && now - r->sent_mono >= LATE_ABANDON * s->o->timeout_us) {
		fpd_warn("%s still unanswered after %.1f s: given up", what,
			 (double)(now - r->sent_mono) / 1e6);
		r->active = r->late = false;
		return;
	}
	r->counted_mono = now;
	if (!again && kind->waits_anew) {
		r->active = false;
		fpd_warn("%s timed out after %.1f s", what,
			 (double)(now - r->sent_mono) / 1e6);
	} else if (!again) {
		r->late = true;
		fpd_warn("%s timed out after %.1f s; not sent again until its reply arrives",
			 what, (double)(now - r->sent_mono) / 1e6);
	}
	if (!again && kind->on_timeout)
		kind->on_timeout(s, r);
	/* Requests sent before the last counted timeout belong to the same
	 * stall: one stall, one count, one trip. */
	if (since < s->timeout_epoch)
		return;
	s->timeout_epoch = now;
	if (++s->timeouts >= MAX_TIMEOUTS) {
		fpd_session_lose(s, "the node stopped answering");
		return;
	}
	if (again)
		return;
	if (kind->trip == FPD_TRIP_PROBE && s->cost.breaker.probing)
		trip(s, now, "the probe timed out");
	else if (kind->trip == FPD_TRIP_CLOSED && !s->cost.breaker.open)
		trip(s, now, "a request timed out");
}

static void
expire_all(struct fpd_session *s, uint64_t now)
{
	fpd_sampling_expire(s, now);
	if (!live(s))
		return;
	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++)
		fpd_request_expire(s, request_at(s, i), &requests[i].kind, now);
}

/* ---- periodic work ---------------------------------------------------- */

static void
budget_tick(struct fpd_session *s, uint64_t now)
{
	char what[200];

	if (fpd_cost_check(&s->cost, now, s->o->every_us, s->run->stopping,
			   what, sizeof(what))) {
		fpd_info("budget: %s", what);
		fpd_recorder_note(s->rec, "budget: %s", what);
		fpd_output_event(s->out);
	}
}

static void
interval_report(struct fpd_session *s, uint64_t now)
{
	if (!fpd_report_interval(&s->report, &s->cost, s->sampler,
				 s->connected, s->sm.nset, fpd_targets_pinned(s),
				 now))
		return;
	fpd_breaker_calm(&s->cost.breaker, now,
			 BREAKER_CALM_INTERVALS * s->o->every_us);
	if (!s->cost.breaker.open)
		fpd_session_send_health(s, now);
}

static void
tick(struct fpd_source *src, uint64_t now)
{
	struct fpd_session *s = (struct fpd_session *)src;
	struct fpd_breaker *br = &s->cost.breaker;
	struct fpd_output_totals totals;

	fpd_output_totals(s->out, &totals);
	if (totals.fatal && !s->run->stopping) {
		fpd_err("stopping: no output directory to write to");
		fpd_run_fail(s->run, 0);
	}
	if (!s->connected) {
		/* --perf still writes while the node is away */
		fpd_output_tick(s->out, now);
		if (!s->run->stopping && now >= s->reconnect_at &&
		    (!s->patient || s->run->connects++ == 0)) {
			int rc = fpd_session_connect(s, now);

			if (rc)
				fpd_run_fail(s->run, rc);
		}
		return;
	}

	expire_all(s, now);
	if (!live(s))
		return;
	if (br->open && !br->probing && !s->run->stopping &&
	    now >= br->open_until_us) {
		br->probing = true;
		fpd_session_send_health(s, now);
		if (!live(s))
			return;
	}
	if (!s->run->stopping && now >= s->t.next_select_mono) {
		s->t.next_select_mono = now + s->o->every_us;
		fpd_targets_start_selection(s, now);
		if (!live(s))
			return;
	}
	fpd_sampling_tick(s, now);
	fpd_targets_ask_initial_calls(s, now);
	if (!live(s))
		return;
	if (!s->req_trace.active && fpd_trace_due(s->trace, now)) {
		uint64_t id;
		int rc = fpd_trace_send(s->trace, s->node, false, now, &id);

		if (rc == 0)
			request_sent(&s->req_trace, id, now);
		else
			fpd_session_check_send(s, rc, "a trace request");
		if (!live(s))
			return;
	}
	budget_tick(s, now);
	fpd_sampling_sync(s);

	if (now - s->report.interval_mono >= s->o->every_us)
		interval_report(s, now);
	fpd_output_tick(s->out, now);
	/* a run that only traces ends with its trace */
	if (!s->run->stopping && fpd_trace_over(s->trace) && s->o->top == 0 &&
	    !s->o->npids && !s->o->nnames) {
		fpd_info("the trace is over: stopping");
		s->run->stopping = true;
		s->run->stop_mono = now;
	}
}

/* ---- the source ---------------------------------------------------------- */

/*
 * One node of several, before each tick: every reply already here is
 * read, not one a pass. The loop may have been held (another node's
 * connect, a wait halfway through a message) while replies queued up;
 * read one at a time, those still queued would be taken for timeouts
 * and the node, though it answered, for gone. A run of one node reads
 * as it always has.
 */
#define COLLECT_MAX 256

static void
collect(struct fpd_source *src)
{
	struct fpd_session *s = (struct fpd_session *)src;

	if (!s->patient)
		return;
	for (unsigned i = 0; i < COLLECT_MAX && live(s); i++) {
		struct pollfd p = { .fd = fp_node_fd(s->node), .events = POLLIN };

		if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			break;
		input(src);
	}
}

static int
fd(struct fpd_source *src)
{
	struct fpd_session *s = (struct fpd_session *)src;

	return s->connected ? fp_node_fd(s->node) : -1;
}

static void
drain(struct fpd_source *src, uint64_t now)
{
	struct fpd_session *s = (struct fpd_session *)src;

	fpd_sampling_drain(s, now);
	/* the trace is stopped with the samples, not after them: its
	 * undoing and hand-over then have the drain's time */
	if (live(s) && !s->req_trace.active && fpd_trace_stoppable(s->trace)) {
		uint64_t id;
		int rc = fpd_trace_send(s->trace, s->node, true, now, &id);

		if (rc == 0)
			request_sent(&s->req_trace, id, now);
		else
			fpd_session_check_send(s, rc, "the trace's stop");
	}
}

static bool
in_flight(struct fpd_source *src)
{
	struct fpd_session *s = (struct fpd_session *)src;

	return fpd_sampling_in_flight(s) || (live(s) && s->req_trace.active);
}

static void
abandon(struct fpd_source *src)
{
	fpd_sampling_abandon((struct fpd_session *)src);
}

static void
rotate(struct fpd_source *src)
{
	fpd_output_finish(((struct fpd_session *)src)->out);
}

static const struct fpd_source_ops session_ops = {
	.fd = fd,
	.input = input,
	.collect = collect,
	.tick = tick,
	.settle = fpd_session_settle,
	.drain = drain,
	.in_flight = in_flight,
	.abandon = abandon,
	.rotate = rotate,
};

struct fpd_source *
fpd_session_source(struct fpd_session *s)
{
	return &s->source;
}

struct fpd_session *
fpd_session_new(const struct fpd_options *o, const char *cookie,
		struct fpd_recorder *rec, struct fpd_run_state *run,
		bool (*give_up)(void *data), void *give_up_data)
{
	struct fp_extras extras = {
		.keys = o->keys, .nkeys = o->nkeys,
		.logger_keys = o->logger_keys, .nlogger_keys = o->nlogger_keys,
		.callers = o->callers,
	};
	struct fpd_session *s = xnew(struct fpd_session);
	uint64_t now = fpd_now_mono_us(), cpu_us = fpd_cpu_us();

	s->source.ops = &session_ops;
	s->o = o;
	s->run = run;
	s->rec = rec;
	s->out = fpd_recorder_output(rec);
	s->node = fp_node_new(o->node, cookie);
	fp_node_set_give_up(s->node, give_up, give_up_data);
	if (o->connect_host)
		fp_node_set_address(s->node, o->connect_host, o->connect_port);
	fp_node_set_request_path(s->node, o->request);
	fp_node_set_extras(s->node, &extras);
	s->select = fp_select_new(o->scan_max);
	fp_select_set_floor(s->select, o->min_reductions);
	s->sampler = fp_sampler_new();
	fp_sampler_set_extras(s->sampler, &extras);
	fpd_report_init(&s->report, rec, now, cpu_us);
	fpd_cost_init(&s->cost, o, now, cpu_us);
	fpd_targets_init(s);
	fpd_sampling_init(s);
	s->trace = fpd_trace_new(o, rec, &s->cost);
	s->watch_wanted = fpd_trigger_watch(o->triggers, o->ntriggers,
					    o->every_us, &s->watch);
	s->backoff_us = BACKOFF_MIN_US;
	return s;
}

void
fpd_session_set_patient(struct fpd_session *s)
{
	s->patient = true;
}

void
fpd_session_wake(struct fpd_session *s)
{
	if (s->connected)
		return;
	s->backoff_us = BACKOFF_MIN_US;
	s->reconnect_at = 0;
}

void
fpd_session_burst(struct fpd_session *s, bool on)
{
	struct fpd_budget *b = &s->cost.budget;
	bool top;

	if (!s->o->burst_rate && !s->o->burst_top)
		return;
	top = on ? fpd_budget_burst(b, s->o->burst_rate, s->o->burst_top) :
		   fpd_budget_burst_end(b);
	if (top)
		s->t.next_select_mono = fpd_now_mono_us();
	fpd_info("burst %s: rate %g/s, top %u%s", on ? "begins" : "ends",
		 b->rate, b->top,
		 on && (b->rate < b->rate_req || b->top < b->top_req) ?
		 " (the budget holds them below the burst's)" : "");
}

bool
fpd_session_connected(const struct fpd_session *s)
{
	return s->connected;
}

int
fpd_session_unreached(const struct fpd_session *s)
{
	return s->ever_connected ? 0 : s->first_error;
}

int
fpd_session_start(struct fpd_session *s)
{
	return fpd_session_connect(s, fpd_now_mono_us());
}

void
fpd_session_destroy(struct fpd_session *s)
{
	if (!s)
		return;
	fp_sampler_destroy(s->sampler);
	fp_select_destroy(s->select);
	fp_node_destroy(s->node);
	fpd_targets_release(&s->t);
	fpd_sampling_release(s);
	fpd_trace_destroy(s->trace);
	free(s);
}

int
fpd_session_close(struct fpd_session *s, int exit_code, bool duration_over)
{
	struct fpd_output_totals totals;

	if (s->connected) {
		interval_report(s, fpd_now_mono_us());
		fpd_session_settle(&s->source);
		if (s->connected)
			fpd_trace_stop(s->trace, s->node, timeout_ms(s));
		fpd_session_restore_node(s);
	}
	fpd_recorder_note(s->rec, "stopped after %llu samples",
			  (unsigned long long)fpd_recorder_samples(s->rec));
	fpd_output_finish(s->out);
	fpd_output_totals(s->out, &totals);
	/* what the files hold, not what was handed to them */
	if (s->o->flight_us && !s->o->continuous)
		fpd_info("stopped: %llu samples taken; the flight recorder writes only captures under %s",
			 (unsigned long long)fpd_recorder_samples(s->rec),
			 fpd_output_dir(s->out));
	else
		fpd_info("stopped: %llu samples written under %s",
			 (unsigned long long)totals.written, fpd_output_dir(s->out));
	if (totals.dropped)
		fpd_warn("%llu samples dropped on write errors",
			 (unsigned long long)totals.dropped);
	if (totals.unrecorded)
		fpd_warn("%llu samples dropped or skipped after the last file that could be written: no file records them",
			 (unsigned long long)totals.unrecorded);
	if (totals.unfinished && exit_code == 0) {
		fpd_err("%u file(s) could not be finished and stay under their partial names in %s (the next start recovers them)",
			totals.unfinished, fpd_output_dir(s->out));
		exit_code = FPD_EXIT_IOERR;
	}
	if (totals.fatal && exit_code == 0)
		exit_code = FPD_EXIT_CANTCREAT;
	/* A fixed-duration run (CI) says whether it got what it came for. */
	if (duration_over && exit_code == 0) {
		if (fpd_recorder_samples(s->rec) == 0) {
			fpd_fatal("the run took no sample at all");
			exit_code = FPD_EXIT_NOSAMPLES;
		} else if (!s->connected) {
			fpd_fatal("the connection to %s was lost and not regained before the end",
				  s->o->node);
			exit_code = FPD_EXIT_UNAVAILABLE;
		}
	}
	return exit_code;
}
