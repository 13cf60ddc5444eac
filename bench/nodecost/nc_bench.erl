-module(nc_bench).
-export([main/0, main/1, items/0, strip_expr/0, strip_compiled/2]).

-define(ITEMS, [status, registered_name, current_stacktrace, reductions, memory,
                message_queue_len, total_heap_size, heap_size, stack_size,
                garbage_collection, garbage_collection_info]).
items() -> ?ITEMS.

main() -> main([7]).
main([R]) when is_atom(R) -> main([list_to_integer(atom_to_list(R))]);
main([Rounds]) ->
    erlang:system_flag(scheduler_wall_time, true),
    erlang:system_flag(backtrace_depth, 64),
    process_flag(priority, high),
    N = 100,
    B30  = [nc_deep:start(30) || _ <- lists:seq(1, N)],
    B60  = [nc_deep:start(60) || _ <- lists:seq(1, N)],
    L30  = [nc_deep_long:start(30) || _ <- lists:seq(1, N)],
    NL30 = [nc_deep_noline:start(30) || _ <- lists:seq(1, N)],
    timer:sleep(200),
    Full = ?ITEMS,
    NoST = Full -- [current_stacktrace],
    STFirst = [current_stacktrace | NoST],
    Red1 = Full -- [garbage_collection_info],
    Red2 = Full -- [garbage_collection_info, garbage_collection],
    PI = fun(Pids, Items) -> fun() -> zw(Pids, Items) end end,
    Var = fun(Name, Pids, Items) -> {Name, 64, PI(Pids, Items)} end,
    RFull = zw(B30, Full),
    RFullLong = zw(L30, Full),
    RFullNL = zw(NL30, Full),
    RStrip = strip_compiled(B30, STFirst),
    RNoST = zw(B30, NoST),
    RST = zw(B30, [current_stacktrace]),
    Expr = strip_expr(),
    PExpr = parse("[erlang:process_info(P, Items) || P <- Pids]."),
    KExpr = parse("[case erlang:process_info(P, Items) of "
                  "  [{current_stacktrace, S} | R] -> [try lists:keymap(fun erlang:tl/1, 4, S) catch _:_ -> S end | R]; "
                  "  O -> O end || P <- Pids]."),
    EvalBs = erl_eval:add_binding('Pids', B30, erl_eval:add_binding('Items', STFirst, erl_eval:new_bindings())),
    Variants =
        [Var("a full list, 30 frames", B30, Full),
         Var("a full list, 60 frames", B60, Full),
         Var("a full list, 30 frames, long file name", L30, Full),
         Var("a full list, 30 frames, no line info", NL30, Full),
         Var("b [current_stacktrace] 30", B30, [current_stacktrace]),
         Var("b [current_stacktrace] 30 long file", L30, [current_stacktrace]),
         Var("b [current_stacktrace] 30 no line info", NL30, [current_stacktrace]),
         Var("c full minus current_stacktrace", B30, NoST),
         Var("c' full minus gc_info", B30, Red1),
         Var("c'' full minus gc_info, gc", B30, Red2),
         Var("d [status] (baseline)", B30, [status]),
         Var("d []", B30, []),
         Var("x [current_function]", B30, [current_function]),
         Var("x [current_location]", B30, [current_location])] ++
        [Var("d [" ++ atom_to_list(I) ++ "]", B30, [I]) || I <- NoST, I =/= status] ++
        [{"f [current_stacktrace] depth " ++ integer_to_list(D) ++ ", " ++ integer_to_list(S) ++ " frames", D,
          PI(P, [current_stacktrace])} || {S, P} <- [{30, B30}, {60, B60}], D <- [8, 16, 32, 64]] ++
        [{"f full list depth " ++ integer_to_list(D) ++ ", 30 frames", D, PI(B30, Full)} || D <- [8, 16]] ++
        [Var("g [backtrace] 30 frames", B30, [backtrace]),
         Var("g [backtrace] 60 frames", B60, [backtrace]),
         {"e term_to_binary(a)", 64, fun() -> term_to_binary(RFull) end},
         {"e term_to_binary(a, minor_version 2)", 64, fun() -> term_to_binary(RFull, [{minor_version, 2}]) end},
         {"e external_size(a)", 64, fun() -> erlang:external_size(RFull) end},
         {"e term_to_binary(a long file)", 64, fun() -> term_to_binary(RFullLong) end},
         {"e term_to_binary(a no line info)", 64, fun() -> term_to_binary(RFullNL) end},
         {"e term_to_binary(b)", 64, fun() -> term_to_binary(RST) end},
         {"e term_to_binary(c)", 64, fun() -> term_to_binary(RNoST) end},
         {"e term_to_binary(a stripped of file)", 64, fun() -> term_to_binary(RStrip) end},
         {"w spawn worker: a + term_to_binary (rex-like)", 64,
          fun() -> worker(fun() -> term_to_binary(zw(B30, Full)) end) end},
         {"w spawn worker: a only", 64, fun() -> worker(fun() -> zw(B30, Full), ok end) end},
         {"w spawn worker: a minus gc_info + term_to_binary", 64,
          fun() -> worker(fun() -> term_to_binary(zw(B30, Full -- [garbage_collection_info])) end) end},
         {"w spawn worker min_heap_size 256k words: a + term_to_binary", 64,
          fun() -> worker(fun() -> term_to_binary(zw(B30, Full)) end, [{min_heap_size, 256 * 1024}]) end},
         {"w spawn worker: a stripped (compiled) + term_to_binary", 64,
          fun() -> worker(fun() -> term_to_binary(strip_compiled(B30, STFirst)) end) end},
         {"w spawn worker: empty", 64, fun() -> worker(fun() -> ok end) end},
         {"v strip file (compiled helper, NOT stock)", 64, fun() -> strip_compiled(B30, STFirst) end},
         {"v strip file via erl_eval:exprs/2 (with erl_lint check)", 64, fun() -> erl_eval:exprs(Expr, EvalBs) end},
         {"v strip file via erl_eval:exprs/3 (no lint)", 64, fun() -> erl_eval:exprs(Expr, EvalBs, none) end},
         {"v strip file via erl_eval:exprs/3 + lists:keymap(fun erlang:tl/1)", 64, fun() -> erl_eval:exprs(KExpr, EvalBs, none) end},
         {"v full list via erl_eval:exprs/3 (no strip)", 64,
          fun() -> erl_eval:exprs(PExpr, EvalBs, none) end}],
    Sizes = [{"a", RFull}, {"a long file", RFullLong}, {"a no line info", RFullNL},
             {"b", RST}, {"c", RNoST}, {"a stripped of file", RStrip}],
    io:format("# sizes per sample (bytes): name t2b t2b_mv2 external_size heap_words~n"),
    [io:format("size\t~s\t~.1f\t~.1f\t~.1f\t~.1f~n",
               [Nm, byte_size(term_to_binary(T)) / N, byte_size(term_to_binary(T, [{minor_version, 2}])) / N,
                erlang:external_size(T) / N, erts_debug:flat_size(T) / N]) || {Nm, T} <- Sizes],
    Res = lists:foldl(
            fun(Round, Acc) ->
                    Order = case Round rem 2 of 0 -> Variants; 1 -> lists:reverse(Variants) end,
                    lists:foldl(fun({Nm, D, F}, A2) ->
                                        erlang:system_flag(backtrace_depth, D),
                                        {Tc, Sw} = measure(F),
                                        erlang:system_flag(backtrace_depth, 64),
                                        maps:update_with(Nm, fun(L) -> [{Tc / N, Sw / N} | L] end,
                                                         [{Tc / N, Sw / N}], A2)
                                end, Acc, Order)
            end, #{}, lists:seq(1, Rounds)),
    io:format("# us per sample (per pid; 100 pids per call): name median_tc median_schedwall min_tc max_tc~n"),
    [begin L = maps:get(Nm, Res), Tcs = [A || {A, _} <- L], Sws = [B || {_, B} <- L],
           io:format("us\t~s\t~.3f\t~.3f\t~.3f\t~.3f~n", [Nm, median(Tcs), median(Sws), lists:min(Tcs), lists:max(Tcs)])
     end || {Nm, _, _} <- Variants],
    busy(Rounds, Full),
    ok.

busy(Rounds, Full) ->
    erlang:system_flag(backtrace_depth, 64),
    Busy = [nc_deep:start_busy(30) || _ <- lists:seq(1, 100)],
    timer:sleep(200),
    Vs = [{"busy: a full list", Full}, {"busy: [current_stacktrace]", [current_stacktrace]},
          {"busy: [status]", [status]}, {"busy: full minus current_stacktrace", Full -- [current_stacktrace]}],
    Res = [{Nm, [element(1, measure(fun() -> zw(Busy, It) end)) / 100 || _ <- lists:seq(1, Rounds)]} || {Nm, It} <- Vs],
    io:format("# busy targets (100 looping procs, bench at priority high), wall us per sample~n"),
    [io:format("us\t~s\t~.3f\t-\t~.3f\t~.3f~n", [Nm, median(L), lists:min(L), lists:max(L)]) || {Nm, L} <- Res],
    [exit(P, kill) || P <- Busy],
    ok.

zw(Pids, Items) ->
    lists:zipwith(fun erlang:process_info/2, Pids, [Items || _ <- Pids]).

worker(F) -> worker(F, []).
worker(F, Opts) ->
    {P, M} = spawn_opt(F, [monitor | Opts]),
    receive {'DOWN', M, process, P, _} -> ok end.

%% Runs F repeatedly for ~150 ms; returns {us per call by timer:tc, us per call of summed active scheduler time}.
measure(F) ->
    F(), erlang:garbage_collect(),
    S0 = erlang:statistics(scheduler_wall_time),
    T0 = erlang:monotonic_time(microsecond),
    K = loop(F, T0 + 150000, 0),
    T1 = erlang:monotonic_time(microsecond),
    S1 = erlang:statistics(scheduler_wall_time),
    {(T1 - T0) / K, active(S0, S1) / K}.
loop(F, Deadline, K) ->
    F(), F(), F(), F(),
    case erlang:monotonic_time(microsecond) of T when T >= Deadline -> K + 4; _ -> loop(F, Deadline, K + 4) end.

active(S0, S1) ->
    NS = erlang:system_info(schedulers) + erlang:system_info(dirty_cpu_schedulers),
    A = lists:sum([A1 - A0 || {I, A1, _} <- S1, I =< NS, {J, A0, _} <- S0, I =:= J]),
    erlang:convert_time_unit(A, native, nanosecond) / 1000.

median(L) -> S = lists:sort(L), N = length(S),
    case N rem 2 of 1 -> lists:nth(N div 2 + 1, S); 0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2 end.

parse(S) -> {ok, T, _} = erl_scan:string(S), {ok, E} = erl_parse:parse_exprs(T), E.

%% Expression sent to the target for erl_eval: current_stacktrace must be first in Items.
strip_expr() ->
    parse("[case erlang:process_info(P, Items) of "
          "  [{current_stacktrace, S} | R] -> [[{M, F, A, Ln} || {M, F, A, [_, {line, Ln}]} <- S] | R]; "
          "  O -> O end || P <- Pids].").

strip_compiled(Pids, Items) ->
    [case erlang:process_info(P, Items) of
         [{current_stacktrace, S} | R] -> [[{M, F, A, Ln} || {M, F, A, [_, {line, Ln}]} <- S] | R];
         O -> O
     end || P <- Pids].
