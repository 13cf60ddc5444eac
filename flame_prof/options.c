/*
 * flame_prof — the options of every command, in one table.
 *
 * Each row says what an option is called, what argument it takes, which
 * commands it applies to, how its argument is parsed and what --help
 * says of it. An option may have a row per meaning (--by FIELD for the
 * renderers, --by self|total for diff): a command sees only the rows
 * that apply to it, so its --help lists exactly the options it takes,
 * and an option that applies elsewhere is refused by name.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "flame_prof.h"
#include "fp/perf-script.h"
#include "fp/top.h"
#include "util-mem.h"
#include "util-parse.h"

const char *const fpp_command_names[FPP_CMD_COUNT] = {
	"folded", "svg", "heatmap", "top", "speedscope", "diff", "procs",
	"pprof", "nodes",
};

#define B(c) (1u << FPP_CMD_##c)
#define ALL ((1u << FPP_CMD_COUNT) - 1)
#define TREES (B(FOLDED) | B(SVG) | B(SPEEDSCOPE) | B(DIFF))
#define WEIGHTED (ALL & ~B(PROCS) & ~B(PPROF) & ~B(NODES))

void
fpp_fail(const char *format, ...)
{
	va_list args;

	fprintf(stderr, "flame_prof: ");
	va_start(args, format);
	vfprintf(stderr, format, args);
	va_end(args);
	fputc('\n', stderr);
}

/* ---- argument parsers ---- */

static bool
parse_uint(const char *text, unsigned long long max, unsigned long long *v)
{
	char *end;

	if (!*text || *text == '-')
		return false;
	errno = 0;
	*v = strtoull(text, &end, 10);
	return !errno && !*end && *v <= max;
}

static bool
parse_double(const char *text, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(text, &end);
	return !errno && end != text && !*end && *v >= 0;
}


/* label, callers, node, key:NAME, key.NAME or NAME (a key); @n bytes of
 * @text.
 * The key's name points into @text, which outlives the options. */
static int
parse_field(const char *text, size_t n, struct fpp_field *f)
{
	if (n == 0)
		return -EINVAL;
	if (n == 5 && strncmp(text, "label", 5) == 0) {
		f->kind = FPP_FIELD_LABEL;
		return 0;
	}
	if (n == 7 && strncmp(text, "callers", 7) == 0) {
		f->kind = FPP_FIELD_CALLERS;
		return 0;
	}
	if (n == 4 && strncmp(text, "node", 4) == 0) {
		f->kind = FPP_FIELD_NODE;
		return 0;
	}
	if (n > 4 && (strncmp(text, "key:", 4) == 0 || strncmp(text, "key.", 4) == 0)) {
		text += 4;
		n -= 4;
	}
	f->kind = FPP_FIELD_KEY;
	f->key = text;
	f->keylen = n;
	snprintf(f->title, sizeof(f->title), "%.*s", (int)n, text);
	return 0;
}

static int
opt_weight(struct fpp_options *o, const char *text)
{
	size_t n;

	if (!text)
		return -EINVAL;
	n = strlen(text);
	snprintf(o->weight_name, sizeof(o->weight_name), "%s", text);
	if (strcmp(text, "samples") == 0) {
		o->weight = -1;
		return 0;
	}
	for (int m = 0; m < FP_METRIC_COUNT; m++) {
		const char *name = fp_metric_name((enum fp_metric)m);
		size_t k = strlen(name);

		if (strcmp(text, name) == 0) {
			o->weight = m;
			o->delta = false;
			return 0;
		}
		if (n == k + 6 && strncmp(text, name, k) == 0 &&
		    strcmp(text + k, "_delta") == 0) {
			o->weight = m;
			o->delta = true;
			return 0;
		}
	}
	fpp_fail("unknown weight '%s' (samples, METRIC or METRIC_delta; see --help)",
		 text);
	return -EINVAL;
}

static int
opt_limit(struct fpp_options *o, const char *arg)
{
	unsigned long long u;

	if (!parse_uint(arg, SIZE_MAX, &u)) {
		fpp_fail("bad --limit '%s'", arg);
		return -EINVAL;
	}
	o->limit = (size_t)u;
	o->limit_set = true;
	return 0;
}

static int
opt_status(struct fpp_options *o, const char *text)
{
	char *copy = xstrdup(text), *save = NULL;
	int rc = 0;

	o->status_filter = true;
	for (char *tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		enum fp_status s = fp_status_from_name(tok);

		if (s == FP_STATUS_UNKNOWN && strcmp(tok, "unknown") != 0) {
			fpp_fail("bad --status '%s'", text);
			rc = -EINVAL;
			break;
		}
		o->status_ok[s] = true;
	}
	free(copy);
	return rc;
}

static int
opt_pid(struct fpp_options *o, const char *text)
{
	char *copy = xstrdup(text), *save = NULL;
	int rc = 0;

	for (char *tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		struct fp_pid pid;

		rc = fp_pid_parse(tok, &pid);
		if (rc < 0) {
			fpp_fail("bad --pid '%s' (expected <0.123.0> or 0.123.0)",
				 text);
			break;
		}
		FP_GROW(o->pids, o->pids_cap, o->npids + 1);
		o->pids[o->npids++] = pid;
	}
	free(copy);
	return rc;
}

static int
opt_name(struct fpp_options *o, const char *arg)
{
	/* converted once the options are read and the form is known */
	FP_GROW(o->names, o->names_cap, o->nnames + 1);
	o->names[o->nnames++] = xstrdup(arg);
	return 0;
}

static int
opt_where(struct fpp_options *o, const char *arg)
{
	const char *op = arg + strcspn(arg, "=~");
	struct fpp_where w = { .contains = *op == '~', .text = op + 1 };

	if (!*op || parse_field(arg, (size_t)(op - arg), &w.field) < 0) {
		fpp_fail("bad --where '%s' (FIELD=TEXT or FIELD~TEXT; FIELD label, callers or a key's NAME)",
			 arg);
		return -EINVAL;
	}
	FP_GROW(o->wheres, o->wheres_cap, o->nwheres + 1);
	o->wheres[o->nwheres++] = w;
	return 0;
}

static int
opt_group_by(struct fpp_options *o, const char *arg)
{
	if (parse_field(arg, strlen(arg), &o->group_by) < 0) {
		fpp_fail("bad --by '%s' (label, callers, key:NAME)", arg);
		return -EINVAL;
	}
	o->group = true;
	o->group_by_arg = arg;
	return 0;
}

/* --window and --interval of top --follow */
static int
opt_follow_duration(const char *name, const char *arg, uint64_t min_us,
		    uint64_t *us)
{
	if (parse_duration(arg, 3600ULL * 1000000, us) < 0 || *us < min_us) {
		fpp_fail("bad --%s '%s' (a duration from %s to 1h: 10s, 500ms, 2m)",
			 name, arg, min_us >= 1000000 ? "1s" : "100ms");
		return -EINVAL;
	}
	return 0;
}

static int
opt_window(struct fpp_options *o, const char *arg)
{
	return opt_follow_duration("window", arg, 1000000, &o->window_us);
}

static int
opt_interval(struct fpp_options *o, const char *arg)
{
	return opt_follow_duration("interval", arg, 100000, &o->interval_us);
}

static int
opt_time(struct fpp_time *t, const char *arg)
{
	if (fpp_time_parse(arg, t) < 0) {
		fpp_fail("bad time '%s' (epoch seconds, "
			 "YYYY-MM-DDTHH:MM:SS[.mmm]Z or +DUR)", arg);
		return -EINVAL;
	}
	return 0;
}

static int
opt_from(struct fpp_options *o, const char *arg)
{
	return opt_time(&o->from, arg);
}

static int
opt_to(struct fpp_options *o, const char *arg)
{
	return opt_time(&o->to, arg);
}

static int
opt_minwidth(struct fpp_options *o, const char *arg)
{
	if (!parse_double(arg, &o->minwidth)) {
		fpp_fail("bad --minwidth '%s'", arg);
		return -EINVAL;
	}
	return 0;
}

static int
opt_threshold(struct fpp_options *o, const char *arg)
{
	if (!parse_double(arg, &o->threshold)) {
		fpp_fail("bad --threshold '%s' (percentage points, >= 0)", arg);
		return -EINVAL;
	}
	return 0;
}

/* ---- the table ---- */

/* the values of the CHOICE options, in the order of their enums */
static const char *const sign_words[] = {
	"split", "positive", "negative", "abs", NULL,
};
static const char *const top_sort_words[] = {	/* enum fp_top_sort */
	"self", "total", "wself", "wtotal", "wself+", "wself-", NULL,
};
static const char *const procs_sort_words[] = {
	"samples", "reductions", "mailbox", "memory", "pid", "name", NULL,
};
static const char *const format_words[] = { "text", "csv", "json", NULL };
static const char *const profiles_words[] = { "process", "status", "all", NULL };
static const char *const diff_by_words[] = { "self", "total", NULL };	/* fp_diff_by */

#define FIELD(f) .field = offsetof(struct fpp_options, f)
#define FLAG(f, v) .kind = FPP_ROW_FLAG, FIELD(f), .value = v
#define SET(f, v) .kind = FPP_ROW_SET, FIELD(f), .value = v
#define STRING(f) .kind = FPP_ROW_STRING, FIELD(f)
#define CHOICE(f, w) .kind = FPP_ROW_CHOICE, FIELD(f), .words = w
#define UINT(f, lo, hi) .kind = FPP_ROW_UINT, FIELD(f), .min = lo, .max = hi
#define PARSE(fn) .kind = FPP_ROW_PARSE, .parse = fn

static const struct fpp_option_row rows[] = {
	/* the commands' own */
	{ "title", 0, "TEXT", B(SVG), FPP_SEC_COMMAND, STRING(title),
	  .help = "title (default \"Flame Graph\", or what --weight weighs)" },
	{ "width", 0, "PX", B(SVG), FPP_SEC_COMMAND, UINT(width, 100, 100000),
	  .help = "width in pixels (default 1200)" },
	{ "minwidth", 0, "PX", B(SVG), FPP_SEC_COMMAND, PARSE(opt_minwidth),
	  .help = "leave out frames narrower than PX (default 0.1)" },
	{ "inverted", 0, NULL, B(SVG), FPP_SEC_COMMAND, FLAG(inverted, true),
	  .help = "icicle graph: root at the top" },
	{ "rows", 0, "N", B(HEATMAP), FPP_SEC_COMMAND, UINT(rows, 1, 1000),
	  .help = "rows per second (default 50: 20 ms each)" },
	{ "title", 0, "TEXT", B(HEATMAP), FPP_SEC_COMMAND, STRING(title),
	  .help = "title (default \"Heat Map\")" },
	{ "limit", 'n', "N", B(TOP), FPP_SEC_COMMAND, PARSE(opt_limit),
	  .help = "rows (default 25; 0: all)" },
	{ "sort", 0, "KEY", B(TOP), FPP_SEC_COMMAND, CHOICE(sort, top_sort_words),
	  .help = "self, total (samples), wself, wtotal (net weight),\n"
	  "wself+ (gross growth), wself- (gross release: the\n"
	  "+W_SELF and -W_SELF columns of a signed weight);\n"
	  "default wself with --weight, else self" },
	{ "follow", 0, NULL, B(TOP), FPP_SEC_COMMAND, FLAG(follow, true),
	  .help = "the live view: follow INPUT, a node's directory\n"
	  "(or flame_profd's --out of one node), while\n"
	  "flame_profd writes it, and redraw the hottest\n"
	  "functions of the last --window every --interval;\n"
	  "keys q quit, f functions, p processes, b --by's\n"
	  "values, s sort by self or total. Not on a\n"
	  "terminal: a plain snapshot every --interval until\n"
	  "SIGINT or SIGTERM" },
	{ "window", 0, "DUR", B(TOP), FPP_SEC_COMMAND, PARSE(opt_window),
	  .help = "--follow: the samples of the last DUR (default 10s)" },
	{ "interval", 0, "DUR", B(TOP), FPP_SEC_COMMAND, PARSE(opt_interval),
	  .help = "--follow: redraw every DUR (default 1s)" },
	{ "profiles", 0, "BY", B(SPEEDSCOPE), FPP_SEC_COMMAND,
	  CHOICE(profiles, profiles_words),
	  .help = "one profile per process (default: its registered\n"
	  "name, else <PID> INITIAL_CALL), per status (then\n"
	  "no status frame) or all in one" },
	{ "per-status", 0, NULL, B(SPEEDSCOPE), FPP_SEC_COMMAND,
	  SET(profiles, FPP_PROFILES_STATUS),
	  .help = "the same as --profiles status" },
	{ "threshold", 0, "PCT", B(DIFF), FPP_SEC_COMMAND, PARSE(opt_threshold),
	  .help = "percentage points of growth that fail (default 5)" },
	{ "by", 0, "self|total", B(DIFF), FPP_SEC_COMMAND, CHOICE(by, diff_by_words),
	  .help = "compare self shares (default) or total" },
	{ "limit", 'n', "N", B(DIFF), FPP_SEC_COMMAND, PARSE(opt_limit),
	  .help = "rows of changes (default 30; 0: all;\n"
	  "regressions are always listed)" },
	{ "svg", 0, "FILE", B(DIFF), FPP_SEC_COMMAND, STRING(svg_output),
	  .help = "also write a differential flame graph: AFTER's\n"
	  "widths, red for frames that grew, blue shrank" },
	{ "sort", 0, "KEY", B(PROCS), FPP_SEC_COMMAND, CHOICE(sort, procs_sort_words),
	  .help = "samples (default), reductions, mailbox, memory\n"
	  "(largest first), pid or name" },
	{ "limit", 'n', "N", B(PROCS), FPP_SEC_COMMAND, PARSE(opt_limit),
	  .help = "rows (default 0: all)" },
	{ "format", 0, "FMT", B(PROCS), FPP_SEC_COMMAND, CHOICE(format, format_words),
	  .help = "text (default), csv (RFC 4180, a header row) or\n"
	  "json (an array of objects)" },

	/* selection */
	{ "status", 0, "LIST", ALL, FPP_SEC_SELECTION, PARSE(opt_status),
	  .help = "only samples with these statuses (comma-separated:\n"
	  "running, runnable, waiting, garbage_collecting,\n"
	  "suspended, exiting, free, unknown, cpu, traced)" },
	{ "pid", 0, "PID", ALL, FPP_SEC_SELECTION, PARSE(opt_pid),
	  .help = "only this process, '<0.123.0>' or 0.123.0\n"
	  "(repeatable, or comma-separated)" },
	{ "name", 0, "NAME", ALL, FPP_SEC_SELECTION, PARSE(opt_name),
	  .help = "only the process registered as NAME (repeatable)" },
	{ "where", 0, "FIELD=TEXT", ALL, FPP_SEC_SELECTION, PARSE(opt_where),
	  .help = "only samples whose FIELD is TEXT; FIELD~TEXT: whose\n"
	  "FIELD holds TEXT. FIELD is label, callers, node\n"
	  "(the file's) or a key recorded with flame_profd\n"
	  "--key/--logger-key (NAME or key.NAME, e.g.\n"
	  "request_id=req-7, callers~<0.101.0>, node=app@h1);\n"
	  "repeatable, all must hold" },
	{ "by", 0, "FIELD", B(FOLDED) | B(SVG) | B(SPEEDSCOPE), FPP_SEC_SELECTION,
	  PARSE(opt_group_by),
	  .help = "group by FIELD (label, callers, node, key:NAME):\n"
	  "a FIELD:VALUE frame at the root (FIELD:- where a\n"
	  "sample has none); node: one graph of several\n"
	  "nodes' directories" },
	{ "by", 0, "FIELD", B(TOP), FPP_SEC_SELECTION, PARSE(opt_group_by),
	  .help = "one table per value of FIELD (label, callers,\n"
	  "node, key:NAME; - where a sample has none); with\n"
	  "--follow, rows of process (a row per process),\n"
	  "function (the default) or FIELD's values" },
	{ "from", 0, "TIME", ALL, FPP_SEC_SELECTION, PARSE(opt_from),
	  .help = "only samples at or after TIME" },
	{ "to", 0, "TIME", ALL, FPP_SEC_SELECTION, PARSE(opt_to),
	  .help = "only samples before TIME. TIME is epoch seconds\n"
	  "(1795248660.25), UTC ISO-8601 (2026-11-21T08:11:00Z)\n"
	  "or +DUR after the first sample (+30s, +1.5m, +500ms)" },

	/* names */
	{ "elixir-names", 0, NULL, ALL, FPP_SEC_NAMES, FLAG(erlang_names, false),
	  .help = "frames of Elixir modules as Elixir prints them\n"
	  "(Foo.Bar.baz/1, anonymous fn/1 in Foo.Bar.baz/1),\n"
	  "whatever form the file has (the default)" },
	{ "erlang-names", 0, NULL, ALL, FPP_SEC_NAMES, FLAG(erlang_names, true),
	  .help = "... as Erlang does ('Elixir.Foo.Bar':baz/1); an\n"
	  "anonymous fn read from the Elixir form has no\n"
	  "index: '-baz/1-fun-?-'" },

	/* weight */
	{ "weight", 'w', "W", WEIGHTED, FPP_SEC_WEIGHT, PARSE(opt_weight),
	  .help = "samples (default), or a metric's value (reductions,\n"
	  "memory, message_queue_len, total_heap_size,\n"
	  "heap_size, stack_size, binary_bytes, minor_gcs) or\n"
	  "its change since the process's previous sample\n"
	  "(NAME_delta, e.g. reductions_delta, memory_delta)" },
	{ "sign", 0, "MODE", TREES, FPP_SEC_WEIGHT, CHOICE(sign, sign_words),
	  .help = "signed weights (the _delta of a gauge: memory,\n"
	  "message_queue_len, heap sizes, binary_bytes):\n"
	  "split (default: a [+W] tree of growth and a [-W]\n"
	  "tree of release, each by magnitude), positive,\n"
	  "negative (by magnitude) or abs. Samples of weight 0\n"
	  "are left out of weighted graphs." },
	{ "sign", 0, "MODE", B(TOP), FPP_SEC_WEIGHT, CHOICE(sign, sign_words),
	  .help = "signed weights (the _delta of a gauge): split\n"
	  "(default: W columns of net sums, +W and -W columns\n"
	  "of gross growth and release), positive (W sums\n"
	  "growth only), negative (release only, by\n"
	  "magnitude) or abs (both by magnitude)" },
	{ "sign", 0, "MODE", B(HEATMAP), FPP_SEC_WEIGHT, CHOICE(sign, sign_words),
	  .help = "signed weights (the _delta of a gauge): split\n"
	  "(default: net sums, negative ones in blue),\n"
	  "positive (growth only), negative (release only,\n"
	  "by magnitude) or abs (both by magnitude)" },

	/* stacks */
	{ "no-status", 0, NULL, TREES, FPP_SEC_STACKS, FLAG(no_status, true),
	  .help = "no process status as the first frame" },
	{ "process", 0, NULL, TREES, FPP_SEC_STACKS, FLAG(process, true),
	  .help = "a frame for the process under the status:\n"
	  "its registered name, else <PID> INITIAL_CALL" },
	{ "strip-lines", 0, NULL, TREES | B(TOP) | B(PPROF), FPP_SEC_STACKS, FLAG(strip_lines, true),
	  .help = "drop :LINE from frame names (files written with\n"
	  "--lines), merging the lines of a function" },

	/* output */
	{ "output", 'o', "FILE", ALL, FPP_SEC_OUTPUT, STRING(output),
	  .help = "write to FILE (replaced atomically) instead of\n"
	  "standard output" },
	{ "quiet", 'q', NULL, ALL, FPP_SEC_OUTPUT, FLAG(quiet, true),
	  .help = "no progress report (it goes to standard error\n"
	  "when that is a terminal) and no warnings" },
	{ "help", 'h', NULL, ALL, FPP_SEC_OUTPUT, FLAG(help, true), .help = "this help" },
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

const struct fpp_option_row *const fpp_option_rows = rows;
const size_t fpp_option_nrows = NROWS;

/* The row of option @name (or short @c) for @cmd; NULL if it has none. */
static const struct fpp_option_row *
row_for(const char *name, int c, enum fpp_command cmd)
{
	for (size_t i = 0; i < NROWS; i++) {
		if ((name ? strcmp(rows[i].name, name) == 0 :
			    rows[i].short_name == c) &&
		    (rows[i].commands & (1u << cmd)))
			return &rows[i];
	}
	return NULL;
}

/* ---- parsing ---- */

/*
 * The user may type an atom bare (Elixir.Foo), as written ('Elixir.Foo')
 * or an alias (Foo); the reader hands registered names over in the form
 * of --erlang-names / --elixir-names, and so must the filter be.
 */
static char *
written_name(const char *text, bool erlang_names)
{
	char *written = NULL;
	size_t n;

	if (strncmp(text, "Elixir.", 7) != 0)
		written = fp_perf_convert_name(text, erlang_names);
	if (!written) {
		n = fp_perf_format_name(NULL, 0, text, erlang_names);
		written = xzalloc(n + 1);
		fp_perf_format_name(written, n + 1, text, erlang_names);
	}
	return written;
}

/* Checks across options, once all are read. */
static int
options_check(struct fpp_options *o)
{
	for (size_t i = 0; i < o->nnames; i++) {
		char *typed = o->names[i];

		o->names[i] = written_name(typed, o->erlang_names);
		free(typed);
	}
	if (o->sort < 0)
		o->sort = o->command == FPP_CMD_TOP && o->weight >= 0 ?
			  FP_TOP_WEIGHT_SELF : 0;
	else if (o->command == FPP_CMD_TOP && o->sort >= FP_TOP_WEIGHT_SELF &&
	    o->weight < 0) {
		fpp_fail("--sort %s needs --weight", o->sort == FP_TOP_WEIGHT_SELF ?
			 "wself" : o->sort == FP_TOP_WEIGHT_TOTAL ? "wtotal" :
			 o->sort == FP_TOP_GROSS_GROWTH ? "wself+" : "wself-");
		return -EINVAL;
	}
	if (o->command == FPP_CMD_TOP &&
	    (o->sort == FP_TOP_GROSS_GROWTH || o->sort == FP_TOP_GROSS_RELEASE) &&
	    (!fpp_weight_is_signed(o) || o->sign != FPP_SIGN_SPLIT)) {
		fpp_fail("--sort %s needs a signed weight (a gauge's _delta) and --sign split",
			 o->sort == FP_TOP_GROSS_GROWTH ? "wself+" : "wself-");
		return -EINVAL;
	}
	if (o->sign != FPP_SIGN_SPLIT && !fpp_weight_is_signed(o)) {
		fpp_fail("option '--sign' needs a signed weight: the _delta of a gauge "
			 "(e.g. -w memory_delta)");
		return -EINVAL;
	}
	if (!o->follow && (o->window_us || o->interval_us)) {
		fpp_fail("--%s needs --follow", o->window_us ? "window" : "interval");
		return -EINVAL;
	}
	if (o->follow) {
		const char *no = o->weight >= 0 ? "--weight" :
				 o->from.set ? "--from" : o->to.set ? "--to" :
				 o->output ? "--output" : NULL;

		if (no) {
			fpp_fail("%s does not apply to --follow (it counts samples of "
				 "the last --window, on the terminal or standard output)",
				 no);
			return -EINVAL;
		}
		if (!o->window_us)
			o->window_us = 10 * 1000000ULL;
		if (!o->interval_us)
			o->interval_us = 1000000;
		o->view = FPP_VIEW_FUNCTIONS;
		if (o->group && strcmp(o->group_by_arg, "process") == 0) {
			o->view = FPP_VIEW_PROCESSES;
			o->group = false;
		} else if (o->group && strcmp(o->group_by_arg, "function") == 0) {
			o->group = false;
		} else if (o->group) {
			o->view = FPP_VIEW_FIELD;
		}
	}
	if (o->from.set && o->to.set && o->from.relative == o->to.relative &&
	    o->to.us <= o->from.us) {
		fpp_fail("--to must be after --from");
		return -EINVAL;
	}
	return 0;
}

/* Set what @row sets in @o from @arg. Returns 0 or -EINVAL. */
static int
apply(const struct fpp_option_row *row, struct fpp_options *o, const char *arg)
{
	char *at = (char *)o + row->field;
	unsigned long long u;
	int i;

	switch (row->kind) {
	case FPP_ROW_FLAG:
		*(bool *)at = row->value;
		return 0;
	case FPP_ROW_SET:
		*(int *)at = row->value;
		return 0;
	case FPP_ROW_STRING:
		*(const char **)at = arg;
		return 0;
	case FPP_ROW_CHOICE:
		i = parse_enum(arg, row->words);
		if (i < 0) {
			fprintf(stderr, "flame_prof: bad --%s '%s' (", row->name, arg);
			for (int k = 0; row->words[k]; k++)
				fprintf(stderr, "%s%s", k ? ", " : "", row->words[k]);
			fputs(")\n", stderr);
			return -EINVAL;
		}
		*(int *)at = i;
		return 0;
	case FPP_ROW_UINT:
		if (!parse_uint(arg, row->max, &u) || u < row->min) {
			fpp_fail("bad --%s '%s' (%u to %u)", row->name, arg, row->min,
				 row->max);
			return -EINVAL;
		}
		*(unsigned *)at = (unsigned)u;
		return 0;
	case FPP_ROW_PARSE:
		break;
	}
	return row->parse(o, arg);
}

int
fpp_options_parse(int argc, char **argv, struct fpp_options *o)
{
	const char *cmd = fpp_command_names[o->command];
	struct option longs[NROWS + 1];
	char shorts[2 * NROWS + 2];
	size_t nlongs = 0, nshorts = 0;
	int c, at;

	o->weight = -1;
	o->minwidth = -1;
	o->limit = o->command == FPP_CMD_DIFF ? 30 :
		   o->command == FPP_CMD_PROCS ? 0 : 25;
	o->threshold = 5.0;
	o->sort = -1;	/* the command's default, set once the weight is known */
	snprintf(o->weight_name, sizeof(o->weight_name), "samples");

	/* every name once, whichever command it applies to: an option of
	 * another command is refused by name below, not as unknown */
	shorts[nshorts++] = ':';
	for (size_t i = 0; i < NROWS; i++) {
		bool seen = false;

		for (size_t k = 0; k < nlongs && !seen; k++)
			seen = strcmp(longs[k].name, rows[i].name) == 0;
		if (seen)
			continue;
		longs[nlongs++] = (struct option){
			rows[i].name, rows[i].arg ? required_argument : no_argument,
			NULL, rows[i].short_name ? rows[i].short_name : 256 + (int)i,
		};
		if (rows[i].short_name) {
			shorts[nshorts++] = rows[i].short_name;
			if (rows[i].arg)
				shorts[nshorts++] = ':';
		}
	}
	longs[nlongs] = (struct option){ NULL, 0, NULL, 0 };
	shorts[nshorts] = '\0';

	optind = 1;
	opterr = 0;	/* getopt would name the command as the program */
	while ((c = getopt_long(argc, argv, shorts, longs, &at)) != -1) {
		const struct fpp_option_row *row;
		const char *name;

		if (c == '?') {
			fpp_fail("%s: unrecognized option '%s'", cmd, argv[optind - 1]);
			return -EINVAL;
		}
		if (c == ':') {
			fpp_fail("%s: option '%s' needs a value", cmd, argv[optind - 1]);
			return -EINVAL;
		}
		name = c >= 256 ? rows[c - 256].name : NULL;
		row = row_for(name, c, o->command);
		if (!row) {
			const struct fpp_option_row *any = NULL;

			for (size_t i = 0; i < NROWS && !any; i++) {
				if (name ? strcmp(rows[i].name, name) == 0 :
					   rows[i].short_name == c)
					any = &rows[i];
			}
			fpp_fail("%s: option '--%s' does not apply to this command",
				 cmd, any ? any->name : "?");
			return -EINVAL;
		}
		if (apply(row, o, optarg) < 0)
			return -EINVAL;
		if (o->help)
			return 0;
	}
	return options_check(o);
}

void
fpp_options_free(struct fpp_options *o)
{
	for (size_t i = 0; i < o->nnames; i++)
		free(o->names[i]);
	free(o->names);
	free(o->pids);
	free(o->wheres);
}

bool
fpp_weight_is_signed(const struct fpp_options *o)
{
	return o->weight >= 0 && o->delta &&
	       !fp_metric_is_counter((enum fp_metric)o->weight);
}

const char *
fpp_weight_label(const struct fpp_options *o)
{
	static char label[96];

	if (o->weight < 0)
		return "samples";
	if (!fpp_weight_is_signed(o) || o->sign == FPP_SIGN_SPLIT)
		return o->weight_name;
	snprintf(label, sizeof(label), "%s, %s", o->weight_name,
		 o->sign == FPP_SIGN_POSITIVE ? "growth only" :
		 o->sign == FPP_SIGN_NEGATIVE ? "release only" : "by magnitude");
	return label;
}
