/*
 * flame_prof — declarations shared by the command's files.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "fp/perf-script-read.h"
#include "util-buf.h"

/* Exit codes (sysexits.h values; listed in --help and flame_prof(1)). */
enum fpp_exit {
	FPP_EXIT_OK = 0,
	FPP_EXIT_REGRESSION = 1,	/* diff: a share grew past --threshold */
	FPP_EXIT_USAGE = 64,		/* bad command, option or value */
	FPP_EXIT_DATAERR = 65,		/* malformed input, or no samples to diff */
	FPP_EXIT_NOINPUT = 66,		/* input missing or unreadable */
	FPP_EXIT_SOFTWARE = 70,		/* internal error */
	FPP_EXIT_CANTCREAT = 73,	/* output file cannot be created */
	FPP_EXIT_IOERR = 74,		/* read or write error */
};

/* A time bound of --from/--to: absolute, or relative to the first sample. */
struct fpp_time {
	bool set;
	bool relative;
	uint64_t us;		/* epoch microseconds, or offset */
};

/**
 * Parse "1795248660.5" (epoch seconds), "2026-11-21T08:11:00.432Z" (UTC;
 * the Z, the fraction and the seconds may be left out; a space may stand
 * for the T) or "+DUR" (DUR after the first sample: 90s, 1.5m, 500ms).
 *
 * @return 0, or -EINVAL.
 */
int
fpp_time_parse(const char *text, struct fpp_time *t);

struct fpp_input {
	char *path;
	bool has_start;
	uint64_t start_us;	/* from the file name, when it has one */
	bool skip;		/* outside --from/--to by its name */
};

struct fpp_inputs {
	struct fpp_input *files;
	size_t count;
	char *error_path;	/* a directory below an input that failed */
};

/**
 * Expand the command-line inputs: files as given, directories to every
 * *.perf, *.perf.gz and *.perf.zst below them (dot-files skipped; links
 * to directories not followed; up to 32 levels down), "-" standard
 * input. A file reached twice (same device and inode) is read once.
 * Sorted by the time in their names (flame_profd's
 * NODE.YYYYMMDDTHHMMSS.mmmZ.perf), others first in the order given.
 * With absolute @from/@to, files that cannot hold a sample in range are
 * marked skip.
 *
 * @return 0; -ENOENT etc. if an input cannot be opened (@bad names it,
 *         or the directory below it that cannot be read);
 *         -EINVAL if an input is neither a regular file nor a directory
 *         (a FIFO, a device, a socket);
 *         -ELOOP if directories nest deeper than 32 levels below an
 *         input (@bad names the first one too deep);
 *         -ENODATA if a directory holds no perf-script file.
 *         @bad stays valid until fpp_inputs_free().
 */
int
fpp_inputs_expand(char *const *args, size_t nargs, const struct fpp_time *from,
		  const struct fpp_time *to, struct fpp_inputs *inputs,
		  const char **bad);

/* Free the file list fpp_inputs_collect() made; the struct is left empty. */
void
fpp_inputs_free(struct fpp_inputs *inputs);

/* ---- the command: options.c, usage.c, stack.c, outfile.c, render.c,
 * procs.c ---- */

enum fpp_command {
	FPP_CMD_FOLDED = 0,
	FPP_CMD_SVG,
	FPP_CMD_HEATMAP,
	FPP_CMD_TOP,
	FPP_CMD_SPEEDSCOPE,
	FPP_CMD_DIFF,
	FPP_CMD_PROCS,
	FPP_CMD_PPROF,
	FPP_CMD_NODES,
	FPP_CMD_COUNT,
};

extern const char *const fpp_command_names[FPP_CMD_COUNT];

/* How a signed weight (the _delta of a gauge) is drawn or summed. */
enum fpp_sign {
	FPP_SIGN_SPLIT = 0,	/* growth and release apart */
	FPP_SIGN_POSITIVE,	/* growth only */
	FPP_SIGN_NEGATIVE,	/* release only, by magnitude */
	FPP_SIGN_ABS,		/* both, by magnitude */
};

/* speedscope: what one profile holds */
enum fpp_profiles {
	FPP_PROFILES_PROCESS = 0,
	FPP_PROFILES_STATUS,
	FPP_PROFILES_ALL,
};

/* procs: the table's sort keys and formats */
enum fpp_procs_sort {
	FPP_PROCS_SAMPLES = 0,
	FPP_PROCS_REDUCTIONS,
	FPP_PROCS_MAILBOX,
	FPP_PROCS_MEMORY,
	FPP_PROCS_PID,
	FPP_PROCS_NAME,
};

enum fpp_format { FPP_FORMAT_TEXT = 0, FPP_FORMAT_CSV, FPP_FORMAT_JSON };

/* A label, the callers, a recorded key or the node (--where, --by). */
enum fpp_field_kind {
	FPP_FIELD_LABEL,
	FPP_FIELD_CALLERS,
	FPP_FIELD_KEY,
	FPP_FIELD_NODE,		/* the file header's # node: */
};

struct fpp_field {
	enum fpp_field_kind kind;
	const char *key;		/* FPP_FIELD_KEY: NAME of key.NAME, in argv */
	size_t keylen;
	char title[128];		/* what group headings call it */
};

struct fpp_where {
	struct fpp_field field;
	bool contains;			/* FIELD~TEXT, else FIELD=TEXT */
	const char *text;
};

struct fpp_options {
	enum fpp_command command;
	const char *output;
	int weight;			/* -1: samples, else enum fp_metric */
	bool delta;			/* the metric's DELTA, not its VALUE */
	char weight_name[64];
	int sign;			/* enum fpp_sign */
	bool status_filter;
	bool status_ok[FP_STATUS_COUNT];
	struct fp_pid *pids;
	size_t npids, pids_cap;
	char **names;			/* written atoms */
	size_t nnames, names_cap;
	struct fpp_time from, to;
	bool no_status;
	bool process;
	bool strip_lines;
	bool erlang_names;		/* names of Elixir modules as Erlang's */
	bool quiet;
	bool help;			/* --help was given: print it, do nothing */
	/* svg, heatmap */
	const char *title;
	unsigned width;
	double minwidth;
	bool inverted;
	unsigned rows;
	/* top, diff, procs */
	size_t limit;
	bool limit_set;			/* --limit was given */
	int sort;			/* enum fp_top_sort, or fpp_procs_sort */
	int format;			/* enum fpp_format */
	/* speedscope */
	int profiles;			/* enum fpp_profiles */
	/* diff */
	double threshold;
	int by;				/* enum fp_diff_by */
	const char *svg_output;
	/* --where, --by FIELD */
	struct fpp_where *wheres;
	size_t nwheres, wheres_cap;
	bool group;
	struct fpp_field group_by;
	const char *group_by_arg;	/* --by as given, in argv */
	/* top --follow */
	bool follow;
	uint64_t window_us, interval_us;	/* 0: not given */
	int view;			/* enum fpp_view */
};

/* --help lists the sections in this order; COMMAND is the command's own */
enum fpp_section {
	FPP_SEC_COMMAND = 0,
	FPP_SEC_SELECTION,
	FPP_SEC_NAMES,
	FPP_SEC_WEIGHT,
	FPP_SEC_STACKS,
	FPP_SEC_OUTPUT,
	FPP_SEC_COUNT,
};

/* What an option row does with its argument. */
enum fpp_row_kind {
	FPP_ROW_FLAG,		/* the bool at field becomes value */
	FPP_ROW_SET,		/* the int at field becomes value */
	FPP_ROW_STRING,		/* the const char * at field: the argument */
	FPP_ROW_CHOICE,		/* the int at field: the argument's index in words */
	FPP_ROW_UINT,		/* the unsigned at field: a whole number, min to max */
	FPP_ROW_PARSE,		/* parse() reads it */
};

/* A row of the option table: an option with one meaning. */
struct fpp_option_row {
	const char *name;
	char short_name;	/* 0: none */
	const char *arg;	/* the argument in --help; NULL: takes none */
	unsigned commands;	/* bit per enum fpp_command */
	enum fpp_section section;
	enum fpp_row_kind kind;
	size_t field;		/* offset in struct fpp_options */
	int value;
	const char *const *words;	/* NULL-terminated */
	unsigned min, max;
	/* 0, or -EINVAL after a message */
	int (*parse)(struct fpp_options *o, const char *arg);
	const char *help;	/* lines after the first indented by --help */
};

extern const struct fpp_option_row *const fpp_option_rows;
extern const size_t fpp_option_nrows;

/**
 * The whole command: @argv as main() gets it (argv[1] the command).
 * Returns the exit code (enum fpp_exit); what it makes goes to its output
 * files or stdout, its messages to stderr. To run it again in the same
 * process (the fuzz target, the tests), set optind = 0 first: glibc's
 * getopt then starts afresh.
 */
int
fpp_main(int argc, char **argv);

/**
 * Whether @rec passes the selection of @o that does not depend on the
 * run (--status, --where, --pid, --name; not --from/--to).
 */
bool
fpp_selected(const struct fpp_options *o, const struct fp_perf_record *rec);

/** Print "flame_prof: MESSAGE" to standard error. */
void
fpp_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/** The overview of every command (flame_prof --help). */
void
fpp_usage_main(FILE *f);

/** The help of @c: only the options that apply to it. */
void
fpp_usage_command(enum fpp_command c, FILE *f);

/**
 * Set @o to the defaults of @o->command and parse the options of
 * argv[1..] (argv[0] is the command). Leaves optind at the first input.
 *
 * @return 0, or -EINVAL after a message naming the option.
 */
int
fpp_options_parse(int argc, char **argv, struct fpp_options *o);

/* Free what fpp_options_parse() allocated in @o. */
void
fpp_options_free(struct fpp_options *o);

/** Whether the weight is the _delta of a gauge, which can be negative. */
bool
fpp_weight_is_signed(const struct fpp_options *o);

/** What the weight is called in titles: "samples", "memory_delta",
 * "memory_delta (growth)". Static storage in @o. */
const char *
fpp_weight_label(const struct fpp_options *o);

/** A sample's value of @f, or NULL where it has none. */
const char *
fpp_field_value(const struct fp_perf_record *rec, const struct fpp_field *f);

/* The heading a field is shown under: its name, or label/callers. */
const char *
fpp_field_title(const struct fpp_field *f);

/* What one pass over the input feeds; unused sinks are NULL. */
struct fpp_run {
	const struct fpp_options *o;
	int set;			/* tree set: 0, or 1 for diff AFTER */
	struct fp_flame_tree *tree;
	struct fp_func_table *table;
	/* top --by FIELD: one table per value; value NULL: none recorded */
	struct fpp_group_table {
		char *value;
		struct fp_func_table *table;
	} *groups;
	size_t ngroups, groups_cap;
	bool groups_by_table;		/* top: no group frame */
	struct fp_heatmap *heatmap;
	/* heatmap: idle samples (fp_perf_record.idle) stand in the span
	 * but not in the cells, as in stock Flamescope's heat map */
	bool skips_idle;	/* heat map and top: idle samples in no cell or row */
	uint64_t idle_left_out;
	/* heatmap: the nodes of its samples, in the order first seen, each
	 * the source number of its samples (NULL: a file without one) */
	char **heat_nodes;
	size_t nheat_nodes, heat_nodes_cap, heat_last;
	struct fp_speedscope *speedscope;
	/* the name of each process, read in a pass of its own before the
	 * samples (fpp_read_inputs(), for --process and speedscope's
	 * profiles per process); NULL: each sample names its own */
	struct fpp_names *proc_names;
	/* any other consumer of the accepted samples (procs) */
	void (*sink)(void *data, const struct fp_perf_record *rec);
	void *sink_data;
	/* every comment of every file read (nodes), or NULL */
	fp_perf_comment_fn comment;
	void *comment_data;

	uint64_t from_us, to_us;	/* resolved; to_us UINT64_MAX: none */
	bool resolved;
	uint64_t read, matched, dropped;
	uint64_t first_us, last_us;

	/* per-sample scratch */
	const char **names, **files, **leaf;
	size_t cap;
	struct fp_text text;		/* names made for the sample, NUL-ended */
	size_t *text_offs;
	struct fp_text esc;		/* node text as shown (util-escape.h) */

	/* progress */
	bool progress;
	const char *file;
	size_t file_index, file_count;
	struct fp_perf_reader *reader;
	struct timespec last_report;
	bool reported;
};

/** Read every input into @r. Returns an exit code (enum fpp_exit). */
int
fpp_read_inputs(struct fpp_run *r, char *const *args, size_t nargs);

/** The table of the sample's value under top --by, else the one table. */
struct fp_func_table *
fpp_group_table(struct fpp_run *r, const struct fp_perf_record *rec);

/*
 * One name per process, as procs gives it: its registered name (the last
 * one seen), else its initial call (the last one that is not
 * proc_lib:init_p/N, unless no other is seen).
 */
struct fpp_names;

/**
 * Read @args once for the names of the processes in the samples @o
 * selects. Standard input ("-") is kept for the pass that follows:
 * rewound, or first copied to an unlinked temporary file when it cannot
 * be. Returns an exit code (enum fpp_exit); *@out, owned by the caller
 * (fpp_names_destroy()), is set only on FPP_EXIT_OK.
 */
int
fpp_names_read(const struct fpp_options *o, char *const *args, size_t nargs,
	       struct fpp_names **out);

/* Free a name table of fpp_names_read(); NULL is a no-op. */
void
fpp_names_destroy(struct fpp_names *names);

/**
 * The registered name and initial call that stand for @pid: what
 * @names holds, else (NULL, or a process it never saw) the sample's own
 * @registered_name and @initial_call. Either may be NULL; the strings
 * live as long as @names or the sample.
 */
void
fpp_names_of(const struct fpp_names *names, const struct fp_pid *pid,
	     const char **registered_name, const char **initial_call);

/** Free what fpp_read_inputs() allocated in @r (not its sinks). */
void
fpp_run_free(struct fpp_run *r);

/* An output file, replaced atomically when closed without an error. */
struct fpp_output {
	const char *path;	/* NULL: stdout */
	char *tmp;
	FILE *f;
};

/** Open @path (NULL or "-": standard output). Returns an exit code. */
int
fpp_output_open(struct fpp_output *out, const char *path);

/** Finish the output after @rc (the writer's result); returns an exit code. */
int
fpp_output_close(struct fpp_output *out, int rc);

/** "N samples, FIRST to LAST" (UTC), or "no samples". */
void
fpp_format_span(const struct fpp_run *r, char *dst, size_t size);

/** One warning for every sum held at a bound (util-sat.h). */
void
fpp_warn_saturated(const struct fpp_options *o, bool saturated);

/* The commands; each returns an exit code. */
int
fpp_cmd_render(const struct fpp_options *o, char *const *args, size_t nargs);

/* The diff command over the two sets of @args; returns an FPP_EXIT_* code. */
int
fpp_cmd_diff(const struct fpp_options *o, char *const *args, size_t nargs);

/* The procs command: a row per process; returns an FPP_EXIT_* code. */
int
fpp_cmd_procs(const struct fpp_options *o, char *const *args, size_t nargs);

/* The pprof command: pprof's profile.proto, gzip'd; returns an
 * FPP_EXIT_* code. */
int
fpp_cmd_pprof(const struct fpp_options *o, char *const *args, size_t nargs);

/* The nodes command: a row per node; returns an FPP_EXIT_* code. */
int
fpp_cmd_nodes(const struct fpp_options *o, char *const *args, size_t nargs);

/*
 * The table of nodes of `flame_prof nodes` (nodes.c), for another
 * command's run: fpp_nodes_new() takes @r's sink and comment hooks (both
 * must be free), so the samples @r accepts and the notes of every file
 * it reads are counted per node. The caller owns the result
 * (fpp_nodes_destroy(); NULL is a no-op); it must not outlive @r.
 */
struct fpp_nodes;

struct fpp_nodes *
fpp_nodes_new(struct fpp_run *r);

void
fpp_nodes_destroy(struct fpp_nodes *t);

/** The nodes with a sample selected. */
size_t
fpp_nodes_count(const struct fpp_nodes *t);

/** The table as `flame_prof nodes` prints it. @return 0 or -EIO. */
int
fpp_nodes_write(struct fpp_nodes *t, FILE *f);

/* ---- top --follow: window.c, follow.c ---- */

/* What the rows of the live view count. */
enum fpp_view {
	FPP_VIEW_FUNCTIONS = 0,	/* functions: self and total samples */
	FPP_VIEW_PROCESSES,	/* processes: their samples */
	FPP_VIEW_FIELD,		/* the values of --by FIELD: their samples */
	FPP_VIEW_COUNT,
};

/*
 * The samples of the last seconds, counted per second: a ring of
 * one-second buckets, each holding its own counts of functions,
 * processes and values, so that a second leaves the window by clearing
 * its bucket. Memory is bounded by the window's seconds times what one
 * second names.
 */
struct fpp_window;

/* One sample as the window counts it. */
struct fpp_window_sample {
	uint64_t time_us;
	enum fp_status status;
	bool idle;			/* counted, in no function row */
	const char *const *frames;	/* leaf first, as written */
	size_t nframes;
	const char *process;		/* the row it counts in, or NULL */
	const char *value;		/* --by FIELD's value, or NULL */
};

/* A row of the window: a function, a process or a value. */
struct fpp_window_row {
	const char *name;		/* owned by the window */
	uint64_t self, total;		/* total: functions only */
};

/* What the window holds. */
struct fpp_window_summary {
	uint64_t samples;		/* all in the window */
	uint64_t idle;			/* of which idle (in no function row) */
	uint64_t status[FP_STATUS_COUNT];
	uint64_t newest_us;		/* the newest sample's time; 0: none */
	uint64_t seconds;		/* seconds of the window that had samples
					 * or followed the first that did */
};

/** A window of @window_us (rounded up to whole seconds, at least 1).
 * Caller owns it; free with fpp_window_destroy(). */
struct fpp_window *
fpp_window_new(uint64_t window_us);

/** NULL is a no-op. */
void
fpp_window_destroy(struct fpp_window *w);

/**
 * Count one sample. The window ends at the newest sample's second: a
 * newer one moves it on (clearing the seconds it passes), one older
 * than the window is not counted. A function is counted once per
 * sample in total however often it recurs. Strings are copied.
 */
void
fpp_window_add(struct fpp_window *w, const struct fpp_window_sample *s);

/**
 * The rows of @view in the window, largest first by self samples (by
 * total with @by_total; ties by name), in *@rows (owned by the window,
 * valid until the next call on it); their number is returned. @sum is
 * set if not NULL.
 */
size_t
fpp_window_rows(struct fpp_window *w, enum fpp_view view, bool by_total,
		const struct fpp_window_row **rows,
		struct fpp_window_summary *sum);

/**
 * The live view: follow the directory @dir while flame_profd writes it
 * (top --follow). Returns an exit code (enum fpp_exit).
 */
int
fpp_cmd_follow(const struct fpp_options *o, const char *dir);
