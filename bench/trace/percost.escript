#!/usr/bin/env escript
%% bench/trace/percost.escript [TRACE_C] [EVENTS]
%% What the tracer's interpretation of one trace event costs, against the
%% floor of any erl_eval process that takes messages one by one (what a
%% tracer forwarding events would pay on the node): both run in this VM,
%% their source read from libsample/trace.c (the tracer) or below (the
%% floor), fed EVENTS synthetic trace messages of one idle process (a
%% call, a nested call and its return, over and over: a stack of two),
%% timed until each has answered a request sent after them (the tracer:
%% until its controller has counted them all; the sink, which takes
%% them, is the process linked to the controller besides this one, or
%% the controller itself where there is none).
-mode(compile).

main(Args) ->
    {File, N} = case Args of
                    [F, E] -> {F, list_to_integer(E)};
                    [F] -> {F, 4000};
                    [] -> {filename:join([filename:dirname(escript:script_name()),
                                          "..", "..", "libsample", "trace.c"]), 4000}
                end,
    Src = tracer_source(File),
    Target = spawn(fun() -> receive stop -> ok end end),
    register(percost_idle, Target),
    A = {self(), [{name, <<"percost_idle">>, [<<"percost_idle">>]}], 100,
         600000, 100000000, 100000000, 64, 100000000, false, []},
    {value, {started, T, Mode, _, _, _}, _} = eval(Src, [{'A', A}]),
    {links, Links} = process_info(T, links),
    Sink = case Links -- [self()] of
               [S] -> S;
               [] -> T                          % one process takes and answers
           end,
    Counted = fun C(Want) ->
                      T ! {dump, self(), d},
                      receive {d, {_, Got, _}} when Got >= Want -> ok;
                              {d, _} -> C(Want)
                      end
              end,
    Ev = fun(I) ->
                 case I rem 3 of
                     0 -> {trace_ts, Target, call, {m, f, 1}, I};
                     1 -> {trace_ts, Target, call, {m, g, 2}, I};
                     2 -> {trace_ts, Target, return_to, {m, f, 1}, I}
                 end
         end,
    {Us, _} = timer:tc(fun() ->
                               [Sink ! Ev(I) || I <- lists:seq(1, N)],
                               Counted(N)
                       end),
    %% the same events already queued (a burst, or a tracer that was
    %% not scheduled): timed from its resumption
    erlang:suspend_process(Sink),
    [Sink ! Ev(I) || I <- lists:seq(N + 1, 2 * N)],
    {UsQ, _} = timer:tc(fun() ->
                                erlang:resume_process(Sink),
                                Counted(2 * N)
                        end),
    T ! {stop, self(), s},
    receive {s, _} -> ok end,
    Floor = eval("fun F(K) -> receive {trace_ts, _, _, _, _} = M -> "
                 "_ = element(2, M), F(K + 1); {dump, From, Tag} -> From ! {Tag, K} end end.",
                 []),
    P = spawn(fun() -> Floor(0) end),
    {Us2, _} = timer:tc(fun() ->
                                [P ! Ev(I) || I <- lists:seq(1, N)],
                                P ! {dump, self(), d},
                                receive {d, _} -> ok end
                        end),
    io:format("OTP ~s, ~p events: tracer (~p mode) ~.2f us/event as they come, "
              "~.2f us/event queued; a bare erl_eval receive loop ~.2f us/event~n",
              [erlang:system_info(otp_release), N, Mode, Us / N, UsQ / N, Us2 / N]).

eval(Src, Bindings) ->
    {ok, Toks, _} = erl_scan:string(Src),
    {ok, Exprs} = erl_parse:parse_exprs(Toks),
    {value, V, Bs} = erl_eval:exprs(Exprs, Bindings),
    case Src of
        "fun" ++ _ -> V;
        _ -> {value, V, Bs}
    end.

%% the C string literal start_source[] of libsample/trace.c
tracer_source(File) ->
    {ok, Bin} = file:read_file(File),
    Lines = string:split(binary_to_list(Bin), "\n", all),
    {_, [_ | Rest]} = lists:splitwith(fun(L) -> string:find(L, "start_source[] =") =:= nomatch end, Lines),
    Body = lists:takewhile(fun(L) -> L =/= "" end, Rest),
    lists:append([unescape(string:trim(L, both, "\t;")) || L <- Body]).

unescape("\"" ++ S) -> unescape1(lists:droplast(S)).
unescape1("\\n") -> "\n";
unescape1("\\\"" ++ S) -> [$" | unescape1(S)];
unescape1("\\\\" ++ S) -> [$\\ | unescape1(S)];
unescape1([C | S]) -> [C | unescape1(S)];
unescape1([]) -> [].
