/*
 * flame_profd — exact traces of chosen processes (--trace).
 *
 * A tracer on the node, run by the node's own erl_eval (nothing is
 * loaded), traces the processes it is given: every call and return
 * (call, return_to, arity) and every scheduling in and out (running),
 * with monotonic timestamps, and keeps them as they came until the
 * daemon takes them (fp_trace_send()). It is two processes: a sink,
 * which the trace messages go to and which hands them on in batches, and
 * a controller, which the daemon talks to and which holds the patterns,
 * checks the caps and frees a sink that fell behind by killing it. The handle turns them into
 * stacks: per process and stack, the time on a scheduler, the time
 * scheduled out and the calls, handed out in whole units, the
 * remainders below a unit kept for the next reply.
 *
 * On OTP 27 and later the trace lives in a trace session of its own
 * (trace:session_create/3): other tracers keep theirs, and destroying
 * the session removes everything it set. Before OTP 27 a process has one
 * tracer and trace patterns are global: the tracer refuses a process
 * another tracer holds, a node where any process is call-traced, and a
 * node where any function has a trace pattern (so the patterns it sets
 * and removes are nobody else's).
 *
 * Following (fp_trace_config.follow): the targets' flags also carry
 * set_on_spawn, so every process they spawn (a Task, a worker) and that
 * process's own spawns are traced from their first call; their stacks
 * are the request's, handed out with a root frame naming it
 * (FP_TRACE_FOLLOW_MODULE:<target pid>/0, or :traced/0 with several
 * targets). Before OTP 27 the tracer removes the flags of every process
 * it holds when the trace ends, not only the targets'.
 *
 * Servers (fp_trace_config.servers): gen_servers traced whole (without
 * set_on_spawn), with a pattern on gen_server:try_handle_call/4 whose
 * guard lets through only calls from the targets; a server's time and
 * calls count while that frame is on its stack, under the same root
 * frame, and its work for other callers is left out. Before OTP 27 that
 * pattern is the node's: a target that is itself a gen_server loses the
 * frame for calls from others.
 *
 * Calls (fp_trace_config.call_module): instead of processes, the next
 * max_calls calls of one function, in whatever process runs them. A meta
 * trace pattern on the function catches each call's entry in every
 * process (the call trace message carries its arguments, and its end,
 * return_from or exception_from, the value): on OTP 27 and later its
 * match spec turns on the calling process's flags in the trace's session
 * as the call begins; before OTP 27 the tracer does so when the entry
 * reaches it, for a process no other tracer holds (others are skipped,
 * counted), so the call's first moments are the function's own time. The
 * tracer turns the flags off at the call's end, and removes the meta
 * pattern once max_calls calls have begun; the trace ends when they
 * have all returned. Each call's stacks are rooted at
 * FP_TRACE_CALL_MODULE:'<n>'/0, n counting the calls from 1.
 *
 * The controller is linked to the daemon's connection, and the sink to
 * the controller: when the trace ends (its duration, a cap,
 * fp_trace_send(@stop)), the connection closes or the daemon is killed,
 * the flags and patterns (or the session) are removed and both
 * processes exit, holding nothing.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fp/node.h"
#include "fp/term.h"

/* Stacks deeper than this keep their innermost frames (a followed
 * process's stack has one frame more: its root). */
#define FP_TRACE_DEPTH_MAX 128

/* The module of the root frame of a followed process's stacks. */
#define FP_TRACE_FOLLOW_MODULE "FOLLOWED"

/* The module of the root frame of a traced call's stacks. */
#define FP_TRACE_CALL_MODULE "CALL"

struct fp_trace_config {
	const char *const *targets;	/* PID text or registered name */
	size_t ntargets;
	unsigned unit_us;		/* time is handed out in these units */
	uint64_t for_ms;		/* the trace's duration */
	uint64_t max_events;		/* in total */
	uint64_t max_rate;		/* events in any second */
	unsigned max_queue;		/* trace messages waiting: behind */
	unsigned depth;			/* <= FP_TRACE_DEPTH_MAX */
	bool follow;			/* trace what the targets spawn */
	const char *const *servers;	/* gen_servers the targets call */
	size_t nservers;
	const char *call_module;	/* calls of this function instead of
					 * targets, or NULL */
	const char *call_function;
	int call_arity;			/* -1: every arity */
	unsigned max_calls;		/* > 0 */
};

/* What the tracer said of itself in a reply. */
enum fp_trace_state {
	FP_TRACE_RUNNING = 0,
	FP_TRACE_STOPPED,	/* stopped and undone: why says why */
	FP_TRACE_GONE,		/* no tracer any more */
};

struct fp_trace_result {
	enum fp_trace_state state;
	char why[64];		/* duration, total_cap, rate_cap, behind,
				 * stopped */
	uint64_t events;	/* trace events taken since the start */
	uint64_t dropped;	/* events that came after a stop, dropped */
	uint64_t calls;		/* calls: begun */
	uint64_t calls_ended;	/* calls: returned */
	uint64_t calls_skipped;	/* calls: of processes another tracer
				 * held (before OTP 27) */
	uint64_t unkept;	/* events of processes past the ones kept
				 * at once (FP_TRACE_PROCS_MAX): in no
				 * stack */
};

/* Processes whose stacks a trace keeps at once: followed processes, or
 * with --trace-call processes inside a call. */
#define FP_TRACE_PROCS_MAX 1024u

/* One stack's share since the last reply. */
struct fp_trace_stack {
	struct fp_pid pid;
	bool on_cpu;			/* false: the time scheduled out */
	bool followed;			/* spawned by a target: frames end
					 * with the follow frame */
	const struct fp_frame *frames;	/* leaf first */
	uint32_t nframes;
	uint64_t units;			/* time, in fp_trace_config.unit_us */
	uint64_t calls;			/* calls that entered this stack */
};

struct fp_trace;

/** A trace handle, not started. Freed with fp_trace_destroy(). */
struct fp_trace *
fp_trace_new(void);

/** NULL is a no-op. Does not touch the node: the tracer goes with the
 * connection, or fp_trace_send(@stop). */
void
fp_trace_destroy(struct fp_trace *t);

/**
 * Start the tracer on @node for @cfg's targets. Synchronous (up to
 * @timeout_ms: the checks before OTP 27 read every loaded function's
 * trace state). Send nothing else meanwhile: other replies are dropped.
 *
 * @param[out] why   on -EPERM and -ESRCH, the node's reason (text)
 * @param[out] mode  "session" or "legacy" on success
 * @return 0; -ESRCH (a target is not alive or not registered), -ENOENT
 *         (calls: the function is not loaded or not exported), -EPERM
 *         (refused: tracing it would change another tracer's), -EINVAL
 *         (a target is no pid or name), or as fp_node_receive().
 */
int
fp_trace_start(struct fp_trace *t, struct fp_node *node,
	       const struct fp_trace_config *cfg, char *why, size_t whylen,
	       char *mode, size_t modelen, unsigned timeout_ms);

/**
 * Ask the tracer for what it holds (@stop: stop, undo and hand over
 * the rest). Asynchronous: the reply carries *@id, to fp_trace_decode().
 * @return 0, -ENOENT when not started, or a negative errno of the send.
 */
int
fp_trace_send(struct fp_trace *t, struct fp_node *node, bool stop,
	      uint64_t *id);

/**
 * Decode a reply to fp_trace_send(), adding its events to the handle's
 * aggregate: @each(@stack, @data) for each stack with a whole unit
 * (valid during the call only), and the tracer's state in @res. A state
 * other than FP_TRACE_RUNNING ends the handle's trace and hands out
 * every stack's rest, rounded to the nearest unit.
 * @return 0, or -EPROTO for a reply of another shape.
 */
int
fp_trace_decode(struct fp_trace *t, struct fp_reply *reply,
		struct fp_trace_result *res,
		void (*each)(const struct fp_trace_stack *stack, void *data),
		void *data);

/**
 * Stop the trace and decode what it held, as fp_trace_decode(), waiting
 * up to @timeout_ms (other replies that arrive meanwhile are dropped).
 * @return 0, -ENOENT when not started, -EPROTO, or as fp_node_receive().
 */
int
fp_trace_stop(struct fp_trace *t, struct fp_node *node,
	      struct fp_trace_result *res,
	      void (*each)(const struct fp_trace_stack *stack, void *data),
	      void *data, unsigned timeout_ms);

/** Started and not yet seen to end. */
bool
fp_trace_active(const struct fp_trace *t);
