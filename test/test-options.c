/*
 * flame_profd — unit tests: the command line (daemon/options.c).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp-test.h"
#include "../daemon/compress.h"
#include "../daemon/options.h"

#define ARGS_MAX 40

struct options_case {
	const char *argv[ARGS_MAX];
	int rc;
};

/* Exit codes as --help and flame_profd(1) give them. */
static const struct options_case cases[] = {
	{ { "--node", "a@b" }, 0 },
	{ { "-n", "a@b", "-t", "5", "-e", "1s", "-r", "20" }, 0 },
	{ { "--node", "a@b", "--pid", "0.1.2", "--name", "foo" }, 0 },
	{ { "--node", "a@b", "--compress", "gzip", "--compress-level", "9" }, 0 },
	{ { "--node", "a@b", "--key", "k", "--logger-key", "m", "--callers" }, 0 },
	{ { NULL }, FPD_EXIT_USAGE },				/* no --node */
	{ { "--nope" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-follow" }, FPD_EXIT_USAGE },	/* no --trace */
	{ { "--node", "a@b", "--trace-server", "s" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:f/2", "--trace-calls", "5" }, 0 },
	{ { "--node", "a@b", "--trace-call", "Elixir.My.Server:handle_call" }, 0 },
	{ { "--node", "a@b", "--trace-call", "m:f/256" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:f/x" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:f/" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "mf/1" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", ":f/1" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:/1" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:f:g" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:f", "--trace-call", "m:g" },
	  FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:f", "--trace", "x" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trace-call", "m:f", "--trace-calls", "0" },
	  FPD_EXIT_USAGE },
	{ { "--node" }, FPD_EXIT_USAGE },			/* no value */
	{ { "--node", "a@b", "extra" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--top", "0" }, FPD_EXIT_USAGE },	/* nothing */
	{ { "--node", "a@b", "--top", "-1" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--every", "10ms" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--rate", "0" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--compress", "gzip", "--compress-level", "12" },
	  FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--file-mode", "0400" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--dir-mode", "0600" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--dir-mode", "0757" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--dir-mode", "0770" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--dir-mode", "01777" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--key", "$callers" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--key", "x", "--logger-key", "x" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--connect", ":4370" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--request", "rpc" }, FPD_EXIT_USAGE },
	{ { "--node", "no-host" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--perf", "0" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--perf", "4194305" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--perf", "1", "--perf-freq", "0" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--perf-freq", "10001" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--perf", "auto" }, 0 },
	{ { "--node", "a@b", "--perf", "Auto" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--perf", "auto1" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s", "--trigger", "mailbox>5",
	    "--trigger", "memory>1G", "--after", "2s", "--continuous" }, 0 },
	{ { "--node", "a@b", "--flight-recorder", "500ms" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s",
	    "--flight-recorder-max", "512K" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s", "--trigger", "mbox>5" },
	  FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s", "--trigger", "mailbox>" },
	  FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--trigger", "mailbox>5" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--continuous" }, FPD_EXIT_USAGE },
	/* several nodes */
	{ { "--node", "a@b", "--node", "c@d", "--node", "e@f=/k" }, 0 },
	{ { "--discover", "localhost" }, 0 },
	{ { "--discover", "h", "--discover-match", "app*", "-n", "a@h" }, 0 },
	{ { "--node", "a@b", "--node", "a@b" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--node", "c" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b=" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--discover-match", "x*" }, FPD_EXIT_USAGE },
	{ { "--discover", "" }, FPD_EXIT_USAGE },
	{ { "--discover", "a@h" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--node", "c@d", "--pid", "0.1.2" }, FPD_EXIT_USAGE },
	{ { "--discover", "h", "--perf", "auto" }, FPD_EXIT_USAGE },
	{ { "--discover", "h", "--perf", "1" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--node", "c@d", "--connect", "h:1" }, FPD_EXIT_USAGE },
	{ { "--discover", "h", "--name", "foo" }, 0 },
	{ { "--cluster", "a@b" }, 0 },
	{ { "--cluster", "a@b=/k", "--discover-match", "app*" }, 0 },
	{ { "--cluster", "a@b", "--discover", "h", "-n", "c@d" }, 0 },
	{ { "--cluster", "a@b", "--cluster", "c@d" }, FPD_EXIT_USAGE },
	{ { "--cluster", "a@b", "-n", "a@b" }, FPD_EXIT_USAGE },
	{ { "--cluster", "a" }, FPD_EXIT_USAGE },
	{ { "--cluster", "a@b=" }, FPD_EXIT_USAGE },
	{ { "--cluster", "a@b", "--pid", "0.1.2" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--node", "c@d", "--trace-call", "m:f" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s", "--trace-call", "m:f" },
	  FPD_EXIT_USAGE },
	{ { "--cluster", "a@b", "--flight-recorder", "20s" }, 0 },
	{ { "--discover", "h", "--flight-recorder", "20s" }, 0 },
	{ { "--node", "a@b", "--node", "c@d", "--flight-recorder", "20s",
	    "--burst-rate", "100", "--burst-top", "200" }, 0 },
	{ { "--node", "a@b", "--burst-rate", "100" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s", "--burst-rate", "0" },
	  FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s",
	    "--max-captures-per-hour", "0" }, FPD_EXIT_USAGE },
	{ { "--node", "a@b", "--flight-recorder", "20s",
	    "--max-captures-per-hour", "3600" }, 0 },
};

static int
parse(const char *const *args, struct fpd_options *o)
{
	char *argv[ARGS_MAX + 2] = { (char *)"flame_profd" };
	int argc = 1;

	for (int i = 0; i < ARGS_MAX && args[i]; i++)
		argv[argc++] = (char *)args[i];
	optind = 0;	/* glibc: start getopt afresh */
	return fpd_options_parse(argc, argv, o);
}

START_TEST(exit_codes)
{
	const struct options_case *c = &cases[_i];
	struct fpd_options o;

	fp_assert_int_eq(parse(c->argv, &o), c->rc);
	fpd_options_release(&o);
}
END_TEST

START_TEST(values)
{
	static const char *const args[] = {
		"-n", "a@b", "--every", "2s", "--connect", "127.0.0.1:4370",
		"--file-mode", "0600", "-v", "-v", "--no-idle-reuse",
		"--perf", "4321", NULL,
	};
	struct fpd_options o;

	fp_assert_int_eq(parse(args, &o), 0);
	fp_assert_str_eq(o.node, "a@b");
	ck_assert_uint_eq(o.every_us, 2000000);
	fp_assert_str_eq(o.connect_host, "127.0.0.1");
	fp_assert_int_eq(o.connect_port, 4370);
	fp_assert_int_eq(o.file_mode, 0600);
	fp_assert_int_eq(o.verbosity, 2);
	fp_assert(!o.idle_reuse);
	fp_assert_int_eq(o.perf_pid, 4321);
	/* defaults of what was not given */
	fp_assert_int_eq(o.perf_freq, 99);
	fp_assert_int_eq(o.top, 100);
	fp_assert_int_eq(o.compress_level, 3);
	fpd_options_release(&o);
}
END_TEST

/* --trace-call's parts, and a run that only traces calls samples none */
START_TEST(trace_call_values)
{
	static const char *const args[] = {
		"-n", "a@b", "--trace-call", "my_mod:handle_call/3", NULL,
	};
	static const char *const any[] = {
		"-n", "a@b", "--trace-call", "m:f", "--trace-calls", "7", NULL,
	};
	struct fpd_options o;

	fp_assert_int_eq(parse(args, &o), 0);
	fp_assert_str_eq(o.trace_call_module, "my_mod");
	fp_assert_str_eq(o.trace_call_function, "handle_call");
	fp_assert_int_eq(o.trace_call_arity, 3);
	fp_assert_int_eq(o.trace_calls, 100);
	fp_assert_int_eq(o.top, 0);
	fpd_options_release(&o);
	fp_assert_int_eq(parse(any, &o), 0);
	fp_assert_int_eq(o.trace_call_arity, -1);
	fp_assert_int_eq(o.trace_calls, 7);
	fpd_options_release(&o);
}
END_TEST

/* Every kind of value the table stores lands in its field. */
START_TEST(table_values)
{
	static const char *const args[] = {
		"-n", "a@b", "--timeout", "250ms", "--scan-max", "200",
		"--min-reductions", "7", "--backtrace-depth", "9", "--lines",
		"--erlang-names", "--callers", "--breaker-run-queue", "3",
		"--perf-freq", "10", "-R", "90s", "--rotate-size", "64M",
		"--compress", "gzip", "--keep-files", "4", "--keep-bytes", "1G",
		"--keep-age", "7d", "-d", "30s", "--log-file", "/tmp/fp.log",
		"--request", "eval", NULL,
	};
	struct fpd_options o;

	fp_assert_int_eq(parse(args, &o), 0);
	fp_assert(o.timeout_us == 250000);
	fp_assert_int_eq(o.scan_max, 200);
	fp_assert_int_eq(o.min_reductions, 7);
	fp_assert_int_eq(o.backtrace_depth, 9);
	fp_assert(o.lines && o.erlang_names && o.callers && o.idle_reuse);
	fp_assert_int_eq(o.breaker_run_queue, 3);
	fp_assert_int_eq(o.perf_freq, 10);
	fp_assert(o.rotate_us == 90000000);
	fp_assert(o.rotate_bytes == 64ULL << 20);
	fp_assert_int_eq(o.compress, FPD_COMPRESS_GZIP);
	fp_assert_int_eq(o.compress_level, 6);	/* gzip's default */
	fp_assert_int_eq(o.keep_files, 4);
	fp_assert(o.keep_bytes == 1ULL << 30);
	fp_assert(o.keep_age_us == 7ULL * 86400 * 1000000);
	fp_assert(o.duration_us == 30000000);
	fp_assert_str_eq(o.log_file, "/tmp/fp.log");
	fp_assert_int_eq(o.request, FP_REQUEST_EVAL);
	fpd_options_release(&o);
}
END_TEST

/* --perf auto and --perf OSPID: the last one given counts. */
static const struct {
	const char *argv[ARGS_MAX];
	bool perf_auto;
	pid_t perf_pid;
} perf_cases[] = {
	{ { "-n", "a@b", "--perf", "4321", "--perf", "auto" }, true, 0 },
	{ { "-n", "a@b", "--perf", "auto", "--perf", "4321" }, false, 4321 },
};

START_TEST(perf_auto)
{
	struct fpd_options o;

	fp_assert_int_eq(parse(perf_cases[_i].argv, &o), 0);
	fp_assert_int_eq(o.perf_auto, perf_cases[_i].perf_auto);
	fp_assert_int_eq(o.perf_pid, perf_cases[_i].perf_pid);
	fpd_options_release(&o);
}
END_TEST

/* The events are opened before --user drops root, and auto knows the
 * pid only once connected: refused together (--user needs root). */
START_TEST(perf_auto_user)
{
	static const char *const args[] = {
		"-n", "a@b", "--perf", "auto", "--user", "nobody", NULL,
	};
	struct fpd_options o;

	if (geteuid() != 0)
		return;
	fp_assert_int_eq(parse(args, &o), FPD_EXIT_USAGE);
	fpd_options_release(&o);
}
END_TEST

/* Every exit code flame_profd(1) lists is in --help's list. */
START_TEST(help_lists_every_exit_code)
{
	static const int codes[] = {
		FPD_EXIT_OK, FPD_EXIT_USAGE, FPD_EXIT_NOSAMPLES,
		FPD_EXIT_NOINPUT, FPD_EXIT_UNAVAILABLE, FPD_EXIT_SOFTWARE,
		FPD_EXIT_CANTCREAT, FPD_EXIT_IOERR, FPD_EXIT_TEMPFAIL,
		FPD_EXIT_NOPERM, FPD_EXIT_CONFIG,
	};
	char *text = NULL, line[16];
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	fpd_options_usage(f);
	fclose(f);
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		snprintf(line, sizeof(line), "\n%4d  ", codes[i]);
		ck_assert_msg(strstr(text, line) != NULL, "exit %d not in --help",
			      codes[i]);
	}
	fp_assert(strstr(text, "--perf OSPID|auto") != NULL);
	free(text);
}
END_TEST

/* --pid or --name without --top sample only those. */
START_TEST(pins_alone)
{
	static const char *const args[] = { "-n", "a@b", "-p", "0.1.2", NULL };
	struct fpd_options o;

	fp_assert_int_eq(parse(args, &o), 0);
	fp_assert_int_eq(o.top, 0);
	fp_assert_int_eq(o.npids, 1);
	fpd_options_release(&o);
}
END_TEST

/* Each --node as given, its own cookie file apart; the first is o.node. */
START_TEST(several_nodes)
{
	static const char *const args[] = {
		"-n", "a@b", "--node", "c@d=/etc/c.cookie", "--discover", "h",
		"--discover-match", "app*", NULL,
	};
	struct fpd_options o;

	fp_assert_int_eq(parse(args, &o), 0);
	fp_assert(fpd_options_fleet(&o));
	fp_assert_int_eq(o.nnodes, 2);
	fp_assert_str_eq(o.node, "a@b");
	fp_assert_str_eq(o.nodes[1], "c@d");
	fp_assert(o.node_cookie_files[0] == NULL);
	fp_assert_str_eq(o.node_cookie_files[1], "/etc/c.cookie");
	fp_assert_str_eq(o.discover, "h");
	fp_assert_str_eq(o.discover_match, "app*");
	fp_assert(!o.cookie_file_set);
	fpd_options_release(&o);
}
END_TEST

/* --cluster NODE=PATH is a --node of its own cookie, the one followed. */
START_TEST(cluster_node)
{
	static const char *const args[] = {
		"-n", "a@b", "--cluster", "c@d=/etc/c.cookie", NULL,
	};
	struct fpd_options o;

	fp_assert_int_eq(parse(args, &o), 0);
	fp_assert(fpd_options_fleet(&o));
	fp_assert_int_eq(o.nnodes, 2);
	fp_assert_str_eq(o.nodes[1], "c@d");
	fp_assert_str_eq(o.cluster, "c@d");
	fp_assert_str_eq(o.node_cookie_files[1], "/etc/c.cookie");
	fpd_options_release(&o);

	fp_assert_int_eq(parse(args + 2, &o), 0);
	fp_assert(fpd_options_fleet(&o));
	fp_assert_int_eq(o.nnodes, 1);
	fp_assert_str_eq(o.cluster, "c@d");
	fpd_options_release(&o);
}
END_TEST

/* One --node NAME@HOST=PATH is a run of one node with --cookie-file PATH. */
START_TEST(one_node_own_cookie)
{
	static const char *const args[] = { "-n", "a@b=/k", NULL };
	struct fpd_options o;

	fp_assert_int_eq(parse(args, &o), 0);
	fp_assert(!fpd_options_fleet(&o));
	fp_assert_str_eq(o.node, "a@b");
	fp_assert(o.cookie_file_set);
	fp_assert_str_eq(o.cookie_file, "/k");
	fpd_options_release(&o);
}
END_TEST

/* Every option flame_profd(1) documents has its lines in --help. */
START_TEST(help_lists_every_option)
{
	static const char *const names[] = {
		"node", "discover", "discover-match", "cookie-file", "timeout", "connect", "top", "every",
		"pid", "name", "scan-max", "min-reductions", "rate",
		"backtrace-depth", "lines", "erlang-names", "key", "logger-key",
		"callers", "max-overhead", "request", "no-idle-reuse",
		"breaker-run-queue", "out", "rotate", "rotate-size", "compress",
		"compress-level", "keep-files", "keep-bytes", "keep-age",
		"duration", "file-mode", "dir-mode", "user", "log-file",
		"verbose", "quiet", "help", "version",
	};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	fpd_options_usage(f);
	fclose(f);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "--%s ", names[i]);
		if (!strstr(text, flag))
			snprintf(flag, sizeof(flag), "--%s\n", names[i]);
		ck_assert_msg(strstr(text, flag) != NULL, "%s not in --help", names[i]);
	}
	free(text);
}
END_TEST

static Suite *
suite(void)
{
	Suite *s = suite_create("options");
	TCase *tc = tcase_create("parse");

	tcase_add_loop_test(tc, exit_codes, 0, (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, values);
	tcase_add_test(tc, trace_call_values);
	tcase_add_test(tc, table_values);
	tcase_add_test(tc, pins_alone);
	tcase_add_test(tc, several_nodes);
	tcase_add_test(tc, cluster_node);
	tcase_add_test(tc, one_node_own_cookie);
	tcase_add_test(tc, help_lists_every_option);
	tcase_add_loop_test(tc, perf_auto, 0,
			    (int)(sizeof(perf_cases) / sizeof(perf_cases[0])));
	tcase_add_test(tc, perf_auto_user);
	tcase_add_test(tc, help_lists_every_exit_code);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(suite());
}
