/*
 * flame_profd — the output files of one node (output.c): a file per
 * --rotate, written in segments under a partial name and renamed when
 * finished; retention and the manifest after each (retention.h), what an
 * earlier run left recovered at the start (recover.h).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "compress.h"
#include "recorder.h"

struct fp_text;

struct fpd_output_config {
	const char *dir;		/* --out */
	const char *node;
	const char *header;		/* comment lines at the top of every file */
	const char *options_json;	/* a JSON object for the manifest */
	bool options_later;		/* --perf auto: no manifest before
					 * fpd_output_settle_options() */
	enum fpd_compress compress;
	int level;
	uint64_t rotate_us;
	uint64_t rotate_bytes;		/* 0: no size limit */
	unsigned keep_files;		/* 0: no limit */
	uint64_t keep_bytes;		/* 0: no limit */
	uint64_t keep_age_us;		/* 0: no limit */
	unsigned keep_captures;		/* the flight recorder's; 0: no limit */
	bool captures_only;		/* --flight-recorder without
					 * --continuous: no file counts skips */
	mode_t file_mode;
	mode_t dir_mode;
	uid_t uid;			/* the run's user, trusted besides root */
	gid_t gid;
};

struct fpd_output;
struct fp_text;
struct fpd_capture_entry;

/**
 * Create (mkdir -p) DIR/<node>/, lock it, finish or set aside what an
 * earlier run left, and check it takes files. Every path is opened as
 * fs-safe.h says. The caller frees *@out with fpd_output_destroy() (or
 * hands it to a recorder).
 * @return 0, or a negative errno with what failed logged (fpd_fatal()):
 *         -EWOULDBLOCK when another daemon holds the directory's lock,
 *         -EPERM when a directory or file was refused as not safe.
 */
int
fpd_output_new(const struct fpd_output_config *config, struct fpd_output **out);

/** Finishes the open file; NULL is a no-op. */
void
fpd_output_destroy(struct fpd_output *out);

/**
 * The segment being filled, that records are appended to (its bytes
 * go to the file as they are, compressed as one frame). With @open, a
 * file is opened when none is (*@fresh then true, and the segment holds
 * the file's header); without, NULL when no file is open.
 * @return the segment, owned by @out, valid until the next call into
 *         @out; NULL when no file can be created (counted, logged,
 *         retried at the next call).
 */
struct fp_text *
fpd_output_buffer(struct fpd_output *out, bool open, uint64_t now_epoch_us,
		  bool *fresh);

/**
 * Count one sample (of time @time_us) just appended to the segment, and
 * write the segment out when it is full.
 * @return 0, or the negative errno of that write (fpd_output_flush()).
 */
int
fpd_output_sample(struct fpd_output *out, uint64_t time_us);

/** Count a throttling or circuit-breaker change (for the manifest). */
void
fpd_output_event(struct fpd_output *out);

/** Count samples that were due but not taken (for the manifest). */
void
fpd_output_skipped(struct fpd_output *out, uint64_t n);

/**
 * Write the current segment out (compressed as one frame). On a write
 * error the file is cut back to the last good segment and the segment's
 * samples are dropped and counted.
 */
int
fpd_output_flush(struct fpd_output *out);

/** Called every tick: write the segment out once a second, and finish the
 * file when it is due (--rotate, --rotate-size). */
void
fpd_output_tick(struct fpd_output *out, uint64_t now_mono_us);

/** Finish the current file: flush, fsync, rename, fsync dir, retention,
 * manifest. */
int
fpd_output_finish(struct fpd_output *out);

/* Told of each file finished: its name in the node directory @dirfd
 * (the output's; valid during the call only). */
typedef void (*fpd_output_finished_fn)(void *data, int dirfd, const char *name);

/** Call @fn with @data after each file is finished (--push); one at most. */
void
fpd_output_set_finished(struct fpd_output *out, fpd_output_finished_fn fn,
			void *data);

/** Whether a file is open (being written). */
bool
fpd_output_is_open(const struct fpd_output *out);

/** DIR/<node>, the directory written to; owned by @out. */
const char *
fpd_output_dir(const struct fpd_output *out);

/** The node's OTP release, for the manifest. */
void
fpd_output_set_otp_release(struct fpd_output *out, const char *release);

/**
 * The options the manifest records from now on (a copy of @json is kept):
 * with --perf auto, the pid the node told (0: none). With
 * config.options_later, writes the manifest of what fpd_output_new()
 * recovered, held back until now.
 */
void
fpd_output_settle_options(struct fpd_output *out, const char *json);

/** Give the node directory and its bookkeeping files to @uid:@gid (before
 * dropping root), so the daemon can go on writing there: only if this run
 * made the directory. One it did not make must already be @uid's.
 * @return 0, or -EPERM with *why set, or a negative errno. */
int
fpd_output_chown(struct fpd_output *out, uid_t uid, gid_t gid,
		 const char **why);

/** Samples dropped on write errors since the start. */
uint64_t
fpd_output_dropped(const struct fpd_output *out);

/* What a run's files hold, for its last line. */
struct fpd_output_totals {
	uint64_t written;	/* samples in the files finished */
	uint64_t dropped;	/* samples lost to write errors */
	uint64_t unrecorded;	/* dropped or skipped, in no file (none
				 * could be written after they happened) */
	unsigned unfinished;	/* files that could not be finished: left
				 * under their partial names */
	int fatal;		/* -errno: the output directory is gone
				 * and cannot be made again */
};

/** What the run's files hold so far, into @t. */
void
fpd_output_totals(const struct fpd_output *out, struct fpd_output_totals *t);

/** The output's files as the recorder's destination (recorder.h). */
struct fpd_record_dest
fpd_output_dest(struct fpd_output *out);

/** The node directory's descriptor (owned by @out; it changes when the
 * directory is made again), for the flight recorder's captures. */
int
fpd_output_dirfd(const struct fpd_output *out);

/** The configuration @out was made with (owned by @out). */
const struct fpd_output_config *
fpd_output_config(const struct fpd_output *out);

/** The node's name as file names carry it (owned by @out). */
const char *
fpd_output_node_name(const struct fpd_output *out);

/**
 * List a finished capture in the manifest (a copy of @e is kept), then
 * delete the oldest beyond config.keep_captures and rewrite the index,
 * the list of captures and the manifest.
 */
void
fpd_output_add_capture(struct fpd_output *out, const struct fpd_capture_entry *e);
