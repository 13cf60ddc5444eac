%% bench/trace workload: a gen_server whose handle_call works about
%% WorkUs microseconds (a busy loop on the monotonic clock), and a client
%% that calls it every PaceUs (0: back to back), counting its calls; and
%% a watcher of the tracer's backlog.
-module(trace_wl).
-behaviour(gen_server).
-export([start/2, calls/0, watched/0, init/1, handle_call/3, handle_cast/2]).

start(WorkUs, PaceUs) ->
    {ok, _} = gen_server:start({local, trace_wl_server}, ?MODULE, WorkUs, []),
    C = counters:new(1, []),
    persistent_term:put(trace_wl_calls, C),
    spawn(fun() -> register(trace_wl_client, self()), client(C, PaceUs) end),
    spawn(fun() ->
                  register(trace_wl_watch, self()),
                  process_flag(priority, high),
                  watch(0, none, none)
          end),
    ok.

calls() ->
    counters:get(persistent_term:get(trace_wl_calls), 1).

%% The tracer's backlog as text: the most messages the queues of the
%% node's processes at high priority (the tracer's; the workload has none
%% but the watcher) held, and how long after that peak (the tracer is
%% behind: it stops, and no message comes after) they held under 100
%% again (the backlog gone: drained or freed).
watched() ->
    watched(600).

%% waits up to a minute for a backlog still draining
watched(Tries) ->
    trace_wl_watch ! {get, self()},
    receive
        {watched, Peak, _, _} when Peak < 1000 ->
            io_lib:format("no backlog (peak ~b queued)", [Peak]);
        {watched, _, _, none} when Tries > 0 ->
            receive after 100 -> watched(Tries - 1) end;
        {watched, Peak, _, none} ->
            io_lib:format("backlog of ~b not gone after a minute", [Peak]);
        {watched, Peak, PeakT, Gone} ->
            io_lib:format("backlog of ~b gone ~b ms after its peak", [Peak, Gone - PeakT])
    after 5000 -> "no watcher"
    end.

%% Polled every 10 ms, at high priority so that a busy tracer does not
%% keep it from looking.
watch(Peak, PeakT, Gone) ->
    receive
        {get, From} ->
            From ! {watched, Peak, PeakT, Gone},
            watch(Peak, PeakT, Gone)
    after 10 ->
            Sum = lists:sum([Q || P <- processes(), P =/= self(),
                                  process_info(P, priority) =:= {priority, high},
                                  {message_queue_len, Q} <- [process_info(P, message_queue_len)]]),
            Now = erlang:monotonic_time(millisecond),
            if
                Sum > Peak -> watch(Sum, Now, none);
                Gone =:= none, Sum < 100 -> watch(Peak, PeakT, Now);
                true -> watch(Peak, PeakT, Gone)
            end
    end.

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
