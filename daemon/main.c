/*
 * flame_profd — command line, cookie, start-up checks.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flame_profd.h"
#include "fp/node.h"

#define MAX_COOKIE 255

static void
usage(FILE *f)
{
	fprintf(f,
"Usage: flame_profd --node NAME@HOST [OPTION]...\n"
"Sample the Erlang stacks and process metrics of a running node from outside\n"
"(a hidden C node; nothing is loaded onto the node) and write Linux perf-script\n"
"files for Flamescope.\n"
"\n"
"Target:\n"
"  -n, --node NAME@HOST      node to profile (short or long name; required)\n"
"  -c, --cookie-file PATH    file holding the node's cookie; the default is\n"
"                            $FLAME_PROFD_COOKIE if set, else ~/.erlang.cookie.\n"
"                            The file must be readable by its owner only.\n"
"      --timeout DUR         give up on a request after DUR (default 5s)\n"
"      --connect HOST:PORT   connect there instead of asking epmd for the node's\n"
"                            port (e.g. a local TLS tunnel to the node)\n"
"\n"
"Selection:\n"
"  -t, --top N               sample the N processes with the most reductions\n"
"                            since the previous selection (default 100; 0: none).\n"
"                            With --pid/--name and no --top, only those.\n"
"  -e, --every DUR           select again every DUR (default 5s)\n"
"  -p, --pid PID             always sample PID, '<0.123.0>' or 0.123.0, or as\n"
"                            rabbitmqctl and observer print a pid of the node,\n"
"                            '<app@host.Creation.123.0>' (repeatable)\n"
"  -N, --name NAME           always sample the process registered as NAME:\n"
"                            an atom (foo, :foo) or an Elixir alias\n"
"                            (MyApp.Counter for 'Elixir.MyApp.Counter');\n"
"                            repeatable\n"
"      --scan-max N          read the reductions of at most N processes per\n"
"                            selection (default 50000); bigger nodes are covered\n"
"                            by a moving window, the current selection always\n"
"                            re-read\n"
"      --min-reductions N    --top picks no process that did fewer than N\n"
"                            reductions a second (default 500; 0: any that did\n"
"                            some)\n"
"\n"
"Sampling:\n"
"  -r, --rate HZ             samples per second per process (default 10), spread\n"
"                            evenly over the second\n"
"      --backtrace-depth N   frames per stack (default 64; the node's\n"
"                            backtrace_depth flag is raised while any\n"
"                            flame_profd runs, and put back by the node itself\n"
"                            when the last has gone, also after SIGKILL)\n"
"      --lines               put source line numbers in frame names (NAME:LINE)\n"
"      --erlang-names        write frames of Elixir modules as Erlang does\n"
"                            ('Elixir.Foo':bar/1, '-bar/1-fun-0-'/1) instead of\n"
"                            as Elixir does (Foo.bar/1, anonymous fn/1 in\n"
"                            Foo.bar/1), keeping the index of anonymous fns\n"
"      --key NAME            record the process dictionary's value under the\n"
"                            atom NAME with each sample (key.NAME: TEXT),\n"
"                            read alone ({dictionary, NAME}, OTP 26.2 and\n"
"                            later), never by copying the dictionary;\n"
"                            repeatable\n"
"      --logger-key NAME     record key NAME of the process's Logger metadata\n"
"                            (Logger.metadata/1, logger:set_process_metadata/1)\n"
"                            the same way, e.g. request_id; repeatable. The\n"
"                            metadata map is copied, the rest of the\n"
"                            dictionary is not\n"
"      --callers             record '$callers' (the processes that started a\n"
"                            Task, newest first) with each sample\n"
"                            The process label (proc_lib:set_label/1,\n"
"                            Process.set_label/1) is recorded wherever the node\n"
"                            has one. On a node that cannot read one key\n"
"                            (before OTP 26.2) keys and callers are not\n"
"                            recorded: a warning at each connect says so\n"
"      --max-overhead PCT    cost budget: node-side work of flame_profd's\n"
"                            requests as a share of the node's schedulers\n"
"                            (default 5), and its own CPU when the node is\n"
"                            on this host, checked once a second;\n"
"                            over it the rate, then the top-N, come down;\n"
"                            0 turns the budget off\n"
"      --request rex|eval|helper\n"
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
"                            flame_profd stops or the connection goes\n"
"      --no-idle-reuse       ask every process for its stack at every sample;\n"
"                            by default a process that has not run since its\n"
"                            last sample is only probed (no signal, never\n"
"                            scheduled to answer) and that sample's stack and\n"
"                            memory figures, which cannot have changed, reused\n"
"      --breaker-run-queue N pause sampling while the node's run queues hold more\n"
"                            than N processes (default 50 per scheduler); a\n"
"                            request timeout pauses it too; probes to resume\n"
"\n"
"Output:\n"
"  -o, --out DIR             write under DIR/<node>/ (default .)\n"
"  -R, --rotate DUR          start a new file every DUR (default 2m)\n"
"      --rotate-size SIZE    ... or when the file reaches SIZE on disk (64M, 1G)\n"
"      --compress KIND       zstd (default), gzip or none, while writing\n"
"      --compress-level N    zstd 1-19 (default 3), gzip 1-9 (default 6)\n"
"      --keep-files N        after each rotation keep the newest N files,\n"
"      --keep-bytes SIZE     ... at most SIZE of files,\n"
"      --keep-age DUR        ... no file older than DUR (any combination;\n"
"                            only flame_profd's own finished files are deleted)\n"
"  -d, --duration DUR        stop after DUR, leaving complete files (default: run\n"
"                            until SIGINT/SIGTERM)\n"
"      --file-mode MODE      mode of output files (default 0640)\n"
"      --dir-mode MODE       mode of output directories (default 0750)\n"
"      --user NAME           when started as root: drop to NAME once the cookie\n"
"                            is read and the output directory is ready\n"
"      --log-file PATH       log there instead of stderr (SIGHUP reopens it)\n"
"  -v, --verbose             more log output\n"
"  -q, --quiet               warnings and errors only\n"
"  -h, --help                this text\n"
"  -V, --version             print the version\n"
"\n"
"DUR is a number with a unit: 500ms, 5s, 2m, 1h, 7d (a bare number is seconds).\n"
"SIZE is a number with K, M, G or T (powers of 1024; a bare number is bytes).\n"
"\n"
"Signals: SIGINT/SIGTERM finish the sample in flight and the current file, put\n"
"the node's backtrace_depth back and exit 0 (a second SIGINT exits at once);\n"
"SIGUSR1 starts a new file; SIGHUP reopens the log file.\n"
"\n"
"Exit status:\n"
"   0  finished (--duration over, or stopped by SIGINT/SIGTERM)\n"
"  64  bad command line: unknown flag, bad value, bad node name\n"
"  65  a --duration run took no sample at all\n"
"  66  cookie file missing, unreadable, empty, readable by others or not a\n"
"      regular file (a FIFO, a device)\n"
"  69  node unreachable: host unknown, no epmd, node not registered; or a\n"
"      --duration run lost the node and had not regained it at the end\n"
"  70  internal error, the node answered with nonsense, or it would not\n"
"      load the --request helper module\n"
"  73  output directory cannot be created or written\n"
"  74  I/O error while writing output\n"
"  75  another flame_profd is writing to the same output directory\n"
"  77  the node refused the connection (wrong cookie, or short vs long names)\n");
}

/* A key is written key.NAME on the event line: nothing in NAME may end
 * the field, and the dictionary's own keys have options of their own. */
static bool
key_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 100 || strcmp(name, "$process_label") == 0 ||
	    strcmp(name, "$callers") == 0 || strcmp(name, "$logger_metadata$") == 0)
		return false;
	for (const char *p = name; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_@.$-", *p)))
			return false;
	}
	return true;
}

static int
bad_value(const char *flag, const char *value, const char *why)
{
	fprintf(stderr, "flame_profd: error: %s '%s': %s (see --help)\n",
		flag, value, why);
	return FPD_EXIT_USAGE;
}

static int
parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int
parse_options(int argc, char **argv, struct fpd_options *o)
{
	enum {
		OPT_TIMEOUT = 256, OPT_BACKTRACE, OPT_LINES, OPT_LOG_FILE,
		OPT_SCAN_MAX, OPT_ROTATE_SIZE, OPT_COMPRESS, OPT_LEVEL,
		OPT_KEEP_FILES, OPT_KEEP_BYTES, OPT_KEEP_AGE,
		OPT_FILE_MODE, OPT_DIR_MODE, OPT_USER, OPT_CONNECT,
		OPT_MAX_OVERHEAD, OPT_BREAKER_RUNQ, OPT_REQUEST,
		OPT_NO_IDLE_REUSE, OPT_ERLANG_NAMES, OPT_MIN_REDS, OPT_KEY,
		OPT_LOGGER_KEY, OPT_CALLERS,
	};
	static const struct option longopts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "cookie-file", required_argument, NULL, 'c' },
		{ "top", required_argument, NULL, 't' },
		{ "every", required_argument, NULL, 'e' },
		{ "rate", required_argument, NULL, 'r' },
		{ "pid", required_argument, NULL, 'p' },
		{ "name", required_argument, NULL, 'N' },
		{ "out", required_argument, NULL, 'o' },
		{ "rotate", required_argument, NULL, 'R' },
		{ "duration", required_argument, NULL, 'd' },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "backtrace-depth", required_argument, NULL, OPT_BACKTRACE },
		{ "lines", no_argument, NULL, OPT_LINES },
		{ "erlang-names", no_argument, NULL, OPT_ERLANG_NAMES },
		{ "key", required_argument, NULL, OPT_KEY },
		{ "logger-key", required_argument, NULL, OPT_LOGGER_KEY },
		{ "callers", no_argument, NULL, OPT_CALLERS },
		{ "scan-max", required_argument, NULL, OPT_SCAN_MAX },
		{ "min-reductions", required_argument, NULL, OPT_MIN_REDS },
		{ "rotate-size", required_argument, NULL, OPT_ROTATE_SIZE },
		{ "compress", required_argument, NULL, OPT_COMPRESS },
		{ "compress-level", required_argument, NULL, OPT_LEVEL },
		{ "keep-files", required_argument, NULL, OPT_KEEP_FILES },
		{ "keep-bytes", required_argument, NULL, OPT_KEEP_BYTES },
		{ "keep-age", required_argument, NULL, OPT_KEEP_AGE },
		{ "file-mode", required_argument, NULL, OPT_FILE_MODE },
		{ "dir-mode", required_argument, NULL, OPT_DIR_MODE },
		{ "user", required_argument, NULL, OPT_USER },
		{ "connect", required_argument, NULL, OPT_CONNECT },
		{ "max-overhead", required_argument, NULL, OPT_MAX_OVERHEAD },
		{ "breaker-run-queue", required_argument, NULL, OPT_BREAKER_RUNQ },
		{ "request", required_argument, NULL, OPT_REQUEST },
		{ "no-idle-reuse", no_argument, NULL, OPT_NO_IDLE_REUSE },
		{ "log-file", required_argument, NULL, OPT_LOG_FILE },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long ul;
	long level;
	char *end;
	int c;

	*o = (struct fpd_options){
		.top = 100,
		.scan_max = 50000,
		.min_reductions = 500,
		.every_us = 5000000,
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
	};

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":n:c:t:e:r:p:N:o:R:d:vqhV",
				longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			o->node = optarg;
			break;
		case 'c':
			o->cookie_file = optarg;
			o->cookie_file_set = true;
			break;
		case 't':
			if (parse_uint(optarg, 100000, &ul) < 0)
				return bad_value("--top", optarg,
						 "expected a whole number from 0 to 100000");
			o->top = (unsigned)ul;
			o->top_set = true;
			break;
		case 'e':
			if (fpd_parse_duration(optarg, &o->every_us) < 0 ||
			    o->every_us < 100000)
				return bad_value("--every", optarg,
						 "expected a duration of at least 100ms, e.g. 5s");
			break;
		case 'r':
			errno = 0;
			o->rate = strtod(optarg, &end);
			if (errno || *end || end == optarg || !isfinite(o->rate) ||
			    o->rate < 0.1 || o->rate > 1000)
				return bad_value("--rate", optarg,
						 "expected samples per second from 0.1 to 1000");
			break;
		case 'p': {
			struct fp_pid pid;
			char node[256];
			uint32_t creation;

			if (fp_pid_parse_full(optarg, &pid, node, sizeof(node),
					      &creation) < 0)
				return bad_value("--pid", optarg,
						 "expected a pid like '<0.123.0>', 0.123.0 or '<app@host.Creation.123.0>'");
			o->pids = realloc(o->pids, (o->npids + 1) * sizeof(*o->pids));
			o->pids[o->npids++] = optarg;
			break;
		}
		case 'N': {
			char cand[2][FP_NAME_MAX];

			if (fp_name_candidates(optarg, cand) < 0)
				return bad_value("--name", optarg,
						 "expected a registered name (1 to 255 bytes), an Elixir alias or :atom");
			o->names = realloc(o->names, (o->nnames + 1) * sizeof(*o->names));
			o->names[o->nnames++] = optarg;
			break;
		}
		case 'o':
			if (!*optarg)
				return bad_value("--out", optarg, "expected a directory");
			o->out_dir = optarg;
			break;
		case 'R':
			if (fpd_parse_duration(optarg, &o->rotate_us) < 0 ||
			    o->rotate_us < 1000000)
				return bad_value("--rotate", optarg,
						 "expected a duration of at least 1s, e.g. 2m");
			break;
		case 'd':
			if (fpd_parse_duration(optarg, &o->duration_us) < 0 ||
			    o->duration_us == 0)
				return bad_value("--duration", optarg,
						 "expected a duration greater than 0, e.g. 30s");
			break;
		case OPT_TIMEOUT:
			if (fpd_parse_duration(optarg, &o->timeout_us) < 0 ||
			    o->timeout_us < 10000 || o->timeout_us > 600000000)
				return bad_value("--timeout", optarg,
						 "expected a duration from 10ms to 10m");
			break;
		case OPT_BACKTRACE:
			if (parse_uint(optarg, 10000, &ul) < 0 || ul < 1)
				return bad_value("--backtrace-depth", optarg,
						 "expected a whole number from 1 to 10000");
			o->backtrace_depth = (unsigned)ul;
			break;
		case OPT_SCAN_MAX:
			if (parse_uint(optarg, 10000000, &ul) < 0 || ul < 100)
				return bad_value("--scan-max", optarg,
						 "expected a whole number from 100 to 10000000");
			o->scan_max = (unsigned)ul;
			break;
		case OPT_MIN_REDS:
			if (parse_uint(optarg, 1000000000, &ul) < 0)
				return bad_value("--min-reductions", optarg,
						 "expected reductions a second, a whole number from 0 to 1000000000");
			o->min_reductions = (unsigned)ul;
			break;
		case OPT_ROTATE_SIZE:
			if (fpd_parse_size(optarg, &o->rotate_bytes) < 0 ||
			    o->rotate_bytes < 4096)
				return bad_value("--rotate-size", optarg,
						 "expected a size of at least 4K, e.g. 64M");
			break;
		case OPT_COMPRESS:
			if (strcmp(optarg, "zstd") == 0)
				o->compress = FPD_COMPRESS_ZSTD;
			else if (strcmp(optarg, "gzip") == 0)
				o->compress = FPD_COMPRESS_GZIP;
			else if (strcmp(optarg, "none") == 0)
				o->compress = FPD_COMPRESS_NONE;
			else
				return bad_value("--compress", optarg,
						 "expected zstd, gzip or none");
			break;
		case OPT_LEVEL:
			errno = 0;
			level = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || level < 1 || level > 19)
				return bad_value("--compress-level", optarg,
						 "expected 1 to 19 (zstd) or 1 to 9 (gzip)");
			o->compress_level = (int)level;
			break;
		case OPT_KEEP_FILES:
			if (parse_uint(optarg, 10000000, &ul) < 0 || ul < 1)
				return bad_value("--keep-files", optarg,
						 "expected a whole number of at least 1");
			o->keep_files = (unsigned)ul;
			break;
		case OPT_KEEP_BYTES:
			if (fpd_parse_size(optarg, &o->keep_bytes) < 0 ||
			    o->keep_bytes == 0)
				return bad_value("--keep-bytes", optarg,
						 "expected a size greater than 0, e.g. 1G");
			break;
		case OPT_KEEP_AGE:
			if (fpd_parse_duration(optarg, &o->keep_age_us) < 0 ||
			    o->keep_age_us == 0)
				return bad_value("--keep-age", optarg,
						 "expected a duration greater than 0, e.g. 7d");
			break;
		case OPT_FILE_MODE:
		case OPT_DIR_MODE:
			errno = 0;
			ul = strtoul(optarg, &end, 8);
			if (errno || *end || end == optarg || ul > 0777 ||
			    (c == OPT_FILE_MODE && !(ul & 0200)) ||
			    (c == OPT_DIR_MODE && (ul & 0700) != 0700))
				return bad_value(c == OPT_FILE_MODE ? "--file-mode" : "--dir-mode",
						 optarg, c == OPT_FILE_MODE ?
						 "expected an octal mode the owner can write, e.g. 0640" :
						 "expected an octal mode giving the owner rwx, e.g. 0750");
			if (c == OPT_FILE_MODE)
				o->file_mode = (mode_t)ul;
			else
				o->dir_mode = (mode_t)ul;
			break;
		case OPT_USER: {
			struct passwd *pw = getpwnam(optarg);

			if (!pw)
				return bad_value("--user", optarg, "no such user");
			if (geteuid() != 0)
				return bad_value("--user", optarg,
						 "dropping privileges needs flame_profd to start as root");
			o->user = optarg;
			o->uid = pw->pw_uid;
			o->gid = pw->pw_gid;
			break;
		}
		case OPT_MAX_OVERHEAD:
			errno = 0;
			o->max_overhead = strtod(optarg, &end);
			if (errno || end == optarg || (*end && strcmp(end, "%") != 0) ||
			    !isfinite(o->max_overhead) || o->max_overhead < 0 ||
			    o->max_overhead > 100)
				return bad_value("--max-overhead", optarg,
						 "expected a percentage from 0 (no budget) to 100");
			break;
		case OPT_BREAKER_RUNQ:
			if (parse_uint(optarg, 100000000, &ul) < 0 || ul < 1)
				return bad_value("--breaker-run-queue", optarg,
						 "expected a whole number of at least 1");
			o->breaker_run_queue = (unsigned)ul;
			break;
		case OPT_REQUEST:
			if (strcmp(optarg, "rex") == 0)
				o->request = FP_REQUEST_REX;
			else if (strcmp(optarg, "eval") == 0)
				o->request = FP_REQUEST_EVAL;
			else if (strcmp(optarg, "helper") == 0)
				o->request = FP_REQUEST_HELPER;
			else
				return bad_value("--request", optarg,
						 "expected rex, eval or helper");
			break;
		case OPT_NO_IDLE_REUSE:
			o->idle_reuse = false;
			break;
		case OPT_CONNECT: {
			char *colon = strrchr(optarg, ':');

			if (!colon || colon == optarg ||
			    parse_uint(colon + 1, 65535, &ul) < 0 || ul == 0)
				return bad_value("--connect", optarg,
						 "expected HOST:PORT, e.g. 127.0.0.1:4370");
			free(o->connect_host);
			o->connect_host = strndup(optarg, (size_t)(colon - optarg));
			o->connect_port = (unsigned)ul;
			break;
		}
		case OPT_LINES:
			o->lines = true;
			break;
		case OPT_ERLANG_NAMES:
			o->erlang_names = true;
			break;
		case OPT_KEY:
		case OPT_LOGGER_KEY: {
			bool logger = c == OPT_LOGGER_KEY;
			const char ***v = logger ? &o->logger_keys : &o->keys;
			size_t *n = logger ? &o->nlogger_keys : &o->nkeys;

			if (!key_name_ok(optarg))
				return bad_value(logger ? "--logger-key" : "--key", optarg,
						 "a key is an atom's name of at most 100 bytes of [A-Za-z0-9_@.$-], not $process_label, $callers or $logger_metadata$ (the label, --callers and --logger-key read those)");
			for (size_t i = 0; i < o->nkeys; i++) {
				if (strcmp(o->keys[i], optarg) == 0)
					return bad_value(logger ? "--logger-key" : "--key", optarg, "given twice (keys are written key.NAME whichever kind)");
			}
			for (size_t i = 0; i < o->nlogger_keys; i++) {
				if (strcmp(o->logger_keys[i], optarg) == 0)
					return bad_value(logger ? "--logger-key" : "--key", optarg, "given twice (keys are written key.NAME whichever kind)");
			}
			*v = realloc(*v, (*n + 1) * sizeof(**v));
			if (!*v)
				abort();
			(*v)[(*n)++] = optarg;
			break;
		}
		case OPT_CALLERS:
			o->callers = true;
			break;
		case OPT_LOG_FILE:
			o->log_file = optarg;
			break;
		case 'v':
			o->verbosity++;
			break;
		case 'q':
			o->verbosity--;
			break;
		case 'h':
			usage(stdout);
			exit(FPD_EXIT_OK);
		case 'V':
			printf("flame_profd %s\n", FP_VERSION);
			exit(FPD_EXIT_OK);
		case ':':
			fprintf(stderr, "flame_profd: error: %s needs a value (see --help)\n",
				argv[optind - 1]);
			return FPD_EXIT_USAGE;
		default:
			fprintf(stderr, "flame_profd: error: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return FPD_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "flame_profd: error: unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return FPD_EXIT_USAGE;
	}
	if (!o->node) {
		fprintf(stderr, "flame_profd: error: --node NAME@HOST is required (see --help)\n");
		return FPD_EXIT_USAGE;
	}
	{
		const char *why;

		if (fp_node_name_check(o->node, &why) < 0)
			return bad_value("--node", o->node, why);
	}
	if (o->compress_level < 0)
		o->compress_level = o->compress == FPD_COMPRESS_GZIP ? 6 : 3;
	if (o->compress == FPD_COMPRESS_GZIP && o->compress_level > 9)
		return bad_value("--compress-level", "gzip",
				 "gzip levels go from 1 to 9");
	o->key_names = calloc(o->nkeys + o->nlogger_keys + 1, sizeof(*o->key_names));
	if (!o->key_names)
		abort();
	for (size_t i = 0; i < o->nkeys; i++)
		o->key_names[i] = o->keys[i];
	for (size_t i = 0; i < o->nlogger_keys; i++)
		o->key_names[o->nkeys + i] = o->logger_keys[i];
	if ((o->npids || o->nnames) && !o->top_set)
		o->top = 0;
	if (o->top == 0 && !o->npids && !o->nnames) {
		fprintf(stderr, "flame_profd: error: nothing to sample: --top 0 and no --pid or --name\n");
		return FPD_EXIT_USAGE;
	}
	return 0;
}

/*
 * Read the cookie like erl does: the whole file, trailing white space
 * dropped, and refuse a file others can read.
 */
static int
read_cookie(const struct fpd_options *o, char *cookie, size_t size)
{
	char path[4096];
	const char *env = getenv("FLAME_PROFD_COOKIE");
	struct stat st;
	ssize_t n;
	int fd;

	if (env) {
		size_t len = strlen(env);
		bool use = !o->cookie_file_set && *env;
		char *entry = NULL;

		if (use && len < size)
			snprintf(cookie, size, "%s", env);
		/* Not in our environment any longer (/proc/PID/environ), also
		 * when --cookie-file wins or the value is refused: the whole
		 * "NAME=VALUE" string goes, once out of environ. */
		for (char **e = environ; *e && !entry; e++) {
			if (strncmp(*e, "FLAME_PROFD_COOKIE=", 19) == 0)
				entry = *e;
		}
		unsetenv("FLAME_PROFD_COOKIE");
		if (entry)
			explicit_bzero(entry, strlen(entry));
		if (use && len >= size) {
			fprintf(stderr, "flame_profd: error: FLAME_PROFD_COOKIE is longer than %zu bytes\n",
				size - 1);
			return FPD_EXIT_NOINPUT;
		}
		if (use)
			return 0;
	}
	if (o->cookie_file_set) {
		snprintf(path, sizeof(path), "%s", o->cookie_file);
	} else {
		const char *home = getenv("HOME");

		if (!home || !*home) {
			struct passwd *pw = getpwuid(getuid());

			home = pw ? pw->pw_dir : "/";
		}
		snprintf(path, sizeof(path), "%s/.erlang.cookie", home);
	}

	/* O_NONBLOCK: a FIFO without a writer would block the open for
	 * ever; it is refused below like any file that is not regular. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		fprintf(stderr, "flame_profd: error: cannot read cookie file %s: %s\n",
			path, strerror(errno));
		return FPD_EXIT_NOINPUT;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "flame_profd: error: cookie file %s is not a regular file\n",
			path);
		close(fd);
		return FPD_EXIT_NOINPUT;
	}
	if (st.st_mode & 077) {
		fprintf(stderr, "flame_profd: error: cookie file %s must be accessible by its owner only (chmod 400)\n",
			path);
		close(fd);
		return FPD_EXIT_NOINPUT;
	}
	n = read(fd, cookie, size - 1);
	close(fd);
	if (n < 0) {
		fprintf(stderr, "flame_profd: error: cannot read cookie file %s: %s\n",
			path, strerror(errno));
		return FPD_EXIT_NOINPUT;
	}
	if ((size_t)n == size - 1) {
		fprintf(stderr, "flame_profd: error: cookie file %s holds more than %zu bytes\n",
			path, size - 2);
		return FPD_EXIT_NOINPUT;
	}
	while (n > 0 && (cookie[n - 1] == '\n' || cookie[n - 1] == '\r' ||
			 cookie[n - 1] == ' ' || cookie[n - 1] == '\t'))
		n--;
	cookie[n] = '\0';
	if (n == 0) {
		fprintf(stderr, "flame_profd: error: cookie file %s is empty\n", path);
		return FPD_EXIT_NOINPUT;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	struct fpd_options opts;
	char cookie[MAX_COOKIE + 2];
	int rc;

	/* The cookie is in memory: no core dumps, no ptrace by the same
	 * user (PR_SET_DUMPABLE also makes /proc/PID/mem root-only). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	signal(SIGPIPE, SIG_IGN);
	/* A file-size limit shows as EFBIG on write, handled like ENOSPC. */
	signal(SIGXFSZ, SIG_IGN);

	rc = parse_options(argc, argv, &opts);
	if (rc)
		goto out;
	rc = read_cookie(&opts, cookie, sizeof(cookie));
	if (rc)
		goto out;
	if (fpd_log_open(opts.log_file, opts.verbosity, opts.file_mode) < 0) {
		fprintf(stderr, "flame_profd: error: cannot open log file %s: %s\n",
			opts.log_file, strerror(errno));
		rc = FPD_EXIT_CANTCREAT;
		goto out;
	}
	if (opts.user && fpd_log_chown(opts.uid, opts.gid, opts.user) < 0) {
		fprintf(stderr, "flame_profd: error: cannot hand log file %s to user %s: %s\n",
			opts.log_file, opts.user, strerror(errno));
		fpd_log_close();
		rc = FPD_EXIT_CANTCREAT;
		goto out;
	}

	rc = fpd_run(&opts, cookie);
	fpd_log_close();
out:
	explicit_bzero(cookie, sizeof(cookie));
	free(opts.pids);
	free(opts.names);
	free(opts.keys);
	free(opts.logger_keys);
	free(opts.key_names);
	free(opts.connect_host);
	return rc;
}
