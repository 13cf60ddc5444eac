/*
 * flame_prof — declarations shared by the command's files.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/perf-script-read.h"

/* Exit codes (sysexits.h values; listed in --help and flame_prof(1)). */
enum fpp_exit {
	FPP_EXIT_OK = 0,
	FPP_EXIT_REGRESSION = 1,	/* diff: a share grew past --threshold */
	FPP_EXIT_USAGE = 64,		/* bad command, option or value */
	FPP_EXIT_DATAERR = 65,		/* malformed input, or no samples to diff */
	FPP_EXIT_NOINPUT = 66,		/* input missing or unreadable */
	FPP_EXIT_SOFTWARE = 70,		/* internal error */
	FPP_EXIT_CANTCREAT = 73,	/* output file cannot be created */
	FPP_EXIT_IOERR = 74,		/* read or write error */
};

/* A time bound of --from/--to: absolute, or relative to the first sample. */
struct fpp_time {
	bool set;
	bool relative;
	uint64_t us;		/* epoch microseconds, or offset */
};

/**
 * Parse "1795248660.5" (epoch seconds), "2026-11-21T08:11:00.432Z" (UTC;
 * the Z, the fraction and the seconds may be left out; a space may stand
 * for the T) or "+DUR" (DUR after the first sample: 90s, 1.5m, 500ms).
 *
 * @return 0, or -EINVAL.
 */
int
fpp_time_parse(const char *text, struct fpp_time *t);

struct fpp_input {
	char *path;
	bool has_start;
	uint64_t start_us;	/* from the file name, when it has one */
	bool skip;		/* outside --from/--to by its name */
};

struct fpp_inputs {
	struct fpp_input *files;
	size_t count;
	char *error_path;	/* a directory below an input that failed */
};

/**
 * Expand the command-line inputs: files as given, directories to every
 * *.perf, *.perf.gz and *.perf.zst below them (dot-files skipped; links
 * to directories not followed; up to 32 levels down), "-" standard
 * input. A file reached twice (same device and inode) is read once.
 * Sorted by the time in their names (flame_profd's
 * NODE.YYYYMMDDTHHMMSS.mmmZ.perf), others first in the order given.
 * With absolute @from/@to, files that cannot hold a sample in range are
 * marked skip.
 *
 * @return 0; -ENOENT etc. if an input cannot be opened (@bad names it,
 *         or the directory below it that cannot be read);
 *         -EINVAL if an input is neither a regular file nor a directory
 *         (a FIFO, a device, a socket);
 *         -ELOOP if directories nest deeper than 32 levels below an
 *         input (@bad names the first one too deep);
 *         -ENODATA if a directory holds no perf-script file.
 *         @bad stays valid until fpp_inputs_free().
 */
int
fpp_inputs_expand(char *const *args, size_t nargs, const struct fpp_time *from,
		  const struct fpp_time *to, struct fpp_inputs *inputs,
		  const char **bad);

void
fpp_inputs_free(struct fpp_inputs *inputs);
