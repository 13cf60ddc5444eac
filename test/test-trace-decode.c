/*
 * flame_profd — unit tests: the tracer's events as the daemon reads them
 * (fp_trace_decode()): stacks on and off a scheduler, the tracer's state
 * and its end, --trace-call's meta messages and their erlang:now/0 time,
 * and replies of any other shape refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "fp-test.h"
#include "fp/trace.h"
#include "trace-agg.h"
#include "sample-fixtures.h"

struct seen {
	unsigned n;
	struct fp_pid pid[4];
	bool on_cpu[4];
	uint32_t nframes[4];
	char leaf[4][64];
	char root[4][64];
	uint64_t units[4], calls[4];
};

static void
each(const struct fp_trace_stack *st, void *data)
{
	struct seen *s = data;
	unsigned i = s->n++;

	if (i >= 4)
		return;
	s->pid[i] = st->pid;
	s->on_cpu[i] = st->on_cpu;
	s->nframes[i] = st->nframes;
	s->units[i] = st->units;
	s->calls[i] = st->calls;
	if (st->nframes) {
		snprintf(s->leaf[i], sizeof(s->leaf[i]), "%s:%s/%u",
			 st->frames[0].module, st->frames[0].function,
			 st->frames[0].arity);
		snprintf(s->root[i], sizeof(s->root[i]), "%s:%s/%u",
			 st->frames[st->nframes - 1].module,
			 st->frames[st->nframes - 1].function,
			 st->frames[st->nframes - 1].arity);
	}
}

static void
enc_mfa(ei_x_buff *x, const char *m, const char *f, long a)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, m);
	ei_x_encode_atom(x, f);
	ei_x_encode_long(x, a);
}

/* {value, Value, []} around what @body encodes */
static struct fp_reply
value_reply(ei_x_buff *x, void (*body)(ei_x_buff *x))
{
	ei_x_new_with_version(x);
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "value");
	body(x);
	ei_x_encode_empty_list(x);
	return reply_of(x);
}

/* {trace_ts, <0.Num.0>, Ev, What, TS} */
static void
enc_ev(ei_x_buff *x, long num, const char *ev, const char *m, const char *f,
       long a, long ts)
{
	ei_x_encode_tuple_header(x, 5);
	ei_x_encode_atom(x, "trace_ts");
	enc_pid(x, num);
	ei_x_encode_atom(x, ev);
	if (m)
		enc_mfa(x, m, f, a);
	else
		ei_x_encode_atom(x, "undefined");
	ei_x_encode_long(x, ts);
}

/* A running tracer's events: a gen_server scheduled in, handle_call
 * for 600 ticks, back in the loop for 100, then scheduled out for 1200
 * (units of 100 ticks). */
static void
enc_running(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "running");
	ei_x_encode_long(x, 4200);
	ei_x_encode_list_header(x, 6);
	enc_ev(x, 80, "in", "gen_server", "loop", 7, 1000);
	enc_ev(x, 80, "call", "gen_server", "try_handle_call", 4, 1000);
	enc_ev(x, 80, "call", "fp_demo", "handle_call", 3, 1000);
	enc_ev(x, 80, "return_to", "gen_server", "loop", 7, 1600);
	enc_ev(x, 80, "out", "gen_server", "loop", 7, 1700);
	enc_ev(x, 80, "in", "gen_server", "loop", 7, 2900);
	ei_x_encode_empty_list(x);
}

START_TEST(running_dump)
{
	struct fp_trace *t = fp_trace_new();
	struct fp_trace_result res;
	struct seen s = { 0 };
	struct fp_reply r;
	ei_x_buff x;

	trace_attach(t, 64, 100);
	r = value_reply(&x, enc_running);
	fp_assert_int_eq(fp_trace_decode(t, &r, &res, each, &s), 0);
	fp_assert_int_eq(res.state, FP_TRACE_RUNNING);
	fp_assert_int_eq(res.events, 4200);
	/* try_handle_call's stack has a call and no whole unit yet */
	fp_assert_int_eq(s.n, 3);
	fp_assert_int_eq(s.pid[0].num, 80);
	fp_assert(s.on_cpu[0]);
	fp_assert_int_eq(s.nframes[0], 3);
	fp_assert_str_eq(s.leaf[0], "fp_demo:handle_call/3");
	fp_assert_str_eq(s.root[0], "gen_server:loop/7");
	fp_assert_int_eq(s.units[0], 6);
	fp_assert_int_eq(s.calls[0], 1);
	fp_assert(s.on_cpu[1]);
	fp_assert_int_eq(s.nframes[1], 1);
	fp_assert_int_eq(s.units[1], 1);
	fp_assert_int_eq(s.calls[1], 0);
	fp_assert(!s.on_cpu[2]);
	fp_assert_str_eq(s.leaf[2], "gen_server:loop/7");
	fp_assert_int_eq(s.units[2], 12);
	ei_x_free(&x);
	fp_trace_destroy(t);
}
END_TEST

/* {trace_ts, <0.Num.0>, Ev, {M, F, Args}, {MegaSecs, Secs, MicroSecs}}:
 * a meta trace's call, args [1, 2] */
static void
enc_meta_call_now(ei_x_buff *x, long num, long mega, long sec, long us)
{
	ei_x_encode_tuple_header(x, 5);
	ei_x_encode_atom(x, "trace_ts");
	enc_pid(x, num);
	ei_x_encode_atom(x, "call");
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "m");
	ei_x_encode_atom(x, "f");
	ei_x_encode_list_header(x, 2);
	ei_x_encode_long(x, 1);
	ei_x_encode_atom(x, "two");
	ei_x_encode_empty_list(x);
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_long(x, mega);
	ei_x_encode_long(x, sec);
	ei_x_encode_long(x, us);
}

static void
enc_meta_call(ei_x_buff *x, long num, long us)
{
	enc_meta_call_now(x, num, 1795, 0, us);
}

/* {trace_ts, <0.Num.0>, Ev, {m, f, 2}, Value, {1795, 0, Us}} */
static void
enc_meta_end(ei_x_buff *x, long num, const char *ev, long us)
{
	ei_x_encode_tuple_header(x, 6);
	ei_x_encode_atom(x, "trace_ts");
	enc_pid(x, num);
	ei_x_encode_atom(x, ev);
	enc_mfa(x, "m", "f", 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "error");
	ei_x_encode_string(x, "some value");
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_long(x, 1795);
	ei_x_encode_long(x, 0);
	ei_x_encode_long(x, us);
}

/* A --trace-call reply: one call of m:f/2 from its entry (a meta
 * message, now/0 time) through a call of g to its return, the local
 * events in monotonic time (1 tick a µs, offset 1795e12 µs); then a
 * second call that ends in an exception; 3 calls skipped. */
static void
enc_calls(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "running");
	ei_x_encode_long(x, 9);
	ei_x_encode_list_header(x, 7);
	enc_meta_call(x, 80, 1000);
	enc_ev(x, 80, "call", "m", "g", 0, 1100);
	enc_ev(x, 80, "return_to", "m", "f", 2, 1400);
	enc_meta_end(x, 80, "return_from", 1600);
	enc_ev(x, 80, "call", "m", "later", 0, 1700);
	enc_meta_call(x, 81, 2000);
	enc_meta_end(x, 81, "exception_from", 2300);
	ei_x_encode_empty_list(x);
	ei_x_encode_long(x, 3);
}

START_TEST(calls_dump)
{
	struct fp_trace *t = fp_trace_new();
	struct fp_trace_result res;
	struct seen s = { 0 };
	struct fp_reply r;
	ei_x_buff x;

	trace_attach_calls(t, 64, 100, 1, 1795000000000000);
	r = value_reply(&x, enc_calls);
	fp_assert_int_eq(fp_trace_decode(t, &r, &res, each, &s), 0);
	fp_assert_int_eq(res.state, FP_TRACE_RUNNING);
	fp_assert_int_eq(res.events, 9);
	fp_assert_int_eq(res.calls, 2);
	fp_assert_int_eq(res.calls_ended, 2);
	fp_assert_int_eq(res.calls_skipped, 3);
	/* f: 100 + 200 ticks, g: 300, the second call 300; "later" none */
	fp_assert_int_eq(s.n, 3);
	fp_assert_str_eq(s.leaf[0], "m:f/2");
	fp_assert_str_eq(s.root[0], FP_TRACE_CALL_MODULE ":1/0");
	fp_assert_int_eq(s.units[0], 3);
	fp_assert_int_eq(s.calls[0], 1);
	fp_assert_str_eq(s.leaf[1], "m:g/0");
	fp_assert_int_eq(s.units[1], 3);
	fp_assert_int_eq(s.pid[2].num, 81);
	fp_assert_str_eq(s.root[2], FP_TRACE_CALL_MODULE ":2/0");
	fp_assert_int_eq(s.units[2], 3);
	ei_x_free(&x);
	fp_trace_destroy(t);
}
END_TEST

/* now/0 times within each part's bound whose µs overflow 64 bits, at
 * the megaseconds, the seconds and the microseconds */
static const long hostile_now[][3] = {
	{ 1000000000, 0, 0 },
	{ 9223372, 36854, 775808 },
	{ 9223372, 1000000000, 0 },
};

static int hostile_i;

static void
enc_hostile_now(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "running");
	ei_x_encode_long(x, 1);
	ei_x_encode_list_header(x, 1);
	enc_meta_call_now(x, 80, hostile_now[hostile_i][0],
			  hostile_now[hostile_i][1], hostile_now[hostile_i][2]);
	ei_x_encode_empty_list(x);
	ei_x_encode_long(x, 0);
}

/* A call's now/0 time past 64 bits of µs is refused (-EPROTO), not
 * wrapped: the node controls it. */
START_TEST(calls_hostile_now)
{
	struct fp_trace *t = fp_trace_new();
	struct fp_trace_result res;
	struct seen s = { 0 };
	struct fp_reply r;
	ei_x_buff x;

	trace_attach_calls(t, 64, 100, 1, 1795000000000000);
	hostile_i = _i;
	r = value_reply(&x, enc_hostile_now);
	fp_assert_int_eq(fp_trace_decode(t, &r, &res, each, &s), -EPROTO);
	fp_assert_int_eq(s.n, 0);
	ei_x_free(&x);
	fp_trace_destroy(t);
}
END_TEST

static void
enc_stopped(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "stopped");
	ei_x_encode_atom(x, "total_cap");
	ei_x_encode_long(x, 2410);
	ei_x_encode_long(x, 300);
	ei_x_encode_empty_list(x);
}

static void
enc_gone(ei_x_buff *x)
{
	ei_x_encode_atom(x, "gone");
}

static void
enc_timeout(ei_x_buff *x)
{
	ei_x_encode_atom(x, "timeout");
}

/* The tracer stopped on its own: why, and the events after the stop. */
START_TEST(stopped_dump)
{
	struct fp_trace *t = fp_trace_new();
	struct fp_trace_result res;
	struct seen s = { 0 };
	struct fp_reply r;
	ei_x_buff x;

	trace_attach(t, 64, 100);
	r = value_reply(&x, enc_stopped);
	fp_assert_int_eq(fp_trace_decode(t, &r, &res, each, &s), 0);
	fp_assert_int_eq(res.state, FP_TRACE_STOPPED);
	fp_assert_str_eq(res.why, "total_cap");
	fp_assert_int_eq(res.events, 300);
	fp_assert_int_eq(res.dropped, 2410);
	fp_assert_int_eq(s.n, 0);
	fp_assert(!fp_trace_active(t));
	ei_x_free(&x);

	r = value_reply(&x, enc_gone);
	fp_assert_int_eq(fp_trace_decode(t, &r, &res, each, &s), 0);
	fp_assert_int_eq(res.state, FP_TRACE_GONE);
	ei_x_free(&x);

	/* busy past the request's wait: nothing this time, still running */
	r = value_reply(&x, enc_timeout);
	fp_assert_int_eq(fp_trace_decode(t, &r, &res, each, &s), 0);
	fp_assert_int_eq(res.state, FP_TRACE_RUNNING);
	fp_assert_int_eq(s.n, 0);
	ei_x_free(&x);
	fp_trace_destroy(t);
}
END_TEST

static void
enc_bad_status(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "walking");
	ei_x_encode_long(x, 1);
	ei_x_encode_empty_list(x);
}

/* an event that is no trace_ts tuple */
static void
enc_bad_event(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "running");
	ei_x_encode_long(x, 1);
	ei_x_encode_list_header(x, 1);
	ei_x_encode_tuple_header(x, 4);
	ei_x_encode_atom(x, "trace");
	enc_pid(x, 80);
	ei_x_encode_atom(x, "call");
	enc_mfa(x, "m", "f", 0);
	ei_x_encode_empty_list(x);
}

/* a timestamp that is no integer */
static void
enc_bad_ts(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "running");
	ei_x_encode_long(x, 1);
	ei_x_encode_list_header(x, 1);
	ei_x_encode_tuple_header(x, 5);
	ei_x_encode_atom(x, "trace_ts");
	enc_pid(x, 80);
	ei_x_encode_atom(x, "call");
	enc_mfa(x, "m", "f", 0);
	ei_x_encode_atom(x, "later");
	ei_x_encode_empty_list(x);
}

/* the events of a pid that is no pid */
static void
enc_bad_pid(ei_x_buff *x)
{
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "running");
	ei_x_encode_long(x, 1);
	ei_x_encode_list_header(x, 1);
	ei_x_encode_tuple_header(x, 5);
	ei_x_encode_atom(x, "trace_ts");
	ei_x_encode_long(x, 80);
	ei_x_encode_atom(x, "call");
	enc_mfa(x, "m", "f", 0);
	ei_x_encode_long(x, 5);
	ei_x_encode_empty_list(x);
}

static void
enc_other_atom(ei_x_buff *x)
{
	ei_x_encode_atom(x, "ok");
}

static void (*const bad[])(ei_x_buff *x) = {
	enc_bad_status, enc_bad_event, enc_bad_ts, enc_bad_pid, enc_other_atom,
};

/* Any other shape: -EPROTO, and no stack handed out. */
START_TEST(bad_reply)
{
	struct fp_trace *t = fp_trace_new();
	struct fp_trace_result res;
	struct seen s = { 0 };
	struct fp_reply r;
	ei_x_buff x;

	trace_attach(t, 64, 100);
	r = value_reply(&x, bad[_i]);
	fp_assert_int_eq(fp_trace_decode(t, &r, &res, each, &s), -EPROTO);
	fp_assert_int_eq(s.n, 0);
	ei_x_free(&x);
	fp_trace_destroy(t);
}
END_TEST

static Suite *
trace_suite(void)
{
	Suite *s = suite_create("trace");
	TCase *tc;

	tc = tcase_create("decode");
	tcase_add_test(tc, running_dump);
	tcase_add_test(tc, stopped_dump);
	tcase_add_test(tc, calls_dump);
	tcase_add_loop_test(tc, calls_hostile_now, 0,
			    (int)(sizeof(hostile_now) / sizeof(hostile_now[0])));
	tcase_add_loop_test(tc, bad_reply, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return fp_test_run(trace_suite());
}
