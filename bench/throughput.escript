#!/usr/bin/env escript
%%! -hidden
%% throughput.escript -- the target's throughput with and without
%% flame_profd attached, alternating, in one run.
%%
%%   bench/throughput.escript NODE COOKIE_FILE FLAME_PROFD PAIRS WINDOW_S [DAEMON_ARG...]
%%
%% NODE runs test/erl/fp_demo.erl (fp_demo:throughput/0 counts completed
%% work units). Each pair measures one window with the daemon off and one
%% with it on (the order alternates between pairs, so drift does not
%% favour either side); the daemon is started 2 s before its window so the
%% window sees steady-state sampling. Prints every window, the medians and
%% min-max, and the median of the per-pair on/off ratios.
-mode(compile).

main([Node0, CookieFile, Daemon, Pairs0, Window0 | DaemonArgs]) ->
    Node = list_to_atom(Node0),
    {ok, CookieBin} = file:read_file(CookieFile),
    Cookie = list_to_atom(string:trim(binary_to_list(CookieBin))),
    ok = start_dist(Node),
    erlang:set_cookie(Node, Cookie),
    pong = net_adm:ping(Node),
    Pairs = list_to_integer(Pairs0),
    Window = list_to_integer(Window0),
    Args = ["--node", Node0, "--cookie-file", CookieFile, "-q" | DaemonArgs],
    Runs = [pair(Node, Daemon, Args, Window, I rem 2 =:= 0)
            || I <- lists:seq(0, Pairs - 1)],
    Off = [O || {O, _} <- Runs],
    On = [N || {_, N} <- Runs],
    Ratios = [N / O || {O, N} <- Runs],
    io:format("daemon args: ~s~n", [string:join(DaemonArgs, " ")]),
    io:format("off (units/s): ~s~n", [fmt(Off)]),
    io:format("on  (units/s): ~s~n", [fmt(On)]),
    io:format("median off ~.1f [~.1f-~.1f], median on ~.1f [~.1f-~.1f]~n",
              [median(Off), lists:min(Off), lists:max(Off),
               median(On), lists:min(On), lists:max(On)]),
    io:format("ratio on/off: median ~.4f [~.4f-~.4f] over ~b pairs~n",
              [median(Ratios), lists:min(Ratios), lists:max(Ratios), Pairs]);
main(_) ->
    io:format(standard_error, "usage: throughput.escript NODE COOKIE_FILE FLAME_PROFD PAIRS WINDOW_S [DAEMON_ARG...]~n", []),
    halt(64).

start_dist(Node) ->
    [_, Host] = string:split(atom_to_list(Node), "@"),
    Mode = case lists:member($., Host) of true -> longnames; false -> shortnames end,
    Name = list_to_atom("fp_bench_" ++ os:getpid()),
    {ok, _} = net_kernel:start([Name, Mode]),
    ok.

pair(Node, Daemon, Args, Window, OffFirst) ->
    case OffFirst of
        true ->
            Off = window(Node, Window),
            On = with_daemon(Node, Daemon, Args, Window),
            {Off, On};
        false ->
            On = with_daemon(Node, Daemon, Args, Window),
            Off = window(Node, Window),
            {Off, On}
    end.

with_daemon(Node, Daemon, Args, Window) ->
    Port = open_port({spawn_executable, Daemon},
                     [{args, Args}, exit_status, stderr_to_stdout]),
    timer:sleep(2000),
    Rate = window(Node, Window),
    {os_pid, OsPid} = erlang:port_info(Port, os_pid),
    os:cmd("kill -TERM " ++ integer_to_list(OsPid)),
    receive {Port, {exit_status, _}} -> ok after 15000 -> ok end,
    flush(Port),
    timer:sleep(1000),
    Rate.

flush(Port) ->
    receive {Port, _} -> flush(Port) after 0 -> ok end.

window(Node, Seconds) ->
    T0 = erlang:monotonic_time(microsecond),
    C0 = rpc:call(Node, fp_demo, throughput, []),
    timer:sleep(Seconds * 1000),
    T1 = erlang:monotonic_time(microsecond),
    C1 = rpc:call(Node, fp_demo, throughput, []),
    (C1 - C0) * 1.0e6 / (T1 - T0).

median(L) ->
    S = lists:sort(L),
    N = length(S),
    case N rem 2 of
        1 -> lists:nth(N div 2 + 1, S);
        0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
    end.

fmt(L) -> string:join([io_lib:format("~.1f", [X]) || X <- L], " ").
