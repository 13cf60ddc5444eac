%% What switching scheduler_wall_time on costs a node (the sched_util
%% trigger's watcher holds it): four pairs of processes ping-ponging
%% 200,000 messages each (every message a schedule out and in, where the
%% flag takes its timestamps) and four processes folding over 3M
%% integers, timed with the flag off and on, alternating, 15 times each;
%% prints the medians and each run's time.
%%
%%   erlc -o /tmp bench/sched_wall_time.erl && erl -noshell -pa /tmp -s sched_wall_time main
-module(sched_wall_time).
-export([main/0]).

pingpong(Pairs, N) ->
    Parent = self(),
    Pids = [spawn_link(fun() ->
                Pong = spawn_link(fun Loop() -> receive {P, X} -> P ! X, Loop() end end),
                [begin Pong ! {self(), I}, receive I -> ok end end || I <- lists:seq(1, N)],
                Parent ! {done, self()}
            end) || _ <- lists:seq(1, Pairs)],
    [receive {done, P} -> ok end || P <- Pids].

spin(Procs, N) ->
    Parent = self(),
    Pids = [spawn_link(fun() ->
                _ = lists:foldl(fun(X, A) -> (A + X) band 16#ffff end, 0, lists:seq(1, N)),
                Parent ! {done, self()}
            end) || _ <- lists:seq(1, Procs)],
    [receive {done, P} -> ok end || P <- Pids].

ms(F) -> {T, _} = timer:tc(F), T / 1000.

median(L) -> lists:nth((length(L) + 1) div 2, lists:sort(L)).

main() ->
    All = lists:append([[begin
                             erlang:system_flag(scheduler_wall_time, Flag),
                             {Flag, ms(fun() -> pingpong(4, 200000) end),
                              ms(fun() -> spin(4, 3000000) end)}
                         end || Flag <- [false, true]] || _ <- lists:seq(1, 15)]),
    erlang:system_flag(scheduler_wall_time, false),
    [begin
         PP = [P || {F, P, _} <- All, F =:= Flag],
         SP = [S || {F, _, S} <- All, F =:= Flag],
         io:format("scheduler_wall_time ~p: ping-pong median ~.1f ms ~w; fold median ~.1f ms~n",
                   [Flag, median(PP), [round(X) || X <- PP], median(SP)])
     end || Flag <- [false, true]],
    halt().
