/*
 * flame_profd — unit tests: the --trace aggregate (trace-agg.h) on
 * synthetic event sequences: the stack rules (calls, returns that skip
 * frames or were never seen called, a trace that starts mid-stack, tail
 * calls, the depth cap), the clock (on and off a scheduler, equal and
 * earlier timestamps, several processes), following (spawned processes'
 * stacks rooted at the follow frame, the cap on processes, a server's
 * work counted only for the target's calls), the units
 * handed out (remainders and calls carried, the final rounding) and
 * --trace-call's trees (one per call, nothing outside a call, a call's
 * rounding over many stacks, its process and stacks freed once it has
 * ended and been handed out).
 */
#include <stdio.h>
#include <string.h>

#include "fp-test.h"
#include "trace-agg.h"

#define MAX_SEEN 16

/* What one flush handed out, each stack as "pid on|off leaf;...;root". */
struct seen {
	unsigned n;
	char key[MAX_SEEN][256];
	uint64_t units[MAX_SEEN], calls[MAX_SEEN];
};

static void
each(const struct fp_trace_stack *st, void *data)
{
	struct seen *s = data;
	unsigned i = s->n++;
	size_t len;

	fp_assert_int_lt(i, MAX_SEEN);
	len = (size_t)snprintf(s->key[i], sizeof(s->key[i]), "%u %s",
			       st->pid.num, st->on_cpu ? "on" : "off");
	for (uint32_t k = 0; k < st->nframes; k++)
		len += (size_t)snprintf(s->key[i] + len, sizeof(s->key[i]) - len,
					"%s%s", k ? ";" : " ", st->frames[k].function);
	s->units[i] = st->units;
	s->calls[i] = st->calls;
}

/* The units (and calls through @calls) of @key, or -1 if not handed out. */
static long
units_of(const struct seen *s, const char *key, long *calls)
{
	for (unsigned i = 0; i < s->n; i++)
		if (strcmp(s->key[i], key) == 0) {
			if (calls)
				*calls = (long)s->calls[i];
			return (long)s->units[i];
		}
	return -1;
}

/* A flush's stacks counted, not named: units and calls summed. */
static void
each_count(const struct fp_trace_stack *st, void *data)
{
	struct seen *s = data;

	s->n++;
	s->units[0] += st->units;
	s->calls[0] += st->calls;
}

static const struct fp_pid P1 = { .num = 81 }, P2 = { .num = 82 };

/* frame ids named by their function, all in module m */
static uint32_t
fr(struct trace_agg *a, const char *fun)
{
	return trace_agg_frame(a, "m", fun, 0);
}

static void
ev(struct trace_agg *a, const struct fp_pid *p, enum trace_ev e,
   const char *fun, int64_t ts)
{
	trace_agg_event(a, p, e, fun ? fr(a, fun) : TRACE_NO_FRAME, ts);
}

START_TEST(frames_interned)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	uint32_t x = trace_agg_frame(a, "m", "f", 1);

	fp_assert_int_eq(trace_agg_frame(a, "m", "f", 1), x);
	fp_assert_int_ne(trace_agg_frame(a, "m", "f", 2), x);
	fp_assert_int_ne(trace_agg_frame(a, "n", "f", 1), x);
	/* past the first table's size: every frame still found */
	for (int i = 0; i < 500; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		fp_assert_int_eq(trace_agg_frame(a, "m", name, 0),
				 trace_agg_frame(a, "m", name, 0));
	}
	fp_assert_int_eq(trace_agg_frame(a, "m", "f", 1), x);
	trace_agg_destroy(a);
	trace_agg_destroy(NULL);
}
END_TEST

/* call pushes, return_to cuts back; calls count for the stack entered */
START_TEST(calls_and_returns)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	long calls = -1;

	ev(a, &P1, TRACE_EV_CALL, "loop", 0);
	ev(a, &P1, TRACE_EV_CALL, "handle", 100);
	ev(a, &P1, TRACE_EV_CALL, "work", 300);
	ev(a, &P1, TRACE_EV_RETURN_TO, "handle", 1000);
	ev(a, &P1, TRACE_EV_RETURN_TO, "loop", 1100);
	ev(a, &P1, TRACE_EV_CALL, "handle", 1200);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on loop", &calls), 2);
	fp_assert_int_eq(calls, 1);
	/* two calls entered handle, one of them after the flush's time */
	fp_assert_int_eq(units_of(&s, "81 on handle;loop", &calls), 3);
	fp_assert_int_eq(calls, 2);
	fp_assert_int_eq(units_of(&s, "81 on work;handle;loop", &calls), 7);
	fp_assert_int_eq(calls, 1);
	fp_assert_int_eq(s.n, 3);
	trace_agg_destroy(a);
}
END_TEST

/* an exception (or tail calls) returns past several frames at once */
START_TEST(return_skips_frames)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };

	ev(a, &P1, TRACE_EV_CALL, "a", 0);
	ev(a, &P1, TRACE_EV_CALL, "b", 0);
	ev(a, &P1, TRACE_EV_CALL, "c", 0);
	ev(a, &P1, TRACE_EV_CALL, "d", 0);
	ev(a, &P1, TRACE_EV_RETURN_TO, "a", 400);
	ev(a, &P1, TRACE_EV_OTHER, NULL, 600);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on d;c;b;a", NULL), 4);
	fp_assert_int_eq(units_of(&s, "81 on a", NULL), 2);
	fp_assert_int_eq(s.n, 2);
	trace_agg_destroy(a);
}
END_TEST

/* A fun run by a function with no pattern (lists:map/2 under
 * handle_call) returns to it: that function takes the fun's place and
 * handle_call stays under it, until a return to handle_call cuts back. */
START_TEST(return_to_unpatterned)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };

	ev(a, &P1, TRACE_EV_CALL, "loop", 0);
	ev(a, &P1, TRACE_EV_CALL, "handle_call", 0);
	ev(a, &P1, TRACE_EV_CALL, "fun", 0);
	ev(a, &P1, TRACE_EV_RETURN_TO, "map", 100);
	ev(a, &P1, TRACE_EV_CALL, "fun", 300);
	ev(a, &P1, TRACE_EV_RETURN_TO, "map", 400);
	ev(a, &P1, TRACE_EV_RETURN_TO, "handle_call", 500);
	ev(a, &P1, TRACE_EV_RETURN_TO, "loop", 700);
	ev(a, &P1, TRACE_EV_OTHER, NULL, 800);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on fun;handle_call;loop", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 on fun;map;handle_call;loop", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 on map;handle_call;loop", NULL), 3);
	fp_assert_int_eq(units_of(&s, "81 on handle_call;loop", NULL), 2);
	fp_assert_int_eq(units_of(&s, "81 on loop", NULL), 1);
	fp_assert_int_eq(s.n, 5);
	trace_agg_destroy(a);
}
END_TEST

/* The trace starts inside a stack: the first event only sets the clock,
 * a return to a function never seen called takes the returning frame's
 * place, and return_to undefined keeps the stack. */
START_TEST(starts_mid_stack)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	long calls = -1;

	ev(a, &P1, TRACE_EV_RETURN_TO, "inner", 5000);
	ev(a, &P1, TRACE_EV_RETURN_TO, "outer", 5300);
	ev(a, &P1, TRACE_EV_RETURN_TO, NULL, 5500);
	ev(a, &P1, TRACE_EV_CALL, "x", 5600);
	ev(a, &P1, TRACE_EV_RETURN_TO, "outer", 5900);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on inner", NULL), 3);
	fp_assert_int_eq(units_of(&s, "81 on outer", NULL), 3);
	fp_assert_int_eq(units_of(&s, "81 on x;outer", &calls), 3);
	fp_assert_int_eq(calls, 1);
	fp_assert_int_eq(s.n, 3);
	trace_agg_destroy(a);
}
END_TEST

/* scheduled out and in with no call between: the time out is kept apart,
 * on the stack the process left */
START_TEST(out_in_without_calls)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };

	ev(a, &P1, TRACE_EV_OUT, "loop", 0);
	ev(a, &P1, TRACE_EV_IN, "loop", 700);
	ev(a, &P1, TRACE_EV_OUT, "loop", 900);
	ev(a, &P1, TRACE_EV_IN, "loop", 1200);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 off loop", NULL), 10);
	fp_assert_int_eq(units_of(&s, "81 on loop", NULL), 2);
	fp_assert_int_eq(s.n, 2);
	trace_agg_destroy(a);

	/* a first event of in: the time before it was scheduled out, and
	 * in starts an empty stack at the function scheduled in */
	a = trace_agg_new(8, 100);
	memset(&s, 0, sizeof(s));
	ev(a, &P1, TRACE_EV_IN, NULL, 0);
	ev(a, &P1, TRACE_EV_OUT, NULL, 100);
	ev(a, &P1, TRACE_EV_IN, "loop", 400);
	ev(a, &P1, TRACE_EV_OUT, "loop", 600);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 off", NULL), 3);
	fp_assert_int_eq(units_of(&s, "81 on loop", NULL), 2);
	fp_assert_int_eq(s.n, 3);
	trace_agg_destroy(a);
}
END_TEST

/* equal timestamps charge nothing; an earlier one neither, and the
 * clock stays where it was */
START_TEST(timestamps_equal_or_earlier)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	long calls = -1;

	ev(a, &P1, TRACE_EV_CALL, "a", -1000);
	ev(a, &P1, TRACE_EV_CALL, "b", -1000);
	ev(a, &P1, TRACE_EV_RETURN_TO, "a", -1000);
	ev(a, &P1, TRACE_EV_CALL, "b", -1000);
	ev(a, &P1, TRACE_EV_OTHER, NULL, -2000);
	ev(a, &P1, TRACE_EV_OTHER, NULL, -800);
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on b;a", &calls), 2);
	fp_assert_int_eq(calls, 2);
	fp_assert_int_eq(units_of(&s, "81 on a", NULL), -1);
	fp_assert_int_eq(s.n, 1);
	trace_agg_destroy(a);
}
END_TEST

/* a function already on the stack cuts it back there (tail calls and
 * loops re-enter without a return_to); deep stacks keep the innermost */
START_TEST(reentry_and_depth)
{
	struct trace_agg *a = trace_agg_new(3, 100);
	struct seen s = { 0 };

	ev(a, &P1, TRACE_EV_CALL, "loop", 0);
	ev(a, &P1, TRACE_EV_CALL, "step", 0);
	ev(a, &P1, TRACE_EV_CALL, "loop", 100);
	ev(a, &P1, TRACE_EV_CALL, "d1", 200);
	ev(a, &P1, TRACE_EV_CALL, "d2", 200);
	ev(a, &P1, TRACE_EV_CALL, "d3", 200);
	ev(a, &P1, TRACE_EV_CALL, "d4", 200);
	ev(a, &P1, TRACE_EV_OTHER, NULL, 700);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on step;loop", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 on loop", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 on d4;d3;d2", NULL), 5);
	fp_assert_int_eq(s.n, 3);
	trace_agg_destroy(a);
}
END_TEST

/* each process has its own stack and clock */
START_TEST(two_processes)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };

	ev(a, &P1, TRACE_EV_CALL, "a", 0);
	ev(a, &P2, TRACE_EV_CALL, "b", 50);
	ev(a, &P1, TRACE_EV_OUT, "a", 300);
	ev(a, &P2, TRACE_EV_OUT, "b", 550);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on a", NULL), 3);
	fp_assert_int_eq(units_of(&s, "82 on b", NULL), 5);
	fp_assert_int_eq(s.n, 2);
	trace_agg_destroy(a);
}
END_TEST

/* Following: a target's stacks are as they were, a spawned process's
 * end with the follow frame as their root; without follow, none has it. */
START_TEST(followed_rooted)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	long calls = 0;

	trace_agg_target(a, &P1);
	trace_agg_follow(a, trace_agg_frame(a, FP_TRACE_FOLLOW_MODULE,
					    "<0.81.0>", 0));
	ev(a, &P1, TRACE_EV_CALL, "a", 0);
	ev(a, &P2, TRACE_EV_CALL, "task", 0);
	ev(a, &P2, TRACE_EV_CALL, "work", 100);
	ev(a, &P1, TRACE_EV_OUT, "a", 200);
	ev(a, &P2, TRACE_EV_OUT, "work", 400);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on a", NULL), 2);
	fp_assert_int_eq(units_of(&s, "81 on task;<0.81.0>", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 on work;task;<0.81.0>", &calls), 3);
	fp_assert_int_eq(calls, 1);
	fp_assert_int_eq(s.n, 3);
	trace_agg_destroy(a);

	a = trace_agg_new(8, 100);
	memset(&s, 0, sizeof(s));
	trace_agg_target(a, &P1);
	ev(a, &P2, TRACE_EV_CALL, "task", 0);
	ev(a, &P2, TRACE_EV_OUT, "task", 100);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "82 on task", NULL), 1);
	trace_agg_destroy(a);
}
END_TEST

/* Short Tasks of the one target: under its pid, their time adds up to
 * whole units that each alone would not reach. */
START_TEST(followed_tasks_add_up)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	struct fp_pid p;

	trace_agg_target(a, &P1);
	trace_agg_follow(a, trace_agg_frame(a, FP_TRACE_FOLLOW_MODULE,
					    "<0.81.0>", 0));
	for (uint32_t i = 0; i < 10; i++) {
		p = (struct fp_pid){ .num = 500 + i };
		ev(a, &p, TRACE_EV_CALL, "task", 1000 * i);
		ev(a, &p, TRACE_EV_OUT, "task", 1000 * i + 40);
	}
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on task;<0.81.0>", NULL), 4);
	fp_assert_int_eq(s.n, 1);
	trace_agg_destroy(a);
}
END_TEST

/* A followed stack at the depth cap still ends with its root. */
START_TEST(followed_depth)
{
	struct trace_agg *a = trace_agg_new(2, 100);
	struct seen s = { 0 };

	trace_agg_follow(a, trace_agg_frame(a, FP_TRACE_FOLLOW_MODULE,
					    "traced", 0));
	ev(a, &P2, TRACE_EV_CALL, "x", 0);
	ev(a, &P2, TRACE_EV_CALL, "y", 0);
	ev(a, &P2, TRACE_EV_CALL, "z", 0);
	ev(a, &P2, TRACE_EV_OUT, "z", 100);
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "82 on z;y;traced", NULL), 1);
	trace_agg_destroy(a);
}
END_TEST

/* A server counts only while the marker (the pattern lets its call
 * through for a target's call only) is on its stack: its other work,
 * before, between and after, is nobody's. */
START_TEST(server_marked_only)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	long calls = 0;

	trace_agg_target(a, &P1);
	trace_agg_server(a, &P2, fr(a, "try"));
	trace_agg_follow(a, trace_agg_frame(a, FP_TRACE_FOLLOW_MODULE,
					    "<0.81.0>", 0));
	/* another caller's call: no marker */
	ev(a, &P2, TRACE_EV_CALL, "loop", 0);
	ev(a, &P2, TRACE_EV_CALL, "handle_msg", 100);
	ev(a, &P2, TRACE_EV_CALL, "handle_call", 100);
	ev(a, &P2, TRACE_EV_RETURN_TO, "handle_msg", 400);
	ev(a, &P2, TRACE_EV_CALL, "loop", 400);
	ev(a, &P2, TRACE_EV_OUT, "loop", 500);
	ev(a, &P2, TRACE_EV_IN, "loop", 1000);
	/* the target's call */
	ev(a, &P2, TRACE_EV_CALL, "handle_msg", 1000);
	ev(a, &P2, TRACE_EV_CALL, "try", 1100);
	ev(a, &P2, TRACE_EV_CALL, "handle_call", 1100);
	ev(a, &P2, TRACE_EV_OUT, "handle_call", 1300);
	ev(a, &P2, TRACE_EV_IN, "handle_call", 1400);
	ev(a, &P2, TRACE_EV_RETURN_TO, "handle_msg", 1600);
	ev(a, &P2, TRACE_EV_CALL, "loop", 1700);
	ev(a, &P2, TRACE_EV_OUT, "loop", 1800);
	ev(a, &P2, TRACE_EV_IN, "loop", 5000);
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "82 on handle_call;try;handle_msg;loop;<0.81.0>",
				  &calls), 4);
	fp_assert_int_eq(calls, 1);
	fp_assert_int_eq(units_of(&s, "82 off handle_call;try;handle_msg;loop;<0.81.0>",
				  NULL), 1);
	fp_assert_int_eq(s.n, 2);
	trace_agg_destroy(a);
}
END_TEST

/* A return to a function with no pattern (lists:foldl/3 under
 * handle_call) takes the place of the frame that returned, the frames
 * under it kept; the span goes on until the server is back below the
 * marker. */
START_TEST(server_span_through_unpatterned)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };

	trace_agg_target(a, &P1);
	trace_agg_server(a, &P2, fr(a, "try"));
	trace_agg_follow(a, trace_agg_frame(a, FP_TRACE_FOLLOW_MODULE,
					    "<0.81.0>", 0));
	ev(a, &P2, TRACE_EV_CALL, "loop", 0);
	ev(a, &P2, TRACE_EV_CALL, "handle_msg", 0);
	ev(a, &P2, TRACE_EV_CALL, "try", 0);
	ev(a, &P2, TRACE_EV_CALL, "fun", 0);
	ev(a, &P2, TRACE_EV_RETURN_TO, "foldl", 100);
	ev(a, &P2, TRACE_EV_RETURN_TO, "handle_msg", 300);
	ev(a, &P2, TRACE_EV_CALL, "other", 1000);
	ev(a, &P2, TRACE_EV_OUT, "other", 2000);
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "82 on fun;try;handle_msg;loop;<0.81.0>", NULL), 1);
	fp_assert_int_eq(units_of(&s, "82 on foldl;try;handle_msg;loop;<0.81.0>",
				  NULL), 2);
	fp_assert_int_eq(s.n, 2);
	trace_agg_destroy(a);
}
END_TEST

/* Processes past the cap are left out and counted, the kept ones go on. */
START_TEST(followed_cap)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	struct fp_pid p;

	trace_agg_follow(a, trace_agg_frame(a, FP_TRACE_FOLLOW_MODULE,
					    "traced", 0));
	for (uint32_t i = 0; i < 1100; i++) {
		p = (struct fp_pid){ .num = 1000 + i };
		ev(a, &p, TRACE_EV_CALL, "w", 0);
	}
	fp_assert_int_eq(trace_agg_unkept(a), 76);
	p = (struct fp_pid){ .num = 1000 };
	ev(a, &p, TRACE_EV_OUT, "w", 100);
	trace_agg_flush(a, true, each, &s);
	/* no target named: each process under its own pid */
	fp_assert_int_eq(units_of(&s, "1000 on w;traced", NULL), 1);
	fp_assert_int_eq(s.n, 1);
	trace_agg_destroy(a);
}
END_TEST

/* Whole units out, the rest carried, with the calls of a stack that has
 * no whole unit yet; the final flush rounds to the nearest and empties. */
START_TEST(remainders)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	long calls = -1;

	ev(a, &P1, TRACE_EV_CALL, "a", 0);
	ev(a, &P1, TRACE_EV_CALL, "b", 150);
	ev(a, &P1, TRACE_EV_RETURN_TO, "a", 190);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on a", &calls), 1);
	fp_assert_int_eq(calls, 1);
	fp_assert_int_eq(units_of(&s, "81 on b;a", NULL), -1);
	fp_assert_int_eq(s.n, 1);

	memset(&s, 0, sizeof(s));
	ev(a, &P1, TRACE_EV_CALL, "b", 240);	/* a: 50 + 50 */
	ev(a, &P1, TRACE_EV_RETURN_TO, "a", 290);	/* b: 40 + 50 */
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on a", &calls), 1);
	fp_assert_int_eq(calls, 0);
	fp_assert_int_eq(units_of(&s, "81 on b;a", NULL), -1);
	fp_assert_int_eq(s.n, 1);

	memset(&s, 0, sizeof(s));
	ev(a, &P1, TRACE_EV_OTHER, NULL, 339);	/* a: 49 */
	trace_agg_flush(a, true, each, &s);
	/* b;a: 90 rounds up, with both calls; a: 49 rounds down */
	fp_assert_int_eq(units_of(&s, "81 on b;a", &calls), 1);
	fp_assert_int_eq(calls, 2);
	fp_assert_int_eq(s.n, 1);

	memset(&s, 0, sizeof(s));
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(s.n, 0);
	trace_agg_destroy(a);
}
END_TEST

/* --trace-call: each call from its enter to its leave is a tree of its
 * own under CALL:'<n>'/0; a process's events outside a call count for
 * nothing, and a call of one process does not end another's. */
START_TEST(calls_rooted)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	uint64_t begun, ended;
	long calls = -1;

	trace_agg_calls(a);
	/* before the call, and between the calls: left out */
	ev(a, &P1, TRACE_EV_CALL, "before", 0);
	ev(a, &P1, TRACE_EV_ENTER, "f", 100);
	ev(a, &P2, TRACE_EV_ENTER, "f", 150);
	ev(a, &P1, TRACE_EV_CALL, "g", 200);
	ev(a, &P1, TRACE_EV_OUT, "g", 400);
	ev(a, &P2, TRACE_EV_CALL, "h", 450);
	ev(a, &P1, TRACE_EV_IN, "g", 600);
	ev(a, &P1, TRACE_EV_RETURN_TO, "f", 700);
	ev(a, &P1, TRACE_EV_LEAVE, "f", 800);
	ev(a, &P1, TRACE_EV_CALL, "after", 900);
	ev(a, &P1, TRACE_EV_OUT, "after", 5000);
	ev(a, &P2, TRACE_EV_LEAVE, "f", 650);
	trace_agg_call_counts(a, &begun, &ended);
	fp_assert_int_eq(begun, 2);
	fp_assert_int_eq(ended, 2);
	trace_agg_flush(a, true, each, &s);
	/* f: 100 before g, 100 after the return */
	fp_assert_int_eq(units_of(&s, "81 on f;1", &calls), 2);
	fp_assert_int_eq(calls, 1);
	fp_assert_int_eq(units_of(&s, "81 on g;f;1", &calls), 3);
	fp_assert_int_eq(calls, 1);
	fp_assert_int_eq(units_of(&s, "81 off g;f;1", NULL), 2);
	fp_assert_int_eq(units_of(&s, "82 on f;2", NULL), 3);
	fp_assert_int_eq(units_of(&s, "82 on h;f;2", NULL), 2);
	fp_assert_int_eq(s.n, 5);
	trace_agg_destroy(a);
}
END_TEST

/* A second call of the same process is a tree of its own; an enter in
 * a call (the tracer keeps only the first) starts nothing; the return to
 * the caller before the leave adds no frame. */
START_TEST(calls_again)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	uint64_t begun, ended;

	trace_agg_calls(a);
	ev(a, &P1, TRACE_EV_ENTER, "f", 0);
	ev(a, &P1, TRACE_EV_ENTER, "f", 50);
	ev(a, &P1, TRACE_EV_LEAVE, "f", 100);
	ev(a, &P1, TRACE_EV_LEAVE, "f", 150);
	ev(a, &P1, TRACE_EV_ENTER, "f", 1000);
	/* f returns to its caller, then its leave: the caller is no part */
	ev(a, &P1, TRACE_EV_RETURN_TO, "caller", 1200);
	ev(a, &P1, TRACE_EV_LEAVE, "f", 1300);
	trace_agg_call_counts(a, &begun, &ended);
	fp_assert_int_eq(begun, 2);
	fp_assert_int_eq(ended, 2);
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on f;1", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 on f;2", NULL), 3);
	fp_assert_int_eq(s.n, 2);
	trace_agg_destroy(a);
}
END_TEST

/* A call's remainders are rounded as one at its leave: its total to
 * the nearest unit, given to the stacks with the largest remainders, and
 * a call shorter than a unit still shows, as one. */
START_TEST(calls_rounded)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };

	trace_agg_calls(a);
	/* 10 + 15 in f, 5 in g: one unit, to f */
	ev(a, &P1, TRACE_EV_ENTER, "f", 0);
	ev(a, &P1, TRACE_EV_CALL, "g", 10);
	ev(a, &P1, TRACE_EV_RETURN_TO, "f", 15);
	ev(a, &P1, TRACE_EV_LEAVE, "f", 30);
	/* 70 in each of three stacks: 210, two units, to the first two of
	 * equal remainders */
	ev(a, &P2, TRACE_EV_ENTER, "f", 0);
	ev(a, &P2, TRACE_EV_CALL, "g", 70);
	ev(a, &P2, TRACE_EV_CALL, "h", 140);
	ev(a, &P2, TRACE_EV_LEAVE, "f", 210);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on f;1", NULL), 1);
	fp_assert_int_eq(units_of(&s, "81 on g;f;1", NULL), -1);
	fp_assert_int_eq(units_of(&s, "82 on f;2", NULL), 1);
	fp_assert_int_eq(units_of(&s, "82 on g;f;2", NULL), 1);
	fp_assert_int_eq(units_of(&s, "82 on h;g;f;2", NULL), -1);
	fp_assert_int_eq(s.n, 3);
	trace_agg_destroy(a);
}
END_TEST

/* The depth cap keeps a call's root and its innermost frames. */
START_TEST(calls_depth)
{
	struct trace_agg *a = trace_agg_new(4, 100);
	struct seen s = { 0 };

	trace_agg_calls(a);
	ev(a, &P1, TRACE_EV_ENTER, "f", 0);
	ev(a, &P1, TRACE_EV_CALL, "a", 0);
	ev(a, &P1, TRACE_EV_CALL, "b", 0);
	ev(a, &P1, TRACE_EV_CALL, "c", 0);
	ev(a, &P1, TRACE_EV_LEAVE, "f", 100);
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on c;b;a;1", NULL), 1);
	fp_assert_int_eq(s.n, 1);
	trace_agg_destroy(a);
}
END_TEST

/* A process's slot is freed at its call's leave: the cap bounds the
 * processes inside a call at once, not those ever seen (a handler run
 * in a process of its own per request). */
START_TEST(calls_many_processes)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };
	uint64_t begun, ended;
	struct fp_pid p;

	trace_agg_calls(a);
	for (uint32_t i = 0; i < 3000; i++) {
		p = (struct fp_pid){ .num = 1000 + i };
		ev(a, &p, TRACE_EV_ENTER, "f", i * 100);
		ev(a, &p, TRACE_EV_CALL, "g", i * 100 + 50);
		ev(a, &p, TRACE_EV_LEAVE, "f", i * 100 + 100);
	}
	trace_agg_call_counts(a, &begun, &ended);
	fp_assert_int_eq(begun, 3000);
	fp_assert_int_eq(ended, 3000);
	fp_assert_int_eq(trace_agg_unkept(a), 0);
	/* a process whose call has ended counts for nothing */
	p = (struct fp_pid){ .num = 1000 + 2999 };
	ev(a, &p, TRACE_EV_CALL, "after", 400000);
	ev(a, &p, TRACE_EV_OUT, "after", 400500);
	trace_agg_flush(a, false, each_count, &s);
	/* each call's 100 ticks, half in f, half in g: one unit, to f */
	fp_assert_int_eq(s.n, 3000);
	fp_assert_int_eq(s.units[0], 3000);
	fp_assert_int_eq(s.calls[0], 3000);

	/* the cap is on calls in progress at once: 1024, the next one
	 * left out until one of them ends */
	for (uint32_t i = 0; i < 1025; i++) {
		p = (struct fp_pid){ .num = 5000 + i };
		ev(a, &p, TRACE_EV_ENTER, "f", 500000);
	}
	fp_assert_int_eq(trace_agg_unkept(a), 1);
	p = (struct fp_pid){ .num = 5000 };
	ev(a, &p, TRACE_EV_LEAVE, "f", 500100);
	p = (struct fp_pid){ .num = 7000 };
	ev(a, &p, TRACE_EV_ENTER, "f", 500100);
	trace_agg_call_counts(a, &begun, &ended);
	fp_assert_int_eq(begun, 3000 + 1024 + 1);
	fp_assert_int_eq(ended, 3001);
	fp_assert_int_eq(trace_agg_unkept(a), 1);
	trace_agg_destroy(a);
}
END_TEST

#define ROUND_STACKS 50000u

/* Per stack sN;f;1, the units it was handed (rounded.units[N]). */
struct rounded {
	uint64_t total, f;
	uint8_t units[ROUND_STACKS];
};

static void
each_rounded(const struct fp_trace_stack *st, void *data)
{
	struct rounded *r = data;
	unsigned i;

	r->total += st->units;
	if (strcmp(st->frames[0].function, "f") == 0)
		r->f += st->units;
	else if (sscanf(st->frames[0].function, "s%u", &i) == 1 &&
		 i < ROUND_STACKS)
		r->units[i] += (uint8_t)st->units;
}

/* A call over many stacks, each below a unit: the call's total, rounded,
 * goes one unit each to the stacks with the largest remainders, of equal
 * ones to the first charged. */
START_TEST(calls_round_many)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	static struct rounded r;
	unsigned count[100] = { 0 }, thresh, first;
	uint64_t sum = 0, want, left;
	int64_t t = 0;

	memset(&r, 0, sizeof(r));
	trace_agg_calls(a);
	ev(a, &P1, TRACE_EV_ENTER, "f", 0);
	for (unsigned i = 0; i < ROUND_STACKS; i++) {
		char name[16];
		unsigned rem = 1 + (i * 37u) % 99u;

		snprintf(name, sizeof(name), "s%u", i);
		ev(a, &P1, TRACE_EV_CALL, name, t);
		t += rem;
		ev(a, &P1, TRACE_EV_RETURN_TO, "f", t);
		count[rem]++;
		sum += rem;
	}
	ev(a, &P1, TRACE_EV_LEAVE, "f", t);
	trace_agg_flush(a, false, each_rounded, &r);
	want = (sum + 50) / 100;
	fp_assert_int_eq(r.total, want);
	fp_assert_int_eq(r.f, 0);
	/* the remainder at which the units run out, and how many of it get
	 * one */
	left = want;
	for (thresh = 99; thresh > 0 && left > count[thresh]; thresh--)
		left -= count[thresh];
	first = (unsigned)left;
	for (unsigned i = 0; i < ROUND_STACKS; i++) {
		unsigned rem = 1 + (i * 37u) % 99u;
		unsigned expect = rem > thresh ? 1 : 0;

		if (rem == thresh && first > 0) {
			expect = 1;
			first--;
		}
		fp_assert_int_eq(r.units[i], expect);
	}
	trace_agg_destroy(a);
}
END_TEST

/* Units handed out: P2's (its leaf x apart) and the other processes'. */
struct held {
	uint64_t other, p2, p2_x;
};

static void
each_held(const struct fp_trace_stack *st, void *data)
{
	struct held *h = data;

	if (st->pid.num != P2.num) {
		h->other += st->units;
		return;
	}
	h->p2 += st->units;
	if (strcmp(st->frames[0].function, "x") == 0)
		h->p2_x += st->units;
}

/* An ended call's stacks are handed out at the next flush and freed:
 * the aggregate holds the calls in progress and those ended since the
 * last flush, not every call's stacks; a call open across the flushes
 * (P2) keeps its stacks and is rounded whole at its leave. */
START_TEST(calls_memory_bounded)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct held h = { 0 };
	struct fp_pid p;
	int64_t t = 0;

	trace_agg_calls(a);
	ev(a, &P2, TRACE_EV_ENTER, "f", 0);
	for (uint32_t b = 0; b < 100; b++) {
		t = (int64_t)b * 100000;
		ev(a, &P2, TRACE_EV_CALL, "x", t + 100);
		ev(a, &P2, TRACE_EV_RETURN_TO, "f", t + 300);
		/* 100 calls of 330 ticks in four stacks: 3 units each */
		for (uint32_t i = 0; i < 100; i++, t += 400) {
			p = (struct fp_pid){ .num = 1000 + b * 100 + i };
			ev(a, &p, TRACE_EV_ENTER, "f", t);
			ev(a, &p, TRACE_EV_CALL, "g", t + 100);
			ev(a, &p, TRACE_EV_CALL, "h", t + 150);
			ev(a, &p, TRACE_EV_OUT, "h", t + 200);
			ev(a, &p, TRACE_EV_IN, "h", t + 250);
			ev(a, &p, TRACE_EV_RETURN_TO, "f", t + 300);
			ev(a, &p, TRACE_EV_LEAVE, "f", t + 330);
		}
		fp_assert_int_eq(trace_agg_stacks(a), 2 + 100 * 4);
		trace_agg_flush(a, false, each_held, &h);
		/* P2's f and x;f */
		fp_assert_int_eq(trace_agg_stacks(a), 2);
		fp_assert_int_eq(h.other, (b + 1) * 100 * 3);
	}
	/* P2: 10,000,050 ticks, x 20,030 of them: x's remainder of 30
	 * over f's 20 takes the call's last unit */
	ev(a, &P2, TRACE_EV_CALL, "x", 10000020);
	ev(a, &P2, TRACE_EV_LEAVE, "f", 10000050);
	trace_agg_flush(a, false, each_held, &h);
	fp_assert_int_eq(trace_agg_stacks(a), 0);
	fp_assert_int_eq(h.p2, 100001);
	fp_assert_int_eq(h.p2_x, 201);
	fp_assert_int_eq(h.other, 30000);
	/* nor does a call keep a frame: the next one's id is the count of
	 * frames (the root, f, x, g, h) */
	fp_assert_int_eq(fr(a, "fresh"), 5);
	trace_agg_destroy(a);
}
END_TEST

/* A call still open at the final flush: its leave after it charges and
 * rounds only what came after, and leaves nothing held. */
START_TEST(calls_open_at_final)
{
	struct trace_agg *a = trace_agg_new(8, 100);
	struct seen s = { 0 };

	trace_agg_calls(a);
	ev(a, &P1, TRACE_EV_ENTER, "f", 0);
	ev(a, &P1, TRACE_EV_CALL, "g", 100);
	trace_agg_flush(a, true, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on f;1", NULL), 1);
	fp_assert_int_eq(s.n, 1);
	fp_assert_int_eq(trace_agg_stacks(a), 0);

	memset(&s, 0, sizeof(s));
	ev(a, &P1, TRACE_EV_LEAVE, "f", 170);
	trace_agg_flush(a, false, each, &s);
	fp_assert_int_eq(units_of(&s, "81 on g;f;1", NULL), 1);
	fp_assert_int_eq(s.n, 1);
	fp_assert_int_eq(trace_agg_stacks(a), 0);
	trace_agg_destroy(a);
}
END_TEST

static Suite *
trace_agg_suite(void)
{
	Suite *s = suite_create("trace-agg");
	TCase *tc;

	tc = tcase_create("stacks");
	tcase_add_test(tc, frames_interned);
	tcase_add_test(tc, calls_and_returns);
	tcase_add_test(tc, return_skips_frames);
	tcase_add_test(tc, return_to_unpatterned);
	tcase_add_test(tc, starts_mid_stack);
	tcase_add_test(tc, reentry_and_depth);
	suite_add_tcase(s, tc);

	tc = tcase_create("clock");
	tcase_add_test(tc, out_in_without_calls);
	tcase_add_test(tc, timestamps_equal_or_earlier);
	tcase_add_test(tc, two_processes);
	suite_add_tcase(s, tc);

	tc = tcase_create("follow");
	tcase_add_test(tc, followed_rooted);
	tcase_add_test(tc, followed_tasks_add_up);
	tcase_add_test(tc, followed_depth);
	tcase_add_test(tc, followed_cap);
	tcase_add_test(tc, server_marked_only);
	tcase_add_test(tc, server_span_through_unpatterned);
	suite_add_tcase(s, tc);

	tc = tcase_create("units");
	tcase_add_test(tc, remainders);
	suite_add_tcase(s, tc);

	tc = tcase_create("calls");
	tcase_add_test(tc, calls_rooted);
	tcase_add_test(tc, calls_again);
	tcase_add_test(tc, calls_depth);
	tcase_add_test(tc, calls_rounded);
	tcase_add_test(tc, calls_many_processes);
	tcase_add_test(tc, calls_round_many);
	tcase_add_test(tc, calls_memory_bounded);
	tcase_add_test(tc, calls_open_at_final);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(trace_agg_suite());
}
