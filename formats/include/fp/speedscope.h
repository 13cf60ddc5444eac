/*
 * flame_profd — speedscope's JSON file format
 * (https://www.speedscope.app/file-format-schema.json), "sampled"
 * profiles with weights.
 *
 * Samples keep their order, so speedscope's "Time Order" view shows the
 * run as it happened; "Left Heavy" merges them like a flame graph.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fp_speedscope;

struct fp_speedscope_options {
	const char *name;	/* shown as the file's name; NULL: omitted */
	const char *unit;	/* "none", "bytes" or "seconds" (speedscope's
				 * WeightUnit) */
	const char *exporter;	/* e.g. "flame_prof 0.1.0" */
	/* weights are time: a sample lasts until the next one of its
	 * profile (unit "seconds"), not the weight given to _add */
	bool timed;
};

/** Caller owns the result; free with fp_speedscope_destroy(). */
struct fp_speedscope *
fp_speedscope_new(const struct fp_speedscope_options *options);

/** NULL is a no-op. */
void
fp_speedscope_destroy(struct fp_speedscope *ss);

/**
 * Append one sample to the profile named @profile (created on first
 * use). @names are root first, @files parallel (may be NULL or hold
 * NULL entries; \xHH escapes in them are decoded, and "unknown", the
 * writer's word for no file, is left out). Frames are shared between
 * profiles by name; a name ending in ":LINE" gives the frame a
 * line. Strings are copied. @time_us (epoch microseconds) places the
 * sample when the options are timed; samples of a profile come in time
 * order.
 */
void
fp_speedscope_add(struct fp_speedscope *ss, const char *profile,
		  const char *const *names, const char *const *files, size_t n,
		  uint64_t weight, uint64_t time_us);

/**
 * Write the file: profiles in name order, the one of the most weight
 * (timed: of the most samples) active.
 *
 * Timed, every profile's axis is seconds since the first sample of all:
 * a sample lasts until the next one of its profile (the last one, and
 * one that a gap of more than four times the profile's median interval
 * follows, as long as that median), and the time before a profile's
 * first sample and in its gaps is an empty sample, so that speedscope
 * shows each profile on the same time axis.
 *
 * @return 0, or a negative errno on a write error.
 */
int
fp_speedscope_write(const struct fp_speedscope *ss, FILE *out);

/**
 * Write @s as a JSON string (with the quotes). Invalid UTF-8 becomes
 * U+FFFD, control characters \u00XX.
 */
void
fp_json_write_string(FILE *out, const char *s);
