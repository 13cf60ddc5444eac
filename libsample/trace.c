/*
 * flame_profd — exact traces of chosen processes (fp/trace.h).
 *
 * The tracer is Erlang source the node's erl_eval runs (eval.c), as the
 * janitor is, in two processes. The sink is where the trace messages go
 * (the tracer of the flags and patterns, or the session's): it only
 * takes them, in batches of up to 65 events, and sends each batch with
 * its own queue length to the controller. The controller holds the
 * patterns (or the session), answers the daemon and undoes everything;
 * it conses each batch onto the list the daemon's next request takes
 * (every DUMP_EVERY_US in daemon/tracing.c), and the stacks are built
 * here, in C (trace-agg.c). The controller's queue so holds only
 * batches and requests, and a stop frees the sink's backlog by killing
 * it (the runtime frees a mailbox in C, at once), where draining it
 * would take an interpreted receive per message. erl_eval interprets
 * every expression and merges every binding in scope into each call, so
 * the sink's per-event path (Fast) is one receive clause, four deep so
 * that a call takes four events, in a scope that holds only the batch
 * and a count; the caps and the sink's queue are checked once per batch
 * (Loop). Fast's receive has no guard: where no clause matches,
 * erl_eval's receive tries every message in the mailbox, so a guard that
 * ends a batch would scan a queue of thousands once per batch. The
 * modules the tracer itself runs through (erl_eval and what it calls)
 * get no trace pattern: every call of theirs would pass a breakpoint,
 * and their time shows in the caller's frame.
 *
 * Caps: a total of events, events in any second of the trace's own
 * timestamps, and trace messages waiting in the sink's queue (it
 * cannot keep up: stopped at once, before its queue grows). Any of
 * them, the duration, or the daemon's stop removes the flags and
 * patterns (or destroys the session), kills the sink (its queue's
 * length, and the batches not yet taken, are the dropped count) and
 * hands the events it holds to the next request; a controller stopped
 * on its own answers requests until 10 s pass without one, then exits.
 * The sink is linked to the controller and traps no exits: it dies with
 * it, and the controller kills it when it ends.
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
#include "trace-agg.h"
#include "util-mem.h"

/* Before OTP 27, what both tracers look at before they set anything:
 * CallTraced(P), whether a process is call-traced (our patterns would
 * send its tracer calls); Patterned(Loaded), the first loaded module with
 * a function that has a trace pattern ({true, M}), or false. */
#define LEGACY_PROBES \
	"        CallTraced = fun(P) -> case erlang:trace_info(P, flags) of\n" \
	"                                 {flags, Fl} -> lists:member(call, Fl);\n" \
	"                                 _ -> false\n" \
	"                               end end,\n" \
	"        Patterned = fun Any([]) -> false;\n" \
	"                        Any([{M, _} | Ms]) ->\n" \
	"                          Fs = try erlang:get_module_info(M, functions) catch _:_ -> [] end,\n" \
	"                          case lists:any(fun({F, Ar}) -> element(2, erlang:trace_info({M, F, Ar}, traced)) =/= false end, Fs) of\n" \
	"                            true -> {true, M};\n" \
	"                            false -> Any(Ms)\n" \
	"                          end\n" \
	"                    end,\n"

/* Bindings: A = {Daemon, Targets, UnitUs, ForMs, MaxEvents, MaxRate,
 * Depth, MaxQueue, Follow, Servers}. Value: {started, Controller, Mode, Pids,
 * NativePerSec, ServerPids} or {refused, Why}. A server's
 * gen_server:try_handle_call/4 pattern is a match spec whose guard lets
 * a call through only when its From is a target (the targets' pids are
 * literals in it). From is its fourth argument where the first is a
 * server_data record (OTP 29), its third otherwise (the callback module
 * on OTP 25, a callback_cache record on 27). */
static const char start_source[] =
	"(fun() ->\n"
	"Fast = fun Fast(Acc, 0) -> {Acc, 0};\n"
	"           Fast(Acc, K) ->\n"
	"             receive\n"
	"               {trace_ts, _, _, _, _} = M1 ->\n"
	"                 receive\n"
	"                   {trace_ts, _, _, _, _} = M2 ->\n"
	"                     receive\n"
	"                       {trace_ts, _, _, _, _} = M3 ->\n"
	"                         receive\n"
	"                           {trace_ts, _, _, _, _} = M4 -> Fast([M4, M3, M2, M1 | Acc], K - 4)\n"
	"                         after 0 -> {[M3, M2, M1 | Acc], K - 3}\n"
	"                         end\n"
	"                     after 0 -> {[M2, M1 | Acc], K - 2}\n"
	"                     end\n"
	"                 after 0 -> {[M1 | Acc], K - 1}\n"
	"                 end\n"
	"             after 0 -> {Acc, K}\n"
	"             end\n"
	"       end,\n"
	"MkSink = fun(Ctl, MaxEvents) ->\n"
	"fun Sink(N) ->\n"
	"        receive\n"
	"          {trace_ts, _, _, _, _} = Msg ->\n"
	"            Room = min(64, (MaxEvents - N - 1) div 4 * 4),\n"
	"            {Batch, K} = Fast([Msg], Room),\n"
	"            Took = 1 + Room - K,\n"
	"            {message_queue_len, Q} = process_info(self(), message_queue_len),\n"
	"            Ctl ! {flame_profd_batch, Batch, Took, Q},\n"
	"            if\n"
	"              N + Took >= MaxEvents -> timer:sleep(infinity);\n"
	"              true -> Sink(N + Took)\n"
	"            end;\n"
	"          _ -> Sink(N)\n"
	"        end\n"
	"      end\n"
	"end,\n"
	"MkLoop = fun(Stop, Stopped, Undo, Daemon, MaxEvents, MaxRate, MaxQueue, Sec) ->\n"
	"fun Loop(Acc, N, WinT, WinN) ->\n"
	"        receive\n"
	"          {flame_profd_batch, Batch, Took, Q} ->\n"
	"            Acc1 = Batch ++ Acc,\n"
	"            TS = element(5, hd(Batch)),\n"
	"            {WinT1, WinN1} = case TS - WinT >= Sec of\n"
	"                               true -> {TS, Took};\n"
	"                               false -> {WinT, WinN + Took}\n"
	"                             end,\n"
	"            if\n"
	"              N + Took >= MaxEvents -> Stopped(Stop(total_cap), N + Took, Acc1);\n"
	"              WinN1 > MaxRate -> Stopped(Stop(rate_cap), N + Took, Acc1);\n"
	"              Q > MaxQueue -> Stopped(Stop(behind), N + Took, Acc1);\n"
	"              true -> Loop(Acc1, N + Took, WinT1, WinN1)\n"
	"            end;\n"
	"          {dump, From, DTag} ->\n"
	"            From ! {DTag, {running, N, lists:reverse(Acc)}},\n"
	"            Loop([], N, WinT, WinN);\n"
	"          {stop, From, DTag} ->\n"
	"            St = Stop(stopped),\n"
	"            From ! {DTag, {St, N, lists:reverse(Acc)}};\n"
	"          {flame_profd_trace, duration} ->\n"
	"            Stopped(Stop(duration), N, Acc);\n"
	"          {'EXIT', Daemon, _} -> Undo();\n"
	"          _ -> Loop(Acc, N, WinT, WinN)\n"
	"        end\n"
	"      end\n"
	"end,\n"
	"(fun(Daemon, Targets, UnitUs, ForMs, MaxEvents, MaxRate, Depth, MaxQueue, Follow, Servers) ->\n"
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
	"  Ctl = self(),\n"
	"  Sink = spawn_link(fun() -> process_flag(priority, high), (MkSink(Ctl, MaxEvents))(0) end),\n"
	"  Res = [Resolve(T) || T <- Targets ++ Servers],\n"
	"  Pids = lists:usort([P || {ok, P} <- lists:sublist(Res, length(Targets))]),\n"
	"  SPids = lists:usort([P || {ok, P} <- lists:nthtail(length(Targets), Res)]) -- Pids,\n"
	"  Flags0 = [call, return_to, running, arity, monotonic_timestamp],\n"
	"  Flags = Flags0 ++ [set_on_spawn || Follow],\n"
	"  FromTarget = list_to_tuple(['orelse', false | [{'=:=', '$1', P} || P <- Pids]]),\n"
	"  Data = {'andalso', {is_tuple, '$2'}, {'==', {element, 1, '$2'}, server_data}},\n"
	"  CallMs = [{['$2', '_', '_', {'$1', '_'}], [Data, FromTarget], []},\n"
	"            {['$2', '_', {'$1', '_'}, '_'], [{'not', Data}, FromTarget], []}],\n"
	"  Skip = [erl_eval, prim_eval, orddict, ordsets, lists, maps, erlang, erts_internal, erl_internal, proplists],\n"
	"  Mods = [Mod || {Mod, _} <- code:all_loaded(), not lists:member(Mod, Skip)],\n"
	"  HasSession = code:ensure_loaded(trace) =:= {module, trace} andalso\n"
	"               erlang:function_exported(trace, session_create, 3),\n"
	"  Setup =\n"
	"    case [E || {error, E} <- Res] of\n"
	"      [E1 | _] -> {refused, E1};\n"
	"      [] when HasSession ->\n"
	"        S = trace:session_create(flame_profd_trace, Sink, []),\n"
	"        [trace:function(S, {Mod, '_', '_'}, true, [local]) || Mod <- Mods],\n"
	"        [trace:function(S, {gen_server, try_handle_call, 4}, CallMs, [local]) || SPids =/= []],\n"
	"        [trace:process(S, P, true, Flags) || P <- Pids],\n"
	"        [trace:process(S, P, true, Flags0) || P <- SPids],\n"
	"        {ok, session, fun() -> catch trace:session_destroy(S), ok end};\n"
	"      [] ->\n"
	"        Held = [P || P <- Pids ++ SPids, erlang:trace_info(P, tracer) =/= {tracer, []}],\n"
	LEGACY_PROBES
	"        case Held of\n"
	"          [H | _] -> {refused, {traced_by_other, H}};\n"
	"          [] ->\n"
	"            case [P || P <- erlang:processes(), P =/= self(), P =/= Sink, CallTraced(P)] of\n"
	"              [Ct | _] -> {refused, {call_traced_process, Ct}};\n"
	"              [] ->\n"
	"                case element(2, erlang:trace_info(on_load, traced)) =/= false orelse\n"
	"                     Patterned(code:all_loaded()) of\n"
	"                  false ->\n"
	"                    [erlang:trace_pattern({Mod, '_', '_'}, true, [local]) || Mod <- Mods],\n"
	"                    [erlang:trace_pattern({gen_server, try_handle_call, 4}, CallMs, [local]) || SPids =/= []],\n"
	"                    [erlang:trace(P, true, [{tracer, Sink} | Flags]) || P <- Pids],\n"
	"                    [erlang:trace(P, true, [{tracer, Sink} | Flags0]) || P <- SPids],\n"
	"                    {ok, legacy,\n"
	"                     fun() ->\n"
	"                       [catch erlang:trace(P, false, [all]) || P <- Pids ++ SPids],\n"
	"                       [catch erlang:trace(P, false, [all]) || Follow, P <- erlang:processes(),\n"
	"                        erlang:trace_info(P, tracer) =:= {tracer, Sink}],\n"
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
	"    {refused, Why} -> exit(Sink, kill), Self ! {Tag, {refused, Why}};\n"
	"    {ok, Mode, Undo0} ->\n"
	"      Undo = fun() ->\n"
	"               case get(flame_profd_undone) of\n"
	"                 true -> ok;\n"
	"                 _ -> put(flame_profd_undone, true), Undo0()\n"
	"               end\n"
	"             end,\n"
	"      Self ! {Tag, {started, Mode, Pids, SPids}},\n"
	"      erlang:send_after(ForMs, self(), {flame_profd_trace, duration}),\n"
	"      Stop = fun(Why) ->\n"
	"               Undo(),\n"
	"               catch erlang:suspend_process(Sink),\n"
	"               Q = case process_info(Sink, message_queue_len) of\n"
	"                     {message_queue_len, L} -> L;\n"
	"                     _ -> 0\n"
	"                   end,\n"
	"               exit(Sink, kill),\n"
	"               Late = fun F(K) -> receive {flame_profd_batch, _, Tk, _} -> F(K + Tk) after 0 -> K end end,\n"
	"               {stopped, Why, Q + Late(0)}\n"
	"             end,\n"
	"      Stopped = fun Stopped(Status, N, Agg) ->\n"
	"                  receive\n"
	"                    {dump, From, DTag} ->\n"
	"                      From ! {DTag, {Status, N, lists:reverse(Agg)}},\n"
	"                      Stopped(Status, N, []);\n"
	"                    {stop, From, DTag} ->\n"
	"                      From ! {DTag, {Status, N, lists:reverse(Agg)}};\n"
	"                    {'EXIT', Daemon, _} -> ok;\n"
	"                    _ -> Stopped(Status, N, Agg)\n"
	"                  after 10000 -> ok\n"
	"                  end\n"
	"                end,\n"
	"      Loop = MkLoop(Stop, Stopped, Undo, Daemon, MaxEvents, MaxRate, MaxQueue,\n"
	"                    erlang:convert_time_unit(1, second, native)),\n"
	"      try Loop([], 0, erlang:monotonic_time(), 0)\n"
	"      after Undo(), exit(Sink, kill)\n"
	"      end\n"
	"  end\n"
	"end,\n"
	"T = spawn(Tracer),\n"
	"M = erlang:monitor(process, T),\n"
	"receive\n"
	"  {Tag, {started, Mode, Pids, SPids}} -> erlang:demonitor(M, [flush]),\n"
	"                                   {started, T, Mode, Pids, erlang:convert_time_unit(1, second, native), SPids};\n"
	"  {Tag, R} -> erlang:demonitor(M, [flush]), R;\n"
	"  {'DOWN', M, process, _, Why} -> {refused, {crashed, Why}}\n"
	"after 30000 -> T ! {flame_profd_trace, duration}, {refused, timeout}\n"
	"end\n"
	"end)(element(1, A), element(2, A), element(3, A), element(4, A), element(5, A), element(6, A), element(7, A), element(8, A), element(9, A), element(10, A))\n"
	"end)().\n";

/* Bindings: A = {Daemon, Module, Function, Arity (-1: any), MaxCalls,
 * ForMs, MaxEvents, MaxRate, MaxQueue}, the names as binaries. Value:
 * {started, Controller, Mode, NativePerSec, TimeOffset} or {refused, Why}.
 * The sink keeps of the function's own trace messages (told apart
 * from the local ones by their erlang:now/0 timestamp, or their six
 * elements) only each call's first entry, its arguments replaced by
 * their count, and last return, its value dropped, in its process, and
 * counts the calls with the process dictionary. A function a process
 * loops in (it is in it with nothing but proc_lib below: a receive loop
 * or a busy tail loop) is refused: with exception_trace each of its
 * calls keeps a frame for the return, for as long as the loop runs; and
 * a process found 100 calls deep in the function takes the meta pattern
 * off. The rate window runs on its own clock, as a batch may keep none
 * of its events. A reply is {Status, Events, [TraceMessage], Skipped}. */
static const char call_source[] =
	"(fun() ->\n"
	"Take = fun Take(Acc, 0, St, _) -> {Acc, 0, St};\n"
	"           Take(Acc, 1, St, One) ->\n"
	"             receive\n"
	"               {trace_ts, _, _, _, {_, _, _}} = M -> {A1, S1} = One(M, Acc, St), {A1, 0, S1};\n"
	"               {trace_ts, _, _, _, _} = M -> {[M | Acc], 0, St};\n"
	"               {trace_ts, _, _, _, _, _} = M -> {A1, S1} = One(M, Acc, St), {A1, 0, S1}\n"
	"             after 0 -> {Acc, 1, St}\n"
	"             end;\n"
	"           Take(Acc, K, St, One) ->\n"
	"             receive\n"
	"               {trace_ts, _, _, _, {_, _, _}} = M -> {A1, S1} = One(M, Acc, St), Take(A1, K - 1, S1, One);\n"
	"               {trace_ts, _, _, _, _} = M1 ->\n"
	"                 receive\n"
	"                   {trace_ts, _, _, _, {_, _, _}} = M -> {A1, S1} = One(M, [M1 | Acc], St), Take(A1, K - 2, S1, One);\n"
	"                   {trace_ts, _, _, _, _} = M2 -> Take([M2, M1 | Acc], K - 2, St, One);\n"
	"                   {trace_ts, _, _, _, _, _} = M -> {A1, S1} = One(M, [M1 | Acc], St), Take(A1, K - 2, S1, One)\n"
	"                 after 0 -> {[M1 | Acc], K - 1, St}\n"
	"                 end;\n"
	"               {trace_ts, _, _, _, _, _} = M -> {A1, S1} = One(M, Acc, St), Take(A1, K - 1, S1, One)\n"
	"             after 0 -> {Acc, K, St}\n"
	"             end\n"
	"       end,\n"
	"MkSink = fun(Ctl, MaxEvents, One) ->\n"
	"fun Sink(N, St) ->\n"
	"        receive\n"
	"          Msg when element(1, Msg) =:= trace_ts ->\n"
	"            Room = min(64, MaxEvents - N - 1),\n"
	"            {Acc0, St0} = One(Msg, [], St),\n"
	"            {Batch, K, St1} = Take(Acc0, Room, St0, One),\n"
	"            Took = 1 + Room - K,\n"
	"            {message_queue_len, Q} = process_info(self(), message_queue_len),\n"
	"            Ctl ! {flame_profd_batch, Batch, Took, Q, St1},\n"
	"            if\n"
	"              N + Took >= MaxEvents -> timer:sleep(infinity);\n"
	"              true -> Sink(N + Took, St1)\n"
	"            end;\n"
	"          _ -> Sink(N, St)\n"
	"        end\n"
	"      end\n"
	"end,\n"
	"MkLoop = fun(Stop, Stopped, Undo, Daemon, MaxEvents, MaxRate, MaxQueue, MaxCalls, Sec) ->\n"
	"fun Loop(Acc, N, WinT, WinN, St) ->\n"
	"        receive\n"
	"          {flame_profd_batch, Batch, Took, Q, St1} ->\n"
	"            Acc1 = Batch ++ Acc,\n"
	"            TS = erlang:monotonic_time(),\n"
	"            {WinT1, WinN1} = case TS - WinT >= Sec of\n"
	"                               true -> {TS, Took};\n"
	"                               false -> {WinT, WinN + Took}\n"
	"                             end,\n"
	"            if\n"
	"              element(2, St1) >= MaxCalls -> Stopped(Stop(calls), N + Took, Acc1, St1);\n"
	"              N + Took >= MaxEvents -> Stopped(Stop(total_cap), N + Took, Acc1, St1);\n"
	"              WinN1 > MaxRate -> Stopped(Stop(rate_cap), N + Took, Acc1, St1);\n"
	"              Q > MaxQueue -> Stopped(Stop(behind), N + Took, Acc1, St1);\n"
	"              true -> Loop(Acc1, N + Took, WinT1, WinN1, St1)\n"
	"            end;\n"
	"          {dump, From, DTag} ->\n"
	"            From ! {DTag, {running, N, lists:reverse(Acc), element(3, St)}},\n"
	"            Loop([], N, WinT, WinN, St);\n"
	"          {stop, From, DTag} ->\n"
	"            S = Stop(stopped),\n"
	"            From ! {DTag, {S, N, lists:reverse(Acc), element(3, St)}};\n"
	"          {flame_profd_trace, duration} ->\n"
	"            Stopped(Stop(duration), N, Acc, St);\n"
	"          {'EXIT', Daemon, _} -> Undo();\n"
	"          _ -> Loop(Acc, N, WinT, WinN, St)\n"
	"        end\n"
	"      end\n"
	"end,\n"
	"(fun(Daemon, ModB, FunB, Arity, MaxCalls, ForMs, MaxEvents, MaxRate, MaxQueue) ->\n"
	"Self = self(),\n"
	"Tag = make_ref(),\n"
	"Tracer = fun() ->\n"
	"  process_flag(trap_exit, true),\n"
	"  process_flag(priority, high),\n"
	"  link(Daemon),\n"
	"  Ctl = self(),\n"
	"  Sink = spawn_link(fun() ->\n"
	"                      process_flag(priority, high),\n"
	"                      receive {flame_profd_go, Ctl, One} -> (MkSink(Ctl, MaxEvents, One))(0, {0, 0, 0}) end\n"
	"                    end),\n"
	"  Flags = [call, return_to, running, arity, monotonic_timestamp],\n"
	"  Mod = try binary_to_existing_atom(ModB, utf8) catch _:_ -> undefined end,\n"
	"  Fun = try binary_to_existing_atom(FunB, utf8) catch _:_ -> undefined end,\n"
	"  Exported = case is_atom(Mod) andalso is_atom(Fun) andalso erlang:module_loaded(Mod) of\n"
	"               true -> [A || {F, A} <- Mod:module_info(exports), F =:= Fun, Arity < 0 orelse A =:= Arity];\n"
	"               false -> []\n"
	"             end,\n"
	"  MFAs = [{Mod, Fun, A} || A <- Exported],\n"
	"  MFA = {Mod, Fun, if Arity < 0 -> '_'; true -> Arity end},\n"
	"  Skip = [erl_eval, prim_eval, orddict, ordsets, lists, maps, erlang, erts_internal, erl_internal, proplists],\n"
	"  Mods = [M || {M, _} <- code:all_loaded(), not lists:member(M, Skip)],\n"
	"  HasSession = code:ensure_loaded(trace) =:= {module, trace} andalso\n"
	"               erlang:function_exported(trace, session_create, 3),\n"
	"  Mine = fun(P) -> erlang:trace_info(P, tracer) =:= {tracer, Sink} end,\n"
	"  Loops = [P || MFAs =/= [], P <- erlang:processes(), P =/= self(), P =/= Sink,\n"
	"                case erlang:process_info(P, current_function) of\n"
	"                  {current_function, CF} -> lists:member(CF, MFAs);\n"
	"                  _ -> false\n"
	"                end,\n"
	"                case erlang:process_info(P, current_stacktrace) of\n"
	"                  {current_stacktrace, [_ | Below]} -> lists:all(fun(Fr) -> element(1, Fr) =:= proc_lib end, Below);\n"
	"                  _ -> false\n"
	"                end],\n"
	"  Setup =\n"
	"    if\n"
	"      MFAs =:= [] -> {refused, {no_function, ModB, FunB, Arity}};\n"
	"      Loops =/= [] -> {refused, {loop, hd(Loops)}};\n"
	"      HasSession ->\n"
	"        S = trace:session_create(flame_profd_trace, Sink, []),\n"
	"        [trace:function(S, {M, '_', '_'}, true, [local]) || M <- Mods],\n"
	"        trace:function(S, MFA, [{'_', [], [{trace, [], Flags}, {exception_trace}]}], [meta]),\n"
	"        {ok, session,\n"
	"         fun(P) -> catch trace:process(S, P, true, Flags), true end,\n"
	"         fun(P) -> catch trace:process(S, P, false, Flags) end,\n"
	"         fun() -> catch trace:function(S, MFA, false, [meta]) end,\n"
	"         fun() -> catch trace:session_destroy(S), ok end};\n"
	"      true ->\n"
	"        Theirs = [X || X <- MFAs, lists:any(fun(I) -> element(2, erlang:trace_info(X, I)) =/= false end, [traced, meta, call_count, call_time])],\n"
	LEGACY_PROBES
	"        case Theirs of\n"
	"          [Th | _] -> {refused, {trace_pattern, Th}};\n"
	"          [] ->\n"
	"            case [P || P <- erlang:processes(), P =/= self(), P =/= Sink, CallTraced(P)] of\n"
	"              [Ct | _] -> {refused, {call_traced_process, Ct}};\n"
	"              [] ->\n"
	"                case Patterned(code:all_loaded()) of\n"
	"                  {true, M} -> {refused, {trace_pattern, M}};\n"
	"                  false ->\n"
	"                    [erlang:trace_pattern({M, '_', '_'}, true, [local]) || M <- Mods],\n"
	"                    erlang:trace_pattern(MFA, [{'_', [], [{exception_trace}]}], [{meta, Sink}]),\n"
	"                    {ok, legacy,\n"
	"                     fun(P) -> (Mine(P) orelse erlang:trace_info(P, tracer) =:= {tracer, []}) andalso\n"
	"                               (catch erlang:trace(P, true, [{tracer, Sink} | Flags])) =:= 1 end,\n"
	"                     fun(P) -> Mine(P) andalso (catch erlang:trace(P, false, Flags)) end,\n"
	"                     fun() -> catch erlang:trace_pattern(MFA, false, [meta]) end,\n"
	"                     fun() ->\n"
	"                       [catch erlang:trace(P, false, [all]) || P <- erlang:processes(), Mine(P)],\n"
	"                       catch erlang:trace_pattern(MFA, false, [meta]),\n"
	"                       catch erlang:trace_pattern({'_', '_', '_'}, false, [local]),\n"
	"                       ok\n"
	"                     end}\n"
	"                end\n"
	"            end\n"
	"        end\n"
	"    end,\n"
	"  case Setup of\n"
	"    {refused, Why} -> exit(Sink, kill), Self ! {Tag, {refused, Why}};\n"
	"    {ok, Mode, On, Off, Unpattern, Undo0} ->\n"
	"      Undo = fun() ->\n"
	"               case get(flame_profd_undone) of\n"
	"                 true -> ok;\n"
	"                 _ -> put(flame_profd_undone, true), Undo0()\n"
	"               end\n"
	"             end,\n"
	"      Self ! {Tag, {started, Mode, erlang:convert_time_unit(1, second, native), erlang:time_offset(native)}},\n"
	"      MaxNest = 100,\n"
	"      erlang:send_after(ForMs, self(), {flame_profd_trace, duration}),\n"
	"      One = fun({trace_ts, P, call, {Mo, F, As}, {_, _, _} = Ts}, Acc, {S0, D0, Sk} = St) ->\n"
	"                  case get(P) of\n"
	"                    undefined when S0 >= MaxCalls -> Off(P), {Acc, St};\n"
	"                    undefined ->\n"
	"                      case On(P) of\n"
	"                        true ->\n"
	"                          put(P, 1),\n"
	"                          [Unpattern() || S0 + 1 >= MaxCalls],\n"
	"                          Ar = if is_list(As) -> length(As); true -> As end,\n"
	"                          {[{trace_ts, P, call, {Mo, F, Ar}, Ts} | Acc], {S0 + 1, D0, Sk}};\n"
	"                        false ->\n"
	"                          case is_process_alive(P) of\n"
	"                            true -> {Acc, {S0, D0, Sk + 1}};\n"
	"                            false -> {Acc, St}\n"
	"                          end\n"
	"                      end;\n"
	"                    D when D >= MaxNest -> [Unpattern() || D =:= MaxNest], put(P, D + 1), {Acc, St};\n"
	"                    D -> put(P, D + 1), {Acc, St}\n"
	"                  end;\n"
	"               ({trace_ts, P, Ev, MFA1, _, Ts}, Acc, {S0, D0, Sk} = St) when Ev =:= return_from; Ev =:= exception_from ->\n"
	"                  case get(P) of\n"
	"                    undefined -> {Acc, St};\n"
	"                    1 -> erase(P), Off(P), {[{trace_ts, P, Ev, MFA1, [], Ts} | Acc], {S0, D0 + 1, Sk}};\n"
	"                    D -> put(P, D - 1), {Acc, St}\n"
	"                  end;\n"
	"               (M, Acc, St) -> {[M | Acc], St}\n"
	"            end,\n"
	"      Sink ! {flame_profd_go, Ctl, One},\n"
	"      Stop = fun(Why) ->\n"
	"               Undo(),\n"
	"               catch erlang:suspend_process(Sink),\n"
	"               Q = case process_info(Sink, message_queue_len) of\n"
	"                     {message_queue_len, L} -> L;\n"
	"                     _ -> 0\n"
	"                   end,\n"
	"               exit(Sink, kill),\n"
	"               Late = fun F(K) -> receive {flame_profd_batch, _, Tk, _, _} -> F(K + Tk) after 0 -> K end end,\n"
	"               {stopped, Why, Q + Late(0)}\n"
	"             end,\n"
	"      Stopped = fun Stopped(Status, N, Agg, St) ->\n"
	"                  receive\n"
	"                    {dump, From, DTag} ->\n"
	"                      From ! {DTag, {Status, N, lists:reverse(Agg), element(3, St)}},\n"
	"                      Stopped(Status, N, [], St);\n"
	"                    {stop, From, DTag} ->\n"
	"                      From ! {DTag, {Status, N, lists:reverse(Agg), element(3, St)}};\n"
	"                    {'EXIT', Daemon, _} -> ok;\n"
	"                    _ -> Stopped(Status, N, Agg, St)\n"
	"                  after 10000 -> ok\n"
	"                  end\n"
	"                end,\n"
	"      Loop = MkLoop(Stop, Stopped, Undo, Daemon, MaxEvents, MaxRate, MaxQueue, MaxCalls,\n"
	"                    erlang:convert_time_unit(1, second, native)),\n"
	"      try Loop([], 0, erlang:monotonic_time(), 0, {0, 0, 0})\n"
	"      after Undo(), exit(Sink, kill)\n"
	"      end\n"
	"  end\n"
	"end,\n"
	"T = spawn(Tracer),\n"
	"M = erlang:monitor(process, T),\n"
	"receive\n"
	"  {Tag, {started, Mode, PerSec, Offset}} -> erlang:demonitor(M, [flush]),\n"
	"                                   {started, T, Mode, PerSec, Offset};\n"
	"  {Tag, R} -> erlang:demonitor(M, [flush]), R;\n"
	"  {'DOWN', M, process, _, Why} -> {refused, {crashed, Why}}\n"
	"after 30000 -> T ! {flame_profd_trace, duration}, {refused, timeout}\n"
	"end\n"
	"end)(element(1, A), element(2, A), element(3, A), element(4, A), element(5, A), element(6, A), element(7, A), element(8, A), element(9, A))\n"
	"end)().\n";

/* Bindings: T (the tracer), Op (dump or stop). Value: the tracer's
 * {Status, EventCount, [TraceMessage]} (oldest first), gone, or
 * timeout. */
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
	bool calls;			/* --trace-call */
	erlang_pid tracer;
	ei_x_buff op;			/* op_source, parsed */
	struct trace_agg *agg;		/* from the start on */
	uint64_t ticks_per_us;		/* calls: erlang:now/0 to native */
	int64_t offset;			/* erlang:time_offset(native) */
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
	trace_agg_destroy(t->agg);
	free(t);
}

void
trace_attach(struct fp_trace *t, unsigned depth, uint64_t unit)
{
	trace_agg_destroy(t->agg);
	t->agg = trace_agg_new(depth, unit);
}

void
trace_attach_calls(struct fp_trace *t, unsigned depth, uint64_t unit,
		   uint64_t ticks_per_us, int64_t offset)
{
	trace_attach(t, depth, unit);
	trace_agg_calls(t->agg);
	t->calls = true;
	t->ticks_per_us = ticks_per_us;
	t->offset = offset;
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

/* The started targets (a list of pids at @index, the native rate and
 * the servers' pids after it) and the root frame of what they spawn and
 * the servers' work for them: named after the target, when there is
 * one. */
static int
attach_targets(struct fp_trace *t, const char *buf, int index)
{
	char name[64] = "traced";
	struct fp_pid pid;
	uint32_t marker;
	int n;

	if (ei_decode_list_header(buf, &index, &n) < 0 || n < 0)
		return -EPROTO;
	for (int i = 0; i < n; i++) {
		if (etf_decode_pid(buf, &index, &pid) < 0)
			return -EPROTO;
		trace_agg_target(t->agg, &pid);
		if (n == 1)
			snprintf(name, sizeof(name), "<0.%u.%u>", pid.num,
				 pid.serial);
	}
	if (n > 0 && ei_decode_list_header(buf, &index, &n) < 0)
		return -EPROTO;
	if (etf_skip_term(buf, &index) < 0 ||
	    ei_decode_list_header(buf, &index, &n) < 0 || n < 0)
		return -EPROTO;
	marker = trace_agg_frame(t->agg, "gen_server", "try_handle_call", 4);
	for (int i = 0; i < n; i++) {
		if (etf_decode_pid(buf, &index, &pid) < 0)
			return -EPROTO;
		trace_agg_server(t->agg, &pid, marker);
	}
	trace_agg_follow(t->agg, trace_agg_frame(t->agg, FP_TRACE_FOLLOW_MODULE,
						  name, 0));
	return 0;
}

/* The node's reason for a refusal, as text, and its errno: -ESRCH for
 * no such target, -ENOENT for no such function, -ELOOP for a function a
 * process loops in, else -EPERM. */
static int
refusal(const char *buf, int index, char *why, size_t whylen)
{
	char what[MAXATOMLEN_UTF8], *text;
	int kind = index, karity, rc = -EPERM;

	if (ei_decode_tuple_header(buf, &kind, &karity) == 0 &&
	    etf_decode_atom(buf, &kind, what) == 0) {
		if (strcmp(what, "not_alive") == 0 ||
		    strcmp(what, "not_registered") == 0)
			rc = -ESRCH;
		else if (strcmp(what, "no_function") == 0)
			rc = -ENOENT;
		else if (strcmp(what, "loop") == 0)
			rc = -ELOOP;
	}
	text = etf_term_text(buf, index, 200);
	snprintf(why, whylen, "%s", text);
	free(text);
	return rc;
}

/*
 * Run a tracer's @source on @node with @bindings, after parsing op_source
 * into t->op for the requests that follow. On success @reply holds the
 * answer, a tuple of *@arity whose first element, an atom, is in @atom,
 * and *@index is past it.
 */
static int
run_tracer(struct fp_trace *t, struct fp_node *node, const char *source,
	   ei_x_buff *bindings, unsigned timeout_ms, struct fp_reply *reply,
	   int *index, int *arity, char atom[MAXATOMLEN_UTF8])
{
	ei_x_buff exprs;
	int rc;

	ei_x_new(&exprs);
	rc = node_expr_parse(node, op_source, &t->op, timeout_ms);
	if (rc == 0)
		rc = node_expr_parse(node, source, &exprs, timeout_ms);
	if (rc == 0)
		rc = node_eval_call(node, &exprs, bindings, timeout_ms, reply);
	ei_x_free(&exprs);
	if (rc < 0)
		return rc;
	*index = reply->index;
	if (ei_decode_tuple_header(reply->buf, index, arity) < 0 ||
	    etf_decode_atom(reply->buf, index, atom) < 0)
		return -EPROTO;
	return 0;
}

/* --trace-call: the tracer of calls (call_source) */
static int
start_calls(struct fp_trace *t, struct fp_node *node,
	    const struct fp_trace_config *cfg, char *why, size_t whylen,
	    char *mode, size_t modelen, unsigned timeout_ms)
{
	char atom[MAXATOMLEN_UTF8];
	struct fp_reply reply;
	ei_x_buff bindings;
	int rc, index, arity;

	ei_x_new(&bindings);
	ei_x_encode_list_header(&bindings, 1);
	ei_x_encode_tuple_header(&bindings, 2);
	ei_x_encode_atom(&bindings, "A");
	ei_x_encode_tuple_header(&bindings, 9);
	ei_x_encode_pid(&bindings, ei_self(&node->ec));
	ei_x_encode_binary(&bindings, cfg->call_module,
			   (long)strlen(cfg->call_module));
	ei_x_encode_binary(&bindings, cfg->call_function,
			   (long)strlen(cfg->call_function));
	ei_x_encode_long(&bindings, cfg->call_arity < 0 ? -1 : cfg->call_arity);
	ei_x_encode_ulong(&bindings, cfg->max_calls ? cfg->max_calls : 1);
	ei_x_encode_ulonglong(&bindings, cfg->for_ms);
	ei_x_encode_ulonglong(&bindings, cfg->max_events);
	ei_x_encode_ulonglong(&bindings, cfg->max_rate);
	ei_x_encode_ulong(&bindings, cfg->max_queue);
	ei_x_encode_empty_list(&bindings);

	rc = run_tracer(t, node, call_source, &bindings, timeout_ms, &reply, &index,
			&arity, atom);
	if (rc < 0)
		goto out;
	rc = -EPROTO;
	if (strcmp(atom, "started") == 0 && arity == 5) {
		int64_t per_sec, offset;

		if (ei_decode_pid(reply.buf, &index, &t->tracer) < 0 ||
		    etf_decode_atom(reply.buf, &index, atom) < 0 ||
		    etf_decode_int(reply.buf, &index, &per_sec) < 0 ||
		    etf_decode_int(reply.buf, &index, &offset) < 0 ||
		    per_sec < 1000000 || per_sec > INT64_MAX / 1000000)
			goto out;
		snprintf(mode, modelen, "%s", atom);
		trace_attach_calls(t, cfg->depth,
				   (uint64_t)per_sec / 1000000u * cfg->unit_us,
				   (uint64_t)per_sec / 1000000u, offset);
		t->started = true;
		rc = 0;
	} else if (strcmp(atom, "refused") == 0 && arity == 2) {
		rc = refusal(reply.buf, index, why, whylen);
	}
out:
	ei_x_free(&bindings);
	return rc;
}

int
fp_trace_start(struct fp_trace *t, struct fp_node *node,
	       const struct fp_trace_config *cfg, char *why, size_t whylen,
	       char *mode, size_t modelen, unsigned timeout_ms)
{
	char atom[MAXATOMLEN_UTF8];
	struct fp_reply reply;
	ei_x_buff bindings;
	int rc, index, arity;

	why[0] = mode[0] = '\0';
	if (cfg->call_module)
		return start_calls(t, node, cfg, why, whylen, mode, modelen,
				   timeout_ms);
	ei_x_new(&bindings);
	ei_x_encode_list_header(&bindings, 1);
	ei_x_encode_tuple_header(&bindings, 2);
	ei_x_encode_atom(&bindings, "A");
	ei_x_encode_tuple_header(&bindings, 10);
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
	ei_x_encode_boolean(&bindings, cfg->follow);
	/* a list header of 0 is the empty list itself */
	ei_x_encode_list_header(&bindings, (long)cfg->nservers);
	for (size_t i = 0; i < cfg->nservers; i++) {
		rc = encode_target(node, &bindings, cfg->servers[i], why, whylen);
		if (rc < 0)
			goto out;
	}
	if (cfg->nservers)
		ei_x_encode_empty_list(&bindings);
	ei_x_encode_empty_list(&bindings);

	rc = run_tracer(t, node, start_source, &bindings, timeout_ms, &reply, &index,
			&arity, atom);
	if (rc < 0)
		goto out;
	rc = -EPROTO;
	if (strcmp(atom, "started") == 0 && arity == 6) {
		int64_t per_sec;
		int pids;

		if (ei_decode_pid(reply.buf, &index, &t->tracer) < 0 ||
		    etf_decode_atom(reply.buf, &index, atom) < 0)
			goto out;
		pids = index;
		if (etf_skip_term(reply.buf, &index) < 0 ||
		    etf_decode_int(reply.buf, &index, &per_sec) < 0 ||
		    per_sec < 1000000 || per_sec > INT64_MAX / 1000000)
			goto out;
		snprintf(mode, modelen, "%s", atom);
		/* native ticks per unit (the node's clock ticks at least
		 * once a microsecond) */
		trace_attach(t, cfg->depth,
			     (uint64_t)per_sec / 1000000u * cfg->unit_us);
		if ((cfg->follow || cfg->nservers) &&
		    attach_targets(t, reply.buf, pids) < 0)
			goto out;
		t->started = true;
		rc = 0;
	} else if (strcmp(atom, "refused") == 0 && arity == 2) {
		rc = refusal(reply.buf, index, why, whylen);
	}
out:
	ei_x_free(&bindings);
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

/* {M, F, Arity} as a frame id, or anything else as none */
static int
decode_what(struct fp_trace *t, const char *buf, int *index, uint32_t *frame)
{
	char mod[MAXATOMLEN_UTF8], fun[MAXATOMLEN_UTF8];
	int i = *index, n;
	int64_t arity;

	*frame = TRACE_NO_FRAME;
	if (ei_decode_tuple_header(buf, &i, &n) == 0 && n == 3 &&
	    etf_decode_atom(buf, &i, mod) == 0 &&
	    etf_decode_atom(buf, &i, fun) == 0) {
		int type, size;

		/* a meta trace's call carries the arguments, not the arity */
		if (ei_get_type(buf, &i, &type, &size) == 0 &&
		    (type == ERL_LIST_EXT || type == ERL_NIL_EXT ||
		     type == ERL_STRING_EXT)) {
			arity = size;
			if (etf_skip_term(buf, &i) < 0)
				return -EPROTO;
		} else if (etf_decode_int(buf, &i, &arity) < 0) {
			arity = -1;
		}
		if (arity >= 0 && arity <= 255) {
			*frame = trace_agg_frame(t->agg, mod, fun,
						 (uint32_t)arity);
			*index = i;
			return 0;
		}
	}
	return etf_skip_term(buf, index);
}

/* {MegaSecs, Secs, MicroSecs} of erlang:now/0 (the node's system time,
 * in µs) as the node's monotonic time in native units */
static int
decode_now(const struct fp_trace *t, const char *buf, int *index, int64_t *ts)
{
	int64_t part[3], us, sec, native;
	int n;

	if (ei_decode_tuple_header(buf, index, &n) < 0 || n != 3)
		return -EPROTO;
	for (int i = 0; i < 3; i++)
		if (etf_decode_int(buf, index, &part[i]) < 0 || part[i] < 0 ||
		    part[i] > 1000000000)
			return -EPROTO;
	/* the node sends any integer up to the bound: each step checked */
	if (__builtin_mul_overflow(part[0], (int64_t)1000000000000, &us) ||
	    __builtin_mul_overflow(part[1], (int64_t)1000000, &sec) ||
	    __builtin_add_overflow(us, sec, &us) ||
	    __builtin_add_overflow(us, part[2], &us) ||
	    __builtin_mul_overflow(us, (int64_t)t->ticks_per_us, &native) ||
	    __builtin_sub_overflow(native, t->offset, ts))
		return -EPROTO;
	return 0;
}

/* {trace_ts, Pid, Event, What, Timestamp}, or with a Value before the
 * Timestamp (return_from, exception_from) */
static int
decode_event(struct fp_trace *t, const char *buf, int *index)
{
	char atom[MAXATOMLEN_UTF8];
	struct fp_pid pid;
	enum trace_ev ev;
	uint32_t frame;
	int64_t ts;
	int n;

	if (ei_decode_tuple_header(buf, index, &n) < 0 || (n != 5 && n != 6) ||
	    etf_decode_atom(buf, index, atom) < 0 || strcmp(atom, "trace_ts") ||
	    etf_decode_pid(buf, index, &pid) < 0 ||
	    etf_decode_atom(buf, index, atom) < 0)
		return -EPROTO;
	ev = strcmp(atom, "call") == 0 ? TRACE_EV_CALL :
	     strcmp(atom, "return_to") == 0 ? TRACE_EV_RETURN_TO :
	     strcmp(atom, "in") == 0 ? TRACE_EV_IN :
	     strcmp(atom, "out") == 0 ? TRACE_EV_OUT : TRACE_EV_OTHER;
	if (decode_what(t, buf, index, &frame) < 0)
		return -EPROTO;
	/* {trace_ts, Pid, return_from | exception_from, MFA, Value, Ts}:
	 * the end of a traced call */
	if (n == 6) {
		if (etf_skip_term(buf, index) < 0)
			return -EPROTO;
		ev = t->calls && (strcmp(atom, "return_from") == 0 ||
				  strcmp(atom, "exception_from") == 0) ?
		     TRACE_EV_LEAVE : TRACE_EV_OTHER;
	}
	if (etf_decode_int(buf, index, &ts) < 0) {
		/* a meta trace's {MegaSecs, Secs, MicroSecs} (erlang:now/0):
		 * a call's entry, or its end */
		if (!t->calls || decode_now(t, buf, index, &ts) < 0)
			return -EPROTO;
		if (ev == TRACE_EV_CALL)
			ev = TRACE_EV_ENTER;
	}
	trace_agg_event(t->agg, &pid, ev, frame, ts);
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
	if (ei_decode_tuple_header(reply->buf, &index, &n) < 0 ||
	    n != (t->calls ? 4 : 3))
		return -EPROTO;
	if (decode_status(reply->buf, &index, res) < 0)
		return -EPROTO;
	if (etf_decode_int(reply->buf, &index, &events) < 0 || events < 0 ||
	    ei_decode_list_header(reply->buf, &index, &len) < 0 || len < 0)
		return -EPROTO;
	res->events = (uint64_t)events;
	if (!t->agg)
		return -EPROTO;
	/* the events before a malformed one still count */
	for (int i = 0; i < len; i++)
		if (decode_event(t, reply->buf, &index) < 0) {
			trace_agg_flush(t->agg, false, each, data);
			return -EPROTO;
		}
	if (t->calls) {
		int64_t skipped;

		if (len > 0 && ei_decode_list_header(reply->buf, &index, &n) < 0)
			return -EPROTO;
		if (etf_decode_int(reply->buf, &index, &skipped) < 0 ||
		    skipped < 0)
			return -EPROTO;
		res->calls_skipped = (uint64_t)skipped;
		trace_agg_call_counts(t->agg, &res->calls, &res->calls_ended);
	}
	res->unkept = trace_agg_unkept(t->agg);
	trace_agg_flush(t->agg, res->state != FP_TRACE_RUNNING, each, data);
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
