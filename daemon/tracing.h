/*
 * flame_profd — --trace in a node session: the tracer started at the
 * first connect (fp/trace.h), the events it forwards taken five times a
 * second, turned into stacks and written as samples of status traced,
 * its end said once.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fp/node.h"

struct fpd_options;
struct fpd_recorder;
struct fpd_cost;

/* A traced sample stands for this much time on a scheduler (or
 * scheduled out): docs/FORMAT.md, "Traced samples". */
#define FPD_TRACE_UNIT_US 100u

/* The same for --trace-call, whose trees are each one call's: a
 * gen_server callback of 30 µs would round to nothing in 100 µs units. */
#define FPD_TRACE_CALL_UNIT_US 10u

/* What a trace event costs the node, µs of a scheduler: the traced
 * process's trace call, the tracer's taking it and its share of the
 * hand-over (bench/trace/run: 4.1-5.3 µs, docs/PERFORMANCE.md). */
#define FPD_TRACE_EVENT_US 6u

struct fpd_trace;

/** For @o->traces, writing through @rec and counting in @cost (neither
 * owned); NULL when @o asks for no trace. */
struct fpd_trace *
fpd_trace_new(const struct fpd_options *o, struct fpd_recorder *rec,
	      struct fpd_cost *cost);

/** NULL is a no-op. */
void
fpd_trace_destroy(struct fpd_trace *tr);

/**
 * Connected: start the tracer, once per run (a trace cut short by a
 * lost connection is not started again). Synchronous.
 * @return 0, or an exit code with the reason said: FPD_EXIT_USAGE (a
 *         target is no process of the node, or tracing it would change
 *         another tracer's flags or patterns), FPD_EXIT_SOFTWARE.
 */
int
fpd_trace_start(struct fpd_trace *tr, struct fp_node *node,
		unsigned timeout_ms);

/** Whether a request for the tracer's events is due at @now. */
bool
fpd_trace_due(const struct fpd_trace *tr, uint64_t now);

/** Whether a trace runs that no stop was sent to. */
bool
fpd_trace_stoppable(const struct fpd_trace *tr);

/** Whether the trace was started and has ended (or its connection went). */
bool
fpd_trace_over(const struct fpd_trace *tr);

/** Ask for it (@stop: stop the trace too). 0, or the send's errno. */
int
fpd_trace_send(struct fpd_trace *tr, struct fp_node *node, bool stop,
	       uint64_t now, uint64_t *id);

/** Its reply: the stacks written, an end said. */
void
fpd_trace_on_reply(struct fpd_trace *tr, struct fp_reply *reply);

/** The connection went: the tracer undid itself on the node. */
void
fpd_trace_lost(struct fpd_trace *tr);

/**
 * Stopping: stop the trace and write what it held, waiting for the
 * reply (other replies are dropped: call after the last sample).
 */
void
fpd_trace_stop(struct fpd_trace *tr, struct fp_node *node,
	       unsigned timeout_ms);
