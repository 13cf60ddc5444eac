#!/usr/bin/env escript
%%! +S 2:2 -noshell
%% bench/picost.escript -- what erlang:process_info/2 costs a node whose
%% schedulers are all busy, item by item, inside one VM (no daemon, no
%% distribution): the cost a sample puts on the sampled process and the
%% sampling process, apart from everything around it.
%%
%% usage: escript bench/picost.escript [RATE MINUTES DEPTH WINDOW_MS]
%%        (default 2000 2.0 40 1000)
%%
%% Four CPU-bound workers on the two schedulers run DEPTH frames deep and
%% count their work; a sampler process asks them, in turn, RATE times a
%% second on a 20-ms tick (as the daemon's helper does). Windows of
%% WINDOW_MS alternate: off, on(variant), off, ... in a shuffled order per
%% round, until MINUTES have passed; each on window's work per CPU-ms of
%% the VM (erlang:statistics(runtime)) is divided by the mean of the off
%% windows either side. Per variant: the mean ratio with its 95% interval
%% and the node CPU per sample, (1 - ratio) x 2 schedulers / samples/s.
%% Variants: aa (the sampler wakes and asks nothing: the control),
%% current_function (the signal and a one-frame answer), stack
%% (current_stacktrace at backtrace_depth 64), stack8 (at depth 8) and
%% signalled (the daemon's full item list, libsample/node.c
%% signalled_items).
-mode(compile).

main(Args) ->
    {Rate, Minutes, Depth, Win} =
        case Args of
            [R, M, D, W] -> {list_to_integer(R), list_to_float(M),
                             list_to_integer(D), list_to_integer(W)};
            _ -> {2000, 2.0, 40, 1000}
        end,
    C = counters:new(1, [write_concurrency]),
    Workers = [spawn(fun() -> deep(Depth, C) end) || _ <- lists:seq(1, 4)],
    timer:sleep(2000),
    Signalled = [current_stacktrace, reductions, memory, message_queue_len,
                 total_heap_size, heap_size, stack_size, garbage_collection,
                 garbage_collection_info],
    Variants = [{aa, []}, {current_function, [current_function]},
                {stack, [current_stacktrace]},
                {stack8, {depth, 8, [current_stacktrace]}},
                {signalled, Signalled}],
    erlang:system_flag(backtrace_depth, 64),
    End = erlang:monotonic_time(millisecond) + round(Minutes * 60000),
    Res = rounds(Variants, Workers, Rate, Win, C, End, #{}),
    io:format("rate ~p/s depth ~p window ~p ms~n", [Rate, Depth, Win]),
    [begin
         Rs = lists:reverse(maps:get({ratio, V}, Res, [])),
         Ss = maps:get({samples, V}, Res, []),
         {Mean, Ci} = mci(Rs),
         SPS = lists:sum(Ss) / (length(Ss) * Win / 1000),
         Us = (1 - Mean) * 2.0e6 / max(SPS, 1),
         io:format("~-17s n=~3b ratio ~.4f +- ~.4f samples/s ~7.1f "
                   "us/sample ~6.1f~n", [V, length(Rs), Mean, Ci, SPS, Us])
     end || {V, _} <- Variants],
    halt(0).

mci(Xs) ->
    N = length(Xs),
    M = lists:sum(Xs) / N,
    Var = lists:sum([(X - M) * (X - M) || X <- Xs]) / max(N - 1, 1),
    {M, 1.96 * math:sqrt(Var / N)}.

rounds(Variants, Workers, Rate, Win, C, End, Acc) ->
    case erlang:monotonic_time(millisecond) > End of
        true -> Acc;
        false ->
            Acc1 = lists:foldl(
                     fun({V, Items}, A) ->
                             Off1 = window(none, Workers, Rate, Win, C),
                             {On, S} = window(Items, Workers, Rate, Win, C),
                             Off2 = window(none, Workers, Rate, Win, C),
                             R = On / ((element(1, Off1) + element(1, Off2)) / 2),
                             A#{{ratio, V} => [R | maps:get({ratio, V}, A, [])],
                                {samples, V} => [S | maps:get({samples, V}, A, [])]}
                     end, Acc, shuffle(Variants)),
            rounds(Variants, Workers, Rate, Win, C, End, Acc1)
    end.

shuffle(L) -> [X || {_, X} <- lists:sort([{rand:uniform(), X} || X <- L])].

window(Items, Workers, Rate, Win, C) ->
    {Restore, Items1} =
        case Items of
            {depth, D, I} -> {erlang:system_flag(backtrace_depth, D), I};
            _ -> {none, Items}
        end,
    Self = self(),
    S = case Items1 of
            none -> none;
            _ -> spawn(fun() -> sampler(Self, Items1, Workers, Rate) end)
        end,
    V0 = counters:get(C, 1),
    {R0, _} = erlang:statistics(runtime),
    timer:sleep(Win),
    V1 = counters:get(C, 1),
    {R1, _} = erlang:statistics(runtime),
    N = case S of
            none -> 0;
            _ -> S ! {stop, Self}, receive {sampled, K} -> K end
        end,
    case Restore of none -> ok; _ -> erlang:system_flag(backtrace_depth, Restore) end,
    case S of none -> {(V1 - V0) / max(R1 - R0, 1), 0}; _ -> {(V1 - V0) / max(R1 - R0, 1), N} end.

sampler(Parent, Items, Workers, Rate) ->
    PerTick = Rate div 50,
    erlang:send_after(20, self(), tick),
    sloop(Parent, Items, list_to_tuple(Workers), PerTick, 0, 0).

sloop(Parent, Items, Ws, PerTick, Cur, N) ->
    receive
        tick ->
            erlang:send_after(20, self(), tick),
            Cur1 = ask(Items, Ws, PerTick, Cur),
            sloop(Parent, Items, Ws, PerTick, Cur1, N + PerTick);
        {stop, P} -> P ! {sampled, N}
    end.

ask(_Items, _Ws, 0, Cur) -> Cur;
ask(Items, Ws, K, Cur) ->
    W = element(Cur + 1, Ws),
    case Items of
        [] -> ok;
        _ -> _ = erlang:process_info(W, Items)
    end,
    ask(Items, Ws, K - 1, (Cur + 1) rem tuple_size(Ws)).

deep(0, C) -> work(C);
deep(N, C) when N band 1 =:= 0 -> 1 + deep(N - 1, C);
deep(N, C) -> 2 + deep(N - 1, C).

work(C) ->
    spin(2000),
    counters:add(C, 1, 1),
    work(C).

spin(0) -> ok;
spin(N) -> spin(N - 1).
