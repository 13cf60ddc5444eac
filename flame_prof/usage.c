/*
 * flame_prof — --help: the overview of the commands, and each command's
 * options as the option table (options.c) gives them.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "flame_prof.h"

static const char *const section_titles[FPP_SEC_COUNT] = {
	NULL, "Selection", "Names", "Weight", "Stacks", "Output",
};

/* the command's own section */
static const char *const command_sections[FPP_CMD_COUNT] = {
	NULL, "Graph", "Map", "Table", "Profiles", "Comparison", "Table",
	"Profile", "Table",
};

static const char input_help[] =
"Input:\n"
"  INPUT is a perf-script file written by flame_profd (plain, .gz or .zst,\n"
"  recognised by content), a directory (every *.perf, *.perf.gz and\n"
"  *.perf.zst below it; dot-files such as files still being written are\n"
"  skipped) or - for standard input. Files are read in the order of the\n"
"  time in their names.\n";

static const char exit_help[] =
"Exit status:\n"
"  0 success (top --follow: stopped by q, Ctrl-C, SIGINT or SIGTERM);\n"
"  1 diff: a share grew past --threshold; 64 usage error;\n"
"  65 malformed input (the message names file and line) or nothing to diff;\n"
"  66 input missing, unreadable or not a regular file (a FIFO: read pipes\n"
"  as -); 73 output cannot be created;\n"
"  74 read or write error.\n";

/* what each command does, after its usage line */
static const char *const command_help[FPP_CMD_COUNT] = {
	[FPP_CMD_FOLDED] =
"Write collapsed stacks: frames root first, joined with ';', then a\n"
"space and the count (samples, or the weight). The status is the\n"
"first frame unless --no-status.\n",
	[FPP_CMD_SVG] =
"Write an interactive SVG flame graph: hover for details, click a\n"
"frame to zoom, Search (or Ctrl-F) to highlight a regular expression.\n",
	[FPP_CMD_HEATMAP] =
"Write an SVG sub-second heat map: a column per second, a row per\n"
"fraction of the second, coloured by samples or by the summed weight\n"
"(negative sums in blue; a legend gives the scale). Click two cells\n"
"for the --from/--to of the range. Unweighted and without --status,\n"
"it counts what stock Flamescope's heat map counts: samples the\n"
"writer marked idle (a process waiting in receive or suspended) are\n"
"left out of the cells, so that density follows the node's work;\n"
"with --status or --weight it counts every sample selected. The\n"
"files of several nodes make one grid by wall-clock time: a cell's\n"
"title names the nodes it holds, and the table of 'flame_prof nodes'\n"
"is drawn under the map (--where node=NAME: one node's map).\n",
	[FPP_CMD_TOP] =
"Write a table of the hottest functions: self (the leaf frame) and\n"
"total (anywhere on the stack, once per sample) samples, and with\n"
"--weight the signed sums of the weight (with the gross growth and\n"
"release beside the net sums of a signed weight). Unweighted and\n"
"without --status, samples marked idle (a process waiting in receive\n"
"or suspended) are counted in the summary and left out of the rows.\n"
"With --follow DIR: the live view of a directory flame_profd is writing,\n"
"redrawn every --interval from the samples of the last --window (on a\n"
"terminal: q or Ctrl-C quits; else a plain snapshot per interval until\n"
"SIGINT or SIGTERM, exit 0).\n",
	[FPP_CMD_SPEEDSCOPE] =
"Write speedscope's JSON format: sampled profiles, one per process by\n"
"default. Unweighted, a process's sample lasts until its next one, so\n"
"the time-order view of each process has a time axis in seconds since\n"
"the first sample. Open it at https://www.speedscope.app or with the\n"
"speedscope command.\n",
	[FPP_CMD_DIFF] =
"Compare the share of every function in two profiles (each a file or\n"
"a directory) and write the changes, biggest growth first. Exit 1 if\n"
"a share grew by more than --threshold percentage points.\n",
	[FPP_CMD_PROCS] =
"Write a table of the sampled processes: pid, registered name or\n"
"initial call, samples by status, reductions done, the longest\n"
"mailbox and the largest memory seen.\n",
	[FPP_CMD_PPROF] =
"Write pprof's profile.proto, gzip-compressed, for go tool pprof and\n"
"the continuous-profiling servers that take pprof (Pyroscope, Parca).\n"
"Every sample selected counts, as in top's summary. Columns (sample\n"
"types): samples (the default), each metric's value, and the delta of\n"
"reductions and minor_gcs. Labels: node, pid, status, registered_name,\n"
"initial_call, label, callers and key.NAME (a number where the value\n"
"is a decimal integer). The period is 1/rate s of wall time. The\n"
"output is binary: give -o FILE or redirect standard output.\n",
	[FPP_CMD_NODES] =
"Write a table of the nodes whose files are read (several nodes'\n"
"directories at once): a row per node with its samples selected, their\n"
"span and rate, the mean of the daemon's interval notes for the rate it\n"
"achieved and its cost (and the largest cost), and the node's hottest\n"
"function (most self samples, idle samples left out as in top).\n",
};

static void
print_row(const struct fpp_option_row *r, FILE *f)
{
	char head[64];
	const char *line = r->help;
	int n;

	if (r->short_name)
		n = snprintf(head, sizeof(head), "  -%c, --%s", r->short_name, r->name);
	else
		n = snprintf(head, sizeof(head), "      --%s", r->name);
	if (r->arg)
		n += snprintf(head + n, sizeof(head) - (size_t)n, " %s", r->arg);
	fputs(head, f);
	if (n > 26)
		fprintf(f, "\n%28s", "");
	else
		fprintf(f, "%*s", 28 - n, "");
	for (;;) {
		size_t len = strcspn(line, "\n");

		fprintf(f, "%.*s\n", (int)len, line);
		if (!line[len])
			break;
		line += len + 1;
		fprintf(f, "%28s", "");
	}
}

void
fpp_usage_main(FILE *f)
{
	fprintf(f,
"Usage: flame_prof COMMAND [OPTION]... INPUT...\n"
"Render the perf-script files of flame_profd (docs/FORMAT.md).\n"
"\n"
"Commands:\n"
"  folded       collapsed stacks for flamegraph.pl, inferno and speedscope\n"
"  svg          an interactive SVG flame graph\n"
"  heatmap      an SVG sub-second heat map (seconds across, offsets down)\n"
"  top          a table of the hottest functions, self and total;\n"
"               with --follow, the live view of a node being profiled\n"
"  speedscope   speedscope's JSON file format, a profile per process\n"
"  diff         compare two profiles: BEFORE AFTER (text, and SVG with --svg)\n"
"  procs        a table of the processes: samples, reductions, mailbox, memory\n"
"  pprof        pprof's profile.proto (gzip) for go tool pprof, Pyroscope, Parca\n"
"  nodes        a table of the nodes: samples, rate, cost, hottest function\n"
"\n"
"'flame_prof COMMAND --help' lists the options of a command.\n"
"flame_prof(1) has the details.\n\n%s", exit_help);
}

void
fpp_usage_command(enum fpp_command c, FILE *f)
{
	fprintf(f, "Usage: flame_prof %s [OPTION]... %s\n", fpp_command_names[c],
		c == FPP_CMD_DIFF ? "BEFORE AFTER" : "INPUT...");
	if (c == FPP_CMD_TOP)
		fprintf(f, "       flame_prof top --follow [OPTION]... DIR\n");
	fputs(command_help[c], f);
	for (int s = 0; s < FPP_SEC_COUNT; s++) {
		const char *title = s == FPP_SEC_COMMAND ? command_sections[c] :
				    section_titles[s];
		bool first = true;

		if (s == FPP_SEC_SELECTION)
			fprintf(f, "\n%s", input_help);
		for (size_t i = 0; i < fpp_option_nrows; i++) {
			if ((int)fpp_option_rows[i].section != s || !(fpp_option_rows[i].commands & (1u << c)))
				continue;
			if (first)
				fprintf(f, "\n%s:\n", title);
			first = false;
			print_row(&fpp_option_rows[i], f);
		}
	}
	fprintf(f, "\n%s", exit_help);
}

