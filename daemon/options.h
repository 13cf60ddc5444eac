/*
 * flame_profd — the command line: one table gives each option's name,
 * argument, parser and --help lines (options.c).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "fp/node.h"
#include "trigger.h"

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
	FPD_EXIT_CONFIG = 78,		/* --perf auto: the node's process not usable;
					 * a --trigger the node cannot serve */
};

struct fpd_push;

/* What the command line says (fpd_options_parse()). */
struct fpd_options {
	const char *node;	/* the first --node (the only one of a run of one) */
	char **nodes;		/* every --node, NAME@HOST */
	char **node_cookie_files;	/* ... each one's own cookie file
					 * (--node NAME@HOST=PATH), or NULL */
	size_t nnodes;
	const char *discover;	/* --discover HOST, or NULL */
	const char *discover_match;	/* --discover-match GLOB, or NULL */
	const char *cluster;	/* --cluster NODE: one of nodes[], or NULL */
	const char *cookie_file;
	bool cookie_file_set;
	unsigned top;
	bool top_set;
	unsigned scan_max;
	unsigned min_reductions;	/* --top's floor, reductions/s */
	uint64_t every_us;
	uint64_t sweep_every_us;	/* sweep a big node again this often */
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
	uint64_t flight_us;	/* --flight-recorder: the window; 0: off */
	uint64_t flight_max;	/* --flight-recorder-max, bytes */
	uint64_t after_us;	/* --after */
	uint64_t holdoff_us;	/* --trigger-holdoff */
	unsigned keep_captures;	/* --keep-captures */
	unsigned max_captures_per_hour;	/* --max-captures-per-hour */
	double burst_rate;	/* --burst-rate: a capture's after-window; 0: off */
	unsigned burst_top;	/* --burst-top; 0: off */
	bool continuous;	/* --continuous: files as well as the ring */
	struct fpd_trigger triggers[FPD_TRIGGERS_MAX];
	size_t ntriggers;
	const char *push_url;		/* --push URL, or NULL */
	const char *push_header_file;	/* --push-header-file, or NULL */
	const char *push_service;	/* --push-service, or NULL */
	bool push_otlp;			/* --push-format otlp */
	bool push_format_given;		/* --push-format at all */
	uint64_t push_spool_max;	/* --push-spool-max, bytes per node */
	uint64_t push_timeout_us;	/* --push-timeout */
	struct fpd_push *push;		/* the run's pusher (made by main
					 * from the above), or NULL */
	const char **traces;	/* --trace PID|NAME, as given */
	size_t ntraces;
	bool trace_follow;	/* --trace-follow */
	const char **trace_servers;	/* --trace-server PID|NAME */
	size_t ntrace_servers;
	uint64_t trace_for_us;	/* --trace-for */
	unsigned trace_max_events;	/* --trace-max-events */
	unsigned trace_max_rate;	/* --trace-max-rate, events/s */
	const char *trace_call;		/* --trace-call MOD:FUN[/ARITY], as given */
	char trace_call_module[256];	/* ... parsed */
	char trace_call_function[256];
	int trace_call_arity;		/* -1: every arity */
	unsigned trace_calls;		/* --trace-calls */
	uid_t uid;
	gid_t gid;
};


/**
 * Fill @o from the command line. --help and --version print and exit 0.
 * @return 0, or FPD_EXIT_USAGE with the reason on stderr. @o holds
 *         allocations either way: fpd_options_release().
 */
int
fpd_options_parse(int argc, char **argv, struct fpd_options *o);

/** Whether the run profiles several nodes (more than one --node,
 * --discover or --cluster): each in a session of its own (fleet.c). */
static inline bool
fpd_options_fleet(const struct fpd_options *o)
{
	return o->nnodes > 1 || o->discover || o->cluster;
}

/** Free what fpd_options_parse() allocated in @o. */
void
fpd_options_release(struct fpd_options *o);

/** The --help text, generated from the table. */
void
fpd_options_usage(FILE *f);
