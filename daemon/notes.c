/*
 * flame_profd — file header, options JSON, enum names.
 */
#include "config.h"

#include <stdarg.h>
#include <stdlib.h>

#include "notes.h"
#include "options.h"
#include "util.h"
#include "util-mem.h"

static char *
xasprintf(const char *format, ...) __attribute__((format(printf, 1, 2)));

static char *
xasprintf(const char *format, ...)
{
	va_list args;
	char *s;
	int len;

	va_start(args, format);
	len = vasprintf(&s, format, args);
	va_end(args);
	if (len < 0)
		x_out_of_memory(strlen(format));
	return s;
}

const char *
fpd_request_name(enum fp_request_path path)
{
	static const char *const names[] = {
		[FP_REQUEST_REX] = "rex",
		[FP_REQUEST_EVAL] = "eval",
		[FP_REQUEST_HELPER] = "helper",
	};

	return names[path];
}

const char *
fpd_label_source_name(enum fp_label_source source)
{
	return source == FP_LABEL_ITEM ? "item" :
	       source == FP_LABEL_DICT ? "dictionary" : "no";
}

/* ",a,b" after @prefix, appended to @s (which it frees). */
static char *
append_list(char *s, const char *prefix, const char *const *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *t = xasprintf("%s%s%s", s, i ? "," : prefix, items[i]);

		free(s);
		s = t;
	}
	return s;
}

/* " keys=a,b logger_keys=c callers=yes", only for what was asked, so
 * that files of runs without keys read as before. */
static char *
header_keys(const struct fpd_options *o)
{
	char *s = xstrdup("");

	s = append_list(s, " keys=", o->keys, o->nkeys);
	s = append_list(s, " logger_keys=", o->logger_keys, o->nlogger_keys);
	if (o->callers) {
		char *t = xasprintf("%s callers=yes", s);

		free(s);
		s = t;
	}
	return s;
}

char *
fpd_file_header(const struct fpd_options *o)
{
	char *keys = header_keys(o);
	char every[32], rotate[32], stamp[40], *h;

	fpd_format_duration(o->every_us, every, sizeof(every));
	fpd_format_duration(o->rotate_us, rotate, sizeof(rotate));
	fpd_format_utc(fpd_now_epoch_us(), stamp, sizeof(stamp));
	h = xasprintf("# flame_profd %s perf-script (docs/FORMAT.md)\n"
		      "# node: %s\n"
		      "# daemon_started: %s\n"
		      "# options: top=%u every=%s rate=%g pids=%zu names=%zu rotate=%s backtrace_depth=%u lines=%s request=%s idle_reuse=%s frame_names=%s%s\n",
		      FP_VERSION, o->node, stamp, o->top, every, o->rate,
		      o->npids, o->nnames, rotate, o->backtrace_depth,
		      o->lines ? "yes" : "no", fpd_request_name(o->request),
		      o->idle_reuse ? "yes" : "no",
		      o->erlang_names ? "erlang" : "elixir", keys);
	free(keys);
	return h;
}

char *
fpd_options_json(const struct fpd_options *o)
{
	static const char *const compress[] = { "none", "gzip", "zstd" };

	return xasprintf(
		"{\"top\": %u, \"every_us\": %llu, \"rate\": %g, \"pids\": %zu, "
		"\"names\": %zu, \"scan_max\": %u, \"min_reductions\": %u, "
		"\"rotate_us\": %llu, "
		"\"rotate_bytes\": %llu, \"compress\": \"%s\", \"compress_level\": %d, "
		"\"keep_files\": %u, \"keep_bytes\": %llu, \"keep_age_us\": %llu, "
		"\"backtrace_depth\": %u, \"lines\": %s, \"duration_us\": %llu, "
		"\"max_overhead\": %g, \"request\": \"%s\", \"idle_reuse\": %s, "
		"\"perf_pid\": %d, \"perf_freq\": %u, \"flight_recorder_us\": %llu, "
		"\"flight_recorder_max\": %llu, \"continuous\": %s, \"after_us\": %llu, "
		"\"triggers\": %zu}",
		o->top, (unsigned long long)o->every_us, o->rate, o->npids,
		o->nnames, o->scan_max, o->min_reductions,
		(unsigned long long)o->rotate_us,
		(unsigned long long)o->rotate_bytes, compress[o->compress],
		o->compress_level, o->keep_files,
		(unsigned long long)o->keep_bytes,
		(unsigned long long)o->keep_age_us, o->backtrace_depth,
		o->lines ? "true" : "false",
		(unsigned long long)o->duration_us, o->max_overhead,
		fpd_request_name(o->request), o->idle_reuse ? "true" : "false",
		(int)o->perf_pid, o->perf_freq,
		(unsigned long long)o->flight_us,
		(unsigned long long)o->flight_max,
		!o->flight_us || o->continuous ? "true" : "false",
		(unsigned long long)o->after_us, o->ntriggers);
}
