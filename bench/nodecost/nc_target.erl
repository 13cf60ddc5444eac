-module(nc_target).
-export([start/0, pids/1, pids_long/1, swt/0, dist_octets/1]).
%% Runs on the TARGET node: 200 processes blocked in receive under 30 frames,
%% scheduler_wall_time enabled (holder process stays alive), backtrace_depth 64.
start() ->
    erlang:system_flag(backtrace_depth, 64),
    Pids = [nc_deep:start(30) || _ <- lists:seq(1, 200)],
    Holder = spawn(fun() -> erlang:system_flag(scheduler_wall_time, true), receive stop -> ok end end),
    register(nc_holder, Holder),
    persistent_term:put(nc_pids, Pids),
    persistent_term:put(nc_pids_long, [nc_deep_long:start(30) || _ <- lists:seq(1, 100)]),
    ok.
pids_long(N) -> lists:sublist(persistent_term:get(nc_pids_long), N).
pids(N) -> lists:sublist(persistent_term:get(nc_pids), N).
%% Summed active time (ns) of normal + dirty cpu schedulers, and per type.
swt() ->
    S = erlang:statistics(scheduler_wall_time),
    NS = erlang:system_info(schedulers),
    ND = erlang:system_info(dirty_cpu_schedulers),
    Norm = lists:sum([A || {I, A, _} <- S, I =< NS]),
    Dirty = lists:sum([A || {I, A, _} <- S, I > NS, I =< NS + ND]),
    {erlang:convert_time_unit(Norm, native, nanosecond), erlang:convert_time_unit(Dirty, native, nanosecond)}.
dist_octets(Node) ->
    case lists:keyfind(Node, 1, erlang:system_info(dist_ctrl)) of
        {_, Port} when is_port(Port) ->
            {ok, [{recv_oct, R}, {send_oct, S}]} = inet:getstat(Port, [recv_oct, send_oct]), {R, S};
        _ -> {0, 0}
    end.
