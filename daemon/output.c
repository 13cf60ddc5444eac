/*
 * flame_profd — output files: one directory per node, files written
 * under a hidden partial name and renamed only once complete, so that a
 * reader (Flamescope lists no dot-files) or a cron job globbing *.perf
 * never sees half a file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flame_profd.h"

struct fpd_output {
	char *dir;		/* DIR/<node> */
	char *node_s;		/* node name, file-name safe */
	char *header;
	int dirfd;

	FILE *file;
	char partial[4096];
	char final[4000];
	uint64_t opened_mono_us;
};

static int
mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static char *
sanitize(const char *name)
{
	char *s = strdup(name);

	for (char *p = s; *p; p++) {
		char c = *p;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '@' || c == '-'))
			*p = '_';
	}
	if (s[0] == '.')
		s[0] = '_';
	return s;
}

struct fpd_output *
fpd_output_new(const char *dir, const char *node, const char *header,
	       int *err)
{
	struct fpd_output *out = calloc(1, sizeof(*out));
	struct stat st;
	char probe[4096];
	int fd, rc;

	out->node_s = sanitize(node);
	out->header = strdup(header);
	out->dirfd = -1;
	if (asprintf(&out->dir, "%s/%s", dir, out->node_s) < 0) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = mkdir_p(out->dir, 0750);
	if (rc < 0)
		goto fail;
	if (stat(out->dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = -ENOTDIR;
		goto fail;
	}
	out->dirfd = open(out->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (out->dirfd < 0) {
		rc = -errno;
		goto fail;
	}
	/* Fail now, not at the first rotation, if files cannot be made. */
	snprintf(probe, sizeof(probe), ".flame_profd-probe.%ld", (long)getpid());
	fd = openat(out->dirfd, probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	close(fd);
	unlinkat(out->dirfd, probe, 0);
	return out;

fail:
	*err = -rc;
	fpd_output_destroy(out);
	return NULL;
}

void
fpd_output_destroy(struct fpd_output *out)
{
	if (!out)
		return;
	fpd_output_finish(out);
	if (out->dirfd >= 0)
		close(out->dirfd);
	free(out->dir);
	free(out->node_s);
	free(out->header);
	free(out);
}

const char *
fpd_output_dir(const struct fpd_output *out)
{
	return out->dir;
}

bool
fpd_output_is_open(const struct fpd_output *out)
{
	return out->file != NULL;
}

uint64_t
fpd_output_opened_mono_us(const struct fpd_output *out)
{
	return out->opened_mono_us;
}

FILE *
fpd_output_stream(struct fpd_output *out, uint64_t now_epoch_us)
{
	char stamp[40];
	int fd;

	if (out->file)
		return out->file;

	fpd_format_utc(now_epoch_us, stamp, sizeof(stamp), true);
	snprintf(out->final, sizeof(out->final), "%s.%s.perf", out->node_s, stamp);
	snprintf(out->partial, sizeof(out->partial), ".%s.partial", out->final);

	fd = openat(out->dirfd, out->partial,
		    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0) {
		fpd_err("cannot create %s/%s: %s", out->dir, out->partial,
			strerror(errno));
		return NULL;
	}
	out->file = fdopen(fd, "w");
	if (!out->file) {
		close(fd);
		return NULL;
	}
	setvbuf(out->file, NULL, _IOFBF, 256 * 1024);
	out->opened_mono_us = fpd_now_mono_us();
	fputs(out->header, out->file);
	fpd_debug("writing %s/%s", out->dir, out->partial);
	return out->file;
}

int
fpd_output_finish(struct fpd_output *out)
{
	int rc = 0;

	if (!out->file)
		return 0;
	if (fflush(out->file) != 0 || fsync(fileno(out->file)) < 0)
		rc = -errno;
	if (fclose(out->file) != 0 && rc == 0)
		rc = -errno;
	out->file = NULL;
	if (rc < 0) {
		/* Keep what is there under the partial name; never present a
		 * file we could not finish as complete. */
		fpd_err("cannot finish %s/%s: %s", out->dir, out->partial,
			strerror(-rc));
		return rc;
	}
	if (renameat(out->dirfd, out->partial, out->dirfd, out->final) < 0) {
		rc = -errno;
		fpd_err("cannot rename %s/%s: %s", out->dir, out->partial,
			strerror(errno));
		return rc;
	}
	fsync(out->dirfd);
	fpd_info("finished %s/%s", out->dir, out->final);
	return 0;
}
