/*
 * flame_profd — the --perf source in the loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source-perf.h"
#include "daemon-log.h"
#include "options.h"
#include "perf-events.h"
#include "recorder.h"
#include "util.h"
#include "util-mem.h"

struct fpd_perf_source {
	struct fpd_source source;
	struct fpd_perf_events *perf;
	struct fpd_recorder *rec;	/* not owned */
};

/*
 * The source hands its samples over sorted, once a tick, so the
 * recorder's holding one to the file's order moves it by at most a
 * tick. A sample no file can take is counted skipped by the recorder,
 * a write error by the output: the read goes on.
 */
static int
write_sample(void *data, const struct fp_sample *smp)
{
	fpd_recorder_write(data, smp, FPD_RECORD_CPU);
	return 0;
}

/* Every sample waiting, in time order, on the daemon's wall clock. */
static void
take(struct fpd_perf_source *feed)
{
	int64_t epoch_offset_us = (int64_t)(fpd_now_epoch_us() - fpd_now_mono_us());

	fpd_perf_events_read(feed->perf, epoch_offset_us, write_sample,
			     feed->rec);
}

static int
fd(struct fpd_source *src)
{
	return fpd_perf_events_fd(((struct fpd_perf_source *)src)->perf);
}

static void
input(struct fpd_source *src)
{
	take((struct fpd_perf_source *)src);
}

static void
drain(struct fpd_source *src, uint64_t now)
{
	(void)now;
	take((struct fpd_perf_source *)src);
}

/* A buffer wakes the loop only when a quarter full: the samples below
 * that are taken before every tick (collect), and so are late by at most
 * a tick. Nothing is ever in flight. */
static const struct fpd_source_ops feed_ops = {
	.fd = fd,
	.input = input,
	.collect = input,
	.drain = drain,
};

int
fpd_perf_source_open(const struct fpd_options *o, struct fpd_perf_source **out)
{
	struct fpd_perf_events_config pc = {
		.pid = o->perf_pid, .freq = o->perf_freq,
	};
	struct fpd_perf_events *perf;
	int rc;

	*out = NULL;
	if (!o->perf_pid)
		return 0;
	rc = fpd_perf_events_new(&pc, &perf);
	if (rc < 0) {
		fpd_fatal("--perf %d: cannot sample its threads: %s%s",
			  (int)o->perf_pid, strerror(-rc),
			  rc == -EACCES || rc == -EPERM ?
			  " (needs root or CAP_PERFMON, or kernel.perf_event_paranoid <= 1 for a process of the same user)" : "");
		return rc;
	}
	fpd_info("--perf: sampling %u threads of OS process %d at %u Hz%s",
		 fpd_perf_events_threads(perf), (int)o->perf_pid, o->perf_freq,
		 fpd_perf_events_user_only(perf) ? " (user mode only)" : "");
	*out = xnew(struct fpd_perf_source);
	(*out)->source.ops = &feed_ops;
	(*out)->perf = perf;
	return 0;
}

void
fpd_perf_source_attach(struct fpd_perf_source *feed, struct fpd_recorder *rec)
{
	feed->rec = rec;
}

struct fpd_source *
fpd_perf_source_source(struct fpd_perf_source *feed)
{
	return &feed->source;
}

void
fpd_perf_source_finish(struct fpd_perf_source *feed)
{
	uint64_t lost;

	if (!feed)
		return;
	take(feed);
	lost = fpd_perf_events_lost(feed->perf);
	if (lost)
		fpd_warn("--perf: the kernel dropped %llu samples (buffers full)",
			 (unsigned long long)lost);
}

void
fpd_perf_source_destroy(struct fpd_perf_source *feed)
{
	if (!feed)
		return;
	fpd_perf_events_destroy(feed->perf);
	free(feed);
}
