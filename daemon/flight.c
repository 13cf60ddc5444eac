/*
 * flame_profd — the flight recorder.
 *
 * Records are appended to a text segment as the recorder formats them
 * (the ring is its second destination). About once a second, or when the
 * segment reaches a fraction of the cap, it is compressed into one zstd
 * frame and the frame joins the ring; frames whose samples all fell out
 * of the window go, oldest first, and so do the oldest while the frames
 * and the segment together pass the cap. A frame never changes once
 * made, so a capture writes the ring's frames as they are: a file of
 * concatenated frames is what continuous files are (docs/FORMAT.md), and
 * every reader opens it.
 *
 * A capture is begun at the next tick after a trigger fires (a trigger is
 * checked inside the recorder's write, where no file is written): a
 * directory capture.<time>.<kind> of the node directory, a file in it
 * under its partial name holding the header, a note naming the trigger
 * and every frame of the ring; each frame sealed afterwards is added,
 * until --after has passed since the trigger. The file is then finished
 * as continuous files are (fsync, rename, fsync the directories) and
 * listed in the manifest. While a capture is being written, and for
 * --trigger-holdoff after a trigger's capture, that trigger is held off.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flight.h"
#include "compress.h"
#include "daemon-log.h"
#include "fs-safe.h"
#include "output.h"
#include "recover.h"
#include "retention.h"
#include "source.h"
#include "util.h"
#include "util-buf.h"
#include "util-escape.h"
#include "util-mem.h"
#include "fp/perf-file.h"
#include "fp/term.h"

#define SEAL_US 1000000u		/* a frame a second */
#define TEXT_MIN (64u << 10)		/* the segment's limit, at least ... */
#define TEXT_MAX (1u << 20)		/* ... and at most */
#define SEEN_MAX 1024			/* appears: processes remembered */
#define REPORT_US (10u * 1000000u)	/* the ring's state: debug, */
#define REPORT_INFO_US (60u * 1000000u)	/* ... and info */
#define HOUR_US (3600ull * 1000000u)

struct frame {
	void *data;			/* one zstd frame */
	size_t len;
	uint64_t seq;
	uint64_t first_us, last_us, samples;
};

struct capture {
	bool wanted, active;
	bool burst;			/* the after-window's burst is on */
	int trigger;			/* index in triggers, -1: a signal, ctl */
	const char *kind;		/* the directory's: "mailbox", "ctl" */
	uint64_t end_us;		/* wall clock: trigger + --after */
	uint64_t next_seq;		/* the next frame to write */
	int dirfd, fd;
	char partial[FP_PERF_PARTIAL_MAX];
	struct fpd_capture_entry e;
};

struct fpd_flight {
	struct fpd_source source;	/* first: the loop's handle */
	struct fpd_flight_config cfg;
	struct fpd_output *out;
	struct fpd_compressor *comp;
	size_t text_max;

	struct fp_text seg;		/* the segment being filled */
	uint64_t seg_first_us, seg_last_us, seg_samples;
	uint64_t sealed_mono;

	struct frame *frames;		/* frames[head .. head + n) */
	size_t head, n, cap;
	uint64_t next_seq;
	uint64_t frame_bytes;

	struct capture cap_;
	uint64_t *holdoff_until;	/* per trigger, monotonic µs */
	uint64_t *over_since;		/* per gauge trigger, wall clock µs */
	struct fpd_growth *growth;	/* per growth trigger */
	uint64_t *began;		/* when the last max_per_hour captures
					 * began, monotonic µs, a ring */
	size_t nbegan, began_next;
	uint64_t capped_since;		/* capped since the last capture */
	struct fp_pid seen[SEEN_MAX];	/* appears: processes that matched */
	uint64_t nseen;			/* ... ever (seen[] holds the last) */
	uint64_t reported_mono, reported_info_mono;
	struct fpd_flight_stats stats;
};

static void
note_bytes(struct fpd_flight *f)
{
	f->stats.bytes = f->frame_bytes + f->seg.cap;
	if (f->stats.bytes > f->stats.peak_bytes)
		f->stats.peak_bytes = f->stats.bytes;
}

static void
drop_oldest(struct fpd_flight *f)
{
	struct frame *fr = &f->frames[f->head];

	f->frame_bytes -= fr->len;
	f->stats.samples -= fr->samples;
	f->stats.dropped_frames++;
	free(fr->data);
	f->head++;
	f->n--;
	if (f->n == 0)
		f->head = 0;
}

/* Frames beyond the window (all their samples older than the newest
 * sample's time less the window) and beyond the cap go, oldest first;
 * the newest frame always stays. */
static void
trim(struct fpd_flight *f)
{
	uint64_t newest;

	if (!f->n)
		return;
	newest = f->frames[f->head + f->n - 1].last_us;
	while (f->n > 1 &&
	       (f->frames[f->head].last_us + f->cfg.window_us < newest ||
		f->frame_bytes + f->seg.cap > f->cfg.max_bytes))
		drop_oldest(f);
	f->stats.frames = f->n;
	f->stats.oldest_us = f->frames[f->head].first_us;
	f->stats.newest_us = newest;
}

static void
push_frame(struct fpd_flight *f, const void *data, size_t len)
{
	struct frame *fr;

	if (f->head + f->n == f->cap) {
		if (f->head > f->cap / 2) {
			memmove(f->frames, f->frames + f->head,
				f->n * sizeof(*f->frames));
			f->head = 0;
		} else {
			fp_grow((void **)&f->frames, &f->cap, f->n + f->head + 1,
				sizeof(*f->frames), 64);
		}
	}
	fr = &f->frames[f->head + f->n++];
	*fr = (struct frame){
		.data = xrealloc(NULL, len), .len = len, .seq = f->next_seq++,
		.first_us = f->seg_first_us, .last_us = f->seg_last_us,
		.samples = f->seg_samples,
	};
	memcpy(fr->data, data, len);
	f->frame_bytes += len;
	f->stats.samples += fr->samples;
}

static void capture_progress(struct fpd_flight *f);

void
fpd_flight_seal(struct fpd_flight *f)
{
	const void *data;
	size_t len;

	f->sealed_mono = fpd_now_mono_us();
	if (!f->seg_samples) {
		/* notes alone wait for the next sample: a frame holds one */
		return;
	}
	if (fpd_compress_segment(f->comp, f->seg.buf, f->seg.len, &data,
				 &len) < 0) {
		fpd_err("flight recorder: cannot compress a segment; its %" PRIu64
			" samples are dropped", f->seg_samples);
	} else {
		push_frame(f, data, len);
	}
	f->seg.len = 0;
	f->seg_samples = 0;
	trim(f);
	note_bytes(f);
	capture_progress(f);
}

/* ---- captures ------------------------------------------------------------ */

static void
capture_close(struct fpd_flight *f)
{
	struct capture *c = &f->cap_;

	if (c->burst && f->cfg.burst)
		f->cfg.burst(f->cfg.burst_data, false);
	c->burst = false;
	if (c->fd >= 0)
		close(c->fd);
	if (c->dirfd >= 0)
		close(c->dirfd);
	c->fd = c->dirfd = -1;
	c->active = false;
}

/* A capture that cannot be written (@err, logged with @what) or holds
 * nothing (@err 0) is given up whole: a half capture presented as
 * finished would mislead more than none. */
static void
capture_abandon(struct fpd_flight *f, int err, const char *what)
{
	struct capture *c = &f->cap_;

	if (err)
		fpd_err("flight recorder: %s %s/%s: %s; capture given up", what,
			fpd_output_dir(f->out), c->e.dir, strerror(-err));
	if (c->fd >= 0 && c->partial[0])
		fpd_fs_unlink_made(c->dirfd, c->partial, &c->e.made);
	if (c->dirfd >= 0)
		fpd_fs_rmdir_made(fpd_output_dirfd(f->out), c->e.dir,
				  &c->e.dir_made);
	capture_close(f);
}

static int
write_frame(struct fpd_flight *f, const struct frame *fr)
{
	struct capture *c = &f->cap_;
	int rc = fpd_write_all(c->fd, fr->data, fr->len);

	if (rc < 0)
		return rc;
	if (!c->e.samples)
		c->e.first_us = fr->first_us;
	c->e.last_us = fr->last_us;
	c->e.samples += fr->samples;
	c->e.bytes += fr->len;
	c->next_seq = fr->seq + 1;
	return 0;
}

/* "capture.20261127T091502.123Z.mailbox" */
static void
capture_dir_name(char *buf, size_t size, uint64_t us, const char *kind)
{
	time_t secs = (time_t)(us / 1000000);
	struct tm tm;
	char stamp[32];

	gmtime_r(&secs, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%S", &tm);
	snprintf(buf, size, "capture.%s.%03uZ.%s", stamp,
		 (unsigned)(us / 1000 % 1000), kind);
}

static void
capture_begin(struct fpd_flight *f)
{
	const struct fpd_output_config *oc = fpd_output_config(f->out);
	struct fpd_trust trust = { oc->uid, oc->gid };
	struct capture *c = &f->cap_;
	struct fp_text head = { 0 };
	char final[FP_PERF_NAME_MAX], when[40];
	const char *why = NULL;
	const void *data;
	uint64_t first_ms;
	size_t len;
	int rc;

	c->wanted = false;
	c->active = true;
	c->fd = c->dirfd = -1;
	c->partial[0] = '\0';
	rc = fpd_fs_open_subdir(fpd_output_dirfd(f->out), c->e.dir,
				oc->dir_mode, &trust, &c->dirfd, &c->e.dir_made,
				&why);
	if (rc < 0) {
		if (why)
			fpd_err("flight recorder: capture directory %s/%s %s",
				fpd_output_dir(f->out), c->e.dir, why);
		capture_abandon(f, rc, "cannot make");
		return;
	}
	/* named, as continuous files are, for its first sample */
	first_ms = (f->n ? f->frames[f->head].first_us : c->e.trigger_us) / 1000;
	fp_perf_name_format(final, sizeof(final), fpd_output_node_name(f->out),
			    first_ms, FP_PERF_ZSTD);
	snprintf(c->e.name, sizeof(c->e.name), "%s", final);
	fp_perf_partial_format(c->partial, sizeof(c->partial), final);
	c->fd = fpd_fs_create(c->dirfd, c->partial, O_RDWR, oc->file_mode,
			      &c->e.made);
	if (c->fd < 0) {
		rc = c->fd;
		c->partial[0] = '\0';
		capture_abandon(f, rc, "cannot create a file in");
		return;
	}

	fpd_format_utc(c->e.trigger_us, when, sizeof(when));
	fp_text_puts(&head, f->cfg.header);
	fp_text_puts(&head, "# flame_profd: ");
	fp_text_puts(&head, when);
	fp_text_puts(&head, " capture: ");
	fp_text_puts(&head, c->e.trigger);
	if (c->e.reason[0]) {
		fp_text_puts(&head, " reason: ");
		fp_text_puts(&head, c->e.reason);
	}
	if (c->trigger >= 0) {
		fp_text_puts(&head, " fired: ");
		fp_text_put_u64(&head, (uint64_t)c->e.value);
		if (c->e.pid[0]) {
			fp_text_puts(&head, " on ");
			fp_text_puts(&head, c->e.pid);
		}
	}
	fp_text_putc(&head, '\n');
	rc = fpd_compress_segment(f->comp, head.buf, head.len, &data, &len);
	if (rc == 0)
		rc = fpd_write_all(c->fd, data, len);
	if (rc == 0)
		c->e.bytes = len;
	fp_text_free(&head);
	for (size_t i = 0; rc == 0 && i < f->n; i++)
		rc = write_frame(f, &f->frames[f->head + i]);
	if (rc < 0) {
		capture_abandon(f, rc, "cannot write");
		return;
	}
	c->next_seq = f->next_seq;
	if (f->cfg.burst) {
		c->burst = true;
		f->cfg.burst(f->cfg.burst_data, true);
	}
	fpd_debug("flight recorder: writing %s/%s/%s", fpd_output_dir(f->out),
		  c->e.dir, c->partial);
}

static void
capture_finish(struct fpd_flight *f)
{
	struct capture *c = &f->cap_;
	char final[FP_PERF_NAME_MAX];
	int rc = 0;

	if (!c->e.samples) {
		fpd_warn("flight recorder: capture %s holds no sample; not kept",
			 c->e.dir);
		capture_abandon(f, 0, NULL);
		return;
	}
	if (fsync(c->fd) < 0)
		rc = -errno;
	if (close(c->fd) < 0 && rc == 0)
		rc = -errno;
	c->fd = -1;
	snprintf(final, sizeof(final), "%s", c->e.name);
	if (rc == 0)
		rc = fpd_rename_free(c->dirfd, c->partial, final, sizeof(final));
	if (rc < 0) {
		fpd_err("flight recorder: cannot finish %s/%s/%s: %s; it stays as it is",
			fpd_output_dir(f->out), c->e.dir, c->partial,
			strerror(-rc));
		capture_close(f);
		return;
	}
	snprintf(c->e.name, sizeof(c->e.name), "%s", final);
	fsync(c->dirfd);
	fsync(fpd_output_dirfd(f->out));
	f->stats.captures++;
	fpd_info("flight recorder: capture %s/%s/%s written (%s, %" PRIu64
		 " samples over %.1f s, %" PRIu64 " bytes)",
		 fpd_output_dir(f->out), c->e.dir, c->e.name, c->e.trigger,
		 c->e.samples, (double)(c->e.last_us - c->e.first_us) / 1e6,
		 c->e.bytes);
	fpd_output_add_capture(f->out, &c->e);
	if (c->trigger >= 0)
		f->holdoff_until[c->trigger] = fpd_now_mono_us() +
					       f->cfg.holdoff_us;
	capture_close(f);
}

/* Frames sealed since the last call go to the capture being written. */
static void
capture_progress(struct fpd_flight *f)
{
	struct capture *c = &f->cap_;
	int rc = 0;

	if (!c->active)
		return;
	for (size_t i = 0; rc == 0 && i < f->n; i++) {
		const struct frame *fr = &f->frames[f->head + i];

		if (fr->seq >= c->next_seq)
			rc = write_frame(f, fr);
	}
	if (rc < 0)
		capture_abandon(f, rc, "cannot write");
}

/* Whether --max-captures-per-hour captures began in the hour before
 * @now (monotonic); if not, one begins now. */
static bool
hour_full(struct fpd_flight *f, uint64_t now)
{
	size_t n = f->cfg.max_per_hour;

	/* the ring's next slot holds the oldest of the last n */
	if (f->nbegan == n && now - f->began[f->began_next] < HOUR_US)
		return true;
	f->began[f->began_next] = now;
	f->began_next = (f->began_next + 1) % n;
	if (f->nbegan < n)
		f->nbegan++;
	return false;
}

static void
note_last(struct fpd_flight *f, const char *trigger, const char *reason,
	  uint64_t now_us, const char *outcome)
{
	struct fpd_flight_stats *s = &f->stats;

	snprintf(s->last_trigger, sizeof(s->last_trigger), "%s", trigger);
	snprintf(s->last_reason, sizeof(s->last_reason), "%s", reason);
	s->last_trigger_us = now_us;
	s->last_outcome = outcome;
}

/* @reason: escaped already, or "". */
static int
fire(struct fpd_flight *f, const char *trigger, const char *kind,
     int64_t value, const char *pid, const char *reason, uint64_t now_us)
{
	struct capture *c = &f->cap_;
	uint64_t now = fpd_now_mono_us();
	char after[32];
	int idx = -1;

	if (!f->out)
		return -ENOTDIR;
	for (size_t i = 0; i < f->cfg.ntriggers; i++) {
		if (strcmp(f->cfg.triggers[i].text, trigger) == 0)
			idx = (int)i;
	}
	if (c->wanted || c->active ||
	    (idx >= 0 && now < f->holdoff_until[idx])) {
		f->stats.suppressed++;
		note_last(f, trigger, reason, now_us, "held off");
		fpd_debug("flight recorder: %s held off (%s)", trigger,
			  c->wanted || c->active ? "a capture is being written" :
			  "--trigger-holdoff");
		return -EBUSY;
	}
	if (hour_full(f, now)) {
		/* a flapping condition or alert fills no disk: said once a
		 * capture's worth, counted always */
		f->stats.capped++;
		f->capped_since++;
		note_last(f, trigger, reason, now_us, "capped");
		fpd_log(f->capped_since == 1 ? FP_LOG_WARNING : FP_LOG_DEBUG,
			"flight recorder: %s fired, but %u captures began in the "
			"last hour (--max-captures-per-hour): nothing written, "
			"%" PRIu64 " suppressed so far", trigger,
			f->cfg.max_per_hour, f->stats.capped);
		return -EDQUOT;
	}
	memset(&c->e, 0, sizeof(c->e));
	c->wanted = true;
	c->trigger = idx;
	c->kind = kind;
	snprintf(c->e.trigger, sizeof(c->e.trigger), "%s", trigger);
	snprintf(c->e.pid, sizeof(c->e.pid), "%s", pid ? pid : "");
	snprintf(c->e.reason, sizeof(c->e.reason), "%s", reason);
	c->e.value = value;
	c->e.trigger_us = now_us;
	c->e.capped = f->capped_since;
	f->capped_since = 0;
	capture_dir_name(c->e.dir, sizeof(c->e.dir), now_us, kind);
	c->end_us = now_us + f->cfg.after_us;
	note_last(f, trigger, reason, now_us, "captured");
	fpd_format_duration(f->cfg.after_us, after, sizeof(after));
	if (idx >= 0)
		fpd_info("flight recorder: %s fired (%" PRId64 "%s%s): capturing "
			 "what it holds and the next %s", trigger, value,
			 pid ? " on " : "", pid ? pid : "", after);
	else
		fpd_info("flight recorder: %s%s%s: capturing what it holds and "
			 "the next %s", trigger, *reason ? " " : "", reason,
			 after);
	return 0;
}

int
fpd_flight_fire(struct fpd_flight *f, const char *trigger, int64_t value,
		const char *pid, uint64_t now_us)
{
	const char *kind = "signal";

	for (size_t i = 0; i < f->cfg.ntriggers; i++) {
		if (strcmp(f->cfg.triggers[i].text, trigger) == 0)
			kind = fpd_trigger_kind_name(f->cfg.triggers[i].kind);
	}
	return fire(f, trigger, kind, value, pid, "", now_us);
}

int
fpd_flight_fire_ctl(struct fpd_flight *f, const char *reason, uint64_t now_us,
		    char *dir, size_t size)
{
	struct fp_text esc = { 0 };
	size_t len = strnlen(reason, FPD_CAPTURE_REASON_RAW);
	int rc;

	/* text an alert or a user wrote: shown only escaped */
	fp_text_put_escaped(&esc, reason, len, NULL);
	fp_text_putc(&esc, '\0');
	rc = fire(f, "ctl", "ctl", 0, NULL, esc.buf, now_us);
	fp_text_free(&esc);
	if (rc == 0 && dir)
		snprintf(dir, size, "%s", f->cap_.e.dir);
	return rc;
}

void
fpd_flight_set_burst(struct fpd_flight *f, void (*burst)(void *data, bool on),
		     void *data)
{
	f->cfg.burst = burst;
	f->cfg.burst_data = data;
}

const char *
fpd_flight_dir(const struct fpd_flight *f)
{
	return f->out ? fpd_output_dir(f->out) : NULL;
}

/* ---- as the recorder's destination --------------------------------------- */

static struct fp_text *
dest_buffer(void *data, bool open, uint64_t now_epoch_us, bool *fresh)
{
	struct fpd_flight *f = data;

	(void)open;
	(void)now_epoch_us;
	*fresh = false;
	return &f->seg;
}

static int
dest_sample(void *data, uint64_t time_us)
{
	struct fpd_flight *f = data;

	if (!f->seg_samples)
		f->seg_first_us = time_us;
	f->seg_last_us = time_us;
	f->seg_samples++;
	if (f->seg.len >= f->text_max)
		fpd_flight_seal(f);
	else
		note_bytes(f);
	return 0;
}

static void
dest_skipped(void *data, uint64_t n)
{
	(void)data;
	(void)n;
}

/*
 * appears: a process fires it when it is first seen matching; the last
 * SEEN_MAX such processes are remembered (they are few: a handler that
 * comes and goes). @value becomes how many have matched so far.
 */
static bool
first_seen(struct fpd_flight *f, const struct fp_pid *pid, int64_t *value)
{
	uint64_t n = f->nseen < SEEN_MAX ? f->nseen : SEEN_MAX;

	for (uint64_t i = 0; i < n; i++) {
		if (f->seen[i].num == pid->num && f->seen[i].serial == pid->serial)
			return false;
	}
	f->seen[f->nseen++ % SEEN_MAX] = *pid;
	*value = (int64_t)f->nseen;
	return true;
}

static void
dest_observe(void *data, const struct fp_sample *smp)
{
	struct fpd_flight *f = data;
	char pid[32];
	int64_t value;

	for (size_t i = 0; i < f->cfg.ntriggers; i++) {
		const struct fpd_trigger *t = &f->cfg.triggers[i];

		if (!fpd_trigger_check(t, smp, &value))
			continue;
		if (t->kind == FPD_TRIGGER_APPEARS &&
		    !first_seen(f, &smp->pid, &value))
			continue;
		snprintf(pid, sizeof(pid), "<0.%u.%u>", smp->pid.num,
			 smp->pid.serial);
		fpd_flight_fire(f, t->text, value, pid, fpd_now_epoch_us());
	}
}

static void
dest_gauge(void *data, int gauge, int64_t value)
{
	struct fpd_flight *f = data;
	uint64_t now = fpd_now_epoch_us();
	int64_t fired;

	for (size_t i = 0; i < f->cfg.ntriggers; i++) {
		const struct fpd_trigger *t = &f->cfg.triggers[i];

		if (fpd_trigger_gauge(t, (enum fpd_gauge)gauge, value, now,
				      &f->over_since[i], &fired) ||
		    fpd_trigger_growth(t, (enum fpd_gauge)gauge, value, now,
				       &f->growth[i], &fired))
			fpd_flight_fire(f, t->text, fired, NULL, now);
	}
}

static void
dest_event(void *data, int kind, int64_t value, const char *pid)
{
	struct fpd_flight *f = data;

	for (size_t i = 0; i < f->cfg.ntriggers; i++) {
		const struct fpd_trigger *t = &f->cfg.triggers[i];

		if (fpd_trigger_event(t, (enum fpd_trigger_kind)kind, value))
			fpd_flight_fire(f, t->text, value, pid && *pid ? pid : NULL,
					fpd_now_epoch_us());
	}
}

static const struct fpd_record_dest_ops flight_dest_ops = {
	.buffer = dest_buffer,
	.sample = dest_sample,
	.skipped = dest_skipped,
	.observe = dest_observe,
	.gauge = dest_gauge,
	.event = dest_event,
};

struct fpd_record_dest
fpd_flight_dest(struct fpd_flight *f)
{
	return (struct fpd_record_dest){ .ops = &flight_dest_ops, .data = f };
}

/* ---- as a source of the loop --------------------------------------------- */

static int
source_fd(struct fpd_source *src)
{
	(void)src;
	return -1;
}

static void
source_input(struct fpd_source *src)
{
	(void)src;
}

static void
report(struct fpd_flight *f, uint64_t now)
{
	const struct fpd_flight_stats *s = &f->stats;
	enum fp_log_priority level = FP_LOG_DEBUG;

	f->reported_mono = now;
	if (now - f->reported_info_mono >= REPORT_INFO_US) {
		f->reported_info_mono = now;
		level = FP_LOG_INFO;
	}
	fpd_log(level, "flight recorder: %" PRIu64 " samples over %.1f s in %"
		PRIu64 " bytes of frames, %" PRIu64 " with the segment (peak %"
		PRIu64 ", cap %" PRIu64 "), %" PRIu64 " captures", s->samples,
		s->frames ? (double)(s->newest_us - s->oldest_us) / 1e6 : 0.0,
		f->frame_bytes, s->bytes, s->peak_bytes, f->cfg.max_bytes,
		s->captures);
}

static void
source_tick(struct fpd_source *src, uint64_t now)
{
	struct fpd_flight *f = (struct fpd_flight *)src;
	struct capture *c = &f->cap_;

	if (now - f->sealed_mono >= SEAL_US)
		fpd_flight_seal(f);
	if (c->wanted)
		capture_begin(f);
	if (c->active && fpd_now_epoch_us() >= c->end_us) {
		fpd_flight_seal(f);
		capture_finish(f);
	}
	if (now - f->reported_mono >= REPORT_US)
		report(f, now);
}

static void
source_capture(struct fpd_source *src)
{
	struct fpd_flight *f = (struct fpd_flight *)src;

	if (fpd_flight_fire(f, "SIGUSR2", 0, NULL, fpd_now_epoch_us()) == -EBUSY)
		fpd_info("flight recorder: SIGUSR2 comes while a capture is "
			 "being written: that capture holds it");
}

static const struct fpd_source_ops flight_source_ops = {
	.fd = source_fd,
	.input = source_input,
	.tick = source_tick,
	.capture = source_capture,
};

struct fpd_source *
fpd_flight_source(struct fpd_flight *f)
{
	return &f->source;
}

/* ---- life cycle ------------------------------------------------------------ */

struct fpd_flight *
fpd_flight_new(const struct fpd_flight_config *c, struct fpd_output *out)
{
	struct fpd_flight *f = xnew(struct fpd_flight);

	f->source.ops = &flight_source_ops;
	f->cfg = *c;
	f->out = out;
	f->comp = fpd_compressor_new(FPD_COMPRESS_ZSTD, c->level);
	f->text_max = c->max_bytes / 8;
	if (f->text_max < TEXT_MIN)
		f->text_max = TEXT_MIN;
	if (f->text_max > TEXT_MAX)
		f->text_max = TEXT_MAX;
	/* the segment's room is taken once: the cap counts it whole */
	fp_text_reserve_first(&f->seg, 1, 2 * f->text_max);
	note_bytes(f);
	f->holdoff_until = xzalloc((c->ntriggers + 1) * sizeof(*f->holdoff_until));
	f->over_since = xzalloc((c->ntriggers + 1) * sizeof(*f->over_since));
	f->growth = xzalloc((c->ntriggers + 1) * sizeof(*f->growth));
	if (!f->cfg.max_per_hour)
		f->cfg.max_per_hour = FPD_FLIGHT_PER_HOUR_DEFAULT;
	f->began = xzalloc(f->cfg.max_per_hour * sizeof(*f->began));
	f->cap_.fd = f->cap_.dirfd = -1;
	f->sealed_mono = f->reported_mono = f->reported_info_mono =
		fpd_now_mono_us();
	return f;
}

void
fpd_flight_destroy(struct fpd_flight *f)
{
	if (!f)
		return;
	if (f->cap_.wanted && f->out)
		capture_begin(f);
	if (f->cap_.active) {
		fpd_flight_seal(f);
		fpd_info("flight recorder: stopping: capture %s ends here",
			 f->cap_.e.dir);
		capture_finish(f);
	}
	capture_close(f);
	while (f->n)
		drop_oldest(f);
	free(f->frames);
	free(f->holdoff_until);
	free(f->over_since);
	free(f->growth);
	free(f->began);
	fp_text_free(&f->seg);
	fpd_compressor_destroy(f->comp);
	free(f);
}

const struct fpd_flight_stats *
fpd_flight_stats(const struct fpd_flight *f)
{
	return &f->stats;
}

unsigned
fpd_flight_last_hour(const struct fpd_flight *f)
{
	uint64_t now = fpd_now_mono_us();
	unsigned n = 0;

	for (size_t i = 0; i < f->nbegan; i++)
		n += now - f->began[i] < HOUR_US;
	return n;
}
