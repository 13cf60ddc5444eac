/*
 * flame_prof — read flame_profd's perf-script files and render them:
 * folded stacks, SVG flame graphs and heat maps, top tables, speedscope
 * JSON, and differential summaries for CI gates.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "flame_prof.h"
#include "fp/flame-tree.h"
#include "fp/flamegraph-svg.h"
#include "fp/folded.h"
#include "fp/heatmap-svg.h"
#include "fp/perf-script.h"
#include "fp/speedscope.h"
#include "fp/top.h"
#include "util-mem.h"

enum sign_mode {
	SIGN_SPLIT = 0,
	SIGN_POSITIVE,
	SIGN_NEGATIVE,
	SIGN_ABS,
};

enum command {
	CMD_FOLDED = 0,
	CMD_SVG,
	CMD_HEATMAP,
	CMD_TOP,
	CMD_SPEEDSCOPE,
	CMD_DIFF,
	CMD_COUNT,
};

static const char *const command_names[CMD_COUNT] = {
	"folded", "svg", "heatmap", "top", "speedscope", "diff",
};

/* A label, the callers or a recorded key (--where, --by). */
enum field_kind { FIELD_LABEL, FIELD_CALLERS, FIELD_KEY };

struct field {
	enum field_kind kind;
	const char *key;		/* FIELD_KEY: NAME of key.NAME, in argv */
	size_t keylen;
	char title[128];		/* what group headings call it */
};

struct where {
	struct field field;
	bool contains;			/* FIELD~TEXT, else FIELD=TEXT */
	const char *text;
};

struct options {
	enum command command;
	const char *output;
	int weight;			/* -1: samples, else enum fp_metric */
	bool delta;			/* the metric's DELTA, not its VALUE */
	char weight_name[64];
	enum sign_mode sign;
	bool status_filter;
	bool status_ok[FP_STATUS_COUNT];
	struct fp_pid *pids;
	size_t npids;
	char **names;			/* written atoms */
	size_t nnames;
	struct fpp_time from, to;
	bool no_status;
	bool process;
	bool strip_lines;
	bool erlang_names;		/* names of Elixir modules as Erlang's */
	bool quiet;
	/* svg, heatmap */
	const char *title;
	unsigned width;
	double minwidth;
	bool inverted;
	unsigned rows;
	/* top, diff */
	size_t limit;
	bool sort_set;
	enum fp_top_sort sort;
	/* speedscope */
	bool per_status;
	/* diff */
	double threshold;
	enum fp_diff_by by;
	const char *svg_output;
	/* --where, --by FIELD */
	struct where *wheres;
	size_t nwheres;
	bool group;
	struct field group_by;
};

/* What one pass over the input feeds; unused sinks are NULL. */
struct run {
	const struct options *o;
	int set;			/* tree set: 0, or 1 for diff AFTER */
	struct fp_flame_tree *tree;
	struct fp_func_table *table;
	/* top --by FIELD: one table per value; value NULL: none recorded */
	struct group_table {
		char *value;
		struct fp_func_table *table;
	} *groups;
	size_t ngroups;
	bool groups_by_table;		/* top: no group frame */
	struct fp_heatmap *heatmap;
	struct fp_speedscope *speedscope;

	uint64_t from_us, to_us;	/* resolved; to_us UINT64_MAX: none */
	bool resolved;
	uint64_t read, matched, dropped;
	uint64_t first_us, last_us;

	/* per-sample scratch */
	const char **names, **files, **leaf;
	size_t cap;
	char *text;
	size_t text_len, text_cap;
	size_t *text_offs;

	/* progress */
	bool progress;
	const char *file;
	size_t file_index, file_count;
	struct fp_perf_reader *reader;
	struct timespec last_report;
	bool reported;
};

static const char *program = "flame_prof";

static void
fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

static void
fail(const char *format, ...)
{
	va_list args;

	fprintf(stderr, "%s: ", program);
	va_start(args, format);
	vfprintf(stderr, format, args);
	va_end(args);
	fputc('\n', stderr);
}

/* ---- help ---- */

static const char common_help[] =
"Input:\n"
"  INPUT is a perf-script file written by flame_profd (plain, .gz or .zst,\n"
"  recognised by content), a directory (every *.perf, *.perf.gz and\n"
"  *.perf.zst below it; dot-files such as files still being written are\n"
"  skipped) or - for standard input. Files are read in the order of the\n"
"  time in their names.\n"
"\n"
"Selection:\n"
"      --status LIST         only samples with these statuses (comma-separated:\n"
"                            running, runnable, waiting, garbage_collecting,\n"
"                            suspended, exiting, free, unknown)\n"
"      --pid PID             only this process, '<0.123.0>' or 0.123.0\n"
"                            (repeatable, or comma-separated)\n"
"      --name NAME           only the process registered as NAME (repeatable)\n"
"      --where FIELD=TEXT    only samples whose FIELD is TEXT; FIELD~TEXT: whose\n"
"                            FIELD holds TEXT. FIELD is label, callers or a\n"
"                            key recorded with flame_profd --key/--logger-key\n"
"                            (NAME or key.NAME, e.g. request_id=req-7,\n"
"                            callers~<0.101.0>); repeatable, all must hold\n"
"      --by FIELD            group by FIELD (label, callers, key:NAME): folded,\n"
"                            svg, speedscope put a FIELD:VALUE frame at the\n"
"                            root (FIELD:- where a sample has none); top\n"
"                            writes one table per value\n"
"      --from TIME           only samples at or after TIME\n"
"      --to TIME             only samples before TIME. TIME is epoch seconds\n"
"                            (1795248660.25), UTC ISO-8601 (2026-11-21T08:11:00Z)\n"
"                            or +DUR after the first sample (+30s, +1.5m, +500ms)\n"
"\n"
"Names:\n"
"      --elixir-names        frames of Elixir modules as Elixir prints them\n"
"                            (Foo.Bar.baz/1, anonymous fn/1 in Foo.Bar.baz/1),\n"
"                            whatever form the file has (the default)\n"
"      --erlang-names        ... as Erlang does ('Elixir.Foo.Bar':baz/1); an\n"
"                            anonymous fn read from the Elixir form has no\n"
"                            index: '-baz/1-fun-?-'\n"
"\n"
"Weight:\n"
"  -w, --weight W            samples (default), or a metric's value (reductions,\n"
"                            memory, message_queue_len, total_heap_size,\n"
"                            heap_size, stack_size, binary_bytes, minor_gcs) or\n"
"                            its change since the process's previous sample\n"
"                            (NAME_delta, e.g. reductions_delta, memory_delta)\n"
"      --sign MODE           signed weights (the _delta of a gauge: memory,\n"
"                            message_queue_len, heap sizes, binary_bytes):\n"
"                            split (default: a [+W] tree of growth and a [-W]\n"
"                            tree of release, each by magnitude), positive,\n"
"                            negative (by magnitude) or abs. Samples of weight 0\n"
"                            are left out of weighted graphs.\n";

static const char tree_help[] =
"Stacks:\n"
"      --no-status           no process status as the first frame\n"
"      --process             a frame for the process under the status:\n"
"                            its registered name, else <PID> INITIAL_CALL\n"
"      --strip-lines         drop :LINE from frame names (files written with\n"
"                            --lines), merging the lines of a function\n";

static const char output_help[] =
"Output:\n"
"  -o, --output FILE         write to FILE (replaced atomically) instead of\n"
"                            standard output\n"
"  -q, --quiet               no progress report (it goes to standard error\n"
"                            when that is a terminal) and no warnings\n"
"  -h, --help                this help\n";

static const char exit_help[] =
"Exit status:\n"
"  0 success; 1 diff: a share grew past --threshold; 64 usage error;\n"
"  65 malformed input (the message names file and line) or nothing to diff;\n"
"  66 input missing, unreadable or not a regular file (a FIFO: read pipes\n"
"  as -); 73 output cannot be created;\n"
"  74 read or write error.\n";

static void
usage_main(FILE *f)
{
	fprintf(f,
"Usage: flame_prof COMMAND [OPTION]... INPUT...\n"
"Render the perf-script files of flame_profd (docs/FORMAT.md).\n"
"\n"
"Commands:\n"
"  folded       collapsed stacks for flamegraph.pl, inferno and speedscope\n"
"  svg          an interactive SVG flame graph\n"
"  heatmap      an SVG sub-second heat map (seconds across, offsets down)\n"
"  top          a table of the hottest functions, self and total\n"
"  speedscope   speedscope's JSON file format\n"
"  diff         compare two profiles: BEFORE AFTER (text, and SVG with --svg)\n"
"\n"
"'flame_prof COMMAND --help' lists the options of a command.\n"
"flame_prof(1) has the details.\n\n%s", exit_help);
}

static void
usage_command(enum command c, FILE *f)
{
	switch (c) {
	case CMD_FOLDED:
		fputs("Usage: flame_prof folded [OPTION]... INPUT...\n"
		      "Write collapsed stacks: frames root first, joined with ';', then a\n"
		      "space and the count (samples, or the weight). The status is the\n"
		      "first frame unless --no-status.\n\n", f);
		break;
	case CMD_SVG:
		fputs("Usage: flame_prof svg [OPTION]... INPUT...\n"
		      "Write an interactive SVG flame graph: hover for details, click a\n"
		      "frame to zoom, Search (or Ctrl-F) to highlight a regular expression.\n\n"
		      "Graph:\n"
		      "      --title TEXT          title (default \"Flame Graph\")\n"
		      "      --width PX            width in pixels (default 1200)\n"
		      "      --minwidth PX         leave out frames narrower than PX (default 0.1)\n"
		      "      --inverted            icicle graph: root at the top\n\n", f);
		break;
	case CMD_HEATMAP:
		fputs("Usage: flame_prof heatmap [OPTION]... INPUT...\n"
		      "Write an SVG sub-second heat map: a column per second, a row per\n"
		      "fraction of the second, coloured by samples or by the summed weight\n"
		      "(negative sums in blue). Click two cells for the --from/--to of the\n"
		      "range.\n\n"
		      "Map:\n"
		      "      --rows N              rows per second (default 50: 20 ms each)\n"
		      "      --title TEXT          title (default \"Heat Map\")\n\n", f);
		break;
	case CMD_TOP:
		fputs("Usage: flame_prof top [OPTION]... INPUT...\n"
		      "Write a table of the hottest functions: self (the leaf frame) and\n"
		      "total (anywhere on the stack, once per sample) samples, and with\n"
		      "--weight the signed sums of the weight.\n\n"
		      "Table:\n"
		      "  -n, --limit N             rows (default 25; 0: all)\n"
		      "      --sort KEY            self, total (samples), wself, wtotal (weight);\n"
		      "                            default wself with --weight, else self\n\n", f);
		break;
	case CMD_SPEEDSCOPE:
		fputs("Usage: flame_prof speedscope [OPTION]... INPUT...\n"
		      "Write speedscope's JSON format (sampled profiles with weights, in\n"
		      "time order). Open it at https://www.speedscope.app or with the\n"
		      "speedscope command.\n\n"
		      "Profiles:\n"
		      "      --per-status          one profile per status (then no status frame)\n"
		      "                            instead of one overall profile\n\n", f);
		break;
	case CMD_DIFF:
		fputs("Usage: flame_prof diff [OPTION]... BEFORE AFTER\n"
		      "Compare the share of every function in two profiles (each a file or\n"
		      "a directory) and write the changes, biggest growth first. Exit 1 if\n"
		      "a share grew by more than --threshold percentage points.\n\n"
		      "Comparison:\n"
		      "      --threshold PCT       percentage points of growth that fail\n"
		      "                            (default 5)\n"
		      "      --by self|total       compare self shares (default) or total\n"
		      "  -n, --limit N             rows of changes (default 30; 0: all;\n"
		      "                            regressions are always listed)\n"
		      "      --svg FILE            also write a differential flame graph: AFTER's\n"
		      "                            widths, red for frames that grew, blue shrank\n\n", f);
		break;
	case CMD_COUNT:
		break;
	}
	fputs(common_help, f);
	if (c == CMD_FOLDED || c == CMD_SVG || c == CMD_SPEEDSCOPE || c == CMD_DIFF)
		fprintf(f, "\n%s", tree_help);
	fprintf(f, "\n%s\n%s", output_help, exit_help);
}

/* ---- option parsing ---- */

enum {
	OPT_STATUS = 1000,
	OPT_PID,
	OPT_NAME,
	OPT_FROM,
	OPT_TO,
	OPT_SIGN,
	OPT_NO_STATUS,
	OPT_PROCESS,
	OPT_STRIP_LINES,
	OPT_TITLE,
	OPT_WIDTH,
	OPT_MINWIDTH,
	OPT_INVERTED,
	OPT_ROWS,
	OPT_SORT,
	OPT_PER_STATUS,
	OPT_THRESHOLD,
	OPT_BY,
	OPT_SVG,
	OPT_ERLANG_NAMES,
	OPT_ELIXIR_NAMES,
	OPT_WHERE,
};

static const struct option long_options[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "weight", required_argument, NULL, 'w' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "limit", required_argument, NULL, 'n' },
	{ "status", required_argument, NULL, OPT_STATUS },
	{ "pid", required_argument, NULL, OPT_PID },
	{ "name", required_argument, NULL, OPT_NAME },
	{ "from", required_argument, NULL, OPT_FROM },
	{ "to", required_argument, NULL, OPT_TO },
	{ "sign", required_argument, NULL, OPT_SIGN },
	{ "no-status", no_argument, NULL, OPT_NO_STATUS },
	{ "process", no_argument, NULL, OPT_PROCESS },
	{ "strip-lines", no_argument, NULL, OPT_STRIP_LINES },
	{ "title", required_argument, NULL, OPT_TITLE },
	{ "width", required_argument, NULL, OPT_WIDTH },
	{ "minwidth", required_argument, NULL, OPT_MINWIDTH },
	{ "inverted", no_argument, NULL, OPT_INVERTED },
	{ "rows", required_argument, NULL, OPT_ROWS },
	{ "sort", required_argument, NULL, OPT_SORT },
	{ "per-status", no_argument, NULL, OPT_PER_STATUS },
	{ "threshold", required_argument, NULL, OPT_THRESHOLD },
	{ "by", required_argument, NULL, OPT_BY },
	{ "svg", required_argument, NULL, OPT_SVG },
	{ "erlang-names", no_argument, NULL, OPT_ERLANG_NAMES },
	{ "elixir-names", no_argument, NULL, OPT_ELIXIR_NAMES },
	{ "where", required_argument, NULL, OPT_WHERE },
	{ NULL, 0, NULL, 0 },
};

/* Which commands take an option (bit per enum command); 0: all. */
static unsigned
option_commands(int opt)
{
#define B(c) (1u << (c))
	switch (opt) {
	case 'n':
		return B(CMD_TOP) | B(CMD_DIFF);
	case OPT_NO_STATUS:
	case OPT_PROCESS:
	case OPT_STRIP_LINES:
		return B(CMD_FOLDED) | B(CMD_SVG) | B(CMD_SPEEDSCOPE) | B(CMD_DIFF) |
		       (opt == OPT_STRIP_LINES ? B(CMD_TOP) : 0);
	case OPT_SIGN:
		return B(CMD_FOLDED) | B(CMD_SVG) | B(CMD_SPEEDSCOPE) | B(CMD_DIFF);
	case OPT_TITLE:
		return B(CMD_SVG) | B(CMD_HEATMAP);
	case OPT_WIDTH:
	case OPT_MINWIDTH:
	case OPT_INVERTED:
		return B(CMD_SVG);
	case OPT_ROWS:
		return B(CMD_HEATMAP);
	case OPT_SORT:
		return B(CMD_TOP);
	case OPT_PER_STATUS:
		return B(CMD_SPEEDSCOPE);
	case OPT_THRESHOLD:
	case OPT_SVG:
		return B(CMD_DIFF);
	case OPT_BY:
		return B(CMD_DIFF) | B(CMD_FOLDED) | B(CMD_SVG) | B(CMD_TOP) |
		       B(CMD_SPEEDSCOPE);
	default:
		return 0;
	}
#undef B
}

/* label, callers, key:NAME, key.NAME or NAME (a key); @n bytes of @text.
 * The key's name points into @text, which outlives the options. */
static int
parse_field(const char *text, size_t n, struct field *f)
{
	if (n == 0)
		return -EINVAL;
	if (n == 5 && strncmp(text, "label", 5) == 0) {
		f->kind = FIELD_LABEL;
		return 0;
	}
	if (n == 7 && strncmp(text, "callers", 7) == 0) {
		f->kind = FIELD_CALLERS;
		return 0;
	}
	if (n > 4 && (strncmp(text, "key:", 4) == 0 || strncmp(text, "key.", 4) == 0)) {
		text += 4;
		n -= 4;
	}
	f->kind = FIELD_KEY;
	f->key = text;
	f->keylen = n;
	snprintf(f->title, sizeof(f->title), "%.*s", (int)n, text);
	return 0;
}

/* A sample's value of @f, or NULL where it has none. */
static const char *
field_value(const struct fp_perf_record *rec, const struct field *f)
{
	switch (f->kind) {
	case FIELD_LABEL:
		return rec->label;
	case FIELD_CALLERS:
		return rec->callers;
	case FIELD_KEY:
		for (uint32_t i = 0; i < rec->nkeys; i++) {
			if (strlen(rec->key_names[i]) == f->keylen &&
			    memcmp(rec->key_names[i], f->key, f->keylen) == 0)
				return rec->key_values[i];
		}
		return NULL;
	}
	return NULL;
}

static const char *
field_title(const struct field *f)
{
	return f->kind == FIELD_LABEL ? "label" :
	       f->kind == FIELD_CALLERS ? "callers" : f->title;
}

static bool
where_holds(const struct where *w, const struct fp_perf_record *rec)
{
	const char *v = field_value(rec, &w->field);

	if (!v)
		return false;
	if (!w->contains)
		return strcmp(v, w->text) == 0;
	/* callers~0.101.0 and callers~<0.101.0> alike */
	if (w->field.kind == FIELD_CALLERS && w->text[0] != '<') {
		char pid[64];

		snprintf(pid, sizeof(pid), "<%s>", w->text);
		return strstr(v, pid) != NULL;
	}
	return strstr(v, w->text) != NULL;
}

static int
parse_weight(const char *text, struct options *o)
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
	return -EINVAL;
}

static int
parse_statuses(const char *text, struct options *o)
{
	char *copy = xstrdup(text), *save = NULL;
	int rc = 0;

	o->status_filter = true;
	for (char *tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		enum fp_status s = fp_status_from_name(tok);

		if (s == FP_STATUS_UNKNOWN && strcmp(tok, "unknown") != 0) {
			rc = -EINVAL;
			break;
		}
		o->status_ok[s] = true;
	}
	free(copy);
	return rc;
}

static int
parse_pids(const char *text, struct options *o)
{
	char *copy = xstrdup(text), *save = NULL;
	int rc = 0;

	for (char *tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		struct fp_pid pid;

		rc = fp_pid_parse(tok, &pid);
		if (rc < 0)
			break;
		o->pids = xrealloc(o->pids, (o->npids + 1) * sizeof(*o->pids));
		o->pids[o->npids++] = pid;
	}
	free(copy);
	return rc;
}

/*
 * The user may type an atom bare (Elixir.Foo), as written ('Elixir.Foo')
 * or an alias (Foo); the reader hands registered names over in the form
 * of --erlang-names / --elixir-names, and so must the filter be.
 */
static void
add_name(const char *text, struct options *o)
{
	char *written = NULL;
	size_t n;

	if (strncmp(text, "Elixir.", 7) != 0)
		written = fp_perf_convert_name(text, o->erlang_names);
	if (!written) {
		n = fp_perf_format_name(NULL, 0, text, o->erlang_names);
		written = xzalloc(n + 1);
		fp_perf_format_name(written, n + 1, text, o->erlang_names);
	}
	o->names = xrealloc(o->names, (o->nnames + 1) * sizeof(*o->names));
	o->names[o->nnames++] = written;
}

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

static int
parse_options(int argc, char **argv, struct options *o)
{
	unsigned long long u;
	int c;

	optind = 1;
	opterr = 0;	/* getopt would name the command as the program */
	while ((c = getopt_long(argc, argv, ":o:w:n:qh", long_options, NULL)) != -1) {
		unsigned allowed = option_commands(c);

		if (c == '?') {
			fail("%s: unrecognized option '%s'", command_names[o->command],
			     argv[optind - 1]);
			return -EINVAL;
		}
		if (c == ':') {
			fail("%s: option '%s' needs a value", command_names[o->command],
			     argv[optind - 1]);
			return -EINVAL;
		}
		if (allowed && !(allowed & (1u << o->command))) {
			fail("%s: option '%s' does not apply to this command",
			     command_names[o->command], argv[optind - 1]);
			return -EINVAL;
		}
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case 'w':
			if (parse_weight(optarg, o) < 0) {
				fail("unknown weight '%s' (samples, METRIC or METRIC_delta; see --help)",
				     optarg);
				return -EINVAL;
			}
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			usage_command(o->command, stdout);
			exit(FPP_EXIT_OK);
		case 'n':
			if (!parse_uint(optarg, SIZE_MAX, &u)) {
				fail("bad --limit '%s'", optarg);
				return -EINVAL;
			}
			o->limit = (size_t)u;
			break;
		case OPT_STATUS:
			if (parse_statuses(optarg, o) < 0) {
				fail("bad --status '%s'", optarg);
				return -EINVAL;
			}
			break;
		case OPT_PID:
			if (parse_pids(optarg, o) < 0) {
				fail("bad --pid '%s' (expected <0.123.0> or 0.123.0)",
				     optarg);
				return -EINVAL;
			}
			break;
		case OPT_NAME:
			/* converted below, once the form is known */
			o->names = xrealloc(o->names, (o->nnames + 1) * sizeof(*o->names));
			o->names[o->nnames++] = xstrdup(optarg);
			break;
		case OPT_ERLANG_NAMES:
		case OPT_ELIXIR_NAMES:
			o->erlang_names = c == OPT_ERLANG_NAMES;
			break;
		case OPT_FROM:
		case OPT_TO:
			if (fpp_time_parse(optarg, c == OPT_FROM ? &o->from : &o->to) < 0) {
				fail("bad time '%s' (epoch seconds, "
				     "YYYY-MM-DDTHH:MM:SS[.mmm]Z or +DUR)", optarg);
				return -EINVAL;
			}
			break;
		case OPT_SIGN:
			if (strcmp(optarg, "split") == 0)
				o->sign = SIGN_SPLIT;
			else if (strcmp(optarg, "positive") == 0)
				o->sign = SIGN_POSITIVE;
			else if (strcmp(optarg, "negative") == 0)
				o->sign = SIGN_NEGATIVE;
			else if (strcmp(optarg, "abs") == 0)
				o->sign = SIGN_ABS;
			else {
				fail("bad --sign '%s' (split, positive, negative, abs)",
				     optarg);
				return -EINVAL;
			}
			break;
		case OPT_NO_STATUS:
			o->no_status = true;
			break;
		case OPT_PROCESS:
			o->process = true;
			break;
		case OPT_STRIP_LINES:
			o->strip_lines = true;
			break;
		case OPT_TITLE:
			o->title = optarg;
			break;
		case OPT_WIDTH:
			if (!parse_uint(optarg, 100000, &u) || u < 100) {
				fail("bad --width '%s' (100 to 100000)", optarg);
				return -EINVAL;
			}
			o->width = (unsigned)u;
			break;
		case OPT_MINWIDTH:
			if (!parse_double(optarg, &o->minwidth)) {
				fail("bad --minwidth '%s'", optarg);
				return -EINVAL;
			}
			break;
		case OPT_INVERTED:
			o->inverted = true;
			break;
		case OPT_ROWS:
			if (!parse_uint(optarg, 1000, &u) || u < 1) {
				fail("bad --rows '%s' (1 to 1000)", optarg);
				return -EINVAL;
			}
			o->rows = (unsigned)u;
			break;
		case OPT_SORT:
			o->sort_set = true;
			if (strcmp(optarg, "self") == 0)
				o->sort = FP_TOP_SELF;
			else if (strcmp(optarg, "total") == 0)
				o->sort = FP_TOP_TOTAL;
			else if (strcmp(optarg, "wself") == 0)
				o->sort = FP_TOP_WEIGHT_SELF;
			else if (strcmp(optarg, "wtotal") == 0)
				o->sort = FP_TOP_WEIGHT_TOTAL;
			else {
				fail("bad --sort '%s' (self, total, wself, wtotal)",
				     optarg);
				return -EINVAL;
			}
			break;
		case OPT_PER_STATUS:
			o->per_status = true;
			break;
		case OPT_THRESHOLD:
			if (!parse_double(optarg, &o->threshold)) {
				fail("bad --threshold '%s' (percentage points, >= 0)",
				     optarg);
				return -EINVAL;
			}
			break;
		case OPT_BY:
			if (o->command == CMD_DIFF && strcmp(optarg, "self") == 0)
				o->by = FP_DIFF_SELF;
			else if (o->command == CMD_DIFF && strcmp(optarg, "total") == 0)
				o->by = FP_DIFF_TOTAL;
			else if (o->command == CMD_DIFF) {
				fail("bad --by '%s' (self, total)", optarg);
				return -EINVAL;
			} else if (parse_field(optarg, strlen(optarg), &o->group_by) < 0) {
				fail("bad --by '%s' (label, callers, key:NAME)", optarg);
				return -EINVAL;
			} else {
				o->group = true;
			}
			break;
		case OPT_WHERE: {
			const char *op = optarg + strcspn(optarg, "=~");
			struct where w = { .contains = *op == '~', .text = op + 1 };

			if (!*op || parse_field(optarg, (size_t)(op - optarg), &w.field) < 0) {
				fail("bad --where '%s' (FIELD=TEXT or FIELD~TEXT; FIELD label, callers or a key's NAME)",
				     optarg);
				return -EINVAL;
			}
			o->wheres = xrealloc(o->wheres, (o->nwheres + 1) * sizeof(*o->wheres));
			o->wheres[o->nwheres++] = w;
			break;
		}
		case OPT_SVG:
			o->svg_output = optarg;
			break;
		default:
			return -EINVAL;
		}
	}
	{
		char **typed = o->names;
		size_t n = o->nnames;

		o->names = NULL;
		o->nnames = 0;
		for (size_t i = 0; i < n; i++) {
			add_name(typed[i], o);
			free(typed[i]);
		}
		free(typed);
	}
	if ((o->sort == FP_TOP_WEIGHT_SELF || o->sort == FP_TOP_WEIGHT_TOTAL) &&
	    o->weight < 0) {
		fail("--sort %s needs --weight", o->sort == FP_TOP_WEIGHT_SELF ?
			"wself" : "wtotal");
		return -EINVAL;
	}
	if (!o->sort_set && o->weight >= 0)
		o->sort = FP_TOP_WEIGHT_SELF;
	if (o->from.set && o->to.set && o->from.relative == o->to.relative &&
	    o->to.us <= o->from.us) {
		fail("--to must be after --from");
		return -EINVAL;
	}
	return 0;
}

/* ---- reading ---- */

static bool
weight_is_signed(const struct options *o)
{
	return o->weight >= 0 && o->delta &&
	       !fp_metric_is_counter((enum fp_metric)o->weight);
}

static int64_t
weight_of(const struct options *o, const struct fp_perf_record *rec)
{
	if (o->weight < 0)
		return 1;
	return o->delta ? rec->delta[o->weight] : rec->value[o->weight];
}

static bool
accept(struct run *r, const struct fp_perf_record *rec)
{
	const struct options *o = r->o;
	bool ok;

	if (o->status_filter && !o->status_ok[rec->status])
		return false;
	for (size_t i = 0; i < o->nwheres; i++) {
		if (!where_holds(&o->wheres[i], rec))
			return false;
	}
	if (o->npids) {
		ok = false;
		for (size_t i = 0; i < o->npids && !ok; i++)
			ok = o->pids[i].num == rec->pid.num &&
			     o->pids[i].serial == rec->pid.serial;
		if (!ok)
			return false;
	}
	if (o->nnames) {
		ok = false;
		for (size_t i = 0; i < o->nnames && !ok && rec->registered_name; i++)
			ok = strcmp(o->names[i], rec->registered_name) == 0;
		if (!ok)
			return false;
	}
	if (!r->resolved) {
		/* relative bounds count from the first sample read */
		r->resolved = true;
		r->from_us = o->from.set ? o->from.us +
			     (o->from.relative ? rec->time_us : 0) : 0;
		r->to_us = o->to.set ? o->to.us +
			   (o->to.relative ? rec->time_us : 0) : UINT64_MAX;
	}
	return rec->time_us >= r->from_us && rec->time_us < r->to_us;
}

static size_t
scratch_put(struct run *r, const char *s, size_t n)
{
	size_t at = r->text_len;

	if (r->text_len + n + 1 > r->text_cap) {
		while (r->text_len + n + 1 > r->text_cap)
			r->text_cap = r->text_cap ? r->text_cap * 2 : 4096;
		r->text = xrealloc(r->text, r->text_cap);
	}
	memcpy(r->text + at, s, n);
	r->text[at + n] = '\0';
	r->text_len += n + 1;
	return at;
}

/* "m:f/2:17" -> length of "m:f/2" */
static size_t
without_line(const char *name)
{
	const char *slash = strrchr(name, '/');
	const char *colon = slash ? strchr(slash, ':') : NULL;

	return colon ? (size_t)(colon - name) : strlen(name);
}

/*
 * Build the stack of a sample, root first, in r->names/r->files, and
 * the leaf-first frame names in r->leaf. Returns the number of group
 * frames in *ngroups and the (non-negative) weight in *mag; false if
 * the sample has no place in a weighted graph.
 */
static bool
build_stack(struct run *r, const struct fp_perf_record *rec, int64_t w,
	    size_t *n, size_t *ngroups, uint64_t *mag, bool with_status)
{
	const struct options *o = r->o;
	size_t k = 0, need = rec->nframes + 4;
	size_t sign_at = SIZE_MAX, proc_at = SIZE_MAX, group_at = SIZE_MAX;
	bool placed = true;

	if (need > r->cap) {
		r->cap = need * 2;
		r->names = xrealloc(r->names, r->cap * sizeof(*r->names));
		r->files = xrealloc(r->files, r->cap * sizeof(*r->files));
		r->leaf = xrealloc(r->leaf, r->cap * sizeof(*r->leaf));
		r->text_offs = xrealloc(r->text_offs, r->cap * sizeof(*r->text_offs));
	}
	r->text_len = 0;

	*mag = 0;
	if (o->weight < 0) {
		*mag = 1;
	} else if (weight_is_signed(o)) {
		placed = w != 0 && !(o->sign == SIGN_POSITIVE && w < 0) &&
			 !(o->sign == SIGN_NEGATIVE && w > 0);
		*mag = w < 0 ? (uint64_t)0 - (uint64_t)w : (uint64_t)w;
		if (placed && o->sign == SIGN_SPLIT) {
			char frame[80];
			int len = snprintf(frame, sizeof(frame), "[%c%s]",
					   w > 0 ? '+' : '-', o->weight_name);

			sign_at = k;
			r->text_offs[k] = scratch_put(r, frame, (size_t)len);
			r->files[k++] = NULL;
		}
	} else {
		/* values and counter deltas are never negative */
		placed = w > 0;
		*mag = placed ? (uint64_t)w : 0;
	}
	if (o->group && !r->groups_by_table) {
		const char *v = field_value(rec, &o->group_by);
		const char *t = field_title(&o->group_by);

		group_at = k;
		r->text_offs[k] = scratch_put(r, t, strlen(t));
		r->text_len--;
		scratch_put(r, ":", 1);
		r->text_len--;
		scratch_put(r, v ? v : "-", strlen(v ? v : "-"));
		r->files[k++] = NULL;
	}
	if (with_status) {
		r->names[k] = fp_status_name(rec->status);
		r->files[k++] = NULL;
	}
	if (o->process) {
		char frame[64];
		int len = snprintf(frame, sizeof(frame), "<0.%" PRIu32 ".%" PRIu32 ">",
				   rec->pid.num, rec->pid.serial);
		size_t at;

		if (rec->registered_name) {
			at = scratch_put(r, rec->registered_name,
					 strlen(rec->registered_name));
		} else {
			at = scratch_put(r, frame, (size_t)len);
			if (rec->initial_call) {
				/* extend the pid with " INITIAL_CALL" */
				r->text_len--;
				scratch_put(r, " ", 1);
				r->text_len--;
				scratch_put(r, rec->initial_call,
					    strlen(rec->initial_call));
			}
		}
		proc_at = k;
		r->text_offs[k] = at;
		r->files[k++] = NULL;
	}
	*ngroups = k;
	for (uint32_t i = 0; i < rec->nframes; i++) {
		const char *name = rec->frames[rec->nframes - 1 - i];

		if (o->strip_lines) {
			r->text_offs[k] = scratch_put(r, name, without_line(name));
			name = NULL;
		}
		r->names[k] = name;
		r->files[k++] = rec->files[rec->nframes - 1 - i];
	}
	/* scratch text may have moved while growing: resolve offsets last */
	if (sign_at != SIZE_MAX)
		r->names[sign_at] = r->text + r->text_offs[sign_at];
	if (proc_at != SIZE_MAX)
		r->names[proc_at] = r->text + r->text_offs[proc_at];
	if (group_at != SIZE_MAX)
		r->names[group_at] = r->text + r->text_offs[group_at];
	for (size_t i = *ngroups; i < k; i++) {
		if (o->strip_lines)
			r->names[i] = r->text + r->text_offs[i];
		r->leaf[k - 1 - i] = r->names[i];
	}
	*n = k;
	return placed;
}

static void
report_progress(struct run *r, bool final)
{
	struct timespec now;
	uint64_t done, total;
	double ms;

	if (!r->progress)
		return;
	if (final) {
		if (r->reported)
			fputs("\r\033[K", stderr);
		r->reported = false;
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (double)(now.tv_sec - r->last_report.tv_sec) * 1e3 +
	     (double)(now.tv_nsec - r->last_report.tv_nsec) / 1e6;
	if (ms < 200)
		return;
	r->last_report = now;
	fp_perf_reader_progress(r->reader, &done, &total);
	fprintf(stderr, "\r\033[K%s: file %zu/%zu %s: ", program,
		r->file_index + 1, r->file_count, r->file);
	if (total)
		fprintf(stderr, "%.0f%% of %.1f MB", 100.0 * (double)done / (double)total,
			(double)total / 1e6);
	else
		fprintf(stderr, "%.1f MB", (double)done / 1e6);
	fprintf(stderr, ", %" PRIu64 " samples", r->read);
	r->reported = true;
}

/* The table of the sample's value under top --by, else the one table. */
static struct fp_func_table *
group_table(struct run *r, const struct fp_perf_record *rec)
{
	const char *v;

	if (!r->groups_by_table)
		return r->table;
	v = field_value(rec, &r->o->group_by);
	for (size_t i = 0; i < r->ngroups; i++) {
		if (v ? r->groups[i].value && strcmp(r->groups[i].value, v) == 0 :
			!r->groups[i].value)
			return r->groups[i].table;
	}
	r->groups = xrealloc(r->groups, (r->ngroups + 1) * sizeof(*r->groups));
	r->groups[r->ngroups].value = v ? xstrdup(v) : NULL;
	r->groups[r->ngroups].table = fp_func_table_new();
	return r->groups[r->ngroups++].table;
}

static int
group_cmp(const void *a, const void *b)
{
	const struct group_table *x = a, *y = b;

	if (!x->value || !y->value)
		return !x->value - !y->value;
	return strcmp(x->value, y->value);
}

/* top --by: one table per value, in the order of the values, the
 * samples without one last. */
static int
write_group_tables(struct run *r, const struct fp_top_options *to, FILE *f)
{
	int rc = 0;

	qsort(r->groups, r->ngroups, sizeof(*r->groups), group_cmp);
	for (size_t i = 0; i < r->ngroups && rc == 0; i++) {
		fprintf(f, "%s== %s: %s (%" PRIu64 " samples)\n\n", i ? "\n" : "",
			field_title(&r->o->group_by),
			r->groups[i].value ? r->groups[i].value : "-",
			fp_func_table_samples(r->groups[i].table));
		rc = fp_top_write(r->groups[i].table, to, f);
	}
	return rc;
}

static int
on_record(void *data, const struct fp_perf_record *rec)
{
	struct run *r = data;
	const struct options *o = r->o;
	int64_t w = weight_of(o, rec);
	size_t n, ngroups;
	uint64_t mag;
	bool placed;

	if ((++r->read & 1023) == 0)
		report_progress(r, false);
	if (!accept(r, rec))
		return 0;
	if (!r->matched || rec->time_us < r->first_us)
		r->first_us = rec->time_us;
	if (rec->time_us > r->last_us)
		r->last_us = rec->time_us;
	r->matched++;

	if (r->heatmap)
		fp_heatmap_add(r->heatmap, rec->time_us, w);

	placed = build_stack(r, rec, w, &n, &ngroups, &mag,
			     !o->no_status && !(r->speedscope && o->per_status));
	if (r->table)
		fp_func_table_add(group_table(r, rec), rec->status, r->leaf,
				  n - ngroups, w);
	if (!placed) {
		r->dropped++;
		return 0;
	}
	if (r->tree)
		fp_flame_tree_add(r->tree, r->set, r->names, r->files, n,
				  ngroups, mag);
	if (r->speedscope)
		fp_speedscope_add(r->speedscope,
				  o->per_status ? fp_status_name(rec->status) : "all",
				  r->names, r->files, n, mag);
	return 0;
}

/* Read every input into @r. Returns an exit code. */
static int
read_inputs(struct run *r, char *const *args, size_t nargs)
{
	const struct options *o = r->o;
	struct fpp_inputs in;
	const char *bad = NULL;
	int rc, ex = FPP_EXIT_OK;

	rc = fpp_inputs_expand(args, nargs, &o->from, &o->to, &in, &bad);
	if (rc == -ENODATA) {
		fail("%s: no perf-script files (*.perf, *.perf.gz, *.perf.zst) below it",
		     bad);
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	if (rc == -EINVAL) {
		fail("%s: not a regular file or a directory (a pipe is read as -)",
		     bad);
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	if (rc == -ELOOP) {
		fail("%s: directories nest deeper than 32 levels; name a "
		     "directory further down", bad);
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	if (rc < 0) {
		fail("cannot open %s: %s", bad, strerror(-rc));
		ex = FPP_EXIT_NOINPUT;
		goto free_inputs;
	}
	r->progress = !o->quiet && isatty(STDERR_FILENO);
	r->file_count = in.count;
	clock_gettime(CLOCK_MONOTONIC, &r->last_report);
	for (size_t i = 0; i < in.count && ex == FPP_EXIT_OK; i++) {
		struct fp_perf_reader *reader = NULL;

		if (in.files[i].skip)
			continue;
		rc = fp_perf_reader_open(in.files[i].path, &reader);
		if (rc == -EINVAL) {
			/* replaced since the inputs were listed */
			fail("%s: not a regular file", in.files[i].path);
			ex = FPP_EXIT_NOINPUT;
			break;
		}
		if (rc < 0) {
			fail("cannot open %s: %s", in.files[i].path, strerror(-rc));
			ex = FPP_EXIT_NOINPUT;
			break;
		}
		fp_perf_reader_set_erlang_names(reader, o->erlang_names);
		r->reader = reader;
		r->file = in.files[i].path;
		r->file_index = i;
		rc = fp_perf_read(reader, on_record, r);
		report_progress(r, true);
		if (rc == -EBADMSG) {
			fail("%s", fp_perf_reader_error(reader));
			ex = FPP_EXIT_DATAERR;
		} else if (rc < 0) {
			fail("%s", fp_perf_reader_error(reader)[0] ?
				     fp_perf_reader_error(reader) : strerror(-rc));
			ex = FPP_EXIT_IOERR;
		}
		r->reader = NULL;
		fp_perf_reader_destroy(reader);
	}
	if (ex == FPP_EXIT_OK && !o->quiet && r->matched == 0)
		fail("warning: no samples%s", r->read ? " matched the selection" : "");
	else if (ex == FPP_EXIT_OK && !o->quiet && r->dropped &&
		 r->dropped == r->matched && o->weight >= 0)
		fail("warning: every sample has weight 0 (or the other sign) for %s",
		     o->weight_name);
free_inputs:
	fpp_inputs_free(&in);
	return ex;
}

/* One warning for every sum held at a bound (util-sat.h). */
static void
warn_saturated(const struct options *o, bool saturated)
{
	if (saturated && !o->quiet)
		fail("warning: sums of %s pass the 64-bit range; they are "
		     "shown held at the largest value", o->weight_name);
}

static void
run_free(struct run *r)
{
	free(r->names);
	free(r->files);
	free(r->leaf);
	free(r->text);
	free(r->text_offs);
}

/* ---- output ---- */

struct output {
	const char *path;	/* NULL: stdout */
	char *tmp;
	FILE *f;
};

static int
output_open(struct output *out, const char *path)
{
	struct stat st;
	int fd;

	memset(out, 0, sizeof(*out));
	if (!path || strcmp(path, "-") == 0) {
		out->f = stdout;
		return FPP_EXIT_OK;
	}
	out->path = path;
	/* /dev/null, a FIFO, /dev/stdout: write in place, never rename
	 * a file over them */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		out->f = fopen(path, "w");
		if (!out->f) {
			fail("cannot open %s: %s", path, strerror(errno));
			return FPP_EXIT_CANTCREAT;
		}
		return FPP_EXIT_OK;
	}
	out->tmp = xzalloc(strlen(path) + 16);
	sprintf(out->tmp, "%s.tmp.XXXXXX", path);
	fd = mkstemp(out->tmp);
	if (fd < 0 || !(out->f = fdopen(fd, "w"))) {
		fail("cannot create %s: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(out->tmp);
		}
		free(out->tmp);
		out->tmp = NULL;
		return FPP_EXIT_CANTCREAT;
	}
	fchmod(fd, 0644);
	return FPP_EXIT_OK;
}

/* Finish the output after @rc (the writer's result); returns an exit code. */
static int
output_close(struct output *out, int rc)
{
	const char *name = out->path ? out->path : "standard output";
	int ex = FPP_EXIT_OK;

	if (!out->f)
		return FPP_EXIT_OK;
	if (rc == 0 && (fflush(out->f) != 0 || ferror(out->f)))
		rc = errno ? -errno : -EIO;
	if (out->path) {
		if (fclose(out->f) != 0 && rc == 0)
			rc = errno ? -errno : -EIO;
	}
	if (out->tmp) {
		if (rc == 0 && rename(out->tmp, out->path) < 0)
			rc = -errno;
		if (rc < 0)
			unlink(out->tmp);
		free(out->tmp);
	}
	if (rc == -E2BIG) {
		fail("%s: too many heat map cells; narrow the time with --from/--to",
		     name);
		ex = FPP_EXIT_DATAERR;
	} else if (rc < 0) {
		fail("write error on %s: %s", name, strerror(-rc));
		ex = FPP_EXIT_IOERR;
	}
	out->f = NULL;
	return ex;
}

static void
format_span(const struct run *r, char *dst, size_t size)
{
	char a[40], b[40];
	time_t s;
	struct tm tm;

	if (!r->matched) {
		snprintf(dst, size, "no samples");
		return;
	}
	s = (time_t)(r->first_us / 1000000);
	gmtime_r(&s, &tm);
	strftime(a, sizeof(a), "%Y-%m-%dT%H:%M:%SZ", &tm);
	s = (time_t)(r->last_us / 1000000);
	gmtime_r(&s, &tm);
	strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(dst, size, "%" PRIu64 " samples, %s to %s", r->matched, a, b);
}

static const char *
unit_of(const struct options *o)
{
	return o->weight < 0 ? "samples" : o->weight_name;
}

static int
write_svg(const struct options *o, const struct fp_flame_tree *tree,
	  const char *path, const char *subtitle, bool diff)
{
	struct fp_flamegraph_options fo = {
		.title = o->title ? o->title :
			 diff ? "Differential Flame Graph" : "Flame Graph",
		.subtitle = subtitle,
		.unit = unit_of(o),
		.weighted = o->weight >= 0,
		.diff = diff,
		.inverted = o->inverted,
		.width = o->width,
		.minwidth = o->minwidth,
	};
	struct output out;
	int ex = output_open(&out, path);

	if (ex != FPP_EXIT_OK)
		return ex;
	return output_close(&out, fp_flamegraph_svg_write(tree, &fo, out.f));
}

static int
cmd_render(const struct options *o, char *const *args, size_t nargs)
{
	struct run r = { .o = o };
	struct output out;
	char subtitle[256];
	int ex;

	switch (o->command) {
	case CMD_FOLDED:
	case CMD_SVG:
		r.tree = fp_flame_tree_new();
		break;
	case CMD_HEATMAP:
		r.heatmap = fp_heatmap_new(o->rows ? o->rows : 50);
		break;
	case CMD_TOP:
		r.table = fp_func_table_new();
		r.groups_by_table = o->group;
		break;
	case CMD_SPEEDSCOPE: {
		struct fp_speedscope_options so = {
			.name = nargs == 1 ? args[0] : "flame_prof",
			.unit = (o->weight == FP_METRIC_MEMORY ||
				 o->weight == FP_METRIC_BINARY_BYTES) ? "bytes" : "none",
			.exporter = "flame_prof " FP_VERSION,
		};
		const char *slash = strrchr(so.name, '/');

		if (slash && slash[1])
			so.name = slash + 1;
		r.speedscope = fp_speedscope_new(&so);
		break;
	}
	default:
		return FPP_EXIT_SOFTWARE;
	}

	ex = read_inputs(&r, args, nargs);
	if (ex != FPP_EXIT_OK)
		goto free_run;
	format_span(&r, subtitle, sizeof(subtitle));
	if (r.tree)
		fp_flame_tree_finish(r.tree);

	if (o->command == CMD_SVG) {
		ex = write_svg(o, r.tree, o->output, subtitle, false);
		warn_saturated(o, fp_flame_tree_saturated(r.tree));
		goto free_run;
	}
	ex = output_open(&out, o->output);
	if (ex != FPP_EXIT_OK)
		goto free_run;
	switch (o->command) {
	case CMD_FOLDED:
		ex = output_close(&out, fp_folded_write(r.tree, 0, o->weight >= 0,
							out.f));
		break;
	case CMD_HEATMAP: {
		struct fp_heatmap_options ho = {
			.title = o->title,
			.subtitle = o->weight < 0 ? NULL : o->weight_name,
			.unit = unit_of(o),
			.command = "flame_prof svg",
		};

		ex = output_close(&out, fp_heatmap_write(r.heatmap, &ho, out.f));
		break;
	}
	case CMD_TOP: {
		struct fp_top_options to = {
			.limit = o->limit,
			.weight_name = o->weight < 0 ? NULL : o->weight_name,
			.sort = o->sort,
		};

		ex = output_close(&out, r.groups_by_table ?
					write_group_tables(&r, &to, out.f) :
					fp_top_write(r.table, &to, out.f));
		break;
	}
	case CMD_SPEEDSCOPE:
		ex = output_close(&out, fp_speedscope_write(r.speedscope, out.f));
		break;
	default:
		ex = output_close(&out, 0);
		break;
	}
	warn_saturated(o, (r.tree && fp_flame_tree_saturated(r.tree)) ||
			  (r.table && fp_func_table_saturated(r.table)) ||
			  (r.heatmap && fp_heatmap_saturated(r.heatmap)));

free_run:
	fp_flame_tree_destroy(r.tree);
	fp_heatmap_destroy(r.heatmap);
	fp_func_table_destroy(r.table);
	for (size_t i = 0; i < r.ngroups; i++) {
		free(r.groups[i].value);
		fp_func_table_destroy(r.groups[i].table);
	}
	free(r.groups);
	fp_speedscope_destroy(r.speedscope);
	run_free(&r);
	return ex;
}

static int
cmd_diff(const struct options *o, char *const *args, size_t nargs)
{
	struct fp_flame_tree *tree = o->svg_output ? fp_flame_tree_new() : NULL;
	struct run side[2] = { { .o = o, .set = 0, .tree = tree },
			       { .o = o, .set = 1, .tree = tree } };
	struct fp_diff_options dopt = {
		.by = o->by,
		.weighted = o->weight >= 0,
		.weight_name = o->weight_name,
		.threshold = o->threshold,
		.limit = o->limit,
	};
	struct output out;
	size_t regressions = 0;
	int ex = FPP_EXIT_OK, rc;

	if (nargs != 2) {
		fail("diff needs two inputs: BEFORE AFTER");
		usage_command(CMD_DIFF, stderr);
		ex = FPP_EXIT_USAGE;
		goto free_tree;
	}
	for (int i = 0; i < 2 && ex == FPP_EXIT_OK; i++) {
		side[i].table = fp_func_table_new();
		ex = read_inputs(&side[i], &args[i], 1);
		if (ex == FPP_EXIT_OK && side[i].matched == 0) {
			fail("%s: no samples to compare", args[i]);
			ex = FPP_EXIT_DATAERR;
		}
	}
	if (ex != FPP_EXIT_OK)
		goto free_sides;

	ex = output_open(&out, o->output);
	if (ex != FPP_EXIT_OK)
		goto free_sides;
	rc = fp_diff_write(side[0].table, side[1].table, &dopt, out.f,
			   &regressions);
	ex = output_close(&out, rc);
	if (ex == FPP_EXIT_OK && tree) {
		char subtitle[512], a[200], b[200];

		format_span(&side[0], a, sizeof(a));
		format_span(&side[1], b, sizeof(b));
		snprintf(subtitle, sizeof(subtitle), "before: %s; after: %s", a, b);
		fp_flame_tree_finish(tree);
		ex = write_svg(o, tree, o->svg_output, subtitle, true);
	}
	warn_saturated(o, fp_func_table_saturated(side[0].table) ||
			  fp_func_table_saturated(side[1].table) ||
			  (tree && fp_flame_tree_saturated(tree)));
	if (ex == FPP_EXIT_OK && regressions)
		ex = FPP_EXIT_REGRESSION;

free_sides:
	for (int i = 0; i < 2; i++) {
		fp_func_table_destroy(side[i].table);
		run_free(&side[i]);
	}
free_tree:
	fp_flame_tree_destroy(tree);
	return ex;
}

int
main(int argc, char **argv)
{
	struct options o = {
		.weight = -1,
		.minwidth = -1,
		.limit = 25,
		.threshold = 5.0,
	};
	int c = -1, ex;

	snprintf(o.weight_name, sizeof(o.weight_name), "samples");
	if (argc < 2) {
		usage_main(stderr);
		return FPP_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		if (argc > 2) {
			for (int i = 0; i < CMD_COUNT; i++) {
				if (strcmp(argv[2], command_names[i]) == 0) {
					usage_command((enum command)i, stdout);
					return FPP_EXIT_OK;
				}
			}
		}
		usage_main(stdout);
		return FPP_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("flame_prof %s\n", FP_VERSION);
		return FPP_EXIT_OK;
	}
	for (int i = 0; i < CMD_COUNT; i++) {
		if (strcmp(argv[1], command_names[i]) == 0)
			c = i;
	}
	if (c < 0) {
		fail("unknown command '%s'", argv[1]);
		usage_main(stderr);
		return FPP_EXIT_USAGE;
	}
	o.command = (enum command)c;
	if (o.command == CMD_DIFF)
		o.limit = 30;
	/* getopt_long on the arguments after the command */
	if (parse_options(argc - 1, argv + 1, &o) < 0) {
		fprintf(stderr, "Try 'flame_prof %s --help'.\n", command_names[c]);
		ex = FPP_EXIT_USAGE;
		goto free_options;
	}
	if (optind + 1 >= argc) {
		fail("%s: no input (a file, a directory, or - for standard input)",
		     command_names[c]);
		fprintf(stderr, "Try 'flame_prof %s --help'.\n", command_names[c]);
		ex = FPP_EXIT_USAGE;
		goto free_options;
	}
	if (o.command == CMD_DIFF)
		ex = cmd_diff(&o, argv + 1 + optind, (size_t)(argc - 1 - optind));
	else
		ex = cmd_render(&o, argv + 1 + optind, (size_t)(argc - 1 - optind));

free_options:
	for (size_t i = 0; i < o.nnames; i++)
		free(o.names[i]);
	free(o.names);
	free(o.pids);
	free(o.wheres);
	return ex;
}
