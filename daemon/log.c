/*
 * flame_profd — daemon logging: stderr or --log-file, level checked
 * before formatting, and libsample's messages routed through here.
 *
 * Warnings are rate-limited by kind, a kind being the call site's format
 * string: a node that fails every request (a misnamed --name, a node
 * that answers badrpc) would otherwise write a line per request. Errors
 * and everything below warnings pass: errors are few and end the run,
 * info and debug lines are periodic or asked for with -v.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

#include "flame_profd.h"

#define LIMIT_US 10000000u	/* one warning per kind per 10 s */
#define LIMIT_KINDS 64

static FILE *log_stream;
static char *log_path;
static enum fp_log_priority log_threshold = FP_LOG_INFO;

/* A kind of warning: when one was last printed, how many were withheld
 * since. */
static struct limit {
	const char *kind;
	uint64_t shown_us;
	uint64_t suppressed;
} limits[LIMIT_KINDS];

static const char *
priority_name(enum fp_log_priority p)
{
	switch (p) {
	case FP_LOG_DEBUG: return "debug";
	case FP_LOG_INFO: return "info";
	case FP_LOG_WARNING: return "warning";
	case FP_LOG_ERROR: return "error";
	}
	return "?";
}

static void
print_line(enum fp_log_priority priority, const char *format, va_list args,
	   uint64_t suppressed)
	__attribute__((format(printf, 2, 0)));

static void
print_line(enum fp_log_priority priority, const char *format, va_list args,
	   uint64_t suppressed)
{
	FILE *f = log_stream ? log_stream : stderr;
	char stamp[40];
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, "%s.%03ldZ flame_profd %s: ", stamp, ts.tv_nsec / 1000000,
		priority_name(priority));
	vfprintf(f, format, args);
	if (suppressed)
		fprintf(f, " (and %llu more like this since the last one shown)",
			(unsigned long long)suppressed);
	fputc('\n', f);
	fflush(f);
}

static void
print_plain(enum fp_log_priority priority, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static void
print_plain(enum fp_log_priority priority, const char *format, ...)
{
	va_list args;

	va_start(args, format);
	print_line(priority, format, args, 0);
	va_end(args);
}

/* The count of a kind no later line will carry. */
static void
print_summary(const struct limit *l)
{
	if (FP_LOG_WARNING >= log_threshold)
		print_plain(FP_LOG_WARNING, "%llu more warnings were not shown, like: %s",
			    (unsigned long long)l->suppressed, l->kind);
}

/*
 * Whether a warning of @kind at @now_us is printed: the first of its
 * kind, then one per LIMIT_US after the last one printed. *suppressed is
 * what was withheld in between, for the line printed. A kind new when
 * every slot is taken takes the one printed longest ago, whose count is
 * summed up first.
 */
static bool
limit_pass(const char *kind, uint64_t now_us, uint64_t *suppressed)
{
	struct limit *l = NULL, *oldest = &limits[0];

	for (size_t i = 0; i < LIMIT_KINDS; i++) {
		if (limits[i].kind == kind) {
			l = &limits[i];
			break;
		}
		if (!limits[i].kind || (oldest->kind &&
					limits[i].shown_us < oldest->shown_us))
			oldest = &limits[i];
	}
	if (!l) {
		if (oldest->kind && oldest->suppressed) {
			struct limit gone = *oldest;

			oldest->kind = NULL;
			print_summary(&gone);
		}
		*oldest = (struct limit){ .kind = kind, .shown_us = now_us };
		*suppressed = 0;
		return true;
	}
	if (now_us - l->shown_us < LIMIT_US) {
		l->suppressed++;
		return false;
	}
	*suppressed = l->suppressed;
	l->shown_us = now_us;
	l->suppressed = 0;
	return true;
}

static void
vlog_at(enum fp_log_priority priority, const char *format, va_list args,
	uint64_t now_us)
{
	uint64_t suppressed = 0;

	if (priority < log_threshold)
		return;
	if (priority == FP_LOG_WARNING &&
	    !limit_pass(format, now_us, &suppressed))
		return;
	print_line(priority, format, args, suppressed);
}

static void
vlog(enum fp_log_priority priority, const char *format, va_list args)
{
	vlog_at(priority, format, args, fpd_now_mono_us());
}

static void
library_handler(enum fp_log_priority priority, const char *format,
		va_list args)
{
	vlog(priority, format, args);
}

void
fpd_log(enum fp_log_priority priority, const char *format, ...)
{
	va_list args;

	if (priority < log_threshold)
		return;
	va_start(args, format);
	vlog(priority, format, args);
	va_end(args);
}

int
fpd_log_open(const char *path, int verbosity)
{
	log_threshold = verbosity > 0 ? FP_LOG_DEBUG :
			verbosity < 0 ? FP_LOG_WARNING : FP_LOG_INFO;
	fp_log_set_handler(library_handler, log_threshold);
	if (!path)
		return 0;
	log_path = strdup(path);
	log_stream = fopen(path, "ae");
	if (!log_stream)
		return -errno;
	return 0;
}

int
fpd_log_reopen(void)
{
	FILE *f;

	if (!log_path)
		return 0;
	f = fopen(log_path, "ae");
	if (!f)
		return -errno;
	if (log_stream)
		fclose(log_stream);
	log_stream = f;
	return 0;
}

void
fpd_log_close(void)
{
	/* what the last lines of each kind did not show */
	for (size_t i = 0; i < LIMIT_KINDS; i++) {
		if (limits[i].kind && limits[i].suppressed) {
			struct limit gone = limits[i];

			limits[i].kind = NULL;
			print_summary(&gone);
		}
	}
	if (log_stream)
		fclose(log_stream);
	log_stream = NULL;
	free(log_path);
	log_path = NULL;
}
