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

/** Say on stderr that @flag's @value is bad and why; FPD_EXIT_USAGE. */
int
fpd_option_bad_value(const char *flag, const char *value, const char *why);

/* Each takes its option's argument (NULL for a flag) into @o: 0, or an
 * exit code with the reason on stderr. */
#define FPD_OPTION_PARSER(name) \
	int fpd_option_##name(struct fpd_options *o, const char *arg)

FPD_OPTION_PARSER(node);
FPD_OPTION_PARSER(cookie_file);
FPD_OPTION_PARSER(timeout);
FPD_OPTION_PARSER(connect);
FPD_OPTION_PARSER(top);
FPD_OPTION_PARSER(every);
FPD_OPTION_PARSER(pid);
FPD_OPTION_PARSER(name);
FPD_OPTION_PARSER(scan_max);
FPD_OPTION_PARSER(min_reductions);
FPD_OPTION_PARSER(rate);
FPD_OPTION_PARSER(backtrace_depth);
FPD_OPTION_PARSER(lines);
FPD_OPTION_PARSER(erlang_names);
FPD_OPTION_PARSER(key);
FPD_OPTION_PARSER(logger_key);
FPD_OPTION_PARSER(callers);
FPD_OPTION_PARSER(max_overhead);
FPD_OPTION_PARSER(request);
FPD_OPTION_PARSER(no_idle_reuse);
FPD_OPTION_PARSER(breaker_run_queue);
FPD_OPTION_PARSER(perf);
FPD_OPTION_PARSER(perf_freq);
FPD_OPTION_PARSER(out);
FPD_OPTION_PARSER(rotate);
FPD_OPTION_PARSER(rotate_size);
FPD_OPTION_PARSER(compress);
FPD_OPTION_PARSER(compress_level);
FPD_OPTION_PARSER(keep_files);
FPD_OPTION_PARSER(keep_bytes);
FPD_OPTION_PARSER(keep_age);
FPD_OPTION_PARSER(duration);
FPD_OPTION_PARSER(file_mode);
FPD_OPTION_PARSER(dir_mode);
FPD_OPTION_PARSER(user);
FPD_OPTION_PARSER(log_file);
FPD_OPTION_PARSER(verbose);
FPD_OPTION_PARSER(quiet);
