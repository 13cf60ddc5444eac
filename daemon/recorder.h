/*
 * flame_profd — the recorder: the one way a sample or a note reaches a
 * destination, from any source (a node session's sample requests, the
 * helper's batches, --perf). It owns the perf-script writer, the notes
 * waiting for a file and the output; each record is formatted straight
 * into the destination's buffer and counted there in the same call.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fp/perf-script.h"

struct fpd_options;
struct fpd_output;
struct fp_sample;
struct fp_text;

/*
 * Where records go: the output's files (output.c) and, with
 * --flight-recorder, the ring (flight.c). A destination hands
 * out the buffer a record is appended to and counts what was appended;
 * the recorder does the formatting.
 */
struct fpd_record_dest_ops {
	/**
	 * The buffer the next record is appended to, owned by the
	 * destination and valid until its next call. With @open, a new
	 * one is begun when none is (*@fresh then true); without, NULL
	 * when none is begun. NULL also when nothing can take records
	 * now (the destination logs and counts that).
	 */
	struct fp_text *(*buffer)(void *dest, bool open, uint64_t now_epoch_us,
				  bool *fresh);
	/**
	 * One sample of time @time_us was just appended: count it.
	 * @return 0, or the negative errno of writing the buffer out (its
	 *         samples are then dropped and counted by the destination).
	 */
	int (*sample)(void *dest, uint64_t time_us);
	/** @n samples were due and could not be recorded. */
	void (*skipped)(void *dest, uint64_t n);
	/** @smp was just recorded (the flight recorder's triggers look at
	 * it); may be NULL. */
	void (*observe)(void *dest, const struct fp_sample *smp);
	/** The node said @value of the gauge @gauge (enum fpd_gauge);
	 * may be NULL. */
	void (*gauge)(void *dest, int gauge, int64_t value);
	/** The node's system monitor told of an event of trigger kind
	 * @kind (enum fpd_trigger_kind) with @value on the process or
	 * port @pid (the node's text, checked); may be NULL. */
	void (*event)(void *dest, int kind, int64_t value, const char *pid);
};

struct fpd_record_dest {
	const struct fpd_record_dest_ops *ops;
	void *data;
};

/* Who a sample comes from, as the interval line counts them. */
enum fpd_record_origin {
	FPD_RECORD_NODE,	/* a node session's sample of a process */
	FPD_RECORD_CPU,		/* --perf: a sample of a thread on CPU */
	FPD_RECORD_ORIGINS,
};

/* What was handed to the recorder since it was made. */
struct fpd_recorder_stats {
	uint64_t written[FPD_RECORD_ORIGINS];	/* in a buffer (a write
						 * error may drop them
						 * later: fpd_output_totals) */
	uint64_t unwritten;			/* nowhere to write them */
};

#define FPD_NOTES_PENDING_MAX 32	/* notes kept while no file is open */

struct fpd_recorder;

/**
 * A recorder writing to @out, which it owns from now on (destroyed with
 * it), with the writer options of @o (kept: @o must outlive it).
 * @return the recorder; the caller frees it with fpd_recorder_destroy().
 */
struct fpd_recorder *
fpd_recorder_new(const struct fpd_options *o, struct fpd_output *out);

/**
 * Records go to @dest as well (the flight recorder's ring, not owned),
 * each formatted once and its text copied; with @files false, to @dest
 * only, and the output takes no sample (it still lists captures).
 */
void
fpd_recorder_add_dest(struct fpd_recorder *rec, struct fpd_record_dest dest,
		      bool files);

/** Destroys the output too; NULL is a no-op. */
void
fpd_recorder_destroy(struct fpd_recorder *rec);

/** The output written to (owned by @rec): its files' life cycle. */
struct fpd_output *
fpd_recorder_output(struct fpd_recorder *rec);

/**
 * Write one sample: open a file if none is (the notes that waited for
 * it go first), append the sample's record to the segment, count it.
 * A time before the last sample written is held at that one's, so the
 * file's times never go backwards.
 * @return 0; -EAGAIN when no file can take it (counted skipped, and in
 *         stats.unwritten); or the negative errno of writing a full
 *         segment out (the sample is counted written, then dropped with
 *         its segment by the output, which logs it).
 */
int
fpd_recorder_write(struct fpd_recorder *rec, const struct fp_sample *smp,
		   enum fpd_record_origin origin);

/**
 * A time for samples about to be taken: @stamp, held back from going
 * before the last one written or stamped (a reply that overtook an
 * earlier one takes the later time).
 */
uint64_t
fpd_recorder_stamp(struct fpd_recorder *rec, uint64_t stamp);

/**
 * What the node said of itself in a reply the session reads anyway
 * (@gauge: enum fpd_gauge, trigger.h), for the flight recorder's
 * triggers.
 */
void
fpd_recorder_gauge(struct fpd_recorder *rec, int gauge, int64_t value);

/**
 * An event of the node's system monitor (@kind: enum fpd_trigger_kind,
 * trigger.h) with @value on @pid, for the flight recorder's triggers.
 */
void
fpd_recorder_event(struct fpd_recorder *rec, int kind, int64_t value,
		   const char *pid);

/** The counts since the recorder was made. */
const struct fpd_recorder_stats *
fpd_recorder_stats(const struct fpd_recorder *rec);

/** The samples written since the start, of every origin. */
uint64_t
fpd_recorder_samples(const struct fpd_recorder *rec);

/**
 * A "# flame_profd: <time> ..." comment between samples: into the open
 * file, or kept (FPD_NOTES_PENDING_MAX at most) for the next file.
 */
void
fpd_recorder_note(struct fpd_recorder *rec, const char *format, ...)
	__attribute__((format(printf, 2, 3)));
