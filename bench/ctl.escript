#!/usr/bin/env escript
%%! -hidden
%% ctl.escript -- bench/run's line protocol to the demo node.
%%
%%   bench/ctl.escript NODE COOKIE_FILE      (ERL_EPMD_PORT as for the node)
%%
%% Connects as a hidden node, then reads one command per line on stdin and
%% answers one line on stdout: "FPCTL ok [VALUES...]" or "FPCTL err REASON".
%%
%%   info                     schedulers_online otp_release process_count
%%   throughput               fp_demo:throughput(), then its parts: busy
%%                            crunches and server calls
%%   workload ERLANG_MAP      fp_demo:stop(), fp_demo:start(Map); waits for
%%                            the process count to settle; answers it
%%   load                     compile bench/fp_bench.erl, load it on the node
%%   tickers N PERIOD DEPTH   fp_bench:tickers/3 (N=0 stops them)
%%   swt_hold | swt_release   scheduler_wall_time on / back off
%%   swt                      active_sum total_sum schedulers
%%   helper OSPID             the --request helper process of that daemon
%%                            ("<0.N.0>", or none)
%%   suspend PID | resume PID fp_bench:suspend/1, resume/1
%%   quit
-mode(compile).

main([Node0, CookieFile]) ->
    Node = list_to_atom(Node0),
    {ok, CookieBin} = file:read_file(CookieFile),
    Cookie = list_to_atom(string:trim(binary_to_list(CookieBin))),
    ok = start_dist(Node),
    erlang:set_cookie(Node, Cookie),
    case net_adm:ping(Node) of
        pong -> loop(Node);
        pang -> reply({err, "cannot reach " ++ Node0}), halt(1)
    end;
main(_) ->
    io:format(standard_error, "usage: ctl.escript NODE COOKIE_FILE~n", []),
    halt(64).

start_dist(Node) ->
    [_, Host] = string:split(atom_to_list(Node), "@"),
    Mode = case lists:member($., Host) of true -> longnames; false -> shortnames end,
    Name = list_to_atom("fp_bench_ctl_" ++ os:getpid()),
    {ok, _} = net_kernel:start([Name, Mode]),
    ok.

loop(Node) ->
    case io:get_line("") of
        eof -> halt(0);
        {error, _} -> halt(0);
        Line ->
            case string:split(string:trim(Line), " ") of
                ["quit" | _] ->
                    reply(ok),
                    halt(0);
                [Cmd | Rest] ->
                    Reply = try command(Node, Cmd, Rest)
                            catch C:R -> {err, io_lib:format("~p:~p", [C, R])}
                            end,
                    reply(Reply),
                    loop(Node)
            end
    end.

%% Replies start with "FPCTL ": crash reports of processes whose group
%% leader is this node (everything started over rpc) land on our stdout too.
reply(ok) -> io:format("FPCTL ok~n");
reply({ok, Vs}) -> io:format("FPCTL ok ~s~n", [string:join([to_s(V) || V <- Vs], " ")]);
reply({err, R}) -> io:format("FPCTL err ~s~n", [re:replace(lists:flatten(R), "\n", " ", [global, {return, list}])]).

to_s(V) when is_integer(V) -> integer_to_list(V);
to_s(V) when is_list(V) -> V;
to_s(V) -> lists:flatten(io_lib:format("~w", [V])).

call(Node, M, F, A) ->
    case rpc:call(Node, M, F, A, 120000) of
        {badrpc, R} -> throw({badrpc, R});
        V -> V
    end.

command(Node, "info", _) ->
    {ok, [call(Node, erlang, system_info, [schedulers_online]),
          call(Node, erlang, system_info, [otp_release]),
          call(Node, erlang, system_info, [process_count])]};
command(Node, "throughput", _) ->
    Busy = call(Node, fp_demo, throughput, [busy]),
    Calls = call(Node, fp_demo, throughput, [calls]),
    {ok, [Busy + Calls, Busy, Calls]};
command(Node, "workload", [Text]) ->
    {ok, Toks, _} = erl_scan:string(Text ++ "."),
    {ok, [Expr]} = erl_parse:parse_exprs(Toks),
    {value, Opts, _} = erl_eval:expr(Expr, []),
    ok = call(Node, fp_demo, stop, []),
    ok = names_gone(Node, 0),
    {ok, _} = call(Node, fp_demo, start, [Opts]),
    {ok, [settle(Node, -1, 0)]};
command(Node, "load", _) ->
    Src = filename:join(filename:dirname(escript:script_name()), "fp_bench.erl"),
    {ok, Mod, Bin} = compile:file(Src, [binary, report]),
    {module, Mod} = call(Node, code, load_binary, [Mod, "fp_bench.erl", Bin]),
    ok;
command(Node, "tickers", [Args]) ->
    [N, P, D] = [list_to_integer(S) || S <- string:lexemes(Args, " ")],
    case N of
        0 -> ok = call(Node, fp_bench, stop_tickers, []);
        _ -> {ok, _} = call(Node, fp_bench, tickers, [N, P, D])
    end,
    {ok, [settle(Node, -1, 0)]};
command(Node, "swt_hold", _) ->
    {ok, Old} = call(Node, fp_bench, swt_hold, []),
    {ok, [Old]};
command(Node, "swt_release", _) ->
    ok = call(Node, fp_bench, swt_release, []),
    ok;
command(Node, "swt", _) ->
    case call(Node, fp_bench, swt, []) of
        {A, T, N} -> {ok, [A, T, N]};
        undefined -> {err, "scheduler_wall_time is off"}
    end;
command(Node, "helper", [OsPid]) ->
    {ok, [call(Node, fp_bench, helper_pid, [list_to_integer(OsPid)])]};
command(Node, "suspend", [Pid]) ->
    true = call(Node, fp_bench, suspend, [Pid]),
    ok;
command(Node, "resume", [Pid]) ->
    true = call(Node, fp_bench, resume, [Pid]),
    ok;
command(_, Cmd, _) ->
    {err, "unknown command " ++ Cmd}.

%% fp_demo:stop/0 returns when the owner is gone; its linked workers die
%% a little later and keep their registered names until then, so an
%% immediate start/1 fails in register/2.
names_gone(Node, Tries) ->
    Names = [N || N <- call(Node, erlang, registered, []),
                  lists:prefix("fp_demo", atom_to_list(N))],
    case Names =:= [] orelse Tries > 100 of
        true -> ok;
        false -> timer:sleep(100), names_gone(Node, Tries + 1)
    end.

%% Exits of a stopped workload (100k linked processes) take a moment:
%% wait until the process count is the same twice in a row.
settle(Node, Last, Tries) ->
    N = call(Node, erlang, system_info, [process_count]),
    case N =:= Last orelse Tries > 50 of
        true -> N;
        false -> timer:sleep(200), settle(Node, N, Tries + 1)
    end.
