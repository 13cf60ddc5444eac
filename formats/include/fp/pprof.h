/*
 * flame_profd — pprof's profile.proto (github.com/google/pprof,
 * proto/profile.proto), gzip-compressed as pprof reads and writes it.
 *
 * Samples with the same stack and the same labels are one sample of the
 * profile, their values summed, as pprof itself merges them: a process
 * sampled ten times a second in one function for a minute is one entry
 * of 600 samples, not 600 entries. Frames are functions (a name and a
 * file) and locations (a function and a line); every location belongs
 * to one mapping, which says the profile already holds function names,
 * files and lines, so that pprof does not look for a binary to
 * symbolise it with.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fp_text;		/* util-buf.h */

struct fp_pprof;

/* A label of a sample: a string (str set) or a number (str NULL). */
struct fp_pprof_label {
	const char *key;
	const char *str;
	int64_t num;
	const char *num_unit;	/* with a number: its unit, or NULL */
};

/** Caller owns the result; free with fp_pprof_destroy(). */
struct fp_pprof *
fp_pprof_new(void);

/** NULL is a no-op. */
void
fp_pprof_destroy(struct fp_pprof *pp);

/**
 * Add a value column (pprof's sample type), e.g. "samples", "count".
 * Every column is added before the first sample.
 *
 * @return the column's index in the values fp_pprof_add() takes;
 *         -EBUSY once a sample was added.
 */
int
fp_pprof_add_sample_type(struct fp_pprof *pp, const char *type,
			 const char *unit);

/** The column pprof shows unless told otherwise (by its type). */
void
fp_pprof_set_default_sample_type(struct fp_pprof *pp, const char *type);

/** What one sample stands for: @period of @type in @unit. */
void
fp_pprof_set_period(struct fp_pprof *pp, const char *type, const char *unit,
		    int64_t period);

/** When the profile starts (epoch nanoseconds) and how long it lasts. */
void
fp_pprof_set_time(struct fp_pprof *pp, int64_t time_nanos,
		  int64_t duration_nanos);

/** The file name of the one mapping every location belongs to. */
void
fp_pprof_set_mapping(struct fp_pprof *pp, const char *filename);

/** A line of free text pprof shows with the profile (-comments). */
void
fp_pprof_add_comment(struct fp_pprof *pp, const char *text);

/**
 * Add one sample (merged with an earlier one of the same stack and
 * labels). @frames are leaf first, each "NAME" or "NAME:LINE" as
 * flame_profd writes them ("m:f/2:17": function m:f/2, line 17);
 * @files parallel (may be NULL or hold NULL entries) in the file's
 * written form: \xHH escapes are decoded, the text shown again under
 * util-escape.h's rule, and "unknown", the writer's word for no file,
 * is left out. @values has one entry per column; sums that leave the
 * 64-bit range are held at the bound (fp_pprof_saturated()). Labels are
 * kept in the order given; give them in one order for samples to
 * merge. Strings are copied.
 */
void
fp_pprof_add(struct fp_pprof *pp, const char *const *frames,
	     const char *const *files, size_t nframes, const int64_t *values,
	     const struct fp_pprof_label *labels, size_t nlabels);

/** Samples of the profile (after merging). */
size_t
fp_pprof_samples(const struct fp_pprof *pp);

/** Whether a value's sum was held at a bound of the 64-bit range. */
bool
fp_pprof_saturated(const struct fp_pprof *pp);

/** Append the profile, serialised and not compressed, to @out. */
void
fp_pprof_encode(const struct fp_pprof *pp, struct fp_text *out);

/**
 * Write the profile gzip-compressed to @out (which the caller owns and
 * closes).
 *
 * @return 0, -EIO on a write error, -ENOMEM if zlib cannot start.
 */
int
fp_pprof_write(const struct fp_pprof *pp, FILE *out);
