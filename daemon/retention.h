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
#include "fs-safe.h"

/* What the index says of one finished file. */
struct fpd_file_entry {
	char name[FP_PERF_NAME_MAX];
	uint64_t first_us, last_us;
	uint64_t samples, bytes, skipped, dropped, events;
	bool recovered;
	bool future_told;		/* its date in the future was reported */
	struct fpd_made made;		/* device and inode written; ino 0:
					 * unknown, never deleted */
};

/* A ctl trigger's --reason: at most FPD_CAPTURE_REASON_RAW bytes as given,
 * kept escaped (each byte at most 4). */
#define FPD_CAPTURE_REASON_RAW 128
#define FPD_CAPTURE_REASON_MAX (4 * FPD_CAPTURE_REASON_RAW + 1)

/* What the manifest says of one capture of the flight recorder: a
 * directory of the node directory holding one finished file. */
struct fpd_capture_entry {
	char dir[FP_PERF_NAME_MAX];	/* capture.<time>.<kind> */
	char name[FP_PERF_NAME_MAX];	/* the file in it */
	char trigger[64];		/* "mailbox>50000", "SIGUSR2" */
	char pid[32];			/* "<0.123.0>", or "" for none */
	int64_t value;			/* what fired it (0 for a signal) */
	char reason[FPD_CAPTURE_REASON_MAX];	/* ctl trigger --reason, escaped
						 * (util-escape.h), or "" */
	uint64_t capped;		/* triggers --max-captures-per-hour
					 * suppressed since the capture before */
	uint64_t trigger_us, first_us, last_us, samples, bytes;
	struct fpd_made dir_made, made;
};

/**
 * Delete the captures of @entries (*@n, oldest first) beyond @keep,
 * oldest first: the file, then its directory, each only while it is
 * still what was made. Deleted entries leave @entries.
 * @return the number of captures deleted.
 */
int
fpd_captures_apply(int dirfd, struct fpd_capture_entry *entries, size_t *n,
		   unsigned keep);

/** Read the list of captures (a missing list is empty), which must pass
 * fpd_fs_open_file() with @trust. */
int
fpd_captures_load(int dirfd, const struct fpd_trust *trust,
		  struct fpd_capture_entry **entries, size_t *n);

/**
 * Delete the files of the index @entries (*@n of them, in the order they
 * were finished) beyond the limits, the earliest finished first, never
 * the last one. Only a file whose device and inode are recorded and
 * still the same is deleted and counted; a file named for a time in the
 * future is reported once. Deleted entries leave @entries.
 * @return the number of files deleted.
 */
int
fpd_retention_apply(int dirfd, struct fpd_file_entry *entries, size_t *n,
		    unsigned keep_files, uint64_t keep_bytes,
		    uint64_t keep_age_us, uint64_t now_epoch_us);

/** Append @e to the index @entries of *@n entries. */
void
fpd_index_add(struct fpd_file_entry **entries, size_t *n,
	      const struct fpd_file_entry *e);

/** Read the index of finished files (a missing index is empty); the index
 * must pass fpd_fs_open_file() with @trust. */
int
fpd_index_load(int dirfd, const struct fpd_trust *trust,
	       struct fpd_file_entry **entries, size_t *n);

/* What the manifest lists besides the files of the index. */
struct fpd_index_extra {
	struct fpd_capture_entry *captures;	/* the flight recorder's */
	size_t *ncaptures;
	bool store_captures;	/* rewrite .flame_profd.captures too (a
				 * directory that never had a capture gets
				 * none) */
};

/**
 * Rewrite the index and manifest.json atomically from @entries, keeping
 * only the files that still exist (as the file recorded, when its device
 * and inode are); both are created with @mode, never through a link.
 * With @extra, the manifest lists the captures whose file is still there,
 * and with extra->store_captures their list is rewritten too.
 */
int
fpd_index_store(int dirfd, const struct fpd_trust *trust,
		struct fpd_file_entry *entries, size_t *n, const char *node,
		const char *otp_release, const char *options_json, mode_t mode,
		const struct fpd_index_extra *extra);
