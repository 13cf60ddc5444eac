/*
 * flame_profd — interval reports.
 */
#include <stdlib.h>

#include "report.h"
#include "daemon-log.h"
#include "output.h"
#include "util.h"
#include "fp/sample.h"

/* Shorter intervals (a stop right after the last line) say nothing. */
#define REPORT_MIN_SECS 0.05

void
fpd_report_init(struct fpd_report *r, struct fpd_recorder *rec,
		uint64_t now_mono, uint64_t cpu_us)
{
	*r = (struct fpd_report){
		.rec = rec,
		.interval_mono = now_mono,
		.interval_cpu_us = cpu_us,
		.recorded = *fpd_recorder_stats(rec),
	};
}

void
fpd_report_skipped(struct fpd_report *r, uint64_t n)
{
	r->skipped += n;
	fpd_output_skipped(fpd_recorder_output(r->rec), n);
}

void
fpd_report_rtt(struct fpd_report *r, uint64_t us)
{
	if (r->nrtt < FPD_REPORT_RTT_MAX)
		r->rtt_us[r->nrtt++] = (uint32_t)(us > UINT32_MAX ? UINT32_MAX : us);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void
log_cache_stats(struct fp_sampler *sampler)
{
	struct fp_cache_stats cs;

	if (!fp_log_enabled(FP_LOG_DEBUG))
		return;
	fp_sampler_cache_stats(sampler, &cs);
	fpd_debug("decoder cache: stacks %llu hit %llu new, frames %llu hit %llu new, %llu dropped",
		  (unsigned long long)cs.stack_hits,
		  (unsigned long long)cs.stack_misses,
		  (unsigned long long)cs.frame_hits,
		  (unsigned long long)cs.frame_misses,
		  (unsigned long long)cs.clears);
}

bool
fpd_report_interval(struct fpd_report *r, struct fpd_cost *c,
		    struct fp_sampler *sampler, bool connected, size_t nset,
		    size_t pinned, uint64_t now)
{
	const struct fpd_recorder_stats *rs = fpd_recorder_stats(r->rec);
	uint64_t samples = rs->written[FPD_RECORD_NODE] -
			   r->recorded.written[FPD_RECORD_NODE];
	uint64_t cpu = rs->written[FPD_RECORD_CPU] -
		       r->recorded.written[FPD_RECORD_CPU];
	uint64_t skipped = r->skipped + rs->unwritten - r->recorded.unwritten;
	double secs = (double)(now - r->interval_mono) / 1e6;
	double achieved = secs > 0 ? (double)samples / secs : 0;
	double requested = (double)nset * c->budget.rate;
	uint64_t dropped = fpd_output_dropped(fpd_recorder_output(r->rec)) -
			   r->dropped_before;
	uint64_t cpu_us = fpd_cpu_us(), used_us = cpu_us - r->interval_cpu_us;
	double self_cpu = secs > 0 ? (double)used_us / (secs * 1e6) * 100.0 : 0;
	double cost = fpd_cost_pct(c, fpd_cost_work_us(c, &c->interval), secs) +
		      fpd_cost_self_pct(c, used_us, secs);
	double p50 = 0, p99 = 0, pmax = 0;
	bool said = connected && secs >= REPORT_MIN_SECS;

	if (r->nrtt) {
		qsort(r->rtt_us, r->nrtt, sizeof(r->rtt_us[0]), cmp_u32);
		p50 = r->rtt_us[r->nrtt / 2] / 1000.0;
		p99 = r->rtt_us[(r->nrtt * 99) / 100] / 1000.0;
		pmax = r->rtt_us[r->nrtt - 1] / 1000.0;
	}
	if (said) {
		char text[640];

		snprintf(text, sizeof(text),
			 "interval: selected=%zu pinned=%zu samples=%llu skipped=%llu gone=%llu dropped=%llu achieved=%.1f/s requested=%.1f/s requests=%llu probes=%llu reused=%llu rtt_ms=%.1f/%.1f/%.1f target_ms=%.1f cost=%.2f%% self_cpu=%.2f%% rate=%g top=%u breaker=%s scanned=%llu scan_bytes=%llu scans_cut=%llu scans_skipped=%llu cpu=%llu",
			 nset, pinned,
			 (unsigned long long)samples,
			 (unsigned long long)skipped,
			 (unsigned long long)r->gone,
			 (unsigned long long)dropped, achieved, requested,
			 (unsigned long long)r->requests,
			 (unsigned long long)r->probes,
			 (unsigned long long)r->reused,
			 p50, p99, pmax, (double)r->target_us / 1000.0, cost,
			 self_cpu, c->budget.rate, c->budget.top,
			 c->breaker.open ? "open" : "closed",
			 (unsigned long long)c->interval.scanned,
			 (unsigned long long)c->interval.scan_bytes,
			 (unsigned long long)r->scans_cut,
			 (unsigned long long)r->scans_skipped,
			 (unsigned long long)cpu);
		fpd_info("%s", text);
		fpd_recorder_note(r->rec, "%s", text);
		log_cache_stats(sampler);
	}
	r->interval_mono = now;
	r->interval_cpu_us = cpu_us;
	r->skipped = r->gone = 0;
	r->recorded = *rs;
	r->requests = r->probes = r->reused = 0;
	r->target_us = 0;
	r->scans_cut = r->scans_skipped = 0;
	fpd_work_reset(&c->interval);
	r->dropped_before += dropped;
	r->nrtt = 0;
	return said;
}
