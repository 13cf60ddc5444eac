/*
 * flame_profd — daemon logging: stderr or --log-file, level checked
 * before formatting, and libsample's messages routed through here.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

#include "flame_profd.h"

static FILE *log_stream;
static char *log_path;
static enum fp_log_priority log_threshold = FP_LOG_INFO;

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
vlog(enum fp_log_priority priority, const char *format, va_list args)
{
	FILE *f = log_stream ? log_stream : stderr;
	char stamp[40];
	struct timespec ts;
	struct tm tm;

	if (priority < log_threshold)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, "%s.%03ldZ flame_profd %s: ", stamp, ts.tv_nsec / 1000000,
		priority_name(priority));
	vfprintf(f, format, args);
	fputc('\n', f);
	fflush(f);
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
	if (log_stream)
		fclose(log_stream);
	log_stream = NULL;
	free(log_path);
	log_path = NULL;
}
