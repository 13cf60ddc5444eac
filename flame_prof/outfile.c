/*
 * flame_prof — output files (written beside the target and renamed over
 * it, so a reader never sees half a file) and the messages common to the
 * commands.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flame_prof.h"
#include "util-mem.h"

int
fpp_output_open(struct fpp_output *out, const char *path)
{
	struct stat st;
	int fd;

	memset(out, 0, sizeof(*out));
	if (!path || strcmp(path, "-") == 0) {
		out->f = stdout;
		return FPP_EXIT_OK;
	}
	out->path = path;
	/* /dev/null, a FIFO, /dev/stdout: write in place, never rename
	 * a file over them */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		out->f = fopen(path, "w");
		if (!out->f) {
			fpp_fail("cannot open %s: %s", path, strerror(errno));
			return FPP_EXIT_CANTCREAT;
		}
		return FPP_EXIT_OK;
	}
	out->tmp = xzalloc(strlen(path) + 16);
	sprintf(out->tmp, "%s.tmp.XXXXXX", path);
	fd = mkstemp(out->tmp);
	if (fd < 0 || !(out->f = fdopen(fd, "w"))) {
		fpp_fail("cannot create %s: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(out->tmp);
		}
		free(out->tmp);
		out->tmp = NULL;
		return FPP_EXIT_CANTCREAT;
	}
	fchmod(fd, 0644);
	return FPP_EXIT_OK;
}

int
fpp_output_close(struct fpp_output *out, int rc)
{
	const char *name = out->path ? out->path : "standard output";
	int ex = FPP_EXIT_OK;

	if (!out->f)
		return FPP_EXIT_OK;
	if (rc == 0 && (fflush(out->f) != 0 || ferror(out->f)))
		rc = errno ? -errno : -EIO;
	if (out->path) {
		if (fclose(out->f) != 0 && rc == 0)
			rc = errno ? -errno : -EIO;
	}
	if (out->tmp) {
		if (rc == 0 && rename(out->tmp, out->path) < 0)
			rc = -errno;
		if (rc < 0)
			unlink(out->tmp);
		free(out->tmp);
	}
	if (rc == -E2BIG) {
		fpp_fail("%s: too many heat map cells; narrow the time with --from/--to",
		     name);
		ex = FPP_EXIT_DATAERR;
	} else if (rc < 0) {
		fpp_fail("write error on %s: %s", name, strerror(-rc));
		ex = FPP_EXIT_IOERR;
	}
	out->f = NULL;
	return ex;
}

void
fpp_format_span(const struct fpp_run *r, char *dst, size_t size)
{
	char a[40], b[40];
	time_t s;
	struct tm tm;

	if (!r->matched) {
		snprintf(dst, size, "no samples");
		return;
	}
	s = (time_t)(r->first_us / 1000000);
	gmtime_r(&s, &tm);
	strftime(a, sizeof(a), "%Y-%m-%dT%H:%M:%SZ", &tm);
	s = (time_t)(r->last_us / 1000000);
	gmtime_r(&s, &tm);
	strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(dst, size, "%" PRIu64 " samples, %s to %s", r->matched, a, b);
}

void
fpp_warn_saturated(const struct fpp_options *o, bool saturated)
{
	if (saturated && !o->quiet)
		fpp_fail("warning: sums of %s pass the 64-bit range; they are "
			 "shown held at the largest value", o->weight_name);
}
