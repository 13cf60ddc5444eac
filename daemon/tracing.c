/*
 * flame_profd — --trace in a node session (tracing.h).
 *
 * Each stack the tracer hands over becomes one sample of status traced
 * written its number of units times (FPD_TRACE_UNIT_US each, or
 * FPD_TRACE_CALL_UNIT_US for --trace-call), so every
 * reader that counts samples weighs it by its time; the first of them
 * carries the calls that entered the stack as its reductions value and
 * delta, the rest 0 (flame_prof --weight reductions: calls per stack).
 * Time scheduled out gets a SLEEP frame on top of the stack it left,
 * as eflame draws it.
 *
 * --trace-call is the same trace with another tracer on the node
 * (fp/trace.h, "Calls"): its stacks arrive rooted at the call they
 * belong to, and its messages name it instead of --trace.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "daemon-log.h"
#include "options.h"
#include "recorder.h"
#include "tracing.h"
#include "util.h"
#include "util-escape.h"
#include "util-mem.h"
#include "fp/trace.h"

/* The events the tracer holds are taken this often: at --trace-max-rate
 * (20000 a second by default) a reply carries up to 4000 of them. */
#define DUMP_EVERY_US 200000u
/* Trace messages waiting in the tracer before it stops as behind. */
#define MAX_QUEUE 5000u

struct fpd_trace {
	const struct fpd_options *o;
	struct fpd_recorder *rec;
	struct fpd_cost *cost;
	struct fp_trace *t;
	bool tried;		/* started once: never again in the run */
	bool ended;		/* its end said */
	bool stop_sent;
	uint64_t next_mono;
	uint64_t events;	/* as the tracer last counted them */
	uint64_t written;	/* samples */
	uint64_t stacks;
	struct fp_frame frames[FP_TRACE_DEPTH_MAX + 2];
};

struct fpd_trace *
fpd_trace_new(const struct fpd_options *o, struct fpd_recorder *rec,
	      struct fpd_cost *cost)
{
	struct fpd_trace *tr;

	if (!o->ntraces && !o->trace_call)
		return NULL;
	tr = xzalloc(sizeof(*tr));
	tr->o = o;
	tr->rec = rec;
	tr->cost = cost;
	tr->t = fp_trace_new();
	return tr;
}

void
fpd_trace_destroy(struct fpd_trace *tr)
{
	if (!tr)
		return;
	fp_trace_destroy(tr->t);
	free(tr);
}

/* What fp_trace_start() said of --trace-call */
static int
call_started(struct fpd_trace *tr, struct fp_node *node, int rc,
	     const char *why, const char *mode)
{
	const struct fpd_options *o = tr->o;
	struct fp_text text = { 0 };

	fp_text_puts_escaped(&text, o->trace_call, NULL);
	fp_text_putc(&text, '\0');
	switch (rc) {
	case 0:
		fpd_info("--trace-call: tracing the next %u call(s) of %s on %s for at most %.1f s (%s; at most %u events, %u a second)",
			 o->trace_calls, text.buf, fp_node_name(node),
			 (double)o->trace_for_us / 1e6,
			 strcmp(mode, "session") == 0 ?
			 "a trace session of its own" :
			 "before OTP 27: processes no other tracer holds, from when the tracer sees the call",
			 o->trace_max_events, o->trace_max_rate);
		fpd_recorder_note(tr->rec, "trace: started, %s, unit=%uus, calls of %s",
				  mode, FPD_TRACE_CALL_UNIT_US, text.buf);
		tr->next_mono = fpd_now_mono_us() + DUMP_EVERY_US;
		rc = 0;
		break;
	case -ENOENT:
		fpd_fatal("--trace-call: %s is not a loaded, exported function of %s (nothing is loaded for it)",
			  text.buf, fp_node_name(node));
		rc = FPD_EXIT_USAGE;
		break;
	case -ELOOP:
		fpd_fatal("--trace-call: refused on %s: a process loops in %s, with nothing of its own below it (%s): traced, each of its calls would keep a stack frame for as long as the loop runs; trace a function it calls instead",
			  fp_node_name(node), text.buf, why);
		rc = FPD_EXIT_USAGE;
		break;
	case -EPERM:
		fpd_fatal("--trace-call: refused on %s, to leave other tracers as they are (before OTP 27 trace patterns are the node's): %s",
			  fp_node_name(node), why);
		rc = FPD_EXIT_USAGE;
		break;
	default:
		fpd_fatal("--trace-call: the tracer did not start on %s: %s",
			  fp_node_name(node), strerror(-rc));
		rc = rc == -EPROTO ? FPD_EXIT_SOFTWARE : FPD_EXIT_UNAVAILABLE;
		break;
	}
	fp_text_free(&text);
	return rc;
}

int
fpd_trace_start(struct fpd_trace *tr, struct fp_node *node,
		unsigned timeout_ms)
{
	struct fp_trace_config cfg;
	char why[256], mode[32];
	int rc;

	if (!tr || tr->tried)
		return 0;
	tr->tried = true;
	cfg = (struct fp_trace_config){
		.targets = tr->o->traces,
		.ntargets = tr->o->ntraces,
		.unit_us = tr->o->trace_call ? FPD_TRACE_CALL_UNIT_US :
			   FPD_TRACE_UNIT_US,
		.for_ms = tr->o->trace_for_us / 1000,
		.max_events = tr->o->trace_max_events,
		.max_rate = tr->o->trace_max_rate,
		.max_queue = MAX_QUEUE,
		.depth = tr->o->backtrace_depth < FP_TRACE_DEPTH_MAX ?
			 tr->o->backtrace_depth : FP_TRACE_DEPTH_MAX,
		.follow = tr->o->trace_follow,
		.servers = tr->o->trace_servers,
		.nservers = tr->o->ntrace_servers,
	};
	if (tr->o->trace_call) {
		cfg.call_module = tr->o->trace_call_module;
		cfg.call_function = tr->o->trace_call_function;
		cfg.call_arity = tr->o->trace_call_arity;
		cfg.max_calls = tr->o->trace_calls;
	}
	/* the checks before OTP 27 read every loaded function */
	rc = fp_trace_start(tr->t, node, &cfg, why, sizeof(why), mode,
			    sizeof(mode), timeout_ms < 30000 ? 30000 : timeout_ms);
	if (tr->o->trace_call)
		return call_started(tr, node, rc, why, mode);
	switch (rc) {
	case 0:
		fpd_info("--trace: tracing %zu process(es)%s%s on %s for %.1f s (%s; at most %u events, %u a second)",
			 tr->o->ntraces,
			 tr->o->trace_follow ? " and what they spawn" : "",
			 tr->o->ntrace_servers ? ", and their calls to the servers" : "",
			 fp_node_name(node),
			 (double)tr->o->trace_for_us / 1e6,
			 strcmp(mode, "session") == 0 ? "a trace session of its own" :
			 "no other tracer on the node",
			 tr->o->trace_max_events, tr->o->trace_max_rate);
		fpd_recorder_note(tr->rec, "trace: started, %s, unit=%uus",
				  mode, FPD_TRACE_UNIT_US);
		tr->next_mono = fpd_now_mono_us() + DUMP_EVERY_US;
		return 0;
	case -ESRCH:
		fpd_fatal("--trace: no such process on %s: %s", fp_node_name(node), why);
		return FPD_EXIT_USAGE;
	case -EINVAL:
		fpd_fatal("--trace: %s", why);
		return FPD_EXIT_USAGE;
	case -EPERM:
		fpd_fatal("--trace: refused on %s, to leave other tracers as they are (before OTP 27 a process has one tracer and trace patterns are the node's): %s",
			  fp_node_name(node), why);
		return FPD_EXIT_USAGE;
	default:
		fpd_fatal("--trace: the tracer did not start on %s: %s",
			  fp_node_name(node), strerror(-rc));
		return rc == -EPROTO ? FPD_EXIT_SOFTWARE : FPD_EXIT_UNAVAILABLE;
	}
}

bool
fpd_trace_due(const struct fpd_trace *tr, uint64_t now)
{
	return tr && fp_trace_active(tr->t) && !tr->stop_sent &&
	       now >= tr->next_mono;
}

bool
fpd_trace_stoppable(const struct fpd_trace *tr)
{
	return tr && fp_trace_active(tr->t) && !tr->stop_sent;
}

bool
fpd_trace_over(const struct fpd_trace *tr)
{
	return tr && tr->tried && !fp_trace_active(tr->t);
}

int
fpd_trace_send(struct fpd_trace *tr, struct fp_node *node, bool stop,
	       uint64_t now, uint64_t *id)
{
	int rc = fp_trace_send(tr->t, node, stop, id);

	if (rc == 0 && stop)
		tr->stop_sent = true;
	tr->next_mono = now + DUMP_EVERY_US;
	return rc;
}

static void
write_stack(const struct fp_trace_stack *st, void *data)
{
	struct fpd_trace *tr = data;
	struct fp_sample smp = {
		.pid = st->pid,
		.status = FP_STATUS_TRACED,
		.frames = tr->frames,
	};
	uint32_t n = 0;

	if (!st->on_cpu)
		tr->frames[n++] = (struct fp_frame){
			.module = FP_SLEEP_MODULE, .function = FP_SLEEP_FUNCTION,
		};
	memcpy(tr->frames + n, st->frames, st->nframes * sizeof(*st->frames));
	smp.nframes = n + st->nframes;
	smp.time_us = fpd_recorder_stamp(tr->rec, fpd_now_epoch_us());
	smp.value[FP_METRIC_REDUCTIONS] = smp.delta[FP_METRIC_REDUCTIONS] =
		(int64_t)st->calls;
	smp.has_delta = true;
	tr->stacks++;
	for (uint64_t i = 0; i < st->units; i++) {
		if (fpd_recorder_write(tr->rec, &smp, FPD_RECORD_NODE) == -EAGAIN)
			break;
		tr->written++;
		smp.value[FP_METRIC_REDUCTIONS] = smp.delta[FP_METRIC_REDUCTIONS] = 0;
	}
}

/* With --trace-call, how many calls the trace saw, for its last line */
static void
calls_text(const struct fpd_trace *tr, const struct fp_trace_result *res,
	   char *buf, size_t len)
{
	buf[0] = '\0';
	if (!tr->o->trace_call)
		return;
	snprintf(buf, len, "; %llu of %u call(s) begun, %llu returned%s, %llu skipped (another tracer held their process)",
		 (unsigned long long)res->calls, tr->o->trace_calls,
		 (unsigned long long)res->calls_ended,
		 res->calls > res->calls_ended ? " (the rest cut short: their trees end there)" : "",
		 (unsigned long long)res->calls_skipped);
}

static void
say_end(struct fpd_trace *tr, const struct fp_trace_result *res)
{
	const char *opt = tr->o->trace_call ? "--trace-call" : "--trace";
	const char *why = res->why;
	const char *text = strcmp(why, "duration") == 0 ? "its --trace-for ended" :
			   strcmp(why, "stopped") == 0 ? "the daemon stopped it" :
			   strcmp(why, "calls") == 0 ? "its --trace-calls calls returned" :
			   strcmp(why, "total_cap") == 0 ? "it reached --trace-max-events" :
			   strcmp(why, "rate_cap") == 0 ? "a second held more than --trace-max-rate events" :
			   strcmp(why, "behind") == 0 ? "the tracer fell behind the traced process (its queue passed 5000 trace messages)" :
			   why;
	char calls[320];

	if (tr->ended)
		return;
	tr->ended = true;
	if (res->state == FP_TRACE_RUNNING) {
		fpd_warn("%s: the tracer did not answer the stop in time: it removes its flags and patterns when the connection closes; %llu events seen, %llu samples written",
			 opt, (unsigned long long)tr->events, (unsigned long long)tr->written);
		return;
	}
	if (res->state == FP_TRACE_GONE) {
		fpd_warn("%s: the tracer is gone (killed, or it ended and waited in vain): its flags went with it, and it removed its patterns unless killed; %llu events seen, %llu samples written",
			 opt, (unsigned long long)tr->events, (unsigned long long)tr->written);
		fpd_recorder_note(tr->rec, "trace: gone after %llu events",
				  (unsigned long long)tr->events);
		return;
	}
	calls_text(tr, res, calls, sizeof(calls));
	if (res->unkept) {
		size_t used = strlen(calls);

		snprintf(calls + used, sizeof(calls) - used,
			 "; %llu events of processes past the %u kept at once are in no stack",
			 (unsigned long long)res->unkept, FP_TRACE_PROCS_MAX);
	}
	if (strcmp(why, "duration") == 0 || strcmp(why, "stopped") == 0 ||
	    strcmp(why, "calls") == 0)
		fpd_info("%s: ended, %s: %llu events, %llu stacks, %llu samples written%s; flags and patterns removed",
			 opt, text, (unsigned long long)res->events,
			 (unsigned long long)tr->stacks, (unsigned long long)tr->written,
			 calls);
	else
		fpd_warn("%s: stopped itself, %s: %llu events seen (%llu more dropped), %llu stacks, %llu samples written%s; flags and patterns removed",
			 opt, text, (unsigned long long)res->events,
			 (unsigned long long)res->dropped,
			 (unsigned long long)tr->stacks, (unsigned long long)tr->written,
			 calls);
	fpd_recorder_note(tr->rec, "trace: ended (%s) after %llu events, %llu dropped",
			  why, (unsigned long long)res->events,
			  (unsigned long long)res->dropped);
}

void
fpd_trace_on_reply(struct fpd_trace *tr, struct fp_reply *reply)
{
	struct fp_trace_result res;

	if (fp_trace_decode(tr->t, reply, &res, write_stack, tr) < 0) {
		fpd_warn("%s: the tracer's reply could not be read",
			 tr->o->trace_call ? "--trace-call" : "--trace");
		return;
	}
	if (res.events > tr->events) {
		fpd_cost_other(tr->cost, (res.events - tr->events) * FPD_TRACE_EVENT_US);
		tr->events = res.events;
	}
	if (res.state != FP_TRACE_RUNNING)
		say_end(tr, &res);
}

void
fpd_trace_lost(struct fpd_trace *tr)
{
	if (!tr)
		return;
	if (fp_trace_active(tr->t) && !tr->ended) {
		tr->ended = true;
		fpd_warn("%s: the connection went: the tracer removed its flags and patterns on the node; %llu events seen, %llu samples written (not started again)",
			 tr->o->trace_call ? "--trace-call" : "--trace",
			 (unsigned long long)tr->events, (unsigned long long)tr->written);
	}
	/* a new connection does not know the tracer's pid */
	fp_trace_destroy(tr->t);
	tr->t = fp_trace_new();
}

void
fpd_trace_stop(struct fpd_trace *tr, struct fp_node *node,
	       unsigned timeout_ms)
{
	struct fp_trace_result res;
	int rc;

	if (!tr || !fp_trace_active(tr->t))
		return;
	rc = fp_trace_stop(tr->t, node, &res, write_stack, tr, timeout_ms);
	if (rc < 0) {
		fpd_warn("%s: no answer to the stop (%s): the tracer removes its flags and patterns when the connection closes",
			 tr->o->trace_call ? "--trace-call" : "--trace", strerror(-rc));
		return;
	}
	if (res.events > tr->events)
		tr->events = res.events;
	say_end(tr, &res);
}
