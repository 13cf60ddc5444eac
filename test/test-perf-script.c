/*
 * flame_profd — unit tests: the perf-script writer, byte for byte against
 * golden files (FP_REGENERATE_GOLDEN=1 rewrites them), atom escaping, and
 * frame names in the Elixir and the Erlang form.
 */
#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "fp-test.h"
#include "util-escape.h"
#include "fp/perf-script.h"
#include "frame-names-private.h"
#include "util-buf.h"

static const struct fp_frame frames_a[] = {
	{ "lists", "foldl_1", 3, 1263, "lists.erl", 0 },
	{ "fp_demo", "-busy/1-fun-0-", 1, 40, "/src/fp_demo.erl", 0 },
	{ "erlang", "+", 2, 0, NULL, 0 },
	{ "erlang", ">=", 2, 0, NULL, 0 },
	{ "weird", "a->b", 0, 0, "dir (copy)/weird.erl", 0 },
	{ "fp_demo", "fp demo quoted", 1, 7, "fp_demo.erl", 0 },
	{ "m\xc3\xb6" "d", "receive", 0, 0, "", 0 },
	{ "Elixir.MyApp.Worker", "handle_call", 3, 12, "lib/my_app/worker.ex", 0 },
	{ "Elixir.MyApp.Worker", "-loop/1-fun-0-", 1, 20, "lib/my_app/worker.ex", 0 },
	{ "Elixir.Kernel", "+", 2, 0, "lib/kernel.ex", 0 },
	{ "gen_server", "loop", 7, 437, "gen_server.erl", 0 },
	{ "semi", "a;b", 1, 0, "x\ty.erl", 0 },
	{ "fp_demo", "with (parens)", 1, 9, "fp_demo.erl", 0 },
	{ "Elixir.Foo", "f(x)", 0, 3, "lib/foo.ex", 0 },
};

static const struct fp_frame frames_b[] = {
	{ "gen_server", "loop", 7, 437, "gen_server.erl", 0 },
};

static void
fill(struct fp_sample *s, const struct fp_frame *frames, uint32_t n)
{
	memset(s, 0, sizeof(*s));
	s->frames = frames;
	s->nframes = n;
}

/* One sample into @f, or appended to @t when @f is NULL. */
static void
emit(struct fp_perf_writer *w, FILE *f, struct fp_text *t,
     const struct fp_sample *s)
{
	if (f)
		fp_assert_int_eq(fp_perf_write_sample(w, f, s), 0);
	else
		fp_perf_format_sample(w, t, s);
}

/* The golden text, written to a FILE, or (@buffered) appended to a
 * caller's buffer. */
static char *
render_to(bool lines, bool erlang_names, bool buffered)
{
	static const char *const key_names[] = { "tenant", "request_id" };
	static const char *const keys_b[] = { NULL, "req 7\\\t\xc3\xa9" };
	struct fp_perf_options o = {
		.lines = lines, .erlang_names = erlang_names,
		.key_names = key_names, .nkeys = 2,
	};
	struct fp_perf_writer *w = fp_perf_writer_new(&o);
	struct fp_sample s;
	struct fp_text t = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = buffered ? NULL : open_memstream(&buf, &len);

	if (f) {
		fp_perf_write_comment(w, f, "flame_profd test header");
		fp_perf_write_comment(w, f, "a comment\nwith a newline");
	} else {
		fp_perf_format_comment(w, &t, "flame_profd test header");
		fp_perf_format_comment(w, &t, "a comment\nwith a newline");
	}

	fill(&s, frames_a, sizeof(frames_a) / sizeof(frames_a[0]));
	s.pid = (struct fp_pid){ 123, 0 };
	s.time_us = 1795247790018286ULL;
	s.status = FP_STATUS_RUNNING;
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		s.value[m] = 1000 * (m + 1);
		s.delta[m] = m % 2 ? -(m + 1) : m;
	}
	s.registered_name = "my_server";
	s.has_initial_call = true;
	s.initial_call = (struct fp_frame){ "my_server", "init", 1, 0, NULL, 0 };
	emit(w, f, &t, &s);

	fill(&s, frames_b, 1);
	s.pid = (struct fp_pid){ 4, 2 };
	s.time_us = 1795247790000001ULL;
	s.status = FP_STATUS_WAITING;
	s.registered_name = "Elixir.Registry";
	/* labels and keys escaped: space, tab, backslash; UTF-8 kept */
	s.label = "{rw_pool,1}";
	s.keys = keys_b;
	s.nkeys = 2;
	s.callers = "<0.101.0>,<0.90.0>";
	emit(w, f, &t, &s);

	fill(&s, NULL, 0);	/* an empty stack still makes a sample */
	s.pid = (struct fp_pid){ 5, 0 };
	s.time_us = 1795247791000000ULL;
	s.status = FP_STATUS_GARBAGE_COLLECTING;
	emit(w, f, &t, &s);

	fp_perf_writer_destroy(w);
	if (f) {
		fclose(f);
		return buf;
	}
	fp_text_putc(&t, '\0');
	return t.buf;
}

static char *
render(bool lines, bool erlang_names)
{
	return render_to(lines, erlang_names, false);
}

static void
check_golden(const char *name, const char *got)
{
	const char *dir = getenv("FP_GOLDEN_DIR");
	char path[4096];
	char *want = NULL;
	size_t len = 0;
	FILE *f;

	fp_assert_ptr_nonnull(dir);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (getenv("FP_REGENERATE_GOLDEN")) {
		f = fopen(path, "w");
		fp_assert_ptr_nonnull(f);
		fputs(got, f);
		fclose(f);
	}
	f = fopen(path, "r");
	fp_assert_ptr_nonnull(f);
	want = calloc(1, 1 << 20);
	len = fread(want, 1, (1 << 20) - 1, f);
	fclose(f);
	want[len] = '\0';
	if (strcmp(want, got) != 0)
		fprintf(stderr, "--- %s differs; got:\n%s", path, got);
	fp_assert_str_eq(want, got);
	free(want);
}

static ssize_t
text_write(void *cookie, const char *buf, size_t len)
{
	fp_text_put(cookie, buf, len);
	return (ssize_t)len;
}

/*
 * One sample's text, written by @w, NUL-terminated; the caller frees it
 * with fp_text_free(). The bytes live in the fp_text's heap buffer, not
 * in a local of this function (open_memstream's pointer-to-local, once
 * inlined at -O3, reads to gcc 12 as a dangling pointer).
 */
static struct fp_text
write_one(struct fp_perf_writer *w, const struct fp_sample *smp)
{
	struct fp_text t = { 0 };
	FILE *f = fopencookie(&t, "w", (cookie_io_functions_t){ .write = text_write });

	fp_assert_ptr_nonnull(f);
	fp_assert_int_eq(fp_perf_write_sample(w, f, smp), 0);
	fclose(f);
	fp_text_putc(&t, '\0');
	t.len--;
	return t;
}

/* Frames and stacks with cache ids come out as they do without: on the
 * first write (cache filled) and on later ones (cache used), also when a
 * cached frame turns up in another stack. */
START_TEST(cached_text)
{
	const size_t na = sizeof(frames_a) / sizeof(frames_a[0]);
	struct fp_perf_options o = { .lines = _i == 1 };
	struct fp_perf_writer *plain = fp_perf_writer_new(&o);
	struct fp_perf_writer *w = fp_perf_writer_new(&o);
	struct fp_frame a[sizeof(frames_a) / sizeof(frames_a[0])], b[2];
	struct fp_sample sa, sb, sa_plain, sb_plain;
	struct fp_text want_a, want_b;

	for (size_t i = 0; i < na; i++) {
		a[i] = frames_a[i];
		a[i].id = (1ULL << 40) + i;
	}
	b[0] = frames_b[0];
	b[0].id = (1ULL << 40) + 10;	/* the same frame as a[10] */
	b[1] = frames_a[0];
	b[1].id = (1ULL << 40);
	fill(&sa_plain, frames_a, (uint32_t)na);
	sa_plain.time_us = 1795247790018286ULL;
	sa = sa_plain;
	sa.frames = a;
	sa.stack_id = (1ULL << 41) + 1;
	fill(&sb, b, 2);
	sb.time_us = 1795247790018287ULL;
	sb.stack_id = (1ULL << 41) + 2;
	sb_plain = sb;
	sb_plain.stack_id = 0;
	{
		struct fp_frame bp[2] = { frames_b[0], frames_a[0] };

		sb_plain.frames = bp;
		want_a = write_one(plain, &sa_plain);
		want_b = write_one(plain, &sb_plain);
	}
	for (int k = 0; k < 3; k++) {
		struct fp_text got_a = write_one(w, &sa), got_b = write_one(w, &sb);

		fp_assert_str_eq(got_a.buf, want_a.buf);
		fp_assert_str_eq(got_b.buf, want_b.buf);
		fp_text_free(&got_a);
		fp_text_free(&got_b);
	}
	fp_text_free(&want_a);
	fp_text_free(&want_b);
	fp_perf_writer_destroy(w);
	fp_perf_writer_destroy(plain);
}
END_TEST

START_TEST(golden_basic)
{
	char *got = render(false, false);

	check_golden("basic.perf", got);
	free(got);
}
END_TEST

/* Appended record by record to a caller's buffer, the text is the one
 * the FILE calls write. */
START_TEST(golden_buffer)
{
	char *got = render_to(false, false, true);

	check_golden("basic.perf", got);
	free(got);
	got = render_to(true, true, true);
	check_golden("erlang-names.perf", got);
	free(got);
}
END_TEST

START_TEST(golden_lines)
{
	char *got = render(true, false);

	check_golden("lines.perf", got);
	free(got);
}
END_TEST

START_TEST(golden_erlang_names)
{
	char *got = render(true, true);

	check_golden("erlang-names.perf", got);
	free(got);
}
END_TEST

static const struct {
	const char *atom;
	const char *want;
} atom_cases[] = {
	{ "lists", "lists" },
	{ "foo@bar_Baz9", "foo@bar_Baz9" },
	{ "Elixir.Foo", "'Elixir.Foo'" },
	{ "+", "'\\x2B'" },
	{ ">=", "'>='" },
	{ "->", "'-\\x3E'" },
	{ "-fun-0-", "'-fun-0-'" },
	{ "a b", "'a\\x20b'" },
	{ "it's", "'it\\x27s'" },
	{ "back\\slash", "'back\\x5Cslash'" },
	{ "semi;colon", "'semi\\x3Bcolon'" },
	{ "with (parens)", "'with\\x20\\x28parens\\x29'" },
	{ "tab\tnl\n", "'tab\\x09nl\\x0A'" },
	{ "receive", "'receive'" },
	{ "s\xc3\xb6" "k", "'s\xc3\xb6k'" },
	{ "", "''" },
	{ "_x", "'_x'" },
	/* node text as the rule for it has it (util-escape.h) */
	{ "a" FP_NUL_CARRIER "b", "'a\\x00b'" },
	{ "csi\xc2\x9b" "1", "'csi\\xC2\\x9B1'" },
	{ "bad\xff" "z", "'bad\\xFFz'" },
	{ "cut\xe2\x82", "'cut\\xE2\\x82'" },
	{ "esc\x1b]0", "'esc\\x1B]0'" },
};

START_TEST(atom_escape)
{
	char buf[128];
	size_t n = fp_perf_format_atom(buf, sizeof(buf), atom_cases[_i].atom);

	fp_assert_str_eq(buf, atom_cases[_i].want);
	fp_assert_int_eq(n, strlen(atom_cases[_i].want));
	fp_assert(strchr(buf, ';') == NULL);
	fp_assert(strchr(buf, ' ') == NULL);
	fp_assert(strchr(buf, '+') == NULL);
	fp_assert(strstr(buf, "->") == NULL);
}
END_TEST

START_TEST(atom_truncate)
{
	char buf[4];
	size_t n = fp_perf_format_atom(buf, sizeof(buf), "a b c");

	fp_assert_int_eq(n, strlen("'a\\x20b\\x20c'"));
	fp_assert_str_eq(buf, "'a\\");
}
END_TEST


/*
 * Frame names: the Elixir form (Exception.format_mfa/3's) and the Erlang
 * form of the same frame. NULL for @elixir: the Erlang form either way.
 */
static const struct {
	const char *module, *function;
	uint32_t arity;
	const char *elixir, *erlang;
} name_cases[] = {
	/* Elixir modules, nested aliases */
	{ "Elixir.RwEx.Client", "loop", 1, "RwEx.Client.loop/1",
	  "'Elixir.RwEx.Client':loop/1" },
	{ "Elixir.RwEx.Counter", "handle_call", 3, "RwEx.Counter.handle_call/3",
	  "'Elixir.RwEx.Counter':handle_call/3" },
	{ "Elixir.A.B_2.C9", "f", 0, "A.B_2.C9.f/0", "'Elixir.A.B_2.C9':f/0" },
	{ "Elixir.Foo", "valid?", 1, "Foo.valid?/1", "'Elixir.Foo':'valid?'/1" },
	{ "Elixir.Foo", "run!", 0, "Foo.run!/0", "'Elixir.Foo':'run!'/0" },
	{ "Elixir.Foo", "__info__", 1, "Foo.__info__/1", "'Elixir.Foo':'__info__'/1" },
	{ "Elixir.Foo", "end", 0, "Foo.end/0", "'Elixir.Foo':'end'/0" },
	{ "Elixir.Foo", "_", 0, "Foo._/0", "'Elixir.Foo':'_'/0" },
	/* anonymous functions: A is the frame's arity */
	{ "Elixir.RwEx.Client", "-loop/1-fun-0-", 1,
	  "anonymous fn/1 in RwEx.Client.loop/1",
	  "'Elixir.RwEx.Client':'-loop/1-fun-0-'/1" },
	{ "Elixir.RwEx.Client", "-start/0-fun-12-", 0,
	  "anonymous fn/0 in RwEx.Client.start/0",
	  "'Elixir.RwEx.Client':'-start/0-fun-12-'/0" },
	{ "Elixir.Foo", "-valid?/2-fun-1-", 3, "anonymous fn/3 in Foo.valid?/2",
	  "'Elixir.Foo':'-valid?/2-fun-1-'/3" },
	{ "Elixir.Foo", "-a b/1-fun-0-", 1, "anonymous fn/1 in Foo.\"a\\x20b\"/1",
	  "'Elixir.Foo':'-a\\x20b/1-fun-0-'/1" },
	/* a fun in a fun: Elixir's rule takes the last "/ARITY-fun-N-" */
	{ "Elixir.Foo", "-f/2-fun-0-/1-fun-1-", 1,
	  "anonymous fn/1 in Foo.\"f/2-fun-0-\"/1",
	  "'Elixir.Foo':'-f/2-fun-0-/1-fun-1-'/1" },
	/* other compiler-made names: quoted, as Elixir prints them */
	{ "Elixir.Foo", "-bar/1-lc$^0/1-0-", 2, "Foo.\"-bar/1-lc$^0/1-0-\"/2",
	  "'Elixir.Foo':'-bar/1-lc$^0/1-0-'/2" },
	{ "Elixir.Foo", "-inlined-bar/1-", 1, "Foo.\"-inlined-bar/1-\"/1",
	  "'Elixir.Foo':'-inlined-bar/1-'/1" },
	{ "Elixir.Foo", "-fun.bar/1-", 1, "Foo.\"-fun.bar/1-\"/1",
	  "'Elixir.Foo':'-fun.bar/1-'/1" },
	{ "Elixir.Foo", "-x/y-fun-0-", 1, "Foo.\"-x/y-fun-0-\"/1",
	  "'Elixir.Foo':'-x/y-fun-0-'/1" },
	/* operators: bare, but never with '+' (Flamescope cuts there) */
	{ "Elixir.Kernel", "<>", 2, "Kernel.<>/2", "'Elixir.Kernel':'<>'/2" },
	{ "Elixir.Kernel", "/", 2, "Kernel.//2", "'Elixir.Kernel':'/'/2" },
	{ "Elixir.Kernel", "**", 2, "Kernel.**/2", "'Elixir.Kernel':'**'/2" },
	{ "Elixir.Kernel", "\\\\", 2, "Kernel.\\\\/2",
	  "'Elixir.Kernel':'\\x5C\\x5C'/2" },
	{ "Elixir.Kernel", "|>", 2, "Kernel.|>/2", "'Elixir.Kernel':'|>'/2" },
	{ "Elixir.Kernel", "and", 2, "Kernel.and/2", "'Elixir.Kernel':'and'/2" },
	{ "Elixir.Kernel", "+", 2, "Kernel.\"\\x2B\"/2", "'Elixir.Kernel':'\\x2B'/2" },
	{ "Elixir.Kernel", "++", 2, "Kernel.\"\\x2B\\x2B\"/2",
	  "'Elixir.Kernel':'\\x2B\\x2B'/2" },
	{ "Elixir.Kernel", "->", 2, "Kernel.\"-\\x3E\"/2", "'Elixir.Kernel':'-\\x3E'/2" },
	{ "Elixir.Kernel", "..", 2, "Kernel.\"..\"/2", "'Elixir.Kernel':'..'/2" },
	/* quoted names */
	{ "Elixir.Foo", "weird name", 1, "Foo.\"weird\\x20name\"/1",
	  "'Elixir.Foo':'weird\\x20name'/1" },
	{ "Elixir.Foo", "Bar", 0, "Foo.\"Bar\"/0", "'Elixir.Foo':'Bar'/0" },
	{ "Elixir.Foo", "a\"b#{c}'d;", 0, "Foo.\"a\\x22b\\x23{c}'d\\x3B\"/0",
	  "'Elixir.Foo':'a\"b#{c}\\x27d\\x3B'/0" },
	{ "Elixir.Foo", "", 0, "Foo.\"\"/0", "'Elixir.Foo':''/0" },
	{ "Elixir.Foo", "f(x)", 1, "Foo.\"f\\x28x\\x29\"/1", "'Elixir.Foo':'f\\x28x\\x29'/1" },
	/* unicode: valid UTF-8, quoted in the Elixir form */
	{ "Elixir.Foo", "s\xc3\xb6k", 1, "Foo.\"s\xc3\xb6k\"/1",
	  "'Elixir.Foo':'s\xc3\xb6k'/1" },
	{ "Elixir.Foo", "-s\xc3\xb6k/0-fun-0-", 0,
	  "anonymous fn/0 in Foo.\"s\xc3\xb6k\"/0",
	  "'Elixir.Foo':'-s\xc3\xb6k/0-fun-0-'/0" },
	/* not an alias Elixir prints bare: the Erlang form */
	{ "Elixir.F\xc3\xb6o", "bar", 1, NULL, "'Elixir.F\xc3\xb6o':bar/1" },
	{ "Elixir.foo", "bar", 1, NULL, "'Elixir.foo':bar/1" },
	{ "Elixir.Foo..Bar", "bar", 1, NULL, "'Elixir.Foo..Bar':bar/1" },
	{ "Elixir.Foo.", "bar", 1, NULL, "'Elixir.Foo.':bar/1" },
	{ "Elixir.", "bar", 1, NULL, "'Elixir.':bar/1" },
	{ "Elixir", "bar", 1, NULL, "'Elixir':bar/1" },
	{ "Elixir.Elixir.Foo", "bar", 1, NULL, "'Elixir.Elixir.Foo':bar/1" },
	{ "Elixir.Elixir", "bar", 1, NULL, "'Elixir.Elixir':bar/1" },
	/* Erlang modules and their funs: untouched */
	{ "lists", "foldl", 3, NULL, "lists:foldl/3" },
	{ "fp_demo", "-busy/1-fun-0-", 1, NULL, "fp_demo:'-busy/1-fun-0-'/1" },
	{ "erlang", "+", 2, NULL, "erlang:'\\x2B'/2" },
	{ "elixir_foo", "-f/1-fun-0-", 1, NULL, "elixir_foo:'-f/1-fun-0-'/1" },
	{ "m\xc3\xb6" "d", "x", 0, NULL, "'m\xc3\xb6" "d':x/0" },
};

static char *
format_mfa(const char *m, const char *f, uint32_t arity, bool elixir)
{
	struct fp_text t = { 0 };

	fp_name_put_mfa(&t, m, strlen(m), f, strlen(f), arity, elixir);
	fp_text_putc(&t, '\0');
	return t.buf;
}

/* Scan @written as the reader does, and write it in the other form. */
static char *
convert(const char *written, bool elixir)
{
	const char *end = written + strlen(written);
	struct fp_name_mfa mfa;
	struct fp_text t = { 0 };

	fp_assert_ptr_eq(fp_name_scan_mfa(written, end, &mfa), end);
	if (fp_name_mfa_other_form(&mfa, elixir))
		fp_name_convert_mfa(&t, &mfa, elixir);
	else
		fp_text_put(&t, written, strlen(written));
	fp_text_putc(&t, '\0');
	return t.buf;
}

START_TEST(name_forms)
{
	const char *want_ex = name_cases[_i].elixir ? name_cases[_i].elixir :
			      name_cases[_i].erlang;
	char *ex = format_mfa(name_cases[_i].module, name_cases[_i].function,
			      name_cases[_i].arity, true);
	char *erl = format_mfa(name_cases[_i].module, name_cases[_i].function,
			       name_cases[_i].arity, false);
	char *back;

	fp_assert_str_eq(ex, want_ex);
	fp_assert_str_eq(erl, name_cases[_i].erlang);
	/* one frame for every reader: no ';', no '+', no "->", no " (",
	 * and spaces only in "anonymous fn/A in " */
	fp_assert(strchr(ex, ';') == NULL && strchr(ex, '+') == NULL);
	fp_assert(strstr(ex, "->") == NULL && strstr(ex, " (") == NULL);
	fp_assert(strchr(strncmp(ex, "anonymous fn/", 13) ? ex : strstr(ex, " in ") + 4,
			 ' ') == NULL);
	/* both forms scan; each converts into the other */
	back = convert(erl, true);
	fp_assert_str_eq(back, want_ex);
	free(back);
	back = convert(want_ex, true);
	fp_assert_str_eq(back, want_ex);
	free(back);
	if (!strstr(want_ex, "anonymous fn/")) {
		back = convert(want_ex, false);
		fp_assert_str_eq(back, erl);
		free(back);
	}
	free(ex);
	free(erl);
}
END_TEST

/* The Elixir form has no fun index: the Erlang form says '?'. */
START_TEST(name_anonymous_to_erlang)
{
	char *erl = convert("anonymous fn/2 in RwEx.Client.loop/1", false);

	char *ex = convert(erl, true);

	fp_assert_str_eq(erl, "'Elixir.RwEx.Client':'-loop/1-fun-?-'/2");
	fp_assert_str_eq(ex, "anonymous fn/2 in RwEx.Client.loop/1");
	free(erl);
	free(ex);
}
END_TEST

static const char *const bad_names[] = {
	"Foo.bar",			/* no arity */
	"Foo.Bar/1",			/* a function is never an alias */
	"foo.bar/1",			/* an Erlang module needs ':' */
	"Foo.\"a b\"/1",			/* unescaped space */
	"Foo.\"a+b\"/1",
	"Foo.\"a#{b}\"/1",
	"Foo.\"a->b\"/1",
	"Foo.\"a\\x2b\"/1",		/* lowercase hex */
	"Foo.+/2",			/* '+' is written quoted */
	"Foo.../2",
	"Foo.\"bar/1",
	"Elixir.Foo.bar/1",		/* never written: an alias Elixir.* */
	"anonymous fn/1 in foo:bar/1",
	"anonymous fn/ in Foo.bar/1",
	"anonymous fn/1 Foo.bar/1",
	"Foo.b\xc3r/1",
	"'csi\xc2\x9b':f/1",		/* a C1 control is written \xC2\xHH */
	"m:'f\xff'/1",			/* no UTF-8 */
};

START_TEST(name_bad)
{
	const char *text = bad_names[_i];
	const char *end = text + strlen(text);
	struct fp_name_mfa mfa;

	fp_assert(fp_name_scan_mfa(text, end, &mfa) != end);
}
END_TEST

START_TEST(name_process)
{
	char buf[64];

	fp_perf_format_name(buf, sizeof(buf), "Elixir.RwEx.Counter", false);
	fp_assert_str_eq(buf, "RwEx.Counter");
	fp_perf_format_name(buf, sizeof(buf), "Elixir.RwEx.Counter", true);
	fp_assert_str_eq(buf, "'Elixir.RwEx.Counter'");
	fp_perf_format_name(buf, sizeof(buf), "Elixir.rw", false);
	fp_assert_str_eq(buf, "'Elixir.rw'");
	fp_perf_format_name(buf, sizeof(buf), "my_server", false);
	fp_assert_str_eq(buf, "my_server");
}
END_TEST

/*
 * Which statuses are idle, and that stock Flamescope's idle pattern
 * (app/perf/regexp.py idle_regexp, searched in the event line and the
 * frames joined) matches the event line of exactly those samples, also
 * with a label, keys and callers on it.
 */
static const struct {
	enum fp_status status;
	bool idle;
} idle_cases[] = {
	{ FP_STATUS_RUNNING, false },
	{ FP_STATUS_RUNNABLE, false },
	{ FP_STATUS_WAITING, true },
	{ FP_STATUS_GARBAGE_COLLECTING, false },
	{ FP_STATUS_SUSPENDED, true },
	{ FP_STATUS_EXITING, false },
	{ FP_STATUS_FREE, false },
	{ FP_STATUS_UNKNOWN, false },
	{ FP_STATUS_CPU, false },
	{ FP_STATUS_TRACED, false },
};

START_TEST(idle_field)
{
	static const char *const key_names[] = { "tenant" };
	static const char *const keys[] = { "swapper" };
	struct fp_perf_options o = { .key_names = key_names, .nkeys = 1 };
	struct fp_perf_writer *w = fp_perf_writer_new(&o);
	struct fp_sample s;
	regex_t flamescope_idle;
	struct fp_text text;
	char *eol;

	fp_assert_int_eq(regcomp(&flamescope_idle,
				 "swapper.*(cpuidle|cpu_idle|cpu_bringup_and_idle|"
				 "native_safe_halt|xen_hypercall_sched_op|"
				 "xen_hypercall_vcpu_op)", REG_EXTENDED | REG_NOSUB), 0);
	fill(&s, frames_b, 1);
	s.status = idle_cases[_i].status;
	s.label = "{rw_pool,1}";
	s.keys = keys;
	s.nkeys = 1;
	s.callers = "<0.101.0>";
	for (int first = 0; first < 2; first++) {
		/* the status rule: the first sample of a process too */
		s.has_delta = !first;
		fp_assert_int_eq(fp_sample_is_idle(&s), idle_cases[_i].idle);
		text = write_one(w, &s);
		eol = strchr(text.buf, '\n');
		fp_assert_ptr_nonnull(eol);
		*eol = '\0';
		fp_assert_int_eq(regexec(&flamescope_idle, text.buf, 0, NULL, 0) == 0,
				 idle_cases[_i].idle);
		fp_assert_int_eq(strlen(text.buf) > strlen(FP_PERF_IDLE_FIELD) &&
				 strcmp(text.buf + strlen(text.buf) - strlen(FP_PERF_IDLE_FIELD),
					FP_PERF_IDLE_FIELD) == 0,
				 idle_cases[_i].idle);
		fp_text_free(&text);
	}
	regfree(&flamescope_idle);
	fp_perf_writer_destroy(w);
}
END_TEST

/* A traced sample is idle when its leaf is the SLEEP frame (time off a
 * scheduler) and only then: the frame under it, or another status with
 * that leaf, is not. */
START_TEST(idle_traced_sleep)
{
	static const struct fp_frame sleep[] = {
		{ FP_SLEEP_MODULE, FP_SLEEP_FUNCTION, 0, 0, NULL, 0 },
		{ "gen_server", "loop", 7, 0, NULL, 0 },
	};
	struct fp_perf_writer *w = fp_perf_writer_new(NULL);
	struct fp_sample s;
	struct fp_text text;

	fill(&s, sleep, 2);
	s.status = FP_STATUS_TRACED;
	fp_assert(fp_sample_is_idle(&s));
	text = write_one(w, &s);
	fp_assert_ptr_nonnull(strstr(text.buf, FP_PERF_IDLE_FIELD "\n"));
	fp_assert_ptr_nonnull(strstr(text.buf, "SLEEP"));
	fp_text_free(&text);
	fill(&s, sleep + 1, 1);
	s.status = FP_STATUS_TRACED;
	fp_assert(!fp_sample_is_idle(&s));
	fill(&s, sleep, 2);
	s.status = FP_STATUS_RUNNING;
	fp_assert(!fp_sample_is_idle(&s));
	fill(&s, sleep, 0);
	s.status = FP_STATUS_TRACED;
	fp_assert(!fp_sample_is_idle(&s));
	fp_perf_writer_destroy(w);
}
END_TEST

/* Output goes through stdio: a full device shows as an error, not silence. */
START_TEST(write_error)
{
	struct fp_perf_writer *w = fp_perf_writer_new(NULL);
	struct fp_sample s;
	FILE *f = fopen("/dev/full", "w");
	int rc = 0;

	if (!f)
		return;
	setvbuf(f, NULL, _IONBF, 0);
	fill(&s, frames_b, 1);
	rc = fp_perf_write_sample(w, f, &s);
	fp_assert_int_lt(rc, 0);
	fclose(f);
	fp_perf_writer_destroy(w);
}
END_TEST

#define N(a) (int)(sizeof(a) / sizeof(a[0]))

static Suite *
suite(void)
{
	Suite *s = suite_create("perf-script");
	TCase *tc;

	tc = tcase_create("golden");
	tcase_add_test(tc, golden_basic);
	tcase_add_test(tc, golden_buffer);
	tcase_add_test(tc, golden_lines);
	tcase_add_test(tc, golden_erlang_names);
	tcase_add_loop_test(tc, cached_text, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("escaping");
	tcase_add_loop_test(tc, atom_escape, 0, N(atom_cases));
	tcase_add_test(tc, atom_truncate);
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	tcase_add_loop_test(tc, name_forms, 0, N(name_cases));
	tcase_add_test(tc, name_anonymous_to_erlang);
	tcase_add_loop_test(tc, name_bad, 0, N(bad_names));
	tcase_add_test(tc, name_process);
	suite_add_tcase(s, tc);

	tc = tcase_create("idle");
	tcase_add_loop_test(tc, idle_field, 0, N(idle_cases));
	tcase_add_test(tc, idle_traced_sleep);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_test(tc, write_error);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
