/*
 * flame_profd — the aggregate of --trace, in the daemon (internal to
 * libsample; trace.c feeds it the events the node's tracer forwards).
 *
 * Per traced process it keeps the call stack the events imply and
 * charges the time since the process's previous event to the stack it
 * had, on a scheduler or, between out and in, scheduled out; each call
 * counts once for the stack it enters. Pure C: no erl_interface.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fp/trace.h"

enum trace_ev {
	TRACE_EV_CALL = 0,
	TRACE_EV_RETURN_TO,
	TRACE_EV_IN,
	TRACE_EV_OUT,
	TRACE_EV_OTHER,
	TRACE_EV_ENTER,		/* --trace-call: a call of the function begins */
	TRACE_EV_LEAVE,		/* ... and returns, or exits with an exception */
};

/* No frame: return_to undefined, in/out 0. */
#define TRACE_NO_FRAME UINT32_MAX

struct trace_agg;

/** An empty aggregate: stacks keep their innermost @depth frames (1 to
 * FP_TRACE_DEPTH_MAX); time is handed out in units of @unit timestamp
 * ticks (> 0). Freed with trace_agg_destroy(). */
struct trace_agg *
trace_agg_new(unsigned depth, uint64_t unit);

/** NULL is a no-op. */
void
trace_agg_destroy(struct trace_agg *a);

/** The id of frame @module:@function/@arity (copied), the same for the
 * same frame for the aggregate's life. */
uint32_t
trace_agg_frame(struct trace_agg *a, const char *module, const char *function,
		uint32_t arity);

/**
 * One trace event of @pid at timestamp @ts (ticks; any origin, may be
 * negative). @frame is the event's function (trace_agg_frame()) or
 * TRACE_NO_FRAME. A timestamp earlier than the process's previous one
 * charges nothing.
 */
void
trace_agg_event(struct trace_agg *a, const struct fp_pid *pid,
		enum trace_ev ev, uint32_t frame, int64_t ts);

/**
 * Hand out each stack's whole units (@final: rounded to the nearest, and
 * everything dropped after; otherwise the remainder below a unit and the
 * calls of a stack with no whole unit yet stay for the next time, but
 * with trace_agg_calls() the stacks of the calls ended since the last
 * flush, rounded at their end, are handed out and dropped):
 * @each(@stack, @data) for each stack with at least one unit, the stack
 * valid during the call only.
 */
void
trace_agg_flush(struct trace_agg *a, bool final,
		void (*each)(const struct fp_trace_stack *stack, void *data),
		void *data);

/**
 * Name @pid as a target of the trace: its stacks get no follow frame.
 * Call before its first event.
 */
void
trace_agg_target(struct trace_agg *a, const struct fp_pid *pid);

/**
 * Follow: the stacks of every process not named by trace_agg_target()
 * (one that inherited its flags on spawn) get frame @root (an id from
 * trace_agg_frame()) as their root. Call before the first event.
 */
void
trace_agg_follow(struct trace_agg *a, uint32_t root);

/**
 * Name @pid as a server of the trace: its time and calls count only
 * while frame @marker (an id from trace_agg_frame()) is on its stack.
 * Call before its first event.
 */
void
trace_agg_server(struct trace_agg *a, const struct fp_pid *pid,
		 uint32_t marker);

/**
 * Calls (--trace-call): each call, from its TRACE_EV_ENTER to its
 * TRACE_EV_LEAVE, is a stack tree of its own under the root frame
 * FP_TRACE_CALL_MODULE:'<n>'/0 (n counting from 1 in the order the
 * calls began); a process's events outside a call are left out. Call
 * before the first event.
 */
void
trace_agg_calls(struct trace_agg *a);

/** Calls begun and calls returned (trace_agg_calls()). */
void
trace_agg_call_counts(const struct trace_agg *a, uint64_t *begun,
		      uint64_t *ended);

/** The stacks @a holds: with trace_agg_calls(), those of the calls in
 * progress and of the calls ended since the last flush (for tests). */
uint32_t
trace_agg_stacks(const struct trace_agg *a);

/** Events left out: they came from a new process past the cap of
 * processes an aggregate keeps (with trace_agg_calls(), of processes
 * inside a call at once). */
uint64_t
trace_agg_unkept(const struct trace_agg *a);

struct fp_trace;

/**
 * Give @t a fresh aggregate (as fp_trace_start() does with the node's
 * clock): @unit timestamp ticks per unit, stacks of at most @depth
 * frames. For tests that decode replies without a node.
 */
void
trace_attach(struct fp_trace *t, unsigned depth, uint64_t unit);

/**
 * The same for --trace-call's tracer: a meta trace's erlang:now/0
 * timestamp (µs) becomes µs * @ticks_per_us - @offset.
 */
void
trace_attach_calls(struct fp_trace *t, unsigned depth, uint64_t unit,
		   uint64_t ticks_per_us, int64_t offset);
