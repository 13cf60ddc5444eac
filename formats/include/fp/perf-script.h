/*
 * flame_profd — the perf-script writer (docs/FORMAT.md is the grammar).
 *
 * The writer formats; it never owns what it writes to: a FILE, or a
 * caller's buffer (struct fp_text, util-buf.h) its records are appended
 * to (the rotation code opens, finishes and renames files).
 */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fp/term.h"

struct fp_perf_writer;
struct fp_text;		/* util-buf.h */

/*
 * The last field of the event line of a sample fp_sample_is_idle() calls
 * idle. Stock Flamescope leaves a sample out of its heat map when
 * "swapper.*(cpuidle|cpu_idle|...)" matches its text (the kernel's idle
 * task): this text matches, and holds nothing our escaping would touch.
 */
#define FP_PERF_IDLE_FIELD "\tidle: swapper/cpu_idle"

struct fp_perf_options {
	bool lines;		/* append :LINE to frame names */
	/*
	 * Names of Elixir modules as Erlang writes them
	 * ('Elixir.Foo':bar/1), not as Elixir does (Foo.bar/1).
	 */
	bool erlang_names;
	/*
	 * The names of fp_sample.keys (the dictionary keys, then the
	 * Logger metadata keys): each is written "key.NAME: TEXT". The
	 * writer keeps the pointers; they must outlive it.
	 */
	const char *const *key_names;
	size_t nkeys;
};

/** Caller owns the result; free with fp_perf_writer_destroy(). */
struct fp_perf_writer *
fp_perf_writer_new(const struct fp_perf_options *options);

/** NULL is a no-op. */
void
fp_perf_writer_destroy(struct fp_perf_writer *writer);

/**
 * Append one sample to @dst: event line, frames leaf first, blank line.
 * The event line ends in FP_PERF_IDLE_FIELD when fp_sample_is_idle(@sample).
 * @dst grows as needed (allocation failure aborts).
 */
void
fp_perf_format_sample(struct fp_perf_writer *writer, struct fp_text *dst,
		      const struct fp_sample *sample);

/**
 * Write one sample as fp_perf_format_sample() makes it, with one fwrite.
 *
 * @return 0, or a negative errno if the stream reports an error.
 */
int
fp_perf_write_sample(struct fp_perf_writer *writer, FILE *out,
		     const struct fp_sample *sample);

/**
 * Append one comment line ("# " + text) to @dst. Newlines in the text
 * become spaces: a comment never spills into a sample.
 */
void
fp_perf_format_comment(struct fp_perf_writer *writer, struct fp_text *dst,
		       const char *format, ...)
	__attribute__((format(printf, 3, 4)));

/** fp_perf_format_comment() with a va_list. */
void
fp_perf_vformat_comment(struct fp_perf_writer *writer, struct fp_text *dst,
			const char *format, va_list args)
	__attribute__((format(printf, 3, 0)));

/**
 * Write one comment line as fp_perf_format_comment() makes it.
 *
 * @return 0, or a negative errno if the stream reports an error.
 */
int
fp_perf_write_comment(struct fp_perf_writer *writer, FILE *out,
		      const char *format, ...)
	__attribute__((format(printf, 3, 4)));

/**
 * Append the frame-name form of an atom (quoted and escaped as in
 * docs/FORMAT.md) to @dst, NUL-terminated.
 *
 * @return the length written (without the NUL), or the length it would
 *         need if @size is too small (then @dst holds a truncated prefix).
 */
size_t
fp_perf_format_atom(char *dst, size_t size, const char *atom);

/**
 * Like fp_perf_format_atom(), for a registered name: unless
 * @erlang_names, an atom that names an Elixir module is written as
 * Elixir prints it (Elixir.Foo.Bar as Foo.Bar).
 */
size_t
fp_perf_format_name(char *dst, size_t size, const char *atom,
		    bool erlang_names);
