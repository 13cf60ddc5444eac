%% bench/trace workload: a gen_server whose handle_call works about
%% WorkUs microseconds (a busy loop on the monotonic clock), and a client
%% that calls it every PaceUs (0: back to back), counting its calls.
-module(trace_wl).
-behaviour(gen_server).
-export([start/2, calls/0, init/1, handle_call/3, handle_cast/2]).

start(WorkUs, PaceUs) ->
    {ok, _} = gen_server:start({local, trace_wl_server}, ?MODULE, WorkUs, []),
    C = counters:new(1, []),
    persistent_term:put(trace_wl_calls, C),
    spawn(fun() -> register(trace_wl_client, self()), client(C, PaceUs) end),
    ok.

calls() ->
    counters:get(persistent_term:get(trace_wl_calls), 1).

client(C, PaceUs) ->
    client(C, PaceUs, erlang:monotonic_time(microsecond)).

%% Paced by a deadline: the timer's millisecond resolution and late
%% wake-ups even out over a second, and a client more than 100 ms behind
%% (a slowed server) does not burst to catch up.
client(C, PaceUs, Next) ->
    ok = gen_server:call(trace_wl_server, work, infinity),
    counters:add(C, 1, 1),
    case PaceUs of
        0 -> client(C, 0, Next);
        _ ->
            Now = erlang:monotonic_time(microsecond),
            Next1 = max(Next + PaceUs, Now - 100000),
            case (Next1 - Now) div 1000 of
                Wait when Wait > 0 -> receive after Wait -> ok end;
                _ -> ok
            end,
            client(C, PaceUs, Next1)
    end.

init(WorkUs) -> {ok, WorkUs}.

handle_call(work, _From, WorkUs) ->
    spin(erlang:monotonic_time(microsecond) + WorkUs),
    {reply, ok, WorkUs}.

handle_cast(_, S) -> {noreply, S}.

spin(Until) ->
    case erlang:monotonic_time(microsecond) >= Until of
        true -> ok;
        false -> spin(Until)
    end.
