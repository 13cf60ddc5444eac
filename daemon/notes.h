/*
 * flame_profd — what the daemon writes into its files besides samples:
 * "# flame_profd: ..." notes between samples, the comment header at the
 * top of every file, and the options object of the manifest.
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

#include "flame_profd.h"

#define FPD_NOTES_PENDING_MAX 32	/* notes kept while no file is open */

struct fp_perf_writer;

struct fpd_notes {
	struct fpd_output *out;		/* not owned */
	struct fp_perf_writer *writer;	/* not owned */
	char *pending[FPD_NOTES_PENDING_MAX];
	size_t npending;
};

void
fpd_notes_init(struct fpd_notes *n, struct fpd_output *out,
	       struct fp_perf_writer *writer);

/** Frees the notes still waiting for a file. */
void
fpd_notes_release(struct fpd_notes *n);

/**
 * The stream samples are written to (fpd_output_stream()), with the notes
 * that waited for a file written first into a new one.
 * @return NULL when no file can be created.
 */
FILE *
fpd_notes_stream(struct fpd_notes *n);

/** A "# flame_profd: <time> ..." comment between samples. */
void
fpd_note(struct fpd_notes *n, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/** The comment lines at the top of every file; the caller frees it. */
char *
fpd_file_header(const struct fpd_options *o);

/** The options as a JSON object, for the manifest; the caller frees it. */
char *
fpd_options_json(const struct fpd_options *o);

const char *
fpd_request_name(enum fp_request_path path);

const char *
fpd_label_source_name(enum fp_label_source source);
