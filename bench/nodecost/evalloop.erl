%% evalloop -- what one request costs an --request eval sampling process,
%% apart from the samples in it: the sampler's loop is interpreted by
%% erl_eval (receive, try, timer:tc, send, the recursive call), once per
%% request. In one VM, a client sends batches of 0, 1, 10 and 34 pids in a
%% tight loop (one in flight) to (a) the sampler, started from the source in
%% libsample/node.c exactly as the daemon starts it, and (b) the same loop
%% compiled; (a) - (b) is the interpretation. Times are wall time per
%% request with both processes on one scheduler (+S 1), client included.
-module(evalloop).
-export([main/1]).

-define(ITEMS, [status, memory, reductions]).

main([NodeC]) ->
    Src = sampler_source(NodeC),
    {ok, T, _} = erl_scan:string(Src),
    {ok, E} = erl_parse:parse_exprs(T),
    {value, Eval, _} = erl_eval:exprs(E, [{'Daemon', self()}]),
    Compiled = spawn_opt(fun() -> loop() end,
                         [{min_heap_size, 131072}, {fullsweep_after, 0},
                          {message_queue_data, off_heap}]),
    Targets = [spawn(fun() -> receive _ -> ok end end) || _ <- lists:seq(1, 34)],
    N = 20000,
    io:format("| pids per request | eval sampler us/request | compiled loop us/request | difference |~n"
              "|---|---|---|---|~n"),
    lists:foreach(
      fun(K) ->
              Pids = lists:sublist(Targets, K),
              Items = [?ITEMS || _ <- Pids],
              run(Eval, Pids, Items, 2000),
              run(Compiled, Pids, Items, 2000),
              Runs = [{run(Eval, Pids, Items, N), run(Compiled, Pids, Items, N)}
                      || _ <- lists:seq(1, 5)],
              A = median([X || {X, _} <- Runs]),
              B = median([Y || {_, Y} <- Runs]),
              io:format("| ~w | ~.2f | ~.2f | ~.2f |~n", [K, A, B, A - B])
      end, [0, 1, 10, 34]).

run(To, Pids, Items, N) ->
    {Us, ok} = timer:tc(fun() -> send_n(To, Pids, Items, N) end),
    Us / N.

send_n(_, _, _, 0) -> ok;
send_n(To, Pids, Items, N) ->
    Ref = make_ref(),
    To ! {flame_profd_sample, self(), Ref, Pids, Items},
    receive {Ref, _} -> send_n(To, Pids, Items, N - 1) end.

loop() ->
    receive
        {flame_profd_sample, From, Ref, Pids, Items} ->
            From ! {Ref, try timer:tc(lists, zipwith,
                                      [fun erlang:process_info/2, Pids, Items])
                         catch Class:Reason -> {badrpc, {'EXIT', {Class, Reason}}}
                         end},
            loop();
        flame_profd_stop -> ok
    end.

median(Xs) -> lists:nth((length(Xs) + 1) div 2, lists:sort(Xs)).

%% The C string literals of eval_sampler_source[] in node.c, joined.
sampler_source(NodeC) ->
    {ok, Bin} = file:read_file(NodeC),
    [_, Rest] = binary:split(Bin, <<"eval_sampler_source[] =">>),
    [Lits, _] = binary:split(Rest, <<";\n">>),
    {match, Ms} = re:run(Lits, "\"((?:[^\"\\\\]|\\\\.)*)\"",
                         [global, {capture, all_but_first, binary}]),
    binary_to_list(iolist_to_binary(Ms)).
