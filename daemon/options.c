/*
 * flame_profd — the command line.
 *
 * One table (options[]) gives every option's long and short name, its
 * argument, its parser and its lines of --help, in the order --help lists
 * them; getopt_long's table, its short-option string and the --help text
 * are all made from it, so an option cannot be parsed without being
 * documented or documented without being parsed.
 */
#include "config.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "options.h"
#include "compress.h"
#include "options-parse.h"
#include "flight.h"
#include "fp/node.h"
#include "push.h"
#include "util-mem.h"

/* getopt_long's value for a long-only option: its index in options[]. */
#define LONG_ONLY 256

struct option_spec {
	const char *name;	/* NULL: a line of --help between options */
	int short_name;		/* 0: none */
	int has_arg;		/* no_argument or required_argument */
	/* 0, or an exit code with the reason on stderr; NULL: value says */
	int (*parse)(struct fpd_options *o, const char *arg);
	const char *help;	/* its lines of --help */
	struct fpd_value value;	/* what to store, where parse is NULL */
};

#define FIELD(f) .field = offsetof(struct fpd_options, f)
#define STRING(f) .value = { FPD_VALUE_STRING, FIELD(f) }
#define SET_TRUE(f) .value = { FPD_VALUE_TRUE, FIELD(f) }
#define SET_FALSE(f) .value = { FPD_VALUE_FALSE, FIELD(f) }
#define UINT(f, lo, hi, msg) \
	.value = { FPD_VALUE_UINT, FIELD(f), .min = (lo), .max = (hi), .why = (msg) }
#define DURATION(f, lo, hi, msg) \
	.value = { FPD_VALUE_DURATION, FIELD(f), .min = (lo), .max = (hi), .why = (msg) }
#define SIZE(f, lo, msg) \
	.value = { FPD_VALUE_SIZE, FIELD(f), .min = (lo), .max = UINT64_MAX, .why = (msg) }
#define CHOICE(f, words, msg) \
	.value = { FPD_VALUE_CHOICE, FIELD(f), .names = (words), .why = (msg) }

/* --compress's words, in the order of enum fpd_compress */
static const char *const compress_names[] = {
	[FPD_COMPRESS_NONE] = "none",
	[FPD_COMPRESS_GZIP] = "gzip",
	[FPD_COMPRESS_ZSTD] = "zstd",
	[FPD_COMPRESS_ZSTD + 1] = NULL,
};

static int
parse_help(struct fpd_options *o, const char *arg)
{
	(void)o;
	(void)arg;
	fpd_options_usage(stdout);
	exit(FPD_EXIT_OK);
}

static int
parse_version(struct fpd_options *o, const char *arg)
{
	(void)o;
	(void)arg;
	printf("flame_profd %s\n", FP_VERSION);
	exit(FPD_EXIT_OK);
}

static const struct option_spec options[] = {
	{ .help = "\n" },
	{ .help = "Target:\n" },
	{ "node", 'n', required_argument, .parse = fpd_option_node,
	  .help = "  -n, --node NAME@HOST[=PATH]\n"
	  "                            node to profile (short or long name); repeatable:\n"
	  "                            each node its own session, under DIR/<node>/;\n"
	  "                            =PATH: that node's own cookie file\n" },
	{ "discover", 0, required_argument, .parse = fpd_option_discover,
	  .help = "      --discover HOST       also profile every node epmd on HOST lists, as\n"
	  "                            NAME@HOST, asking again every 2 s: nodes that start\n"
	  "                            later are attached, nodes that come back reattached\n" },
	{ "cluster", 0, required_argument, .parse = fpd_option_cluster,
	  .help = "      --cluster NODE[=PATH] profile NODE (as --node) and every node in its\n"
	  "                            nodes(), asking it again every 2 s: nodes that\n"
	  "                            join later are attached, nodes that come back\n"
	  "                            reattached; all with NODE's cookie\n" },
	{ "discover-match", 0, required_argument, .parse = fpd_option_discover_match,
	  .help = "      --discover-match GLOB only the discovered (or --cluster) nodes whose\n"
	  "                            NAME@HOST matches GLOB (fnmatch(3), e.g. 'app*')\n" },
	{ "cookie-file", 'c', required_argument, .parse = fpd_option_cookie_file,
	  .help = "  -c, --cookie-file PATH    file holding the node's cookie (every node's but\n"
	  "                            those given their own); the default is\n"
	  "                            $FLAME_PROFD_COOKIE if set, else ~/.erlang.cookie.\n"
	  "                            The file must be readable by its owner only.\n" },
	{ "timeout", 0, required_argument,
	  .help = "      --timeout DUR         give up on a request after DUR (default 5s)\n",
	  DURATION(timeout_us, TIMEOUT_MIN_US, TIMEOUT_MAX_US,
		   "expected a duration from 10ms to 10m") },
	{ "connect", 0, required_argument, .parse = fpd_option_connect,
	  .help = "      --connect HOST:PORT   connect there instead of asking epmd for the node's\n"
	  "                            port (e.g. a local TLS tunnel to the node)\n" },
	{ .help = "\n" },
	{ .help = "Selection:\n" },
	{ "top", 't', required_argument, .parse = fpd_option_top,
	  .help = "  -t, --top N               sample the N processes with the most reductions\n"
	  "                            since the previous selection (default 100; 0: none).\n"
	  "                            With --pid/--name and no --top, only those.\n" },
	{ "every", 'e', required_argument,
	  .help = "  -e, --every DUR           select again every DUR (default 5s)\n",
	  DURATION(every_us, EVERY_MIN_US, UINT64_MAX,
		   "expected a duration of at least 100ms, e.g. 5s") },
	{ "pid", 'p', required_argument, .parse = fpd_option_pid,
	  .help = "  -p, --pid PID             always sample PID, '<0.123.0>' or 0.123.0, or as\n"
	  "                            rabbitmqctl and observer print a pid of the node,\n"
	  "                            '<app@host.Creation.123.0>' (repeatable)\n" },
	{ "name", 'N', required_argument, .parse = fpd_option_name,
	  .help = "  -N, --name NAME           always sample the process registered as NAME:\n"
	  "                            an atom (foo, :foo) or an Elixir alias\n"
	  "                            (MyApp.Counter for 'Elixir.MyApp.Counter');\n"
	  "                            repeatable\n" },
	{ "scan-max", 0, required_argument,
	  .help = "      --scan-max N          read the reductions of at most N processes per\n"
	  "                            selection (default 50000) after the first, which\n"
	  "                            sweeps the whole node and keeps its busiest;\n"
	  "                            bigger nodes are covered by a moving window, the\n"
	  "                            current selection always re-read\n",
	  UINT(scan_max, SCAN_MAX_MIN, SCAN_MAX_MAX,
	       "expected a whole number from 100 to 10000000") },
	{ "sweep-every", 0, required_argument,
	  .help = "      --sweep-every DUR     on a node of more than --scan-max processes,\n"
	  "                            sweep the whole node again every DUR (default\n"
	  "                            30s), or less often where a sweep would take\n"
	  "                            more than a quarter of --max-overhead: a process\n"
	  "                            that turns busy is found within about DUR +\n"
	  "                            --every + 2s wherever it is in the table\n",
	  DURATION(sweep_every_us, SWEEP_EVERY_MIN_US, UINT64_MAX,
		   "expected a duration of at least 1s, e.g. 30s") },
	{ "min-reductions", 0, required_argument,
	  .help = "      --min-reductions N    --top picks no process that did fewer than N\n"
	  "                            reductions a second (default 500; 0: any that did\n"
	  "                            some)\n",
	  UINT(min_reductions, 0, MIN_REDUCTIONS_MAX,
	       "expected reductions a second, a whole number from 0 to 1000000000") },
	{ .help = "\n" },
	{ .help = "Sampling:\n" },
	{ "rate", 'r', required_argument, .parse = fpd_option_rate,
	  .help = "  -r, --rate HZ             samples per second per process (default 10), spread\n"
	  "                            evenly over the second\n" },
	{ "backtrace-depth", 0, required_argument,
	  .help = "      --backtrace-depth N   frames per stack (default 64; the node's\n"
	  "                            backtrace_depth flag is raised while any\n"
	  "                            flame_profd runs, and put back by the node itself\n"
	  "                            when the last has gone, also after SIGKILL)\n",
	  UINT(backtrace_depth, 1, BACKTRACE_DEPTH_MAX,
	       "expected a whole number from 1 to 10000") },
	{ "lines", 0, no_argument,
	  .help = "      --lines               put source line numbers in frame names (NAME:LINE)\n",
	  SET_TRUE(lines) },
	{ "erlang-names", 0, no_argument,
	  .help = "      --erlang-names        write frames of Elixir modules as Erlang does\n"
	  "                            ('Elixir.Foo':bar/1, '-bar/1-fun-0-'/1) instead of\n"
	  "                            as Elixir does (Foo.bar/1, anonymous fn/1 in\n"
	  "                            Foo.bar/1), keeping the index of anonymous fns\n",
	  SET_TRUE(erlang_names) },
	{ "key", 0, required_argument, .parse = fpd_option_key,
	  .help = "      --key NAME            record the process dictionary's value under the\n"
	  "                            atom NAME with each sample (key.NAME: TEXT),\n"
	  "                            read alone ({dictionary, NAME}, OTP 26.2 and\n"
	  "                            later), never by copying the dictionary;\n"
	  "                            repeatable\n" },
	{ "logger-key", 0, required_argument, .parse = fpd_option_logger_key,
	  .help = "      --logger-key NAME     record key NAME of the process's Logger metadata\n"
	  "                            (Logger.metadata/1, logger:set_process_metadata/1)\n"
	  "                            the same way, e.g. request_id; repeatable. The\n"
	  "                            metadata map is copied, the rest of the\n"
	  "                            dictionary is not\n" },
	{ "callers", 0, no_argument,
	  .help = "      --callers             record '$callers' (the processes that started a\n"
	  "                            Task, newest first) with each sample\n"
	  "                            The process label (proc_lib:set_label/1,\n"
	  "                            Process.set_label/1) is recorded wherever the node\n"
	  "                            has one. On a node that cannot read one key\n"
	  "                            (before OTP 26.2) keys and callers are not\n"
	  "                            recorded: a warning at each connect says so\n",
	  SET_TRUE(callers) },
	{ "max-overhead", 0, required_argument, .parse = fpd_option_max_overhead,
	  .help = "      --max-overhead PCT    cost budget: node-side work of flame_profd's\n"
	  "                            requests as a share of the node's schedulers\n"
	  "                            (default 5), and its own CPU when the node is\n"
	  "                            on this host, checked once a second;\n"
	  "                            over it the rate, then the top-N, come down;\n"
	  "                            0 turns the budget off\n" },
	{ "request", 0, required_argument, .parse = fpd_option_request,
	  .help = "      --request rex|eval|helper\n"
	  "                            how samples are asked for: rex (default) is an\n"
	  "                            rpc per batch to stock functions, nothing left\n"
	  "                            running on the node; eval starts 3 sampling\n"
	  "                            processes from a fun the node's erl_eval\n"
	  "                            interprets (no module loaded), linked to the\n"
	  "                            connection: less node time per sample; helper\n"
	  "                            LOADS A MODULE onto the node for the connection:\n"
	  "                            one process samples on the node's timer and sends\n"
	  "                            4 batches a second (a half to a third of rex's\n"
	  "                            node time on a node with time to spare, the same\n"
	  "                            on a saturated one); it unloads itself when\n"
	  "                            flame_profd stops or the connection goes\n" },
	{ "no-idle-reuse", 0, no_argument,
	  .help = "      --no-idle-reuse       ask every process for its stack at every sample;\n"
	  "                            by default a process that has not run since its\n"
	  "                            last sample is only probed (no signal, never\n"
	  "                            scheduled to answer) and that sample's stack and\n"
	  "                            memory figures, which cannot have changed, reused\n",
	  SET_FALSE(idle_reuse) },
	{ "breaker-run-queue", 0, required_argument,
	  .help = "      --breaker-run-queue N pause sampling while the node's run queues hold more\n"
	  "                            than N processes; by default, while they hold more\n"
	  "                            than 50 per scheduler and a health probe takes\n"
	  "                            100 ms or more (long queues alone are a busy node,\n"
	  "                            such as one full of short-lived workers); a\n"
	  "                            request timeout pauses it too; probes to resume\n",
	  UINT(breaker_run_queue, 1, RUN_QUEUE_MAX,
	       "expected a whole number of at least 1") },
	{ "perf", 0, required_argument, .parse = fpd_option_perf,
	  .help = "      --perf OSPID|auto     also sample the CPU of the local node's OS process\n"
	  "                            OSPID with perf_event_open(2), as samples of status\n"
	  "                            cpu (a node started with +JPperf true: frames from\n"
	  "                            its /tmp/perf-OSPID.map, read only if it is a\n"
	  "                            regular file of the node's user or root that\n"
	  "                            others cannot write); shows handler code,\n"
	  "                            short-lived processes, BIFs and GC; needs root or\n"
	  "                            CAP_PERFMON (or perf_event_paranoid <= 1). auto:\n"
	  "                            the node tells its pid once connected (os:getpid/0),\n"
	  "                            used only if that process here is the node (holds\n"
	  "                            its end of the connection, or has its name on its\n"
	  "                            command line) and has a perf map; not with --user\n" },
	{ "perf-freq", 0, required_argument,
	  .help = "      --perf-freq HZ        samples a second per thread on CPU (default 99)\n",
	  UINT(perf_freq, 1, PERF_FREQ_MAX, "expected 1 to 10000 samples a second") },
	{ .help = "\n" },
	{ .help = "Output:\n" },
	{ "out", 'o', required_argument, .parse = fpd_option_out,
	  .help = "  -o, --out DIR             write under DIR/<node>/ (default .)\n" },
	{ "rotate", 'R', required_argument,
	  .help = "  -R, --rotate DUR          start a new file every DUR (default 2m)\n",
	  DURATION(rotate_us, ROTATE_MIN_US, UINT64_MAX,
		   "expected a duration of at least 1s, e.g. 2m") },
	{ "rotate-size", 0, required_argument,
	  .help = "      --rotate-size SIZE    ... or when the file reaches SIZE on disk (64M, 1G)\n",
	  SIZE(rotate_bytes, ROTATE_SIZE_MIN, "expected a size of at least 4K, e.g. 64M") },
	{ "compress", 0, required_argument,
	  .help = "      --compress KIND       zstd (default), gzip or none, while writing\n",
	  CHOICE(compress, compress_names, "expected zstd, gzip or none") },
	{ "compress-level", 0, required_argument, .parse = fpd_option_compress_level,
	  .help = "      --compress-level N    zstd 1-19 (default 3), gzip 1-9 (default 6)\n" },
	{ "keep-files", 0, required_argument,
	  .help = "      --keep-files N        after each rotation keep the last N files,\n",
	  UINT(keep_files, 1, KEEP_FILES_MAX, "expected a whole number of at least 1") },
	{ "keep-bytes", 0, required_argument,
	  .help = "      --keep-bytes SIZE     ... at most SIZE of files,\n",
	  SIZE(keep_bytes, 1, "expected a size greater than 0, e.g. 1G") },
	{ "keep-age", 0, required_argument,
	  .help = "      --keep-age DUR        ... no file older than DUR (any combination;\n"
	  "                            only files the index records flame_profd writing\n"
	  "                            are deleted, never by a name's date)\n",
	  DURATION(keep_age_us, 1, UINT64_MAX,
		   "expected a duration greater than 0, e.g. 7d") },
	{ .help = "\n" },
	{ .help = "Flight recorder (docs/OPERATIONS.md, Flight recorder):\n" },
	{ "flight-recorder", 0, required_argument,
	  .help = "      --flight-recorder DUR keep the last DUR of samples in memory,\n"
	  "                            compressed, instead of writing files; a trigger\n"
	  "                            or SIGUSR2 writes them, and --after DUR more, as a\n"
	  "                            capture: DIR/<node>/capture.<time>.<kind>/\n",
	  DURATION(flight_us, FLIGHT_MIN_US, UINT64_MAX,
		   "expected a duration of at least 1s, e.g. 20s") },
	{ "flight-recorder-max", 0, required_argument,
	  .help = "      --flight-recorder-max SIZE  the ring's memory, a hard cap: the\n"
	  "                            oldest samples go first (default 64M)\n",
	  SIZE(flight_max, FPD_FLIGHT_MAX_MIN, "expected a size of at least 1M, e.g. 64M") },
	{ "continuous", 0, no_argument,
	  .help = "      --continuous          write the continuous files as well\n",
	  SET_TRUE(continuous) },
	{ "after", 0, required_argument,
	  .help = "      --after DUR           a capture goes on DUR after its trigger (default 5s)\n",
	  DURATION(after_us, 0, UINT64_MAX, "expected a duration, e.g. 5s") },
	{ "trigger", 0, required_argument, .parse = fpd_option_trigger,
	  .help = "      --trigger EXPR        capture when EXPR holds (repeatable):\n"
	  "                            mailbox>N  a sampled process's message queue\n"
	  "                                       is longer than N\n"
	  "                            memory>SIZE  a sampled process's memory is\n"
	  "                                       over SIZE\n"
	  "                            run_queue>N[/DUR]  the node's run queues hold\n"
	  "                                       more than N (for DUR), as the\n"
	  "                                       health probe reads them each --every\n"
	  "                            appears:NAME  a process registered as NAME,\n"
	  "                                       started by NAME (M:F/A) or labelled\n"
	  "                                       NAME is first sampled\n"
	  "                            (these four send no request of their own)\n"
	  "                            long_gc>MS, long_schedule>MS, large_heap>SIZE,\n"
	  "                            long_message_queue>N  the node's system monitor\n"
	  "                                       reports a collection or a run longer\n"
	  "                                       than MS, a heap over SIZE, a queue\n"
	  "                                       longer than N: through a trace session\n"
	  "                                       of our own where the node has them,\n"
	  "                                       else erlang:system_monitor/2 only if\n"
	  "                                       nobody holds it (never replaced)\n"
	  "                            node.memory>SIZE[/DUR]  erlang:memory(total) over\n"
	  "                                       SIZE (for DUR), read each --every\n"
	  "                            node.memory+>SIZE/DUR  it grew by more than SIZE\n"
	  "                                       within DUR\n"
	  "                            sched_util>PCT[/DUR]  the schedulers were busy\n"
	  "                                       more than PCT% of the last --every\n"
	  "                                       (for DUR); holds scheduler_wall_time\n"
	  "                            (these run in one watcher process on the node,\n"
	  "                            linked to the daemon: docs/PERFORMANCE.md)\n" },
	{ "trigger-holdoff", 0, required_argument,
	  .help = "      --trigger-holdoff DUR a trigger does not fire again for DUR after its\n"
	  "                            capture (default 1m); none fires while one is\n"
	  "                            written\n",
	  DURATION(holdoff_us, 0, UINT64_MAX, "expected a duration, e.g. 1m") },
	{ "keep-captures", 0, required_argument,
	  .help = "      --keep-captures N     keep the last N captures (default 20)\n",
	  UINT(keep_captures, 1, KEEP_FILES_MAX, "expected a whole number of at least 1") },
	{ "max-captures-per-hour", 0, required_argument,
	  .help = "      --max-captures-per-hour N  at most N captures begin in any hour\n"
	  "                            (default 10); a trigger past it is logged and\n"
	  "                            counted (ctl status, the next capture's\n"
	  "                            capped_before) and writes nothing\n",
	  UINT(max_captures_per_hour, 1, FPD_FLIGHT_PER_HOUR_MAX,
	       "expected a whole number from 1 to 3600") },
	{ "burst-rate", 0, required_argument, .parse = fpd_option_burst_rate,
	  .help = "      --burst-rate HZ       during a capture's --after window sample at\n"
	  "                            least HZ per process, as far as --max-overhead\n"
	  "                            allows (its cuts win); then back to --rate\n" },
	{ "burst-top", 0, required_argument,
	  .help = "      --burst-top N         ... and the top N processes (selected again\n"
	  "                            at once); then back to --top\n",
	  UINT(burst_top, 1, TOP_MAX, "expected a whole number from 1 to 100000") },
	{ .help = "\n" },
	{ .help = "Push (each finished file, as pprof to a Pyroscope-compatible server, or\n"
	  "as OTLP profiles):\n" },
	{ "push", 0, required_argument, .parse = fpd_option_push,
	  .help = "      --push URL            POST each finished file of each node to URL's\n"
	  "                            /ingest, or with --push-format otlp its\n"
	  "                            /v1development/profiles (http:// or https://),\n"
	  "                            through a spool in DIR/<node>/push-spool/\n" },
	{ "push-header-file", 0, required_argument,
	  .help = "      --push-header-file PATH  HTTP headers sent with each request, one\n"
	  "                            \"Name: value\" a line (an Authorization or\n"
	  "                            X-Scope-OrgID line); read once, never logged\n",
	  STRING(push_header_file) },
	{ "push-format", 0, required_argument, .parse = fpd_option_push_format,
	  .help = "      --push-format FORMAT  pyroscope (default): pprof to URL's /ingest;\n"
	  "                            otlp: OTLP profiles (an alpha signal) to URL's\n"
	  "                            /v1development/profiles\n" },
	{ "push-service", 0, required_argument, .parse = fpd_option_push_service,
	  .help = "      --push-service NAME   the service_name (OTLP: service.name) profiles\n"
	  "                            are sent under (default: each node's name\n"
	  "                            before the @)\n" },
	{ "push-spool-max", 0, required_argument,
	  .help = "      --push-spool-max SIZE each node's spool holds at most SIZE; the\n"
	  "                            oldest profiles are dropped, and counted, beyond\n"
	  "                            it (default 64M)\n",
	  SIZE(push_spool_max, FPD_PUSH_SPOOL_MIN, "expected a size of at least 64K, e.g. 64M") },
	{ "push-timeout", 0, required_argument,
	  .help = "      --push-timeout DUR    one request's time limit (default 10s)\n",
	  DURATION(push_timeout_us, 100000, 600000000,
		   "expected a duration from 100ms to 10m, e.g. 10s") },
	{ .help = "\n" },
	{ .help = "Tracing (docs/OPERATIONS.md, Tracing):\n" },
	{ "trace", 0, required_argument, .parse = fpd_option_trace,
	  .help = "      --trace PID|NAME      trace the process: every call and return and its\n"
	  "                            scheduling, as exact stacks of status traced\n"
	  "                            (repeatable; opt-in: it costs the node far more\n"
	  "                            than sampling)\n" },
	{ "trace-follow", 0, no_argument,
	  .help = "      --trace-follow        follow the request into the processes the traced\n"
	  "                            ones spawn (Tasks, workers): their stacks, rooted\n"
	  "                            at FOLLOWED:<pid>, are the request's\n",
	  SET_TRUE(trace_follow) },
	{ "trace-server", 0, required_argument, .parse = fpd_option_trace_server,
	  .help = "      --trace-server PID|NAME  follow the request into this gen_server:\n"
	  "                            its work on calls from the --trace processes,\n"
	  "                            and no other caller's, rooted at FOLLOWED:<pid>\n"
	  "                            (repeatable)\n" },
	{ "trace-call", 0, required_argument, .parse = fpd_option_trace_call,
	  .help = "      --trace-call MOD:FUN[/ARITY]  trace the function's next calls, in\n"
	  "                            whatever process runs them: each call's calls\n"
	  "                            and returns, rooted at CALL:'<n>'/0 (one\n"
	  "                            function; not with --trace)\n" },
	{ "trace-calls", 0, required_argument,
	  .help = "      --trace-calls N       the calls --trace-call traces (default 100; the\n"
	  "                            trace ends when they have returned)\n",
	  UINT(trace_calls, 1, 100000, "expected a whole number from 1 to 100000") },
	{ "trace-for", 0, required_argument,
	  .help = "      --trace-for DUR       end the trace after DUR (default 10s)\n",
	  DURATION(trace_for_us, 100000, 3600000000ull,
		   "expected a duration from 100ms to 1h, e.g. 10s") },
	{ "trace-max-events", 0, required_argument,
	  .help = "      --trace-max-events N  stop the trace after N events (default 1000000)\n",
	  UINT(trace_max_events, 1, 100000000, "expected a whole number from 1 to 100000000") },
	{ "trace-max-rate", 0, required_argument,
	  .help = "      --trace-max-rate N    stop the trace when a second holds more than N\n"
	  "                            events (default 20000)\n",
	  UINT(trace_max_rate, 1, 10000000, "expected a whole number from 1 to 10000000") },
	{ .help = "\n" },
	{ .help = "Run:\n" },
	{ "duration", 'd', required_argument,
	  .help = "  -d, --duration DUR        stop after DUR, leaving complete files (default: run\n"
	  "                            until SIGINT/SIGTERM)\n",
	  DURATION(duration_us, 1, UINT64_MAX,
		   "expected a duration greater than 0, e.g. 30s") },
	{ "file-mode", 0, required_argument, .parse = fpd_option_file_mode,
	  .help = "      --file-mode MODE      mode of output files (default 0640)\n" },
	{ "dir-mode", 0, required_argument, .parse = fpd_option_dir_mode,
	  .help = "      --dir-mode MODE       mode of output directories (default 0750; no\n"
	  "                            group or other write)\n" },
	{ "user", 0, required_argument, .parse = fpd_option_user,
	  .help = "      --user NAME           when started as root: drop to NAME once the cookie\n"
	  "                            is read and the output directory is ready (a\n"
	  "                            node directory it did not make must be NAME's)\n" },
	{ "log-file", 0, required_argument,
	  .help = "      --log-file PATH       log there instead of stderr (SIGHUP reopens it); a\n"
	  "                            regular file of root or the run's user, in a\n"
	  "                            directory others cannot write, never a link\n",
	  STRING(log_file) },
	{ "verbose", 'v', no_argument, .parse = fpd_option_verbose,
	  .help = "  -v, --verbose             more log output\n" },
	{ "quiet", 'q', no_argument, .parse = fpd_option_quiet,
	  .help = "  -q, --quiet               warnings and errors only\n" },
	{ "help", 'h', no_argument, .parse = parse_help,
	  .help = "  -h, --help                this text\n" },
	{ "version", 'V', no_argument, .parse = parse_version,
	  .help = "  -V, --version             print the version\n" },
};

#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static const char usage_head[] =
"Usage: flame_profd --node NAME@HOST [--node NAME@HOST]... [OPTION]...\n"
"       flame_profd --discover HOST [--discover-match GLOB] [OPTION]...\n"
"       flame_profd --cluster NODE [--discover-match GLOB] [OPTION]...\n"
"       flame_profd ctl [--dir DIR] [--node NAME@HOST] status\n"
"       flame_profd ctl [--dir DIR] [--node NAME@HOST] trigger --reason TEXT\n"
"Sample the Erlang stacks and process metrics of a running node from outside\n"
"(a hidden C node; nothing is loaded onto the node) and write Linux perf-script\n"
"files for Flamescope.\n";

static const char usage_tail[] =
"\n"
"DUR is a number with a unit: 250us, 500ms, 5s, 2m, 1h, 7d (a bare number is\n"
"seconds).\n"
"SIZE is a number with K, M, G or T (powers of 1024; a bare number is bytes).\n"
"\n"
"Signals: SIGINT/SIGTERM finish the sample in flight and the current file, put\n"
"the node's backtrace_depth back and exit 0 (a second SIGINT exits at once);\n"
"SIGUSR1 starts a new file; SIGUSR2 writes a capture of the flight recorder;\n"
"SIGHUP reopens the log file. With several nodes, each signal acts on every\n"
"node.\n"
"\n"
"Control: for each node the daemon listens on DIR/<node>/ctl.sock (0600,\n"
"the run's user's; root and that user are served). flame_profd ctl\n"
"trigger --reason TEXT writes a capture named ctl with TEXT as its reason\n"
"(an alert hook's command); flame_profd ctl status prints the node,\n"
"samples, achieved rate, the ring's bytes, captures, capped triggers and\n"
"the last trigger.\n"
"flame_profd ctl --help lists its exit codes.\n"
"\n"
"Several nodes (more than one --node, --discover or --cluster): each node is\n"
"profiled under DIR/<node>/ with its own manifest, cost budget and\n"
"reconnection, and its log lines start with [NAME@HOST]; --pid, --perf and\n"
"--connect, which name one node's process or address, are refused.\n"
"--flight-recorder keeps a ring per node, each within --flight-recorder-max,\n"
"and a capture per node for SIGUSR2 or a ctl trigger without --node. A node\n"
"that cannot be reached is retried while the others run; the exit status is\n"
"then 0 when every node ends as one node alone would,\n"
"else that of the first node (in command-line order, then as discovered)\n"
"that did not; a node found by --discover or --cluster never reached is\n"
"logged and does not count.\n"
"\n"
"Exit status:\n"
"   0  finished (--duration over, or stopped by SIGINT/SIGTERM)\n"
"  64  bad command line: unknown flag, bad value, bad node name, a --perf\n"
"      OSPID that is no process, --perf auto with --user, --pid, --perf,\n"
"      --connect or --trace with several nodes, or --push-header-file,\n"
"      --push-service or --push-format without --push; a --trace target that\n"
"      is no process of the node, or a trace refused to leave another\n"
"      tracer's flags and patterns as they are, or --trace-follow or\n"
"      --trace-server without --trace; a --trace-call function not loaded or\n"
"      not exported on the node, or one a process loops in, or --trace-call\n"
"      with --trace\n"
"  65  a --duration run took no sample at all\n"
"  66  cookie file missing, unreadable, empty, readable by others or not a\n"
"      regular file (a FIFO, a device); the same for --push-header-file, or\n"
"      a line of it that is not Name: value\n"
"  69  node unreachable: host unknown, no epmd, node not registered; or a\n"
"      --duration run lost the node and had not regained it at the end\n"
"  70  internal error, the node answered with nonsense, or it would not\n"
"      load the --request helper module\n"
"  73  output directory, log file or control socket cannot be created or\n"
"      written, or is not safe: a link another user could have made, another\n"
"      user's, or writable by other users (docs/OPERATIONS.md, Security)\n"
"  74  I/O error while writing output\n"
"  75  another flame_profd is writing to the same output directory\n"
"  77  the node refused the connection (wrong cookie, or short vs long names),\n"
"      or the kernel refused --perf its events\n"
"  78  --perf auto cannot use the node's process: the node runs on another\n"
"      host, the pid it tells is no process here or another process (another\n"
"      pid namespace), or the node has no perf map of its own (not started\n"
"      with +JPperf true, or the map is a link, not a regular file, another\n"
"      user's, writable by others or has more than one link)\n";

void
fpd_options_usage(FILE *f)
{
	fputs(usage_head, f);
	for (size_t i = 0; i < NOPTIONS; i++)
		fputs(options[i].help, f);
	fputs(usage_tail, f);
}

static void
set_defaults(struct fpd_options *o)
{
	*o = (struct fpd_options){
		.top = 100,
		.scan_max = 50000,
		.min_reductions = 500,
		.perf_freq = 99,
		.every_us = 5000000,
		.sweep_every_us = 30000000,
		.rate = 10,
		.out_dir = ".",
		.rotate_us = 120000000,
		.compress = FPD_COMPRESS_ZSTD,
		.compress_level = -1,
		.file_mode = 0640,
		.dir_mode = 0750,
		.max_overhead = 5.0,
		.idle_reuse = true,
		.backtrace_depth = 64,
		.timeout_us = 5000000,
		.flight_max = FLIGHT_MAX_DEFAULT,
		.after_us = AFTER_DEFAULT_US,
		.holdoff_us = HOLDOFF_DEFAULT_US,
		.keep_captures = KEEP_CAPTURES_DEFAULT,
		.push_spool_max = PUSH_SPOOL_MAX_DEFAULT,
		.push_timeout_us = PUSH_TIMEOUT_DEFAULT_US,
		.max_captures_per_hour = FPD_FLIGHT_PER_HOUR_DEFAULT,
		.trace_for_us = 10000000,
		.trace_max_events = 1000000,
		.trace_max_rate = 20000,
		.trace_calls = 100,
	};
}

/* getopt_long's view of the table: long options whose value is the short
 * name or LONG_ONLY + the index, and the short-option string. */
static void
getopt_tables(struct option *longopts, char *shortopts)
{
	size_t n = 0;
	char *s = shortopts;

	*s++ = ':';	/* a missing value is ':', not '?' */
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct option_spec *spec = &options[i];

		if (!spec->name)
			continue;
		longopts[n++] = (struct option){
			.name = spec->name,
			.has_arg = spec->has_arg,
			.val = spec->short_name ? spec->short_name :
						  LONG_ONLY + (int)i,
		};
		if (spec->short_name) {
			*s++ = (char)spec->short_name;
			if (spec->has_arg == required_argument)
				*s++ = ':';
		}
	}
	longopts[n] = (struct option){ 0 };
	*s = '\0';
}

static const struct option_spec *
spec_of(int c)
{
	if (c >= LONG_ONLY && (size_t)(c - LONG_ONLY) < NOPTIONS)
		return &options[c - LONG_ONLY];
	for (size_t i = 0; i < NOPTIONS; i++) {
		if (options[i].name && options[i].short_name == c)
			return &options[i];
	}
	return NULL;
}

/* What the options say together, once all are read. */
static int
check_together(struct fpd_options *o)
{
	int rc;

	if (!o->nnodes && !o->discover) {
		fprintf(stderr, "flame_profd: error: --node NAME@HOST (or --discover HOST, or --cluster NODE) is required (see --help)\n");
		return FPD_EXIT_USAGE;
	}
	rc = fpd_options_check_fleet(o);
	if (rc)
		return rc;
	if (o->compress_level < 0)
		o->compress_level = o->compress == FPD_COMPRESS_GZIP ?
				    GZIP_LEVEL_DEFAULT : ZSTD_LEVEL_DEFAULT;
	if (o->compress == FPD_COMPRESS_GZIP && o->compress_level > GZIP_LEVEL_MAX)
		return fpd_option_bad_value("--compress-level", "gzip",
				 "gzip levels go from 1 to 9");
	o->key_names = xzalloc((o->nkeys + o->nlogger_keys + 1) *
			       sizeof(*o->key_names));
	for (size_t i = 0; i < o->nkeys; i++)
		o->key_names[i] = o->keys[i];
	for (size_t i = 0; i < o->nlogger_keys; i++)
		o->key_names[o->nkeys + i] = o->logger_keys[i];
	if ((o->npids || o->nnames) && !o->top_set)
		o->top = 0;
	/* the events are opened as root, before --user drops it, and the
	 * pid auto finds is known only once connected, after the drop */
	if (o->perf_auto && o->user) {
		fprintf(stderr, "flame_profd: error: --perf auto cannot be used with --user: give the node's OS pid (--perf OSPID), or run as that user with CAP_PERFMON\n");
		return FPD_EXIT_USAGE;
	}
	if (!o->flight_us && (o->ntriggers || o->continuous || o->burst_rate ||
			      o->burst_top)) {
		fprintf(stderr, "flame_profd: error: %s needs --flight-recorder DUR (see --help)\n",
			o->ntriggers ? "--trigger" : o->continuous ? "--continuous" :
			o->burst_rate ? "--burst-rate" : "--burst-top");
		return FPD_EXIT_USAGE;
	}
	if (!o->push_url && (o->push_header_file || o->push_service ||
			     o->push_format_given)) {
		fprintf(stderr, "flame_profd: error: %s needs --push URL (see --help)\n",
			o->push_header_file ? "--push-header-file" :
			o->push_service ? "--push-service" : "--push-format");
		return FPD_EXIT_USAGE;
	}
	if (o->ntraces && o->flight_us) {
		fprintf(stderr, "flame_profd: error: --trace writes files: it cannot be used with --flight-recorder\n");
		return FPD_EXIT_USAGE;
	}
	if (o->trace_call && (o->ntraces || o->flight_us)) {
		fprintf(stderr, "flame_profd: error: --trace-call cannot be used with %s\n",
			o->ntraces ? "--trace (one trace at a time)" :
			"--flight-recorder (it writes files)");
		return FPD_EXIT_USAGE;
	}
	if ((o->trace_follow || o->ntrace_servers) && !o->ntraces) {
		fprintf(stderr, "flame_profd: error: %s needs --trace PID|NAME (see --help)\n",
			o->trace_follow ? "--trace-follow" : "--trace-server");
		return FPD_EXIT_USAGE;
	}
	if ((o->ntraces || o->trace_call) && !o->top_set && !o->npids &&
	    !o->nnames)
		o->top = 0;
	if (o->top == 0 && !o->npids && !o->nnames && !o->ntraces &&
	    !o->trace_call) {
		fprintf(stderr, "flame_profd: error: nothing to sample: --top 0 and no --pid or --name\n");
		return FPD_EXIT_USAGE;
	}
	return 0;
}

int
fpd_options_parse(int argc, char **argv, struct fpd_options *o)
{
	struct option longopts[NOPTIONS + 1];
	char shortopts[2 * NOPTIONS + 2];
	int c, rc;

	set_defaults(o);
	getopt_tables(longopts, shortopts);
	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct option_spec *spec = spec_of(c);

		if (c == ':') {
			fprintf(stderr, "flame_profd: error: %s needs a value (see --help)\n",
				argv[optind - 1]);
			return FPD_EXIT_USAGE;
		}
		if (!spec) {
			fprintf(stderr, "flame_profd: error: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return FPD_EXIT_USAGE;
		}
		rc = spec->parse ? spec->parse(o, optarg) :
				   fpd_option_value(o, spec->name, &spec->value, optarg);
		if (rc)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "flame_profd: error: unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return FPD_EXIT_USAGE;
	}
	return check_together(o);
}

void
fpd_options_release(struct fpd_options *o)
{
	for (size_t i = 0; i < o->nnodes; i++) {
		free(o->nodes[i]);
		free(o->node_cookie_files[i]);
	}
	free(o->nodes);
	free(o->node_cookie_files);
	free(o->pids);
	free(o->names);
	free(o->traces);
	free(o->trace_servers);
	free(o->keys);
	free(o->logger_keys);
	free(o->key_names);
	free(o->connect_host);
}
