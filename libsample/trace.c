/*
 * flame_profd — exact traces of chosen processes (fp/trace.h).
 *
 * The tracer is Erlang source the node's erl_eval runs (eval.c), as the
 * janitor is. erl_eval merges every binding in scope into each call it
 * interprets, so the per-event path (Step, Loop) is built in scopes that
 * hold only what it uses, and the daemon's settings arrive as one tuple.
 * Every trace message is folded into a map {Pid, OnCpu, Stack} =>
 * {NativeTime, Calls} at once: the stack is rebuilt from call (pushed;
 * a function already on the stack cuts it back there, as tail calls
 * and loops re-enter) and return_to (cut back to the function returned
 * to), and the time since the process's previous event is charged to
 * the stack it had, on a scheduler or, between out and in, scheduled
 * out. The modules the tracer itself runs through (erl_eval and what it
 * calls) get no trace pattern: every call of theirs would pass a
 * breakpoint, and their time shows in the caller's frame.
 *
 * Caps: a total of events, events in any second of the trace's own
 * timestamps, and trace messages waiting in the tracer's queue (it
 * cannot keep up: stopped at once, before its queue grows). Any of
 * them, the duration, or the daemon's stop removes the flags and
 * patterns (or destroys the session), drops the messages still queued
 * and hands what was aggregated to the next request; a tracer stopped
 * on its own answers requests until 10 s pass without one, then exits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "etf.h"
#include "eval.h"
#include "fp/log.h"
#include "fp/trace.h"
#include "node-private.h"
#include "util-mem.h"

/* Bindings: A = {Daemon, Targets, UnitUs, ForMs, MaxEvents, MaxRate,
 * Depth, MaxQueue}. Value: {started, Tracer, Mode, Pids} or
 * {refused, Why}. */
static const char start_source[] =
	"(fun() ->\n"
	"Step = (fun(Depth, Sec) ->\n"
	"Add = fun(Agg, K, D, Cn) ->\n"
	"        case maps:find(K, Agg) of\n"
	"          {ok, {Ta, Ca}} -> maps:put(K, {Ta + D, Ca + Cn}, Agg);\n"
	"          error -> maps:put(K, {D, Cn}, Agg)\n"
	"        end\n"
	"      end,\n"
	"Cut = fun Cut(_, []) -> none;\n"
	"          Cut(X, [X | _] = L) -> L;\n"
	"          Cut(X, [_ | R]) -> Cut(X, R)\n"
	"      end,\n"
	"fun({trace_ts, P, Ev, What, TS}, PS, Agg, WinT, WinN) ->\n"
	"  {Stk, On, T0} = case maps:find(P, PS) of\n"
	"                    {ok, V} -> V;\n"
	"                    error -> {case What of {_, _, _} -> [What]; _ -> [] end, Ev =/= in, TS}\n"
	"                  end,\n"
	"  Agg1 = case TS - T0 of D when D > 0 -> Add(Agg, {P, On, Stk}, D, 0); _ -> Agg end,\n"
	"  {W1, N1} = case TS - WinT >= Sec of true -> {TS, 1}; false -> {WinT, WinN + 1} end,\n"
	"  case Ev of\n"
	"    call ->\n"
	"      S1 = case Cut(What, Stk) of\n"
	"             none when length(Stk) >= Depth -> [What | lists:sublist(Stk, Depth - 1)];\n"
	"             none -> [What | Stk];\n"
	"             Cu1 -> Cu1\n"
	"           end,\n"
	"      {maps:put(P, {S1, On, TS}, PS), Add(Agg1, {P, true, S1}, 0, 1), W1, N1};\n"
	"    return_to ->\n"
	"      S1 = case What of\n"
	"             {_, _, _} -> case Cut(What, Stk) of none -> [What]; Cu2 -> Cu2 end;\n"
	"             _ -> Stk\n"
	"           end,\n"
	"      {maps:put(P, {S1, On, TS}, PS), Agg1, W1, N1};\n"
	"    in ->\n"
	"      S1 = case {Stk, What} of {[], {_, _, _}} -> [What]; _ -> Stk end,\n"
	"      {maps:put(P, {S1, true, TS}, PS), Agg1, W1, N1};\n"
	"    out -> {maps:put(P, {Stk, false, TS}, PS), Agg1, W1, N1};\n"
	"    _ -> {maps:put(P, {Stk, On, TS}, PS), Agg1, W1, N1}\n"
	"  end\n"
	"end\n"
	"end)(element(7, A), erlang:convert_time_unit(1, second, native)),\n"
	"MkLoop = fun(Stop, Stopped, Dump, Undo, Daemon, MaxEvents, MaxRate, MaxQueue) ->\n"
	"fun Loop(PS, Agg, N, WinT, WinN) ->\n"
	"        receive\n"
	"          {trace_ts, P, Ev, What, TS} when N >= MaxEvents ->\n"
	"            _ = {P, Ev, What, TS},\n"
	"            Stopped(Stop(total_cap), N, Agg);\n"
	"          {trace_ts, _, _, _, _} = Msg ->\n"
	"            case Step(Msg, PS, Agg, WinT, WinN) of\n"
	"              {PS1, Agg2, WinT1, WinN1} when WinN1 > MaxRate -> Stopped(Stop(rate_cap), N + 1, Agg2);\n"
	"              {PS1, Agg2, WinT1, WinN1} ->\n"
	"                case process_info(self(), message_queue_len) of\n"
	"                  {message_queue_len, Q} when Q > MaxQueue -> Stopped(Stop(behind), N + 1, Agg2);\n"
	"                  _ -> Loop(PS1, Agg2, N + 1, WinT1, WinN1)\n"
	"                end\n"
	"            end;\n"
	"          {dump, From, DTag} ->\n"
	"            {Out, Keep} = Dump(Agg, false),\n"
	"            From ! {DTag, {running, N, Out}},\n"
	"            Loop(PS, Keep, N, WinT, WinN);\n"
	"          {stop, From, DTag} ->\n"
	"            St = Stop(stopped),\n"
	"            {Out, _} = Dump(Agg, true),\n"
	"            From ! {DTag, {St, N, Out}};\n"
	"          {flame_profd_trace, duration} ->\n"
	"            Stopped(Stop(duration), N, Agg);\n"
	"          {'EXIT', Daemon, _} -> Undo();\n"
	"          _ -> Loop(PS, Agg, N, WinT, WinN)\n"
	"        end\n"
	"      end\n"
	"end,\n"
	"(fun(Daemon, Targets, UnitUs, ForMs, MaxEvents, MaxRate, Depth, MaxQueue) ->\n"
	"Self = self(),\n"
	"Tag = make_ref(),\n"
	"Resolve = fun({pid, S}) ->\n"
	"                case catch erlang:list_to_pid(S) of\n"
	"                  P when is_pid(P) ->\n"
	"                    case is_process_alive(P) of\n"
	"                      true -> {ok, P};\n"
	"                      false -> {error, {not_alive, S}}\n"
	"                    end;\n"
	"                  _ -> {error, {not_alive, S}}\n"
	"                end;\n"
	"             ({name, Given, Bins}) ->\n"
	"                As = [At || B <- Bins, At <- [catch binary_to_existing_atom(B, utf8)], is_atom(At)],\n"
	"                case [P || At <- As, P <- [whereis(At)], is_pid(P)] of\n"
	"                  [P | _] -> {ok, P};\n"
	"                  [] -> {error, {not_registered, Given}}\n"
	"                end\n"
	"          end,\n"
	"Tracer = fun() ->\n"
	"  process_flag(trap_exit, true),\n"
	"  process_flag(priority, high),\n"
	"  link(Daemon),\n"
	"  Res = [Resolve(T) || T <- Targets],\n"
	"  Pids = lists:usort([P || {ok, P} <- Res]),\n"
	"  Flags = [call, return_to, running, arity, monotonic_timestamp],\n"
	"  Skip = [erl_eval, prim_eval, orddict, ordsets, lists, maps, erlang, erts_internal, erl_internal, proplists],\n"
	"  Mods = [Mod || {Mod, _} <- code:all_loaded(), not lists:member(Mod, Skip)],\n"
	"  HasSession = code:ensure_loaded(trace) =:= {module, trace} andalso\n"
	"               erlang:function_exported(trace, session_create, 3),\n"
	"  Setup =\n"
	"    case [E || {error, E} <- Res] of\n"
	"      [E1 | _] -> {refused, E1};\n"
	"      [] when HasSession ->\n"
	"        S = trace:session_create(flame_profd_trace, self(), []),\n"
	"        [trace:function(S, {Mod, '_', '_'}, true, [local]) || Mod <- Mods],\n"
	"        [trace:process(S, P, true, Flags) || P <- Pids],\n"
	"        {ok, session, fun() -> catch trace:session_destroy(S), ok end};\n"
	"      [] ->\n"
	"        Held = [P || P <- Pids, erlang:trace_info(P, tracer) =/= {tracer, []}],\n"
	"        CallTraced = fun(P) -> case erlang:trace_info(P, flags) of\n"
	"                                 {flags, Fl} -> lists:member(call, Fl);\n"
	"                                 _ -> false\n"
	"                               end end,\n"
	"        Patterned = fun Any([]) -> false;\n"
	"                        Any([{M, _} | Ms]) ->\n"
	"                          Fs = try erlang:get_module_info(M, functions) catch _:_ -> [] end,\n"
	"                          case lists:any(fun({F, Ar}) -> element(2, erlang:trace_info({M, F, Ar}, traced)) =/= false end, Fs) of\n"
	"                            true -> {true, M};\n"
	"                            false -> Any(Ms)\n"
	"                          end\n"
	"                    end,\n"
	"        case Held of\n"
	"          [H | _] -> {refused, {traced_by_other, H}};\n"
	"          [] ->\n"
	"            case [P || P <- erlang:processes(), P =/= self(), CallTraced(P)] of\n"
	"              [Ct | _] -> {refused, {call_traced_process, Ct}};\n"
	"              [] ->\n"
	"                case element(2, erlang:trace_info(on_load, traced)) =/= false orelse\n"
	"                     Patterned(code:all_loaded()) of\n"
	"                  false ->\n"
	"                    [erlang:trace_pattern({Mod, '_', '_'}, true, [local]) || Mod <- Mods],\n"
	"                    [erlang:trace(P, true, Flags) || P <- Pids],\n"
	"                    {ok, legacy,\n"
	"                     fun() ->\n"
	"                       [catch erlang:trace(P, false, [all]) || P <- Pids],\n"
	"                       catch erlang:trace_pattern({'_', '_', '_'}, false, [local]),\n"
	"                       ok\n"
	"                     end};\n"
	"                  true -> {refused, {trace_pattern, on_load}};\n"
	"                  {true, M} -> {refused, {trace_pattern, M}}\n"
	"                end\n"
	"            end\n"
	"        end\n"
	"    end,\n"
	"  case Setup of\n"
	"    {refused, Why} -> Self ! {Tag, {refused, Why}};\n"
	"    {ok, Mode, Undo0} ->\n"
	"      Undo = fun() ->\n"
	"               case get(flame_profd_undone) of\n"
	"                 true -> ok;\n"
	"                 _ -> put(flame_profd_undone, true), Undo0()\n"
	"               end\n"
	"             end,\n"
	"      Self ! {Tag, {started, Mode, Pids}},\n"
	"      U = erlang:convert_time_unit(UnitUs, microsecond, native),\n"
	"      erlang:send_after(ForMs, self(), {flame_profd_trace, duration}),\n"
	"      Dump = fun(Agg, Final) ->\n"
	"               maps:fold(fun(K = {P, On, Stk}, {Tn, Cn}, {Out, Keep}) ->\n"
	"                           Units = case Final of true -> (Tn + U div 2) div U; false -> Tn div U end,\n"
	"                           case Units of\n"
	"                             0 when Final -> {Out, Keep};\n"
	"                             0 -> {Out, Keep#{K => {Tn, Cn}}};\n"
	"                             _ -> R = Tn - Units * U,\n"
	"                                  {[{P, On, Stk, Units, Cn} | Out],\n"
	"                                   case R > 0 andalso not Final of true -> Keep#{K => {R, 0}}; false -> Keep end}\n"
	"                           end\n"
	"                         end, {[], #{}}, Agg)\n"
	"             end,\n"
	"      Stop = fun(Why) ->\n"
	"               Undo(),\n"
	"               Flush = fun F(K) -> receive {trace_ts, _, _, _, _} -> F(K + 1) after 0 -> K end end,\n"
	"               {stopped, Why, Flush(0)}\n"
	"             end,\n"
	"      Stopped = fun Stopped(Status, N, Agg) ->\n"
	"                  receive\n"
	"                    {dump, From, DTag} ->\n"
	"                      {Out, _} = Dump(Agg, true),\n"
	"                      From ! {DTag, {Status, N, Out}},\n"
	"                      Stopped(Status, N, #{});\n"
	"                    {stop, From, DTag} ->\n"
	"                      {Out, _} = Dump(Agg, true),\n"
	"                      From ! {DTag, {Status, N, Out}};\n"
	"                    {'EXIT', Daemon, _} -> ok;\n"
	"                    {trace_ts, _, _, _, _} -> Stopped(Status, N, Agg);\n"
	"                    _ -> Stopped(Status, N, Agg)\n"
	"                  after 10000 -> ok\n"
	"                  end\n"
	"                end,\n"
	"      Loop = MkLoop(Stop, Stopped, Dump, Undo, Daemon, MaxEvents, MaxRate, MaxQueue),\n"
	"      try Loop(#{}, #{}, 0, erlang:monotonic_time(), 0)\n"
	"      after Undo()\n"
	"      end\n"
	"  end\n"
	"end,\n"
	"T = spawn(Tracer),\n"
	"M = erlang:monitor(process, T),\n"
	"receive\n"
	"  {Tag, {started, Mode, Pids}} -> erlang:demonitor(M, [flush]), {started, T, Mode, Pids};\n"
	"  {Tag, R} -> erlang:demonitor(M, [flush]), R;\n"
	"  {'DOWN', M, process, _, Why} -> {refused, {crashed, Why}}\n"
	"after 30000 -> exit(T, kill), {refused, timeout}\n"
	"end\n"
	"end)(element(1, A), element(2, A), element(3, A), element(4, A), element(5, A), element(6, A), element(7, A), element(8, A))\n"
	"end)().\n";

/* Bindings: T (the tracer), Op (dump or stop). Value: the tracer's
 * {Status, Events, Stacks}, gone, or timeout. */
static const char op_source[] =
	"case is_process_alive(T) of "
	"  false -> gone; "
	"  true -> "
	"    M = erlang:monitor(process, T), "
	"    Tag = make_ref(), "
	"    T ! {Op, self(), Tag}, "
	"    receive "
	"      {Tag, R} -> erlang:demonitor(M, [flush]), R; "
	"      {'DOWN', M, process, _, _} -> gone "
	"    after 4000 -> erlang:demonitor(M, [flush]), timeout "
	"    end "
	"end.";

struct fp_trace {
	bool started;
	erlang_pid tracer;
	ei_x_buff op;			/* op_source, parsed */
	/* one stack's frames as decoded */
	struct fp_frame frames[FP_TRACE_DEPTH_MAX];
	char names[FP_TRACE_DEPTH_MAX][2][MAXATOMLEN_UTF8];
};

struct fp_trace *
fp_trace_new(void)
{
	struct fp_trace *t = xzalloc(sizeof(*t));

	ei_x_new(&t->op);
	return t;
}

void
fp_trace_destroy(struct fp_trace *t)
{
	if (!t)
		return;
	ei_x_free(&t->op);
	free(t);
}

bool
fp_trace_active(const struct fp_trace *t)
{
	return t->started;
}

/* {pid, "<0.N.S>"} or {name, Given, [Candidate binaries]} */
static int
encode_target(struct fp_node *node, ei_x_buff *x, const char *given,
	      char *why, size_t whylen)
{
	char other[MAXNODELEN + 1], cand[2][FP_NAME_MAX], text[64];
	struct fp_pid pid;
	uint32_t creation;
	int rc, n;

	rc = fp_pid_parse_full(given, &pid, other, sizeof(other), &creation);
	if (rc == 1 && strcmp(other, fp_node_name(node)) != 0) {
		snprintf(why, whylen, "%s is a process of another node", given);
		return -EINVAL;
	}
	if (rc >= 0) {
		snprintf(text, sizeof(text), "<0.%u.%u>", pid.num, pid.serial);
		ei_x_encode_tuple_header(x, 2);
		ei_x_encode_atom(x, "pid");
		ei_x_encode_string(x, text);
		return 0;
	}
	n = fp_name_candidates(given, cand);
	if (n < 0) {
		snprintf(why, whylen, "%s is no pid or registered name", given);
		return -EINVAL;
	}
	ei_x_encode_tuple_header(x, 3);
	ei_x_encode_atom(x, "name");
	ei_x_encode_binary(x, given, (long)strlen(given));
	ei_x_encode_list_header(x, n);
	for (int i = 0; i < n; i++)
		ei_x_encode_binary(x, cand[i], (long)strlen(cand[i]));
	ei_x_encode_empty_list(x);
	return 0;
}

int
fp_trace_start(struct fp_trace *t, struct fp_node *node,
	       const struct fp_trace_config *cfg, char *why, size_t whylen,
	       char *mode, size_t modelen, unsigned timeout_ms)
{
	char atom[MAXATOMLEN_UTF8], *text;
	struct fp_reply reply;
	ei_x_buff bindings, exprs;
	int rc, index, arity;

	why[0] = mode[0] = '\0';
	ei_x_new(&bindings);
	ei_x_new(&exprs);
	ei_x_encode_list_header(&bindings, 1);
	ei_x_encode_tuple_header(&bindings, 2);
	ei_x_encode_atom(&bindings, "A");
	ei_x_encode_tuple_header(&bindings, 8);
	ei_x_encode_pid(&bindings, ei_self(&node->ec));
	ei_x_encode_list_header(&bindings, (long)cfg->ntargets);
	for (size_t i = 0; i < cfg->ntargets; i++) {
		rc = encode_target(node, &bindings, cfg->targets[i], why, whylen);
		if (rc < 0)
			goto out;
	}
	ei_x_encode_empty_list(&bindings);
	ei_x_encode_ulong(&bindings, cfg->unit_us);
	ei_x_encode_ulonglong(&bindings, cfg->for_ms);
	ei_x_encode_ulonglong(&bindings, cfg->max_events);
	ei_x_encode_ulonglong(&bindings, cfg->max_rate);
	ei_x_encode_ulong(&bindings, cfg->depth);
	ei_x_encode_ulong(&bindings, cfg->max_queue);
	ei_x_encode_empty_list(&bindings);

	rc = node_expr_parse(node, op_source, &t->op, timeout_ms);
	if (rc < 0)
		goto out;
	rc = node_expr_parse(node, start_source, &exprs, timeout_ms);
	if (rc < 0)
		goto out;
	rc = node_eval_call(node, &exprs, &bindings, timeout_ms, &reply);
	if (rc < 0)
		goto out;
	index = reply.index;
	rc = -EPROTO;
	if (ei_decode_tuple_header(reply.buf, &index, &arity) < 0 ||
	    etf_decode_atom(reply.buf, &index, atom) < 0)
		goto out;
	if (strcmp(atom, "started") == 0 && arity == 4) {
		if (ei_decode_pid(reply.buf, &index, &t->tracer) < 0 ||
		    etf_decode_atom(reply.buf, &index, atom) < 0)
			goto out;
		snprintf(mode, modelen, "%s", atom);
		t->started = true;
		rc = 0;
	} else if (strcmp(atom, "refused") == 0 && arity == 2) {
		int kind = index, karity;
		char what[MAXATOMLEN_UTF8];

		/* {not_alive | not_registered, _}: no such target */
		rc = -EPERM;
		if (ei_decode_tuple_header(reply.buf, &kind, &karity) == 0 &&
		    etf_decode_atom(reply.buf, &kind, what) == 0 &&
		    (strcmp(what, "not_alive") == 0 ||
		     strcmp(what, "not_registered") == 0))
			rc = -ESRCH;
		text = etf_term_text(reply.buf, index, 200);
		snprintf(why, whylen, "%s", text);
		free(text);
	}
out:
	ei_x_free(&bindings);
	ei_x_free(&exprs);
	return rc;
}

/* [{'T', Tracer}, {'Op', dump | stop}] */
static void
encode_op(const struct fp_trace *t, ei_x_buff *x, bool stop)
{
	ei_x_encode_list_header(x, 2);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "T");
	ei_x_encode_pid(x, &t->tracer);
	ei_x_encode_tuple_header(x, 2);
	ei_x_encode_atom(x, "Op");
	ei_x_encode_atom(x, stop ? "stop" : "dump");
	ei_x_encode_empty_list(x);
}

int
fp_trace_send(struct fp_trace *t, struct fp_node *node, bool stop,
	      uint64_t *id)
{
	ei_x_buff bindings;
	int rc;

	if (!t->started)
		return -ENOENT;
	ei_x_new(&bindings);
	encode_op(t, &bindings, stop);
	rc = node_eval_send(node, &t->op, &bindings, false, id);
	ei_x_free(&bindings);
	return rc;
}

/* {M, F, A}: frame @i of the stack being decoded */
static int
decode_mfa(struct fp_trace *t, const char *buf, int *index, uint32_t i)
{
	int64_t arity;
	int n;

	if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 3 ||
	    etf_decode_atom(buf, index, t->names[i][0]) < 0 ||
	    etf_decode_atom(buf, index, t->names[i][1]) < 0 ||
	    etf_decode_int(buf, index, &arity) < 0 || arity < 0 || arity > 255)
		return -EPROTO;
	t->frames[i] = (struct fp_frame){
		.module = t->names[i][0],
		.function = t->names[i][1],
		.arity = (uint32_t)arity,
	};
	return 0;
}

/* {Pid, OnCpu, [MFA], Units, Calls} */
static int
decode_stack(struct fp_trace *t, const char *buf, int *index,
	     struct fp_trace_stack *st)
{
	char atom[MAXATOMLEN_UTF8];
	int64_t units, calls;
	int n, len;

	if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 5 ||
	    etf_decode_pid(buf, index, &st->pid) < 0 ||
	    etf_decode_atom(buf, index, atom) < 0)
		return -EPROTO;
	st->on_cpu = strcmp(atom, "true") == 0;
	if (ei_decode_list_header(buf, index, &len) < 0 || len < 0)
		return -EPROTO;
	st->nframes = 0;
	for (int i = 0; i < len; i++) {
		if ((uint32_t)i < FP_TRACE_DEPTH_MAX) {
			if (decode_mfa(t, buf, index, (uint32_t)i) < 0)
				return -EPROTO;
			st->nframes++;
		} else if (etf_skip_term(buf, index) < 0) {
			return -EPROTO;
		}
	}
	if (len > 0 && ei_decode_list_header(buf, index, &n) < 0)
		return -EPROTO;
	if (etf_decode_int(buf, index, &units) < 0 || units < 0 ||
	    etf_decode_int(buf, index, &calls) < 0 || calls < 0)
		return -EPROTO;
	st->frames = t->frames;
	st->units = (uint64_t)units;
	st->calls = (uint64_t)calls;
	return 0;
}

/* running, or {stopped, Why, Dropped} */
static int
decode_status(const char *buf, int *index, struct fp_trace_result *res)
{
	char atom[MAXATOMLEN_UTF8];
	int64_t dropped;
	int n;

	if (etf_decode_atom(buf, index, atom) == 0) {
		if (strcmp(atom, "running"))
			return -EPROTO;
		res->state = FP_TRACE_RUNNING;
		return 0;
	}
	if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 3 ||
	    etf_decode_atom(buf, index, atom) < 0 || strcmp(atom, "stopped") ||
	    etf_decode_atom(buf, index, atom) < 0 ||
	    etf_decode_int(buf, index, &dropped) < 0 || dropped < 0)
		return -EPROTO;
	snprintf(res->why, sizeof(res->why), "%.63s", atom);
	res->state = FP_TRACE_STOPPED;
	res->dropped = (uint64_t)dropped;
	return 0;
}

static int
decode_value(struct fp_trace *t, const struct fp_reply *reply,
	     struct fp_trace_result *res,
	     void (*each)(const struct fp_trace_stack *stack, void *data),
	     void *data);

int
fp_trace_decode(struct fp_trace *t, struct fp_reply *reply,
		struct fp_trace_result *res,
		void (*each)(const struct fp_trace_stack *stack, void *data),
		void *data)
{
	int rc;

	memset(res, 0, sizeof(*res));
	rc = node_reply_eval_value(reply);
	if (rc < 0)
		return rc;
	return decode_value(t, reply, res, each, data);
}

/* The reply, moved to the op's value */
static int
decode_value(struct fp_trace *t, const struct fp_reply *reply,
	     struct fp_trace_result *res,
	     void (*each)(const struct fp_trace_stack *stack, void *data),
	     void *data)
{
	char atom[MAXATOMLEN_UTF8];
	struct fp_trace_stack st;
	int64_t events;
	int index, n, len;

	index = reply->index;
	if (etf_decode_atom(reply->buf, &index, atom) == 0) {
		if (strcmp(atom, "gone") == 0) {
			res->state = FP_TRACE_GONE;
			t->started = false;
			return 0;
		}
		/* busy past the wait: nothing this time */
		return strcmp(atom, "timeout") == 0 ? 0 : -EPROTO;
	}
	if (ei_decode_tuple_header(reply->buf, &index, &n) < 0 || n != 3)
		return -EPROTO;
	if (decode_status(reply->buf, &index, res) < 0)
		return -EPROTO;
	if (etf_decode_int(reply->buf, &index, &events) < 0 || events < 0 ||
	    ei_decode_list_header(reply->buf, &index, &len) < 0 || len < 0)
		return -EPROTO;
	res->events = (uint64_t)events;
	for (int i = 0; i < len; i++) {
		if (decode_stack(t, reply->buf, &index, &st) < 0)
			return -EPROTO;
		each(&st, data);
	}
	if (res->state != FP_TRACE_RUNNING)
		t->started = false;
	return 0;
}

int
fp_trace_stop(struct fp_trace *t, struct fp_node *node,
	      struct fp_trace_result *res,
	      void (*each)(const struct fp_trace_stack *stack, void *data),
	      void *data, unsigned timeout_ms)
{
	struct fp_reply reply;
	ei_x_buff bindings;
	int rc;

	memset(res, 0, sizeof(*res));
	if (!t->started)
		return -ENOENT;
	ei_x_new(&bindings);
	encode_op(t, &bindings, true);
	rc = node_eval_call(node, &t->op, &bindings, timeout_ms, &reply);
	ei_x_free(&bindings);
	if (rc < 0)
		return rc;
	return decode_value(t, &reply, res, each, data);
}
