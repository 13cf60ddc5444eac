%% fp_bench -- helpers that bench/ctl.escript loads onto the demo node
%% (code:load_binary over distribution; never onto a real node).
%%
%% tickers/3      N processes that wake every Period ms inside Depth
%%                frames of non-tail recursion: active (every one has
%%                reductions in each selection interval, so --top N has N
%%                processes to pick, with deep stacks) yet nearly idle, so
%%                the node stays quiet for scheduler_wall_time.
%% swt_hold/0     scheduler_wall_time is reference-counted per process on
%%                OTP 22+: an rpc would turn it on in a short-lived process
%%                and lose it at once. A registered holder process keeps it
%%                on until swt_release/0, which turns it back off.
%% swt/0          {ActiveSum, TotalSum, Schedulers} over the normal
%%                schedulers (dirty ones are not where rpcs run).
-module(fp_bench).

-export([tickers/3, stop_tickers/0, tick_loop/2, tick_deep/2,
         swt_hold/0, swt_release/0, swt/0]).

-define(TICKERS, fp_bench_tickers).
-define(SWT, fp_bench_swt).

tickers(N, Period, Depth) ->
    stop_tickers(),
    Parent = self(),
    Owner = spawn(fun() ->
                          register(?TICKERS, self()),
                          [spawn_link(?MODULE, tick_loop, [Period, Depth])
                           || _ <- lists:seq(1, N)],
                          Parent ! {?TICKERS, started},
                          receive stop -> exit(kill_tickers) end
                  end),
    receive {?TICKERS, started} -> {ok, Owner} after 60000 -> {error, timeout} end.

stop_tickers() ->
    case whereis(?TICKERS) of
        undefined -> ok;
        Pid ->
            MRef = erlang:monitor(process, Pid),
            Pid ! stop,
            receive {'DOWN', MRef, process, Pid, _} -> ok after 30000 -> ok end
    end.

tick_loop(Period, Depth) ->
    %% spread the wake-ups over the period
    receive after rand:uniform(max(Period, 1)) -> ok end,
    tick_forever(Period, Depth).

tick_forever(Period, Depth) ->
    _ = tick_deep(Depth, Period),
    tick_forever(Period, Depth).

%% Two alternating call sites keep every level visible in
%% current_stacktrace (see fp_demo:deep/2).
tick_deep(0, Period) ->
    receive after Period -> lists:sum(lists:seq(1, 20)) end;
tick_deep(N, Period) when N band 1 =:= 0 ->
    1 + tick_deep(N - 1, Period);
tick_deep(N, Period) ->
    2 + tick_deep(N - 1, Period).

swt_hold() ->
    case whereis(?SWT) of
        undefined ->
            Parent = self(),
            spawn(fun() ->
                          register(?SWT, self()),
                          Old = erlang:system_flag(scheduler_wall_time, true),
                          Parent ! {?SWT, Old},
                          receive stop -> ok end,
                          erlang:system_flag(scheduler_wall_time, false)
                  end),
            receive {?SWT, Old} -> {ok, Old} after 10000 -> {error, timeout} end;
        _ ->
            {ok, already}
    end.

swt_release() ->
    case whereis(?SWT) of
        undefined -> ok;
        Pid ->
            MRef = erlang:monitor(process, Pid),
            Pid ! stop,
            receive {'DOWN', MRef, process, Pid, _} -> ok after 10000 -> ok end
    end.

swt() ->
    N = erlang:system_info(schedulers),
    case erlang:statistics(scheduler_wall_time) of
        undefined ->
            undefined;
        L ->
            {A, T} = lists:foldl(fun({Id, A0, T0}, {A1, T1}) when Id =< N ->
                                         {A1 + A0, T1 + T0};
                                    (_, Acc) -> Acc
                                 end, {0, 0}, L),
            {A, T, N}
    end.
