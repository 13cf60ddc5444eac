#!/usr/bin/env escript
%%! -noshell
%% bench/initial-calls.escript -- what the daemon's read of '$initial_call'
%% costs the node, inside one VM (no daemon, no distribution): the
%% expression of libsample/request.c (initial_calls_source, copied here:
%% keep the two alike) against the same check made by an interpreted fun
%% per pid, and proc_lib:initial_call/1, which the daemon no longer calls.
%%
%% usage: escript bench/initial-calls.escript [N ROUNDS ITEM]
%%        (default 100 201 dictionary; ITEM key: {dictionary,
%%        '$initial_call'}, which OTP 26.2 and later take)
%%
%% N proc_lib processes are asked, after eight whose answers are not a
%% plain call ({m, f, -1}, a binary module, arity 300, {m, f}, undefined,
%% {m, f, 255}, a process proc_lib did not start, a dead one): the two
%% expressions must give the same answers. proc_lib:initial_call/1 is
%% timed on the N plain ones only (on the others it would fill the atom
%% table). Each is run ROUNDS times; the median is printed.
-mode(compile).

-define(COMPILED,
        "(fun() ->"
        " N = length(Pids),"
        " R = lists:zipwith(fun erlang:process_info/2, Pids, lists:duplicate(N, Item)),"
        " Ks = case Item of"
        "   dictionary ->"
        "     Ds = ets:match_spec_run(R, ets:match_spec_compile("
        "            [{{dictionary, '$1'}, [], ['$1']}, {'_', [], [[]]}])),"
        "     lists:zipwith3(fun lists:keyfind/3, lists:duplicate(N, '$initial_call'),"
        "                    lists:duplicate(N, 1), Ds);"
        "   _ -> R"
        " end,"
        " ets:match_spec_run(Ks, ets:match_spec_compile(["
        "   {{'_', {'$1', '$2', '$3'}},"
        "    [{is_atom, '$1'}, {is_atom, '$2'}, {is_integer, '$3'},"
        "     {'>=', '$3', 0}, {'=<', '$3', 255}],"
        "    [{{'$1', '$2', '$3'}}]},"
        "   {'_', [{'orelse', {'==', '$_', false}, {'==', '$_', undefined}}],"
        "    [undefined]},"
        "   {{'_', undefined}, [], [undefined]},"
        "   {'_', [], [odd]}]))"
        " end)().").

-define(INTERPRETED,
        "lists:map(fun(P) ->"
        "  V = case erlang:process_info(P, Item) of"
        "        {dictionary, D} ->"
        "          case lists:keyfind('$initial_call', 1, D) of"
        "            {_, Found} -> Found;"
        "            false -> undefined"
        "          end;"
        "        {_, Value} -> Value;"
        "        undefined -> undefined"
        "      end,"
        "  case V of"
        "    {M, F, A} when is_atom(M), is_atom(F), is_integer(A),"
        "                   A >= 0, A =< 255 -> V;"
        "    undefined -> undefined;"
        "    _ -> odd"
        "  end"
        " end, Pids).").

main([]) -> main(["100", "201", "dictionary"]);
main([NS, RoundsS, ItemS]) ->
    N = list_to_integer(NS),
    Rounds = list_to_integer(RoundsS),
    Item = case ItemS of
               "dictionary" -> dictionary;
               "key" -> {dictionary, '$initial_call'}
           end,
    Odd = [proc_lib:spawn(fun() -> put('$initial_call', IC), wait() end)
           || IC <- [{m, f, -1}, {<<"bin">>, f, 1}, {m, f, 300}, {m, f},
                     undefined, {m, f, 255}]],
    Plain = spawn(fun wait/0),
    Dead = spawn(fun() -> ok end),
    Calls = [proc_lib:spawn(fun wait/0) || _ <- lists:seq(1, N)],
    Pids = Odd ++ [Plain, Dead | Calls],
    timer:sleep(100),
    B = [{'Item', Item}, {'Pids', Pids}],
    Compiled = parse(?COMPILED),
    Interpreted = parse(?INTERPRETED),
    {value, A1, _} = erl_eval:exprs(Compiled, B),
    {value, A2, _} = erl_eval:exprs(Interpreted, B),
    A1 =:= A2 orelse error({answers_differ, A1, A2}),
    [odd, odd, odd, odd, undefined, {m, f, 255}, undefined, undefined | _] = A1,
    T1 = median(fun() -> erl_eval:exprs(Compiled, B) end, Rounds),
    T2 = median(fun() -> erl_eval:exprs(Interpreted, B) end, Rounds),
    T3 = median(fun() -> lists:map(fun proc_lib:initial_call/1, Calls) end, Rounds),
    io:format("OTP ~s, Item ~p, ~b pids, median of ~b:~n"
              "  compiled chain (the daemon's)  ~6b us  ~.2f us/pid~n"
              "  interpreted fun per pid        ~6b us  ~.2f us/pid~n"
              "  proc_lib:initial_call/1 (~b)   ~6b us  ~.2f us/pid~n",
              [erlang:system_info(otp_release), Item, length(Pids), Rounds,
               T1, T1 / length(Pids), T2, T2 / length(Pids), N, T3, T3 / N]),
    [P ! stop || P <- Pids],
    ok.

wait() ->
    receive stop -> ok end.

parse(Source) ->
    {ok, Tokens, _} = erl_scan:string(Source),
    {ok, Exprs} = erl_parse:parse_exprs(Tokens),
    Exprs.

median(F, Rounds) ->
    _ = F(),
    Ts = lists:sort([element(1, timer:tc(F)) || _ <- lists:seq(1, Rounds)]),
    lists:nth(Rounds div 2 + 1, Ts).
