/*
 * flame_profd — the cost model.
 *
 * Heavy requests run in timer:tc on the node: their wall time there. Most
 * of it, on a busy node, is waiting for the sampled processes to answer
 * (a running process handles process_info when it is next scheduled out),
 * not work. The cost counts work: per interval, the cheapest time per
 * process seen in any request, times the processes asked for, and never
 * less than the floors below.
 *
 * The floors are the node scheduler time flame_profd's sampling costs,
 * measured on the 2-core reference machine (bench/run,
 * docs/PERFORMANCE.md, cost model). A sample request costs
 * REQUEST_COST_US of its own (the distribution message both ways, rex's
 * worker or the eval sampler's loop), then each process asked in full
 * costs SAMPLE_COST_*_US if it was waiting, SAMPLE_BUSY_COST_US if it was
 * running or in a run queue (it answers the stack's signal between time
 * slices, both sides rescheduled with cold caches), and a probe of one
 * that has not run PROBE_COST_US (a direct read, no signal). A selection
 * costs SCAN_COST_US per pid read. With --request helper there is no
 * request: each row the helper takes costs HELPER_ROW_COST_US (its timer,
 * the row's encoding, its share of a batch's message) and a probe
 * HELPER_PROBE_COST_US (quiet node: 6.2 and 15.7 ms/s at top 100 x 10 and
 * x 100); samples cost what they cost through rex. A selection's scan
 * also costs SCAN_BYTE_COST_US per byte of its reply, outside the
 * timer:tc that times it: rex copies the worker's result and encodes it
 * onto the distribution socket (an estimate, about 2 ns a byte for a copy
 * and an encode; not measured on its own).
 */
#include <math.h>

#include "cost.h"
#include "budget.h"
#include "options.h"
#include "util.h"

#define REQUEST_COST_US 150.0
#define SAMPLE_COST_REX_US 21.0
#define SAMPLE_COST_EVAL_US 15.0
#define SAMPLE_BUSY_COST_US 45.0
#define PROBE_COST_US 4.0
#define SCAN_COST_US 0.65
#define SCAN_BYTE_COST_US 0.002
#define HELPER_ROW_COST_US 60.0
#define HELPER_PROBE_COST_US 1.0

/* What a request path's requests cost on the node, at the least. */
struct path_cost {
	double request_us;	/* a request (the helper: a row) */
	double sample_us;	/* a process asked in full, waiting */
	double probe_us;	/* a probe of one that has not run */
};

/* Each request path's floors (the figures above). */
static const struct path_cost path_costs[] = {
	[FP_REQUEST_REX] = { REQUEST_COST_US, SAMPLE_COST_REX_US, PROBE_COST_US },
	[FP_REQUEST_EVAL] = { REQUEST_COST_US, SAMPLE_COST_EVAL_US, PROBE_COST_US },
	[FP_REQUEST_HELPER] = { HELPER_ROW_COST_US, SAMPLE_COST_EVAL_US,
				HELPER_PROBE_COST_US },
};

/* The selection's share of the budget: the rest is the sampling's. */
#define SCAN_BUDGET_SHARE 0.5
/* ... of which the sweeps after the first may take half, on average. */
#define SWEEP_BUDGET_SHARE 0.25
/* The least a scan is cut to, beside the current selection (about a
 * millisecond of node time), and the most selections skipped in a row. */
#define SCAN_MIN_WINDOW 1000u
#define SCAN_SKIP_MAX 60.0

void
fpd_work_reset(struct fpd_work *w)
{
	*w = (struct fpd_work){ .min_sample_us = -1 };
}

void
fpd_cost_init(struct fpd_cost *c, const struct fpd_options *o,
	      uint64_t now_mono, uint64_t cpu_us)
{
	*c = (struct fpd_cost){ .path = o->request, .schedulers = 1 };
	fpd_budget_init(&c->budget, o->max_overhead, o->rate, o->top);
	fpd_work_reset(&c->interval);
	fpd_cost_window_start(c, now_mono, cpu_us);
}

void
fpd_cost_set_node(struct fpd_cost *c, enum fp_request_path path,
		  unsigned schedulers, bool local)
{
	c->path = path;
	c->schedulers = schedulers ? schedulers : 1;
	c->local = schedulers && local;
}

void
fpd_cost_window_start(struct fpd_cost *c, uint64_t now, uint64_t cpu_us)
{
	c->window_mono = now;
	c->window_cpu_us = cpu_us;
	fpd_work_reset(&c->window);
}

/*
 * Probes are read at once, without a signal, and count at PROBE_COST_US
 * each; the rest of the batch's time is its full samples' (a batch of
 * probes alone says nothing of those).
 */
static void
count_samples(struct fpd_work *w, uint64_t us, size_t full, size_t running,
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

void
fpd_cost_samples(struct fpd_cost *c, uint64_t us, size_t full,
		 size_t running, size_t probes)
{
	count_samples(&c->interval, us, full, running, probes);
	count_samples(&c->window, us, full, running, probes);
}

/*
 * A scan's timer:tc time is the table walk and the reads, which wait for
 * nobody, so all of it is work: the interval's work, and the selection's
 * whole work for the budget.
 */
void
fpd_cost_selection(struct fpd_cost *c, uint64_t us, size_t n, size_t bytes)
{
	struct fpd_work sel;

	fpd_work_reset(&sel);
	sel.scan_us = us;
	sel.scan_bytes = bytes;
	sel.scanned = n;
	c->select_us = fpd_cost_work_us(c, &sel);
	if (n)
		c->scan_pid_us = c->select_us / (double)n;
	c->interval.scan_us += us;
	c->interval.scan_bytes += bytes;
	c->interval.scanned += n;
}

/*
 * A sweep is sent at the first selection of a connection, and then every
 * --sweep-every or so: its work is the interval's, but it is not what
 * each selection costs, so the budget's share of the selections
 * (select_us spread over --every) and the next scan's limit are left to
 * the selections after it. Spread over --every, a sweep of a million
 * processes would read as a fifth of a scheduler and cut the rate of any
 * --pid sampled meanwhile. Its work paces the sweeps after it instead
 * (fpd_cost_sweep_period()).
 */
void
fpd_cost_sweep(struct fpd_cost *c, uint64_t us, size_t n, size_t bytes)
{
	struct fpd_work sw;

	fpd_work_reset(&sw);
	sw.scan_us = us;
	sw.scan_bytes = bytes;
	sw.scanned = n;
	c->sweep_us = fpd_cost_work_us(c, &sw);
	c->interval.scan_us += us;
	c->interval.scan_bytes += bytes;
	c->interval.scanned += n;
}

/*
 * A sweep of a million processes is 0.4 s of node time before OTP 28
 * and 1.4 s with the iterator (docs/PERFORMANCE.md): every 30 s that is
 * 1.3% and 4.7% of one scheduler. Spread over the period, the sweeps take
 * no more than SWEEP_BUDGET_SHARE of the budget on average; the one
 * that runs takes what it takes, bounded by three quarters of --timeout.
 */
uint64_t
fpd_cost_sweep_period(const struct fpd_cost *c, const struct fpd_options *o)
{
	double allow, us;

	if (c->budget.max_pct <= 0 || c->sweep_us <= 0)
		return o->sweep_every_us;
	allow = c->budget.max_pct / 100.0 * SWEEP_BUDGET_SHARE *
		(double)c->schedulers;
	us = c->sweep_us / allow;
	return us > (double)o->sweep_every_us ? (uint64_t)us : o->sweep_every_us;
}

void
fpd_cost_other(struct fpd_cost *c, uint64_t us)
{
	c->interval.other_us += us;
	c->window.other_us += us;
}

/*
 * Much of the work of answering a request happens in the sampled
 * processes, the distribution encoding and the scheduling around them,
 * outside the worker that timer:tc times: hence the floors. On a busy
 * node timer:tc's time is mostly waiting for the sampled processes to be
 * scheduled, so the cheapest time per process seen stands for them all.
 */
double
fpd_cost_work_us(const struct fpd_cost *c, const struct fpd_work *w)
{
	const struct path_cost *pc = &path_costs[c->path];
	double floor_us = pc->request_us * (double)w->requests +
			  pc->sample_us * (double)(w->sampled - w->running) +
			  SAMPLE_BUSY_COST_US * (double)w->running;

	return (double)w->other_us +
	       fmax(w->min_sample_us > 0 ? w->min_sample_us * (double)w->sampled : 0,
		    floor_us) +
	       pc->probe_us * (double)w->probed +
	       fmax((double)w->scan_us, SCAN_COST_US * (double)w->scanned) +
	       SCAN_BYTE_COST_US * (double)w->scan_bytes;
}

double
fpd_cost_pct(const struct fpd_cost *c, double us, double secs)
{
	return secs > 0 ? us / (secs * 1e6) * 100.0 / (double)c->schedulers : 0;
}

/*
 * Our own CPU time is taken from the node's cores when the node runs on
 * this host (docs/PERFORMANCE.md measured it as a third of the loss at
 * top 100 x 10 on a saturated 2-core node). A node on another host does
 * not pay it.
 */
double
fpd_cost_self_pct(const struct fpd_cost *c, uint64_t cpu_us, double secs)
{
	if (!c->local)
		return 0;
	return fpd_cost_pct(c, (double)cpu_us, secs);
}

bool
fpd_cost_check(struct fpd_cost *c, uint64_t now, uint64_t every_us,
	       bool paused, char *what, size_t size)
{
	double secs = (double)(now - c->window_mono) / 1e6;
	bool changed = false;
	uint64_t cpu_us;
	double cost;

	if (now - c->window_mono < FPD_BUDGET_WINDOW_US)
		return false;
	cpu_us = fpd_cpu_us();
	if (!c->breaker.open && !paused &&
	    (c->window.sampled || c->window.probed)) {
		cost = fpd_cost_pct(c, fpd_cost_work_us(c, &c->window), secs) +
		       fpd_cost_pct(c, c->select_us, (double)every_us / 1e6) +
		       fpd_cost_self_pct(c, cpu_us - c->window_cpu_us, secs);
		changed = fpd_budget_update(&c->budget, cost, what, size);
	}
	fpd_cost_window_start(c, now, cpu_us);
	return changed;
}

/*
 * The selection's share of the budget over --every, at what the last scan
 * cost per pid read, its reply included. The baseline and the first
 * ranking are never held back (there is nothing to sample before them).
 * A scan is never cut below the current selection and SCAN_MIN_WINDOW
 * others; when even that is over budget it is sent only every k-th
 * selection (*skip the others), k the factor it is over by -- as the
 * budget lowers the rate but never stops sampling -- and at least every
 * SCAN_SKIP_MAX. The selection after a sweep is cut but not skipped: a
 * sweep's candidates are ranked only when they are read again, and a
 * skip would leave a process found busy unsampled for k selections more.
 */
size_t
fpd_cost_scan_limit(struct fpd_cost *c, const struct fpd_options *o,
		    size_t nset, unsigned scans_done, bool ranking,
		    unsigned *skips, bool *skip)
{
	double allow_us, n, least, k;

	*skip = false;
	if (c->budget.max_pct <= 0 || scans_done < 2 || c->scan_pid_us <= 0)
		return 0;
	allow_us = c->budget.max_pct / 100.0 * SCAN_BUDGET_SHARE *
		   (double)c->schedulers * (double)o->every_us;
	n = allow_us / c->scan_pid_us;
	least = fmin((double)(nset + SCAN_MIN_WINDOW), (double)o->scan_max);
	if (n >= (double)o->scan_max || n >= least) {
		*skips = 0;
		return n >= (double)o->scan_max ? 0 : (size_t)n;
	}
	k = fmin(ceil(least / fmax(n, 1e-9)), SCAN_SKIP_MAX);
	if (!ranking && ++*skips < (unsigned)k) {
		*skip = true;
		return 0;
	}
	*skips = 0;
	return (size_t)least;
}
