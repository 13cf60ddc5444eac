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
%% helper_pid/1   the process linked to the flame_profd of OS pid OsPid
%%                (its --request helper process), as "<0.N.0>", or none.
%% suspend/1, resume/1
%%                erlang:suspend_process/1 and resume_process/1 of such a
%%                "<0.N.0>" from a registered holder: a suspension ends
%%                with the process that made it, and an rpc's is gone at
%%                once. bench/run --alternate stops a helper with its
%%                daemon, which SIGSTOP alone would not.
-module(fp_bench).

-export([tickers/3, stop_tickers/0, tick_loop/2, tick_deep/2,
         swt_hold/0, swt_release/0, swt/0,
         helper_pid/1, suspend/1, resume/1]).

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

helper_pid(OsPid) ->
    Prefix = "flame_profd_" ++ integer_to_list(OsPid) ++ "@",
    Linked = [P || P <- processes(),
                   {links, L} <- [erlang:process_info(P, links)],
                   lists:any(fun(X) when is_pid(X) ->
                                     lists:prefix(Prefix, atom_to_list(node(X)));
                                (_) -> false
                             end, L)],
    case Linked of
        [P | _] -> pid_to_list(P);
        [] -> none
    end.

suspend(PidText) -> suspender({suspend, list_to_pid(PidText)}).

resume(PidText) -> suspender({resume, list_to_pid(PidText)}).

-define(SUSP, fp_bench_susp).

suspender(Op) ->
    Holder = case whereis(?SUSP) of
                 undefined ->
                     Pid = spawn(fun susp_loop/0),
                     try register(?SUSP, Pid), Pid
                     catch error:badarg -> exit(Pid, kill), whereis(?SUSP)
                     end;
                 Pid ->
                     Pid
             end,
    Holder ! {Op, self()},
    receive {?SUSP, R} -> R after 10000 -> timeout end.

susp_loop() ->
    receive
        {{suspend, P}, From} ->
            From ! {?SUSP, catch erlang:suspend_process(P)};
        {{resume, P}, From} ->
            From ! {?SUSP, catch erlang:resume_process(P)}
    end,
    susp_loop().
