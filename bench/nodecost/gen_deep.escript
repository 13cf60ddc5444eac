#!/usr/bin/env escript
%% Generates nc_deep*.erl: chains fK -> fK-1 -> ... -> f0 (blocked in receive)
%% and gK -> ... -> g0 (busy loop), 64 distinct functions each (distinct return addresses,
%% because erts collapses consecutive identical return addresses in stacktraces).
main(_) ->
    gen("nc_deep", ""),
    gen("nc_deep_long", "-file(\"/home/builder/src/myproject/_build/default/lib/myapp/src/nc_deep_long.erl\", 1).\n"),
    gen("nc_deep_noline", "").
gen(Mod, Pre) ->
    N = 64,
    Exp = string:join(["f" ++ integer_to_list(I) ++ "/0" || I <- lists:seq(0, N)] ++
                      ["g" ++ integer_to_list(I) ++ "/0" || I <- lists:seq(0, N)], ", "),
    S = [Pre, "-module(", Mod, ").\n-export([start/1, start_busy/1, ", Exp, "]).\n",
         "start(N) -> spawn(fun() -> apply(?MODULE, list_to_atom(\"f\" ++ integer_to_list(N)), []) end).\n",
         "start_busy(N) -> spawn(fun() -> apply(?MODULE, list_to_atom(\"g\" ++ integer_to_list(N)), []) end).\n",
         "f0() -> receive stop -> 0 end.\n",
         "g0() -> spin(0).\n",
         "spin(N) when N > 1000000000000 -> N;\nspin(N) -> spin(N + 1).\n",
         [io_lib:format("f~b() -> 1 + f~b().\n", [I, I - 1]) || I <- lists:seq(1, N)],
         [io_lib:format("g~b() -> 1 + g~b().\n", [I, I - 1]) || I <- lists:seq(1, N)]],
    ok = file:write_file(Mod ++ ".erl", S).
