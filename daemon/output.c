/*
 * flame_profd — output files.
 *
 * One directory per node. A file is written under a hidden partial name
 * and renamed only once complete and fsynced (then the directory is
 * fsynced), so a reader (Flamescope lists no dot-files) or a cron job
 * globbing *.perf* never sees half a file.
 *
 * Samples go into an in-memory segment; about once a second the segment is
 * compressed as one frame and written with one write(). The file on disk
 * is thus always whole segments: after SIGKILL it is readable up to its
 * last complete segment, and on ENOSPC or EIO it is cut back to the last
 * good segment, the segment's samples are dropped and counted, and writing
 * resumes when space returns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flame_profd.h"
#include "util-mem.h"

#define LOCK_NAME ".flame_profd.lock"
#define SEGMENT_MAX (4u << 20)		/* flush early past this */
#define SEGMENT_US 1000000u		/* at most this much lost on a crash */
#define ERROR_LOG_INTERVAL_US 10000000u
/* No segment of ours holds more text: recovery stops at one that does. */
#define SEGMENT_TEXT_MAX (4 * SEGMENT_MAX)
/* Names tried, one millisecond apart, for a file whose name is taken. */
#define FINISH_TRIES 1000

struct fpd_output {
	struct fpd_output_config cfg;
	char *dir;		/* DIR/<node> */
	char *node_s;		/* node name, file-name safe */
	char otp_release[16];
	int dirfd;
	int lockfd;
	struct fpd_compressor *comp;

	/* the open file */
	int fd;
	char partial[340];
	char final[320];
	uint64_t opened_mono_us;
	uint64_t last_open_epoch_ms;
	uint64_t final_ms;
	off_t good;		/* bytes of whole segments on disk */
	uint64_t flushed_mono_us;
	struct fpd_file_entry entry;

	/* the segment being filled */
	FILE *seg;
	char *segbuf;
	size_t seglen, segcap;
	uint64_t seg_samples, seg_first_us, seg_last_us;
	uint64_t pending_skipped;	/* counts for the next file */
	uint64_t pending_dropped;
	uint64_t pending_events;

	struct fpd_file_entry *index;
	size_t nindex;

	uint64_t dropped_total;
	uint64_t written_total;	/* samples in the files finished */
	unsigned unfinished;	/* files that could not be finished */
	int fatal;		/* the directory is gone for good: -errno */
	uint64_t last_error_log_mono;
	uint64_t errors_since_log;
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

static ssize_t
seg_write(void *cookie, const char *data, size_t len)
{
	struct fpd_output *out = cookie;

	if (out->seglen + len > out->segcap) {
		size_t cap = out->segcap ? out->segcap : 65536;
		char *p;

		while (cap < out->seglen + len)
			cap *= 2;
		p = realloc(out->segbuf, cap);
		if (!p)
			abort();
		out->segbuf = p;
		out->segcap = cap;
	}
	memcpy(out->segbuf + out->seglen, data, len);
	out->seglen += len;
	return (ssize_t)len;
}

static void
log_write_error(struct fpd_output *out, int err, const char *what)
{
	uint64_t now = fpd_now_mono_us();

	out->errors_since_log++;
	if (out->last_error_log_mono &&
	    now - out->last_error_log_mono < ERROR_LOG_INTERVAL_US)
		return;
	fpd_err("%s in %s: %s (%" PRIu64 " errors, %" PRIu64
		" samples dropped so far; retrying)", what, out->dir,
		strerror(err), out->errors_since_log, out->dropped_total);
	out->last_error_log_mono = now;
	out->errors_since_log = 0;
}

static int
write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- leftovers of an earlier run --------------------------------------- */

static enum fpd_compress
kind_of(const char *name)
{
	size_t n = strlen(name);

	if (n > 4 && strcmp(name + n - 4, ".zst") == 0)
		return FPD_COMPRESS_ZSTD;
	if (n > 3 && strcmp(name + n - 3, ".gz") == 0)
		return FPD_COMPRESS_GZIP;
	return FPD_COMPRESS_NONE;
}

/* Count samples and their time range in plain text. */
static void
scan_text(void *data, const char *text, size_t len)
{
	struct fpd_file_entry *e = data;
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *colon;
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (ll && p[0] != '#' && p[0] != '\t' &&
		    (colon = memmem(p, ll, ": cpu-clock:", 12))) {
			const char *q = colon;
			unsigned long long s = 0, us = 0;

			while (q > p && q[-1] != ' ')
				q--;
			if (sscanf(q, "%llu.%6llu", &s, &us) == 2) {
				uint64_t t = s * 1000000ull + us;

				if (!e->samples || t < e->first_us)
					e->first_us = t;
				if (t > e->last_us)
					e->last_us = t;
				e->samples++;
			}
		}
		if (!nl)
			break;
		p = nl + 1;
	}
}

/*
 * The samples and time range of the whole segments of file @name (of
 * @kind: a partial file's name does not say), read as a stream (fpd_compress_scan()): @return the bytes they take, 0 when
 * none is whole, or a negative errno (-EINVAL: not a regular file).
 */
static ssize_t
count_file(int dirfd, const char *name, enum fpd_compress kind,
	   struct fpd_file_entry *e, off_t *size)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	ssize_t keep;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	*size = st.st_size;
	keep = fpd_compress_scan(kind, fd, SEGMENT_TEXT_MAX, scan_text, e);
	close(fd);
	return keep;
}

static void add_index(struct fpd_output *out, const struct fpd_file_entry *e);

static int
truncate_at(struct fpd_output *out, const char *name, off_t len)
{
	int fd = openat(out->dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, len) < 0 || fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

/* NODE.YYYYMMDDTHHMMSS.mmmZ.perf...: the time in the name, in ms */
static bool
name_ms(const struct fpd_output *out, const char *name, uint64_t *ms)
{
	size_t nl = strlen(out->node_s);
	struct tm tm = { 0 };
	unsigned msec;

	if (!fpd_is_finished_name(out->node_s, name) ||
	    sscanf(name + nl + 1, "%4d%2d%2dT%2d%2d%2d.%3uZ", &tm.tm_year,
		   &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
		   &msec) != 7)
		return false;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*ms = (uint64_t)timegm(&tm) * 1000 + msec;
	return true;
}

/*
 * Move @from to the finished name @name, or if that is taken to the next
 * free millisecond's name: never over a file that is there. @name gets
 * the name used. 0, or a negative errno (-EEXIST when FINISH_TRIES
 * names in a row are taken).
 */
static int
rename_free(struct fpd_output *out, const char *from, char *name, size_t size)
{
	enum fpd_compress kind = kind_of(name);
	uint64_t ms;
	char stamp[40];

	if (!name_ms(out, name, &ms))
		return -EINVAL;
	for (int tries = 0; tries < FINISH_TRIES; tries++, ms++) {
		fpd_format_utc(ms * 1000, stamp, sizeof(stamp), true);
		snprintf(name, size, "%s.%s.perf%s", out->node_s, stamp,
			 fpd_compress_suffix(kind));
		if (renameat2(out->dirfd, from, out->dirfd, name,
			      RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Set-aside leftovers kept at most: the newest, for a post-mortem. */
#define ASIDE_MAX 8
#define ASIDE_SUFFIX ".unrecoverable"

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Leftovers our partial files may become: ".NAME.partial[.unrecoverable]"
 * with NAME one of our finished names. */
static bool
leftover_name(const struct fpd_output *out, const char *name, bool aside)
{
	size_t len = strlen(name), tail = aside ? 8 + strlen(ASIDE_SUFFIX) : 8;
	char inner[sizeof(out->final)];

	if (name[0] != '.' || len < tail + 2 || len - tail - 1 >= sizeof(inner) ||
	    strncmp(name + len - tail, aside ? ".partial" ASIDE_SUFFIX : ".partial",
		    tail) != 0)
		return false;
	snprintf(inner, sizeof(inner), "%.*s", (int)(len - tail - 1), name + 1);
	return fpd_is_finished_name(out->node_s, inner);
}

/* The names in our directory that @match takes, sorted. */
static size_t
list_names(struct fpd_output *out, bool (*match)(const struct fpd_output *,
						  const char *, bool),
	   bool arg, char ***names)
{
	int fd = dup(out->dirfd);
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
		if (!match(out, de->d_name, arg))
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
prune_aside(struct fpd_output *out)
{
	char **names;
	size_t n = list_names(out, leftover_name, true, &names), keep = 0;

	for (size_t i = n; i-- > 0;) {
		struct stat st;

		if (fstatat(out->dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && st.st_size > 0 && keep < ASIDE_MAX) {
			keep++;
			continue;
		}
		if (unlinkat(out->dirfd, names[i], 0) == 0)
			fpd_info("removed %s/%s, an old leftover", out->dir, names[i]);
	}
	free_names(names, n);
}

/*
 * A partial file left by a killed daemon: keep its whole segments (for
 * plain text: up to its last complete sample) under a finished name that
 * is free, read as a stream in bounded memory; an empty one goes, one
 * with nothing whole in it is set aside as NAME.unrecoverable (the newest
 * few are kept).
 */
static void
recover_one(struct fpd_output *out, const char *partial)
{
	char final[sizeof(out->final)], aside[sizeof(out->partial) + 16];
	struct fpd_file_entry e = { 0 };
	off_t size = 0;
	ssize_t keep;
	int rc;

	/* ".NAME.partial" -> "NAME" */
	snprintf(final, sizeof(final), "%.*s", (int)(strlen(partial) - 9),
		 partial + 1);
	snprintf(aside, sizeof(aside), "%s%s", partial, ASIDE_SUFFIX);

	keep = count_file(out->dirfd, partial, kind_of(final), &e, &size);
	if (keep == -EINVAL)
		return;		/* not a regular file: not ours to touch */
	if (keep <= 0 || e.samples == 0) {
		if (size == 0) {
			if (unlinkat(out->dirfd, partial, 0) == 0)
				fpd_info("removed %s/%s: empty", out->dir, partial);
			return;
		}
		goto set_aside;
	}
	if (truncate_at(out, partial, keep) < 0)
		goto set_aside;
	rc = rename_free(out, partial, final, sizeof(final));
	if (rc < 0) {
		fpd_err("cannot recover %s/%s: %s; it stays as it is", out->dir,
			partial, strerror(-rc));
		out->unfinished++;
		return;
	}
	fsync(out->dirfd);
	snprintf(e.name, sizeof(e.name), "%s", final);
	e.bytes = (uint64_t)keep;
	e.recovered = true;
	add_index(out, &e);
	fpd_warn("recovered %s/%s left by an earlier run (%" PRIu64
		 " samples, %lld bytes cut)", out->dir, final, e.samples,
		 (long long)(size - keep));
	return;

set_aside:
	if (renameat2(out->dirfd, partial, out->dirfd, aside, RENAME_NOREPLACE) == 0)
		fpd_warn("set aside %s/%s: nothing in it could be recovered",
			 out->dir, aside);
}

static bool
partial_name(const struct fpd_output *out, const char *name, bool unused)
{
	return leftover_name(out, name, false);
}

static bool
finished_name(const struct fpd_output *out, const char *name, bool unused)
{
	return fpd_is_finished_name(out->node_s, name);
}

static bool
indexed(const struct fpd_output *out, const char *name)
{
	for (size_t i = 0; i < out->nindex; i++) {
		if (strcmp(out->index[i].name, name) == 0)
			return true;
	}
	return false;
}

/*
 * What an earlier run left: partial files are recovered, and finished
 * files the index does not list (a run killed between the rename and the
 * index update) are counted and added. @return whether the index changed.
 */
static bool
reconcile(struct fpd_output *out)
{
	char **names;
	size_t n = list_names(out, partial_name, false, &names);
	size_t before = out->nindex;

	for (size_t i = 0; i < n; i++)
		recover_one(out, names[i]);
	free_names(names, n);
	prune_aside(out);

	n = list_names(out, finished_name, false, &names);
	for (size_t i = 0; i < n; i++) {
		struct fpd_file_entry e = { 0 };
		off_t size = 0;
		ssize_t whole;

		if (indexed(out, names[i]))
			continue;
		whole = count_file(out->dirfd, names[i], kind_of(names[i]), &e, &size);
		if (whole == -EINVAL)
			continue;
		if (whole <= 0 || e.samples == 0 || whole != size) {
			fpd_warn("%s/%s is not in the index and cannot be accounted for (%s); left alone",
				 out->dir, names[i], whole < 0 ? strerror((int)-whole) :
				 "not whole segments");
			continue;
		}
		snprintf(e.name, sizeof(e.name), "%s", names[i]);
		e.bytes = (uint64_t)size;
		add_index(out, &e);
		fpd_info("%s/%s added to the index (%" PRIu64 " samples)", out->dir,
			 names[i], e.samples);
	}
	free_names(names, n);
	return out->nindex != before;
}

/* ---- index ---------------------------------------------------------------- */

static void
add_index(struct fpd_output *out, const struct fpd_file_entry *e)
{
	out->index = realloc(out->index, (out->nindex + 1) * sizeof(*out->index));
	if (!out->index)
		abort();
	out->index[out->nindex++] = *e;
}

/*
 * Room kept for the manifest and the index on a disk that fills up: a
 * file of RESERVE_PER_FILE bytes per file listed (at least RESERVE_MIN),
 * given up when they cannot be written otherwise, and taken again when
 * there is space. So the last manifest of a run on a full disk still
 * says what the files hold.
 */
#define RESERVE_NAME ".flame_profd.reserve"
#define RESERVE_MIN (256 * 1024)
#define RESERVE_PER_FILE 1024

static void
take_reserve(struct fpd_output *out)
{
	off_t want = RESERVE_MIN + (off_t)out->nindex * RESERVE_PER_FILE;
	int fd = openat(out->dirfd, RESERVE_NAME,
			O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, out->cfg.file_mode);
	struct stat st;

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < want &&
	    posix_fallocate(fd, 0, want) != 0 && ftruncate(fd, st.st_size) < 0)
		fpd_debug("cannot keep room for the manifest in %s", out->dir);
	close(fd);
}

static void
store_index(struct fpd_output *out)
{
	int rc = fpd_index_store(out->dirfd, out->index, &out->nindex,
				 out->cfg.node, out->otp_release,
				 out->cfg.options_json, out->cfg.file_mode);

	if ((rc == -ENOSPC || rc == -EDQUOT) &&
	    unlinkat(out->dirfd, RESERVE_NAME, 0) == 0)
		rc = fpd_index_store(out->dirfd, out->index, &out->nindex,
				     out->cfg.node, out->otp_release,
				     out->cfg.options_json, out->cfg.file_mode);
	if (rc < 0)
		fpd_warn("cannot write the manifest in %s: %s", out->dir,
			 strerror(-rc));
	take_reserve(out);
}

/* ---- life cycle ----------------------------------------------------------- */

struct fpd_output *
fpd_output_new(const struct fpd_output_config *config, int *err,
	       const char **what)
{
	struct fpd_output *out = calloc(1, sizeof(*out));
	cookie_io_functions_t io = { .write = seg_write };
	char probe[64];
	struct stat st;
	int fd, rc;

	if (!out)
		abort();
	out->cfg = *config;
	out->cfg.header = strdup(config->header);
	out->cfg.options_json = strdup(config->options_json);
	out->cfg.node = strdup(config->node);
	out->node_s = sanitize(config->node);
	out->dirfd = out->lockfd = out->fd = -1;
	if (asprintf(&out->dir, "%s/%s", config->dir, out->node_s) < 0)
		abort();

	*what = "cannot create the output directory";
	rc = mkdir_p(out->dir, config->dir_mode);
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

	*what = "cannot lock the output directory";
	out->lockfd = openat(out->dirfd, LOCK_NAME,
			     O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			     config->file_mode);
	if (out->lockfd < 0) {
		rc = -errno;
		goto fail;
	}
	if (flock(out->lockfd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		if (rc == -EWOULDBLOCK)
			*what = "another flame_profd is writing to the output directory";
		goto fail;
	}

	/* Fail now, not at the first rotation, if files cannot be made. */
	*what = "cannot write to the output directory";
	snprintf(probe, sizeof(probe), ".flame_profd-probe.%ld", (long)getpid());
	fd = openat(out->dirfd, probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	close(fd);
	unlinkat(out->dirfd, probe, 0);

	if (fpd_index_load(out->dirfd, &out->index, &out->nindex) < 0)
		fpd_warn("cannot read the index in %s; starting a new one", out->dir);
	if (reconcile(out))
		store_index(out);	/* in case this run writes no file */
	else
		take_reserve(out);

	out->comp = fpd_compressor_new(config->compress, config->level);
	out->seg = fopencookie(out, "w", io);
	if (!out->seg)
		abort();
	setvbuf(out->seg, NULL, _IONBF, 0);
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
	if (out->fd >= 0)
		fpd_output_finish(out);
	if (out->seg)
		fclose(out->seg);
	fpd_compressor_destroy(out->comp);
	if (out->lockfd >= 0)
		close(out->lockfd);	/* drops the lock */
	if (out->dirfd >= 0)
		close(out->dirfd);
	free(out->index);
	free(out->segbuf);
	free(out->dir);
	free(out->node_s);
	free((char *)out->cfg.header);
	free((char *)out->cfg.options_json);
	free((char *)out->cfg.node);
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
	return out->fd >= 0;
}

uint64_t
fpd_output_dropped(const struct fpd_output *out)
{
	return out->dropped_total;
}

void
fpd_output_set_otp_release(struct fpd_output *out, const char *release)
{
	snprintf(out->otp_release, sizeof(out->otp_release), "%s", release);
}

void
fpd_output_totals(const struct fpd_output *out, struct fpd_output_totals *t)
{
	t->written = out->written_total;
	t->dropped = out->dropped_total;
	t->unrecorded = out->pending_dropped + out->pending_skipped;
	t->unfinished = out->unfinished;
	t->fatal = out->fatal;
}

/* The open file's whole segments into a new file under the directory's
 * new descriptor (the old file's directory is gone). */
static int
carry_over(struct fpd_output *out)
{
	char buf[65536];
	int fd = openat(out->dirfd, out->partial,
			O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			out->cfg.file_mode);

	if (fd < 0)
		return -errno;
	for (off_t off = 0; off < out->good;) {
		size_t want = (size_t)(out->good - off) < sizeof(buf) ?
			      (size_t)(out->good - off) : sizeof(buf);
		ssize_t n = pread(out->fd, buf, want, off);

		if (n <= 0 || write_all(fd, buf, (size_t)n) < 0) {
			close(fd);
			unlinkat(out->dirfd, out->partial, 0);
			return n < 0 ? -errno : -EIO;
		}
		off += n;
	}
	close(out->fd);
	out->fd = fd;
	return 0;
}

/*
 * The output directory deleted under us (a cron job, an operator): make
 * it again, take the lock in it again, and carry the file being written
 * over, rather than write on into a directory nobody can see. If it
 * cannot be made again, the run ends (fpd_output_totals().fatal).
 */
static void
check_dir(struct fpd_output *out)
{
	struct stat st;
	int dirfd, lockfd, rc;

	if (out->fatal || fstat(out->dirfd, &st) < 0 || st.st_nlink > 0)
		return;
	rc = mkdir_p(out->dir, out->cfg.dir_mode);
	if (rc < 0)
		goto fail;
	dirfd = open(out->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		rc = -errno;
		goto fail;
	}
	lockfd = openat(dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
			out->cfg.file_mode);
	if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		if (lockfd >= 0)
			close(lockfd);
		close(dirfd);
		goto fail;
	}
	close(out->dirfd);
	close(out->lockfd);
	out->dirfd = dirfd;
	out->lockfd = lockfd;
	if (out->fd >= 0 && (rc = carry_over(out)) < 0) {
		fpd_err("output directory %s was deleted and made again, but the file being written could not be carried over: %s; its samples are dropped",
			out->dir, strerror(-rc));
		out->entry.dropped += out->entry.samples;
		out->dropped_total += out->entry.samples;
		close(out->fd);
		out->fd = -1;
		out->pending_dropped += out->entry.dropped;
		out->pending_skipped += out->entry.skipped;
		out->pending_events += out->entry.events;
		return;
	}
	fpd_warn("output directory %s was deleted: made it again%s", out->dir,
		 out->fd >= 0 ? ", with the file being written" : "");
	return;
fail:
	out->fatal = rc;
	fpd_err("output directory %s was deleted and cannot be made again: %s",
		out->dir, strerror(-rc));
	if (out->fd >= 0) {
		out->dropped_total += out->entry.samples;
		out->pending_dropped += out->entry.samples + out->entry.dropped;
		close(out->fd);
		out->fd = -1;
	}
}

static void
set_final_name(struct fpd_output *out, uint64_t ms)
{
	char stamp[40];

	out->final_ms = ms;
	if (ms > out->last_open_epoch_ms)
		out->last_open_epoch_ms = ms;
	fpd_format_utc(ms * 1000, stamp, sizeof(stamp), true);
	snprintf(out->final, sizeof(out->final), "%s.%s.perf%s", out->node_s,
		 stamp, fpd_compress_suffix(out->cfg.compress));
}

static int
open_file(struct fpd_output *out, uint64_t now_epoch_us)
{
	uint64_t ms = now_epoch_us / 1000;

	/* Names sort by time and never collide: one file per millisecond. */
	if (ms <= out->last_open_epoch_ms)
		ms = out->last_open_epoch_ms + 1;
	set_final_name(out, ms);
	snprintf(out->partial, sizeof(out->partial), ".%s.partial", out->final);

	check_dir(out);
	if (out->fatal)
		return -1;
	/* read-write: a file whose directory was deleted is copied over */
	out->fd = openat(out->dirfd, out->partial,
			 O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			 out->cfg.file_mode);
	if (out->fd < 0) {
		log_write_error(out, errno, "cannot create a file");
		return -1;
	}
	out->opened_mono_us = out->flushed_mono_us = fpd_now_mono_us();
	out->good = 0;
	memset(&out->entry, 0, sizeof(out->entry));
	snprintf(out->entry.name, sizeof(out->entry.name), "%s", out->final);
	out->entry.skipped = out->pending_skipped;
	out->entry.dropped = out->pending_dropped;
	out->entry.events = out->pending_events;
	out->pending_skipped = out->pending_dropped = out->pending_events = 0;
	out->seglen = 0;
	out->seg_samples = 0;
	fputs(out->cfg.header, out->seg);
	fpd_debug("writing %s/%s", out->dir, out->partial);
	return 0;
}

FILE *
fpd_output_stream(struct fpd_output *out, uint64_t now_epoch_us)
{
	if (out->fd < 0 && open_file(out, now_epoch_us) < 0)
		return NULL;
	return out->seg;
}

void
fpd_output_sample(struct fpd_output *out, uint64_t time_us)
{
	if (!out->seg_samples)
		out->seg_first_us = time_us;
	out->seg_last_us = time_us;
	out->seg_samples++;
	if (out->seglen >= SEGMENT_MAX)
		fpd_output_flush(out);
}

void
fpd_output_skipped(struct fpd_output *out, uint64_t n)
{
	if (out->fd >= 0)
		out->entry.skipped += n;
	else
		out->pending_skipped += n;
}

int
fpd_output_flush(struct fpd_output *out)
{
	const void *data;
	size_t len;
	int rc;

	out->flushed_mono_us = fpd_now_mono_us();
	if (out->fd < 0 || out->seglen == 0)
		return 0;
	check_dir(out);
	if (out->fd < 0)
		return -EIO;	/* the directory went and could not be made again */
	rc = fpd_compress_segment(out->comp, out->segbuf, out->seglen, &data, &len);
	if (rc == 0)
		rc = write_all(out->fd, data, len);
	if (rc < 0) {
		/* Cut back to the last whole segment; this one is lost. */
		if (ftruncate(out->fd, out->good) < 0 ||
		    lseek(out->fd, out->good, SEEK_SET) < 0)
			fpd_debug("cannot cut %s back: %s", out->partial, strerror(errno));
		out->entry.dropped += out->seg_samples;
		out->dropped_total += out->seg_samples;
		log_write_error(out, -rc, "write error");
	} else {
		out->good += (off_t)len;
		if (out->seg_samples) {
			if (!out->entry.samples)
				out->entry.first_us = out->seg_first_us;
			out->entry.last_us = out->seg_last_us;
			out->entry.samples += out->seg_samples;
		}
	}
	out->seglen = 0;
	out->seg_samples = 0;
	return rc;
}

int
fpd_output_finish(struct fpd_output *out)
{
	int rc = 0;

	if (out->fd < 0)
		return 0;
	fpd_output_flush(out);
	if (out->entry.samples == 0) {
		/* Nothing whole in it (all dropped): no empty files; what it
		 * counted goes to the next one. */
		close(out->fd);
		out->fd = -1;
		unlinkat(out->dirfd, out->partial, 0);
		out->pending_skipped += out->entry.skipped;
		out->pending_dropped += out->entry.dropped;
		out->pending_events += out->entry.events;
		return 0;
	}
	/* Whole segments only, even if cutting back after an error failed. */
	if (ftruncate(out->fd, out->good) < 0 || fsync(out->fd) < 0)
		rc = -errno;
	if (close(out->fd) < 0 && rc == 0)
		rc = -errno;
	out->fd = -1;
	/* Never over a finished file (a clock set back between runs could
	 * give the same name): the next free millisecond's name instead. */
	if (rc == 0)
		rc = rename_free(out, out->partial, out->final, sizeof(out->final));
	if (rc < 0) {
		/* Keep what is there under the partial name (the next start
		 * recovers it); never present an unsynced file as complete. */
		fpd_err("cannot finish %s/%s: %s; it stays as it is", out->dir,
			out->partial, rc == -EEXIST ? "no free name" : strerror(-rc));
		out->unfinished++;
		return rc;
	}
	snprintf(out->entry.name, sizeof(out->entry.name), "%s", out->final);
	fsync(out->dirfd);
	out->entry.bytes = (uint64_t)out->good;
	out->written_total += out->entry.samples;
	add_index(out, &out->entry);
	fpd_info("finished %s/%s (%" PRIu64 " samples, %" PRIu64 " bytes)",
		 out->dir, out->final, out->entry.samples, out->entry.bytes);

	fpd_retention_apply(out->dirfd, out->node_s, out->cfg.keep_files,
			    out->cfg.keep_bytes, out->cfg.keep_age_us,
			    fpd_now_epoch_us());
	store_index(out);
	return 0;
}

void
fpd_output_tick(struct fpd_output *out, uint64_t now_mono_us)
{
	if (out->fd < 0)
		return;
	if (now_mono_us - out->flushed_mono_us >= SEGMENT_US)
		fpd_output_flush(out);
	if (now_mono_us - out->opened_mono_us >= out->cfg.rotate_us ||
	    (out->cfg.rotate_bytes && (uint64_t)out->good >= out->cfg.rotate_bytes))
		fpd_output_finish(out);
}

int
fpd_output_chown(struct fpd_output *out, uid_t uid, gid_t gid)
{
	static const char *const files[] = {
		LOCK_NAME, ".flame_profd.index", "manifest.json", RESERVE_NAME,
	};

	if (fchown(out->dirfd, uid, gid) < 0)
		return -errno;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (fchownat(out->dirfd, files[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno != ENOENT)
			return -errno;
	}
	return 0;
}

void
fpd_output_event(struct fpd_output *out)
{
	if (out->fd >= 0)
		out->entry.events++;
	else
		out->pending_events++;
}
