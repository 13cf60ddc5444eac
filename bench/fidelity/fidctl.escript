#!/usr/bin/env escript
%%! -hidden
%% fidctl.escript -- bench/fidelity/run's line protocol to the benchmark node.
%%
%%   fidctl.escript NODE COOKIE_FILE          (ERL_EPMD_PORT as for the node)
%%
%% Connects as a hidden node, reads one command per line on stdin, answers
%% one line on stdout: "FIDCTL ok JSON" or "FIDCTL err REASON". Needs OTP 27
%% or later (the json module), like the node.
%%
%%   info                      otp_release, schedulers_online, process_count
%%   start W1,W2 [ERLANG_MAP]  fid_wl:start/2 (fid_wl is on the node's path)
%%   stats                     fid_wl:stats()
%%   stacks NAME N MS MODE     N reads of NAME's status and stack, MS ms
%%                             apart, through rpc (a process on the node
%%                             asks, as the daemon's rex requests do):
%%                             MODE one: process_info(P, [status,
%%                             current_stacktrace]) in one call; two: the
%%                             status in a call of its own first, as the
%%                             daemon asks (docs/FORMAT.md, STATUS).
%%                             Counts per {status, innermost 3 frames}
%%   quit
-mode(compile).

main([Node0, CookieFile]) ->
    Node = list_to_atom(Node0),
    {ok, CookieBin} = file:read_file(CookieFile),
    Cookie = list_to_atom(string:trim(binary_to_list(CookieBin))),
    [_, Host] = string:split(Node0, "@"),
    Mode = case lists:member($., Host) of true -> longnames; false -> shortnames end,
    {ok, _} = net_kernel:start([list_to_atom("fidctl_" ++ os:getpid()), Mode]),
    erlang:set_cookie(Node, Cookie),
    case net_adm:ping(Node) of
        pong -> loop(Node);
        pang -> io:format("FIDCTL err cannot reach ~s~n", [Node0]), halt(1)
    end;
main(_) ->
    io:format(standard_error, "usage: fidctl.escript NODE COOKIE_FILE~n", []),
    halt(64).

loop(Node) ->
    case io:get_line("") of
        eof -> halt(0);
        {error, _} -> halt(0);
        Line ->
            case string:split(string:trim(Line), " ", all) of
                ["quit" | _] -> io:format("FIDCTL ok null~n"), halt(0);
                [Cmd | Rest] ->
                    try command(Node, Cmd, Rest) of
                        V -> io:format("FIDCTL ok ~s~n", [json:encode(jsonable(V))])
                    catch C:R ->
                        Msg = lists:flatten(io_lib:format("~p:~p", [C, R])),
                        io:format("FIDCTL err ~s~n",
                                  [re:replace(Msg, "\n", " ", [global, {return, list}])])
                    end,
                    loop(Node)
            end
    end.

call(Node, M, F, A) ->
    case rpc:call(Node, M, F, A, 60000) of
        {badrpc, R} -> throw({badrpc, R});
        V -> V
    end.

command(Node, "info", _) ->
    #{otp_release => call(Node, erlang, system_info, [otp_release]),
      schedulers_online => call(Node, erlang, system_info, [schedulers_online]),
      process_count => call(Node, erlang, system_info, [process_count])};
command(Node, "start", [Ws | Rest]) ->
    Opts = case Rest of
               [] -> #{};
               _ -> {ok, Toks, _} = erl_scan:string(lists:flatten(lists:join(" ", Rest)) ++ "."),
                    {ok, T} = erl_parse:parse_term(Toks),
                    T
           end,
    Atoms = [list_to_atom(W) || W <- string:lexemes(Ws, ",")],
    {ok, Info} = call(Node, fid_wl, start, [Atoms, Opts]),
    Info;
command(Node, "stats", _) ->
    call(Node, fid_wl, stats, []);
command(Node, "stacks", [Name, N0, Ms0, Mode]) ->
    N = list_to_integer(N0),
    Ms = list_to_integer(Ms0),
    Pid = call(Node, erlang, whereis, [list_to_atom(Name)]),
    Read = case Mode of
               "one" ->
                   fun() -> call(Node, erlang, process_info,
                                 [Pid, [status, current_stacktrace]])
                   end;
               "two" ->
                   fun() ->
                           [{status, S} | _] =
                               call(Node, erlang, process_info,
                                    [Pid, [status, registered_name, initial_call]]),
                           [{current_stacktrace, St}] =
                               call(Node, erlang, process_info, [Pid, [current_stacktrace]]),
                           [{status, S}, {current_stacktrace, St}]
                   end
           end,
    Reads = [begin timer:sleep(Ms), Read() end || _ <- lists:seq(1, N)],
    Keys = [key(R) || R <- Reads],
    Counts = lists:foldl(fun(K, M) -> maps:update_with(K, fun(C) -> C + 1 end, 1, M) end,
                         #{}, Keys),
    [#{status => S, frames => Fs, count => C}
     || {{S, Fs}, C} <- lists:reverse(lists:keysort(2, maps:to_list(Counts)))];
command(_, Cmd, _) ->
    throw({unknown_command, Cmd}).

key([{status, S}, {current_stacktrace, St}]) ->
    {S, [iolist_to_binary(io_lib:format("~w:~w/~w", [M, F, arity(A)]))
         || {M, F, A, _} <- lists:sublist(St, 3)]};
key(Other) ->
    {undefined, [iolist_to_binary(io_lib:format("~w", [Other]))]}.

arity(A) when is_list(A) -> length(A);
arity(A) -> A.

jsonable(M) when is_map(M) ->
    maps:from_list([{jkey(K), jsonable(V)} || {K, V} <- maps:to_list(M)]);
jsonable(L) when is_list(L) ->
    case io_lib:printable_unicode_list(L) andalso L =/= [] of
        true -> unicode:characters_to_binary(L);
        false -> [jsonable(X) || X <- L]
    end;
jsonable(T) when is_tuple(T) -> [jsonable(X) || X <- tuple_to_list(T)];
jsonable(A) when is_atom(A), A =/= true, A =/= false, A =/= null -> atom_to_binary(A);
jsonable(P) when is_pid(P) -> list_to_binary(pid_to_list(P));
jsonable(X) -> X.

jkey(K) when is_atom(K) -> K;
jkey(K) when is_binary(K) -> K;
jkey(K) -> iolist_to_binary(io_lib:format("~w", [K])).
