/*
 * flame_profd — retention, and the index and manifest of finished files.
 *
 * Retention only ever deletes files whose whole name is one of ours:
 * NODE.YYYYMMDDTHHMMSS.mmmZ.perf[.gz|.zst] in our own node directory.
 * The index (.flame_profd.index, one line per finished file) carries what
 * the manifest says about each file across restarts; manifest.json is
 * generated from it. Both are replaced atomically (write, fsync, rename).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "retention.h"
#include "daemon-log.h"
#include "util.h"
#include "util-mem.h"

#define INDEX_NAME ".flame_profd.index"
#define MANIFEST_NAME "manifest.json"

struct found {
	char name[FP_PERF_NAME_MAX];
	uint64_t bytes;
	uint64_t mtime_us;
};

static int
cmp_found(const void *a, const void *b)
{
	return strcmp(((const struct found *)a)->name,
		      ((const struct found *)b)->name);
}

static int
list_finished(int dirfd, const char *node_s, struct found **out, size_t *n)
{
	int fd = dup(dirfd);
	DIR *dir;
	struct dirent *de;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -errno;
	}
	rewinddir(dir);
	while ((de = readdir(dir))) {
		struct stat st;

		if (!fp_perf_name_is_of(de->d_name, node_s) ||
		    strlen(de->d_name) >= sizeof((*out)->name))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			*out = xrealloc(*out, cap * sizeof(**out));
		}
		snprintf((*out)[*n].name, sizeof((*out)[*n].name), "%s", de->d_name);
		(*out)[*n].bytes = (uint64_t)st.st_size;
		(*out)[*n].mtime_us = (uint64_t)st.st_mtim.tv_sec * 1000000u +
				      (uint64_t)st.st_mtim.tv_nsec / 1000u;
		(*n)++;
	}
	closedir(dir);
	qsort(*out, *n, sizeof(**out), cmp_found);
	return 0;
}

int
fpd_retention_apply(int dirfd, const char *node_s, unsigned keep_files,
		    uint64_t keep_bytes, uint64_t keep_age_us,
		    uint64_t now_epoch_us)
{
	struct found *files;
	size_t n, first = 0;
	uint64_t total = 0;
	int deleted = 0;

	if (!keep_files && !keep_bytes && !keep_age_us)
		return 0;
	if (list_finished(dirfd, node_s, &files, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		total += files[i].bytes;

	/* Oldest first; the newest file always stays. */
	while (first + 1 < n) {
		struct found *f = &files[first];
		bool drop = (keep_files && n - first > keep_files) ||
			    (keep_bytes && total > keep_bytes) ||
			    (keep_age_us && f->mtime_us + keep_age_us < now_epoch_us);

		if (!drop)
			break;
		if (unlinkat(dirfd, f->name, 0) == 0) {
			fpd_info("retention: deleted %s (%" PRIu64 " bytes)",
				 f->name, f->bytes);
			deleted++;
		} else {
			fpd_warn("retention: cannot delete %s: %s", f->name,
				 strerror(errno));
		}
		total -= f->bytes;
		first++;
	}
	free(files);
	return deleted;
}

void
fpd_index_add(struct fpd_file_entry **entries, size_t *n,
	      const struct fpd_file_entry *e)
{
	*entries = xrealloc(*entries, (*n + 1) * sizeof(**entries));
	(*entries)[(*n)++] = *e;
}

int
fpd_index_load(int dirfd, struct fpd_file_entry **entries, size_t *n)
{
	int fd = openat(dirfd, INDEX_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	size_t cap = 0;
	char line[1024];
	FILE *f;

	*entries = NULL;
	*n = 0;
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		struct fpd_file_entry e = { 0 };
		int recovered = 0;

		int got = sscanf(line, "%319s %" SCNu64 " %" SCNu64 " %" SCNu64
				 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %d %" SCNu64,
				 e.name, &e.first_us, &e.last_us, &e.samples,
				 &e.bytes, &e.skipped, &e.dropped, &recovered,
				 &e.events);

		if (got < 8)
			continue;	/* a line we do not know: skip */
		e.recovered = recovered != 0;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			*entries = xrealloc(*entries, cap * sizeof(**entries));
		}
		(*entries)[(*n)++] = e;
	}
	fclose(f);
	return 0;
}

static void
json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/*
 * Write via a temporary name, fsync, rename over @name. The temporary
 * file is always a new one of ours: whatever stands at its name (a link
 * planted by someone who can write the directory, a leftover) is removed
 * first, and the file is created exclusively, never through a link.
 */
static int
replace_file(int dirfd, const char *name, FILE **fp, char *tmp, size_t tmplen,
	     mode_t mode)
{
	int fd;

	snprintf(tmp, tmplen, ".%s.tmp", name);
	if (unlinkat(dirfd, tmp, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    mode);
	if (fd < 0)
		return -errno;
	*fp = fdopen(fd, "w");
	if (!*fp) {
		close(fd);
		return -errno;
	}
	return 0;
}

static int
commit_file(int dirfd, const char *tmp, const char *name, FILE *f)
{
	int rc = 0;

	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) < 0)
		rc = -(errno ? errno : EIO);
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(dirfd, tmp, 0);
	return rc;
}

static void
iso(uint64_t us, char *buf, size_t size)
{
	fpd_format_utc(us, buf, size);
}

int
fpd_index_store(int dirfd, struct fpd_file_entry *entries, size_t *n,
		const char *node, const char *otp_release,
		const char *options_json, mode_t mode)
{
	char tmp[340], a[40], b[40];
	size_t kept = 0;
	FILE *f;
	int rc;

	for (size_t i = 0; i < *n; i++) {
		struct stat st;

		if (fstatat(dirfd, entries[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			entries[kept++] = entries[i];
	}
	*n = kept;

	rc = replace_file(dirfd, INDEX_NAME, &f, tmp, sizeof(tmp), mode);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < *n; i++) {
		const struct fpd_file_entry *e = &entries[i];

		fprintf(f, "%s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			" %" PRIu64 " %" PRIu64 " %d %" PRIu64 "\n", e->name,
			e->first_us, e->last_us, e->samples, e->bytes, e->skipped,
			e->dropped, e->recovered ? 1 : 0, e->events);
	}
	rc = commit_file(dirfd, tmp, INDEX_NAME, f);
	if (rc < 0)
		return rc;

	rc = replace_file(dirfd, MANIFEST_NAME, &f, tmp, sizeof(tmp), mode);
	if (rc < 0)
		return rc;
	iso(fpd_now_epoch_us(), a, sizeof(a));
	fprintf(f, "{\n  \"flame_profd_version\": \"%s\",\n  \"node\": ", FP_VERSION);
	json_string(f, node);
	fprintf(f, ",\n  \"otp_release\": ");
	json_string(f, otp_release);
	fprintf(f, ",\n  \"updated\": \"%s\",\n  \"options\": %s,\n  \"files\": [",
		a, options_json);
	for (size_t i = 0; i < *n; i++) {
		const struct fpd_file_entry *e = &entries[i];

		iso(e->first_us, a, sizeof(a));
		iso(e->last_us, b, sizeof(b));
		fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
		json_string(f, e->name);
		fprintf(f, ", \"first_sample\": \"%s\", \"last_sample\": \"%s\", "
			"\"first_sample_us\": %" PRIu64 ", \"last_sample_us\": %" PRIu64
			", \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64
			", \"skipped\": %" PRIu64 ", \"dropped\": %" PRIu64
			", \"throttle_events\": %" PRIu64 ", \"recovered\": %s}",
			a, b, e->first_us, e->last_us, e->samples, e->bytes,
			e->skipped, e->dropped, e->events,
			e->recovered ? "true" : "false");
	}
	fprintf(f, "%s]\n}\n", *n ? "\n  " : "");
	return commit_file(dirfd, tmp, MANIFEST_NAME, f);
}
