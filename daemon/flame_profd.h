/*
 * flame_profd — declarations shared by the daemon's files.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fp/log.h"
#include "fp/term.h"

/* Exit codes (sysexits.h values; listed in --help and flame_profd(1)). */
enum fpd_exit {
	FPD_EXIT_OK = 0,
	FPD_EXIT_USAGE = 64,		/* bad flag, value or node name */
	FPD_EXIT_NOINPUT = 66,		/* cookie file missing or unreadable */
	FPD_EXIT_UNAVAILABLE = 69,	/* node unreachable */
	FPD_EXIT_SOFTWARE = 70,		/* internal error, node answered nonsense */
	FPD_EXIT_CANTCREAT = 73,	/* output directory not writable */
	FPD_EXIT_IOERR = 74,		/* write error on output */
	FPD_EXIT_NOPERM = 77,		/* node refused us: wrong cookie */
};

struct fpd_options {
	const char *node;
	const char *cookie_file;
	bool cookie_file_set;
	unsigned top;
	bool top_set;
	unsigned scan_max;
	uint64_t every_us;
	double rate;
	struct fp_pid *pids;
	size_t npids;
	const char **names;
	size_t nnames;
	const char *out_dir;
	uint64_t rotate_us;
	uint64_t duration_us;	/* 0: until stopped */
	bool lines;
	unsigned backtrace_depth;
	uint64_t timeout_us;
	const char *log_file;
	int verbosity;		/* 0 info, >0 debug, <0 warnings only */
};

/* log.c */
int
fpd_log_open(const char *path, int verbosity);

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

void
fpd_format_duration(uint64_t us, char *buf, size_t size);

uint64_t
fpd_now_mono_us(void);

/* Wall-clock microseconds that never go backwards within a run. */
uint64_t
fpd_now_epoch_us(void);

void
fpd_format_utc(uint64_t epoch_us, char *buf, size_t size, bool compact);

/* output.c */
struct fpd_output;

/**
 * Create (mkdir -p) DIR/<node>/ and check it takes files.
 * @return NULL with *err set to an errno on failure.
 */
struct fpd_output *
fpd_output_new(const char *dir, const char *node, const char *header,
	       int *err);

void
fpd_output_destroy(struct fpd_output *out);

/** The stream to write to, opening a new file when none is open. */
FILE *
fpd_output_stream(struct fpd_output *out, uint64_t now_epoch_us);

/** Finish the current file (flush, fsync, rename, fsync dir). */
int
fpd_output_finish(struct fpd_output *out);

bool
fpd_output_is_open(const struct fpd_output *out);

uint64_t
fpd_output_opened_mono_us(const struct fpd_output *out);

const char *
fpd_output_dir(const struct fpd_output *out);

/* loop.c */
int
fpd_run(const struct fpd_options *opts, const char *cookie);
