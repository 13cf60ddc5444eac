/*
 * flame_profd — a node session's connect: the handshake, what the node
 * offers, the --pid targets checked, the janitor attached, and how a
 * failed connect is told; leaving the janitor at the end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-log.h"
#include "options.h"
#include "output.h"
#include "perf-pid.h"
#include "perf-symbols.h"
#include "session-int.h"
#include "util.h"

/* The breaker trips when the run queues pass this many per scheduler
 * (--breaker-run-queue overrides it). */
#define RUNQ_PER_SCHEDULER 50

/* ---- connection ------------------------------------------------------- */

static int
connect_error_exit(struct fpd_session *s, int rc)
{
	const char *node = s->o->node;

	switch (rc) {
	case -EHOSTUNREACH:
		fpd_fatal("cannot resolve the host of %s", node);
		return FPD_EXIT_UNAVAILABLE;
	case -ECONNREFUSED:
		fpd_fatal("cannot reach %s: no epmd answers on its host (is the node running?)",
			  node);
		return FPD_EXIT_UNAVAILABLE;
	case -ENOENT:
		fpd_fatal("cannot reach %s: epmd on its host does not know that node name (is it running? is the name right?)",
			  node);
		return FPD_EXIT_UNAVAILABLE;
	case -ETIMEDOUT:
		fpd_fatal("cannot reach %s: timed out", node);
		return FPD_EXIT_UNAVAILABLE;
	case -EACCES:
		fpd_fatal("%s refused the connection: wrong cookie? (or the node uses %s names)",
			  node, strchr(strchr(node, '@'), '.') ? "short" : "long");
		return FPD_EXIT_NOPERM;
	case -EPROTO:
		fpd_fatal("%s answered the setup calls with something unexpected",
			  node);
		return FPD_EXIT_SOFTWARE;
	default:
		fpd_fatal("cannot connect to %s: %s",
			  node, strerror(-rc));
		return FPD_EXIT_UNAVAILABLE;
	}
}

/* connect_error_exit()'s code, unsaid. */
static int
connect_error_code(int rc)
{
	switch (rc) {
	case -EACCES: return FPD_EXIT_NOPERM;
	case -EPROTO: return FPD_EXIT_SOFTWARE;
	default: return FPD_EXIT_UNAVAILABLE;
	}
}

static const char *
connect_error_text(int rc)
{
	switch (rc) {
	case -ECONNREFUSED: return "no epmd";
	case -ENOENT: return "node not registered with epmd";
	case -EACCES: return "connection refused by the node (cookie?)";
	case -EHOSTUNREACH: return "host does not resolve";
	case -ETIMEDOUT: return "timed out";
	default: return strerror(-rc);
	}
}

static bool
asks_keys(const struct fpd_options *o)
{
	return o->nkeys || o->nlogger_keys || o->callers;
}

/* what --key, --logger-key and --callers get on this connection */
static const char *
keys_state(const struct fpd_session *s)
{
	if (!asks_keys(s->o))
		return "none";
	return fp_node_records_keys(s->node) ? "yes" : "unavailable";
}

/* What the node was found to offer: probed, never guessed. */
static void
say_connected(struct fpd_session *s)
{
	struct fp_node *node = s->node;
	const char *name = fp_node_name(node), *otp = fp_node_otp_release(node);
	const char *dict = fp_node_reads_dict_keys(node) ? "yes" : "no";
	const char *request = fpd_request_name(fp_node_request_path(node));
	const char *labels = fpd_label_source_name(fp_node_label_source(node));

	fpd_recorder_note(s->rec, "connected to %s (OTP %s%s)", s->o->node, otp,
			  fp_node_is_local(node) ? ", on this host" : "");
	fpd_recorder_note(s->rec, "node: name=%s otp=%s dictionary_keys=%s request=%s labels=%s keys=%s",
			  name, otp, dict, request, labels, keys_state(s));
	fpd_debug("node: name=%s otp=%s dictionary_keys=%s request=%s labels=%s keys=%s",
		  name, otp, dict, request, labels, keys_state(s));
	if (asks_keys(s->o) && !fp_node_records_keys(node))
		fpd_warn("%s (OTP %s) cannot read one key of a process dictionary (OTP 26.2 and later can): --key, --logger-key and --callers record nothing on this connection",
			 s->o->node, otp);
}

/* The janitor holds backtrace_depth raised while we are connected. */
static void
attach_janitor(struct fpd_session *s)
{
	unsigned orig, depth;
	int rc;

	rc = fp_node_depth_attach(s->node, s->o->backtrace_depth, &orig, &depth,
				  timeout_ms(s));
	if (rc == 0)
		fpd_debug("backtrace_depth %u (the node's own: %u), held by the node's janitor",
			  depth, orig);
	else
		fpd_warn("cannot raise backtrace_depth on %s (%s): stacks stay at the node's depth",
			 s->o->node, strerror(-rc));
}

int
fpd_session_connect(struct fpd_session *s, uint64_t now)
{
	int rc;

	rc = fp_node_connect(s->node, timeout_ms(s));
	/* stopped while connecting: given up, or done after the stop was
	 * asked; then closed before anything is set on the node */
	if (rc == -ECANCELED)
		return 0;
	if (rc == 0 && s->run->stopping) {
		fp_node_disconnect(s->node);
		return 0;
	}
	if (rc < 0) {
		if (!s->ever_connected && !s->patient)
			return connect_error_exit(s, rc);
		if (!s->ever_connected && !s->first_error) {
			/* one node of several: the others go on, this one is
			 * tried again; what it would have ended with is kept
			 * for the end of the run */
			fpd_warn("cannot reach %s yet: %s; trying again", s->o->node,
				 connect_error_text(rc));
			s->first_error = connect_error_code(rc);
		}
		if (s->backoff_us >= BACKOFF_MAX_US / 2 || fp_log_enabled(FP_LOG_DEBUG))
			fpd_info("reconnect to %s failed: %s", s->o->node,
				 connect_error_text(rc));
		s->backoff_us = s->backoff_us * 2 > BACKOFF_MAX_US ?
				BACKOFF_MAX_US : s->backoff_us * 2;
		s->reconnect_at = now + s->backoff_us;
		return 0;
	}

	s->connected = true;
	fpd_cost_set_node(&s->cost, fp_node_request_path(s->node),
			  fp_node_schedulers(s->node), fp_node_is_local(s->node));
	fpd_cost_window_start(&s->cost, now, fpd_cpu_us());
	if (strcmp(fp_node_name(s->node), s->o->node) != 0 && !s->ever_connected)
		fpd_info("%s answers as %s: carrying on under that name",
			 s->o->node, fp_node_name(s->node));
	fpd_info("%s to %s (OTP %s%s) as %s",
		 s->ever_connected ? "reconnected" : "connected",
		 s->o->node, fp_node_otp_release(s->node),
		 fp_node_is_local(s->node) ? ", on this host" : "",
		 fp_node_self_name(s->node));

	attach_janitor(s);
	rc = fpd_targets_check_pins(s, timeout_ms(s));
	if (rc == 0)
		rc = fpd_session_start_watcher(s);
	if (rc)
		return rc;
	if (fp_node_fd(s->node) < 0) {
		/* a wait given up for a stop closed the connection; the
		 * janitor puts back what it set */
		s->connected = false;
		fpd_cost_set_node(&s->cost, fp_node_request_path(s->node), 0, false);
		return 0;
	}

	rc = fpd_trace_start(s->trace, s->node, timeout_ms(s));
	if (rc)
		return rc;

	rc = fp_node_scan_prepare(s->node, timeout_ms(s));
	if (rc < 0)
		fpd_warn("cannot prepare the selection scan on %s (%s): only pinned processes are sampled",
			 s->o->node, strerror(-rc));
	else
		fpd_debug("selection scan: %s", fp_node_scan_iterates(s->node) ?
			  "erlang:processes_iterator/0" : "lists:sublist(erlang:processes(), ...)");

	s->ever_connected = true;
	s->t.scans_done = s->t.scan_skips = 0;
	fp_select_reset(s->select);
	fp_sampler_reset(s->sampler);
	s->t.ntop = 0;
	s->sm.owed = 0;
	s->sm.last_tick_mono = 0;
	fpd_sampling_rebuild(s);
	s->t.next_select_mono = now;
	fpd_output_set_otp_release(s->out, fp_node_otp_release(s->node));
	s->runq_limit = s->o->breaker_run_queue ? s->o->breaker_run_queue :
			RUNQ_PER_SCHEDULER * fp_node_schedulers(s->node);
	say_connected(s);
	fpd_sampling_connected(s, now);
	return 0;
}

/* Why the node's perf map was refused, asked again for the message. */
static const char *
foreign_map_why(pid_t pid)
{
	char path[64];
	struct stat proc, st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &proc) < 0)
		return "cannot be checked";
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
	fd = fpd_perf_map_open(path, proc.st_uid, &st);
	if (fd >= 0) {
		close(fd);
		return "was replaced while it was checked";
	}
	return fpd_perf_map_why(fd);
}

int
fpd_session_perf_pid(struct fpd_session *s, pid_t *pid)
{
	const char *node = fp_node_name(s->node);
	uint64_t us = 0;
	int rc;

	*pid = 0;
	if (!s->connected)
		return 0;
	if (!fp_node_is_local(s->node)) {
		fpd_fatal("--perf auto: %s is not on this host (its address is none of ours); --perf samples a node on this host only",
			  node);
		return FPD_EXIT_CONFIG;
	}
	rc = fp_node_os_pid(s->node, timeout_ms(s), pid, &us);
	/* stopped while waiting, the connection closed: the run ends as
	 * any stopped run does */
	if (rc == -ECANCELED) {
		s->connected = false;
		fpd_cost_set_node(&s->cost, fp_node_request_path(s->node), 0, false);
		*pid = 0;
		return 0;
	}
	if (rc < 0) {
		fpd_fatal("--perf auto: %s did not tell its OS pid: %s",
			  node, rc == -EPROTO ? "it answered os:getpid/0 with no pid" :
			  strerror(-rc));
		*pid = 0;
		return rc == -EPROTO ? FPD_EXIT_SOFTWARE : FPD_EXIT_UNAVAILABLE;
	}
	fpd_cost_other(&s->cost, us);
	switch (fpd_perf_pid_check(NULL, NULL, *pid, node, fp_node_fd(s->node))) {
	case FPD_PERF_PID_OK:
		fpd_info("--perf auto: %s is OS process %d", node, (int)*pid);
		return 0;
	case FPD_PERF_PID_NONE:
		fpd_fatal("--perf auto: %s says its OS pid is %d, and there is no process %d here (is the node in another pid namespace, a container?)",
			  node, (int)*pid, (int)*pid);
		break;
	case FPD_PERF_PID_OTHER:
		fpd_fatal("--perf auto: %s says its OS pid is %d, and process %d here is not that node (it does not hold the node's end of the connection, or, where that cannot be seen, was not started with -sname or -name naming it): is the node in another pid namespace? give --perf OSPID",
			  node, (int)*pid, (int)*pid);
		break;
	case FPD_PERF_PID_STALE_MAP:
		fpd_fatal("--perf auto: %s (OS pid %d) has no perf map of its own: /tmp/perf-%d.map is older than the process, left by an earlier one of that pid; start the node with +JPperf true",
			  node, (int)*pid, (int)*pid);
		break;
	case FPD_PERF_PID_FOREIGN_MAP:
		fpd_fatal("--perf auto: %s (OS pid %d) has no perf map of its own: /tmp/perf-%d.map %s",
			  node, (int)*pid, (int)*pid, foreign_map_why(*pid));
		break;
	case FPD_PERF_PID_NO_MAP:
		fpd_fatal("--perf auto: %s (OS pid %d) has no perf map /tmp/perf-%d.map: start the node with +JPperf true (or the daemon does not see the node's /tmp)",
			  node, (int)*pid, (int)*pid);
		break;
	}
	*pid = 0;
	return FPD_EXIT_CONFIG;
}

/* Leave the janitor now rather than when the connection closes, so that
 * the flag is back before we exit. */
void
fpd_session_restore_node(struct fpd_session *s)
{
	unsigned orig, depth;
	int rc;

	if (!s->connected)
		return;
	rc = fp_node_depth_detach(s->node, &orig, &depth, timeout_ms(s));
	if (rc == 0)
		fpd_debug("backtrace_depth now %u (the node's own: %u)", depth, orig);
	else if (rc != -ENOENT)
		fpd_warn("could not leave the janitor on %s (%s): the node puts backtrace_depth back when the connection closes",
			 s->o->node, strerror(-rc));
}

