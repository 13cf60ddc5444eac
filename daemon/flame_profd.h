/*
 * flame_profd — declarations shared by the daemon's files.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "fp/log.h"
#include "fp/node.h"
#include "fp/perf-file.h"
#include "fp/term.h"
#include "fs-safe.h"

/* Exit codes (sysexits.h values; listed in --help and flame_profd(1)). */
enum fpd_exit {
	FPD_EXIT_OK = 0,
	FPD_EXIT_USAGE = 64,		/* bad flag, value or node name */
	FPD_EXIT_NOSAMPLES = 65,	/* --duration run ended without a sample */
	FPD_EXIT_NOINPUT = 66,		/* cookie file missing or unreadable */
	FPD_EXIT_UNAVAILABLE = 69,	/* node unreachable */
	FPD_EXIT_SOFTWARE = 70,		/* internal error, node answered nonsense */
	FPD_EXIT_CANTCREAT = 73,	/* output directory or log file cannot be
					 * made, or is not safe (fs-safe.h) */
	FPD_EXIT_IOERR = 74,		/* write error on output */
	FPD_EXIT_TEMPFAIL = 75,		/* output directory locked by another daemon */
	FPD_EXIT_NOPERM = 77,		/* node refused us: wrong cookie */
	FPD_EXIT_CONFIG = 78,		/* --perf auto: the node's process not usable */
};

struct fpd_options {
	const char *node;
	const char *cookie_file;
	bool cookie_file_set;
	unsigned top;
	bool top_set;
	unsigned scan_max;
	unsigned min_reductions;	/* --top's floor, reductions/s */
	uint64_t every_us;
	double rate;
	const char **pids;	/* --pid, as given (fp_node_check_pids()) */
	size_t npids;
	const char **names;
	size_t nnames;
	const char *out_dir;
	uint64_t rotate_us;
	uint64_t rotate_bytes;	/* 0: no size limit */
	int compress;		/* enum fpd_compress */
	int compress_level;
	unsigned keep_files;
	uint64_t keep_bytes;
	uint64_t keep_age_us;
	uint64_t duration_us;	/* 0: until stopped */
	bool lines;
	bool erlang_names;	/* frames of Elixir modules in the Erlang form */
	const char **keys;	/* --key: dictionary keys recorded */
	size_t nkeys;
	const char **logger_keys;	/* --logger-key: Logger metadata keys */
	size_t nlogger_keys;
	bool callers;		/* --callers: '$callers' recorded */
	const char **key_names;	/* keys, then logger_keys (the writer's) */
	unsigned backtrace_depth;
	uint64_t timeout_us;
	const char *log_file;
	int verbosity;		/* 0 info, >0 debug, <0 warnings only */
	mode_t file_mode;
	mode_t dir_mode;
	const char *user;	/* drop root to this user after start-up */
	char *connect_host;	/* --connect HOST:PORT, or NULL */
	unsigned connect_port;
	double max_overhead;	/* percent of the node's schedulers; 0: off */
	enum fp_request_path request;	/* --request (default rex) */
	bool idle_reuse;	/* probe processes idle at their last sample */
	unsigned breaker_run_queue;	/* 0: 50 per scheduler */
	pid_t perf_pid;		/* --perf: the node's OS pid; 0: off or auto */
	bool perf_auto;		/* --perf auto: asked of the node once connected */
	unsigned perf_freq;	/* --perf-freq, per thread on CPU */
	uid_t uid;
	gid_t gid;
};

/* log.c */
/**
 * Log to stderr, or append to @path (made with @mode if absent). The
 * file's directory is opened as fs-safe.h's fpd_fs_open_dir() does and
 * kept for fpd_log_reopen(); the file is opened without following a link
 * and must be regular, with one link, owned by root or @trust's user.
 * @return 0, or a negative errno; -EPERM, -ELOOP or -ENOTDIR set *why.
 */
int
fpd_log_open(const char *path, int verbosity, mode_t mode,
	     const struct fpd_trust *trust, const char **why);

/* Hand the log file to the user the daemon drops to (as root, before the
 * drop), if the daemon made it; 0 or a negative errno. */
int
fpd_log_chown(uid_t uid, gid_t gid, const char *user);

int
fpd_log_reopen(void);

void
fpd_log_close(void);

void
fpd_log(enum fp_log_priority priority, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

#define fpd_info(...) fpd_log(FP_LOG_INFO, __VA_ARGS__)
#define fpd_warn(...) fpd_log(FP_LOG_WARNING, __VA_ARGS__)
#define fpd_err(...) fpd_log(FP_LOG_ERROR, __VA_ARGS__)
#define fpd_debug(...) fpd_log(FP_LOG_DEBUG, __VA_ARGS__)

/* util.c */
int
fpd_parse_duration(const char *str, uint64_t *us);

/* 64M, 1G, 500k (binary units), a bare number is bytes. */
int
fpd_parse_size(const char *str, uint64_t *bytes);

void
fpd_format_duration(uint64_t us, char *buf, size_t size);

uint64_t
fpd_now_mono_us(void);

/* CPU time of this process, all threads, in microseconds. */
uint64_t
fpd_cpu_us(void);

/* Wall-clock microseconds that never go backwards within a run. */
uint64_t
fpd_now_epoch_us(void);

/* @epoch_us as UTC ISO 8601 with microseconds (2026-11-21T07:56:30.018286Z);
 * file names carry their own form (fp/perf-file.h). */
void
fpd_format_utc(uint64_t epoch_us, char *buf, size_t size);

/* compress.c: one segment of a file is one zstd frame or gzip member
 * (fp/perf-file.h reads them back) */
enum fpd_compress {
	FPD_COMPRESS_NONE = FP_PERF_PLAIN,
	FPD_COMPRESS_GZIP = FP_PERF_GZIP,
	FPD_COMPRESS_ZSTD = FP_PERF_ZSTD,
};

struct fpd_compressor;

struct fpd_compressor *
fpd_compressor_new(enum fpd_compress kind, int level);

void
fpd_compressor_destroy(struct fpd_compressor *c);

/**
 * Compress @len bytes into one self-contained frame (zstd) or member
 * (gzip); with FPD_COMPRESS_NONE the data is passed through.
 * @return 0 with *out and *outlen valid until the next call, or -ENOMEM/-EIO.
 */
int
fpd_compress_segment(struct fpd_compressor *c, const void *data, size_t len,
		     const void **out, size_t *outlen);

/* output.c */
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
	mode_t file_mode;
	mode_t dir_mode;
	uid_t uid;			/* the run's user, trusted besides root */
	gid_t gid;
};

struct fpd_output;

/**
 * Create (mkdir -p) DIR/<node>/, lock it, finish or set aside what an
 * earlier run left, and check it takes files. Every path is opened as
 * fs-safe.h says.
 * @return NULL with *err set to an errno and *what to a static text; or
 *         with *err 0 and *what the whole message, when a directory or
 *         file was refused as not safe.
 */
struct fpd_output *
fpd_output_new(const struct fpd_output_config *config, int *err,
	       const char **what);

/** Finishes the open file; NULL is a no-op. */
void
fpd_output_destroy(struct fpd_output *out);

/**
 * The stream the writer writes samples (and comments) to, opening a new
 * file when none is open. Writes go to the current segment in memory.
 * @return NULL when no file can be created (counted, logged, retried).
 */
FILE *
fpd_output_stream(struct fpd_output *out, uint64_t now_epoch_us);

/** Count one sample just written to the stream. */
void
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

bool
fpd_output_is_open(const struct fpd_output *out);

const char *
fpd_output_dir(const struct fpd_output *out);

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

void
fpd_output_totals(const struct fpd_output *out, struct fpd_output_totals *t);

/* retention.c */
struct fpd_file_entry {
	char name[FP_PERF_NAME_MAX];
	uint64_t first_us, last_us;
	uint64_t samples, bytes, skipped, dropped, events;
	bool recovered;
	bool future_told;		/* its date in the future was reported */
	struct fpd_made made;		/* device and inode written; ino 0:
					 * unknown, never deleted */
};

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

/**
 * Rewrite the index and manifest.json atomically from @entries, keeping
 * only the files that still exist (as the file recorded, when its device
 * and inode are); both are created with @mode, never through a link.
 */
int
fpd_index_store(int dirfd, const struct fpd_trust *trust,
		struct fpd_file_entry *entries, size_t *n, const char *node,
		const char *otp_release, const char *options_json, mode_t mode);

/* recover.c */
/**
 * Move @from to the finished name @name in @dirfd, or if that is taken to
 * the next free millisecond's name: never over a file that is there.
 * @name (of @size bytes) gets the name used.
 * @return 0, or a negative errno (-EEXIST when 1000 names in a row are
 *         taken, -EINVAL when @name is not a finished name).
 */
int
fpd_rename_free(int dirfd, const char *from, char *name, size_t size);

/**
 * What an earlier run left in the node directory @dirfd (at the path
 * @dir) of @node_s: partial files are recovered (or set aside), and
 * finished files the index does not list (a run killed between the rename
 * and the index update) are counted and added to the index @entries of
 * *@n entries. Only regular files with one link, owned by root or
 * @trust's user, are touched or listed; a finished name dated in the
 * future is reported and not listed. Entries of an older index without
 * a device and inode get those of such a file. *@unfinished counts the
 * files that must stay as they are.
 * @return whether the index changed.
 */
bool
fpd_recover(int dirfd, const char *dir, const char *node_s,
	    const struct fpd_trust *trust, struct fpd_file_entry **entries,
	    size_t *n, unsigned *unfinished);

/* budget.c */
struct fpd_budget {
	double max_pct;		/* 0: no budget */
	double rate_req, rate;	/* requested and effective samples/s */
	unsigned top_req, top;	/* requested and effective top-N */
	double min_rate;
	bool top_pending;	/* top changed; no selection has used it yet */
};

void
fpd_budget_init(struct fpd_budget *b, double max_pct, double rate,
		unsigned top);

/**
 * Take the measured cost (percent of the node's schedulers) and adjust the
 * effective rate or top-N one step. Returns true, with @what saying what
 * changed and why, when something did. A change of top-N waits for
 * fpd_budget_top_applied() before the next one: until a selection has
 * used it, the cost still shows the old set.
 */
bool
fpd_budget_update(struct fpd_budget *b, double cost_pct, char *what,
		  size_t size);

/** A selection has ranked with the effective top-N. */
void
fpd_budget_top_applied(struct fpd_budget *b);

struct fpd_breaker {
	bool open;		/* no requests but the probe */
	bool probing;		/* the probe is in flight */
	uint64_t open_until_us;	/* when to probe */
	uint64_t cooldown_us;	/* current pause; doubles while in trouble */
	uint64_t closed_at_us;
	unsigned trips;
};

void
fpd_breaker_trip(struct fpd_breaker *br, uint64_t now_us);

void
fpd_breaker_close(struct fpd_breaker *br, uint64_t now_us);

void
fpd_breaker_calm(struct fpd_breaker *br, uint64_t now_us, uint64_t calm_us);

/* run.c: one run of the daemon; its exit code (enum fpd_exit) */
int
fpd_run(const struct fpd_options *opts, const char *cookie);
