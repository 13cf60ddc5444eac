/*
 * flame_profd — unit tests: the flight recorder's ring (daemon/flight.c:
 * the cap, the window, the times its frames keep), a capture written
 * through a real output directory, and the trigger parser
 * (daemon/trigger.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fp-test.h"
#include "../daemon/daemon-log.h"
#include "../daemon/flight.h"
#include "../daemon/output.h"
#include "../daemon/source.h"
#include "../daemon/trigger.h"
#include "../daemon/util.h"
#include "fp/term.h"
#include "fp/watcher.h"
#include "util-buf.h"

#include <ei.h>

#define SEC 1000000ull

static uint64_t rng = 88172645463325252ull;

/* Text zstd cannot shrink much: a record of @n pseudo-random hex bytes. */
static void
put_record(struct fp_text *t, size_t n)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		fp_text_putc(t, hex[rng & 15]);
	}
	fp_text_puts(t, "\n\n");
}

/* One sample of @n bytes at @time_us through the ring's destination ops. */
static void
record(struct fpd_flight *f, uint64_t time_us, size_t n)
{
	struct fpd_record_dest d = fpd_flight_dest(f);
	bool fresh;
	struct fp_text *t = d.ops->buffer(d.data, true, 0, &fresh);

	fp_assert_ptr_nonnull(t);
	put_record(t, n);
	fp_assert_int_eq(d.ops->sample(d.data, time_us), 0);
}

static struct fpd_flight *
ring(uint64_t window_us, uint64_t max_bytes)
{
	struct fpd_flight_config c = {
		.window_us = window_us, .max_bytes = max_bytes,
		.after_us = 0, .holdoff_us = 60 * SEC, .level = 3, .header = "",
	};

	return fpd_flight_new(&c, NULL);
}

START_TEST(cap_honoured)
{
	const uint64_t max = FPD_FLIGHT_MAX_MIN;
	struct fpd_flight *f = ring(3600 * SEC, max);
	const struct fpd_flight_stats *s = fpd_flight_stats(f);
	uint64_t t0 = 1700000000 * SEC;

	/* ~4 MB of text that compresses about 2:1 into a 1 MB ring */
	for (int i = 0; i < 2000; i++) {
		record(f, t0 + (uint64_t)i * 10000, 2000);
		fp_assert(s->bytes <= max);
		if (i % 50 == 49)
			fpd_flight_seal(f);
	}
	fpd_flight_seal(f);
	fp_assert(s->peak_bytes <= max);
	fp_assert(s->dropped_frames > 0);
	fp_assert(s->frames > 1);
	/* what is left is the newest */
	fp_assert(s->newest_us == t0 + 1999 * 10000);
	fp_assert(s->oldest_us > t0);
	fpd_flight_destroy(f);
}
END_TEST

START_TEST(window_drops_oldest)
{
	struct fpd_flight *f = ring(10 * SEC, 64u << 20);
	const struct fpd_flight_stats *s = fpd_flight_stats(f);
	uint64_t t0 = 1700000000 * SEC;

	/* 60 s at 10 samples a second, a frame a second */
	for (int sec = 0; sec < 60; sec++) {
		for (int i = 0; i < 10; i++)
			record(f, t0 + (uint64_t)sec * SEC + (uint64_t)i * 100000, 100);
		fpd_flight_seal(f);
	}
	fp_assert_int_eq(s->frames, 11);	/* the window, and the frame
						 * that reaches into it */
	fp_assert_int_eq(s->samples, 110);
	fp_assert_int_eq(s->dropped_frames, 49);
	fp_assert(s->newest_us == t0 + 59 * SEC + 900000);
	fp_assert(s->oldest_us == t0 + 49 * SEC);
	fp_assert(s->newest_us - s->oldest_us <= 11 * SEC);
	fpd_flight_destroy(f);
}
END_TEST

START_TEST(times_kept)
{
	struct fpd_flight *f = ring(3600 * SEC, 64u << 20);
	const struct fpd_flight_stats *s = fpd_flight_stats(f);
	static const uint64_t times[] = { 5 * SEC, 5 * SEC, 6 * SEC + 1, 9 * SEC };

	fpd_flight_seal(f);	/* nothing to seal: no frame */
	fp_assert_int_eq(s->frames, 0);
	for (size_t i = 0; i < 4; i++)
		record(f, times[i], 50);
	fp_assert_int_eq(s->frames, 0);	/* in the segment until sealed */
	fpd_flight_seal(f);
	fp_assert_int_eq(s->frames, 1);
	fp_assert_int_eq(s->samples, 4);
	fp_assert(s->oldest_us == 5 * SEC);
	fp_assert(s->newest_us == 9 * SEC);
	record(f, 12 * SEC, 50);
	fpd_flight_seal(f);
	fp_assert_int_eq(s->frames, 2);
	fp_assert(s->oldest_us == 5 * SEC);
	fp_assert(s->newest_us == 12 * SEC);
	/* no output: nowhere to write a capture */
	fp_assert_int_eq(fpd_flight_fire(f, "SIGUSR2", 0, NULL, 13 * SEC), -ENOTDIR);
	fpd_flight_destroy(f);
}
END_TEST

static char *
read_all(const char *path)
{
	FILE *fp = fopen(path, "r");
	static char buf[65536];
	size_t n;

	fp_assert_ptr_nonnull(fp);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

START_TEST(capture_written)
{
	char dir[] = "/tmp/test-flight.XXXXXX", path[4096], cmd[4200];
	struct fpd_output_config oc = {
		.node = "a@b", .header = "# h\n", .options_json = "{}",
		.compress = FPD_COMPRESS_ZSTD, .level = 3,
		.rotate_us = 3600 * SEC, .keep_captures = 1,
		.file_mode = 0600, .dir_mode = 0700,
		.uid = geteuid(), .gid = getegid(),
	};
	static const struct fpd_trigger trig[] = {
		{ .kind = FPD_TRIGGER_MAILBOX, .threshold = 5, .text = "mailbox>5" },
	};
	struct fpd_flight_config fc = {
		.window_us = 3600 * SEC, .max_bytes = 64u << 20, .after_us = 0,
		.holdoff_us = 3600 * SEC, .level = 3,
		.header = "# flame_profd test\n", .triggers = trig, .ntriggers = 1,
	};
	struct fpd_output *out;
	struct fpd_flight *f;
	struct fpd_source *src;
	static const char head[] = "# flame_profd test\n# flame_profd: ";
	uint64_t now = fpd_now_epoch_us();
	char *m;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	oc.dir = dir;
	fp_assert_int_eq(fpd_output_new(&oc, &out), 0);
	f = fpd_flight_new(&fc, out);
	src = fpd_flight_source(f);
	for (int i = 0; i < 20; i++)
		record(f, now - 10 * SEC + (uint64_t)i * 500000, 40);
	fp_assert_int_eq(fpd_flight_fire(f, "mailbox>5", 7, "<0.1.0>", now), 0);
	/* one incident, one capture */
	fp_assert_int_eq(fpd_flight_fire(f, "mailbox>5", 8, "<0.1.0>", now), -EBUSY);
	src->ops->tick(src, fpd_now_mono_us() + 2 * SEC);
	fp_assert_int_eq(fpd_flight_stats(f)->captures, 1);
	/* held off after its capture; a signal is not */
	fp_assert_int_eq(fpd_flight_fire(f, "mailbox>5", 9, "<0.1.0>", now), -EBUSY);
	fp_assert_int_eq(fpd_flight_stats(f)->suppressed, 2);

	snprintf(path, sizeof(path), "%s/a@b/manifest.json", dir);
	m = read_all(path);
	fp_assert(strstr(m, "\"trigger\": \"mailbox>5\", \"value\": 7, \"pid\": \"<0.1.0>\""));
	fp_assert(strstr(m, "\"samples\": 20"));
	/* the file is whole zstd frames: the header, the note, the samples */
	snprintf(cmd, sizeof(cmd),
		 "zstd -dc %s/a@b/capture.*.mailbox/a@b.*.perf.zst > %s/text",
		 dir, dir);
	fp_assert_int_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/text", dir);
	m = read_all(path);
	fp_assert(strncmp(m, head, strlen(head)) == 0);
	fp_assert(strstr(m, " capture: mailbox>5 fired: 7 on <0.1.0>\n"));

	/* --keep-captures 1: the second capture deletes the first */
	fp_assert_int_eq(fpd_flight_fire(f, "SIGUSR2", 0, NULL, now), 0);
	src->ops->tick(src, fpd_now_mono_us() + 4 * SEC);
	fp_assert_int_eq(fpd_flight_stats(f)->captures, 2);
	snprintf(path, sizeof(path), "%s/a@b/manifest.json", dir);
	m = read_all(path);
	fp_assert(strstr(m, "\"trigger\": \"SIGUSR2\", \"value\": 0, \"pid\": null"));
	fp_assert_ptr_null(strstr(m, "mailbox>5"));
	/* ... its file and directory are gone, the signal's are there */
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -d %s/a@b/capture.*.mailbox 2>/dev/null)\" && "
		 "ls %s/a@b/capture.*.signal/a@b.*.perf.zst >/dev/null", dir, dir);
	fp_assert_int_eq(system(cmd), 0);

	fpd_flight_destroy(f);
	fpd_output_destroy(out);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	fp_assert_int_eq(system(cmd), 0);
}
END_TEST

/* --max-captures-per-hour: past it a trigger writes nothing and is
 * counted; the next capture says how many; a ctl trigger's reason reaches
 * the manifest escaped, and back through the list of captures. */
START_TEST(hourly_cap)
{
	char dir[] = "/tmp/test-flight.XXXXXX", path[4096], cmd[4200],
	     name[FP_PERF_NAME_MAX];
	struct fpd_output_config oc = {
		.node = "a@b", .header = "# h\n", .options_json = "{}",
		.compress = FPD_COMPRESS_ZSTD, .level = 3,
		.rotate_us = 3600 * SEC, .keep_captures = 10,
		.file_mode = 0600, .dir_mode = 0700,
		.uid = geteuid(), .gid = getegid(),
	};
	struct fpd_flight_config fc = {
		.window_us = 3600 * SEC, .max_bytes = 64u << 20, .after_us = 0,
		.holdoff_us = 0, .max_per_hour = 2, .level = 3,
		.header = "# flame_profd test\n",
	};
	struct fpd_output *out;
	struct fpd_flight *f;
	struct fpd_source *src;
	const struct fpd_flight_stats *s;
	uint64_t now = fpd_now_epoch_us();
	char *m;

	fp_assert_ptr_nonnull(mkdtemp(dir));
	oc.dir = dir;
	fp_assert_int_eq(fpd_output_new(&oc, &out), 0);
	f = fpd_flight_new(&fc, out);
	src = fpd_flight_source(f);
	s = fpd_flight_stats(f);
	for (int i = 0; i < 10; i++)
		record(f, now - 5 * SEC + (uint64_t)i * 500000, 40);
	fp_assert_int_eq(fpd_flight_fire_ctl(f, "deploy \x1b[31m 42", now,
					     name, sizeof(name)), 0);
	fp_assert(strncmp(name, "capture.", 8) == 0);
	fp_assert(strstr(name, ".ctl") != NULL);
	src->ops->tick(src, fpd_now_mono_us() + 2 * SEC);
	fp_assert_int_eq(fpd_flight_fire(f, "SIGUSR2", 0, NULL, now + 1), 0);
	src->ops->tick(src, fpd_now_mono_us() + 4 * SEC);
	fp_assert_int_eq(s->captures, 2);
	fp_assert_int_eq(fpd_flight_last_hour(f), 2);
	/* the third and fourth in the hour: counted, nothing written */
	fp_assert_int_eq(fpd_flight_fire(f, "SIGUSR2", 0, NULL, now + 2), -EDQUOT);
	fp_assert_int_eq(fpd_flight_fire_ctl(f, "again", now + 3, NULL, 0), -EDQUOT);
	src->ops->tick(src, fpd_now_mono_us() + 6 * SEC);
	fp_assert_int_eq(s->captures, 2);
	fp_assert_int_eq(s->capped, 2);
	fp_assert_int_eq(s->suppressed, 0);
	fp_assert_str_eq(s->last_trigger, "ctl");
	fp_assert_str_eq(s->last_reason, "again");
	fp_assert_str_eq(s->last_outcome, "capped");

	snprintf(path, sizeof(path), "%s/a@b/manifest.json", dir);
	m = read_all(path);
	fp_assert(strstr(m, "\"trigger\": \"ctl\", \"value\": 0, \"pid\": null, "
			 "\"reason\": \"deploy \\\\x1B[31m 42\", \"capped_before\": 0"));
	fp_assert(strstr(m, "\"trigger\": \"SIGUSR2\", \"value\": 0, \"pid\": null, "
			 "\"reason\": null, \"capped_before\": 0"));
	snprintf(cmd, sizeof(cmd),
		 "zstd -dc %s/a@b/capture.*.ctl/a@b.*.perf.zst > %s/text", dir, dir);
	fp_assert_int_eq(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/text", dir);
	m = read_all(path);
	fp_assert(strstr(m, " capture: ctl reason: deploy \\x1B[31m 42\n"));
	fpd_flight_destroy(f);
	fpd_output_destroy(out);

	/* a new run reads the list back: the reason whole, spaces and all */
	fp_assert_int_eq(fpd_output_new(&oc, &out), 0);
	fc.max_per_hour = 1;
	f = fpd_flight_new(&fc, out);
	src = fpd_flight_source(f);
	record(f, fpd_now_epoch_us(), 40);
	fp_assert_int_eq(fpd_flight_fire(f, "SIGUSR2", 0, NULL, fpd_now_epoch_us()), 0);
	src->ops->tick(src, fpd_now_mono_us() + 2 * SEC);
	fp_assert_int_eq(fpd_flight_fire(f, "SIGUSR2", 0, NULL, fpd_now_epoch_us()), -EDQUOT);
	snprintf(path, sizeof(path), "%s/a@b/manifest.json", dir);
	m = read_all(path);
	fp_assert(strstr(m, "\"reason\": \"deploy \\\\x1B[31m 42\""));
	fpd_flight_destroy(f);
	fpd_output_destroy(out);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	fp_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- triggers ---------------------------------------------------------- */

static const struct {
	const char *expr;
	int rc;
	enum fpd_trigger_kind kind;
	int64_t threshold;
	const char *text;
	uint64_t for_us;
} parse_cases[] = {
	{ "run_queue>200", 0, FPD_TRIGGER_RUN_QUEUE, 200, "run_queue>200", 0 },
	{ "run_queue>200/10s", 0, FPD_TRIGGER_RUN_QUEUE, 200, "run_queue>200/10s",
	  10 * SEC },
	{ "run_queue>200/90000ms", 0, FPD_TRIGGER_RUN_QUEUE, 200,
	  "run_queue>200/90s", 90 * SEC },
	{ "run_queue>200/", -EINVAL, 0, 0, NULL, 0 },
	{ "run_queue>200/0s", -EINVAL, 0, 0, NULL, 0 },
	{ "run_queue>/5s", -EINVAL, 0, 0, NULL, 0 },
	{ "mailbox>5/5s", -EINVAL, 0, 0, NULL, 0 },
	{ "appears:my_handler", 0, FPD_TRIGGER_APPEARS, 0, "appears:my_handler", 0 },
	{ "appears:cowboy_stream_h:request_process/3", 0, FPD_TRIGGER_APPEARS, 0,
	  "appears:cowboy_stream_h:request_process/3", 0 },
	{ "appears:", -EINVAL, 0, 0, NULL, 0 },
	{ "appears:a b", -EINVAL, 0, 0, NULL, 0 },
	{ "appears:'q'", -EINVAL, 0, 0, NULL, 0 },
	{ "appears:0123456789012345678901234567890123456789012345678", -EINVAL, 0, 0,
	  NULL, 0 },
	{ "mailbox>50000", 0, FPD_TRIGGER_MAILBOX, 50000, "mailbox>50000", 0 },
	{ "mailbox>0", 0, FPD_TRIGGER_MAILBOX, 0, "mailbox>0", 0 },
	{ "memory>512M", 0, FPD_TRIGGER_MEMORY, 536870912, "memory>536870912", 0 },
	{ "memory>4096", 0, FPD_TRIGGER_MEMORY, 4096, "memory>4096", 0 },
	{ "", -EINVAL, 0, 0, NULL, 0 },
	{ "mailbox", -EINVAL, 0, 0, NULL, 0 },
	{ ">5", -EINVAL, 0, 0, NULL, 0 },
	{ "mailbox>", -EINVAL, 0, 0, NULL, 0 },
	{ "mailbox>-1", -EINVAL, 0, 0, NULL, 0 },
	{ "mailbox>5x", -EINVAL, 0, 0, NULL, 0 },
	{ "mailbox>99999999999999999999999", -EINVAL, 0, 0, NULL, 0 },
	{ "mailbox<5", -EINVAL, 0, 0, NULL, 0 },
	{ "cpu>5", -EINVAL, 0, 0, NULL, 0 },
	{ "mailboxes>5", -EINVAL, 0, 0, NULL, 0 },
	{ "memory>lots", -EINVAL, 0, 0, NULL, 0 },
	/* the node's system monitor */
	{ "long_gc>50", 0, FPD_TRIGGER_LONG_GC, 50, "long_gc>50", 0 },
	{ "long_gc>0", 0, FPD_TRIGGER_LONG_GC, 0, "long_gc>0", 0 },
	{ "long_gc>50/5s", -EINVAL, 0, 0, NULL, 0 },
	{ "long_gc>50ms", -EINVAL, 0, 0, NULL, 0 },
	{ "long_gc>2147483647", -EINVAL, 0, 0, NULL, 0 },
	{ "long_schedule>100", 0, FPD_TRIGGER_LONG_SCHEDULE, 100,
	  "long_schedule>100", 0 },
	{ "large_heap>256M", 0, FPD_TRIGGER_LARGE_HEAP, 268435456,
	  "large_heap>268435456", 0 },
	{ "large_heap>64G", -EINVAL, 0, 0, NULL, 0 },
	{ "long_message_queue>10000", 0, FPD_TRIGGER_LONG_MESSAGE_QUEUE, 10000,
	  "long_message_queue>10000", 0 },
	{ "long_message_queue>1k", -EINVAL, 0, 0, NULL, 0 },
	/* what the watcher reads each --every */
	{ "node.memory>2G", 0, FPD_TRIGGER_NODE_MEMORY, 2147483648,
	  "node.memory>2147483648", 0 },
	{ "node.memory>2G/30s", 0, FPD_TRIGGER_NODE_MEMORY, 2147483648,
	  "node.memory>2147483648/30s", 30 * SEC },
	{ "node.memory+>256M/30s", 0, FPD_TRIGGER_NODE_MEMORY_GROWTH, 268435456,
	  "node.memory+>268435456/30s", 30 * SEC },
	{ "node.memory+>256M", -EINVAL, 0, 0, NULL, 0 },
	{ "node.memory->256M/30s", -EINVAL, 0, 0, NULL, 0 },
	{ "node.mem>1G", -EINVAL, 0, 0, NULL, 0 },
	{ "sched_util>90", 0, FPD_TRIGGER_SCHED_UTIL, 90, "sched_util>90", 0 },
	{ "sched_util>90/10s", 0, FPD_TRIGGER_SCHED_UTIL, 90, "sched_util>90/10s",
	  10 * SEC },
	{ "sched_util>100", -EINVAL, 0, 0, NULL, 0 },
	{ "sched_util>90%", -EINVAL, 0, 0, NULL, 0 },
};

START_TEST(parse)
{
	struct fpd_trigger t;
	const char *why = NULL;
	int rc = fpd_trigger_parse(parse_cases[_i].expr, &t, &why);

	fp_assert_int_eq(rc, parse_cases[_i].rc);
	if (rc < 0) {
		fp_assert_ptr_nonnull(why);
		return;
	}
	fp_assert_int_eq(t.kind, parse_cases[_i].kind);
	fp_assert(t.threshold == parse_cases[_i].threshold);
	fp_assert_str_eq(t.text, parse_cases[_i].text);
	fp_assert(t.for_us == parse_cases[_i].for_us);
}
END_TEST

START_TEST(appears)
{
	struct fpd_trigger reg, mfa, lab;
	struct fp_sample s = { .status = FP_STATUS_WAITING };
	const char *why;
	int64_t v = -1;

	fp_assert_int_eq(fpd_trigger_parse("appears:my_server", &reg, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("appears:my_handler:init/2", &mfa, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("appears:req", &lab, &why), 0);
	fp_assert(!fpd_trigger_check(&reg, &s, &v));
	fp_assert(!fpd_trigger_check(&mfa, &s, &v));
	s.registered_name = "my_server";
	fp_assert(fpd_trigger_check(&reg, &s, &v));
	fp_assert(v == 1);
	s.registered_name = "my_server2";
	fp_assert(!fpd_trigger_check(&reg, &s, &v));
	s.has_initial_call = true;
	s.initial_call = (struct fp_frame){ .module = "my_handler",
					    .function = "init", .arity = 2 };
	fp_assert(fpd_trigger_check(&mfa, &s, &v));
	s.initial_call.arity = 3;
	fp_assert(!fpd_trigger_check(&mfa, &s, &v));
	fp_assert(!fpd_trigger_check(&lab, &s, &v));
	s.label = "req";
	fp_assert(fpd_trigger_check(&lab, &s, &v));
}
END_TEST

START_TEST(gauge)
{
	struct fpd_trigger now_, held;
	struct fp_sample smp = { .status = FP_STATUS_RUNNING };
	uint64_t since = 0, since2 = 0;
	const char *why;
	int64_t v = -1;

	fp_assert_int_eq(fpd_trigger_parse("run_queue>10", &now_, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("run_queue>10/5s", &held, &why), 0);
	/* a gauge kind never fires on a sample */
	smp.value[FP_METRIC_MESSAGE_QUEUE_LEN] = 1000;
	fp_assert(!fpd_trigger_check(&now_, &smp, &v));
	fp_assert(!fpd_trigger_gauge(&now_, FPD_GAUGE_RUN_QUEUE, 10, SEC, &since, &v));
	fp_assert(fpd_trigger_gauge(&now_, FPD_GAUGE_RUN_QUEUE, 11, 2 * SEC, &since, &v));
	fp_assert(v == 11);
	/* /5s: over the threshold for 5 s, readings between */
	fp_assert(!fpd_trigger_gauge(&held, FPD_GAUGE_RUN_QUEUE, 20, 10 * SEC, &since2, &v));
	fp_assert(!fpd_trigger_gauge(&held, FPD_GAUGE_RUN_QUEUE, 20, 14 * SEC, &since2, &v));
	fp_assert(fpd_trigger_gauge(&held, FPD_GAUGE_RUN_QUEUE, 30, 15 * SEC, &since2, &v));
	fp_assert(v == 30);
	/* a reading under it starts again */
	fp_assert(!fpd_trigger_gauge(&held, FPD_GAUGE_RUN_QUEUE, 5, 16 * SEC, &since2, &v));
	fp_assert(!fpd_trigger_gauge(&held, FPD_GAUGE_RUN_QUEUE, 30, 17 * SEC, &since2, &v));
	fp_assert(!fpd_trigger_gauge(&held, FPD_GAUGE_RUN_QUEUE, 30, 21 * SEC, &since2, &v));
	fp_assert(fpd_trigger_gauge(&held, FPD_GAUGE_RUN_QUEUE, 30, 22 * SEC, &since2, &v));
}
END_TEST

START_TEST(check)
{
	struct fpd_trigger mbox, mem;
	struct fp_sample s = { .status = FP_STATUS_RUNNING };
	const char *why;
	int64_t v = -1;

	fp_assert_int_eq(fpd_trigger_parse("mailbox>50000", &mbox, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("memory>1M", &mem, &why), 0);
	s.value[FP_METRIC_MESSAGE_QUEUE_LEN] = 50000;
	s.value[FP_METRIC_MEMORY] = 2 << 20;
	fp_assert(!fpd_trigger_check(&mbox, &s, &v));
	fp_assert(fpd_trigger_check(&mem, &s, &v));
	fp_assert(v == 2 << 20);
	s.value[FP_METRIC_MESSAGE_QUEUE_LEN] = 50001;
	fp_assert(fpd_trigger_check(&mbox, &s, &v));
	fp_assert(v == 50001);
	/* a --perf sample is a thread, not a process */
	s.status = FP_STATUS_CPU;
	fp_assert(!fpd_trigger_check(&mbox, &s, &v));
}
END_TEST

START_TEST(growth)
{
	struct fpd_trigger t, level;
	struct fpd_growth st = { .slot = 0 };
	uint64_t since = 0, t0 = 1700000000 * SEC;
	const char *why;
	int64_t v = -1;

	fp_assert_int_eq(fpd_trigger_parse("node.memory+>100M/16s", &t, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("node.memory>1G", &level, &why), 0);
	/* neither reads the other's gauge, nor the run queue */
	fp_assert(!fpd_trigger_growth(&level, FPD_GAUGE_NODE_MEMORY, 1, t0, &st, &v));
	fp_assert(!fpd_trigger_gauge(&t, FPD_GAUGE_NODE_MEMORY, 2LL << 30, t0,
				     &since, &v));
	fp_assert(!fpd_trigger_growth(&t, FPD_GAUGE_RUN_QUEUE, 1, t0, &st, &v));
	/* slow growth, 10M a second: never 100M within 16 s... */
	for (int i = 0; i < 8; i++)
		fp_assert(!fpd_trigger_growth(&t, FPD_GAUGE_NODE_MEMORY,
					      (500 + 10 * i) << 20,
					      t0 + (uint64_t)i * SEC, &st, &v));
	/* ...a jump of 150M over the lowest of the last 16 s fires */
	fp_assert(fpd_trigger_growth(&t, FPD_GAUGE_NODE_MEMORY, 720 << 20,
				     t0 + 8 * SEC, &st, &v));
	fp_assert(v == (720 - 500) << 20);
	/* measured from there on, not again for the same growth */
	fp_assert(!fpd_trigger_growth(&t, FPD_GAUGE_NODE_MEMORY, 730 << 20,
				      t0 + 9 * SEC, &st, &v));
	/* a low reading more than 16 s old is forgotten */
	fp_assert(!fpd_trigger_growth(&t, FPD_GAUGE_NODE_MEMORY, 100 << 20,
				      t0 + 10 * SEC, &st, &v));
	fp_assert(!fpd_trigger_growth(&t, FPD_GAUGE_NODE_MEMORY, 300 << 20,
				      t0 + 40 * SEC, &st, &v));
	fp_assert(!fpd_trigger_growth(&t, FPD_GAUGE_NODE_MEMORY, 350 << 20,
				      t0 + 41 * SEC, &st, &v));
	fp_assert(fpd_trigger_growth(&t, FPD_GAUGE_NODE_MEMORY, 401 << 20,
				     t0 + 42 * SEC, &st, &v));
	fp_assert(v == 101 << 20);
	/* the level kind: over 1G at once */
	fp_assert(fpd_trigger_gauge(&level, FPD_GAUGE_NODE_MEMORY, (1LL << 30) + 1,
				    t0, &since, &v));
}
END_TEST

START_TEST(events)
{
	struct fpd_trigger gc, gc2, heap, mq, util, mbox;
	struct fp_watch_config c;
	const char *why;

	fp_assert_int_eq(fpd_trigger_parse("long_gc>100", &gc, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("long_gc>20", &gc2, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("large_heap>1M", &heap, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("long_message_queue>500", &mq, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("sched_util>80/5s", &util, &why), 0);
	fp_assert_int_eq(fpd_trigger_parse("mailbox>5", &mbox, &why), 0);
	/* each trigger checks its own threshold of its own kind */
	fp_assert(fpd_trigger_event(&gc, FPD_TRIGGER_LONG_GC, 101));
	fp_assert(!fpd_trigger_event(&gc, FPD_TRIGGER_LONG_GC, 100));
	fp_assert(!fpd_trigger_event(&gc, FPD_TRIGGER_LONG_SCHEDULE, 500));
	fp_assert(fpd_trigger_event(&gc2, FPD_TRIGGER_LONG_GC, 21));
	fp_assert(!fpd_trigger_event(&mbox, FPD_TRIGGER_MAILBOX, 500));
	fp_assert_int_eq(fpd_trigger_of_event(FP_WATCH_LONG_GC), FPD_TRIGGER_LONG_GC);
	fp_assert_int_eq(fpd_trigger_of_event(FP_WATCH_LONG_MESSAGE_QUEUE),
			 FPD_TRIGGER_LONG_MESSAGE_QUEUE);
	fp_assert_int_eq(fpd_trigger_of_event(FP_WATCH_EVENTS), FPD_TRIGGER_KINDS);

	/* the watcher: only for the kinds that need it; the lowest threshold
	 * of a kind goes to the node */
	fp_assert(!fpd_trigger_watch(&mbox, 1, SEC, &c));
	{
		struct fpd_trigger ts[] = { mbox, gc, heap, gc2, mq };

		fp_assert(fpd_trigger_watch(ts, 5, 2 * SEC, &c));
		fp_assert_int_eq(c.every_ms, 2000);
		fp_assert(c.want[FP_WATCH_LONG_GC] && c.over[FP_WATCH_LONG_GC] == 20);
		fp_assert(c.want[FP_WATCH_LARGE_HEAP] &&
			  c.over[FP_WATCH_LARGE_HEAP] == 1 << 20);
		fp_assert(c.want[FP_WATCH_LONG_MESSAGE_QUEUE] &&
			  c.over[FP_WATCH_LONG_MESSAGE_QUEUE] == 500);
		fp_assert(!c.want[FP_WATCH_LONG_SCHEDULE]);
		fp_assert(!c.memory && !c.util);
	}
	fp_assert(fpd_trigger_watch(&util, 1, SEC, &c));
	fp_assert(c.util && !c.memory && !c.want[FP_WATCH_LONG_GC]);
}
END_TEST

/* A message of the watcher as the node sends it: {Tag, Payload}. */
static int
watch_decode(void (*payload)(ei_x_buff *x), struct fp_watch_msg *m)
{
	struct fp_reply r = { .checked = true };
	ei_x_buff x;
	int rc;

	ei_x_new_with_version(&x);
	payload(&x);
	r.buf = x.buff;
	r.len = (size_t)x.index;
	r.index = 1;
	rc = fp_node_watch_decode(&r, m);
	ei_x_free(&x);
	return rc;
}

static void
tick_msg(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 5);
	ei_x_encode_atom(x, "tick");
	ei_x_encode_long(x, 123456789);
	ei_x_encode_atom(x, "undefined");
	ei_x_encode_long(x, 3);
	ei_x_encode_long(x, 250);
}

static void
gc_msg(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "sysmon");
	ei_x_encode_atom(x, "long_gc");
	ei_x_encode_binary(x, "<0.88.0>", strlen("<0.88.0>"));
	ei_x_encode_long(x, 42);
}

static void
port_msg(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "sysmon");
	ei_x_encode_atom(x, "long_schedule");
	ei_x_encode_binary(x, "#Port<0.7>", strlen("#Port<0.7>"));
	ei_x_encode_long(x, 150);
}

static void
escape_msg(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "sysmon");
	ei_x_encode_atom(x, "long_gc");
	ei_x_encode_binary(x, "<0.1.0>\033[2J", strlen("<0.1.0>\033[2J"));
	ei_x_encode_long(x, 42);
}

static void
unknown_msg(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "sysmon");
	ei_x_encode_atom(x, "busy_port");
	ei_x_encode_binary(x, "<0.1.0>", strlen("<0.1.0>"));
	ei_x_encode_long(x, 1);
}

START_TEST(watch_messages)
{
	struct fp_watch_msg m;

	fp_assert_int_eq(watch_decode(tick_msg, &m), 0);
	fp_assert(m.tick && m.memory == 123456789 && m.util == -1);
	fp_assert(m.dropped == 3 && m.work_us == 250);
	fp_assert_int_eq(watch_decode(gc_msg, &m), 0);
	fp_assert(!m.tick && m.event == FP_WATCH_LONG_GC && m.value == 42);
	fp_assert_str_eq(m.pid, "<0.88.0>");
	fp_assert_int_eq(watch_decode(port_msg, &m), 0);
	fp_assert_str_eq(m.pid, "#Port<0.7>");
	/* only what pid_to_list/1 and port_to_list/1 print is taken */
	fp_assert_int_eq(watch_decode(escape_msg, &m), -EBADMSG);
	fp_assert_int_eq(watch_decode(unknown_msg, &m), -EBADMSG);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("flight");
	TCase *tc = tcase_create("ring");

	tcase_add_test(tc, cap_honoured);
	tcase_add_test(tc, window_drops_oldest);
	tcase_add_test(tc, times_kept);
	tcase_add_test(tc, capture_written);
	tcase_add_test(tc, hourly_cap);
	suite_add_tcase(s, tc);
	tc = tcase_create("trigger");
	tcase_add_loop_test(tc, parse, 0,
			    sizeof(parse_cases) / sizeof(parse_cases[0]));
	tcase_add_test(tc, check);
	tcase_add_test(tc, gauge);
	tcase_add_test(tc, appears);
	tcase_add_test(tc, growth);
	tcase_add_test(tc, events);
	tcase_add_test(tc, watch_messages);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
