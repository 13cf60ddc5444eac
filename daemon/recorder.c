/*
 * flame_profd — the recorder: samples and notes into the destination's
 * buffer, one call each.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "recorder.h"
#include "options.h"
#include "output.h"
#include "util.h"
#include "util-buf.h"
#include "util-mem.h"

#define NOTE_MAX 512		/* a note's text, truncated beyond */

struct fpd_recorder {
	struct fpd_output *out;
	struct fpd_record_dest dest;	/* the output's files */
	bool files;			/* records go to them */
	struct fpd_record_dest extra;	/* the ring, or ops NULL */
	struct fp_perf_writer *writer;
	char *pending[FPD_NOTES_PENDING_MAX];
	size_t npending;
	uint64_t last_stamp_us;		/* times never go backwards */
	struct fpd_recorder_stats stats;
};

struct fpd_recorder *
fpd_recorder_new(const struct fpd_options *o, struct fpd_output *out)
{
	struct fp_perf_options popts = {
		.lines = o->lines, .erlang_names = o->erlang_names,
		.key_names = o->key_names, .nkeys = o->nkeys + o->nlogger_keys,
	};
	struct fpd_recorder *rec = xnew(struct fpd_recorder);

	rec->out = out;
	rec->dest = fpd_output_dest(out);
	rec->files = true;
	rec->writer = fp_perf_writer_new(&popts);
	return rec;
}

void
fpd_recorder_add_dest(struct fpd_recorder *rec, struct fpd_record_dest dest,
		      bool files)
{
	rec->extra = dest;
	rec->files = files;
}

static void
release_pending(struct fpd_recorder *rec)
{
	for (size_t i = 0; i < rec->npending; i++)
		free(rec->pending[i]);
	rec->npending = 0;
}

void
fpd_recorder_destroy(struct fpd_recorder *rec)
{
	if (!rec)
		return;
	fpd_output_destroy(rec->out);
	release_pending(rec);
	fp_perf_writer_destroy(rec->writer);
	free(rec);
}

struct fpd_output *
fpd_recorder_output(struct fpd_recorder *rec)
{
	return rec->out;
}

const struct fpd_recorder_stats *
fpd_recorder_stats(const struct fpd_recorder *rec)
{
	return &rec->stats;
}

uint64_t
fpd_recorder_samples(const struct fpd_recorder *rec)
{
	uint64_t n = 0;

	for (int i = 0; i < FPD_RECORD_ORIGINS; i++)
		n += rec->stats.written[i];
	return n;
}

/*
 * The buffer a sample goes to, a file opened for it if none is. Notes
 * written while no file is open wait for the next file: a file is only
 * opened for a sample, so no file ever holds comments alone (Flamescope
 * takes such a file for another format).
 */
static struct fp_text *
sample_buffer(struct fpd_recorder *rec)
{
	bool fresh;
	struct fp_text *t = rec->dest.ops->buffer(rec->dest.data, true,
						  fpd_now_epoch_us(), &fresh);

	if (t && fresh) {
		for (size_t i = 0; i < rec->npending; i++)
			fp_perf_format_comment(rec->writer, t, "%s",
					       rec->pending[i]);
	}
	if (t || rec->npending == FPD_NOTES_PENDING_MAX)
		release_pending(rec);
	return t;
}

uint64_t
fpd_recorder_stamp(struct fpd_recorder *rec, uint64_t stamp)
{
	if (stamp < rec->last_stamp_us)
		stamp = rec->last_stamp_us;
	rec->last_stamp_us = stamp;
	return stamp;
}

/* The ring's buffer, or NULL without one. */
static struct fp_text *
extra_buffer(struct fpd_recorder *rec)
{
	bool fresh;

	if (!rec->extra.ops)
		return NULL;
	return rec->extra.ops->buffer(rec->extra.data, true, 0, &fresh);
}

int
fpd_recorder_write(struct fpd_recorder *rec, const struct fp_sample *smp,
		   enum fpd_record_origin origin)
{
	struct fp_text *t = rec->files ? sample_buffer(rec) : NULL;
	struct fp_text *x = extra_buffer(rec);
	struct fp_sample held;
	size_t at;
	int rc = 0;

	if (!t && rec->files)
		rec->dest.ops->skipped(rec->dest.data, 1);
	if (!t && !x) {
		rec->stats.unwritten++;
		return -EAGAIN;
	}
	if (smp->time_us < rec->last_stamp_us) {
		held = *smp;
		held.time_us = rec->last_stamp_us;
		smp = &held;
	}
	rec->last_stamp_us = smp->time_us;
	/* formatted once; the ring takes a copy of the text */
	if (t) {
		at = t->len;
		fp_perf_format_sample(rec->writer, t, smp);
		if (x)
			fp_text_put(x, t->buf + at, t->len - at);
	} else {
		fp_perf_format_sample(rec->writer, x, smp);
	}
	rec->stats.written[origin]++;
	if (x) {
		rec->extra.ops->sample(rec->extra.data, smp->time_us);
		if (rec->extra.ops->observe)
			rec->extra.ops->observe(rec->extra.data, smp);
	}
	if (t)
		rc = rec->dest.ops->sample(rec->dest.data, smp->time_us);
	else if (rec->files)
		rc = -EAGAIN;
	return rc;
}

void
fpd_recorder_gauge(struct fpd_recorder *rec, int gauge, int64_t value)
{
	if (rec->extra.ops && rec->extra.ops->gauge)
		rec->extra.ops->gauge(rec->extra.data, gauge, value);
}

void
fpd_recorder_event(struct fpd_recorder *rec, int kind, int64_t value,
		   const char *pid)
{
	if (rec->extra.ops && rec->extra.ops->event)
		rec->extra.ops->event(rec->extra.data, kind, value, pid);
}

void
fpd_recorder_note(struct fpd_recorder *rec, const char *format, ...)
{
	char text[NOTE_MAX], stamp[40], note[NOTE_MAX + 64];
	struct fp_text *t;
	va_list args;
	bool fresh;

	va_start(args, format);
	vsnprintf(text, sizeof(text), format, args);
	va_end(args);
	fpd_format_utc(fpd_now_epoch_us(), stamp, sizeof(stamp));
	snprintf(note, sizeof(note), "flame_profd: %s %s", stamp, text);

	t = extra_buffer(rec);
	if (t)
		fp_perf_format_comment(rec->writer, t, "%s", note);
	if (!rec->files)
		return;
	t = rec->dest.ops->buffer(rec->dest.data, false, 0, &fresh);
	if (t)
		fp_perf_format_comment(rec->writer, t, "%s", note);
	else if (rec->npending < FPD_NOTES_PENDING_MAX)
		rec->pending[rec->npending++] = xstrdup(note);
}
