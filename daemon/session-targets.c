/*
 * flame_profd — what a node session samples: the selection (the busiest
 * processes, ranked by fp_select), the --pid and --name targets as the
 * node resolves them, and the initial calls of the processes sampled.
 */
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "daemon-log.h"
#include "options.h"
#include "session-int.h"
#include "util-mem.h"

#define FIRST_SELECT_DELAY_US 1000000u	/* baseline to first ranking */
/* The largest process whose whole dictionary proc_lib:initial_call/1 may
 * copy, once in its life, on a node that cannot read one key of it: at
 * about 11 ns a byte (measured, OTP 25), 3 ms of one scheduler at most. */
#define IC_COPY_MAX (256 * 1024)
/* fp_name_candidates() gives at most this many atoms per --name. */
#define NAME_CANDIDATES_MAX 2

void
fpd_targets_init(struct fpd_session *s)
{
	const struct fpd_options *o = s->o;
	struct targets *t = &s->t;
	size_t cap = set_capacity(o), ncand = NAME_CANDIDATES_MAX * o->nnames + 1;
	size_t nnames = o->nnames ? o->nnames : 1, npids = o->npids ? o->npids : 1;
	size_t ntop = o->burst_top > o->top ? o->burst_top : o->top;

	/* a burst ranks --burst-top processes into it (the budget's top) */
	t->top = xzalloc((ntop ? ntop : 1) * sizeof(*t->top));
	t->named = xzalloc(nnames * sizeof(*t->named));
	t->name_found = xzalloc(nnames * sizeof(*t->name_found));
	t->named_as = xzalloc(nnames * sizeof(*t->named_as));
	t->name_said = xzalloc(nnames * sizeof(*t->name_said));
	t->cand = xzalloc(ncand * sizeof(*t->cand));
	t->cand_atoms = xzalloc(ncand * sizeof(*t->cand_atoms));
	t->name_of = xzalloc(ncand * sizeof(*t->name_of));
	t->cand_pids = xzalloc(ncand * sizeof(*t->cand_pids));
	t->cand_found = xzalloc(ncand * sizeof(*t->cand_found));
	for (size_t i = 0; i < o->nnames; i++) {
		int n = fp_name_candidates(o->names[i], t->cand + t->ncand);

		/* options.c refused names without a candidate */
		for (int k = 0; k < n; k++, t->ncand++) {
			t->cand_atoms[t->ncand] = t->cand[t->ncand];
			t->name_of[t->ncand] = i;
		}
	}
	t->pinned = xzalloc(npids * sizeof(*t->pinned));
	t->pin_state = xzalloc(2 * npids * sizeof(*t->pin_state));
	t->pin_alive = xzalloc(npids * sizeof(*t->pin_alive));
	t->init_pids = xzalloc((cap ? cap : 1) * sizeof(*t->init_pids));
}

void
fpd_targets_release(struct targets *t)
{
	free(t->top);
	free(t->named);
	free(t->name_found);
	free(t->named_as);
	free(t->name_said);
	free(t->cand);
	free(t->cand_atoms);
	free(t->name_of);
	free(t->cand_pids);
	free(t->cand_found);
	free(t->pinned);
	free(t->pin_state);
	free(t->pin_alive);
	free(t->init_pids);
}

void
fpd_targets_reset(struct fpd_session *s)
{
	struct targets *t = &s->t;

	t->req_scan.active = t->req_scan.late = false;
	t->req_whereis.active = t->req_whereis.late = false;
	t->req_init.active = t->req_init.late = false;
	t->req_alive.active = t->req_alive.late = false;
	t->ntop = 0;
	memset(t->name_found, 0, s->o->nnames * sizeof(*t->name_found));
}

size_t
fpd_targets_pinned(const struct fpd_session *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->o->npids; i++)
		n += s->t.pin_state[i] == FP_PID_ALIVE;
	for (size_t i = 0; i < s->o->nnames; i++)
		n += s->t.name_found[i];
	return n;
}

/* With no --top, the --pid and --name targets are all there is. */
static bool
any_target(const struct fpd_session *s)
{
	if (s->o->top)
		return true;
	if (fpd_targets_pinned(s))
		return true;
	return !s->t.names_checked && s->o->nnames;
}

static void
nothing_to_sample(struct fpd_session *s)
{
	fpd_err("no sample taken: nothing to sample on %s (no --pid is alive, no --name is registered)",
		fp_node_name(s->node));
	fpd_run_fail(s->run, FPD_EXIT_NOSAMPLES);
}

/*
 * The --pid targets, checked by the node at each connect (a pid it would
 * not take is never sent to it). At the first, a pid that is none of
 * this node's is a usage error; one that does not live is said once.
 */
int
fpd_targets_check_pins(struct fpd_session *s, unsigned timeout_ms)
{
	const struct fpd_options *o = s->o;
	struct targets *t = &s->t;
	enum fp_pid_state *was = t->pin_state + o->npids;
	int rc;

	if (o->npids == 0)
		return 0;
	memcpy(was, t->pin_state, o->npids * sizeof(*was));
	rc = fp_node_check_pids(s->node, o->pids, o->npids, t->pinned,
				t->pin_state, timeout_ms);
	if (rc == -ECANCELED)
		return 0;	/* stopping */
	if (rc < 0) {
		fpd_err("cannot check the --pid targets on %s: %s",
			fp_node_name(s->node), strerror(-rc));
		return FPD_EXIT_SOFTWARE;
	}
	for (size_t i = 0; i < o->npids; i++) {
		const char *name = fp_node_name(s->node);

		switch (t->pin_state[i]) {
		case FP_PID_INVALID:
			if (t->pins_checked && was[i] == FP_PID_INVALID)
				break;
			fpd_err("--pid %s: not a pid of %s (numbers out of the node's range)",
				o->pids[i], name);
			if (!t->pins_checked)
				return FPD_EXIT_USAGE;
			break;
		case FP_PID_OTHER_NODE:
			fpd_err("--pid %s: a process of another node than %s", o->pids[i],
				name);
			return FPD_EXIT_USAGE;
		case FP_PID_DEAD:
			if (!t->pins_checked || was[i] == FP_PID_ALIVE)
				fpd_warn("--pid %s: no such process on %s", o->pids[i], name);
			break;
		case FP_PID_ALIVE:
			break;
		}
	}
	t->pins_checked = true;
	if (fpd_recorder_samples(s->rec) == 0 && !any_target(s)) {
		nothing_to_sample(s);
		return FPD_EXIT_NOSAMPLES;
	}
	return 0;
}

/* Whether the live --pid targets still live: once per selection. */
static void
send_alive(struct fpd_session *s, uint64_t now)
{
	struct targets *t = &s->t;
	size_t n = 0;
	uint64_t id;
	int rc;

	if (!live(s) || t->req_alive.active)
		return;
	for (size_t i = 0; i < s->o->npids; i++) {
		if (t->pin_state[i] == FP_PID_ALIVE)
			t->init_pids[n++] = t->pinned[i];
	}
	if (n == 0)
		return;
	rc = fp_node_alive_request(s->node, t->init_pids, n, &id);
	if (rc == 0)
		request_sent(&t->req_alive, id, now);
	fpd_session_check_send(s, rc, "is_process_alive request");
}

void
fpd_targets_start_selection(struct fpd_session *s, uint64_t now)
{
	struct targets *t = &s->t;
	struct fp_scan scan;
	size_t limit;
	uint64_t id;
	bool skip;
	int rc;

	if (t->req_scan.active || s->cost.breaker.open)
		return;
	limit = fpd_cost_scan_limit(&s->cost, s->o, s->sm.nset, t->scans_done,
				    t->ranking, &t->scan_skips, &skip);
	if (skip) {
		s->report.scans_skipped++;
		fpd_debug("selection skipped: over budget at %.2f µs per pid read",
			  s->cost.scan_pid_us);
	} else {
		if (limit)
			s->report.scans_cut++;
		t->select_started_mono = now;
		/* Windows reach a process that turns busy on a big node only
		 * after 2 x processes / --scan-max selections: a sweep again
		 * finds it within the sweep's period. */
		if (t->scans_done && !t->last_full &&
		    now - t->swept_mono >= fpd_cost_sweep_period(&s->cost, s->o)) {
			fpd_debug("sweeping again: %.1f s after the last sweep, at most every %.1f s",
				  (double)(now - t->swept_mono) / 1e6,
				  (double)fpd_cost_sweep_period(&s->cost, s->o) / 1e6);
			fp_select_sweep_again(s->select);
		}
		fp_select_plan(s->select, s->sm.set, s->sm.nset, limit, &scan);
		/* A sweep ends within the request's timeout: it checks the
		 * clock every 10 000 processes (about 15 ms), and the rest
		 * (a sort of 20 000, a reply of 10 000 pids) is short. */
		scan.sweep_ms = (unsigned)(s->o->timeout_us / 1000 * 3 / 4);
		rc = fp_node_scan_request(s->node, &scan, &id);
		if (rc == -ENOTCONN && live(s)) {
			/* not prepared on this connection: no selection */
			fpd_debug("no selection scan on this connection");
		} else {
			if (rc == 0)
				request_sent(&t->req_scan, id, now);
			fpd_session_check_send(s, rc, "selection scan");
		}
	}
	if (live(s) && s->o->nnames && !t->req_whereis.active) {
		rc = fp_node_whereis_request(s->node, t->cand_atoms, t->ncand, &id);
		if (rc == 0)
			request_sent(&t->req_whereis, id, now);
		fpd_session_check_send(s, rc, "whereis request");
	}
	send_alive(s, now);
}

void
fpd_targets_on_scan(struct fpd_session *s, struct fp_reply *reply,
		    uint64_t now)
{
	struct targets *t = &s->t;
	struct fp_select_result res;
	struct fp_pid ours[2] = { fp_node_rex_pid(s->node) };
	size_t nours = 1, bytes = reply->len;
	uint64_t us = fpd_session_take_time(s, reply);
	int n;

	/* rex and the helper serve us: never ranked */
	if (fp_node_helper_pid(s->node, &ours[1]))
		nours++;
	n = fp_select_scan(s->select, reply, now, ours, nours,
			   s->cost.budget.top, t->top, &res);
	if (res.sweep)
		fpd_cost_sweep(&s->cost, us, res.scanned, bytes);
	else
		fpd_cost_selection(&s->cost, us, res.scanned, bytes);
	if (n < 0) {
		fpd_warn("unexpected reply to the selection scan; selection skipped");
		return;
	}
	t->scans_done++;
	t->last_full = res.full;
	t->ranking = res.sweep;
	fpd_debug("selection: %zu processes, %zu read%s, %zu alive, %d picked, reply %zu bytes, node %.1f ms, %.1f ms",
		  res.processes, res.scanned,
		  res.full ? " (all)" : res.sweep ? " (sweep)" : "", res.alive,
		  n, bytes, (double)us / 1000.0,
		  (double)(now - t->select_started_mono) / 1000.0);
	/* a sweep's candidates, and the first reading of all, are ranked
	 * when they are read again */
	if (res.sweep)
		t->swept_mono = now;
	if (res.sweep || res.baseline) {
		t->next_select_mono = t->select_started_mono +
			(s->o->every_us < FIRST_SELECT_DELAY_US ?
			 s->o->every_us : FIRST_SELECT_DELAY_US);
	}
	if (res.baseline)
		return;
	t->ntop = (size_t)n;
	fpd_sampling_rebuild(s);
	fpd_budget_top_applied(&s->cost.budget);
}

static void
say_names(struct fpd_session *s, bool first)
{
	struct targets *t = &s->t;

	for (size_t i = 0; i < s->o->nnames; i++) {
		const char *as = t->cand[t->named_as[i]];
		bool same = strcmp(as, s->o->names[i]) == 0;

		if (t->name_found[i] == t->name_said[i] && !first)
			continue;
		if (t->name_found[i])
			fpd_info("--name %s%s%s%s is <0.%u.%u>", s->o->names[i],
				 same ? "" : " ('", same ? "" : as, same ? "" : "')",
				 t->named[i].num, t->named[i].serial);
		else if (first)
			fpd_warn("--name %s is not registered on %s", s->o->names[i],
				 fp_node_name(s->node));
		else
			fpd_warn("--name %s is no longer registered on %s",
				 s->o->names[i], fp_node_name(s->node));
		t->name_said[i] = t->name_found[i];
	}
}

void
fpd_targets_on_whereis(struct fpd_session *s, const struct fp_reply *reply)
{
	struct targets *t = &s->t;
	bool first = !t->names_checked;

	if (fp_node_decode_whereis(reply, t->cand_pids, t->cand_found,
				   t->ncand) < 0) {
		fpd_warn("unexpected reply to whereis; --name processes not resolved");
		return;
	}
	/* a name's first candidate found is what it means */
	memset(t->name_found, 0, s->o->nnames * sizeof(*t->name_found));
	for (size_t k = t->ncand; k-- > 0;) {
		size_t i = t->name_of[k];

		if (t->cand_found[k]) {
			t->name_found[i] = true;
			t->named[i] = t->cand_pids[k];
			t->named_as[i] = k;
		}
	}
	t->names_checked = true;
	say_names(s, first);
	if (first && fpd_recorder_samples(s->rec) == 0 && !any_target(s)) {
		nothing_to_sample(s);
		return;
	}
	fpd_sampling_rebuild(s);
}

void
fpd_targets_on_alive(struct fpd_session *s, const struct fp_reply *reply)
{
	struct targets *t = &s->t;
	bool *alive = t->pin_alive;
	size_t n = 0, k = 0;
	bool changed = false;

	for (size_t i = 0; i < s->o->npids; i++)
		n += t->pin_state[i] == FP_PID_ALIVE;
	if (fp_node_decode_bools(reply, alive, n) < 0) {
		fpd_warn("unexpected reply to is_process_alive");
		return;
	}
	for (size_t i = 0; i < s->o->npids; i++) {
		if (t->pin_state[i] != FP_PID_ALIVE)
			continue;
		if (!alive[k++]) {
			fpd_warn("--pid %s has exited; no longer sampled", s->o->pids[i]);
			fpd_recorder_note(s->rec, "--pid %s has exited", s->o->pids[i]);
			t->pin_state[i] = FP_PID_DEAD;
			changed = true;
		}
	}
	if (changed)
		fpd_sampling_rebuild(s);
}

/*
 * proc_lib knows what OTP processes were started as: each is asked once
 * in its life, once a sample has shown it was started by proc_lib. Where
 * the node cannot read that one key of a process dictionary, asking
 * copies the whole dictionary (proc_lib:initial_call/1): only processes
 * of at most IC_COPY_MAX bytes are asked there, the others keep
 * proc_lib:init_p as their initial call.
 */
void
fpd_targets_ask_initial_calls(struct fpd_session *s, uint64_t now)
{
	struct targets *t = &s->t;
	int64_t max = fp_node_reads_dict_keys(s->node) ? -1 : IC_COPY_MAX;
	size_t n = 0;
	uint64_t id;
	int rc;

	if (t->req_init.active || !live(s) || now < t->next_ic_mono)
		return;
	t->next_ic_mono = now + FPD_BUDGET_WINDOW_US;
	for (size_t i = 0; i < s->sm.nset; i++) {
		if (fp_sampler_wants_proc_lib_call(s->sampler, s->sm.set[i], max))
			t->init_pids[n++] = s->sm.set[i];
	}
	if (n == 0)
		return;
	rc = fp_node_initial_call_request(s->node, t->init_pids, n, &id);
	t->ninit = n;
	if (rc == 0) {
		request_sent(&t->req_init, id, now);
		fp_sampler_initial_calls_asked(s->sampler, t->init_pids, n);
	}
	fpd_session_check_send(s, rc, "initial_call request");
}

/* Node work like a scan's: in the interval and in the budget. */
void
fpd_targets_on_initial_calls(struct fpd_session *s, struct fp_reply *reply)
{
	fpd_cost_other(&s->cost, fpd_session_take_time(s, reply));
	if (fp_sampler_initial_calls(s->sampler, reply, s->t.init_pids,
				     s->t.ninit) < 0)
		fpd_debug("unexpected initial_call reply");
}
