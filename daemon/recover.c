/*
 * flame_profd — what an earlier run left in a node directory, and names
 * that are never taken twice.
 *
 * A run killed with a file open leaves it under its partial name: its
 * whole segments are kept under a finished name (docs/FORMAT.md,
 * "Leftovers"). A run killed between finishing a file and recording it
 * leaves a finished file the index does not list: it is counted and
 * listed. What the files hold is read by fp_perf_file_summarize().
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

#include "recover.h"
#include "daemon-log.h"
#include "retention.h"
#include "util.h"
#include "util-mem.h"

/* Names tried, one millisecond apart, for a file whose name is taken. */
#define FINISH_TRIES 1000
/* Slack before a name's time counts as in the future (retention.c). */
#define FUTURE_SLACK_US (60u * 1000000u)
/* Set-aside leftovers kept at most: the newest, for a post-mortem. */
#define ASIDE_MAX 8
#define ASIDE_SUFFIX ".unrecoverable"

/* The node directory being looked through. */
struct leftovers {
	int dirfd;
	const char *dir;
	const char *node_s;
	const struct fpd_trust *trust;
	struct fpd_file_entry **entries;
	size_t *n;
	unsigned *unfinished;
};

int
fpd_rename_free(int dirfd, const char *from, char *name, size_t size)
{
	struct fp_perf_name parsed;
	char node[FP_PERF_NAME_MAX];
	int rc;

	if (!fp_perf_name_parse(name, &parsed) || parsed.node_len >= sizeof(node))
		return -EINVAL;
	memcpy(node, name, parsed.node_len);
	node[parsed.node_len] = '\0';
	for (int tries = 0; tries < FINISH_TRIES; tries++, parsed.epoch_ms++) {
		rc = fp_perf_name_format(name, size, node, parsed.epoch_ms,
					 parsed.kind);
		if (rc < 0)
			return rc;
		rc = fpd_fs_rename(dirfd, from, name, false);
		if (rc != -EEXIST)
			return rc;
	}
	return -EEXIST;
}

/*
 * What the whole segments of @name (of @kind: a partial file's name does
 * not say) hold: fp_perf_file_summarize().
 */
static ssize_t
summarize(const struct leftovers *l, const char *name,
	  enum fp_perf_compress kind, struct fp_perf_summary *s)
{
	/* through the directory descriptor checked, not the path again
	 * (without /proc, through the path) */
	size_t size = strlen(l->dir) + strlen(name) + 64;
	char *path = xzalloc(size);
	ssize_t rc;

	if (access("/proc/self/fd", X_OK) == 0)
		snprintf(path, size, "/proc/self/fd/%d/%s", l->dirfd, name);
	else
		snprintf(path, size, "%s/%s", l->dir, name);
	rc = fp_perf_file_summarize(path, kind, s);
	free(path);
	return rc;
}

/*
 * Whether @name, left by an earlier run, may be touched as the daemon's
 * own: a regular file with one link, owned by root or the run's user
 * (fpd_fs_open_file()). Anything else is reported and left alone.
 * @return the descriptor open with @flags, or a negative errno.
 */
static int
open_leftover(const struct leftovers *l, const char *name, int flags,
	      struct stat *st)
{
	const char *why = NULL;
	int fd = fpd_fs_open_file(l->dirfd, name, flags, l->trust, st, &why);

	if (fd < 0 && why)
		fpd_warn("%s/%s %s: not written by flame_profd; left alone",
			 l->dir, name, why);
	return fd;
}

static int
truncate_fd(int fd, off_t len)
{
	if (ftruncate(fd, len) < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Our partial files, or (@aside) those set aside. */
static bool
leftover_name(const struct leftovers *l, const char *name, bool aside)
{
	char final[FP_PERF_NAME_MAX];

	return fp_perf_partial_parse(name, aside ? ASIDE_SUFFIX : "", l->node_s,
				     final);
}

static bool
finished_name(const struct leftovers *l, const char *name, bool unused)
{
	return fp_perf_name_is_of(name, l->node_s);
}

/* The names in the directory that @match takes, sorted. */
static size_t
list_names(const struct leftovers *l,
	   bool (*match)(const struct leftovers *, const char *, bool),
	   bool arg, char ***names)
{
	int fd = dup(l->dirfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	size_t n = 0;

	*names = NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rewinddir(dir);
	while ((de = readdir(dir))) {
		if (!match(l, de->d_name, arg))
			continue;
		*names = xrealloc(*names, (n + 1) * sizeof(**names));
		(*names)[n++] = xstrdup(de->d_name);
	}
	closedir(dir);
	if (n > 1)
		qsort(*names, n, sizeof(**names), cmp_str);
	return n;
}

static void
free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* Keep the newest ASIDE_MAX set-aside leftovers; empty ones never. */
static void
prune_aside(const struct leftovers *l)
{
	char **names;
	size_t n = list_names(l, leftover_name, true, &names), keep = 0;

	for (size_t i = n; i-- > 0;) {
		struct fpd_made made;
		struct stat st;
		int fd = open_leftover(l, names[i], O_RDONLY, &st);

		if (fd < 0)
			continue;
		close(fd);
		if (st.st_size > 0 && keep < ASIDE_MAX) {
			keep++;
			continue;
		}
		fpd_fs_made_of(&st, &made);
		if (fpd_fs_unlink_made(l->dirfd, names[i], &made) == 0)
			fpd_info("removed %s/%s, an old leftover", l->dir, names[i]);
	}
	free_names(names, n);
}

static void
add_entry(const struct leftovers *l, const char *name,
	  const struct fp_perf_summary *s, uint64_t bytes, bool recovered,
	  const struct stat *st)
{
	struct fpd_file_entry e = {
		.first_us = s->first_us,
		.last_us = s->last_us,
		.samples = s->samples,
		.bytes = bytes,
		.recovered = recovered,
	};

	fpd_fs_made_of(st, &e.made);
	snprintf(e.name, sizeof(e.name), "%s", name);
	fpd_index_add(l->entries, l->n, &e);
}

/*
 * A partial file left by a killed daemon: keep its whole segments (for
 * plain text: up to its last complete sample) under a finished name that
 * is free, read as a stream in bounded memory; an empty one goes, one
 * with nothing whole in it is set aside as NAME.unrecoverable (the newest
 * few are kept).
 */
static void
recover_one(const struct leftovers *l, const char *partial)
{
	char final[FP_PERF_NAME_MAX], aside[FP_PERF_PARTIAL_MAX + sizeof(ASIDE_SUFFIX)];
	struct fp_perf_summary s;
	enum fp_perf_compress kind = FP_PERF_PLAIN;
	struct fpd_made made;
	struct stat st;
	ssize_t keep;
	int fd, rc;

	fp_perf_partial_parse(partial, "", l->node_s, final);
	fp_perf_name_kind(final, &kind);
	snprintf(aside, sizeof(aside), "%s%s", partial, ASIDE_SUFFIX);

	/* held open from the check to the cut: the file checked is cut */
	fd = open_leftover(l, partial, O_WRONLY, &st);
	if (fd < 0)
		return;		/* not ours to touch */
	fpd_fs_made_of(&st, &made);
	keep = summarize(l, partial, kind, &s);
	if (keep == -EINVAL || fpd_fs_is_made(l->dirfd, partial, &made) < 0)
		goto close_fd;	/* swapped meanwhile: not ours to touch */
	if (keep <= 0 || s.samples == 0) {
		if (st.st_size == 0) {	/* as checked, not as read */
			if (fpd_fs_unlink_made(l->dirfd, partial, &made) == 0)
				fpd_info("removed %s/%s: empty", l->dir, partial);
			goto close_fd;
		}
		close(fd);
		goto set_aside;
	}
	rc = truncate_fd(fd, keep);
	close(fd);
	if (rc < 0)
		goto set_aside;
	rc = fpd_rename_free(l->dirfd, partial, final, sizeof(final));
	if (rc < 0) {
		fpd_err("cannot recover %s/%s: %s; it stays as it is", l->dir,
			partial, strerror(-rc));
		(*l->unfinished)++;
		return;
	}
	fsync(l->dirfd);
	add_entry(l, final, &s, (uint64_t)keep, true, &st);
	fpd_warn("recovered %s/%s left by an earlier run (%" PRIu64
		 " samples, %lld bytes cut)", l->dir, final, s.samples,
		 (long long)(s.size - keep));
	return;

set_aside:
	if (fpd_fs_rename(l->dirfd, partial, aside, false) == 0)
		fpd_warn("set aside %s/%s: nothing in it could be recovered",
			 l->dir, aside);
	return;
close_fd:
	close(fd);
}

static bool
indexed(const struct leftovers *l, const char *name)
{
	for (size_t i = 0; i < *l->n; i++) {
		if (strcmp((*l->entries)[i].name, name) == 0)
			return true;
	}
	return false;
}

/* A finished file the index does not list: counted and listed if it is
 * whole segments, else reported and left alone. */
static void
account_one(const struct leftovers *l, const char *name)
{
	enum fp_perf_compress kind = FP_PERF_PLAIN;
	struct fp_perf_name parsed;
	struct fp_perf_summary s;
	struct stat st;
	ssize_t whole;
	int fd;

	if (fp_perf_name_parse(name, &parsed) &&
	    parsed.epoch_ms * 1000 > fpd_now_epoch_us() + FUTURE_SLACK_US) {
		fpd_warn("%s/%s is not in the index and is named for a time in "
			 "the future; left alone", l->dir, name);
		return;
	}
	fd = open_leftover(l, name, O_RDONLY, &st);
	if (fd < 0)
		return;
	close(fd);
	fp_perf_name_kind(name, &kind);
	whole = summarize(l, name, kind, &s);
	if (whole == -EINVAL)
		return;
	if (whole <= 0 || s.samples == 0 || whole != s.size) {
		fpd_warn("%s/%s is not in the index and cannot be accounted for (%s); left alone",
			 l->dir, name, whole < 0 ? strerror((int)-whole) :
			 "not whole segments");
		return;
	}
	add_entry(l, name, &s, (uint64_t)s.size, false, &st);
	fpd_info("%s/%s added to the index (%" PRIu64 " samples)", l->dir,
		 name, s.samples);
}

/* Entries of an index written before device and inode were recorded:
 * those of the file there now, if it may be the daemon's own. */
static bool
adopt_old(const struct leftovers *l)
{
	bool changed = false;

	for (size_t i = 0; i < *l->n; i++) {
		struct fpd_file_entry *e = &(*l->entries)[i];
		struct stat st;
		int fd;

		if (e->made.ino)
			continue;
		fd = open_leftover(l, e->name, O_RDONLY, &st);
		if (fd < 0)
			continue;
		close(fd);
		fpd_fs_made_of(&st, &e->made);
		changed = true;
	}
	return changed;
}

bool
fpd_recover(int dirfd, const char *dir, const char *node_s,
	    const struct fpd_trust *trust, struct fpd_file_entry **entries,
	    size_t *n, unsigned *unfinished)
{
	const struct leftovers l = { dirfd, dir, node_s, trust, entries, n,
				     unfinished };
	size_t before = *n, count;
	bool adopted = adopt_old(&l);
	char **names;

	count = list_names(&l, leftover_name, false, &names);
	for (size_t i = 0; i < count; i++)
		recover_one(&l, names[i]);
	free_names(names, count);
	prune_aside(&l);

	count = list_names(&l, finished_name, false, &names);
	for (size_t i = 0; i < count; i++) {
		if (!indexed(&l, names[i]))
			account_one(&l, names[i]);
	}
	free_names(names, count);
	return adopted || *n != before;
}
