/*
 * flame_profd — the parsers of the command line's values (options-parse.c),
 * for the table of options (options.c).
 */
#pragma once

#include "options.h"

#define ZSTD_LEVEL_MAX 19
#define GZIP_LEVEL_MAX 9
#define ZSTD_LEVEL_DEFAULT 3
#define GZIP_LEVEL_DEFAULT 6

#define TOP_MAX 100000
#define EVERY_MIN_US 100000u		/* 100ms */
#define SWEEP_EVERY_MIN_US 1000000u	/* 1s */
#define ROTATE_MIN_US 1000000u		/* 1s */
#define TIMEOUT_MIN_US 10000u		/* 10ms */
#define TIMEOUT_MAX_US 600000000u	/* 10m */
#define BACKTRACE_DEPTH_MAX 10000
#define SCAN_MAX_MIN 100
#define SCAN_MAX_MAX 10000000
#define MIN_REDUCTIONS_MAX 1000000000
#define ROTATE_SIZE_MIN 4096
#define KEEP_FILES_MAX 10000000
#define RUN_QUEUE_MAX 100000000
#define PERF_FREQ_MAX 10000
#define FLIGHT_MIN_US 1000000u		/* --flight-recorder at least 1s */
#define FLIGHT_MAX_DEFAULT (64u << 20)	/* --flight-recorder-max */
#define AFTER_DEFAULT_US 5000000u	/* --after */
#define HOLDOFF_DEFAULT_US 60000000u	/* --trigger-holdoff */
#define KEEP_CAPTURES_DEFAULT 20
#define PUSH_SPOOL_MAX_DEFAULT (64u << 20)	/* --push-spool-max */
#define PUSH_TIMEOUT_DEFAULT_US 10000000u	/* --push-timeout */

/** Say on stderr that @flag's @value is bad and why; FPD_EXIT_USAGE. */
int
fpd_option_bad_value(const char *flag, const char *value, const char *why);

/* What an option of the table stores, where it has no parser of its own. */
enum fpd_value_kind {
	FPD_VALUE_NONE = 0,	/* the option's parser stores it */
	FPD_VALUE_STRING,	/* the argument, a const char * at field */
	FPD_VALUE_TRUE,		/* the bool at field becomes true */
	FPD_VALUE_FALSE,	/* ... false */
	FPD_VALUE_UINT,		/* an unsigned at field, from min to max */
	FPD_VALUE_DURATION,	/* a uint64_t of µs at field, from min to max */
	FPD_VALUE_SIZE,		/* a uint64_t of bytes at field, from min to max */
	FPD_VALUE_CHOICE,	/* the int at field: the argument's index in names */
};

struct fpd_value {
	enum fpd_value_kind kind;
	size_t field;			/* offset in struct fpd_options */
	uint64_t min, max;
	const char *const *names;	/* CHOICE: NULL-terminated, in enum order */
	const char *why;		/* what a bad argument is told */
};

/**
 * Store --@name's argument @arg (NULL for a flag) in @o as @v says.
 * Returns 0, or FPD_EXIT_USAGE with "--NAME 'ARG': WHY" on stderr.
 */
int
fpd_option_value(struct fpd_options *o, const char *name,
		 const struct fpd_value *v, const char *arg);

/* The options whose argument needs more than a row's fpd_value: each
 * takes it (NULL for a flag) into @o, 0 or an exit code with the reason
 * on stderr. */
#define FPD_OPTION_PARSER(name) \
	int fpd_option_##name(struct fpd_options *o, const char *arg)

FPD_OPTION_PARSER(node);
FPD_OPTION_PARSER(discover);
FPD_OPTION_PARSER(discover_match);
FPD_OPTION_PARSER(cluster);
FPD_OPTION_PARSER(push);		/* http:// or https:// */
FPD_OPTION_PARSER(push_service);	/* letters, digits, '_', '-' */
FPD_OPTION_PARSER(push_format);	/* pyroscope or otlp */
FPD_OPTION_PARSER(cookie_file);
FPD_OPTION_PARSER(connect);
FPD_OPTION_PARSER(top);
FPD_OPTION_PARSER(pid);
FPD_OPTION_PARSER(name);
FPD_OPTION_PARSER(trace);
FPD_OPTION_PARSER(trace_server);
FPD_OPTION_PARSER(rate);
FPD_OPTION_PARSER(key);
FPD_OPTION_PARSER(logger_key);
FPD_OPTION_PARSER(max_overhead);
FPD_OPTION_PARSER(request);
FPD_OPTION_PARSER(perf);
FPD_OPTION_PARSER(out);
FPD_OPTION_PARSER(compress_level);
FPD_OPTION_PARSER(file_mode);
FPD_OPTION_PARSER(dir_mode);
FPD_OPTION_PARSER(user);
FPD_OPTION_PARSER(verbose);
FPD_OPTION_PARSER(quiet);
FPD_OPTION_PARSER(trigger);
FPD_OPTION_PARSER(burst_rate);

/**
 * Once every option is read: the node names checked (each once), and
 * what several nodes (fpd_options_fleet()) cannot mean refused; a run of
 * one --node NAME@HOST=PATH takes PATH as its --cookie-file.
 * @return 0, or FPD_EXIT_USAGE with the reason on stderr.
 */
int
fpd_options_check_fleet(struct fpd_options *o);

/** --trace-call MOD:FUN[/ARITY]: @return 0, or FPD_EXIT_USAGE with the
 * reason on stderr. */
int
fpd_option_trace_call(struct fpd_options *o, const char *arg);
