/*
 * flame_profd — unit tests: text a node controls (labels, Logger and
 * dictionary values, registered names, thread names), written by the
 * daemon's writer and shown by each flame_prof output, stays one escaped
 * value: no control byte reaches the output, a folded line stays one line
 * with one frame per label, and an atom with a NUL stays apart from the
 * atom cut at it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp-test.h"
#include "fp/perf-script.h"
#include "util-escape.h"
#include "util-mem.h"

#define ESC_OSC "\x1b]0;pwned\x07"
#define FORGED "x\nfake_root;forged:frame/0 1000000"
#define A_NUL_B "a" FP_NUL_CARRIER "b"

static const struct fp_frame crunch[] = {
	{ .module = "fp_demo", .function = "crunch", .arity = 1,
	  .file = "fp_demo.erl" },
};

static const char *const key_names[] = { "request_id" };

#define SAMPLE(n_, t_, reg_, label_, key_) \
	{ .pid = { .num = (n_), .serial = 0 }, .time_us = (t_), \
	  .status = FP_STATUS_RUNNING, .registered_name = (reg_), \
	  .label = (label_), .keys = (const char *const[]){ (key_) }, .nkeys = 1, \
	  .frames = crunch, .nframes = 1 }

static const struct fp_sample samples[] = {
	SAMPLE(80, 1795247790000000, NULL, ESC_OSC, "\x1b[2J\rcleared"),
	SAMPLE(81, 1795247790000100, NULL, FORGED, "bell\x07"),
	SAMPLE(82, 1795247790000200, A_NUL_B, A_NUL_B, A_NUL_B),
	SAMPLE(83, 1795247790000300, "a", "a", "a"),
	SAMPLE(84, 1795247790000400, NULL, "csi\xc2\x9b" "31m", "bad\xff"),
	/* a thread of the node (--perf): its name is its label */
	{ .pid = { .num = 0, .serial = 4242 }, .time_us = 1795247790000500,
	  .status = FP_STATUS_CPU, .label = "sched" ESC_OSC "\n",
	  .frames = crunch, .nframes = 1 },
};

#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

struct cli_run {
	char dir[32], in[128], out[128];
	char *text;		/* what flame_prof wrote */
	size_t len;
};

/* Writes the samples with the daemon's writer, then runs flame_prof
 * with @args (NULL-terminated) and "-o OUT IN" after them. */
static void
cli_run(struct cli_run *cr, const char *const *args)
{
	struct fp_perf_options po = { .key_names = key_names, .nkeys = 1 };
	struct fp_perf_writer *w;
	char *argv[16];
	int argc = 0;
	size_t cap = 0;
	FILE *f;

	snprintf(cr->dir, sizeof(cr->dir), "/tmp/fp-test-text-XXXXXX");
	fp_assert_ptr_nonnull(mkdtemp(cr->dir));
	snprintf(cr->in, sizeof(cr->in), "%s/node.perf", cr->dir);
	snprintf(cr->out, sizeof(cr->out), "%s/out", cr->dir);
	f = fopen(cr->in, "w");
	fp_assert_ptr_nonnull(f);
	fputs("# flame_profd test header\n", f);
	w = fp_perf_writer_new(&po);
	for (size_t i = 0; i < NSAMPLES; i++)
		fp_assert_int_eq(fp_perf_write_sample(w, f, &samples[i]), 0);
	fp_perf_writer_destroy(w);
	fclose(f);

	argv[argc++] = "flame_prof";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc++] = "-o";
	argv[argc++] = cr->out;
	argv[argc++] = cr->in;
	argv[argc] = NULL;
	optind = 0;	/* glibc: start getopt afresh */
	fp_assert_int_eq(fpp_main(argc, argv), 0);
	f = fopen(cr->out, "r");
	fp_assert_ptr_nonnull(f);
	cr->text = NULL;
	fp_assert_int_eq(getdelim(&cr->text, &cap, '\0', f) > 0, 1);
	cr->len = strlen(cr->text);
	fclose(f);
}

static void
cli_run_free(struct cli_run *cr)
{
	free(cr->text);
	unlink(cr->in);
	unlink(cr->out);
	fp_assert_int_eq(rmdir(cr->dir), 0);
}

/* No byte a terminal acts on: printable ASCII, LF ending lines (CR LF
 * for CSV) and UTF-8 of U+00A0 and above only. */
static void
assert_inert(const struct cli_run *cr, bool crlf)
{
	const unsigned char *p = (const unsigned char *)cr->text;

	for (size_t i = 0; i < cr->len;) {
		size_t n;

		if ((p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\n' ||
		    (crlf && p[i] == '\r' && p[i + 1] == '\n')) {
			i++;
			continue;
		}
		n = fp_utf8_len(p + i, cr->len - i);
		ck_assert_msg(n > 0 && !(n == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0),
			      "byte 0x%02x at %zu of:\n%s", p[i], i, cr->text);
		i += n;
	}
}

static bool
has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, line, n) == 0 && (p[n] == '\n' || !p[n]))
			return true;
	}
	return false;
}

/* The daemon's file: every value escaped in its field, the NUL as \x00. */
START_TEST(file_fields)
{
	struct cli_run cr;
	const char *const args[] = { "folded", "--by", "label", NULL };
	char *file;
	size_t cap = 0;
	FILE *f;

	cli_run(&cr, args);
	f = fopen(cr.in, "r");
	fp_assert_ptr_nonnull(f);
	file = NULL;
	fp_assert_int_eq(getdelim(&file, &cap, '\0', f) > 0, 1);
	fclose(f);
	fp_assert(strstr(file, "\tlabel: \\x1B]0;pwned\\x07\t") != NULL);
	fp_assert(strstr(file, "\tlabel: x\\x0Afake_root;forged:frame/0\\x201000000\t") != NULL);
	fp_assert(strstr(file, "\tregistered_name: 'a\\x00b'\tlabel: a\\x00b\tkey.request_id: a\\x00b\n") != NULL);
	fp_assert(strstr(file, "\tregistered_name: a\tlabel: a\tkey.request_id: a\n") != NULL);
	fp_assert(strstr(file, "\tlabel: csi\\xC2\\x9B31m\tkey.request_id: bad\\xFF\n") != NULL);
	free(file);
	cli_run_free(&cr);
}
END_TEST

/* folded --by label|key:NAME: one line per stack, one frame per label */
START_TEST(folded_by)
{
	static const char *const by[] = { "label", "key:request_id" };
	const char *const args[] = { "folded", "--by", by[_i], NULL };
	struct cli_run cr;
	size_t lines = 0;

	cli_run(&cr, args);
	assert_inert(&cr, false);
	for (const char *p = cr.text; *p; p++)
		lines += *p == '\n';
	/* six samples, six values: six lines */
	fp_assert_int_eq(lines, NSAMPLES);
	fp_assert(!has_line(cr.text, "fake_root;forged:frame/0 1000000"));
	if (_i == 0) {
		fp_assert(has_line(cr.text, "label:\\x1B]0\\x3Bpwned\\x07;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "label:x\\x0Afake_root\\x3Bforged:frame/0 1000000;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "label:a\\x00b;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "label:a;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "label:csi\\xC2\\x9B31m;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "label:sched\\x1B]0\\x3Bpwned\\x07\\x0A;cpu;fp_demo:crunch/1 1"));
	} else {
		fp_assert(has_line(cr.text, "request_id:\\x1B[2J\\x0Dcleared;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "request_id:bell\\x07;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "request_id:a\\x00b;running;fp_demo:crunch/1 1"));
		fp_assert(has_line(cr.text, "request_id:bad\\xFF;running;fp_demo:crunch/1 1"));
	}
	cli_run_free(&cr);
}
END_TEST

/* top --by label|key:NAME: one table per value, its heading escaped */
START_TEST(top_by)
{
	static const char *const by[] = { "label", "key:request_id" };
	const char *const args[] = { "top", "--by", by[_i], NULL };
	struct cli_run cr;

	cli_run(&cr, args);
	assert_inert(&cr, false);
	if (_i == 0) {
		fp_assert(has_line(cr.text, "== label: \\x1B]0;pwned\\x07 (1 samples)"));
		fp_assert(has_line(cr.text, "== label: x\\x0Afake_root;forged:frame/0 1000000 (1 samples)"));
		fp_assert(has_line(cr.text, "== label: a\\x00b (1 samples)"));
		fp_assert(has_line(cr.text, "== label: a (1 samples)"));
	} else {
		fp_assert(has_line(cr.text, "== request_id: \\x1B[2J\\x0Dcleared (1 samples)"));
		fp_assert(has_line(cr.text, "== request_id: a\\x00b (1 samples)"));
		fp_assert(has_line(cr.text, "== request_id: a (1 samples)"));
		fp_assert(has_line(cr.text, "== request_id: - (1 samples)"));
	}
	cli_run_free(&cr);
}
END_TEST

/* procs: the NUL atom apart from 'a'; a thread's name escaped, in CSV
 * within its field, in JSON a valid string of the same text */
START_TEST(procs_formats)
{
	static const char *const format[] = { "text", "csv", "json" };
	const char *const args[] = { "procs", "--format", format[_i], NULL };
	struct cli_run cr;

	cli_run(&cr, args);
	assert_inert(&cr, _i == 1);
	switch (_i) {
	case 0:
		fp_assert(strstr(cr.text, "  'a\\x00b' (running 1)\n") != NULL);
		fp_assert(strstr(cr.text, "  a (running 1)\n") != NULL);
		fp_assert(strstr(cr.text, "  sched\\x1B]0;pwned\\x07\\x0A (cpu 1)\n") != NULL);
		break;
	case 1:
		fp_assert(strstr(cr.text, "<0.82.0>,'a\\x00b',,,1,") != NULL);
		fp_assert(strstr(cr.text, "<0.83.0>,a,,,1,") != NULL);
		fp_assert(strstr(cr.text, "<0.0.4242>,,,sched\\x1B]0;pwned\\x07\\x0A,1,") != NULL);
		break;
	case 2:
		fp_assert(strstr(cr.text, "\"registered_name\": \"'a\\\\x00b'\"") != NULL);
		fp_assert(strstr(cr.text, "\"registered_name\": \"a\"") != NULL);
		fp_assert(strstr(cr.text, "\"thread\": \"sched\\\\x1B]0;pwned\\\\x07\\\\x0A\"") != NULL);
		break;
	}
	cli_run_free(&cr);
}
END_TEST

/* speedscope --by label: the group frames as folded has them, in valid
 * JSON strings (a backslash of an escape written \\) */
START_TEST(speedscope_by)
{
	const char *const args[] = { "speedscope", "--by", "label", NULL };
	struct cli_run cr;

	cli_run(&cr, args);
	assert_inert(&cr, false);
	fp_assert(strstr(cr.text, "{\"name\": \"label:x\\\\x0Afake_root\\\\x3Bforged:frame/0 1000000\"") != NULL);
	fp_assert(strstr(cr.text, "{\"name\": \"label:a\\\\x00b\"") != NULL);
	fp_assert(strstr(cr.text, "{\"name\": \"label:a\"") != NULL);
	cli_run_free(&cr);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("flame-prof-text");
	TCase *tc = tcase_create("node text");

	tcase_add_test(tc, file_fields);
	tcase_add_loop_test(tc, folded_by, 0, 2);
	tcase_add_loop_test(tc, top_by, 0, 2);
	tcase_add_loop_test(tc, procs_formats, 0, 3);
	tcase_add_test(tc, speedscope_by);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
