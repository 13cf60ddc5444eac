-module(dist_bench).
-export([main/1, variants/2]).
-define(ITEMS, [status, registered_name, current_stacktrace, reductions, memory,
                message_queue_len, total_heap_size, heap_size, stack_size,
                garbage_collection, garbage_collection_info]).

variants(_, _) -> ok.
main([TA, RoundsA, DurA]) ->
    T = list_to_atom(TA), Rounds = list_to_integer(RoundsA), DurMs = list_to_integer(DurA),
    pong = net_adm:ping(T),
    P10 = erpc:call(T, nc_target, pids, [10]), P50 = erpc:call(T, nc_target, pids, [50]),
    P100 = erpc:call(T, nc_target, pids, [100]), P200 = erpc:call(T, nc_target, pids, [200]),
    Full = ?ITEMS,
    NoGCI = Full -- [garbage_collection_info],
    NoGC = Full -- [garbage_collection_info, garbage_collection],
    NoST = Full -- [current_stacktrace],
    NoSig = Full -- [current_stacktrace, memory, total_heap_size],
    STFirst = [current_stacktrace | Full -- [current_stacktrace]],
    Need = [current_stacktrace, status, reductions, memory, message_queue_len, total_heap_size,
            heap_size, stack_size, garbage_collection, garbage_collection_info],
    ZW = fun(Pids, Items) -> [fun erlang:process_info/2, Pids, [Items || _ <- Pids]] end,
    Rex = fun(M, F, A) -> fun() -> gen_server:call({rex, T}, {call, M, F, A, user}, infinity) end end,
    RexB = fun(M, F, A) -> fun() -> gen_server:call({rex, T}, {block_call, M, F, A, user}, infinity) end end,
    Daemon = fun(Pids, Items) -> Rex(timer, tc, [lists, zipwith, ZW(Pids, Items)]) end,
    Eval = fun(Src, Pids, Items) ->
                   %% bindings are passed (and returned in the reply: {value, V, Bindings})
                   Bs = erl_eval:add_binding('PIDS', Pids, erl_eval:add_binding('ITEMS', Items, erl_eval:new_bindings())),
                   Rex(erl_eval, exprs, [parse(Src), Bs, none])
           end,
    StripLC = "[case erlang:process_info(P, ITEMS) of "
              "  [{current_stacktrace, S} | R] -> [[{M, F, A, Ln} || {M, F, A, [_, {line, Ln}]} <- S] | R]; "
              "  O -> O end || P <- PIDS].",
    StripKeymap = "[case erlang:process_info(P, ITEMS) of "
                  "  [{current_stacktrace, S} | R] -> "
                  "     [try lists:keymap(fun erlang:tl/1, 4, S) catch _:_ -> S end | R]; "
                  "  O -> O end || P <- PIDS].",
    PlainEval = "[erlang:process_info(P, ITEMS) || P <- PIDS].",
    PL100 = erpc:call(T, nc_target, pids_long, [100]),
    NoSigNeed = [status, reductions, message_queue_len, heap_size, stack_size, garbage_collection, garbage_collection_info],
    Set2 = [{"i   daemon: rex $gen_call timer:tc(zipwith) full, 100", 100, Daemon(P100, Full)},
            {"iv  daemon shape, needed items only (no registered_name), 100", 100, Daemon(P100, Need)},
            {"vi  block_call timer:tc(zipwith), needed items, 100", 100, RexB(timer, tc, [lists, zipwith, ZW(P100, Need)])},
            {"vi  block_call timer:tc(zipwith), full, 100", 100, RexB(timer, tc, [lists, zipwith, ZW(P100, Full)])},
            {"iv  daemon shape, [current_stacktrace, gc_info], 100", 100, Daemon(P100, [current_stacktrace, garbage_collection_info])},
            {"iv  daemon shape, [current_stacktrace, gc], 100", 100, Daemon(P100, [current_stacktrace, garbage_collection])},
            {"iv  daemon shape, [current_stacktrace] only, 100", 100, Daemon(P100, [current_stacktrace])},
            {"iv  daemon shape, no gc_info, 100", 100, Daemon(P100, NoGCI)},
            {"vii daemon shape, full, LONG file names, 100", 100, Daemon(PL100, Full)},
            {"vii erl_eval LC no strip, LONG file names, 100", 100, Eval(PlainEval, PL100, Full)},
            {"vii erl_eval strip keymap(tl), LONG file names, 100", 100, Eval(StripKeymap, PL100, STFirst)},
            {"v   erl_eval strip file via lists:keymap(fun erlang:tl/1), 100", 100, Eval(StripKeymap, P100, STFirst)},
            {"viii daemon shape, counters only, no signal items (needed minus stack/memory/total_heap), 100", 100, Daemon(P100, NoSigNeed)},
            {"viii block_call, counters only, no signal items, 100", 100, RexB(timer, tc, [lists, zipwith, ZW(P100, NoSigNeed)])},
            {"vi  block_call [current_stacktrace] only, 100", 100, RexB(timer, tc, [lists, zipwith, ZW(P100, [current_stacktrace])])},
            {"ix  erl_eval process_flag(min_heap_size,256k) + LC, needed items, 100", 100,
             Eval("process_flag(min_heap_size, 262144), [erlang:process_info(P, ITEMS) || P <- PIDS].", P100, Need)},
            {"o   idle (no requests, sleep)", 1, idle}],
    Set1 =
        [{"i   daemon: rex $gen_call timer:tc(zipwith) full, 100", 100, Daemon(P100, Full)},
         {"i'  rex $gen_call zipwith (no timer:tc) full, 100", 100, Rex(lists, zipwith, ZW(P100, Full))},
         {"i'' rex $gen_call block_call zipwith full, 100", 100, RexB(lists, zipwith, ZW(P100, Full))},
         {"i'''rpc:call zipwith full, 100", 100, fun() -> rpc:call(T, lists, zipwith, ZW(P100, Full)) end},
         {"ii  erpc:call zipwith full, 100", 100, fun() -> erpc:call(T, lists, zipwith, ZW(P100, Full)) end},
         {"iii daemon shape, 10 pids", 10, Daemon(P10, Full)},
         {"iii daemon shape, 50 pids", 50, Daemon(P50, Full)},
         {"iii daemon shape, 200 pids", 200, Daemon(P200, Full)},
         {"iv  daemon shape, no gc_info, 100", 100, Daemon(P100, NoGCI)},
         {"iv  daemon shape, no gc_info/gc, 100", 100, Daemon(P100, NoGC)},
         {"iv  daemon shape, needed items only (no registered_name), 100", 100, Daemon(P100, Need)},
         {"iv  daemon shape, no current_stacktrace, 100", 100, Daemon(P100, NoST)},
         {"iv  daemon shape, no signal items (no stack/memory/total_heap), 100", 100, Daemon(P100, NoSig)},
         {"iv  daemon shape, [current_stacktrace] only, 100", 100, Daemon(P100, [current_stacktrace])},
         {"v   erl_eval LC, no strip, 100", 100, Eval(PlainEval, P100, Full)},
         {"v   erl_eval strip file via LC pattern, 100", 100, Eval(StripLC, P100, STFirst)},
         {"v   erl_eval strip file via lists:keymap(fun erlang:tl/1), 100", 100, Eval(StripKeymap, P100, STFirst)},
         {"o   rex $gen_call erlang:node() (empty request)", 1, Rex(erlang, node, [])},
         {"o   rex $gen_call zipwith with 0 pids (request overhead)", 1, Rex(lists, zipwith, ZW([], Full))},
         {"o   idle (no requests, sleep)", 1, idle}],
    Variants = case os:getenv("NC_SET") of "2" -> Set2; _ -> Set1 end,
    %% sanity: show one reply shape of each eval variant
    [begin {value, V, _} = (Eval(S, lists:sublist(P100, 1), STFirst))(),
           io:format("# sample ~s~n#   ~P~n", [Nm, V, 12]) end
     || {Nm, S} <- [{"strip LC", StripLC}, {"strip keymap", StripKeymap}]],
    Res = lists:foldl(
            fun(R, Acc) ->
                    Ord = case R rem 2 of 0 -> Variants; 1 -> lists:reverse(Variants) end,
                    lists:foldl(fun({Nm, B, F}, A2) ->
                                        M = run(T, F, DurMs),
                                        maps:update_with(Nm, fun(L) -> [{B, M} | L] end, [{B, M}], A2)
                                end, Acc, Ord)
            end, #{}, lists:seq(1, Rounds)),
    IdleL = [X || {_, X} <- maps:get("o   idle (no requests, sleep)", Res)],
    IdleNsPerMs = median([N / Ms || {_, _, N, _, _, Ms} <- IdleL]),
    io:format("# idle target: ~.1f us active per second~n", [IdleNsPerMs]),
    io:format("# name | samples/request | median us node sched time per sample (idle-corrected) | per request | "
              "dirty-cpu us/sample | wire bytes reply/sample | wire bytes request/request | client latency us/request | reqs/s | min..max us/sample~n"),
    [begin
         L = maps:get(Nm, Res),
         PerSample = [(N - IdleNsPerMs * Ms) / 1000 / (K * B) || {B0, {K, _, N, _, _, Ms}} <- L, B0 =:= B, K > 0],
         PerReq = [(N - IdleNsPerMs * Ms) / 1000 / K || {_, {K, _, N, _, _, Ms}} <- L, K > 0],
         Dirty = [D / 1000 / (K * B) || {_, {K, D, _, _, _, _}} <- L, K > 0],
         Send = [S / (K * B) || {_, {K, _, _, {_, S}, _, _}} <- L, K > 0],
         Recv = [Rv / K || {_, {K, _, _, {Rv, _}, _, _}} <- L, K > 0],
         Lat = [Ms * 1000 / K || {_, {K, _, _, _, _, Ms}} <- L, K > 0],
         Rps = [K * 1000 / Ms || {_, {K, _, _, _, _, Ms}} <- L, K > 0],
         io:format("dist\t~s\t~b\t~.2f\t~.1f\t~.2f\t~.1f\t~.1f\t~.1f\t~.1f\t~.2f..~.2f~n",
                   [Nm, B, median(PerSample), median(PerReq), median(Dirty), median(Send), median(Recv),
                    median(Lat), median(Rps), lists:min(PerSample), lists:max(PerSample)])
     end || {Nm, B, F} <- Variants, F =/= idle],
    ok.

%% Returns {Requests, DirtyNs, NormalNs, {RecvOct, SendOct} on target, 0, ElapsedMs}
run(T, F, DurMs) ->
    Me = node(),
    {N0, D0} = erpc:call(T, nc_target, swt, []),
    {R0, S0} = erpc:call(T, nc_target, dist_octets, [Me]),
    T0 = erlang:monotonic_time(microsecond),
    K = case F of
            idle -> timer:sleep(DurMs), 0;
            _ -> F(), loop(F, T0 + DurMs * 1000, 1)
        end,
    T1 = erlang:monotonic_time(microsecond),
    {N1, D1} = erpc:call(T, nc_target, swt, []),
    {R1, S1} = erpc:call(T, nc_target, dist_octets, [Me]),
    Ms = (T1 - T0) / 1000,
    case F of
        idle -> {0, D1 - D0, N1 - N0, {0, 0}, 0, Ms};
        _ -> {K, D1 - D0, N1 - N0, {R1 - R0, S1 - S0}, 0, Ms}
    end.
loop(F, Deadline, K) ->
    F(),
    case erlang:monotonic_time(microsecond) of X when X >= Deadline -> K + 1; _ -> loop(F, Deadline, K + 1) end.

median(L) -> S = lists:sort(L), N = length(S),
    case N rem 2 of 1 -> lists:nth(N div 2 + 1, S); 0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2 end.
parse(S) -> {ok, T, _} = erl_scan:string(S), {ok, E} = erl_parse:parse_exprs(T), E.
%% Replace variables named in Map by {value, Anno, Term} (erl_eval evaluates these to Term).
subst({var, A, V} = X, M) -> case maps:find(V, M) of {ok, Val} -> {value, A, Val}; error -> X end;
subst(T, M) when is_tuple(T) -> list_to_tuple(subst(tuple_to_list(T), M));
subst(L, M) when is_list(L) -> [subst(X, M) || X <- L];
subst(X, _) -> X.
