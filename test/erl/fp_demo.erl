%% fp_demo -- demo / test workload for flame_profd.
%%
%% Load this module ONLY on a demo or test node.  It deliberately burns CPU,
%% grows a mailbox and churns off-heap binaries so that every metric and
%% stack shape flame_profd reports has something to show.
%%
%% Start it from the shell:       fp_demo:start(#{busy => 2, idle => 5000}).
%% or from the command line:      erl -sname demo -s fp_demo start
%%                                erl -sname demo -s fp_demo main idle 20000 busy 2
%% Stop it:                       fp_demo:stop().
%%
%% Processes (all linked to the owner process registered as `fp_demo'):
%%   fp_demo_busy (+ busy-1 unnamed)  busy_loop/1 -> deep/2 x Depth -> crunch/1
%%   fp_demo_quoted                   'fp demo quoted'/1 -> 'fp+demo;semi\'q\\'/1
%%                                    -> deep/2 ... (names that need quoting)
%%   fp_demo_anon                     an anonymous fun -> deep/2 ...
%%   fp_demo_server                   gen_server (this module is the callback)
%%   client_loop/1 x Clients          gen_server:call/reply pairs with the server
%%   fp_demo_sink                     slow receiver; mailbox held near sink_cap
%%   fp_demo_producer                 floods fp_demo_sink
%%   fp_demo_bin                      allocates / drops off-heap binaries
%%   idle_loop/1 x Idle               blocked in receive (the first one
%%                                    registered as fp_demo_idle)
%%   ticker_loop/2 x Tickers          wake every tick_ms ms in deep recursion
%%   fp_demo_alt (alt => true)        alt_a/1 and alt_b/1 in turn, each
%%                                    waiting alt_ms ms in receive: a new
%%                                    stack at every wake-up, which costs
%%                                    it a single reduction
%%
%% throughput/0 returns a monotonically increasing count of completed work
%% units (busy crunches + server calls), stored in a `counters' array.
-module(fp_demo).
-behaviour(gen_server).

-export([start/0, start/1, main/1, stop/0, running/0,
         throughput/0, throughput/1, info/0, defaults/0, gc_all/0]).
%% process entry points (exported so they show up as M:F/A in stacks)
-export([busy_loop/1, deep/2, crunch/1, 'fp demo quoted'/1,
         'fp+demo;semi\'q\\'/1, client_loop/1, sink_loop/1, producer_loop/1,
         bin_loop/1, idle_loop/1, owner_init/2, ticker_loop/2,
         alt_a/1, alt_b/1, call_work/1]).
%% gen_server callbacks
-export([init/1, handle_call/3, handle_cast/2, handle_info/2, terminate/2]).

-define(OWNER, fp_demo).
-define(COUNTERS_KEY, {?MODULE, counters}).
-define(C_BUSY, 1).
-define(C_CALLS, 2).

%%% ------------------------------------------------------------------------
%%% API

defaults() ->
    #{busy => 4,           % CPU-bound workers running busy_loop/1
      depth => 20,         % non-tail recursion depth of deep/2
      work => 200,         % list length crunched per work unit
      clients => 3,        % client_loop/1 processes calling fp_demo_server
      idle => 1000,        % processes blocked in receive
      idle_hibernate => false, % hibernate idle processes (saves memory at 100k+)
      quoted => true,      % start fp_demo_quoted
      anon => true,        % start fp_demo_anon
      sink => true,        % start fp_demo_sink + fp_demo_producer
      sink_cap => 20000,   % producer keeps the sink's queue around this length
      bin => true,         % start fp_demo_bin
      tickers => 0,        % ticker_loop/2 processes: wake every tick_ms
      tick_ms => 100,      % ... inside deep/2-like recursion, nearly idle
      alt => false,        % start fp_demo_alt
      alt_ms => 37}.       % ... waking every alt_ms

start() ->
    start(#{}).

%% Opts: a map, a proplist ({Key, Value} or bare atom Key meaning true), or a
%% list of atoms/strings as given by `erl -s fp_demo start k1 v1 k2 v2'.
start(Opts) ->
    Cfg = maps:merge(defaults(), normalise(Opts)),
    case whereis(?OWNER) of
        undefined ->
            Parent = self(),
            Ref = make_ref(),
            %% spawned unlinked: the -s/-eval process that calls us exits soon
            Pid = proc_lib:spawn(?MODULE, owner_init, [{Parent, Ref}, Cfg]),
            MRef = erlang:monitor(process, Pid),
            receive
                {Ref, ok} ->
                    erlang:demonitor(MRef, [flush]),
                    {ok, Pid};
                {'DOWN', MRef, process, Pid, Reason} ->
                    {error, Reason}
            after 60000 ->
                exit(Pid, kill),
                {error, timeout}
            end;
        Pid ->
            {error, {already_started, Pid}}
    end.

%% Command-line entry: erl -s fp_demo main idle 20000 busy 2
main(Args) when is_list(Args) ->
    case start(Args) of
        {ok, _} -> ok;
        Error -> io:format(standard_error, "fp_demo: ~p~n", [Error]), halt(1)
    end.

stop() ->
    case whereis(?OWNER) of
        undefined ->
            ok;
        Pid ->
            MRef = erlang:monitor(process, Pid),
            Pid ! stop,
            receive
                {'DOWN', MRef, process, Pid, _} -> ok
            after 30000 ->
                exit(Pid, kill)
            end,
            %% the workers die of the owner's exit signal, a little later:
            %% return once their names are free, so start/1 can follow
            wait_unregistered(1000)
    end.

wait_unregistered(0) ->
    ok;
wait_unregistered(N) ->
    Names = [fp_demo_server, fp_demo_busy, fp_demo_quoted, fp_demo_anon,
             fp_demo_sink, fp_demo_producer, fp_demo_bin, fp_demo_idle,
             fp_demo_alt],
    case [X || X <- Names, whereis(X) =/= undefined] of
        [] -> ok;
        _ -> receive after 10 -> wait_unregistered(N - 1) end
    end.

running() ->
    whereis(?OWNER) =/= undefined.

%% Completed work units (busy crunches + server call/reply pairs).
throughput() ->
    throughput(busy) + throughput(calls).

throughput(Kind) ->
    case persistent_term:get(?COUNTERS_KEY, undefined) of
        undefined -> 0;
        C when Kind =:= busy -> counters:get(C, ?C_BUSY);
        C when Kind =:= calls -> counters:get(C, ?C_CALLS)
    end.

%% Collect the garbage of every process, all at once: one GC at a time
%% waits for each process to be scheduled, minutes for half a million on a
%% busy node. Returns when all are done.
gc_all() ->
    Ref = make_ref(),
    Asked = [P || P <- processes(),
                  erlang:garbage_collect(P, [{async, Ref}]) =:= async],
    gc_wait(Ref, length(Asked)).

gc_wait(_, 0) ->
    ok;
gc_wait(Ref, N) ->
    receive {garbage_collect, Ref, _} -> gc_wait(Ref, N - 1) end.

info() ->
    Names = [fp_demo, fp_demo_busy, fp_demo_quoted, fp_demo_anon,
             fp_demo_server, fp_demo_sink, fp_demo_producer, fp_demo_bin],
    [{N, whereis(N)} || N <- Names] ++
        [{throughput, throughput()}, {processes, erlang:system_info(process_count)}].

%%% ------------------------------------------------------------------------
%%% owner: starts and links everything; on `stop' it exits and takes the
%%% linked workers with it

owner_init({Parent, Ref}, Cfg) ->
    register(?OWNER, self()),
    process_flag(trap_exit, true),
    C = case persistent_term:get(?COUNTERS_KEY, undefined) of
            undefined ->
                C0 = counters:new(2, [write_concurrency]),
                persistent_term:put(?COUNTERS_KEY, C0),
                C0;
            C0 ->
                C0 % keep counting across restarts: stays monotonic
        end,
    #{busy := Busy, depth := Depth, work := Work, clients := Clients,
      idle := Idle} = Cfg,
    W = #{c => C, depth => Depth, work => Work},
    {ok, _} = gen_server:start_link({local, fp_demo_server}, ?MODULE, W, []),
    lists:foreach(
      fun(I) ->
              P = spawn_link(?MODULE, busy_loop, [W]),
              I =:= 1 andalso register(fp_demo_busy, P)
      end, lists:seq(1, Busy)),
    case maps:get(quoted, Cfg) of
        true -> register(fp_demo_quoted, spawn_link(?MODULE, 'fp demo quoted', [W]));
        false -> ok
    end,
    case maps:get(anon, Cfg) of
        true -> register(fp_demo_anon, spawn_link(anon_fun(W)));
        false -> ok
    end,
    [spawn_link(?MODULE, client_loop, [C]) || _ <- lists:seq(1, Clients)],
    case maps:get(sink, Cfg) of
        true ->
            Cap = maps:get(sink_cap, Cfg),
            register(fp_demo_sink, spawn_link(?MODULE, sink_loop, [Cap])),
            register(fp_demo_producer, spawn_link(?MODULE, producer_loop, [Cap]));
        false -> ok
    end,
    case maps:get(bin, Cfg) of
        true -> register(fp_demo_bin, spawn_link(?MODULE, bin_loop, [queue:new()]));
        false -> ok
    end,
    [spawn_link(?MODULE, ticker_loop, [maps:get(tick_ms, Cfg), Depth])
     || _ <- lists:seq(1, maps:get(tickers, Cfg))],
    case maps:get(alt, Cfg) of
        true -> register(fp_demo_alt, spawn_link(?MODULE, alt_a, [maps:get(alt_ms, Cfg)]));
        false -> ok
    end,
    Hib = maps:get(idle_hibernate, Cfg),
    case Idle > 0 of
        true ->
            register(fp_demo_idle, spawn_link(?MODULE, idle_loop, [false])),
            spawn_idle(Idle - 1, Hib);
        false ->
            ok
    end,
    Parent ! {Ref, ok},
    owner_loop().

%% Active in every selection interval, yet nearly idle: sampled processes
%% whose requests are answered at once.
ticker_loop(Period, Depth) ->
    _ = ticker_deep(Depth, Period),
    ticker_loop(Period, Depth).

ticker_deep(0, Period) ->
    receive after Period -> 0 end;
ticker_deep(N, Period) ->
    1 + ticker_deep(N - 1, Period).

%% Each wake-up from a receive timeout costs a process one reduction, no
%% more: here it also moves the process to the other function.
alt_a(Ms) ->
    receive after Ms -> ok end,
    alt_b(Ms).

alt_b(Ms) ->
    receive after Ms -> ok end,
    alt_a(Ms).

spawn_idle(0, _) -> ok;
spawn_idle(N, Hib) ->
    spawn_link(?MODULE, idle_loop, [Hib]),
    spawn_idle(N - 1, Hib).

owner_loop() ->
    receive
        stop ->
            exit(shutdown);
        {'EXIT', _, shutdown} ->
            exit(shutdown);
        {'EXIT', From, Reason} ->
            %% a worker died: report it and take the whole demo down
            io:format(standard_error, "fp_demo: ~p exited: ~p~n", [From, Reason]),
            exit(shutdown);
        _ ->
            owner_loop()
    end.

%%% ------------------------------------------------------------------------
%%% CPU-bound workers.  deep/2 is non-tail recursive so its frames stay on the
%%% stack; every caller of deep/2 uses the result, so its own frame stays too.

busy_loop(#{c := C, depth := Depth, work := Work} = W) ->
    _ = deep(Depth, Work),
    counters:add(C, ?C_BUSY, 1),
    busy_loop(W).

%% The VM collapses *consecutive identical* return addresses when it builds
%% current_stacktrace, so a plain `1 + deep(N - 1, W)' shows up as a single
%% deep/2 frame.  Alternating between two call sites keeps every level
%% visible: deep/2 appears Depth times in process_info(P, current_stacktrace)
%% (up to the node's backtrace_depth).
deep(0, Work) ->
    crunch(Work);
deep(N, Work) when N band 1 =:= 0 ->
    1 + deep(N - 1, Work);
deep(N, Work) ->
    2 + deep(N - 1, Work).

%% --trace-call's workload: a pause (the call scheduled out), work, and
%% a sleep in a function of its own (an inner frame of known length).
call_work(Work) ->
    receive after 10 -> ok end,
    deep(2, Work),
    timer:sleep(5).

crunch(Work) ->
    L = lists:seq(1, Work),
    S = lists:foldl(fun(X, Acc) -> (Acc * 31 + X * X) rem 1000003 end, 0, L),
    B = term_to_binary(lists:sublist(L, 16)),
    S + byte_size(B).

%% Function names that must be written quoted (space; '+' ';' '\'' '\\').
'fp demo quoted'(W) ->
    _ = 'fp+demo;semi\'q\\'(W),
    'fp demo quoted'(W).

'fp+demo;semi\'q\\'(#{c := C, depth := Depth, work := Work}) ->
    R = deep(Depth, Work),
    counters:add(C, ?C_BUSY, 1),
    R.

anon_fun(#{c := C, depth := Depth, work := Work}) ->
    fun() ->
            Loop = fun Loop() ->
                           _ = deep(Depth, Work),
                           counters:add(C, ?C_BUSY, 1),
                           Loop()
                   end,
            Loop()
    end.

%%% ------------------------------------------------------------------------
%%% gen_server fp_demo_server and its clients

init(W) ->
    {ok, W}.

handle_call({work, N}, _From, #{work := Work} = S) ->
    %% a little work per call so the server shows up in profiles
    {reply, crunch(min(N, Work) div 4 + 1), S};
handle_call(_Req, _From, S) ->
    {reply, {error, unknown_call}, S}.

handle_cast(_Msg, S) ->
    {noreply, S}.

handle_info(_Msg, S) ->
    {noreply, S}.

terminate(_Reason, _S) ->
    ok.

client_loop(C) ->
    _ = gen_server:call(fp_demo_server, {work, 100}, infinity),
    counters:add(C, ?C_CALLS, 1),
    client_loop(C).

%%% ------------------------------------------------------------------------
%%% mailbox growth: the producer sends bursts until the sink's queue reaches
%%% Cap, then idles; the sink takes one message per millisecond.  The sink
%%% drains everything if the queue ever exceeds max(Cap * 2, 50000).

sink_loop(Cap) ->
    {message_queue_len, Len} = process_info(self(), message_queue_len),
    case Len > max(Cap * 2, 50000) of
        true -> drain();
        false -> ok
    end,
    receive
        {fp_demo_msg, _} -> ok
    end,
    receive after 1 -> ok end,
    sink_loop(Cap).

drain() ->
    receive
        {fp_demo_msg, _} -> drain()
    after 0 ->
        ok
    end.

producer_loop(Cap) ->
    case whereis(fp_demo_sink) of
        undefined ->
            ok;
        Sink ->
            case process_info(Sink, message_queue_len) of
                {message_queue_len, Len} when Len < Cap ->
                    send_burst(Sink, min(1000, Cap - Len));
                _ ->
                    ok
            end
    end,
    receive after 5 -> ok end,
    producer_loop(Cap).

send_burst(_Sink, 0) -> ok;
send_burst(Sink, N) ->
    Sink ! {fp_demo_msg, N},
    send_burst(Sink, N - 1).

%%% ------------------------------------------------------------------------
%%% off-heap (refc) binaries: keep a rolling window of up to 200 binaries of
%%% 1..16 KiB, replacing two every 5 ms, so binary_bytes keeps moving

bin_loop(Q0) ->
    Q1 = add_bins(Q0, 2),
    Q = trim(Q1, 200),
    receive after 5 -> ok end,
    bin_loop(Q).

add_bins(Q, 0) -> Q;
add_bins(Q, N) ->
    Size = 1024 * rand:uniform(16),
    add_bins(queue:in(binary:copy(<<"fp_demo">>, Size div 7), Q), N - 1).

trim(Q, Max) ->
    case queue:len(Q) > Max of
        true -> {_, Q1} = queue:out(Q), trim(Q1, Max);
        false -> Q
    end.

%%% ------------------------------------------------------------------------
%%% idle processes

idle_loop(true) ->
    erlang:hibernate(?MODULE, idle_loop, [false]);
idle_loop(false) ->
    receive
        fp_demo_stop -> ok;
        _ -> idle_loop(false)
    end.

%%% ------------------------------------------------------------------------
%%% option parsing

normalise(M) when is_map(M) ->
    maps:map(fun(K, V) -> value(K, V) end, M);
normalise(L) when is_list(L) ->
    case lists:all(fun(E) -> is_atom(E) orelse io_lib:printable_list(E) end, L)
        andalso L =/= [] of
        true -> normalise(pairs([to_atom(E) || E <- L]));
        false -> normalise(maps:from_list([opt(E) || E <- L]))
    end.

opt({K, V}) -> {K, V};
opt(K) when is_atom(K) -> {K, true}.

%% [idle, '5000', quoted, false] -> #{idle => '5000', quoted => false}
pairs([K, V | Rest]) -> maps:put(K, V, pairs(Rest));
pairs([K]) -> #{K => true};
pairs([]) -> #{}.

to_atom(A) when is_atom(A) -> A;
to_atom(S) -> list_to_atom(S).

value(K, V) ->
    D = maps:get(K, defaults(), undefined),
    case {D, V} of
        {undefined, _} -> erlang:error({unknown_option, K});
        {_, V} when is_integer(D), is_atom(V) -> value(K, atom_to_list(V));
        {_, V} when is_integer(D), is_list(V) -> value(K, list_to_integer(V));
        {_, V} when is_integer(D), is_integer(V), V >= 0 -> V;
        {_, V} when is_boolean(D), is_boolean(V) -> V;
        {_, "true"} when is_boolean(D) -> true;
        {_, "false"} when is_boolean(D) -> false;
        _ -> erlang:error({bad_option_value, K, V})
    end.
