/*
 * flame_profd — unit tests: how a node session and the loop handle a lost
 * connection, and a source writing through the session's recorder. The
 * session's connection is one end of a socket pair (no
 * node: the handshake is skipped by setting the descriptor in the node
 * handle); the test writes half a distribution message into the other
 * end and closes it.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ei.h>

#include "fp-test.h"
#include "fp/perf-file.h"
#include "node-private.h"
#include "../daemon/loop.h"
#include "../daemon/options.h"
#include "../daemon/session-int.h"
#include "../daemon/daemon-log.h"
#include "../daemon/util.h"
#include "../daemon/compress.h"
#include "../daemon/output.h"

#define NODE "a@b"
/* A port nothing listens on: reconnects are refused at once. */
#define REFUSED "127.0.0.1:1"

struct fixture {
	char dir[64];
	char log[96];
	struct fpd_options o;
	struct fpd_output *out;		/* the recorder's */
	struct fpd_recorder *rec;
	struct fpd_loop *loop;
	struct fpd_session *s;
	int peer;			/* the node's end of the pair */
};

static void
fixture_new(struct fixture *fx, const char *duration)
{
	const char *args[] = {
		"flame_profd", "--node", NODE, "--connect", REFUSED, "--compress",
		"none", "--top", "1", "--duration", duration, "--out", NULL,
	};
	struct fpd_output_config oc = { 0 };
	struct fp_sample smp = { .status = FP_STATUS_WAITING };
	int sv[2];

	signal(SIGPIPE, SIG_IGN);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/fp-session-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(fx->dir));
	snprintf(fx->log, sizeof(fx->log), "%s/log", fx->dir);
	args[12] = fx->dir;
	optind = 0;
	fp_assert_int_eq(fpd_options_parse(13, (char **)args, &fx->o), 0);
	fp_assert_int_eq(fpd_log_open(fx->log, 0, 0600,
				      &(struct fpd_trust){ geteuid(), getegid() },
				      &(const char *){ NULL }), 0);

	oc.dir = fx->dir;
	oc.node = NODE;
	oc.header = "# test\n";
	oc.options_json = "{}";
	oc.compress = FPD_COMPRESS_NONE;
	oc.rotate_us = 3600000000u;
	oc.file_mode = 0600;
	oc.dir_mode = 0700;
	oc.uid = geteuid();
	oc.gid = getegid();
	fp_assert_int_eq(fpd_output_new(&oc, &fx->out), 0);
	fp_assert_ptr_nonnull(fx->out);
	fx->rec = fpd_recorder_new(&fx->o, fx->out);
	fp_assert_int_eq(fpd_loop_new(fx->o.duration_us, NULL, &fx->loop), 0);
	fp_assert_ptr_nonnull(fx->loop);
	fx->s = fpd_session_new(&fx->o, "cookie", fx->rec,
				fpd_loop_run_state(fx->loop), fpd_loop_give_up,
				fx->loop);
	fpd_loop_add(fx->loop, fpd_session_source(fx->s));

	/* connected, as after a handshake, with a file open */
	ei_init();
	fp_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fx->s->node->fd = sv[0];
	fx->peer = sv[1];
	fx->s->connected = fx->s->ever_connected = true;
	smp.time_us = fpd_now_epoch_us();
	fp_assert_int_eq(fpd_recorder_write(fx->rec, &smp, FPD_RECORD_NODE), 0);
	fp_assert(fpd_output_is_open(fx->out));
}

static void
fixture_destroy(struct fixture *fx)
{
	fpd_session_destroy(fx->s);
	fpd_recorder_destroy(fx->rec);
	fpd_loop_destroy(fx->loop);
	fpd_log_close();
	fpd_options_release(&fx->o);
	if (fx->peer >= 0)
		close(fx->peer);
}

/* Finished files in the node's directory. */
static int
finished_files(const struct fixture *fx)
{
	char path[128];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", fx->dir, NODE);
	d = opendir(path);
	fp_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += fp_perf_name_is_of(e->d_name, NODE);
	closedir(d);
	return n;
}

/* Lines of the log holding @text. */
static int
log_count(const struct fixture *fx, const char *text)
{
	char line[1024];
	FILE *f = fopen(fx->log, "r");
	int n = 0;

	fp_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

/*
 * A send that fails inside a handler only records the loss: the file
 * stays open and the connection with it until the loop settles the
 * session, once, whatever fails after it.
 */
START_TEST(loss_in_handler_is_deferred)
{
	struct fixture fx;
	struct fpd_source *src;

	fixture_new(&fx, "1s");
	src = fpd_session_source(fx.s);
	fpd_session_check_send(fx.s, -EPIPE, "sample request");
	fpd_session_check_send(fx.s, -ETIMEDOUT, "selection scan");
	fp_assert(fx.s->connected);
	fp_assert(!live(fx.s));
	fp_assert(fpd_output_is_open(fx.out));
	fp_assert_int_ge(fp_node_fd(fx.s->node), 0);
	fp_assert_int_eq(finished_files(&fx), 0);

	src->ops->settle(src);
	fp_assert(!fx.s->connected);
	fp_assert_ptr_null(fx.s->lost);
	fp_assert(!fpd_output_is_open(fx.out));
	fp_assert_int_eq(fp_node_fd(fx.s->node), -1);
	fp_assert_int_eq(finished_files(&fx), 1);
	src->ops->settle(src);
	fp_assert_int_eq(finished_files(&fx), 1);
	/* the first reason is the one told */
	fp_assert_int_eq(log_count(&fx, "lost connection to " NODE ": send failed; reconnecting"), 1);
	fp_assert_int_eq(log_count(&fx, "lost connection"), 1);
	fixture_destroy(&fx);
}
END_TEST

/*
 * The node's end closes halfway through a message: the loop reads it,
 * the session records the loss, the loop settles it (the file finished
 * once, the connection closed), and reconnects after the backoff: the
 * first attempt is refused, and the next waits twice as long.
 */
START_TEST(loop_handles_closed_mid_reply)
{
	/* a 100-byte distribution message of which 10 bytes come */
	static const unsigned char half[] = { 0, 0, 0, 100, 112, 131, 104, 4,
					      97, 6, 103, 119, 3, 97 };
	struct fixture fx;
	int rc;

	fixture_new(&fx, "1200ms");
	fp_assert_int_eq(write(fx.peer, half, sizeof(half)), (int)sizeof(half));
	close(fx.peer);
	fx.peer = -1;

	rc = fpd_loop_run(fx.loop);
	fp_assert_int_eq(rc, 0);
	fp_assert(fpd_loop_duration_over(fx.loop));
	fp_assert(!fx.s->connected);
	fp_assert_int_eq(fp_node_fd(fx.s->node), -1);
	fp_assert_int_eq(finished_files(&fx), 1);
	fp_assert_int_eq(log_count(&fx, "lost connection to " NODE ": connection closed; reconnecting"), 1);
	fp_assert_int_eq(log_count(&fx, "lost connection"), 1);
	/* one reconnect refused (at 500 ms): the next after 1 s */
	ck_assert_uint_eq(fx.s->backoff_us, 1000000);
	fp_assert(fx.s->reconnect_at > fpd_now_mono_us());
	fixture_destroy(&fx);
}
END_TEST

/* The session's requests, and what a timeout of each does. */
static const struct {
	const char *what;
	size_t offset;			/* of its struct request */
	bool probing;			/* the breaker's probe is out */
	const char *trip;		/* why the breaker trips, or NULL */
} timeout_cases[] = {
	{ "selection scan", offsetof(struct fpd_session, t.req_scan), false,
	  "a request timed out" },
	{ "whereis request", offsetof(struct fpd_session, t.req_whereis), false,
	  NULL },
	{ "initial_call request", offsetof(struct fpd_session, t.req_init),
	  false, NULL },
	{ "is_process_alive request", offsetof(struct fpd_session, t.req_alive),
	  false, NULL },
	{ "health probe", offsetof(struct fpd_session, req_health), false, NULL },
	{ "health probe", offsetof(struct fpd_session, req_health), true,
	  "the probe timed out" },
};

/*
 * A request unanswered for --timeout becomes late (kept until its reply
 * comes), and trips the breaker only if its kind says so: the scan's
 * does, the small side requests' do not, the health probe's only while
 * it probes.
 */
START_TEST(request_timeouts_by_kind)
{
	struct fixture fx;
	struct fpd_source *src;
	struct request *r;
	char line[128];
	uint64_t now;

	fixture_new(&fx, "1s");
	src = fpd_session_source(fx.s);
	now = fpd_now_mono_us();
	r = (struct request *)((char *)fx.s + timeout_cases[_i].offset);
	request_sent(r, 12345, now - fx.o.timeout_us - 1);
	fx.s->cost.breaker.open = fx.s->cost.breaker.probing =
		timeout_cases[_i].probing;
	fx.s->cost.breaker.open_until_us = now + 3600000000u;
	fx.s->t.next_select_mono = now + 3600000000u;
	fx.s->report.interval_mono = now;

	src->ops->tick(src, now);
	fp_assert(live(fx.s));
	fp_assert(r->active && r->late);
	snprintf(line, sizeof(line), "%s timed out after", timeout_cases[_i].what);
	fp_assert_int_eq(log_count(&fx, line), 1);
	if (timeout_cases[_i].trip) {
		fp_assert(fx.s->cost.breaker.open);
		fp_assert_int_eq(log_count(&fx, timeout_cases[_i].trip), 1);
	} else {
		fp_assert(!fx.s->cost.breaker.open);
		fp_assert_int_eq(log_count(&fx, "circuit breaker"), 0);
	}

	/* late, it is not counted again before another --timeout */
	src->ops->tick(src, now + 1);
	fp_assert_int_eq(log_count(&fx, line), 1);
	fp_assert_int_eq(fx.s->timeouts, 1);
	fixture_destroy(&fx);
}
END_TEST

/*
 * A source that writes a sample of status cpu through the recorder
 * before every tick, as --perf does, each one a millisecond older than
 * the one before (as if from buffers read late).
 */
struct cpu_writer {
	struct fpd_source source;
	struct fpd_recorder *rec;
	uint64_t first_us;		/* the first sample's time */
	uint64_t collected_mono;	/* the last collect */
	unsigned writes, ticks, late_ticks;
};

static int
writer_fd(struct fpd_source *src)
{
	(void)src;
	return -1;
}

static void
writer_collect(struct fpd_source *src)
{
	struct cpu_writer *w = (struct cpu_writer *)src;
	struct fp_frame frame = { .module = "beam.smp", .function = "erts_schedule" };
	struct fp_sample smp = {
		.status = FP_STATUS_CPU,
		.time_us = w->first_us - 1000u * w->writes,
		.frames = &frame,
		.nframes = 1,
	};

	fp_assert_int_eq(fpd_recorder_write(w->rec, &smp, FPD_RECORD_CPU), 0);
	w->writes++;
	w->collected_mono = fpd_now_mono_us();
}

static void
writer_tick(struct fpd_source *src, uint64_t now)
{
	struct cpu_writer *w = (struct cpu_writer *)src;

	w->ticks++;
	w->late_ticks += w->collected_mono > now;
}

static const struct fpd_source_ops writer_ops = {
	.fd = writer_fd,
	.input = writer_collect,
	.collect = writer_collect,
	.tick = writer_tick,
};

/*
 * What a source collects comes before the clock of the tick it precedes:
 * written into the session's open file, it never makes that file look
 * older than it is (a file opened after the tick's clock was read would
 * be rotated at once, every tick). The samples are counted as cpu and
 * their times held to the file's order.
 */
START_TEST(collect_comes_before_the_clock)
{
	struct fixture fx;
	struct cpu_writer w = { .source.ops = &writer_ops };
	int rc;

	fixture_new(&fx, "300ms");
	w.rec = fx.rec;
	w.first_us = fpd_now_epoch_us();
	fpd_loop_add(fx.loop, &w.source);

	rc = fpd_loop_run(fx.loop);
	fp_assert_int_eq(rc, 0);
	fp_assert(w.ticks >= 5);
	ck_assert_uint_ge(w.writes, w.ticks);
	fp_assert_int_eq(w.late_ticks, 0);
	fp_assert(fpd_output_is_open(fx.out));
	fp_assert_int_eq(finished_files(&fx), 0);
	ck_assert_uint_eq(fpd_recorder_stats(fx.rec)->written[FPD_RECORD_CPU],
			  w.writes);
	ck_assert_uint_eq(fpd_recorder_samples(fx.rec), w.writes + 1);
	ck_assert_uint_eq(fpd_recorder_stamp(fx.rec, 0), w.first_us);
	fixture_destroy(&fx);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("lost connection");

	tcase_add_test(tc, loss_in_handler_is_deferred);
	tcase_add_test(tc, loop_handles_closed_mid_reply);
	suite_add_tcase(s, tc);
	tc = tcase_create("requests");
	tcase_add_loop_test(tc, request_timeouts_by_kind, 0,
			    sizeof(timeout_cases) / sizeof(timeout_cases[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("other sources");
	tcase_add_test(tc, collect_comes_before_the_clock);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
