/*
 * flame_profd — the parsers of the command line's values: each checks
 * its option's argument and stores it in struct fpd_options.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "options-parse.h"
#include "compress.h"
#include "options.h"
#include "util.h"
#include "fp/node.h"
#include "util-mem.h"
#include "util-parse.h"

#define RATE_MIN 0.1
#define RATE_MAX 1000.0
#define PERF_PID_MAX 4194304		/* the kernel's largest pid_max */
#define PORT_MAX 65535
#define KEY_NAME_MAX 100		/* bytes of a --key or --logger-key */
#define NODE_NAME_MAX 256		/* of a pid's node, '<app@host.C.N.S>' */

int
fpd_option_bad_value(const char *flag, const char *value, const char *why)
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

/* A whole number from @min to @max for @flag, else the message @why. */
static int
uint_value(const char *flag, const char *arg, unsigned long min,
	   unsigned long max, const char *why, unsigned *out)
{
	unsigned long v;

	if (parse_uint(arg, max, &v) < 0 || v < min)
		return fpd_option_bad_value(flag, arg, why);
	*out = (unsigned)v;
	return 0;
}

int
fpd_option_value(struct fpd_options *o, const char *name,
		 const struct fpd_value *v, const char *arg)
{
	char *at = (char *)o + v->field;
	char flag[64];
	uint64_t u;
	int i;

	snprintf(flag, sizeof(flag), "--%s", name);
	switch (v->kind) {
	case FPD_VALUE_NONE:
		break;
	case FPD_VALUE_STRING:
		*(const char **)at = arg;
		return 0;
	case FPD_VALUE_TRUE:
	case FPD_VALUE_FALSE:
		*(bool *)at = v->kind == FPD_VALUE_TRUE;
		return 0;
	case FPD_VALUE_UINT:
		return uint_value(flag, arg, (unsigned long)v->min,
				  (unsigned long)v->max, v->why, (unsigned *)at);
	case FPD_VALUE_DURATION:
	case FPD_VALUE_SIZE:
		if ((v->kind == FPD_VALUE_DURATION ? fpd_parse_duration(arg, &u) :
						     fpd_parse_size(arg, &u)) < 0 ||
		    u < v->min || u > v->max)
			return fpd_option_bad_value(flag, arg, v->why);
		*(uint64_t *)at = u;
		return 0;
	case FPD_VALUE_CHOICE:
		i = parse_enum(arg, v->names);
		if (i < 0)
			return fpd_option_bad_value(flag, arg, v->why);
		*(int *)at = i;
		return 0;
	}
	fprintf(stderr, "flame_profd: error: %s has no parser\n", flag);
	return FPD_EXIT_SOFTWARE;
}

/* A key is written key.NAME on the event line: nothing in NAME may end
 * the field, and the dictionary's own keys have options of their own. */
static bool
key_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > KEY_NAME_MAX || strcmp(name, "$process_label") == 0 ||
	    strcmp(name, "$callers") == 0 || strcmp(name, "$logger_metadata$") == 0)
		return false;
	for (const char *p = name; *p; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr("_@.$-", *p)))
			return false;
	}
	return true;
}

static void
append(const char ***v, size_t *n, const char *arg)
{
	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = arg;
}

/* ---- target ------------------------------------------------------------- */


/* NAME@HOST, or NAME@HOST=PATH: no node name holds '=' (epmd's names
 * and host names have none), so the first one starts the path. */
int
fpd_option_node(struct fpd_options *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t n = o->nnodes + 1;

	if (eq && !eq[1])
		return fpd_option_bad_value("--node", arg,
				 "expected NAME@HOST or NAME@HOST=COOKIE_FILE");
	o->nodes = xrealloc(o->nodes, n * sizeof(*o->nodes));
	o->node_cookie_files = xrealloc(o->node_cookie_files,
					n * sizeof(*o->node_cookie_files));
	o->nodes[o->nnodes] = eq ? strndup(arg, (size_t)(eq - arg)) : xstrdup(arg);
	if (!o->nodes[o->nnodes])
		abort();
	o->node_cookie_files[o->nnodes] = eq ? xstrdup(eq + 1) : NULL;
	o->nnodes = n;
	o->node = o->nodes[0];
	return 0;
}

int
fpd_option_discover(struct fpd_options *o, const char *arg)
{
	if (!*arg || strchr(arg, '@'))
		return fpd_option_bad_value("--discover", arg,
				 "expected the host whose epmd lists the nodes, e.g. localhost");
	o->discover = arg;
	return 0;
}

int
fpd_option_discover_match(struct fpd_options *o, const char *arg)
{
	if (!*arg)
		return fpd_option_bad_value("--discover-match", arg,
				 "expected a pattern, e.g. 'app*'");
	o->discover_match = arg;
	return 0;
}

/* --cluster NODE[=PATH]: a --node whose nodes() are followed (fleet.c) */
int
fpd_option_cluster(struct fpd_options *o, const char *arg)
{
	int rc;

	if (o->cluster)
		return fpd_option_bad_value("--cluster", arg,
				 "one --cluster per run; run a daemon for each cluster");
	rc = fpd_option_node(o, arg);
	if (rc)
		return rc;
	o->cluster = o->nodes[o->nnodes - 1];
	return 0;
}

int
fpd_option_push(struct fpd_options *o, const char *arg)
{
	if (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0)
		return fpd_option_bad_value("--push", arg,
				 "expected an http:// or https:// URL, e.g. http://pyroscope:4040");
	o->push_url = arg;
	return 0;
}

int
fpd_option_push_format(struct fpd_options *o, const char *arg)
{
	if (strcmp(arg, "pyroscope") == 0)
		o->push_otlp = false;
	else if (strcmp(arg, "otlp") == 0)
		o->push_otlp = true;
	else
		return fpd_option_bad_value("--push-format", arg,
				 "expected pyroscope or otlp");
	o->push_format_given = true;
	return 0;
}

/* Pyroscope's application names, less the dots its pprof ingest reads
 * as the start of the profile type's suffix. */
int
fpd_option_push_service(struct fpd_options *o, const char *arg)
{
	size_t n = strspn(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			  "0123456789_-");

	if (!*arg || arg[n] || n > 128)
		return fpd_option_bad_value("--push-service", arg,
				 "expected a name of letters, digits, '_' and '-', e.g. checkout");
	o->push_service = arg;
	return 0;
}

/* What names one node's process or address cannot be said of several. */
static int
refuse_for_fleet(const char *what)
{
	fprintf(stderr, "flame_profd: error: %s; with several nodes (more than one --node, --discover or --cluster) run a daemon of its own for that node\n",
		what);
	return FPD_EXIT_USAGE;
}

int
fpd_options_check_fleet(struct fpd_options *o)
{
	const char *why;

	for (size_t i = 0; i < o->nnodes; i++) {
		const char *flag = o->nodes[i] == o->cluster ? "--cluster" : "--node";

		if (fp_node_name_check(o->nodes[i], &why) < 0)
			return fpd_option_bad_value(flag, o->nodes[i], why);
		for (size_t j = 0; j < i; j++) {
			if (strcmp(o->nodes[i], o->nodes[j]) == 0)
				return fpd_option_bad_value(flag, o->nodes[i],
						 "given twice");
		}
	}
	if (o->discover_match && !o->discover && !o->cluster) {
		fprintf(stderr, "flame_profd: error: --discover-match needs --discover HOST or --cluster NODE\n");
		return FPD_EXIT_USAGE;
	}
	if (!fpd_options_fleet(o)) {
		if (o->node_cookie_files[0]) {
			o->cookie_file = o->node_cookie_files[0];
			o->cookie_file_set = true;
		}
		return 0;
	}
	if (o->npids)
		return refuse_for_fleet("--pid names a process of one node");
	if (o->ntraces)
		return refuse_for_fleet("--trace names a process of one node");
	if (o->trace_call)
		return refuse_for_fleet("--trace-call traces one node");
	if (o->perf_pid || o->perf_auto)
		return refuse_for_fleet("--perf samples the OS process of one node");
	if (o->connect_host)
		return refuse_for_fleet("--connect gives the address of one node");
	return 0;
}

int
fpd_option_cookie_file(struct fpd_options *o, const char *arg)
{
	o->cookie_file = arg;
	o->cookie_file_set = true;
	return 0;
}


int
fpd_option_connect(struct fpd_options *o, const char *arg)
{
	const char *colon = strrchr(arg, ':');
	unsigned long port;

	if (!colon || colon == arg || parse_uint(colon + 1, PORT_MAX, &port) < 0 ||
	    port == 0)
		return fpd_option_bad_value("--connect", arg,
				 "expected HOST:PORT, e.g. 127.0.0.1:4370");
	free(o->connect_host);
	o->connect_host = xzalloc((size_t)(colon - arg) + 1);
	memcpy(o->connect_host, arg, (size_t)(colon - arg));
	o->connect_port = (unsigned)port;
	return 0;
}

/* ---- selection ---------------------------------------------------------- */

int
fpd_option_top(struct fpd_options *o, const char *arg)
{
	int rc = uint_value("--top", arg, 0, TOP_MAX,
			    "expected a whole number from 0 to 100000", &o->top);

	if (rc == 0)
		o->top_set = true;
	return rc;
}


int
fpd_option_pid(struct fpd_options *o, const char *arg)
{
	struct fp_pid pid;
	char node[NODE_NAME_MAX];
	uint32_t creation;

	if (fp_pid_parse_full(arg, &pid, node, sizeof(node), &creation) < 0)
		return fpd_option_bad_value("--pid", arg,
				 "expected a pid like '<0.123.0>', 0.123.0 or '<app@host.Creation.123.0>'");
	append(&o->pids, &o->npids, arg);
	return 0;
}

int
fpd_option_name(struct fpd_options *o, const char *arg)
{
	char cand[2][FP_NAME_MAX];

	if (fp_name_candidates(arg, cand) < 0)
		return fpd_option_bad_value("--name", arg,
				 "expected a registered name (1 to 255 bytes), an Elixir alias or :atom");
	append(&o->names, &o->nnames, arg);
	return 0;
}

/* ---- tracing ------------------------------------------------------------ */

int
fpd_option_trace(struct fpd_options *o, const char *arg)
{
	char cand[2][FP_NAME_MAX], node[NODE_NAME_MAX];
	struct fp_pid pid;
	uint32_t creation;

	if (fp_pid_parse_full(arg, &pid, node, sizeof(node), &creation) < 0 &&
	    fp_name_candidates(arg, cand) < 0)
		return fpd_option_bad_value("--trace", arg,
				 "expected a pid like '<0.123.0>' or a registered name");
	append(&o->traces, &o->ntraces, arg);
	return 0;
}

int
fpd_option_trace_server(struct fpd_options *o, const char *arg)
{
	char cand[2][FP_NAME_MAX], node[NODE_NAME_MAX];
	struct fp_pid pid;
	uint32_t creation;

	if (fp_pid_parse_full(arg, &pid, node, sizeof(node), &creation) < 0 &&
	    fp_name_candidates(arg, cand) < 0)
		return fpd_option_bad_value("--trace-server", arg,
				 "expected a pid like '<0.123.0>' or a registered name");
	append(&o->trace_servers, &o->ntrace_servers, arg);
	return 0;
}



/* ---- sampling ----------------------------------------------------------- */

int
fpd_option_burst_rate(struct fpd_options *o, const char *arg)
{
	char *end;

	errno = 0;
	o->burst_rate = strtod(arg, &end);
	if (errno || *end || end == arg || !isfinite(o->burst_rate) ||
	    o->burst_rate < RATE_MIN || o->burst_rate > RATE_MAX)
		return fpd_option_bad_value("--burst-rate", arg,
				 "expected samples per second from 0.1 to 1000");
	return 0;
}

int
fpd_option_rate(struct fpd_options *o, const char *arg)
{
	char *end;

	errno = 0;
	o->rate = strtod(arg, &end);
	if (errno || *end || end == arg || !isfinite(o->rate) ||
	    o->rate < RATE_MIN || o->rate > RATE_MAX)
		return fpd_option_bad_value("--rate", arg,
				 "expected samples per second from 0.1 to 1000");
	return 0;
}




static int
add_key(struct fpd_options *o, const char *arg, bool logger)
{
	const char *flag = logger ? "--logger-key" : "--key";

	if (!key_name_ok(arg))
		return fpd_option_bad_value(flag, arg,
				 "a key is an atom's name of at most 100 bytes of [A-Za-z0-9_@.$-], not $process_label, $callers or $logger_metadata$ (the label, --callers and --logger-key read those)");
	for (size_t i = 0; i < o->nkeys; i++) {
		if (strcmp(o->keys[i], arg) == 0)
			return fpd_option_bad_value(flag, arg, "given twice (keys are written key.NAME whichever kind)");
	}
	for (size_t i = 0; i < o->nlogger_keys; i++) {
		if (strcmp(o->logger_keys[i], arg) == 0)
			return fpd_option_bad_value(flag, arg, "given twice (keys are written key.NAME whichever kind)");
	}
	if (logger)
		append(&o->logger_keys, &o->nlogger_keys, arg);
	else
		append(&o->keys, &o->nkeys, arg);
	return 0;
}

int
fpd_option_key(struct fpd_options *o, const char *arg)
{
	return add_key(o, arg, false);
}

int
fpd_option_logger_key(struct fpd_options *o, const char *arg)
{
	return add_key(o, arg, true);
}


/* ---- the flight recorder ------------------------------------------------ */

int
fpd_option_trigger(struct fpd_options *o, const char *arg)
{
	const char *why;

	if (o->ntriggers == FPD_TRIGGERS_MAX)
		return fpd_option_bad_value("--trigger", arg,
				 "at most 16 triggers");
	if (fpd_trigger_parse(arg, &o->triggers[o->ntriggers], &why) < 0)
		return fpd_option_bad_value("--trigger", arg, why);
	o->ntriggers++;
	return 0;
}

int
fpd_option_max_overhead(struct fpd_options *o, const char *arg)
{
	char *end;

	errno = 0;
	o->max_overhead = strtod(arg, &end);
	if (errno || end == arg || (*end && strcmp(end, "%") != 0) ||
	    !isfinite(o->max_overhead) || o->max_overhead < 0 ||
	    o->max_overhead > 100)
		return fpd_option_bad_value("--max-overhead", arg,
				 "expected a percentage from 0 (no budget) to 100");
	return 0;
}

int
fpd_option_request(struct fpd_options *o, const char *arg)
{
	static const char *const names[] = {
		[FP_REQUEST_REX] = "rex",
		[FP_REQUEST_EVAL] = "eval",
		[FP_REQUEST_HELPER] = "helper",
		[FP_REQUEST_HELPER + 1] = NULL,
	};
	int i = parse_enum(arg, names);

	if (i < 0)
		return fpd_option_bad_value("--request", arg, "expected rex, eval or helper");
	o->request = (enum fp_request_path)i;
	return 0;
}



int
fpd_option_perf(struct fpd_options *o, const char *arg)
{
	unsigned long v;

	if (strcmp(arg, "auto") == 0) {
		o->perf_auto = true;
		o->perf_pid = 0;
		return 0;
	}
	if (parse_uint(arg, PERF_PID_MAX, &v) < 0 || v < 1)
		return fpd_option_bad_value("--perf", arg,
				 "expected the node's OS process id, or auto");
	o->perf_pid = (pid_t)v;
	o->perf_auto = false;
	return 0;
}


/* ---- output ------------------------------------------------------------- */

int
fpd_option_out(struct fpd_options *o, const char *arg)
{
	if (!*arg)
		return fpd_option_bad_value("--out", arg, "expected a directory");
	o->out_dir = arg;
	return 0;
}




int
fpd_option_compress_level(struct fpd_options *o, const char *arg)
{
	char *end;
	long level;

	errno = 0;
	level = strtol(arg, &end, 10);
	if (errno || *end || end == arg || level < 1 || level > ZSTD_LEVEL_MAX)
		return fpd_option_bad_value("--compress-level", arg,
				 "expected 1 to 19 (zstd) or 1 to 9 (gzip)");
	o->compress_level = (int)level;
	return 0;
}





/* An octal mode with all of @need (of the owner's bits) set. */
static int
parse_mode(const char *flag, const char *arg, mode_t need, const char *why,
	   mode_t *mode)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 8);
	if (errno || *end || end == arg || v > 0777 || (v & need) != need)
		return fpd_option_bad_value(flag, arg, why);
	*mode = (mode_t)v;
	return 0;
}

int
fpd_option_file_mode(struct fpd_options *o, const char *arg)
{
	return parse_mode("--file-mode", arg, 0200,
			  "expected an octal mode the owner can write, e.g. 0640",
			  &o->file_mode);
}

int
fpd_option_dir_mode(struct fpd_options *o, const char *arg)
{
	int rc = parse_mode("--dir-mode", arg, 0700,
			    "expected an octal mode giving the owner rwx, e.g. 0750",
			    &o->dir_mode);

	/* a directory its group or others can write is one the daemon
	 * would refuse to use again (fs-safe.h) */
	if (rc == 0 && (o->dir_mode & (S_IWGRP | S_IWOTH)))
		rc = fpd_option_bad_value("--dir-mode", arg,
					  "neither the group nor others may write to "
					  "the output directories, e.g. 0750");
	return rc;
}

int
fpd_option_user(struct fpd_options *o, const char *arg)
{
	struct passwd *pw = getpwnam(arg);

	if (!pw)
		return fpd_option_bad_value("--user", arg, "no such user");
	if (geteuid() != 0)
		return fpd_option_bad_value("--user", arg,
				 "dropping privileges needs flame_profd to start as root");
	o->user = arg;
	o->uid = pw->pw_uid;
	o->gid = pw->pw_gid;
	return 0;
}


int
fpd_option_verbose(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->verbosity++;
	return 0;
}

int
fpd_option_quiet(struct fpd_options *o, const char *arg)
{
	(void)arg;
	o->verbosity--;
	return 0;
}

/* An atom's text as the node would spell it unquoted or quoted: anything
 * but a separator, up to 255 bytes. */
static bool
call_part(const char *s, size_t len, char *out, size_t outlen)
{
	if (len == 0 || len >= outlen)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == ':' || s[i] == '/')
			return false;
	memcpy(out, s, len);
	out[len] = '\0';
	return true;
}

int
fpd_option_trace_call(struct fpd_options *o, const char *arg)
{
	const char *colon = strchr(arg, ':'), *slash, *fun;
	unsigned long arity;
	char *end;

	if (o->trace_call)
		return fpd_option_bad_value("--trace-call", arg,
				 "given twice: one function is traced at a time");
	if (!colon)
		goto bad;
	fun = colon + 1;
	slash = strchr(fun, '/');
	if (!call_part(arg, (size_t)(colon - arg), o->trace_call_module,
		       sizeof(o->trace_call_module)) ||
	    !call_part(fun, slash ? (size_t)(slash - fun) : strlen(fun),
		       o->trace_call_function, sizeof(o->trace_call_function)))
		goto bad;
	o->trace_call_arity = -1;
	if (slash) {
		errno = 0;
		arity = strtoul(slash + 1, &end, 10);
		if (slash[1] < '0' || slash[1] > '9' || *end || errno ||
		    arity > 255)
			goto bad;
		o->trace_call_arity = (int)arity;
	}
	o->trace_call = arg;
	return 0;
bad:
	return fpd_option_bad_value("--trace-call", arg,
			 "expected MOD:FUN or MOD:FUN/ARITY, e.g. my_server:handle_call/3");
}
