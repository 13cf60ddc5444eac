/*
 * flame_profd — the event loop: one timerfd tick drives selection,
 * sampling, rotation and the stop time; a signalfd turns signals into
 * events; the node's socket delivers replies and distribution ticks.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "flame_profd.h"
#include "fp/node.h"
#include "fp/perf-script.h"
#include "fp/sample.h"
#include "fp/select.h"

#define TICK_US 20000u			/* one heat-map row */
#define FIRST_SELECT_DELAY_US 1000000u	/* baseline to first ranking */
#define BACKOFF_MIN_US 500000u
#define BACKOFF_MAX_US 30000000u
#define MAX_RTT 4096
/* A node that answers nothing for this many request timeouts in a row is
 * treated as gone (a stopped VM keeps its socket open). */
#define MAX_TIMEOUTS 3
#define PENDING_MAX 32		/* notes kept while no file is open */
/* Sample requests in flight at once: on a busy node a request waits for
 * the sampled processes to be scheduled, and one at a time would cap the
 * rate at batch/rtt. Each takes other pids, so no process is in two. */
#define MAX_INFLIGHT 3
/*
 * Node scheduler time flame_profd's sampling costs, measured on the
 * 2-core reference machine (bench/run, docs/PERFORMANCE.md, cost
 * model): floors for the cost estimate. A sample request costs
 * REQUEST_COST_US of its own (the distribution message both ways, rex's
 * worker or the eval sampler's loop), then each process asked in full
 * costs SAMPLE_COST_*_US if it was waiting, SAMPLE_BUSY_COST_US if it
 * was running or in a run queue (it answers the stack's signal between
 * time slices, both sides rescheduled with cold caches), and a probe of
 * one that has not run PROBE_COST_US (a direct read, no signal). A
 * selection costs SCAN_COST_US per pid read. With --request helper there
 * is no request: each row the helper takes costs HELPER_ROW_COST_US (its
 * timer, the row's encoding, its share of a batch's message) and a probe
 * HELPER_PROBE_COST_US (docs/PERFORMANCE.md, cost model; quiet node: 6.2
 * and 15.7 ms/s at top 100 x 10 and x 100); samples cost what they cost
 * through rex. A selection's scan also costs SCAN_BYTE_COST_US per byte
 * of its reply, outside the timer:tc that times it: rex copies the
 * worker's result and encodes it onto the distribution socket (an
 * estimate, about 2 ns a byte for a copy and an encode; not measured on
 * its own).
 */
#define REQUEST_COST_US 150.0
#define SAMPLE_COST_REX_US 21.0
#define SAMPLE_COST_EVAL_US 15.0
#define SAMPLE_BUSY_COST_US 45.0
#define PROBE_COST_US 4.0
#define SCAN_COST_US 0.65
#define SCAN_BYTE_COST_US 0.002
#define HELPER_ROW_COST_US 60.0
#define HELPER_PROBE_COST_US 1.0
/* The largest process whose whole dictionary proc_lib:initial_call/1 may
 * copy, once in its life, on a node that cannot read one key of it: at
 * about 11 ns a byte (measured, OTP 25), 3 ms of one scheduler at most. */
#define IC_COPY_MAX (256 * 1024)
/*
 * SIGINT/SIGTERM are honoured within a second whatever the node does:
 * samples in flight are waited for STOP_DRAIN_US, and any wait for the
 * node (a connect, the backtrace_depth put back, a message half read) is
 * given up STOP_GRACE_US after the stop was asked (the library asks
 * every FP_NODE_SLICE_MS, give_up()).
 */
#define STOP_DRAIN_US 300000u
#define STOP_GRACE_US 600000u
/* The budget looks at the last second of sampling (and the last
 * selection, spread over its interval), whatever --every is: a node is
 * never sampled over budget for more than about a second. */
#define BUDGET_WINDOW_US 1000000u

/* The selection's share of the budget: the rest is the sampling's. */
#define SCAN_BUDGET_SHARE 0.5
/* The least a scan is cut to, beside the current selection (about a
 * millisecond of node time), and the most selections skipped in a row. */
#define SCAN_MIN_WINDOW 1000u
#define SCAN_SKIP_MAX 60.0

/* What flame_profd's requests cost the node, over some span of time. */
struct work {
	uint64_t scan_us;		/* selection scans, timer:tc */
	uint64_t scan_bytes;		/* ... their replies */
	uint64_t other_us;		/* initial-call reads, timer:tc */
	uint64_t sampled, scanned;	/* processes asked for */
	uint64_t running;		/* ... in full, found in a run queue */
	uint64_t probed;		/* ... with a probe only */
	uint64_t requests;		/* sample requests answered */
	double min_sample_us;		/* cheapest per process; <0: none */
};

/*
 * A request that timed out is late: forgotten by whoever waits for it,
 * but not sent again until its reply has come (and is dropped) or the
 * connection has gone — the node may still be working on it, and a second
 * copy would double that work (a scan that outlasts the timeout would be
 * run again and again). A reply can also be lost for good (the node's
 * rex restarted, or answered something that is no reply): a request late
 * for LATE_ABANDON timeouts is given up, since no work of ours runs that
 * long on a node that answers the rest.
 */
#define LATE_ABANDON 10
struct request {
	bool active;			/* sent, no reply yet */
	bool late;			/* ... and timed out */
	uint64_t id;
	uint64_t sent_mono;
	uint64_t counted_mono;		/* when its last timeout was counted */
};

struct daemon {
	const struct fpd_options *o;
	struct fp_node *node;
	struct fp_select *select;
	struct fp_sampler *sampler;
	struct fp_perf_writer *writer;
	struct fpd_output *out;
	int tfd, sfd;

	bool connected, ever_connected;
	uint64_t reconnect_at, backoff_us;

	/* selection */
	struct request req_scan, req_whereis, req_init, req_alive;
	uint64_t next_select_mono;
	uint64_t next_ic_mono;		/* initial calls looked for */
	uint64_t select_started_mono;
	/* --pid and --name, as the node resolves them; each change of a
	 * target's state is said once */
	struct fp_pid *pinned;		/* --pid i */
	enum fp_pid_state *pin_state;	/* ... and what the node says of it */
	bool *pin_alive;
	bool pins_checked;
	/* the atoms each --name can mean (fp_name_candidates()), asked
	 * together: name_of[k] is the --name of candidate k */
	char (*cand)[FP_NAME_MAX];
	const char **cand_atoms;
	size_t *name_of, ncand;
	struct fp_pid *cand_pids;
	bool *cand_found;
	struct fp_pid *named;		/* --name i, when registered */
	size_t *named_as;		/* ... as candidate k */
	bool *name_found;
	bool *name_said;		/* name_found[i] as last reported */
	bool names_checked;
	struct fp_pid *top;
	size_t ntop;
	struct fp_pid *init_pids;
	size_t ninit;

	/* what is sampled, round robin */
	struct fp_pid *set;
	size_t nset;
	size_t cursor;
	double owed;
	uint64_t last_tick_mono;
	struct sample_slot {
		struct request r;
		struct fp_pid *pids;
		size_t *idx;		/* their places in set[] ... */
		uint64_t gen;		/* ... as of this set generation */
		enum fp_ask *asks;
		size_t n;
	} slots[MAX_INFLIGHT];
	bool *busy;			/* set[i] is in a request in flight */
	uint64_t set_gen;
	uint64_t timeout_epoch;		/* requests sent before this counted */
	uint64_t last_stamp_us;		/* timestamps never go backwards */

	/* --request helper: the node samples, we take its batches */
	struct request req_batch;	/* active while one is expected */
	bool helper_stop_sent, helper_done;
	uint64_t helper_gen;		/* what the helper was last told */
	double helper_rate;
	bool helper_paused, helper_told;
	struct fp_pid *row_pids;
	enum fp_ask *row_asks;
	struct fp_pid *forget;

	/* per interval */
	uint64_t interval_mono;
	uint64_t interval_cpu_us;	/* our CPU time at its start */
	uint64_t st_samples, st_skipped, st_gone;
	uint64_t st_requests;		/* sample requests sent */
	uint64_t st_probes, st_reused;	/* probes sent; samples they gave */
	uint64_t dropped_before;
	uint64_t total_samples;
	uint32_t rtt_us[MAX_RTT];
	size_t nrtt;

	unsigned timeouts;		/* in a row, reset by any reply */
	struct fpd_budget budget;
	struct fpd_breaker breaker;
	struct request req_health;
	unsigned runq_limit;
	uint64_t st_target_us;		/* node-side time of our requests */
	struct work st_work;		/* ... in the interval */
	struct work bw_work;		/* sampling in the budget window */
	uint64_t bw_mono;		/* the budget window's start */
	uint64_t bw_cpu_us;		/* ... and our CPU time then */
	double select_us;		/* work of the last whole selection */
	double scan_pid_us;		/* ... per pid read; 0: none yet */
	unsigned scans_done;		/* on this connection */
	unsigned scan_skips;		/* in a row, over budget */
	uint64_t st_scans_cut;		/* selections the budget shrank */
	uint64_t st_scans_skipped;	/* ... or could not afford at all */
	char *pending[PENDING_MAX];
	size_t npending;
	uint64_t start_mono;
	uint64_t stop_mono;	/* when the stop was asked */
	bool stopping;
	bool duration_over;	/* a --duration run reached its end */
	int signals;
	int exit_code;
};

static size_t
set_capacity(const struct fpd_options *o)
{
	return o->top + o->npids + o->nnames;
}

/* ---- output ---------------------------------------------------------- */

/*
 * Notes written while no file is open wait here for the next file: a file
 * is only opened for a sample, so no file ever holds comments alone
 * (Flamescope takes such a file for another format).
 */
static FILE *
stream(struct daemon *d)
{
	bool fresh = !fpd_output_is_open(d->out);
	FILE *f = fpd_output_stream(d->out, fpd_now_epoch_us());

	if (f && fresh) {
		for (size_t i = 0; i < d->npending; i++)
			fp_perf_write_comment(d->writer, f, "%s", d->pending[i]);
	}
	if (f || d->npending == PENDING_MAX) {
		for (size_t i = 0; i < d->npending; i++)
			free(d->pending[i]);
		d->npending = 0;
	}
	return f;
}

static void
note(struct daemon *d, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/* A "# flame_profd: ..." comment between samples. */
static void
note(struct daemon *d, const char *format, ...)
{
	char text[512], stamp[40];
	va_list args;

	va_start(args, format);
	vsnprintf(text, sizeof(text), format, args);
	va_end(args);
	fpd_format_utc(fpd_now_epoch_us(), stamp, sizeof(stamp), false);

	if (fpd_output_is_open(d->out)) {
		fp_perf_write_comment(d->writer, stream(d), "flame_profd: %s %s",
				      stamp, text);
		return;
	}
	if (d->npending < PENDING_MAX &&
	    asprintf(&d->pending[d->npending], "flame_profd: %s %s", stamp, text) >= 0)
		d->npending++;
}

/* Samples that were due and not taken: the interval line and the file. */
static void
account_skipped(struct daemon *d, uint64_t n)
{
	d->st_skipped += n;
	fpd_output_skipped(d->out, n);
}

static void
write_samples(struct daemon *d)
{
	const struct fp_sample *s;
	size_t n;
	FILE *f = stream(d);

	s = fp_sampler_samples(d->sampler, &n);
	if (!f) {
		account_skipped(d, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		fp_perf_write_sample(d->writer, f, &s[i]);
		fpd_output_sample(d->out, s[i].time_us);
		d->st_samples++;
		d->total_samples++;
	}
}

/* ---- requests --------------------------------------------------------- */

static void
request_sent(struct request *r, uint64_t id, uint64_t now)
{
	r->active = true;
	r->late = false;
	r->id = id;
	r->sent_mono = r->counted_mono = now;
}

/* A reply to @r: false (dropped, and @r may be sent again) when it is
 * late. */
static bool
request_answered(struct request *r, uint64_t now, const char *what)
{
	bool late = r->late;

	r->active = r->late = false;
	if (late)
		fpd_debug("late reply to a %s dropped, %.1f s after it was sent",
			  what, (double)(now - r->sent_mono) / 1e6);
	return !late;
}

static void
lost_connection(struct daemon *d, const char *why)
{
	uint64_t now = fpd_now_mono_us();

	if (!d->connected)
		return;
	if (d->stopping)
		fpd_warn("lost connection to %s: %s", d->o->node, why);
	else
		fpd_warn("lost connection to %s: %s; reconnecting", d->o->node, why);
	note(d, "lost connection to %s: %s", d->o->node, why);
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (d->slots[i].r.active && !d->slots[i].r.late)
			account_skipped(d, d->slots[i].n);
		d->slots[i].r.active = d->slots[i].r.late = false;
	}
	memset(d->busy, 0, set_capacity(d->o) * sizeof(*d->busy));
	fpd_output_finish(d->out);
	fp_node_disconnect(d->node);
	d->connected = false;

	d->req_scan.active = d->req_scan.late = false;
	d->req_whereis.active = d->req_whereis.late = false;
	d->req_init.active = d->req_init.late = false;
	d->req_alive.active = d->req_alive.late = false;
	d->req_health.active = d->req_health.late = false;
	d->req_batch.active = false;
	d->helper_told = false;
	/* a stop asked of a helper that is gone is as good as answered */
	d->helper_done = d->helper_stop_sent;
	d->breaker.open = d->breaker.probing = false;
	d->timeouts = 0;
	d->nset = d->ntop = 0;
	memset(d->name_found, 0, d->o->nnames * sizeof(*d->name_found));
	d->backoff_us = BACKOFF_MIN_US;
	d->reconnect_at = now + d->backoff_us;
}

static void
check_send(struct daemon *d, int rc, const char *what)
{
	if (rc == 0)
		return;
	fpd_debug("sending %s failed: %s", what, strerror(-rc));
	lost_connection(d, rc == -ETIMEDOUT ? "send timed out" :
			rc == -ECANCELED ? "send given up" : "send failed");
}

/* Stop asked (a signal, --duration): the clock of STOP_GRACE_US starts. */
static void
stop(struct daemon *d)
{
	if (d->stopping)
		return;
	d->stopping = true;
	d->stop_mono = fpd_now_mono_us();
}

/* ---- the sample set --------------------------------------------------- */

static bool
in_set(const struct fp_pid *set, size_t n, struct fp_pid pid)
{
	for (size_t i = 0; i < n; i++) {
		if (set[i].num == pid.num && set[i].serial == pid.serial)
			return true;
	}
	return false;
}

static void
add_to_set(struct daemon *d, struct fp_pid pid)
{
	if (d->nset < set_capacity(d->o) && !in_set(d->set, d->nset, pid))
		d->set[d->nset++] = pid;
}

static void
rebuild_set(struct daemon *d)
{
	d->nset = 0;
	for (size_t i = 0; i < d->o->npids; i++) {
		if (d->pin_state[i] == FP_PID_ALIVE)
			add_to_set(d, d->pinned[i]);
	}
	for (size_t i = 0; i < d->o->nnames; i++) {
		if (d->name_found[i])
			add_to_set(d, d->named[i]);
	}
	for (size_t i = 0; i < d->ntop; i++)
		add_to_set(d, d->top[i]);
	if (d->nset)
		d->cursor %= d->nset;
	else
		d->cursor = 0;
	fp_sampler_retain(d->sampler, d->set, d->nset);

	/* Requests in flight keep their pids: mark them in the new set, and
	 * point the requests at their new places, so that their replies
	 * free them there (a pid that left the set has no place). */
	d->set_gen++;
	memset(d->busy, 0, set_capacity(d->o) * sizeof(*d->busy));
	for (int s = 0; s < MAX_INFLIGHT; s++) {
		struct sample_slot *slot = &d->slots[s];

		if (!slot->r.active || slot->r.late)
			continue;
		for (size_t i = 0; i < slot->n; i++) {
			slot->idx[i] = SIZE_MAX;
			for (size_t j = 0; j < d->nset; j++) {
				if (d->set[j].num == slot->pids[i].num &&
				    d->set[j].serial == slot->pids[i].serial) {
					d->busy[j] = true;
					slot->idx[i] = j;
					break;
				}
			}
		}
		slot->gen = d->set_gen;
	}

}

/*
 * proc_lib knows what OTP processes were started as: each is asked once
 * in its life, once a sample has shown it was started by proc_lib. Where
 * the node cannot read that one key of a process dictionary, asking
 * copies the whole dictionary (proc_lib:initial_call/1): only processes
 * of at most IC_COPY_MAX bytes are asked there, the others keep
 * proc_lib:init_p as their initial call.
 */
static void
ask_initial_calls(struct daemon *d, uint64_t now)
{
	int64_t max = fp_node_reads_dict_keys(d->node) ? -1 : IC_COPY_MAX;
	size_t n = 0;
	uint64_t id;
	int rc;

	if (d->req_init.active || !d->connected || now < d->next_ic_mono)
		return;
	d->next_ic_mono = now + BUDGET_WINDOW_US;
	for (size_t i = 0; i < d->nset; i++) {
		if (fp_sampler_wants_proc_lib_call(d->sampler, d->set[i], max))
			d->init_pids[n++] = d->set[i];
	}
	if (n == 0)
		return;
	rc = fp_node_initial_call_request(d->node, d->init_pids, n, &id);
	d->ninit = n;
	if (rc == 0) {
		request_sent(&d->req_init, id, now);
		fp_sampler_initial_calls_asked(d->sampler, d->init_pids, n);
	}
	check_send(d, rc, "initial_call request");
}

/* ---- selection -------------------------------------------------------- */

/*
 * The most pids the next scan may read (0: --scan-max): the selection's
 * share of the budget over --every, at what the last scan cost per pid
 * read, its reply included. The baseline and the first ranking are never
 * held back (there is nothing to sample before them). A scan is never cut
 * below the current selection and SCAN_MIN_WINDOW others; when even that
 * is over budget it is sent only every k-th selection (*skip the others),
 * k the factor it is over by — as the budget lowers the rate but never
 * stops sampling — and at least every SCAN_SKIP_MAX.
 */
static size_t
scan_limit(struct daemon *d, bool *skip)
{
	double allow_us, n, least, k;

	*skip = false;
	if (d->budget.max_pct <= 0 || d->scans_done < 2 || d->scan_pid_us <= 0)
		return 0;
	allow_us = d->budget.max_pct / 100.0 * SCAN_BUDGET_SHARE *
		   (double)fp_node_schedulers(d->node) * (double)d->o->every_us;
	n = allow_us / d->scan_pid_us;
	least = fmin((double)(d->nset + SCAN_MIN_WINDOW), (double)d->o->scan_max);
	if (n >= (double)d->o->scan_max || n >= least) {
		d->scan_skips = 0;
		return n >= (double)d->o->scan_max ? 0 : (size_t)n;
	}
	k = fmin(ceil(least / fmax(n, 1e-9)), SCAN_SKIP_MAX);
	if (++d->scan_skips < (unsigned)k) {
		*skip = true;
		return 0;
	}
	d->scan_skips = 0;
	return (size_t)least;
}

static void send_alive(struct daemon *d, uint64_t now);

static void
start_selection(struct daemon *d, uint64_t now)
{
	struct fp_scan scan;
	size_t limit;
	uint64_t id;
	bool skip;
	int rc;

	if (d->req_scan.active || d->breaker.open)
		return;
	limit = scan_limit(d, &skip);
	if (skip) {
		d->st_scans_skipped++;
		fpd_debug("selection skipped: over budget at %.2f µs per pid read",
			  d->scan_pid_us);
	} else {
		if (limit)
			d->st_scans_cut++;
		d->select_started_mono = now;
		fp_select_plan(d->select, d->set, d->nset, limit, &scan);
		rc = fp_node_scan_request(d->node, &scan, &id);
		if (rc == -ENOTCONN && d->connected) {
			/* not prepared on this connection: no selection */
			fpd_debug("no selection scan on this connection");
		} else {
			if (rc == 0)
				request_sent(&d->req_scan, id, now);
			check_send(d, rc, "selection scan");
		}
	}
	if (d->connected && d->o->nnames && !d->req_whereis.active) {
		rc = fp_node_whereis_request(d->node, d->cand_atoms, d->ncand, &id);
		if (rc == 0)
			request_sent(&d->req_whereis, id, now);
		check_send(d, rc, "whereis request");
	}
	send_alive(d, now);
}

/*
 * Heavy requests run in timer:tc on the node: their wall time there. Most
 * of it, on a busy node, is waiting for the sampled processes to answer
 * (a running process handles process_info when it is next scheduled out),
 * not work. The cost counts work: per interval, the cheapest time per
 * process seen in any request, times the processes asked for.
 */
static uint64_t
take_time(struct daemon *d, struct fp_reply *reply)
{
	uint64_t us;

	if (reply->badrpc || fp_reply_take_time(reply, &us) < 0)
		return 0;
	d->st_target_us += us;
	return us;
}

static void
work_reset(struct work *w)
{
	*w = (struct work){ .min_sample_us = -1 };
}

static bool
helper_mode(const struct daemon *d)
{
	return fp_node_request_path(d->node) == FP_REQUEST_HELPER;
}

static double
sample_floor(const struct daemon *d)
{
	return fp_node_request_path(d->node) == FP_REQUEST_REX ? SAMPLE_COST_REX_US :
						  SAMPLE_COST_EVAL_US;
}

/*
 * A sample batch: @full processes asked in full, @running of them found
 * in a run queue, @probes probed. Probes are read at once, without a
 * signal, and count at PROBE_COST_US each; the rest of the batch's time
 * is its full samples' (a batch of probes alone says nothing of those).
 */
static void
count_sample_work(struct work *w, uint64_t us, size_t full, size_t running,
		  size_t probes)
{
	double per;

	w->requests++;
	w->sampled += full;
	w->running += running;
	w->probed += probes;
	if (full == 0)
		return;
	per = fmax(0.0, (double)us - PROBE_COST_US * (double)probes) / (double)full;
	if (w->min_sample_us < 0 || per < w->min_sample_us)
		w->min_sample_us = per;
}

/*
 * The node work in w, in µs: measured, but never less than what
 * scheduler_wall_time and a saturated node's lost work charged on the
 * reference machine (docs/PERFORMANCE.md, cost model): much of the work
 * of answering a request happens in the sampled processes, the
 * distribution encoding and the scheduling around them, outside the worker
 * that timer:tc times.
 * On a busy node timer:tc's time is mostly waiting for the sampled
 * processes to be scheduled, so the cheapest time per process seen
 * stands for them all.
 */
static double
work_us(const struct daemon *d, const struct work *w)
{
	bool helper = helper_mode(d);
	double floor_us = (helper ? HELPER_ROW_COST_US : REQUEST_COST_US) *
			  (double)w->requests +
			  sample_floor(d) * (double)(w->sampled - w->running) +
			  SAMPLE_BUSY_COST_US * (double)w->running;

	return (double)w->other_us +
	       fmax(w->min_sample_us > 0 ? w->min_sample_us * (double)w->sampled : 0,
		    floor_us) +
	       (helper ? HELPER_PROBE_COST_US : PROBE_COST_US) * (double)w->probed +
	       fmax((double)w->scan_us, SCAN_COST_US * (double)w->scanned) +
	       SCAN_BYTE_COST_US * (double)w->scan_bytes;
}

/* work_us per µs of the node's scheduler time, in percent */
static double
work_pct(const struct daemon *d, double us, double secs)
{
	return secs > 0 ? us / (secs * 1e6) * 100.0 /
		(double)(d->connected ? fp_node_schedulers(d->node) : 1) : 0;
}

/*
 * @cpu_us of our own CPU time over @secs, as a share of the node's
 * schedulers in percent, when the node runs on this host: there it is
 * taken from the node's cores (docs/PERFORMANCE.md measured it as a third
 * of the loss at top 100 x 10 on a saturated 2-core node). A node on
 * another host does not pay it: 0.
 */
static double
self_pct(const struct daemon *d, uint64_t cpu_us, double secs)
{
	if (!d->connected || !fp_node_is_local(d->node))
		return 0;
	return work_pct(d, (double)cpu_us, secs);
}

/* A budget window from @now, when our CPU time read @cpu_us. */
static void
budget_window_start(struct daemon *d, uint64_t now, uint64_t cpu_us)
{
	d->bw_mono = now;
	d->bw_cpu_us = cpu_us;
	work_reset(&d->bw_work);
}

/*
 * A selection's scan took @us on the node (timer:tc: the table walk and
 * the reads, which wait for nobody, so all of it is work), read @n pids
 * and answered in @bytes: the interval's work, and the selection's whole
 * work for the budget.
 */
static void
count_selection(struct daemon *d, uint64_t us, size_t n, size_t bytes)
{
	struct work sel;

	work_reset(&sel);
	sel.scan_us = us;
	sel.scan_bytes = bytes;
	sel.scanned = n;
	d->select_us = work_us(d, &sel);
	if (n)
		d->scan_pid_us = d->select_us / (double)n;
	d->st_work.scan_us += us;
	d->st_work.scan_bytes += bytes;
	d->st_work.scanned += n;
}

static void
on_scan(struct daemon *d, struct fp_reply *reply, uint64_t now)
{
	struct fp_select_result res;
	struct fp_pid ours[2] = { fp_node_rex_pid(d->node) };
	size_t nours = 1, bytes = reply->len;
	uint64_t us = take_time(d, reply);
	int n;

	/* rex and the helper serve us: never ranked */
	if (fp_node_helper_pid(d->node, &ours[1]))
		nours++;
	n = fp_select_scan(d->select, reply, now, ours, nours, d->budget.top,
			   d->top, &res);
	count_selection(d, us, res.scanned, bytes);
	if (n < 0) {
		fpd_warn("unexpected reply to the selection scan; selection skipped");
		return;
	}
	d->scans_done++;
	fpd_debug("selection: %zu processes, %zu read%s, %zu alive, %d picked, reply %zu bytes, node %.1f ms, %.1f ms",
		  res.processes, res.scanned, res.full ? " (all)" : "", res.alive,
		  n, bytes, (double)us / 1000.0,
		  (double)(now - d->select_started_mono) / 1000.0);
	if (res.baseline) {
		d->next_select_mono = d->select_started_mono +
			(d->o->every_us < FIRST_SELECT_DELAY_US ?
			 d->o->every_us : FIRST_SELECT_DELAY_US);
		return;
	}
	d->ntop = (size_t)n;
	rebuild_set(d);
	fpd_budget_top_applied(&d->budget);
}

/* With no --top, the --pid and --name targets are all there is. */
static bool
any_target(const struct daemon *d)
{
	if (d->o->top)
		return true;
	for (size_t i = 0; i < d->o->npids; i++) {
		if (d->pin_state[i] == FP_PID_ALIVE)
			return true;
	}
	for (size_t i = 0; i < d->o->nnames; i++) {
		if (d->name_found[i])
			return true;
	}
	return !d->names_checked && d->o->nnames;
}

static void
nothing_to_sample(struct daemon *d)
{
	fpd_err("no sample taken: nothing to sample on %s (no --pid is alive, no --name is registered)",
		fp_node_name(d->node));
	d->exit_code = FPD_EXIT_NOSAMPLES;
	d->stopping = true;
}

static void
on_whereis(struct daemon *d, const struct fp_reply *reply)
{
	bool first = !d->names_checked;

	if (fp_node_decode_whereis(reply, d->cand_pids, d->cand_found,
				   d->ncand) < 0) {
		fpd_warn("unexpected reply to whereis; --name processes not resolved");
		return;
	}
	/* a name's first candidate found is what it means */
	memset(d->name_found, 0, d->o->nnames * sizeof(*d->name_found));
	for (size_t k = d->ncand; k-- > 0;) {
		size_t i = d->name_of[k];

		if (d->cand_found[k]) {
			d->name_found[i] = true;
			d->named[i] = d->cand_pids[k];
			d->named_as[i] = k;
		}
	}
	d->names_checked = true;
	for (size_t i = 0; i < d->o->nnames; i++) {
		const char *as = d->cand[d->named_as[i]];
		bool same = strcmp(as, d->o->names[i]) == 0;

		if (d->name_found[i] == d->name_said[i] && !first)
			continue;
		if (d->name_found[i])
			fpd_info("--name %s%s%s%s is <0.%u.%u>", d->o->names[i],
				 same ? "" : " ('", same ? "" : as, same ? "" : "')",
				 d->named[i].num, d->named[i].serial);
		else if (first)
			fpd_warn("--name %s is not registered on %s", d->o->names[i],
				 fp_node_name(d->node));
		else
			fpd_warn("--name %s is no longer registered on %s",
				 d->o->names[i], fp_node_name(d->node));
		d->name_said[i] = d->name_found[i];
	}
	if (first && d->total_samples == 0 && !any_target(d)) {
		nothing_to_sample(d);
		return;
	}
	rebuild_set(d);
}

/* Whether the live --pid targets still live: once per selection. */
static void
send_alive(struct daemon *d, uint64_t now)
{
	size_t n = 0;
	uint64_t id;
	int rc;

	if (!d->connected || d->req_alive.active)
		return;
	for (size_t i = 0; i < d->o->npids; i++) {
		if (d->pin_state[i] == FP_PID_ALIVE)
			d->init_pids[n++] = d->pinned[i];
	}
	if (n == 0)
		return;
	rc = fp_node_alive_request(d->node, d->init_pids, n, &id);
	if (rc == 0)
		request_sent(&d->req_alive, id, now);
	check_send(d, rc, "is_process_alive request");
}

static void
on_alive(struct daemon *d, const struct fp_reply *reply)
{
	bool *alive = d->pin_alive;
	size_t n = 0, k = 0;
	bool changed = false;

	for (size_t i = 0; i < d->o->npids; i++)
		n += d->pin_state[i] == FP_PID_ALIVE;
	if (fp_node_decode_bools(reply, alive, n) < 0) {
		fpd_warn("unexpected reply to is_process_alive");
		return;
	}
	for (size_t i = 0; i < d->o->npids; i++) {
		if (d->pin_state[i] != FP_PID_ALIVE)
			continue;
		if (!alive[k++]) {
			fpd_warn("--pid %s has exited; no longer sampled", d->o->pids[i]);
			note(d, "--pid %s has exited", d->o->pids[i]);
			d->pin_state[i] = FP_PID_DEAD;
			changed = true;
		}
	}
	if (changed)
		rebuild_set(d);
}

/*
 * The --pid targets, checked by the node at each connect (a pid it would
 * not take is never sent to it). At the first, a pid that is none of
 * this node's is a usage error; one that does not live is said once.
 */
static int
check_pins(struct daemon *d, unsigned timeout_ms)
{
	const struct fpd_options *o = d->o;
	enum fp_pid_state *was = d->pin_state + o->npids;
	int rc;

	if (o->npids == 0)
		return 0;
	memcpy(was, d->pin_state, o->npids * sizeof(*was));
	rc = fp_node_check_pids(d->node, o->pids, o->npids, d->pinned,
				d->pin_state, timeout_ms);
	if (rc == -ECANCELED)
		return 0;	/* stopping */
	if (rc < 0) {
		fpd_err("cannot check the --pid targets on %s: %s",
			fp_node_name(d->node), strerror(-rc));
		return FPD_EXIT_SOFTWARE;
	}
	for (size_t i = 0; i < o->npids; i++) {
		const char *name = fp_node_name(d->node);

		switch (d->pin_state[i]) {
		case FP_PID_INVALID:
			if (d->pins_checked && was[i] == FP_PID_INVALID)
				break;
			fpd_err("--pid %s: not a pid of %s (numbers out of the node's range)",
				o->pids[i], name);
			if (!d->pins_checked)
				return FPD_EXIT_USAGE;
			break;
		case FP_PID_OTHER_NODE:
			fpd_err("--pid %s: a process of another node than %s", o->pids[i],
				name);
			return FPD_EXIT_USAGE;
		case FP_PID_DEAD:
			if (!d->pins_checked || was[i] == FP_PID_ALIVE)
				fpd_warn("--pid %s: no such process on %s", o->pids[i], name);
			break;
		case FP_PID_ALIVE:
			break;
		}
	}
	d->pins_checked = true;
	if (d->total_samples == 0 && !any_target(d)) {
		nothing_to_sample(d);
		return FPD_EXIT_NOSAMPLES;
	}
	return 0;
}

/* ---- sampling --------------------------------------------------------- */

static struct sample_slot *
free_slot(struct daemon *d)
{
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (!d->slots[i].r.active)
			return &d->slots[i];
	}
	return NULL;
}

/*
 * A process whose last sample found it had not run since the one before
 * is probed: if it still has not run, the probe gives its sample without
 * a signal (fp_sampler_decode()); if it has, it is asked in full at once.
 */
static enum fp_ask
ask_for(const struct daemon *d, struct fp_pid pid)
{
	if (fp_sampler_wants_initial_call(d->sampler, pid))
		return FP_ASK_FULL_IC;
	if (d->o->idle_reuse && fp_sampler_idle(d->sampler, pid))
		return FP_ASK_PROBE;
	return FP_ASK_FULL;
}

/* Ask for the first @n pids of @slot; false (the samples skipped) if the
 * request could not be sent. */
static bool
slot_send(struct daemon *d, struct sample_slot *slot, size_t n, uint64_t now)
{
	uint64_t id;
	int rc;

	slot->n = n;
	rc = fp_node_sample_request(d->node, slot->pids, slot->asks, n, &id);
	if (rc < 0) {
		account_skipped(d, n);
		check_send(d, rc, "sample request");
		return false;
	}
	request_sent(&slot->r, id, now);
	d->st_requests++;
	for (size_t i = 0; i < n; i++)
		d->busy[slot->idx[i]] = true;
	return true;
}

/*
 * Send what is owed: as many requests as there are free slots and pids no
 * request in flight holds. Called on every tick and on every reply, so a
 * small set sampled fast is not held to one request per tick.
 */
static void
sample_send(struct daemon *d, uint64_t now)
{
	size_t share = (d->nset + MAX_INFLIGHT - 1) / MAX_INFLIGHT;
	struct sample_slot *slot;

	while (d->connected && !d->stopping && !d->breaker.open &&
	       d->owed >= 1.0 && (slot = free_slot(d))) {
		size_t want = (size_t)d->owed, k = 0, pos = d->cursor;

		/* a request never takes more than its share of the set, and
		 * never a pid another request in flight holds (replies may
		 * overtake each other) */
		if (want > share)
			want = share;
		for (size_t seen = 0; seen < d->nset && k < want; seen++) {
			if (!d->busy[pos]) {
				slot->pids[k] = d->set[pos];
				slot->idx[k] = pos;
				slot->asks[k] = ask_for(d, d->set[pos]);
				k++;
			}
			pos = (pos + 1) % d->nset;
		}
		if (k == 0)
			return;
		d->cursor = pos;
		d->owed -= (double)k;
		slot->gen = d->set_gen;
		if (!slot_send(d, slot, k, now))
			return;
	}
}

static void
sample_tick(struct daemon *d, uint64_t now)
{
	double per_us = (double)d->nset * d->budget.rate / 1e6;
	double cap;

	if (d->last_tick_mono)
		d->owed += per_us * (double)(now - d->last_tick_mono);
	d->last_tick_mono = now;
	if (d->nset == 0) {
		d->owed = 0;
		return;
	}
	if (d->breaker.open) {
		/* Paused: what falls due is counted, not owed. */
		account_skipped(d, (uint64_t)d->owed);
		d->owed -= floor(d->owed);
		return;
	}
	if (helper_mode(d)) {
		d->owed = 0;	/* the helper keeps its own account */
		return;
	}
	/* Never owe more than a round (or two ticks' worth, for a small set
	 * sampled fast): what is beyond was missed. */
	cap = fmax((double)d->nset, 2.0 * per_us * TICK_US);
	if (d->owed > cap) {
		double missed = floor(d->owed - cap);

		account_skipped(d, (uint64_t)missed);
		d->owed -= missed;
	}
	sample_send(d, now);
}

static void
slot_done(struct daemon *d, struct sample_slot *slot)
{
	slot->r.active = false;
	if (slot->gen != d->set_gen)
		return;		/* not in flight at the last rebuild_set() */
	for (size_t i = 0; i < slot->n; i++) {
		if (slot->idx[i] != SIZE_MAX)
			d->busy[slot->idx[i]] = false;
	}
}

/*
 * The probed processes of a reply that had run since their last sample
 * are asked in full now, on the same slot: they stay busy, and a timeout
 * or a lost connection counts them as the slot's. No more is owed for
 * them; the probe was their turn.
 */
static void
follow_up(struct daemon *d, struct sample_slot *slot, uint64_t now)
{
	const size_t *stale;
	size_t nstale = fp_sampler_stale(d->sampler, &stale), m = 0;
	bool current = slot->gen == d->set_gen;

	slot_done(d, slot);
	if (nstale == 0)
		return;
	if (!d->connected || d->stopping || d->breaker.open || !current) {
		account_skipped(d, nstale);
		return;
	}
	for (size_t k = 0; k < nstale; k++) {
		size_t j = stale[k];

		if (slot->idx[j] == SIZE_MAX) {
			account_skipped(d, 1);	/* it left the set meanwhile */
			continue;
		}
		slot->pids[m] = slot->pids[j];
		slot->idx[m] = slot->idx[j];
		slot->asks[m] = FP_ASK_FULL;
		m++;
	}
	if (m > 0)
		slot_send(d, slot, m, now);
}

static size_t
count_probes(const enum fp_ask *asks, size_t n)
{
	size_t probes = 0;

	for (size_t i = 0; i < n; i++)
		probes += asks[i] == FP_ASK_PROBE;
	return probes;
}

static void
record_rtt(struct daemon *d, uint64_t us)
{
	if (d->nrtt < MAX_RTT)
		d->rtt_us[d->nrtt++] = (uint32_t)(us > UINT32_MAX ? UINT32_MAX : us);
}

/* A sample time, held back from going before the last one written: a
 * reply that overtook an earlier one takes the later time, so that the
 * file's times never go backwards. */
static uint64_t
next_stamp(struct daemon *d, uint64_t stamp)
{
	if (stamp < d->last_stamp_us)
		stamp = d->last_stamp_us;
	d->last_stamp_us = stamp;
	return stamp;
}

/* A decode of @probes probes and the rest in full went well: count it
 * and write its samples. */
static void
take_samples(struct daemon *d, size_t probes)
{
	d->st_gone += fp_sampler_gone(d->sampler);
	d->st_probes += probes;
	d->st_reused += fp_sampler_reused(d->sampler);
	write_samples(d);
}

static void
on_sample(struct daemon *d, struct sample_slot *slot, struct fp_reply *reply,
	  uint64_t now)
{
	uint64_t rtt = now - slot->r.sent_mono;
	uint64_t stamp, us;
	size_t probes = count_probes(slot->asks, slot->n), running;
	int n;

	us = take_time(d, reply);
	record_rtt(d, rtt);
	/* the samples were taken somewhere between send and reply */
	stamp = next_stamp(d, fpd_now_epoch_us() - rtt / 2);
	n = fp_sampler_decode(d->sampler, reply, slot->pids, slot->asks, slot->n,
			      stamp, fp_node_wordsize(d->node));
	running = n < 0 ? 0 : fp_sampler_running(d->sampler);
	count_sample_work(&d->st_work, us, slot->n - probes, running, probes);
	count_sample_work(&d->bw_work, us, slot->n - probes, running, probes);
	if (n < 0) {
		slot_done(d, slot);
		fpd_warn("could not decode a sample reply (%zu samples skipped)",
			 slot->n);
		account_skipped(d, slot->n);
		return;
	}
	take_samples(d, probes);
	follow_up(d, slot, now);
	sample_send(d, now);
}

static struct sample_slot *
slot_of(struct daemon *d, uint64_t id)
{
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (d->slots[i].r.active && d->slots[i].r.id == id)
			return &d->slots[i];
	}
	return NULL;
}

static bool
sampling_in_flight(const struct daemon *d)
{
	if (helper_mode(d))
		return d->connected && d->helper_stop_sent && !d->helper_done;
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		if (d->slots[i].r.active && !d->slots[i].r.late)
			return true;
	}
	return false;
}

/* ---- the helper (--request helper) ------------------------------------- */

/* Tell the helper what changed: the set, the rate, a pause. */
static void
helper_sync(struct daemon *d)
{
	bool paused = d->breaker.open;
	int rc;

	if (!d->connected || d->helper_stop_sent ||
	    (d->helper_told && d->helper_gen == d->set_gen &&
	     d->helper_rate == d->budget.rate && d->helper_paused == paused))
		return;
	rc = fp_node_helper_config(d->node, d->set, d->nset, d->budget.rate,
				   d->o->idle_reuse, paused);
	if (rc == 0) {
		d->helper_told = true;
		d->helper_gen = d->set_gen;
		d->helper_rate = d->budget.rate;
		d->helper_paused = paused;
	}
	check_send(d, rc, "helper configuration");
}

/* Stopping: ask for what the helper has, once; the loop waits for it. */
static void
helper_finish(struct daemon *d, uint64_t now)
{
	int rc;

	if (!d->connected || d->helper_stop_sent)
		return;
	rc = fp_node_helper_stop(d->node);
	d->helper_stop_sent = true;
	if (rc == 0)
		request_sent(&d->req_batch, fp_node_helper_id(d->node), now);
	else
		d->helper_done = true;
	check_send(d, rc, "helper stop");
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
on_batch(struct daemon *d, const struct fp_reply *reply, uint64_t now)
{
	size_t cap = set_capacity(d->o), nforget = 0;
	struct fp_batch b;
	struct fp_batch_row row;
	int64_t offset;
	uint64_t epoch = fpd_now_epoch_us();
	int rc;

	rc = fp_node_batch_open(reply, &b);
	if (rc == -EPROTO) {
		lost_connection(d, "the helper failed");
		return;
	}
	if (rc < 0) {
		fpd_warn("could not decode a helper batch; its samples are lost");
		return;
	}
	request_sent(&d->req_batch, reply->id, now);
	if (b.last) {
		d->req_batch.active = false;
		d->helper_done = true;
	}
	offset = (int64_t)epoch - (int64_t)b.sent_us;
	account_skipped(d, b.skipped);
	d->st_target_us += b.work_us;
	d->st_requests++;
	while ((rc = fp_node_batch_row(&b, &row, d->row_pids, d->row_asks,
				       cap)) > 0) {
		uint64_t stamp = next_stamp(d, (uint64_t)((int64_t)row.time_us +
							  offset));
		size_t p = count_probes(d->row_asks, row.n), nstale, running;
		const size_t *stale;
		int n;

		if (epoch > stamp)
			record_rtt(d, epoch - stamp);
		n = fp_sampler_decode(d->sampler, &row.results, d->row_pids,
				      d->row_asks, row.n, stamp,
				      fp_node_wordsize(d->node));
		if (n < 0) {
			fpd_warn("could not decode a helper row (%zu samples skipped)",
				 row.n);
			account_skipped(d, row.n);
			continue;
		}
		/* the model alone: the helper's wall time on a busy node is
		 * mostly its wait to be scheduled between busy processes */
		running = fp_sampler_running(d->sampler);
		count_sample_work(&d->st_work, 0, row.n - p, running, p);
		count_sample_work(&d->bw_work, 0, row.n - p, running, p);
		take_samples(d, p);
		nstale = fp_sampler_stale(d->sampler, &stale);
		account_skipped(d, nstale);
		for (size_t k = 0; k < nstale && nforget < cap; k++)
			d->forget[nforget++] = d->row_pids[stale[k]];
	}
	if (rc < 0)
		fpd_warn("could not decode a helper batch row; the rest of the batch is lost");
	if (nforget)
		check_send(d, fp_node_helper_forget(d->node, d->forget, nforget),
			   "helper forget");
}

/* ---- connection ------------------------------------------------------- */

static int
connect_error_exit(struct daemon *d, int rc)
{
	const char *node = d->o->node;

	switch (rc) {
	case -EHOSTUNREACH:
		fprintf(stderr, "flame_profd: error: cannot resolve the host of %s\n", node);
		return FPD_EXIT_UNAVAILABLE;
	case -ECONNREFUSED:
		fprintf(stderr, "flame_profd: error: cannot reach %s: no epmd answers on its host (is the node running?)\n",
			node);
		return FPD_EXIT_UNAVAILABLE;
	case -ENOENT:
		fprintf(stderr, "flame_profd: error: cannot reach %s: epmd on its host does not know that node name (is it running? is the name right?)\n",
			node);
		return FPD_EXIT_UNAVAILABLE;
	case -ETIMEDOUT:
		fprintf(stderr, "flame_profd: error: cannot reach %s: timed out\n", node);
		return FPD_EXIT_UNAVAILABLE;
	case -EACCES:
		fprintf(stderr, "flame_profd: error: %s refused the connection: wrong cookie? (or the node uses %s names)\n",
			node, strchr(strchr(node, '@'), '.') ? "short" : "long");
		return FPD_EXIT_NOPERM;
	case -EPROTO:
		fprintf(stderr, "flame_profd: error: %s answered the setup calls with something unexpected\n",
			node);
		return FPD_EXIT_SOFTWARE;
	default:
		fprintf(stderr, "flame_profd: error: cannot connect to %s: %s\n",
			node, strerror(-rc));
		return FPD_EXIT_UNAVAILABLE;
	}
}

static const char *
connect_error_text(int rc)
{
	switch (rc) {
	case -ECONNREFUSED: return "no epmd";
	case -ENOENT: return "node not registered with epmd";
	case -EACCES: return "connection refused by the node (cookie?)";
	case -ETIMEDOUT: return "timed out";
	default: return strerror(-rc);
	}
}

/* Returns 0 when connected, or an exit code when giving up for good. */
static const char *request_name(enum fp_request_path path);

static bool
asks_keys(const struct fpd_options *o)
{
	return o->nkeys || o->nlogger_keys || o->callers;
}

/* " keys=a,b logger_keys=c callers=yes", only for what was asked, so
 * that files of runs without keys read as before. */
static char *
header_keys(const struct fpd_options *o)
{
	char *s = strdup("");

	if (!s)
		abort();

	if (o->nkeys) {
		char *t = NULL;

		for (size_t i = 0; i < o->nkeys; i++) {
			if (asprintf(&t, "%s%s%s", s, i ? "," : " keys=", o->keys[i]) < 0)
				abort();
			free(s);
			s = t;
		}
	}
	if (o->nlogger_keys) {
		char *t = NULL;

		for (size_t i = 0; i < o->nlogger_keys; i++) {
			if (asprintf(&t, "%s%s%s", s, i ? "," : " logger_keys=",
				     o->logger_keys[i]) < 0)
				abort();
			free(s);
			s = t;
		}
	}
	if (o->callers) {
		char *t = NULL;

		if (asprintf(&t, "%s callers=yes", s) < 0)
			abort();
		free(s);
		s = t;
	}
	return s;
}

static const char *
label_source_name(enum fp_label_source source)
{
	return source == FP_LABEL_ITEM ? "item" :
	       source == FP_LABEL_DICT ? "dictionary" : "no";
}

/* what --key, --logger-key and --callers get on this connection */
static const char *
keys_state(const struct daemon *d)
{
	if (!asks_keys(d->o))
		return "none";
	return fp_node_records_keys(d->node) ? "yes" : "unavailable";
}

static int
try_connect(struct daemon *d, uint64_t now)
{
	unsigned timeout_ms = (unsigned)(d->o->timeout_us / 1000);
	unsigned orig, depth;
	int rc;

	rc = fp_node_connect(d->node, timeout_ms);
	/* stopped while connecting: given up, or done after the stop was
	 * asked; then closed before anything is set on the node */
	if (rc == -ECANCELED)
		return 0;
	if (rc == 0 && d->stopping) {
		fp_node_disconnect(d->node);
		return 0;
	}
	if (rc < 0) {
		if (!d->ever_connected)
			return connect_error_exit(d, rc);
		if (d->backoff_us >= BACKOFF_MAX_US / 2 || fp_log_enabled(FP_LOG_DEBUG))
			fpd_info("reconnect to %s failed: %s", d->o->node,
				 connect_error_text(rc));
		d->backoff_us = d->backoff_us * 2 > BACKOFF_MAX_US ?
				BACKOFF_MAX_US : d->backoff_us * 2;
		d->reconnect_at = now + d->backoff_us;
		return 0;
	}

	d->connected = true;
	budget_window_start(d, now, fpd_cpu_us());
	if (strcmp(fp_node_name(d->node), d->o->node) != 0 && !d->ever_connected)
		fpd_info("%s answers as %s: carrying on under that name",
			 d->o->node, fp_node_name(d->node));
	fpd_info("%s to %s (OTP %s%s) as %s",
		 d->ever_connected ? "reconnected" : "connected",
		 d->o->node, fp_node_otp_release(d->node),
		 fp_node_is_local(d->node) ? ", on this host" : "",
		 fp_node_self_name(d->node));

	rc = fp_node_depth_attach(d->node, d->o->backtrace_depth, &orig, &depth,
				  timeout_ms);
	if (rc == 0)
		fpd_debug("backtrace_depth %u (the node's own: %u), held by the node's janitor",
			  depth, orig);
	else
		fpd_warn("cannot raise backtrace_depth on %s (%s): stacks stay at the node's depth",
			 d->o->node, strerror(-rc));
	rc = check_pins(d, timeout_ms);
	if (rc)
		return rc;
	if (fp_node_fd(d->node) < 0) {
		/* a wait given up for a stop closed the connection; the
		 * janitor puts back what it set */
		d->connected = false;
		return 0;
	}

	rc = fp_node_scan_prepare(d->node, timeout_ms);
	if (rc < 0)
		fpd_warn("cannot prepare the selection scan on %s (%s): only pinned processes are sampled",
			 d->o->node, strerror(-rc));
	else
		fpd_debug("selection scan: %s", fp_node_scan_iterates(d->node) ?
			  "erlang:processes_iterator/0" : "lists:sublist(erlang:processes(), ...)");

	d->ever_connected = true;
	d->scans_done = d->scan_skips = 0;
	fp_select_reset(d->select);
	fp_sampler_reset(d->sampler);
	d->ntop = 0;
	d->owed = 0;
	d->last_tick_mono = 0;
	rebuild_set(d);
	d->next_select_mono = now;
	fpd_output_set_otp_release(d->out, fp_node_otp_release(d->node));
	d->runq_limit = d->o->breaker_run_queue ? d->o->breaker_run_queue :
			50 * fp_node_schedulers(d->node);
	note(d, "connected to %s (OTP %s%s)", d->o->node, fp_node_otp_release(d->node),
	     fp_node_is_local(d->node) ? ", on this host" : "");
	/* what the node was found to offer: probed, never guessed */
	note(d, "node: name=%s otp=%s dictionary_keys=%s request=%s labels=%s keys=%s",
	     fp_node_name(d->node), fp_node_otp_release(d->node),
	     fp_node_reads_dict_keys(d->node) ? "yes" : "no",
	     request_name(fp_node_request_path(d->node)),
	     label_source_name(fp_node_label_source(d->node)), keys_state(d));
	fpd_debug("node: name=%s otp=%s dictionary_keys=%s request=%s labels=%s keys=%s",
		  fp_node_name(d->node), fp_node_otp_release(d->node),
		  fp_node_reads_dict_keys(d->node) ? "yes" : "no",
		  request_name(fp_node_request_path(d->node)),
		  label_source_name(fp_node_label_source(d->node)), keys_state(d));
	if (asks_keys(d->o) && !fp_node_records_keys(d->node))
		fpd_warn("%s (OTP %s) cannot read one key of a process dictionary (OTP 26.2 and later can): --key, --logger-key and --callers record nothing on this connection",
			 d->o->node, fp_node_otp_release(d->node));
	if (helper_mode(d)) {
		note(d, "helper module %s loaded on %s", fp_node_helper_module(d->node),
		     d->o->node);
		request_sent(&d->req_batch, fp_node_helper_id(d->node), now);
		d->helper_told = false;
		helper_sync(d);
	}
	return 0;
}

/* Leave the janitor now rather than when the connection closes, so that
 * the flag is back before we exit. */
static void
restore_node(struct daemon *d)
{
	unsigned orig, depth;
	int rc;

	if (!d->connected)
		return;
	rc = fp_node_depth_detach(d->node, &orig, &depth,
				  (unsigned)(d->o->timeout_us / 1000));
	if (rc == 0)
		fpd_debug("backtrace_depth now %u (the node's own: %u)", depth, orig);
	else if (rc != -ENOENT)
		fpd_warn("could not leave the janitor on %s (%s): the node puts backtrace_depth back when the connection closes",
			 d->o->node, strerror(-rc));
}

/* ---- circuit breaker --------------------------------------------------- */

static void
trip(struct daemon *d, uint64_t now, const char *why)
{
	bool was_open = d->breaker.open;

	fpd_breaker_trip(&d->breaker, now);
	fpd_warn("circuit breaker %s: %s; sampling paused for %.0f s",
		 was_open ? "stays open" : "open", why,
		 (double)d->breaker.cooldown_us / 1e6);
	note(d, "circuit breaker %s: %s; sampling paused for %.0f s",
	     was_open ? "stays open" : "open", why,
	     (double)d->breaker.cooldown_us / 1e6);
	fpd_output_event(d->out);
}

static void
send_health(struct daemon *d, uint64_t now)
{
	uint64_t id;
	int rc;

	if (d->req_health.active)
		return;
	rc = fp_node_health_request(d->node, &id);
	if (rc == 0)
		request_sent(&d->req_health, id, now);
	check_send(d, rc, "health request");
}

static void
on_health(struct daemon *d, const struct fp_reply *reply, uint64_t now)
{
	uint64_t rtt = now - d->req_health.sent_mono;
	int64_t runq = -1;
	char why[128];

	d->req_health.active = false;
	fp_node_decode_int(reply, &runq);
	if (d->breaker.probing) {
		if (runq >= 0 && runq <= (int64_t)d->runq_limit &&
		    rtt < d->o->timeout_us / 2) {
			fpd_breaker_close(&d->breaker, now);
			budget_window_start(d, now, fpd_cpu_us());
			fpd_info("circuit breaker closed: run queues %lld, probe %.1f ms; sampling resumes",
				 (long long)runq, (double)rtt / 1000.0);
			note(d, "circuit breaker closed: run queues %lld, probe %.1f ms",
			     (long long)runq, (double)rtt / 1000.0);
			d->last_tick_mono = 0;
			d->owed = 0;
		} else {
			snprintf(why, sizeof(why), "probe: run queues %lld, %.1f ms",
				 (long long)runq, (double)rtt / 1000.0);
			trip(d, now, why);
		}
		return;
	}
	if (runq > (int64_t)d->runq_limit) {
		snprintf(why, sizeof(why), "run queues at %lld (limit %u)",
			 (long long)runq, d->runq_limit);
		trip(d, now, why);
	}
}

static void
on_initial_calls(struct daemon *d, struct fp_reply *reply)
{
	uint64_t us = take_time(d, reply);

	/* node work like a scan's: in the interval and in the budget */
	d->st_work.other_us += us;
	d->bw_work.other_us += us;
	if (fp_sampler_initial_calls(d->sampler, reply, d->init_pids,
				     d->ninit) < 0)
		fpd_debug("unexpected initial_call reply");
}

static void
handle_input(struct daemon *d)
{
	struct sample_slot *slot;
	struct fp_reply reply;
	uint64_t now;
	int rc;

	rc = fp_node_receive(d->node, (unsigned)(d->o->timeout_us / 1000), &reply);
	now = fpd_now_mono_us();
	if (rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -ECANCELED) {
		lost_connection(d, rc == -ETIMEDOUT ? "a message stalled halfway" :
				rc == -ECANCELED ? "stopped with a message half read" :
				"connection closed");
		return;
	}
	if (rc <= 0) {
		if (rc < 0)
			fpd_debug("dropped a message: %s", strerror(-rc));
		return;
	}

	d->timeouts = 0;
	slot = slot_of(d, reply.id);
	if (slot && slot->r.late)
		request_answered(&slot->r, now, "sample request");
	else if (slot)
		on_sample(d, slot, &reply, now);
	else if (helper_mode(d) && reply.id == fp_node_helper_id(d->node))
		on_batch(d, &reply, now);
	else if (d->req_scan.active && reply.id == d->req_scan.id) {
		if (request_answered(&d->req_scan, now, "selection scan"))
			on_scan(d, &reply, now);
	} else if (d->req_whereis.active && reply.id == d->req_whereis.id) {
		if (request_answered(&d->req_whereis, now, "whereis request"))
			on_whereis(d, &reply);
	} else if (d->req_alive.active && reply.id == d->req_alive.id) {
		if (request_answered(&d->req_alive, now, "is_process_alive request"))
			on_alive(d, &reply);
	} else if (d->req_health.active && reply.id == d->req_health.id) {
		if (request_answered(&d->req_health, now, "health probe"))
			on_health(d, &reply, now);
		else if (d->breaker.probing)
			send_health(d, now);	/* the probe it was */
	} else if (d->req_init.active && reply.id == d->req_init.id) {
		if (request_answered(&d->req_init, now, "initial_call request"))
			on_initial_calls(d, &reply);
	} else {
		fpd_debug("late reply %llu dropped", (unsigned long long)reply.id);
	}
}

/* ---- periodic work ---------------------------------------------------- */

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static size_t
pinned_count(const struct daemon *d)
{
	size_t n = 0;

	for (size_t i = 0; i < d->o->npids; i++)
		n += d->pin_state[i] == FP_PID_ALIVE;
	for (size_t i = 0; i < d->o->nnames; i++)
		n += d->name_found[i];
	return n;
}

static void
interval_report(struct daemon *d, uint64_t now)
{
	double secs = (double)(now - d->interval_mono) / 1e6;
	double achieved = secs > 0 ? (double)d->st_samples / secs : 0;
	double requested = (double)d->nset * d->budget.rate;
	uint64_t dropped = fpd_output_dropped(d->out) - d->dropped_before;
	uint64_t cpu_us = fpd_cpu_us(), used_us = cpu_us - d->interval_cpu_us;
	double self_cpu = secs > 0 ? (double)used_us / (secs * 1e6) * 100.0 : 0;
	double cost = work_pct(d, work_us(d, &d->st_work), secs) +
		      self_pct(d, used_us, secs);
	double p50 = 0, p99 = 0, pmax = 0;

	if (d->nrtt) {
		qsort(d->rtt_us, d->nrtt, sizeof(d->rtt_us[0]), cmp_u32);
		p50 = d->rtt_us[d->nrtt / 2] / 1000.0;
		p99 = d->rtt_us[(d->nrtt * 99) / 100] / 1000.0;
		pmax = d->rtt_us[d->nrtt - 1] / 1000.0;
	}
	if (d->connected && secs >= 0.05) {
		char text[512];

		snprintf(text, sizeof(text),
			 "interval: selected=%zu pinned=%zu samples=%llu skipped=%llu gone=%llu dropped=%llu achieved=%.1f/s requested=%.1f/s requests=%llu probes=%llu reused=%llu rtt_ms=%.1f/%.1f/%.1f target_ms=%.1f cost=%.2f%% self_cpu=%.2f%% rate=%g top=%u breaker=%s scanned=%llu scan_bytes=%llu scans_cut=%llu scans_skipped=%llu",
			 d->nset, pinned_count(d),
			 (unsigned long long)d->st_samples,
			 (unsigned long long)d->st_skipped,
			 (unsigned long long)d->st_gone,
			 (unsigned long long)dropped, achieved, requested,
			 (unsigned long long)d->st_requests,
			 (unsigned long long)d->st_probes,
			 (unsigned long long)d->st_reused,
			 p50, p99, pmax, (double)d->st_target_us / 1000.0, cost,
			 self_cpu, d->budget.rate, d->budget.top,
			 d->breaker.open ? "open" : "closed",
			 (unsigned long long)d->st_work.scanned,
			 (unsigned long long)d->st_work.scan_bytes,
			 (unsigned long long)d->st_scans_cut,
			 (unsigned long long)d->st_scans_skipped);
		fpd_info("%s", text);
		note(d, "%s", text);
		if (fp_log_enabled(FP_LOG_DEBUG)) {
			struct fp_cache_stats cs;

			fp_sampler_cache_stats(d->sampler, &cs);
			fpd_debug("decoder cache: stacks %llu hit %llu new, frames %llu hit %llu new, %llu dropped",
				  (unsigned long long)cs.stack_hits,
				  (unsigned long long)cs.stack_misses,
				  (unsigned long long)cs.frame_hits,
				  (unsigned long long)cs.frame_misses,
				  (unsigned long long)cs.clears);
		}

		fpd_breaker_calm(&d->breaker, now, 6 * d->o->every_us);
		if (!d->breaker.open)
			send_health(d, now);
	}
	d->interval_mono = now;
	d->interval_cpu_us = cpu_us;
	d->st_samples = d->st_skipped = d->st_gone = 0;
	d->st_requests = d->st_probes = d->st_reused = 0;
	d->st_target_us = 0;
	d->st_scans_cut = d->st_scans_skipped = 0;
	work_reset(&d->st_work);
	d->dropped_before += dropped;
	d->nrtt = 0;
}

/*
 * Once a second: the sampling of the last second plus the last selection
 * (spread over its interval) against the budget. Not while the breaker is
 * open (nothing is sampled then), nor before a set is being sampled.
 */
static void
budget_tick(struct daemon *d, uint64_t now)
{
	double secs = (double)(now - d->bw_mono) / 1e6;
	uint64_t cpu_us;
	double cost;
	char what[200];

	if (now - d->bw_mono < BUDGET_WINDOW_US)
		return;
	cpu_us = fpd_cpu_us();
	if (!d->breaker.open && !d->stopping &&
	    (d->bw_work.sampled || d->bw_work.probed)) {
		cost = work_pct(d, work_us(d, &d->bw_work), secs) +
		       work_pct(d, d->select_us, (double)d->o->every_us / 1e6) +
		       self_pct(d, cpu_us - d->bw_cpu_us, secs);
		if (fpd_budget_update(&d->budget, cost, what, sizeof(what))) {
			fpd_info("budget: %s", what);
			note(d, "budget: %s", what);
			fpd_output_event(d->out);
		}
	}
	budget_window_start(d, now, cpu_us);
}

/*
 * A request unanswered for --timeout becomes late (struct request); the
 * helper's batches, which we do not ask for, are simply waited for anew.
 * A late request still unanswered after another --timeout counts as
 * another timeout: nothing new is sent to a node that stopped answering,
 * and it must still be given up on.
 */
static void
expire(struct daemon *d, struct request *r, uint64_t now, const char *what)
{
	uint64_t since = r->counted_mono;
	bool again = r->late;

	if (!r->active || now - since < d->o->timeout_us)
		return;
	if (again && now - r->sent_mono >= LATE_ABANDON * d->o->timeout_us) {
		fpd_warn("%s still unanswered after %.1f s: given up", what,
			 (double)(now - r->sent_mono) / 1e6);
		r->active = r->late = false;
		return;
	}
	r->counted_mono = now;
	if (!again && r == &d->req_batch) {
		r->active = false;
		fpd_warn("%s timed out after %.1f s", what,
			 (double)(now - r->sent_mono) / 1e6);
	} else if (!again) {
		r->late = true;
		fpd_warn("%s timed out after %.1f s; not sent again until its reply arrives",
			 what, (double)(now - r->sent_mono) / 1e6);
	}
	for (int i = 0; i < MAX_INFLIGHT && !again; i++) {
		struct sample_slot *slot = &d->slots[i];

		if (r != &slot->r)
			continue;
		slot_done(d, slot);
		slot->r.active = true;	/* taken until the late reply */
		account_skipped(d, slot->n);
		note(d, "sample request timed out: %zu samples skipped", slot->n);
	}
	/* Requests sent before the last counted timeout belong to the same
	 * stall: one stall, one count, one trip. */
	if (since < d->timeout_epoch)
		return;
	d->timeout_epoch = now;
	if (++d->timeouts >= MAX_TIMEOUTS) {
		lost_connection(d, "the node stopped answering");
		return;
	}
	if (again)
		return;
	if (r == &d->req_health && d->breaker.probing)
		trip(d, now, "the probe timed out");
	else if (!d->breaker.open && r != &d->req_health &&
		 r != &d->req_init && r != &d->req_whereis && r != &d->req_alive)
		trip(d, now, "a request timed out");
}

static void
tick(struct daemon *d)
{
	uint64_t now = fpd_now_mono_us();
	struct fpd_output_totals totals;

	fpd_output_totals(d->out, &totals);
	if (totals.fatal && !d->stopping) {
		fpd_err("stopping: no output directory to write to");
		d->stopping = true;
	}

	if (d->o->duration_us && now - d->start_mono >= d->o->duration_us &&
	    !d->stopping) {
		fpd_info("duration reached; stopping");
		stop(d);
		d->duration_over = true;
	}
	if (!d->connected) {
		if (!d->stopping && now >= d->reconnect_at) {
			int rc = try_connect(d, now);

			if (rc) {
				d->exit_code = rc;
				d->stopping = true;
			}
		}
		return;
	}

	for (int i = 0; i < MAX_INFLIGHT && d->connected; i++)
		expire(d, &d->slots[i].r, now, "sample request");
	if (!d->connected)
		return;
	expire(d, &d->req_scan, now, "selection scan");
	expire(d, &d->req_whereis, now, "whereis request");
	expire(d, &d->req_init, now, "initial_call request");
	expire(d, &d->req_alive, now, "is_process_alive request");
	expire(d, &d->req_health, now, "health probe");
	if (helper_mode(d)) {
		expire(d, &d->req_batch, now, "helper batch");
		if (d->helper_stop_sent && !d->req_batch.active)
			d->helper_done = true;	/* waited long enough */
		else if (!d->req_batch.active && d->connected)
			request_sent(&d->req_batch, fp_node_helper_id(d->node), now);
	}
	if (!d->connected)
		return;

	if (d->breaker.open && !d->breaker.probing && !d->stopping &&
	    now >= d->breaker.open_until_us) {
		d->breaker.probing = true;
		send_health(d, now);
		if (!d->connected)
			return;
	}
	if (!d->stopping && now >= d->next_select_mono) {
		d->next_select_mono = now + d->o->every_us;
		start_selection(d, now);
		if (!d->connected)
			return;
	}
	sample_tick(d, now);
	ask_initial_calls(d, now);
	if (!d->connected)
		return;
	budget_tick(d, now);
	if (helper_mode(d))
		helper_sync(d);

	if (now - d->interval_mono >= d->o->every_us)
		interval_report(d, now);
	fpd_output_tick(d->out, now);
}

static void
handle_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGINT:
		case SIGTERM:
			if (d->stopping && si.ssi_signo == SIGINT && ++d->signals > 1) {
				fpd_warn("second SIGINT: exiting at once");
				fpd_output_finish(d->out);
				_exit(FPD_EXIT_OK);
			}
			d->signals = 1;
			fpd_info("%s: stopping", strsignal((int)si.ssi_signo));
			stop(d);
			break;
		case SIGHUP:
			if (fpd_log_reopen() < 0)
				fpd_err("cannot reopen the log file: %s%s",
					strerror(errno), d->o->user ?
					" (with --user, the file must be the "
					"user's or its directory writable by "
					"the user: docs/OPERATIONS.md)" : "");
			break;
		case SIGUSR1:
			fpd_info("SIGUSR1: rotating");
			fpd_output_finish(d->out);
			break;
		}
	}
}

/*
 * Asked by the library between the slices of its waits: the signals are
 * read there as the loop reads them, and the wait goes on until
 * STOP_GRACE_US after a stop was asked.
 */
static bool
give_up(void *data)
{
	struct daemon *d = data;

	handle_signal(d);
	return d->stopping && fpd_now_mono_us() - d->stop_mono >= STOP_GRACE_US;
}

/* ---- setup and main loop ---------------------------------------------- */

static const char *
request_name(enum fp_request_path path)
{
	static const char *const names[] = {
		[FP_REQUEST_REX] = "rex",
		[FP_REQUEST_EVAL] = "eval",
		[FP_REQUEST_HELPER] = "helper",
	};

	return names[path];
}

static char *
make_header(const struct fpd_options *o)
{
	char *keys = header_keys(o);
	char every[32], rotate[32], stamp[40], *h = NULL;

	fpd_format_duration(o->every_us, every, sizeof(every));
	fpd_format_duration(o->rotate_us, rotate, sizeof(rotate));
	fpd_format_utc(fpd_now_epoch_us(), stamp, sizeof(stamp), false);
	if (asprintf(&h,
		     "# flame_profd %s perf-script (docs/FORMAT.md)\n"
		     "# node: %s\n"
		     "# daemon_started: %s\n"
		     "# options: top=%u every=%s rate=%g pids=%zu names=%zu rotate=%s backtrace_depth=%u lines=%s request=%s idle_reuse=%s frame_names=%s%s\n",
		     FP_VERSION, o->node, stamp, o->top, every, o->rate,
		     o->npids, o->nnames, rotate, o->backtrace_depth,
		     o->lines ? "yes" : "no", request_name(o->request),
		     o->idle_reuse ? "yes" : "no", o->erlang_names ? "erlang" : "elixir",
		     keys) < 0)
		h = NULL;
	free(keys);
	return h;
}

static char *
make_options_json(const struct fpd_options *o)
{
	static const char *const compress[] = { "none", "gzip", "zstd" };
	char *j = NULL;

	if (asprintf(&j,
		     "{\"top\": %u, \"every_us\": %llu, \"rate\": %g, \"pids\": %zu, "
		     "\"names\": %zu, \"scan_max\": %u, \"min_reductions\": %u, "
		     "\"rotate_us\": %llu, "
		     "\"rotate_bytes\": %llu, \"compress\": \"%s\", \"compress_level\": %d, "
		     "\"keep_files\": %u, \"keep_bytes\": %llu, \"keep_age_us\": %llu, "
		     "\"backtrace_depth\": %u, \"lines\": %s, \"duration_us\": %llu, "
		     "\"max_overhead\": %g, \"request\": \"%s\", \"idle_reuse\": %s}",
		     o->top, (unsigned long long)o->every_us, o->rate, o->npids,
		     o->nnames, o->scan_max, o->min_reductions,
		     (unsigned long long)o->rotate_us,
		     (unsigned long long)o->rotate_bytes, compress[o->compress],
		     o->compress_level, o->keep_files,
		     (unsigned long long)o->keep_bytes,
		     (unsigned long long)o->keep_age_us, o->backtrace_depth,
		     o->lines ? "true" : "false",
		     (unsigned long long)o->duration_us, o->max_overhead,
		     request_name(o->request),
		     o->idle_reuse ? "true" : "false") < 0)
		return NULL;
	return j;
}

static int
setup_fds(struct daemon *d)
{
	struct itimerspec its = {
		.it_interval = { 0, TICK_US * 1000 },
		.it_value = { 0, TICK_US * 1000 },
	};
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -errno;
	d->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->sfd < 0)
		return -errno;
	d->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (d->tfd < 0)
		return -errno;
	if (timerfd_settime(d->tfd, 0, &its, NULL) < 0)
		return -errno;
	return 0;
}

int
fpd_run(const struct fpd_options *o, const char *cookie)
{
	struct fp_perf_options popts = {
		.lines = o->lines, .erlang_names = o->erlang_names,
		.key_names = o->key_names, .nkeys = o->nkeys + o->nlogger_keys,
	};
	struct fp_extras extras = {
		.keys = o->keys, .nkeys = o->nkeys,
		.logger_keys = o->logger_keys, .nlogger_keys = o->nlogger_keys,
		.callers = o->callers,
	};
	struct daemon d = { .o = o, .tfd = -1, .sfd = -1 };
	struct fpd_output_totals totals;
	size_t cap = set_capacity(o);
	char *header, *options;
	int err = 0, rc;

	header = make_header(o);
	options = make_options_json(o);
	{
		struct fpd_output_config oc = {
			.dir = o->out_dir,
			.node = o->node,
			.header = header ? header : "",
			.options_json = options ? options : "{}",
			.compress = o->compress,
			.level = o->compress_level,
			.rotate_us = o->rotate_us,
			.rotate_bytes = o->rotate_bytes,
			.keep_files = o->keep_files,
			.keep_bytes = o->keep_bytes,
			.keep_age_us = o->keep_age_us,
			.file_mode = o->file_mode,
			.dir_mode = o->dir_mode,
		};
		const char *what = "";

		d.out = fpd_output_new(&oc, &err, &what);
		free(header);
		free(options);
		if (!d.out) {
			fprintf(stderr, "flame_profd: error: %s: %s/%s: %s\n", what,
				o->out_dir, o->node, strerror(err));
			return err == EWOULDBLOCK ? FPD_EXIT_TEMPFAIL : FPD_EXIT_CANTCREAT;
		}
	}
	if (o->user) {
		/* Everything that needs root is done: cookie read, output
		 * directory made and locked. Hand the directory over and drop
		 * root for good. */
		if (fpd_output_chown(d.out, o->uid, o->gid) < 0 ||
		    setgroups(0, NULL) < 0 || setgid(o->gid) < 0 ||
		    setuid(o->uid) < 0 || (o->uid != 0 && setuid(0) == 0)) {
			fprintf(stderr, "flame_profd: error: cannot drop privileges to user %s: %s\n",
				o->user, strerror(errno));
			fpd_output_destroy(d.out);
			return FPD_EXIT_SOFTWARE;
		}
		fpd_info("running as user %s (uid %u)", o->user, (unsigned)o->uid);
	}
	if (setup_fds(&d) < 0) {
		fprintf(stderr, "flame_profd: error: cannot set up timers and signals: %s\n",
			strerror(errno));
		fpd_output_destroy(d.out);
		return FPD_EXIT_SOFTWARE;
	}

	d.node = fp_node_new(o->node, cookie);
	fp_node_set_give_up(d.node, give_up, &d);
	if (o->connect_host)
		fp_node_set_address(d.node, o->connect_host, o->connect_port);
	fp_node_set_request_path(d.node, o->request);
	fp_node_set_extras(d.node, &extras);
	d.select = fp_select_new(o->scan_max);
	fp_select_set_floor(d.select, o->min_reductions);
	d.sampler = fp_sampler_new();
	fp_sampler_set_extras(d.sampler, &extras);
	d.writer = fp_perf_writer_new(&popts);
	d.set = calloc(cap, sizeof(*d.set));
	d.top = calloc(o->top ? o->top : 1, sizeof(*d.top));
	d.named = calloc(o->nnames ? o->nnames : 1, sizeof(*d.named));
	d.name_found = calloc(o->nnames ? o->nnames : 1, sizeof(*d.name_found));
	d.named_as = calloc(o->nnames ? o->nnames : 1, sizeof(*d.named_as));
	d.cand = calloc(2 * o->nnames + 1, sizeof(*d.cand));
	d.cand_atoms = calloc(2 * o->nnames + 1, sizeof(*d.cand_atoms));
	d.name_of = calloc(2 * o->nnames + 1, sizeof(*d.name_of));
	d.cand_pids = calloc(2 * o->nnames + 1, sizeof(*d.cand_pids));
	d.cand_found = calloc(2 * o->nnames + 1, sizeof(*d.cand_found));
	for (size_t i = 0; i < o->nnames; i++) {
		int n = fp_name_candidates(o->names[i], d.cand + d.ncand);

		/* main.c refused names without a candidate */
		for (int k = 0; k < n; k++, d.ncand++) {
			d.cand_atoms[d.ncand] = d.cand[d.ncand];
			d.name_of[d.ncand] = i;
		}
	}
	d.name_said = calloc(o->nnames ? o->nnames : 1, sizeof(*d.name_said));
	d.pinned = calloc(o->npids ? o->npids : 1, sizeof(*d.pinned));
	d.pin_state = calloc(o->npids ? 2 * o->npids : 1, sizeof(*d.pin_state));
	d.pin_alive = calloc(o->npids ? o->npids : 1, sizeof(*d.pin_alive));
	d.init_pids = calloc(cap, sizeof(*d.init_pids));
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		d.slots[i].pids = calloc(cap, sizeof(*d.slots[i].pids));
		d.slots[i].idx = calloc(cap, sizeof(*d.slots[i].idx));
		d.slots[i].asks = calloc(cap, sizeof(*d.slots[i].asks));
	}
	d.busy = calloc(cap ? cap : 1, sizeof(*d.busy));
	d.row_pids = calloc(cap ? cap : 1, sizeof(*d.row_pids));
	d.row_asks = calloc(cap ? cap : 1, sizeof(*d.row_asks));
	d.forget = calloc(cap ? cap : 1, sizeof(*d.forget));
	d.start_mono = d.interval_mono = fpd_now_mono_us();
	d.interval_cpu_us = fpd_cpu_us();
	fpd_budget_init(&d.budget, o->max_overhead, o->rate, o->top);
	work_reset(&d.st_work);
	budget_window_start(&d, d.start_mono, d.interval_cpu_us);
	d.backoff_us = BACKOFF_MIN_US;

	rc = try_connect(&d, d.start_mono);
	if (rc) {
		d.exit_code = rc;
		goto out;
	}

	for (;;) {
		struct pollfd pfd[3] = {
			{ .fd = d.tfd, .events = POLLIN },
			{ .fd = d.sfd, .events = POLLIN },
			{ .fd = fp_node_fd(d.node), .events = POLLIN },
		};
		uint64_t expirations;

		/* Stopping: finish the sample in flight, then leave; a node
		 * that does not answer is not waited for. */
		if (d.stopping && helper_mode(&d))
			helper_finish(&d, fpd_now_mono_us());
		if (d.stopping && (!sampling_in_flight(&d) ||
				   fpd_now_mono_us() - d.stop_mono >= STOP_DRAIN_US)) {
			for (int i = 0; i < MAX_INFLIGHT; i++) {
				if (d.slots[i].r.active)
					account_skipped(&d, d.slots[i].n);
			}
			break;
		}
		if (poll(pfd, d.connected ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fpd_err("poll: %s", strerror(errno));
			d.exit_code = FPD_EXIT_SOFTWARE;
			break;
		}
		if (pfd[1].revents & POLLIN)
			handle_signal(&d);
		if (d.connected && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR)))
			handle_input(&d);
		if (pfd[0].revents & POLLIN) {
			if (read(d.tfd, &expirations, sizeof(expirations)) < 0 &&
			    errno != EAGAIN)
				fpd_debug("timerfd: %s", strerror(errno));
			tick(&d);
		}
	}

	if (d.connected) {
		interval_report(&d, fpd_now_mono_us());
		restore_node(&d);
	}
	note(&d, "stopped after %llu samples", (unsigned long long)d.total_samples);
	fpd_output_finish(d.out);
	fpd_output_totals(d.out, &totals);
	/* what the files hold, not what was handed to them */
	fpd_info("stopped: %llu samples written under %s",
		 (unsigned long long)totals.written, fpd_output_dir(d.out));
	if (totals.dropped)
		fpd_warn("%llu samples dropped on write errors",
			 (unsigned long long)totals.dropped);
	if (totals.unrecorded)
		fpd_warn("%llu samples dropped or skipped after the last file that could be written: no file records them",
			 (unsigned long long)totals.unrecorded);
	if (totals.unfinished && d.exit_code == 0) {
		fpd_err("%u file(s) could not be finished and stay under their partial names in %s (the next start recovers them)",
			totals.unfinished, fpd_output_dir(d.out));
		d.exit_code = FPD_EXIT_IOERR;
	}
	if (totals.fatal && d.exit_code == 0)
		d.exit_code = FPD_EXIT_CANTCREAT;
	/* A fixed-duration run (CI) says whether it got what it came for. */
	if (d.duration_over && d.exit_code == 0) {
		if (d.total_samples == 0) {
			fputs("flame_profd: error: the run took no sample at all\n",
			      stderr);
			d.exit_code = FPD_EXIT_NOSAMPLES;
		} else if (!d.connected) {
			fprintf(stderr, "flame_profd: error: the connection to %s was lost and not regained before the end\n",
				o->node);
			d.exit_code = FPD_EXIT_UNAVAILABLE;
		}
	}
out:
	fpd_output_destroy(d.out);
	fp_perf_writer_destroy(d.writer);
	fp_sampler_destroy(d.sampler);
	fp_select_destroy(d.select);
	fp_node_destroy(d.node);
	free(d.set);
	free(d.top);
	free(d.named);
	free(d.name_found);
	free(d.named_as);
	free(d.cand);
	free(d.cand_atoms);
	free(d.name_of);
	free(d.cand_pids);
	free(d.cand_found);
	free(d.name_said);
	free(d.pinned);
	free(d.pin_state);
	free(d.pin_alive);
	free(d.init_pids);
	for (int i = 0; i < MAX_INFLIGHT; i++) {
		free(d.slots[i].pids);
		free(d.slots[i].idx);
		free(d.slots[i].asks);
	}
	free(d.busy);
	free(d.row_pids);
	free(d.row_asks);
	free(d.forget);
	for (size_t i = 0; i < d.npending; i++)
		free(d.pending[i]);
	close(d.tfd);
	close(d.sfd);
	return d.exit_code;
}
