/*
 * flame_profd — unit tests: the perf-script reader (fields of real and
 * hand-made files, gzip and zstd streams, and every grammar error named
 * with its file and line).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <zlib.h>
#include <zstd.h>

#include "fp-test.h"
#include "fp/perf-script-read.h"
#include "util-buf.h"
#include "util-mem.h"

#define N(a) (int)(sizeof(a) / sizeof(a[0]))

/* Every record flattened into text, to compare whole files. */
struct digest {
	char *text;
	size_t len;
	FILE *f;
	int count;
	int stop_after;		/* 0: never */
	bool erlang_names;	/* read names in the Erlang form */
};

static int
collect(void *data, const struct fp_perf_record *rec)
{
	struct digest *d = data;

	fprintf(d->f, "%s %u.%u %llu line=%llu", fp_status_name(rec->status),
		rec->pid.num, rec->pid.serial, (unsigned long long)rec->time_us,
		(unsigned long long)rec->line);
	for (int m = 0; m < FP_METRIC_COUNT; m++)
		fprintf(d->f, " %lld/%lld", (long long)rec->value[m],
			(long long)rec->delta[m]);
	fprintf(d->f, " reg=%s init=%s%s\n",
		rec->registered_name ? rec->registered_name : "-",
		rec->initial_call ? rec->initial_call : "-",
		rec->idle ? " idle" : "");
	if (rec->label || rec->callers || rec->nkeys) {
		fprintf(d->f, "  tags label=[%s]", rec->label ? rec->label : "-");
		for (uint32_t i = 0; i < rec->nkeys; i++)
			fprintf(d->f, " key.%s=[%s]", rec->key_names[i], rec->key_values[i]);
		fprintf(d->f, " callers=[%s]\n", rec->callers ? rec->callers : "-");
	}
	for (uint32_t i = 0; i < rec->nframes; i++)
		fprintf(d->f, "  %s (%s)\n", rec->frames[i], rec->files[i]);
	d->count++;
	return d->stop_after && d->count >= d->stop_after ? 7 : 0;
}

static char *
golden_path(const char *name)
{
	const char *dir = getenv("FP_GOLDEN_DIR");
	char *path;

	fp_assert_ptr_nonnull(dir);
	path = xzalloc(strlen(dir) + strlen(name) + 2);
	sprintf(path, "%s/%s", dir, name);
	return path;
}

/* Read @path; returns fp_perf_read()'s result, digest in @d. */
static int
read_file(const char *path, struct digest *d, char *err, size_t errsize)
{
	struct fp_perf_reader *r = NULL;
	int rc;

	d->text = NULL;
	d->len = 0;
	d->count = 0;
	d->f = open_memstream(&d->text, &d->len);
	rc = fp_perf_reader_open(path, &r);
	fp_assert_int_eq(rc, 0);
	fp_perf_reader_set_erlang_names(r, d->erlang_names);
	rc = fp_perf_read(r, collect, d);
	if (err)
		snprintf(err, errsize, "%s", fp_perf_reader_error(r));
	fp_perf_reader_destroy(r);
	fclose(d->f);
	return rc;
}

static char *
write_temp(const void *data, size_t len)
{
	char *path = xstrdup("/tmp/fp-read-test.XXXXXX");
	int fd = mkstemp(path);

	fp_assert_int_ge(fd, 0);
	fp_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
	return path;
}

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	fp_assert_ptr_nonnull(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = xzalloc((size_t)n + 1);
	fp_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

START_TEST(edge_fields)
{
	char *path = golden_path("flame_prof/edge.perf");
	struct digest d = { 0 };

	/* a file of an earlier version (Erlang form), read in the Erlang
	 * form: as written */
	d.erlang_names = true;
	fp_assert_int_eq(read_file(path, &d, NULL, 0), 0);
	fp_assert_int_eq(d.count, 8);
	fp_assert(strstr(d.text,
		"running 100.0 1795248000010000 line=5 1000/500 20000/-4096 0/0 "
		"100/0 50/0 10/0 0/0 0/0 reg='Elixir.MyApp.Worker' "
		"init='Elixir.MyApp.Worker':init/1\n"
		"  lists:foldl_1/3:1263 (lists.erl)\n"
		"  'Elixir.MyApp.Worker':handle_call/3:12 (lib/my_app/worker.ex)\n"
		"  gen_server:loop/7:437 (gen_server.erl)\n"
		"  proc_lib:init_p_do_apply/3:240 (proc_lib.erl)\n") == d.text);
	fp_assert(strstr(d.text, "reg='Elixir.MyApp.Worker' init='Elixir.MyApp.Worker':init/1\n"
				 "waiting 7.3") != NULL);
	free(d.text);

	/* and in the Elixir form, the default */
	d.erlang_names = false;
	fp_assert_int_eq(read_file(path, &d, NULL, 0), 0);
	fp_assert_int_eq(d.count, 8);
	/* the first sample, field by field */
	fp_assert(strstr(d.text,
		"running 100.0 1795248000010000 line=5 1000/500 20000/-4096 0/0 "
		"100/0 50/0 10/0 0/0 0/0 reg=MyApp.Worker "
		"init=MyApp.Worker.init/1\n"
		"  lists:foldl_1/3:1263 (lists.erl)\n"
		"  MyApp.Worker.handle_call/3:12 (lib/my_app/worker.ex)\n"
		"  gen_server:loop/7:437 (gen_server.erl)\n"
		"  proc_lib:init_p_do_apply/3:240 (proc_lib.erl)\n") == d.text);
	/* an empty stack is a sample */
	fp_assert(strstr(d.text, "garbage_collecting 100.0 1795248000250000 line=11 ") != NULL);
	fp_assert(strstr(d.text, "reg=MyApp.Worker init=MyApp.Worker.init/1\n"
				 "waiting 7.3") != NULL);
	/* names and files stay as written */
	fp_assert(strstr(d.text, "  weird:'<&>'/0 (dir\\x20\\x28copy\\x29/weird.erl)\n") != NULL);
	fp_assert(strstr(d.text, "  'm\xc3\xb6" "d':'receive'/0 (unknown)\n") != NULL);
	fp_assert(strstr(d.text, "reg='\\x2B' init=-") != NULL);
	fp_assert(strstr(d.text, "unknown 8.0 1795248001999999 ") != NULL);
	fp_assert(strstr(d.text, "suspended 9.1 1795248002600000 ") != NULL);
	free(d.text);
	free(path);
}
END_TEST

/* The writer's own golden files read back, in either form. */
START_TEST(writer_golden)
{
	static const char *const files[] = {
		"basic.perf", "lines.perf", "erlang-names.perf",
	};
	char *path = golden_path(files[_i / 2]);
	struct digest d = { .erlang_names = _i % 2 };

	fp_assert_int_eq(read_file(path, &d, NULL, 0), 0);
	fp_assert_int_eq(d.count, 3);
	fp_assert(strstr(d.text, "  erlang:'\\x2B'/2 (unknown)\n") != NULL);
	fp_assert(strstr(d.text, "  semi:'a\\x3Bb'/1 (x\\x09y.erl)\n") != NULL);
	if (d.erlang_names) {
		fp_assert(strstr(d.text, "reg='Elixir.Registry' init=- idle\n") != NULL);
		fp_assert(strstr(d.text, "  'Elixir.Kernel':'\\x2B'/2 (lib/kernel.ex)\n") != NULL);
	} else {
		fp_assert(strstr(d.text, "reg=Registry init=- idle\n") != NULL);
		fp_assert(strstr(d.text, "  Kernel.\"\\x2B\"/2 (lib/kernel.ex)\n") != NULL);
		fp_assert(strstr(d.text, "  anonymous fn/1 in MyApp.Worker.loop/1") != NULL);
	}
	if (_i >= 2)
		fp_assert(strstr(d.text, "  lists:foldl_1/3:1263 (lists.erl)\n") != NULL);
	/* only the waiting sample is marked idle */
	fp_assert(strstr(d.text, "reg=my_server init=my_server:init/1\n") != NULL);
	fp_assert(strstr(d.text, "reg=- init=-\n") != NULL);
	/* label, keys and callers unescaped; a key without a value absent */
	fp_assert(strstr(d.text, "  tags label=[{rw_pool,1}] key.request_id=[req 7\\\t\xc3\xa9] "
				 "callers=[<0.101.0>,<0.90.0>]\n") != NULL);
	free(d.text);
	free(path);
}
END_TEST

/*
 * One sample written in the Elixir form and in the Erlang form reads the
 * same in the Elixir form; in the Erlang form the Elixir-form file lacks
 * only the anonymous function's index.
 */
START_TEST(forms_merge)
{
	char *ex_path = golden_path("lines.perf");
	char *erl_path = golden_path("erlang-names.perf");
	struct digest a = { .erlang_names = _i }, b = { .erlang_names = _i };
	char *fun;

	fp_assert_int_eq(read_file(ex_path, &a, NULL, 0), 0);
	fp_assert_int_eq(read_file(erl_path, &b, NULL, 0), 0);
	if (_i) {
		fun = strstr(b.text, "-fun-0-'/1:20");
		fp_assert_ptr_nonnull(fun);
		fun[5] = '?';
		fp_assert(strstr(a.text, "  'Elixir.MyApp.Worker':'-loop/1-fun-?-'/1:20 ") != NULL);
	}
	fp_assert_str_eq(a.text, b.text);
	free(a.text);
	free(b.text);
	free(ex_path);
	free(erl_path);
}
END_TEST

static char *
gzip_temp(const char *data, size_t len, int members)
{
	char *path = xstrdup("/tmp/fp-read-test-gz.XXXXXX");
	int fd = mkstemp(path);
	size_t at = 0;

	fp_assert_int_ge(fd, 0);
	close(fd);
	/* each member a gzopen() in append mode: concatenated gzip */
	for (int m = 0; m < members; m++) {
		size_t part = m == members - 1 ? len - at : len / (size_t)members;
		gzFile gz = gzopen(path, m ? "ab" : "wb");

		fp_assert_ptr_nonnull(gz);
		if (part)
			fp_assert_int_eq(gzwrite(gz, data + at, (unsigned)part), (int)part);
		gzclose(gz);
		at += part;
	}
	return path;
}

static char *
zstd_temp(const char *data, size_t len, int frames)
{
	size_t cap = ZSTD_compressBound(len) * (size_t)frames + 64, out = 0, at = 0;
	char *buf = xzalloc(cap), *path;

	for (int m = 0; m < frames; m++) {
		size_t part = m == frames - 1 ? len - at : len / (size_t)frames;
		size_t n = ZSTD_compress(buf + out, cap - out, data + at, part, 3);

		fp_assert(!ZSTD_isError(n));
		out += n;
		at += part;
	}
	path = write_temp(buf, out);
	free(buf);
	return path;
}

START_TEST(compressed_same_as_plain)
{
	char *plain = golden_path("flame_prof/demo.perf");
	struct digest want = { 0 }, got = { 0 };
	size_t len;
	char *data = slurp(plain, &len);
	char *paths[4];

	paths[0] = gzip_temp(data, len, 1);
	paths[1] = gzip_temp(data, len, 3);
	paths[2] = zstd_temp(data, len, 1);
	paths[3] = zstd_temp(data, len, 2);
	fp_assert_int_eq(read_file(plain, &want, NULL, 0), 0);
	fp_assert_int_eq(want.count, 36);
	for (int i = 0; i < 4; i++) {
		fp_assert_int_eq(read_file(paths[i], &got, NULL, 0), 0);
		fp_assert_int_eq(got.count, want.count);
		fp_assert_str_eq(got.text, want.text);
		free(got.text);
		unlink(paths[i]);
		free(paths[i]);
	}
	free(want.text);
	free(data);
	free(plain);
}
END_TEST

START_TEST(compressed_corrupt)
{
	char *plain = golden_path("flame_prof/demo.perf");
	struct digest d = { 0 };
	size_t len, clen;
	char *data = slurp(plain, &len);
	char err[1024];
	char *gz = gzip_temp(data, len, 1), *zs = zstd_temp(data, len, 1);
	char *cdata, *cut;

	/* cut the gzip stream in the middle */
	cdata = slurp(gz, &clen);
	cut = write_temp(cdata, clen / 2);
	fp_assert_int_eq(read_file(cut, &d, err, sizeof(err)), -EBADMSG);
	fp_assert(strstr(err, "gzip stream truncated") != NULL);
	fp_assert(strncmp(err, cut, strlen(cut)) == 0);
	free(d.text);
	unlink(cut);
	free(cut);
	free(cdata);

	/* flip bytes inside the zstd frame: without a checksum that may
	 * decode to text the grammar rejects instead; either way it fails
	 * with the file's name */
	cdata = slurp(zs, &clen);
	for (size_t i = clen / 3; i < clen / 3 + 16; i++)
		cdata[i] ^= 0x5a;
	cut = write_temp(cdata, clen);
	fp_assert_int_eq(read_file(cut, &d, err, sizeof(err)), -EBADMSG);
	fp_assert(strncmp(err, cut, strlen(cut)) == 0);
	free(d.text);
	unlink(cut);
	free(cut);
	free(cdata);

	/* a zstd stream cut short */
	cdata = slurp(zs, &clen);
	cut = write_temp(cdata, clen - 10);
	fp_assert_int_eq(read_file(cut, &d, err, sizeof(err)), -EBADMSG);
	fp_assert(strstr(err, "zstd") != NULL);
	free(d.text);
	unlink(cut);
	free(cut);
	free(cdata);

	unlink(gz);
	unlink(zs);
	free(gz);
	free(zs);
	free(data);
	free(plain);
}
END_TEST

#define METRICS "\tmetric_erlang_reductions: 1, 0\tmetric_erlang_memory: 2, -2" \
	"\tmetric_erlang_message_queue_len: 0, 0\tmetric_erlang_total_heap_size: 3, 0" \
	"\tmetric_erlang_heap_size: 4, 0\tmetric_erlang_stack_size: 5, 0" \
	"\tmetric_erlang_binary_bytes: 6, 0\tmetric_erlang_minor_gcs: 7, 0"
#define EVENT "running 1/0 [000] 1795248000.000001: cpu-clock:" METRICS
#define FRAME "\t0123456789abcdef lists:foldl/3 (lists.erl)\n"
#define HEAD "# flame_profd 0.1.0 perf-script (docs/FORMAT.md)\n"

static const struct {
	const char *text;
	int line;
	const char *what;
} bad_cases[] = {
	/* foreign files */
	{ "swapper     0 [000] 12345.678901: cpu-clock: \n"
	  "\tffffffff81 do_idle+0x1 ([kernel.kallsyms])\n\n",
	  1, "not a flame_profd perf-script file: unknown process status \"swapper\"" },
	{ "hello world\n", 1, "not a flame_profd perf-script file" },
	{ "\x7f" "ELF\x02\x01\x01\n", 1, "not a flame_profd perf-script file" },
	{ "{\"a\": 1}\n", 1, "not a flame_profd" },
	/* event line fields */
	{ HEAD "running 1.2.3 [000] 1.000000: cpu-clock:" METRICS "\n\n", 2, "bad pid" },
	{ HEAD "running 1/ [000] 1.000000: cpu-clock:" METRICS "\n\n", 2, "bad pid" },
	{ HEAD "running 1 [000] 1.000000: cpu-clock:" METRICS "\n\n", 2, "bad pid" },
	{ HEAD "running 0.1/0 [000] 1.000000: cpu-clock:" METRICS "\n\n", 2, "bad pid" },
	{ HEAD "running 0.1.0 [001] 1.000000: cpu-clock:" METRICS "\n\n", 2, "[000]" },
	{ HEAD "running <0.1.0> [000] 1.000000: cpu-clock:" METRICS "\n\n", 2, "bad pid" },
	{ HEAD "running 1/0 [001] 1.000000: cpu-clock:" METRICS "\n\n", 2, "[000]" },
	{ HEAD "running 1/0 [000] 1.00000: cpu-clock:" METRICS "\n\n", 2, "six digits" },
	{ HEAD "running 1/0 [000] 1.0000001: cpu-clock:" METRICS "\n\n", 2, "six digits" },
	{ HEAD "running 1/0 [000] x.000000: cpu-clock:" METRICS "\n\n", 2, "bad time" },
	{ HEAD "running 1/0 [000] 1.000000: task-clock:" METRICS "\n\n", 2, "cpu-clock" },
	{ HEAD "running 1/0 [000] 1.000000: cpu-clock:\tmetric_erlang_reductions: 1, 0\n\n",
	  2, "expected metric_erlang_memory" },
	{ HEAD "running 1/0 [000] 1.000000: cpu-clock:\tmetric_erlang_reductions: 1x, 0" METRICS "\n\n",
	  2, "bad value of metric_erlang_reductions" },
	{ HEAD "running 1/0 [000] 1.000000: cpu-clock:\tmetric_erlang_reductions: 99999999999999999999, 0" METRICS "\n\n",
	  2, "bad value of metric_erlang_reductions" },
	{ HEAD EVENT "\textra\n\n", 2, "unexpected text after the metrics" },
	{ HEAD EVENT "\tregistered_name: receive\n\n", 2, "bad registered_name" },
	{ HEAD EVENT "\tregistered_name: 'a b'\n\n", 2, "bad registered_name" },
	{ HEAD EVENT "\tregistered_name: 'a\\x2b'\n\n", 2, "bad registered_name" },
	{ HEAD EVENT "\tregistered_name: 'bad\xff'\n\n", 2, "bad registered_name" },
	{ HEAD EVENT "\tinitial_call: m:f\n\n", 2, "bad initial_call" },
	/* the idle field is the last, and only in its one spelling */
	{ HEAD EVENT "\tidle: swapper/cpu_idle\tregistered_name: x\n\n", 2,
	  "unexpected text after the metrics" },
	{ HEAD EVENT "\tidle: swapper/cpu_idle\tidle: swapper/cpu_idle\n\n", 2,
	  "unexpected text after the metrics" },
	{ HEAD EVENT "\tidle: swapper\n\n", 2, "unexpected text after the metrics" },
	{ HEAD EVENT "\tidle: \n\n", 2, "unexpected text after the metrics" },
	{ HEAD "Running 1/0 [000] 1.000000: cpu-clock:" METRICS "\n\n", 2, "unknown process status" },
	/* frame lines */
	{ HEAD EVENT "\n\t0123456789ABCDEF lists:foldl/3 (lists.erl)\n\n", 3, "frame address" },
	{ HEAD EVENT "\n\t0123456789abcde lists:foldl/3 (lists.erl)\n\n", 3, "frame address" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:Foldl/3 (lists.erl)\n\n", 3, "bad frame name" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:foldl (lists.erl)\n\n", 3, "bad frame name" },
	{ HEAD EVENT "\n\t0123456789abcdef Foo.Bar/1 (foo.ex)\n\n", 3, "bad frame name" },
	{ HEAD EVENT "\n\t0123456789abcdef Foo.\"a b\"/1 (foo.ex)\n\n", 3, "bad frame name" },
	{ HEAD EVENT "\n\t0123456789abcdef anonymous fn/1 in foo:bar/1 (foo.ex)\n\n", 3,
	  "bad frame name" },
	{ HEAD EVENT "\n\t0123456789abcdef Foo.bar/1 x (foo.ex)\n\n", 3, "(FILE)" },
	{ HEAD EVENT "\tregistered_name: Elixir.Foo\n\n", 2, "bad registered_name" },
	{ HEAD EVENT "\n\t0123456789abcdef m:'a-\x3e" "b'/1 (m.erl)\n\n", 3, "bad frame name" },
	{ HEAD EVENT "\n\t0123456789abcdef m:'a;b'/1 (m.erl)\n\n", 3, "bad frame name" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:foldl/3:x (lists.erl)\n\n", 3, "line number" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:foldl/3\n\n", 3, "(FILE)" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:foldl/3 (a b)\n\n", 3, "unescaped byte 0x20" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:foldl/3 (lists.erl) x\n\n", 3, "bad frame file" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:foldl/3 (a\\q)\n\n", 3, "bad escape" },
	{ HEAD EVENT "\n" FRAME "  0123456789abcdef lists:foldl/3 (lists.erl)\n\n", 4, "frame line or a blank line" },
	/* structure */
	{ HEAD EVENT "\n" FRAME "# note\n\n", 4, "comment inside a sample" },
	{ HEAD EVENT "\n" FRAME, 4, "ends inside a sample" },
	{ HEAD EVENT "\n" FRAME "\n\n", 5, "blank line outside a sample" },
	{ "\n" HEAD, 1, "blank line outside a sample" },
	{ HEAD "#no space\n", 2, "a comment is" },
	{ HEAD "# no newline", 2, "no newline at the end" },
	{ HEAD EVENT "\r\n\n", 2, "CR LF" },
	{ HEAD EVENT "\n\t0123456789abcdef lists:foldl/3 (a\0b)\n\n", 3, "unescaped byte 0x00" },
};

START_TEST(grammar_errors)
{
	const char *text = bad_cases[_i].text;
	size_t len = strlen(text);
	struct digest d = { 0 };
	char err[1024], want[1100];
	char *path;

	/* the NUL case: the literal goes on after its NUL */
	if (strstr(bad_cases[_i].what, "0x00"))
		len += strlen(text + len + 1) + 1;
	path = write_temp(text, len);
	fp_assert_int_eq(read_file(path, &d, err, sizeof(err)), -EBADMSG);
	snprintf(want, sizeof(want), "%s:%d: ", path, bad_cases[_i].line);
	if (strncmp(err, want, strlen(want)) != 0 ||
	    !strstr(err, bad_cases[_i].what))
		fprintf(stderr, "case %d: got \"%s\", want \"%s...%s\"\n", _i, err,
			want, bad_cases[_i].what);
	fp_assert(strncmp(err, want, strlen(want)) == 0);
	fp_assert(strstr(err, bad_cases[_i].what) != NULL);
	free(d.text);
	unlink(path);
	free(path);
}
END_TEST

/* Files of earlier versions write the pid as 0.N.S: the same samples
 * with the pid as N/S read the same. */
START_TEST(old_pid_column)
{
	char *path = golden_path("flame_prof/edge.perf");
	struct digest old = { 0 }, now = { 0 };
	size_t len, n = 0;
	char *text = slurp(path, &len);
	char *conv = xzalloc(len + 1), *tmp;

	for (size_t i = 0; i < len;) {
		size_t eol = i, sp;

		while (eol < len && text[eol] != '\n')
			eol++;
		if (eol < len)
			eol++;
		sp = i;
		while (sp < eol && text[sp] != ' ')
			sp++;
		if (text[i] != '#' && text[i] != '\t' && text[i] != '\n' &&
		    eol - sp >= 3 && memcmp(text + sp, " 0.", 3) == 0) {
			const char *pid = text + sp + 3;
			const char *dot = memchr(pid, '.', (size_t)(text + eol - pid));

			fp_assert_ptr_nonnull(dot);
			memcpy(conv + n, text + i, sp + 1 - i);
			n += sp + 1 - i;
			memcpy(conv + n, text + sp + 3, (size_t)(dot - (text + sp + 3)));
			n += (size_t)(dot - (text + sp + 3));
			conv[n++] = '/';
			memcpy(conv + n, dot + 1, (size_t)(text + eol - dot - 1));
			n += (size_t)(text + eol - dot - 1);
		} else {
			memcpy(conv + n, text + i, eol - i);
			n += eol - i;
		}
		i = eol;
	}
	fp_assert(strstr(text, "\nrunning 0.100.0 [000] ") != NULL);
	fp_assert(strstr(conv, "\nrunning 100/0 [000] ") != NULL);
	tmp = write_temp(conv, n);
	fp_assert_int_eq(read_file(path, &old, NULL, 0), 0);
	fp_assert_int_eq(read_file(tmp, &now, NULL, 0), 0);
	fp_assert_int_eq(old.count, 8);
	fp_assert_int_eq(now.count, old.count);
	fp_assert_str_eq(now.text, old.text);
	free(old.text);
	free(now.text);
	unlink(tmp);
	free(tmp);
	free(conv);
	free(text);
	free(path);
}
END_TEST

START_TEST(valid_variants)
{
	/* no comment at all, "#" alone, a comment between samples, an
	 * empty stack, two samples */
	static const char text[] =
		EVENT "\n\n#\n# x\n" EVENT "\tregistered_name: '\\x2B'\tinitial_call: "
		"'Elixir.A':'-f/1-fun-0-'/1\n" FRAME "\n";
	struct digest d = { 0 };
	char *path = write_temp(text, strlen(text));

	fp_assert_int_eq(read_file(path, &d, NULL, 0), 0);
	fp_assert_int_eq(d.count, 2);
	fp_assert(strstr(d.text, "line=1 ") != NULL);
	fp_assert(strstr(d.text, "line=5 ") != NULL);
	fp_assert(strstr(d.text, "reg='\\x2B' init=anonymous fn/1 in A.f/1\n"
				 "  lists:foldl/3 (lists.erl)\n") != NULL);
	free(d.text);
	unlink(path);
	free(path);

	/* an empty file holds no samples and is not an error */
	path = write_temp("", 0);
	fp_assert_int_eq(read_file(path, &d, NULL, 0), 0);
	fp_assert_int_eq(d.count, 0);
	free(d.text);
	unlink(path);
	free(path);
}
END_TEST

START_TEST(callback_stops)
{
	char *path = golden_path("flame_prof/demo.perf");
	struct digest d = { .stop_after = 2 };

	fp_assert_int_eq(read_file(path, &d, NULL, 0), 7);
	fp_assert_int_eq(d.count, 2);
	free(d.text);
	free(path);
}
END_TEST

/* A sample without frames is valid: frames and files are still
 * pointers (callers index and offset them). */
static int
check_frameless(void *data, const struct fp_perf_record *rec)
{
	int *seen = data;

	fp_assert_int_eq(rec->nframes, 0);
	fp_assert_ptr_nonnull(rec->frames);
	fp_assert_ptr_nonnull(rec->files);
	(*seen)++;
	return 0;
}

START_TEST(frameless_sample)
{
	static const char text[] = HEAD EVENT "\n\n" EVENT "\n\n";
	char *path = write_temp(text, strlen(text));
	struct fp_perf_reader *r = NULL;
	int seen = 0;

	fp_assert_int_eq(fp_perf_reader_open(path, &r), 0);
	fp_assert_int_eq(fp_perf_read(r, check_frameless, &seen), 0);
	fp_assert_int_eq(seen, 2);
	fp_perf_reader_destroy(r);
	unlink(path);
	free(path);
}
END_TEST

/* The bounds of what flame_profd writes: 10000 frames read, 10001 an
 * error naming the line, before more is held. */
START_TEST(frame_bound)
{
	size_t flen = strlen(FRAME), cap = strlen(HEAD EVENT) + 10002 * flen + 8;
	char *text = xzalloc(cap), *path;
	char err[1024], want[1200];
	struct digest d = { 0 };
	size_t len = (size_t)sprintf(text, HEAD EVENT "\n");

	for (int i = 0; i < 10000; i++, len += flen)
		memcpy(text + len, FRAME, flen);
	text[len++] = '\n';
	path = write_temp(text, len);
	fp_assert_int_eq(read_file(path, &d, NULL, 0), 0);
	fp_assert_int_eq(d.count, 1);
	free(d.text);
	unlink(path);
	free(path);

	len--;
	memcpy(text + len, FRAME, flen);
	len += flen;
	text[len++] = '\n';
	path = write_temp(text, len);
	fp_assert_int_eq(read_file(path, &d, err, sizeof(err)), -EBADMSG);
	snprintf(want, sizeof(want), "%s:10003: more than 10000 frames in the "
		 "sample of line 2", path);
	if (strncmp(err, want, strlen(want)) != 0)
		fprintf(stderr, "got \"%s\"\n", err);
	fp_assert(strncmp(err, want, strlen(want)) == 0);
	free(d.text);
	unlink(path);
	free(path);
	free(text);
}
END_TEST

/* A FIFO (or a device) is refused at open, not waited on. */
START_TEST(open_not_regular)
{
	char path[64] = "/tmp/fp-read-fifo.XXXXXX";
	struct fp_perf_reader *r = NULL;

	fp_assert_ptr_nonnull(mkdtemp(path));
	strcat(path, "/f");
	fp_assert_int_eq(mkfifo(path, 0600), 0);
	fp_assert_int_eq(fp_perf_reader_open(path, &r), -EINVAL);
	fp_assert_ptr_null(r);
	fp_assert_int_eq(fp_perf_reader_open("/dev/null", &r), -EINVAL);
	unlink(path);
	path[strlen(path) - 2] = '\0';
	rmdir(path);
}
END_TEST

START_TEST(open_errors)
{
	struct fp_perf_reader *r = NULL;

	fp_assert_int_eq(fp_perf_reader_open("/nonexistent/x.perf", &r), -ENOENT);
	fp_assert_ptr_null(r);
	fp_assert_int_eq(fp_perf_reader_open("/tmp", &r), -EISDIR);
	fp_assert_ptr_null(r);
	fp_perf_reader_destroy(NULL);
}
END_TEST

/* A line longer than any buffer refill, still read whole. */
START_TEST(long_lines)
{
	size_t n = 3 * 1024 * 1024, len;
	char *text = xzalloc(n + 4096), *path;
	struct digest d = { 0 };

	len = (size_t)sprintf(text, "# ");
	memset(text + len, 'x', n);
	len += n;
	len += (size_t)sprintf(text + len, "\n" EVENT "\n" FRAME "\n");
	path = write_temp(text, len);
	fp_assert_int_eq(read_file(path, &d, NULL, 0), 0);
	fp_assert_int_eq(d.count, 1);
	fp_assert(strstr(d.text, "line=2 ") != NULL);
	free(d.text);
	unlink(path);
	free(path);
	free(text);
}
END_TEST

static const struct {
	const char *text;
	bool ok;
} atom_cases[] = {
	{ "lists", true },
	{ "foo@bar_Baz9", true },
	{ "'Elixir.Foo'", true },
	{ "'\\x2B'", true },
	{ "'>='", true },
	{ "'-\\x3E'", true },
	{ "'s\xc3\xb6k'", true },
	{ "''", true },
	{ "'receive'", true },
	{ "receive", false },
	{ "Lists", false },
	{ "'a b'", false },
	{ "'a", false },
	{ "'->'", false },
	{ "'\\x2b'", false },
	{ "'\xc3'", false },
	{ "lists x", false },
	{ "", false },
};

START_TEST(written_atoms)
{
	fp_assert_int_eq(fp_perf_is_written_atom(atom_cases[_i].text),
			 atom_cases[_i].ok);
}
END_TEST

/* counts the samples; each must name the header's node (or none) */
static const char *header_node;

static int
count_only(void *data, const struct fp_perf_record *rec)
{
	if (header_node)
		fp_assert_str_eq(rec->node, header_node);
	else
		fp_assert_ptr_null(rec->node);
	(*(int *)data)++;
	return 0;
}

/* The node and the rate of the header; the same text after the first
 * sample is no header. */
static const struct {
	const char *text, *node;
	double rate;
} header_cases[] = {
	{ "# node: a@h\n# options: top=1 every=5s rate=2.5 pids=0\n", "a@h", 2.5 },
	{ "# options: rate=7 top=1\n# node: b@h\n# node: c@h\n", "b@h", 7 },
	{ "# options: xrate=7 rate=x\n", NULL, 0 },
	{ "# options: top=1 rate=0\n", NULL, 0 },
	{ "", NULL, 0 },
};

static void
collect_comment(void *data, const char *text, size_t len)
{
	fp_text_put(data, text, len);
	fp_text_putc(data, '|');
}

/* Every comment, header and notes, reaches the comment function. */
START_TEST(comments)
{
	static const char text[] = "# a b\n#\n" EVENT "\n\n# flame_profd: x interval: y\n";
	struct fp_text seen = { 0 };
	struct fp_perf_reader *r = NULL;
	char *path = write_temp(text, sizeof(text) - 1);
	int n = 0;

	header_node = NULL;
	fp_assert_int_eq(fp_perf_reader_open(path, &r), 0);
	fp_perf_reader_set_comment_fn(r, collect_comment, &seen);
	fp_assert_int_eq(fp_perf_read(r, count_only, &n), 0);
	fp_assert_int_eq(n, 1);
	fp_text_putc(&seen, '\0');
	fp_assert_str_eq(seen.buf, "a b||flame_profd: x interval: y|");
	fp_perf_reader_destroy(r);
	unlink(path);
	free(path);
	fp_text_free(&seen);
}
END_TEST

START_TEST(header)
{
	struct fp_text t = { 0 };
	struct fp_perf_reader *r = NULL;
	char *path;
	int n = 0;

	fp_text_puts(&t, header_cases[_i].text);
	fp_text_puts(&t, EVENT "\n\n"
			 "# node: late@h\n# options: rate=99\n");
	path = write_temp(t.buf, t.len);
	fp_assert_int_eq(fp_perf_reader_open(path, &r), 0);
	fp_assert_ptr_null(fp_perf_reader_node(r));
	header_node = header_cases[_i].node;
	fp_assert_int_eq(fp_perf_read(r, count_only, &n), 0);
	fp_assert_int_eq(n, 1);
	if (header_cases[_i].node)
		fp_assert_str_eq(fp_perf_reader_node(r), header_cases[_i].node);
	else
		fp_assert_ptr_null(fp_perf_reader_node(r));
	fp_assert(fp_perf_reader_rate(r) == header_cases[_i].rate);
	fp_perf_reader_destroy(r);
	unlink(path);
	free(path);
	fp_text_free(&t);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("flame-prof-read");
	TCase *tc;

	tc = tcase_create("fields");
	tcase_add_test(tc, edge_fields);
	tcase_add_loop_test(tc, writer_golden, 0, 6);
	tcase_add_loop_test(tc, forms_merge, 0, 2);
	tcase_add_test(tc, valid_variants);
	tcase_add_test(tc, old_pid_column);
	tcase_add_test(tc, callback_stops);
	tcase_add_test(tc, long_lines);
	tcase_add_loop_test(tc, written_atoms, 0, N(atom_cases));
	tcase_add_loop_test(tc, header, 0, N(header_cases));
	tcase_add_test(tc, comments);
	suite_add_tcase(s, tc);

	tc = tcase_create("compression");
	tcase_add_test(tc, compressed_same_as_plain);
	tcase_add_test(tc, compressed_corrupt);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_loop_test(tc, grammar_errors, 0, N(bad_cases));
	tcase_add_test(tc, open_errors);
	tcase_add_test(tc, open_not_regular);
	tcase_add_test(tc, frameless_sample);
	tcase_add_test(tc, frame_bound);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
