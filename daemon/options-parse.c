/*
 * flame_profd — the parsers of the command line's values: each checks
 * its option's argument and stores it in struct fpd_options.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "options-parse.h"
#include "util-mem.h"
#include "fp/node.h"

#define TOP_MAX 100000
#define EVERY_MIN_US 100000u		/* 100ms */
#define RATE_MIN 0.1
#define RATE_MAX 1000.0
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
#define PERF_PID_MAX 4194304		/* the kernel's largest pid_max */
#define PERF_FREQ_MAX 10000
#define PORT_MAX 65535
#define KEY_NAME_MAX 100		/* bytes of a --key or --logger-key */
#define NODE_NAME_MAX 256		/* of a pid's node, '<app@host.C.N.S>' */

int
fpd_option_bad_value(const char *flag, const char *value, const char *why)
{
	fprintf(stderr, "flame_profd: error: %s '%s': %s (see --help)\n",
		flag, value, why);
	return FPD_EXIT_USAGE;
}

static int
parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A key is written key.NAME on the event line: nothing in NAME may end
 * the field, and the dictionary's own keys have options of their own. */
static bool
key_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > KEY_NAME_MAX || strcmp(name, "$process_label") == 0 ||
	    strcmp(name, "$callers") == 0 || strcmp(name, "$logger_metadata$") == 0)
		return false;
	for (const char *p = name; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_@.$-", *p)))
			return false;
	}
	return true;
}

static void
append(const char ***v, size_t *n, const char *arg)
{
	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = arg;
}

/* ---- target ------------------------------------------------------------- */

int
fpd_option_node(struct fpd_options *o, const char *arg)
{
	o->node = arg;
	return 0;
}

int
fpd_option_cookie_file(struct fpd_options *o, const char *arg)
{
	o->cookie_file = arg;
	o->cookie_file_set = true;
	return 0;
}

int
fpd_option_timeout(struct fpd_options *o, const char *arg)
{
	if (fpd_parse_duration(arg, &o->timeout_us) < 0 ||
	    o->timeout_us < TIMEOUT_MIN_US || o->timeout_us > TIMEOUT_MAX_US)
		return fpd_option_bad_value("--timeout", arg,
				 "expected a duration from 10ms to 10m");
	return 0;
}

int
fpd_option_connect(struct fpd_options *o, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	unsigned long port;

	if (!colon || colon == arg || parse_uint(colon + 1, PORT_MAX, &port) < 0 ||
	    port == 0)
		return fpd_option_bad_value("--connect", arg,
				 "expected HOST:PORT, e.g. 127.0.0.1:4370");
	free(o->connect_host);
	o->connect_host = xzalloc((size_t)(colon - arg) + 1);
	memcpy(o->connect_host, arg, (size_t)(colon - arg));
	o->connect_port = (unsigned)port;
	return 0;
}

/* ---- selection ---------------------------------------------------------- */

int
fpd_option_top(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (parse_uint(arg, TOP_MAX, &v) < 0)
		return fpd_option_bad_value("--top", arg,
				 "expected a whole number from 0 to 100000");
	o->top = (unsigned)v;
	o->top_set = true;
	return 0;
}

int
fpd_option_every(struct fpd_options *o, const char *arg)
{
	if (fpd_parse_duration(arg, &o->every_us) < 0 ||
	    o->every_us < EVERY_MIN_US)
		return fpd_option_bad_value("--every", arg,
				 "expected a duration of at least 100ms, e.g. 5s");
	return 0;
}

int
fpd_option_pid(struct fpd_options *o, const char *arg)
{
	struct fp_pid pid;
	char node[NODE_NAME_MAX];
	uint32_t creation;

	if (fp_pid_parse_full(arg, &pid, node, sizeof(node), &creation) < 0)
		return fpd_option_bad_value("--pid", arg,
				 "expected a pid like '<0.123.0>', 0.123.0 or '<app@host.Creation.123.0>'");
	append(&o->pids, &o->npids, arg);
	return 0;
}

int
fpd_option_name(struct fpd_options *o, const char *arg)
{
	char cand[2][FP_NAME_MAX];

	if (fp_name_candidates(arg, cand) < 0)
		return fpd_option_bad_value("--name", arg,
				 "expected a registered name (1 to 255 bytes), an Elixir alias or :atom");
	append(&o->names, &o->nnames, arg);
	return 0;
}

int
fpd_option_scan_max(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (parse_uint(arg, SCAN_MAX_MAX, &v) < 0 || v < SCAN_MAX_MIN)
		return fpd_option_bad_value("--scan-max", arg,
				 "expected a whole number from 100 to 10000000");
	o->scan_max = (unsigned)v;
	return 0;
}

int
fpd_option_min_reductions(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (parse_uint(arg, MIN_REDUCTIONS_MAX, &v) < 0)
		return fpd_option_bad_value("--min-reductions", arg,
				 "expected reductions a second, a whole number from 0 to 1000000000");
	o->min_reductions = (unsigned)v;
	return 0;
}

/* ---- sampling ----------------------------------------------------------- */

int
fpd_option_rate(struct fpd_options *o, const char *arg)
{
	char *end;

	errno = 0;
	o->rate = strtod(arg, &end);
	if (errno || *end || end == arg || !isfinite(o->rate) ||
	    o->rate < RATE_MIN || o->rate > RATE_MAX)
		return fpd_option_bad_value("--rate", arg,
				 "expected samples per second from 0.1 to 1000");
	return 0;
}

int
fpd_option_backtrace_depth(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (parse_uint(arg, BACKTRACE_DEPTH_MAX, &v) < 0 || v < 1)
		return fpd_option_bad_value("--backtrace-depth", arg,
				 "expected a whole number from 1 to 10000");
	o->backtrace_depth = (unsigned)v;
	return 0;
}

int
fpd_option_lines(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->lines = true;
	return 0;
}

int
fpd_option_erlang_names(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->erlang_names = true;
	return 0;
}

static int
add_key(struct fpd_options *o, const char *arg, bool logger)
{
	const char *flag = logger ? "--logger-key" : "--key";

	if (!key_name_ok(arg))
		return fpd_option_bad_value(flag, arg,
				 "a key is an atom's name of at most 100 bytes of [A-Za-z0-9_@.$-], not $process_label, $callers or $logger_metadata$ (the label, --callers and --logger-key read those)");
	for (size_t i = 0; i < o->nkeys; i++) {
		if (strcmp(o->keys[i], arg) == 0)
			return fpd_option_bad_value(flag, arg, "given twice (keys are written key.NAME whichever kind)");
	}
	for (size_t i = 0; i < o->nlogger_keys; i++) {
		if (strcmp(o->logger_keys[i], arg) == 0)
			return fpd_option_bad_value(flag, arg, "given twice (keys are written key.NAME whichever kind)");
	}
	if (logger)
		append(&o->logger_keys, &o->nlogger_keys, arg);
	else
		append(&o->keys, &o->nkeys, arg);
	return 0;
}

int
fpd_option_key(struct fpd_options *o, const char *arg)
{
	return add_key(o, arg, false);
}

int
fpd_option_logger_key(struct fpd_options *o, const char *arg)
{
	return add_key(o, arg, true);
}

int
fpd_option_callers(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->callers = true;
	return 0;
}

int
fpd_option_max_overhead(struct fpd_options *o, const char *arg)
{
	char *end;

	errno = 0;
	o->max_overhead = strtod(arg, &end);
	if (errno || end == arg || (*end && strcmp(end, "%") != 0) ||
	    !isfinite(o->max_overhead) || o->max_overhead < 0 ||
	    o->max_overhead > 100)
		return fpd_option_bad_value("--max-overhead", arg,
				 "expected a percentage from 0 (no budget) to 100");
	return 0;
}

int
fpd_option_request(struct fpd_options *o, const char *arg)
{
	if (strcmp(arg, "rex") == 0)
		o->request = FP_REQUEST_REX;
	else if (strcmp(arg, "eval") == 0)
		o->request = FP_REQUEST_EVAL;
	else if (strcmp(arg, "helper") == 0)
		o->request = FP_REQUEST_HELPER;
	else
		return fpd_option_bad_value("--request", arg, "expected rex, eval or helper");
	return 0;
}

int
fpd_option_no_idle_reuse(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->idle_reuse = false;
	return 0;
}

int
fpd_option_breaker_run_queue(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (parse_uint(arg, RUN_QUEUE_MAX, &v) < 0 || v < 1)
		return fpd_option_bad_value("--breaker-run-queue", arg,
				 "expected a whole number of at least 1");
	o->breaker_run_queue = (unsigned)v;
	return 0;
}

int
fpd_option_perf(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (strcmp(arg, "auto") == 0) {
		o->perf_auto = true;
		o->perf_pid = 0;
		return 0;
	}
	if (parse_uint(arg, PERF_PID_MAX, &v) < 0 || v < 1)
		return fpd_option_bad_value("--perf", arg,
				 "expected the node's OS process id, or auto");
	o->perf_pid = (pid_t)v;
	o->perf_auto = false;
	return 0;
}

int
fpd_option_perf_freq(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (parse_uint(arg, PERF_FREQ_MAX, &v) < 0 || v < 1)
		return fpd_option_bad_value("--perf-freq", arg,
				 "expected 1 to 10000 samples a second");
	o->perf_freq = (unsigned)v;
	return 0;
}

/* ---- output ------------------------------------------------------------- */

int
fpd_option_out(struct fpd_options *o, const char *arg)
{
	if (!*arg)
		return fpd_option_bad_value("--out", arg, "expected a directory");
	o->out_dir = arg;
	return 0;
}

int
fpd_option_rotate(struct fpd_options *o, const char *arg)
{
	if (fpd_parse_duration(arg, &o->rotate_us) < 0 ||
	    o->rotate_us < ROTATE_MIN_US)
		return fpd_option_bad_value("--rotate", arg,
				 "expected a duration of at least 1s, e.g. 2m");
	return 0;
}

int
fpd_option_rotate_size(struct fpd_options *o, const char *arg)
{
	if (fpd_parse_size(arg, &o->rotate_bytes) < 0 ||
	    o->rotate_bytes < ROTATE_SIZE_MIN)
		return fpd_option_bad_value("--rotate-size", arg,
				 "expected a size of at least 4K, e.g. 64M");
	return 0;
}

int
fpd_option_compress(struct fpd_options *o, const char *arg)
{
	if (strcmp(arg, "zstd") == 0)
		o->compress = FPD_COMPRESS_ZSTD;
	else if (strcmp(arg, "gzip") == 0)
		o->compress = FPD_COMPRESS_GZIP;
	else if (strcmp(arg, "none") == 0)
		o->compress = FPD_COMPRESS_NONE;
	else
		return fpd_option_bad_value("--compress", arg, "expected zstd, gzip or none");
	return 0;
}

int
fpd_option_compress_level(struct fpd_options *o, const char *arg)
{
	char *end;
	long level;

	errno = 0;
	level = strtol(arg, &end, 10);
	if (errno || *end || end == arg || level < 1 || level > ZSTD_LEVEL_MAX)
		return fpd_option_bad_value("--compress-level", arg,
				 "expected 1 to 19 (zstd) or 1 to 9 (gzip)");
	o->compress_level = (int)level;
	return 0;
}

int
fpd_option_keep_files(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (parse_uint(arg, KEEP_FILES_MAX, &v) < 0 || v < 1)
		return fpd_option_bad_value("--keep-files", arg,
				 "expected a whole number of at least 1");
	o->keep_files = (unsigned)v;
	return 0;
}

int
fpd_option_keep_bytes(struct fpd_options *o, const char *arg)
{
	if (fpd_parse_size(arg, &o->keep_bytes) < 0 || o->keep_bytes == 0)
		return fpd_option_bad_value("--keep-bytes", arg,
				 "expected a size greater than 0, e.g. 1G");
	return 0;
}

int
fpd_option_keep_age(struct fpd_options *o, const char *arg)
{
	if (fpd_parse_duration(arg, &o->keep_age_us) < 0 || o->keep_age_us == 0)
		return fpd_option_bad_value("--keep-age", arg,
				 "expected a duration greater than 0, e.g. 7d");
	return 0;
}

int
fpd_option_duration(struct fpd_options *o, const char *arg)
{
	if (fpd_parse_duration(arg, &o->duration_us) < 0 || o->duration_us == 0)
		return fpd_option_bad_value("--duration", arg,
				 "expected a duration greater than 0, e.g. 30s");
	return 0;
}

/* An octal mode with all of @need (of the owner's bits) set. */
static int
parse_mode(const char *flag, const char *arg, mode_t need, const char *why,
	   mode_t *mode)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 8);
	if (errno || *end || end == arg || v > 0777 || (v & need) != need)
		return fpd_option_bad_value(flag, arg, why);
	*mode = (mode_t)v;
	return 0;
}

int
fpd_option_file_mode(struct fpd_options *o, const char *arg)
{
	return parse_mode("--file-mode", arg, 0200,
			  "expected an octal mode the owner can write, e.g. 0640",
			  &o->file_mode);
}

int
fpd_option_dir_mode(struct fpd_options *o, const char *arg)
{
	int rc = parse_mode("--dir-mode", arg, 0700,
			    "expected an octal mode giving the owner rwx, e.g. 0750",
			    &o->dir_mode);

	/* a directory others can write is one the daemon would refuse to
	 * use again (fs-safe.h) */
	if (rc == 0 && (o->dir_mode & (S_IWGRP | S_IWOTH)))
		rc = fpd_option_bad_value("--dir-mode", arg,
					  "neither the group nor others may write to "
					  "the output directories, e.g. 0750");
	return rc;
}

int
fpd_option_user(struct fpd_options *o, const char *arg)
{
	struct passwd *pw = getpwnam(arg);

	if (!pw)
		return fpd_option_bad_value("--user", arg, "no such user");
	if (geteuid() != 0)
		return fpd_option_bad_value("--user", arg,
				 "dropping privileges needs flame_profd to start as root");
	o->user = arg;
	o->uid = pw->pw_uid;
	o->gid = pw->pw_gid;
	return 0;
}

int
fpd_option_log_file(struct fpd_options *o, const char *arg)
{
	o->log_file = arg;
	return 0;
}

int
fpd_option_verbose(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->verbosity++;
	return 0;
}

int
fpd_option_quiet(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->verbosity--;
	return 0;
}

