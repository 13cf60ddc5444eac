/*
 * flame_profd — retention, and the index and manifest of finished files
 * (retention.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fp/perf-file.h"

/* What the index says of one finished file. */
struct fpd_file_entry {
	char name[FP_PERF_NAME_MAX];
	uint64_t first_us, last_us;
	uint64_t samples, bytes, skipped, dropped, events;
	bool recovered;
};

/**
 * Delete the oldest finished files of @node_s in @dirfd beyond the limits
 * (never the newest one). Nothing else is ever deleted.
 * @return the number of files deleted.
 */
int
fpd_retention_apply(int dirfd, const char *node_s, unsigned keep_files,
		    uint64_t keep_bytes, uint64_t keep_age_us,
		    uint64_t now_epoch_us);

/** Append @e to the index @entries of *@n entries. */
void
fpd_index_add(struct fpd_file_entry **entries, size_t *n,
	      const struct fpd_file_entry *e);

/** Read the index of finished files (a missing index is empty). */
int
fpd_index_load(int dirfd, struct fpd_file_entry **entries, size_t *n);

/**
 * Rewrite the index and manifest.json atomically from @entries, keeping
 * only the files that still exist; both are created with @mode, never
 * through a link.
 */
int
fpd_index_store(int dirfd, struct fpd_file_entry *entries, size_t *n,
		const char *node, const char *otp_release,
		const char *options_json, mode_t mode);
