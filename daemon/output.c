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
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output.h"
#include "compress.h"
#include "daemon-log.h"
#include "fs-safe.h"
#include "recorder.h"
#include "recover.h"
#include "retention.h"
#include "util.h"
#include "util-buf.h"
#include "util-mem.h"

#define LOCK_NAME ".flame_profd.lock"
#define SEGMENT_US 1000000u		/* at most this much lost on a crash */
#define SEGMENT_FIRST 65536u		/* a segment buffer's first size */
#define ERROR_LOG_INTERVAL_US 10000000u

struct fpd_output {
	struct fpd_output_config cfg;
	char *dir;		/* DIR/<node> */
	char *node_s;		/* node name, file-name safe */
	char otp_release[16];
	int dirfd;
	int lockfd;
	struct fpd_trust trust;		/* root and the run's user */
	struct fpd_made dir_made;	/* the node directory, if this run made it */
	struct fpd_made lock_made, reserve_made;
	struct fpd_compressor *comp;

	/* the open file */
	int fd;
	char partial[FP_PERF_PARTIAL_MAX];
	char final[FP_PERF_NAME_MAX];
	struct fpd_made file_made;
	uint64_t opened_mono_us;
	uint64_t last_open_epoch_ms;
	off_t good;		/* bytes of whole segments on disk */
	uint64_t flushed_mono_us;
	struct fpd_file_entry entry;

	/* the segment being filled */
	struct fp_text seg;
	uint64_t seg_samples, seg_first_us, seg_last_us;
	uint64_t pending_skipped;	/* counts for the next file */
	uint64_t pending_dropped;
	uint64_t pending_events;

	struct fpd_file_entry *index;
	size_t nindex;
	struct fpd_capture_entry *captures;	/* the flight recorder's */
	size_t ncaptures;
	bool index_due;		/* recovered, stored once the options are known */

	uint64_t dropped_total;
	fpd_output_finished_fn finished;	/* --push, or NULL */
	void *finished_data;
	uint64_t written_total;	/* samples in the files finished */
	unsigned unfinished;	/* files that could not be finished */
	int fatal;		/* the directory is gone for good: -errno */
	uint64_t last_error_log_mono;
	uint64_t errors_since_log;
};

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

/* The bookkeeping file @name: ours from an earlier run (checked as
 * fpd_fs_open_file() does) or made now; its identity in @made. */
static int
open_own(struct fpd_output *out, int dirfd, const char *name,
	 struct fpd_made *made, const char **why)
{
	struct stat st;
	int fd = fpd_fs_open_file(dirfd, name, O_RDWR, &out->trust, &st, why);

	if (fd >= 0) {
		fpd_fs_made_of(&st, made);
		return fd;
	}
	if (fd != -ENOENT)
		return fd;
	fd = fpd_fs_create(dirfd, name, O_RDWR, out->cfg.file_mode, made);
	if (fd == -EEXIST)
		fd = -EAGAIN;	/* made by someone else meanwhile */
	return fd;
}

static void
take_reserve(struct fpd_output *out)
{
	off_t want = RESERVE_MIN + (off_t)out->nindex * RESERVE_PER_FILE;
	const char *why = NULL;
	int fd = open_own(out, out->dirfd, RESERVE_NAME, &out->reserve_made, &why);
	struct stat st;

	if (fd < 0) {
		if (why)
			fpd_warn("%s/%s %s: not used to keep room for the manifest",
				 out->dir, RESERVE_NAME, why);
		return;
	}
	if (fstat(fd, &st) == 0 && st.st_size < want &&
	    posix_fallocate(fd, 0, want) != 0 && ftruncate(fd, st.st_size) < 0)
		fpd_debug("cannot keep room for the manifest in %s", out->dir);
	close(fd);
}

static void
store_index(struct fpd_output *out)
{
	struct fpd_index_extra extra = {
		.captures = out->captures, .ncaptures = &out->ncaptures,
		.store_captures = out->ncaptures > 0,
	};
	int rc;

	out->index_due = false;
	rc = fpd_index_store(out->dirfd, &out->trust, out->index, &out->nindex,
			     out->cfg.node, out->otp_release,
			     out->cfg.options_json, out->cfg.file_mode, &extra);

	if ((rc == -ENOSPC || rc == -EDQUOT) &&
	    fpd_fs_unlink_made(out->dirfd, RESERVE_NAME, &out->reserve_made) == 0)
		rc = fpd_index_store(out->dirfd, &out->trust, out->index,
				     &out->nindex, out->cfg.node,
				     out->otp_release, out->cfg.options_json,
				     out->cfg.file_mode, &extra);
	if (rc < 0)
		fpd_warn("cannot write the manifest in %s: %s", out->dir,
			 strerror(-rc));
	take_reserve(out);
}

/* ---- life cycle ----------------------------------------------------------- */

/* Why a directory was refused, for fpd_output_new()'s caller. */
static char refusal[4096 + 512];

static void
refuse(const char *path, const char *why)
{
	snprintf(refusal, sizeof(refusal),
		 "output directory %s %s: flame_profd writes only in a directory "
		 "of root or of the user it runs as that no other user can write, "
		 "reached through no link another user could make",
		 path, why);
}

/* --out, then DIR/<node> in it, each made if missing and checked
 * (fs-safe.h). */
static int
open_node_dir(struct fpd_output *out, int *dirfd, struct fpd_made *made,
	      const char **why, const char **which)
{
	int outfd, rc;

	*which = out->cfg.dir;
	rc = fpd_fs_open_dir(out->cfg.dir, out->cfg.dir_mode, &out->trust,
			     &outfd, NULL, why);
	if (rc < 0)
		return rc;
	*which = out->dir;
	rc = fpd_fs_open_subdir(outfd, out->node_s, out->cfg.dir_mode,
				&out->trust, dirfd, made, why);
	close(outfd);
	return rc;
}

/* fpd_output_new(): NULL with *@err an errno and *@what what failed, or
 * with *@err 0 and *@what the whole message when a path was refused. */
static struct fpd_output *
output_open(const struct fpd_output_config *config, int *err,
	    const char **what)
{
	struct fpd_output *out = xnew(struct fpd_output);
	const char *why = NULL, *which = config->dir;
	struct fpd_made probe_made;
	bool named = false;
	struct stat st;
	char probe[64];
	bool recovered;
	int fd, rc;

	out->cfg = *config;
	out->cfg.header = xstrdup(config->header);
	out->cfg.options_json = xstrdup(config->options_json);
	out->cfg.node = xstrdup(config->node);
	out->cfg.dir = xstrdup(config->dir);
	out->trust = (struct fpd_trust){ config->uid, config->gid };
	out->node_s = fp_perf_node_name(config->node);
	out->dirfd = out->lockfd = out->fd = -1;
	out->dir = xzalloc(strlen(config->dir) + strlen(out->node_s) + 2);
	sprintf(out->dir, "%s/%s", config->dir, out->node_s);

	*what = "cannot create the output directory";
	rc = open_node_dir(out, &out->dirfd, &out->dir_made, &why, &which);
	if (rc < 0)
		goto fail;
	/* Root's, but not made by this run: with --user it would not be
	 * handed over (fpd_output_chown()), so nothing is written there. */
	if (!out->dir_made.ino && fstat(out->dirfd, &st) == 0 &&
	    st.st_uid != config->uid) {
		snprintf(refusal, sizeof(refusal),
			 "output directory %s was not made by this run and belongs "
			 "to uid %u, not to the user flame_profd runs as: not handed "
			 "over (chown it to that user, or remove it)", out->dir,
			 (unsigned)st.st_uid);
		why = refusal;
		named = true;
		rc = -EPERM;
		goto fail;
	}

	*what = "cannot lock the output directory";
	out->lockfd = open_own(out, out->dirfd, LOCK_NAME, &out->lock_made, &why);
	if (out->lockfd < 0) {
		rc = out->lockfd;
		which = out->dir;
		if (why) {	/* named for the file, not the directory */
			snprintf(refusal, sizeof(refusal),
				 "lock file %s/%s %s: remove it", out->dir,
				 LOCK_NAME, why);
			named = true;
		}
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
	/* a name taken (by a leftover, a link) is passed over */
	fd = -EEXIST;
	for (int i = 0; fd == -EEXIST && i < 100; i++) {
		snprintf(probe, sizeof(probe), ".flame_profd-probe.%ld.%d",
			 (long)getpid(), i);
		fd = fpd_fs_create(out->dirfd, probe, O_WRONLY, 0600, &probe_made);
	}
	if (fd < 0) {
		rc = fd;
		goto fail;
	}
	close(fd);
	fpd_fs_unlink_made(out->dirfd, probe, &probe_made);

	if (fpd_index_load(out->dirfd, &out->trust, &out->index, &out->nindex) < 0)
		fpd_warn("cannot read the index in %s; starting a new one", out->dir);
	if (fpd_captures_load(out->dirfd, &out->trust, &out->captures,
			      &out->ncaptures) < 0)
		fpd_warn("cannot read the list of captures in %s; starting a new one",
			 out->dir);
	/* What was recovered is stored now in case this run writes no file,
	 * but not before the options the manifest records are known. A run
	 * killed before it stores them leaves the files finished and
	 * unlisted, and the next start lists them (recover.c). */
	recovered = fpd_recover(out->dirfd, out->dir, out->node_s, &out->trust,
				&out->index, &out->nindex, &out->unfinished);
	if (recovered && !config->options_later) {
		store_index(out);
	} else {
		out->index_due = recovered;
		take_reserve(out);
	}

	out->comp = fpd_compressor_new(config->compress, config->level);
	return out;

fail:
	*err = -rc;
	if (why) {
		if (!named)
			refuse(which, why);
		*what = refusal;
		*err = 0;
	}
	fpd_output_destroy(out);
	return NULL;
}

int
fpd_output_new(const struct fpd_output_config *config, struct fpd_output **out)
{
	const char *what = "";
	int err = 0;

	*out = output_open(config, &err, &what);
	if (*out)
		return 0;
	if (!err) {
		/* refused as not safe: the text says which and why */
		fpd_fatal("%s", what);
		return -EPERM;
	}
	fpd_fatal("%s: %s/%s: %s", what, config->dir, config->node,
		  strerror(err));
	return -err;
}

void
fpd_output_destroy(struct fpd_output *out)
{
	if (!out)
		return;
	if (out->fd >= 0)
		fpd_output_finish(out);
	if (out->index_due)
		store_index(out);
	fpd_compressor_destroy(out->comp);
	if (out->lockfd >= 0)
		close(out->lockfd);	/* drops the lock */
	if (out->dirfd >= 0)
		close(out->dirfd);
	free(out->index);
	free(out->captures);
	fp_text_free(&out->seg);
	free(out->dir);
	free(out->node_s);
	free((char *)out->cfg.header);
	free((char *)out->cfg.options_json);
	free((char *)out->cfg.node);
	free((char *)out->cfg.dir);
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
fpd_output_settle_options(struct fpd_output *out, const char *json)
{
	free((char *)out->cfg.options_json);
	out->cfg.options_json = xstrdup(json);
	if (out->index_due)
		store_index(out);
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
	struct fpd_made made;
	int fd = fpd_fs_create(out->dirfd, out->partial, O_RDWR,
			       out->cfg.file_mode, &made);

	if (fd < 0)
		return fd;
	for (off_t off = 0; off < out->good;) {
		size_t want = (size_t)(out->good - off) < sizeof(buf) ?
			      (size_t)(out->good - off) : sizeof(buf);
		ssize_t n = pread(out->fd, buf, want, off);

		if (n <= 0 || fpd_write_all(fd, buf, (size_t)n) < 0) {
			close(fd);
			fpd_fs_unlink_made(out->dirfd, out->partial, &made);
			return n < 0 ? -errno : -EIO;
		}
		off += n;
	}
	close(out->fd);
	out->fd = fd;
	out->file_made = made;
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
	const char *why = NULL, *which;
	struct fpd_made dir_made, lock_made;
	struct stat st;
	int dirfd, lockfd, rc;

	if (out->fatal || fstat(out->dirfd, &st) < 0 || st.st_nlink > 0)
		return;
	rc = open_node_dir(out, &dirfd, &dir_made, &why, &which);
	if (rc < 0) {
		if (why) {
			refuse(which, why);
			fpd_err("%s", refusal);
		}
		goto fail;
	}
	lockfd = open_own(out, dirfd, LOCK_NAME, &lock_made, &why);
	if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) < 0) {
		rc = lockfd < 0 ? lockfd : -errno;
		if (lockfd >= 0)
			close(lockfd);
		close(dirfd);
		goto fail;
	}
	close(out->dirfd);
	close(out->lockfd);
	out->dirfd = dirfd;
	out->lockfd = lockfd;
	out->dir_made = dir_made;
	out->lock_made = lock_made;
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

/* Names tried, one millisecond apart, when the next one is taken. */
#define NAME_TRIES 1000

static int
open_file(struct fpd_output *out, uint64_t now_epoch_us)
{
	uint64_t ms = now_epoch_us / 1000;
	unsigned taken = 0;
	struct stat st;

	check_dir(out);
	if (out->fatal)
		return -1;
	/* Names sort by time and never collide: one file per millisecond. */
	if (ms <= out->last_open_epoch_ms)
		ms = out->last_open_epoch_ms + 1;
	/* A name already there (a file, or a link someone planted at the
	 * predictable next name) is not ours: the next free one is used. */
	for (;; ms++) {
		/* a node name is an atom of at most 255 bytes: the names fit */
		fp_perf_name_format(out->final, sizeof(out->final), out->node_s,
				    ms, (enum fp_perf_compress)out->cfg.compress);
		fp_perf_partial_format(out->partial, sizeof(out->partial),
				       out->final);
		out->fd = -EEXIST;
		if (fstatat(out->dirfd, out->final, &st, AT_SYMLINK_NOFOLLOW) < 0)
			out->fd = fpd_fs_create(out->dirfd, out->partial, O_RDWR,
						out->cfg.file_mode,
						&out->file_made);
		if (out->fd != -EEXIST || ++taken == NAME_TRIES)
			break;
	}
	out->last_open_epoch_ms = ms;
	if (taken && out->fd >= 0)
		fpd_warn("%s: %u file name%s already taken by something not "
			 "ours; writing %s", out->dir, taken, taken > 1 ? "s" : "",
			 out->partial);
	if (out->fd < 0) {
		log_write_error(out, -out->fd, "cannot create a file");
		out->fd = -1;
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
	out->seg.len = 0;
	out->seg_samples = 0;
	fp_text_reserve_first(&out->seg, 1, SEGMENT_FIRST);
	fp_text_puts(&out->seg, out->cfg.header);
	fpd_debug("writing %s/%s", out->dir, out->partial);
	return 0;
}

struct fp_text *
fpd_output_buffer(struct fpd_output *out, bool open, uint64_t now_epoch_us,
		  bool *fresh)
{
	*fresh = false;
	if (out->fd < 0) {
		if (!open || open_file(out, now_epoch_us) < 0)
			return NULL;
		*fresh = true;
	}
	return &out->seg;
}

int
fpd_output_sample(struct fpd_output *out, uint64_t time_us)
{
	if (!out->seg_samples)
		out->seg_first_us = time_us;
	out->seg_last_us = time_us;
	out->seg_samples++;
	if (out->seg.len >= FP_PERF_SEGMENT_MAX)
		return fpd_output_flush(out);
	return 0;
}

void
fpd_output_skipped(struct fpd_output *out, uint64_t n)
{
	if (out->cfg.captures_only)
		return;
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
	if (out->fd < 0 || out->seg.len == 0)
		return 0;
	check_dir(out);
	if (out->fd < 0)
		return -EIO;	/* the directory went and could not be made again */
	rc = fpd_compress_segment(out->comp, out->seg.buf, out->seg.len, &data,
				  &len);
	if (rc == 0)
		rc = fpd_write_all(out->fd, data, len);
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
	out->seg.len = 0;
	out->seg_samples = 0;
	return rc;
}

void
fpd_output_set_finished(struct fpd_output *out, fpd_output_finished_fn fn,
			void *data)
{
	out->finished = fn;
	out->finished_data = data;
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
		fpd_fs_unlink_made(out->dirfd, out->partial, &out->file_made);
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
		rc = fpd_rename_free(out->dirfd, out->partial, out->final,
				     sizeof(out->final));
	if (rc < 0) {
		/* Keep what is there under the partial name (the next start
		 * recovers it); never present an unsynced file as complete. */
		fpd_err("cannot finish %s/%s: %s; it stays as it is", out->dir,
			out->partial, rc == -EEXIST ? "no free name" : strerror(-rc));
		out->unfinished++;
		return rc;
	}
	snprintf(out->entry.name, sizeof(out->entry.name), "%s", out->final);
	out->entry.made = out->file_made;
	fsync(out->dirfd);
	out->entry.bytes = (uint64_t)out->good;
	out->written_total += out->entry.samples;
	fpd_index_add(&out->index, &out->nindex, &out->entry);
	fpd_info("finished %s/%s (%" PRIu64 " samples, %" PRIu64 " bytes)",
		 out->dir, out->final, out->entry.samples, out->entry.bytes);
	if (out->finished)
		out->finished(out->finished_data, out->dirfd, out->final);

	fpd_retention_apply(out->dirfd, out->index, &out->nindex,
			    out->cfg.keep_files, out->cfg.keep_bytes,
			    out->cfg.keep_age_us, fpd_now_epoch_us());
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
fpd_output_chown(struct fpd_output *out, uid_t uid, gid_t gid,
		 const char **why)
{
	static const char *const files[] = {
		".flame_profd.index", "manifest.json", ".flame_profd.captures",
	};
	struct stat st;
	int rc;

	*why = NULL;
	if (!out->dir_made.ino) {
		/* Not made by this run: never handed over, only checked. */
		if (fstat(out->dirfd, &st) < 0)
			return -errno;
		if (st.st_uid != uid) {
			*why = "was not made by this run and belongs to another user";
			return -EPERM;
		}
		return 0;
	}
	rc = fpd_fs_chown_made(out->dirfd, NULL, &out->dir_made, uid, gid);
	if (rc < 0)
		return rc;
	/* In a directory this run made, only it wrote these. */
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct fpd_made made;

		if (fstatat(out->dirfd, files[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		fpd_fs_made_of(&st, &made);
		rc = fpd_fs_chown_made(out->dirfd, files[i], &made, uid, gid);
		if (rc < 0)
			return rc;
	}
	rc = fpd_fs_chown_made(out->dirfd, LOCK_NAME, &out->lock_made, uid, gid);
	if (rc < 0)
		return rc;
	rc = fpd_fs_chown_made(out->dirfd, RESERVE_NAME, &out->reserve_made, uid, gid);
	return rc == -ENOENT || rc == -ESTALE ? 0 : rc;
}

void
fpd_output_event(struct fpd_output *out)
{
	if (out->cfg.captures_only)
		return;
	if (out->fd >= 0)
		out->entry.events++;
	else
		out->pending_events++;
}

/* ---- the flight recorder's captures ---------------------------------- */

int
fpd_output_dirfd(const struct fpd_output *out)
{
	return out->dirfd;
}

const struct fpd_output_config *
fpd_output_config(const struct fpd_output *out)
{
	return &out->cfg;
}

const char *
fpd_output_node_name(const struct fpd_output *out)
{
	return out->node_s;
}

void
fpd_output_add_capture(struct fpd_output *out, const struct fpd_capture_entry *e)
{
	out->captures = xrealloc(out->captures,
				 (out->ncaptures + 1) * sizeof(*out->captures));
	out->captures[out->ncaptures++] = *e;
	fpd_captures_apply(out->dirfd, out->captures, &out->ncaptures,
			   out->cfg.keep_captures);
	store_index(out);
}

/* ---- as the recorder's destination ------------------------------------ */

static struct fp_text *
dest_buffer(void *data, bool open, uint64_t now_epoch_us, bool *fresh)
{
	return fpd_output_buffer(data, open, now_epoch_us, fresh);
}

static int
dest_sample(void *data, uint64_t time_us)
{
	return fpd_output_sample(data, time_us);
}

static void
dest_skipped(void *data, uint64_t n)
{
	fpd_output_skipped(data, n);
}

static const struct fpd_record_dest_ops output_dest_ops = {
	.buffer = dest_buffer,
	.sample = dest_sample,
	.skipped = dest_skipped,
};

struct fpd_record_dest
fpd_output_dest(struct fpd_output *out)
{
	return (struct fpd_record_dest){ .ops = &output_dest_ops, .data = out };
}
