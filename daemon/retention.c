/*
 * flame_profd — retention, and the index and manifest of finished files.
 *
 * Retention only ever deletes files the index lists with the device and
 * inode they were written with, and only while the name still is that
 * file: a name that looks like ours, or its date, proves nothing.
 * The index (.flame_profd.index, one line per finished file, in the
 * order they were finished) carries what the manifest says about each
 * file across restarts; manifest.json is generated from it. Both are
 * replaced atomically (write, fsync, rename).
 */
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
#define CAPTURES_NAME ".flame_profd.captures"

/* Slack before a name's time counts as in the future: clocks of
 * machines that share a directory differ by a little. */
#define FUTURE_SLACK_US (60u * 1000000u)

int
fpd_retention_apply(int dirfd, struct fpd_file_entry *entries, size_t *n,
		    unsigned keep_files, uint64_t keep_bytes,
		    uint64_t keep_age_us, uint64_t now_epoch_us)
{
	size_t count = 0, kept = 0, left, newest = 0;
	uint64_t total = 0;
	int deleted = 0;

	if (!keep_files && !keep_bytes && !keep_age_us)
		return 0;
	/* Only files of the index whose identity is recorded count: what
	 * cannot be deleted must not push out what can. */
	for (size_t i = 0; i < *n; i++) {
		struct fpd_file_entry *e = &entries[i];
		struct fp_perf_name parsed;

		if (!e->made.ino)
			continue;
		count++;
		newest = i;
		total += e->bytes;
		if (!e->future_told && fp_perf_name_parse(e->name, &parsed) &&
		    parsed.epoch_ms * 1000 > now_epoch_us + FUTURE_SLACK_US) {
			fpd_warn("retention: %s is named for a time in the future "
				 "(the clock was set back?); it goes in the order "
				 "it was written, not by its name", e->name);
			e->future_told = true;
		}
	}

	/* In the order the files were finished, never the last one: a name's
	 * date (a clock set back, a planted name) decides nothing. */
	left = count;
	for (size_t i = 0; i < *n; i++) {
		struct fpd_file_entry *e = &entries[i];
		bool drop = false;
		int rc;

		if (e->made.ino && i < newest)
			drop = (keep_files && left > keep_files) ||
			       (keep_bytes && total > keep_bytes) ||
			       (keep_age_us && e->last_us <= now_epoch_us &&
				now_epoch_us - e->last_us > keep_age_us);
		if (!drop) {
			entries[kept++] = *e;
			continue;
		}
		rc = fpd_fs_unlink_made(dirfd, e->name, &e->made);
		if (rc == 0) {
			fpd_info("retention: deleted %s (%" PRIu64 " bytes)",
				 e->name, e->bytes);
			deleted++;
		} else if (rc == -ESTALE) {
			fpd_warn("retention: %s is no longer the file written "
				 "there; left alone and off the index", e->name);
		} else if (rc != -ENOENT) {
			fpd_warn("retention: cannot delete %s: %s", e->name,
				 strerror(-rc));
			entries[kept++] = *e;
		}
		left--;
		total -= e->bytes;
	}
	*n = kept;
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
fpd_index_load(int dirfd, const struct fpd_trust *trust,
	       struct fpd_file_entry **entries, size_t *n)
{
	const char *why;
	int fd = fpd_fs_open_file(dirfd, INDEX_NAME, O_RDONLY, trust, NULL, &why);
	size_t cap = 0;
	char line[1024];
	FILE *f;

	*entries = NULL;
	*n = 0;
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		struct fpd_file_entry e = { 0 };
		uint64_t dev = 0, ino = 0;
		int recovered = 0;

		int got = sscanf(line, "%319s %" SCNu64 " %" SCNu64 " %" SCNu64
				 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %d %" SCNu64
				 " %" SCNu64 " %" SCNu64,
				 e.name, &e.first_us, &e.last_us, &e.samples,
				 &e.bytes, &e.skipped, &e.dropped, &recovered,
				 &e.events, &dev, &ino);

		if (got < 8)
			continue;	/* a line we do not know: skip */
		e.recovered = recovered != 0;
		if (got == 11) {
			e.made.dev = (dev_t)dev;
			e.made.ino = (ino_t)ino;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			*entries = xrealloc(*entries, cap * sizeof(**entries));
		}
		(*entries)[(*n)++] = e;
	}
	fclose(f);
	return 0;
}

int
fpd_captures_apply(int dirfd, struct fpd_capture_entry *entries, size_t *n,
		   unsigned keep)
{
	size_t kept = 0, left = *n;
	int deleted = 0;

	for (size_t i = 0; i < *n; i++) {
		struct fpd_capture_entry *e = &entries[i];
		int sub, rc;

		if (!keep || left <= keep || !e->dir_made.ino) {
			entries[kept++] = *e;
			continue;
		}
		left--;
		/* the file, then its directory, each still ours */
		sub = fpd_fs_open_made_dir(dirfd, e->dir, &e->dir_made);
		rc = sub < 0 ? sub : fpd_fs_unlink_made(sub, e->name, &e->made);
		if (sub >= 0)
			close(sub);
		if (sub >= 0 && (rc == 0 || rc == -ENOENT))
			rc = fpd_fs_rmdir_made(dirfd, e->dir, &e->dir_made);
		if (rc == 0) {
			fpd_info("retention: deleted capture %s", e->dir);
			deleted++;
		} else if (rc != -ENOENT) {
			fpd_warn("retention: capture %s left alone: %s", e->dir,
				 rc == -ESTALE ? "no longer what was written there" :
				 strerror(-rc));
		}
	}
	*n = kept;
	return deleted;
}

/* A reason in the list of captures is one field: its spaces are written
 * \x20 there (the escaped text has no other "\x20": '\' is \x5C), "-"
 * when there is none. */
static void
reason_unspace(char *r)
{
	char *w = r;

	if (strcmp(r, "-") == 0) {
		*r = '\0';
		return;
	}
	for (const char *p = r; *p;) {
		if (strncmp(p, "\\x20", 4) == 0) {
			*w++ = ' ';
			p += 4;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
}

static void
reason_spaced(FILE *f, const char *r)
{
	if (!*r)
		fputc('-', f);
	for (; *r; r++) {
		if (*r == ' ')
			fputs("\\x20", f);
		else
			fputc(*r, f);
	}
}

int
fpd_captures_load(int dirfd, const struct fpd_trust *trust,
		  struct fpd_capture_entry **entries, size_t *n)
{
	const char *why;
	int fd = fpd_fs_open_file(dirfd, CAPTURES_NAME, O_RDONLY, trust, NULL, &why);
	char line[3072];
	FILE *f;

	*entries = NULL;
	*n = 0;
	if (fd < 0)
		return fd == -ENOENT ? 0 : fd;
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		struct fpd_capture_entry e = { 0 };
		uint64_t ddev, dino, dev, ino;
		int got;

		/* a line may also end after the file's identity: no
		 * capped count, no reason */
		got = sscanf(line, "%319s %319s %63s %31s %" SCNd64 " %" SCNu64
			     " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
			     " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
			     " %" SCNu64 " %512s",
			     e.dir, e.name, e.trigger, e.pid, &e.value,
			     &e.trigger_us, &e.first_us, &e.last_us, &e.samples,
			     &e.bytes, &ddev, &dino, &dev, &ino, &e.capped,
			     e.reason);
		if (got != 14 && got != 16)
			continue;	/* a line we do not know: skip */
		if (strcmp(e.pid, "-") == 0)
			e.pid[0] = '\0';
		if (got == 16)
			reason_unspace(e.reason);
		e.dir_made = (struct fpd_made){ (dev_t)ddev, (ino_t)dino };
		e.made = (struct fpd_made){ (dev_t)dev, (ino_t)ino };
		*entries = xrealloc(*entries, (*n + 1) * sizeof(**entries));
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
 * file is always a new one of ours: a link planted at its name, or a
 * leftover of an earlier run, is removed first (fpd_fs_clear_own_name()),
 * and the file is created exclusively, never through a link.
 */
static int
replace_file(int dirfd, const struct fpd_trust *trust, const char *name,
	     FILE **fp, char *tmp, size_t tmplen, mode_t mode)
{
	int fd;

	snprintf(tmp, tmplen, ".%s.tmp", name);
	fd = fpd_fs_clear_own_name(dirfd, tmp, trust);
	if (fd < 0)
		return fd;
	fd = fpd_fs_create(dirfd, tmp, O_WRONLY, mode, NULL);
	if (fd < 0)
		return fd;
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
	if (rc == 0)
		rc = fpd_fs_rename(dirfd, tmp, name, true);
	if (rc < 0)
		unlinkat(dirfd, tmp, 0);	/* just made by us */
	return rc;
}

static void
iso(uint64_t us, char *buf, size_t size)
{
	fpd_format_utc(us, buf, size);
}

/* The list of captures, keeping those whose file is still there. */
static int
store_captures(int dirfd, const struct fpd_trust *trust,
	       const struct fpd_index_extra *extra, mode_t mode)
{
	struct fpd_capture_entry *c = extra->captures;
	size_t kept = 0;
	char tmp[340];
	FILE *f;
	int rc;

	for (size_t i = 0; i < *extra->ncaptures; i++) {
		int sub = fpd_fs_open_made_dir(dirfd, c[i].dir, &c[i].dir_made);

		if (sub < 0)
			continue;
		if (fpd_fs_is_made(sub, c[i].name, &c[i].made) == 0)
			c[kept++] = c[i];
		close(sub);
	}
	*extra->ncaptures = kept;
	rc = replace_file(dirfd, trust, CAPTURES_NAME, &f, tmp, sizeof(tmp), mode);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < kept; i++) {
		fprintf(f, "%s %s %s %s %" PRId64 " %" PRIu64 " %" PRIu64 " %"
			PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			" %" PRIu64 " %" PRIu64 " %" PRIu64 " ", c[i].dir, c[i].name,
			c[i].trigger, c[i].pid[0] ? c[i].pid : "-", c[i].value,
			c[i].trigger_us, c[i].first_us, c[i].last_us,
			c[i].samples, c[i].bytes, (uint64_t)c[i].dir_made.dev,
			(uint64_t)c[i].dir_made.ino, (uint64_t)c[i].made.dev,
			(uint64_t)c[i].made.ino, c[i].capped);
		reason_spaced(f, c[i].reason);
		fputc('\n', f);
	}
	return commit_file(dirfd, tmp, CAPTURES_NAME, f);
}

static void
manifest_captures(FILE *f, const struct fpd_index_extra *extra)
{
	const struct fpd_capture_entry *c = extra->captures;
	size_t n = *extra->ncaptures;
	char a[40], b[40], t[40];

	fprintf(f, ",\n  \"captures\": [");
	for (size_t i = 0; i < n; i++) {
		iso(c[i].trigger_us, t, sizeof(t));
		iso(c[i].first_us, a, sizeof(a));
		iso(c[i].last_us, b, sizeof(b));
		fprintf(f, "%s\n    {\"dir\": ", i ? "," : "");
		json_string(f, c[i].dir);
		fprintf(f, ", \"name\": ");
		json_string(f, c[i].name);
		fprintf(f, ", \"trigger\": ");
		json_string(f, c[i].trigger);
		fprintf(f, ", \"value\": %" PRId64 ", \"pid\": ", c[i].value);
		if (c[i].pid[0])
			json_string(f, c[i].pid);
		else
			fputs("null", f);
		fprintf(f, ", \"reason\": ");
		if (c[i].reason[0])
			json_string(f, c[i].reason);
		else
			fputs("null", f);
		fprintf(f, ", \"capped_before\": %" PRIu64, c[i].capped);
		fprintf(f, ", \"triggered\": \"%s\", \"triggered_us\": %" PRIu64
			", \"first_sample\": \"%s\", \"last_sample\": \"%s\""
			", \"first_sample_us\": %" PRIu64 ", \"last_sample_us\": %"
			PRIu64 ", \"samples\": %" PRIu64 ", \"bytes\": %" PRIu64 "}",
			t, c[i].trigger_us, a, b, c[i].first_us, c[i].last_us,
			c[i].samples, c[i].bytes);
	}
	fprintf(f, "%s]", n ? "\n  " : "");
}

int
fpd_index_store(int dirfd, const struct fpd_trust *trust,
		struct fpd_file_entry *entries, size_t *n, const char *node,
		const char *otp_release, const char *options_json, mode_t mode,
		const struct fpd_index_extra *extra)
{
	char tmp[340], a[40], b[40];
	size_t kept = 0;
	FILE *f;
	int rc;

	for (size_t i = 0; i < *n; i++) {
		struct stat st;

		if (entries[i].made.ino ?
		    fpd_fs_is_made(dirfd, entries[i].name, &entries[i].made) == 0 :
		    fstatat(dirfd, entries[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			entries[kept++] = entries[i];
	}
	*n = kept;

	rc = replace_file(dirfd, trust, INDEX_NAME, &f, tmp, sizeof(tmp), mode);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < *n; i++) {
		const struct fpd_file_entry *e = &entries[i];

		fprintf(f, "%s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			" %" PRIu64 " %" PRIu64 " %d %" PRIu64 " %" PRIu64
			" %" PRIu64 "\n", e->name, e->first_us, e->last_us,
			e->samples, e->bytes, e->skipped, e->dropped,
			e->recovered ? 1 : 0, e->events, (uint64_t)e->made.dev,
			(uint64_t)e->made.ino);
	}
	rc = commit_file(dirfd, tmp, INDEX_NAME, f);
	if (rc < 0)
		return rc;
	if (extra && extra->store_captures) {
		rc = store_captures(dirfd, trust, extra, mode);
		if (rc < 0)
			return rc;
	}

	rc = replace_file(dirfd, trust, MANIFEST_NAME, &f, tmp, sizeof(tmp), mode);
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
	fprintf(f, "%s]", *n ? "\n  " : "");
	if (extra)
		manifest_captures(f, extra);
	fprintf(f, "\n}\n");
	return commit_file(dirfd, tmp, MANIFEST_NAME, f);
}
