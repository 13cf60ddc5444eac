/*
 * flame_profd — the texts that describe a run in its files: the comment
 * header at the top of every file, the options object of the manifest,
 * and the names of enum values they use. (Notes between samples are the
 * recorder's: fpd_recorder_note().)
 */
#pragma once

#include "options.h"

/** The comment lines at the top of every file; the caller frees it. */
char *
fpd_file_header(const struct fpd_options *o);

/** The options as a JSON object, for the manifest; the caller frees it. */
char *
fpd_options_json(const struct fpd_options *o);

/** "rex", "eval" or "helper": a static string. */
const char *
fpd_request_name(enum fp_request_path path);

/** "item", "dictionary" or "no": a static string. */
const char *
fpd_label_source_name(enum fp_label_source source);
