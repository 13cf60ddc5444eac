%% fid_wl -- the fidelity benchmark's workloads (bench/fidelity/run).
%%
%% Five workloads with known truths, each selectable alone or together:
%%
%%   call  a gen_server (registered fid_wl_call_server) whose short
%%         handle_call/3 does the server's CPU work: fid_wl:call_work/2,
%%         ~CALL_US (default 60) microseconds per call in less than one
%%         time slice of reductions; 4 clients (fid_wl:call_client/1)
%%         call it back to back.
%%   cast  a gen_server (fid_wl_cast_server) whose handle_cast/2 runs
%%         fid_wl:cast_work/2 for ~CAST_US (default 5000) microseconds; one
%%         client (fid_wl:cast_client/1) casts every CAST_PERIOD ms (10).
%%   pool  fid_wl:pool_spawner/1 spawns ~POOL_RATE (2000) workers a second
%%         (fid_wl:short_worker/1), each doing ~WORKER_US (200) microseconds
%%         of fid_wl:short_work/2 and exiting; at most 200 alive at once.
%%   cpu   one process in a CPU loop: fid_wl:cpu_loop/1 -> fid_wl:cpu_burn/2.
%%   callbif  the call workload with a handler whose work is one BIF call,
%%         erlang:phash2/1 of a list sized for ~CALL_US microseconds
%%         (fid_wl:callbif_work/1, in gen_server fid_wl_callbif_server,
%%         clients fid_wl:callbif_client/1): a few dozen reductions per
%%         call instead of ~1500, so the server is almost never preempted
%%         inside the handler.
%%   all   call, cast, pool and cpu together.
%%   excall  the call workload in Elixir (bench/fidelity/fid_wl.ex:
%%         Fid.Wl.CallServer, Fid.Wl.call_client/1), when elixirc is there.
%%   phases  a load that changes over time (bench/fidelity/heatmap): phases
%%         of 0, 1/4, 1/2, 1 and 2 schedulers' worth of work, 1-3 s each,
%%         in the fixed order of PHASES, repeated. A level is split evenly
%%         between four pacers (fid_wl:phase_pacer/1): a CPU loop (1 ms
%%         bursts of cpu_burn/2), a client of fid_wl_call_server (~60 us
%%         calls), a client of fid_wl_cast_server (~5 ms casts) and a
%%         spawner of short_worker/1 (~200 us each, at most 200 alive).
%%
%% The work functions are self-recursive integer loops (no BIF, no
%% allocation beyond the stack), so that perf's self time lands in them and
%% nowhere else; their names say which workload they belong to. Every
%% caller keeps its frame (the work is never a tail call), so that the
%% caller is on the stack in both views.
%%
%% Never load this on a node you care about: it burns CPU on purpose.
-module(fid_wl).
-behaviour(gen_server).

-export([start/1, start/2, stop/0, stats/0, calibrate/0]).
-export([callbif_client/1, callbif_work/1]).
-export([call_client/1, cast_client/1, pool_spawner/1, short_worker/1,
         cpu_loop/1, monitor_loop/1]).
-export([call_work/2, cast_work/2, short_work/2, cpu_burn/2]).
-export([phase_conductor/1, phase_pacer/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(CALL_SERVER, fid_wl_call_server).
-define(CAST_SERVER, fid_wl_cast_server).
-define(CALLBIF_SERVER, fid_wl_callbif_server).
-define(OWNER, fid_wl_owner).
-define(TAB, fid_wl_tab).
-define(POOL_MAX, 200).
-define(LEVEL, fid_wl_level).

%% {Level, Seconds}: Level in quarters of a scheduler (0, 1, 2, 4, 8 are
%% 0, 1/4, 1/2, 1 and 2 schedulers' worth of work); each level three
%% times, for 1, 2 and 3 s, shuffled once (30 s in all). Fixed, so that
%% every run and every reader sees the same pattern.
-define(PHASES, [{0, 2}, {4, 1}, {1, 3}, {8, 2}, {2, 1}, {0, 3}, {8, 1}, {4, 3},
                 {1, 2}, {2, 3}, {0, 1}, {4, 2}, {8, 3}, {1, 1}, {2, 2}]).

%% ---- control ------------------------------------------------------------

%% start(Workloads) with Workloads a list of call | cast | pool | cpu (or
%% [all]); start/2 takes a map of overrides (call_us, cast_us, cast_period,
%% pool_rate, worker_us, clients; tick, the phases pacers' period in ms). Returns {ok, Info}.
start(Ws) -> start(Ws, #{}).

start(Ws0, Opts) ->
    Ws = case Ws0 of [all] -> [call, cast, pool, cpu]; _ -> Ws0 end,
    Self = self(),
    {Pid, Ref} = spawn_monitor(fun() -> owner(Self, Ws, Opts) end),
    receive
        {Pid, started, Info} -> demonitor(Ref, [flush]), {ok, Info};
        {'DOWN', Ref, process, Pid, Why} -> {error, Why}
    after 30000 -> {error, timeout}
    end.

stop() ->
    case whereis(?OWNER) of
        undefined -> ok;
        Pid ->
            Ref = monitor(process, Pid),
            exit(Pid, kill),
            receive {'DOWN', Ref, _, _, _} -> ok end
    end.

%% The workload's counters and the pool's alive-worker series:
%% #{calls, casts, spawned, finished, alive_series => [{UnixMs, Alive}],
%%   phase_series => [{UnixMs, Level}]} (the phases workload's changes of
%%   level, Level in quarters of a scheduler).
stats() ->
    ?OWNER ! {stats, self()},
    receive {fid_wl_stats, S} -> S after 10000 -> timeout end.

%% Loop iterations per microsecond on this node (median of 7), of
%% call_work/2 and of the one-step loops (cast_work/2, short_work/2,
%% cpu_burn/2 have the same body).
calibrate() ->
    {per_us(call_work, 20000), per_us(cast_work, 200000)}.

per_us(F, N) ->
    Ts = lists:sort([element(1, timer:tc(?MODULE, F, [N, 1]))
                     || _ <- lists:seq(1, 7)]),
    N / max(1, lists:nth(4, Ts)).

owner(Parent, Ws, Opts) ->
    register(?OWNER, self()),
    process_flag(trap_exit, true),
    {CallPerUs, PerUs} = calibrate(),
    It = fun(call_us, Default) ->
                 max(1, round(CallPerUs * maps:get(call_us, Opts, Default)));
            (Key, Default) ->
                 max(1, round(PerUs * maps:get(Key, Opts, Default)))
         end,
    C = counters:new(5, [write_concurrency]),   % calls casts spawned finished
    persistent_term:put(?TAB, C),
    Info0 = #{iter_per_us => PerUs, call_iter_per_us => CallPerUs, workloads => Ws},
    Info = lists:foldl(
             fun(call, I) ->
                     N = It(call_us, 60),
                     {ok, _} = gen_server:start_link({local, ?CALL_SERVER}, ?MODULE,
                                                     {call, N}, []),
                     [spawn_link(?MODULE, call_client, [C])
                      || _ <- lists:seq(1, maps:get(clients, Opts, 4))],
                     I#{call_iter => N};
                (cast, I) ->
                     N = It(cast_us, 5000),
                     {ok, _} = gen_server:start_link({local, ?CAST_SERVER}, ?MODULE,
                                                     {cast, N}, []),
                     spawn_link(?MODULE, cast_client,
                                [{C, maps:get(cast_period, Opts, 10)}]),
                     I#{cast_iter => N};
                (pool, I) ->
                     N = It(worker_us, 200),
                     Rate = maps:get(pool_rate, Opts, 2000),
                     spawn_link(?MODULE, pool_spawner, [{C, N, Rate}]),
                     spawn_link(?MODULE, monitor_loop, [C]),
                     I#{worker_iter => N, pool_rate => Rate};
                (callbif, I) ->
                     Len = bif_len(maps:get(call_us, Opts, 60)),
                     {ok, _} = gen_server:start_link({local, ?CALLBIF_SERVER}, ?MODULE,
                                                     {callbif, lists:seq(1, Len)}, []),
                     [spawn_link(?MODULE, callbif_client, [C])
                      || _ <- lists:seq(1, maps:get(clients, Opts, 4))],
                     I#{callbif_len => Len};
                (excall, I) ->
                     %% bench/fidelity/fid_wl.ex, compiled by elixirc and on
                     %% the node's path with Elixir's own ebin
                     N = It(call_us, 60),
                     ok = 'Elixir.Fid.Wl':start_link(N, C, maps:get(clients, Opts, 4)),
                     I#{excall_iter => N};
                (cpu, I) ->
                     spawn_link(?MODULE, cpu_loop, [1]),
                     I;
                (phases, I) ->
                     CallN = It(call_us, 60),
                     CastN = It(cast_us, 5000),
                     WorkerN = It(worker_us, 200),
                     {ok, _} = gen_server:start_link({local, ?CALL_SERVER}, ?MODULE,
                                                     {call, CallN}, []),
                     {ok, _} = gen_server:start_link({local, ?CAST_SERVER}, ?MODULE,
                                                     {cast, CastN}, []),
                     Level = atomics:new(1, []),
                     persistent_term:put(?LEVEL, Level),
                     BurnN = max(1, round(PerUs * 1000)),
                     Tick = maps:get(tick, Opts, 10),
                     [spawn_link(?MODULE, phase_pacer, [{Kind, UnitUs, Arg, Tick}])
                      || {Kind, UnitUs, Arg} <- [{cpu, 1000, BurnN}, {call, 60, C},
                                                 {cast, 5000, C},
                                                 {pool, 200, {C, WorkerN}}]],
                     spawn_link(?MODULE, monitor_loop, [C]),
                     spawn_link(?MODULE, phase_conductor, [Level]),
                     I#{call_iter => CallN, cast_iter => CastN, worker_iter => WorkerN,
                        burn_iter_per_ms => BurnN}
             end, Info0, Ws),
    Parent ! {self(), started, Info},
    owner_loop([], []).

owner_loop(Series, Phases) ->
    receive
        {alive, T, N} -> owner_loop([{T, N} | Series], Phases);
        {phase, T, L} -> owner_loop(Series, [{T, L} | Phases]);
        {stats, From} ->
            C = persistent_term:get(?TAB),
            From ! {fid_wl_stats,
                    #{calls => counters:get(C, 1), casts => counters:get(C, 2),
                      spawned => counters:get(C, 3), finished => counters:get(C, 4),
                      alive_series => lists:reverse(Series),
                      phase_series => lists:reverse(Phases)}},
            owner_loop(Series, Phases);
        {'EXIT', _, _} -> owner_loop(Series, Phases)
    end.

%% ---- call: a short handle_call does the work ----------------------------

call_client(C) ->
    _ = gen_server:call(?CALL_SERVER, work, infinity),
    counters:add(C, 1, 1),
    call_client(C).

init({Kind, N}) -> {ok, {Kind, N}}.

handle_call(work, _From, {call, N} = S) ->
    R = call_work(N, 1),
    {reply, R, S};

handle_call(work, _From, {callbif, L} = S) ->
    R = callbif_work(L),
    {reply, R, S}.

handle_cast(work, {cast, N} = S) ->
    _ = cast_work(N, 1),
    counters:add(persistent_term:get(?TAB), 2, 1),
    {noreply, S}.

handle_info(_, S) -> {noreply, S}.

%% Sixteen steps per iteration, i.e. per reduction: the ~60 us of a call
%% take ~1500 reductions, less than one time slice (4000), so the server
%% is never preempted inside the handler -- the short handler of a real
%% server (ets, maps, binaries: little CPU per reduction counted).
call_work(0, Acc) -> Acc;
call_work(N, A0) ->
    A1 = (A0 * 31 + N) band 16#ffffff, A2 = (A1 * 31 + N) band 16#ffffff,
    A3 = (A2 * 31 + N) band 16#ffffff, A4 = (A3 * 31 + N) band 16#ffffff,
    A5 = (A4 * 31 + N) band 16#ffffff, A6 = (A5 * 31 + N) band 16#ffffff,
    A7 = (A6 * 31 + N) band 16#ffffff, A8 = (A7 * 31 + N) band 16#ffffff,
    A9 = (A8 * 31 + N) band 16#ffffff, A10 = (A9 * 31 + N) band 16#ffffff,
    A11 = (A10 * 31 + N) band 16#ffffff, A12 = (A11 * 31 + N) band 16#ffffff,
    A13 = (A12 * 31 + N) band 16#ffffff, A14 = (A13 * 31 + N) band 16#ffffff,
    A15 = (A14 * 31 + N) band 16#ffffff, A16 = (A15 * 31 + N) band 16#ffffff,
    call_work(N - 1, A16).

%% ---- callbif: the handler's work is one BIF call ---------------------------

callbif_client(C) ->
    _ = gen_server:call(?CALLBIF_SERVER, work, infinity),
    counters:add(C, 1, 1),
    callbif_client(C).

callbif_work(L) ->
    H = erlang:phash2(L),
    H + 1.

%% The length of list whose phash2/1 takes ~Us microseconds (median of 7
%% over a 20 000-element list).
bif_len(Us) ->
    L = lists:seq(1, 20000),
    Ts = lists:sort([element(1, timer:tc(erlang, phash2, [L])) || _ <- lists:seq(1, 7)]),
    max(10, round(20000 * Us / max(1, lists:nth(4, Ts)))).

%% ---- cast: a ~5 ms handle_cast -------------------------------------------

cast_client({C, Period} = A) ->
    gen_server:cast(?CAST_SERVER, work),
    receive after Period -> ok end,
    _ = C,
    cast_client(A).

cast_work(0, Acc) -> Acc;
cast_work(N, Acc) -> cast_work(N - 1, (Acc * 31 + N) band 16#ffffff).

%% ---- pool: ~2000 short-lived workers a second ----------------------------

%% Spawns a batch every 10 ms, paced on the monotonic clock so that a late
%% tick is made up for, up to 100 ms of debt (a spawner held off longer by
%% a busy host forgets the rest rather than spawning a second's workers
%% at once), and never more than POOL_MAX workers alive: a pool. On a
%% saturated node the workers wait in the run queues, so without the cap
%% their number (and their share of the node) grows without bound.
pool_spawner({C, N, Rate}) ->
    pool_spawner(C, N, Rate, erlang:monotonic_time(millisecond), 0).

pool_spawner(C, N, Rate, T0, Done0) ->
    Due = (erlang:monotonic_time(millisecond) - T0) * Rate div 1000,
    Done = max(Done0, Due - Rate div 10),
    Batch = min(Due - Done, max(0, ?POOL_MAX - counters:get(C, 5))),
    _ = [spawn(?MODULE, short_worker, [{C, N}]) || _ <- lists:seq(1, Batch)],
    counters:add(C, 3, Batch),
    receive after 10 -> ok end,
    pool_spawner(C, N, Rate, T0, Done + Batch).

short_worker({C, N}) ->
    counters:add(C, 5, 1),
    R = short_work(N, 1),
    counters:add(C, 5, -1),
    counters:add(C, 4, 1),
    R.

short_work(0, Acc) -> Acc;
short_work(N, Acc) -> short_work(N - 1, (Acc * 31 + N) band 16#ffffff).

%% Every 100 ms: how many short workers are alive (started, not finished).
monitor_loop(C) ->
    ?OWNER ! {alive, erlang:system_time(millisecond), counters:get(C, 5)},
    receive after 100 -> ok end,
    monitor_loop(C).

%% ---- phases: a load that follows a known pattern -------------------------

%% Sets the level of each phase in turn, on the monotonic clock (a late
%% wake-up shortens the next phase rather than shifting the pattern), and
%% tells the owner the wall-clock time of each change.
phase_conductor(Level) ->
    phase_conductor(Level, ?PHASES, erlang:monotonic_time(millisecond)).

phase_conductor(Level, [], T) ->
    phase_conductor(Level, ?PHASES, T);
phase_conductor(Level, [{L, D} | Rest], T) ->
    atomics:put(Level, 1, L),
    ?OWNER ! {phase, erlang:system_time(millisecond), L},
    Next = T + D * 1000,
    receive after max(0, Next - erlang:monotonic_time(millisecond)) -> ok end,
    phase_conductor(Level, Rest, Next).

%% A quarter of the level, in units of UnitUs microseconds of work: every
%% Tick ms (the start option tick, default 10) the pacer earns the time
%% since its last tick times its share of schedulers, and does as many
%% whole units as that buys. Credit is held to ten ticks of work, so a
%% pacer held off by a busy host does not make up for it in one burst.
phase_pacer({Kind, UnitUs, Arg, Tick}) ->
    phase_pacer(Kind, UnitUs, Arg, Tick, erlang:monotonic_time(microsecond), 0.0).

phase_pacer(Kind, UnitUs, Arg, Tick, Last, Credit0) ->
    Now = erlang:monotonic_time(microsecond),
    Share = atomics:get(persistent_term:get(?LEVEL), 1) / 16,
    Credit = min(Credit0 + (Now - Last) * Share, max(UnitUs, 10000 * Tick * Share)),
    N = trunc(Credit / UnitUs),
    phase_do(Kind, N, Arg),
    receive after Tick -> ok end,
    phase_pacer(Kind, UnitUs, Arg, Tick, Now, Credit - N * UnitUs).

phase_do(_, 0, _) -> ok;
phase_do(cpu, N, BurnN) ->
    _ = [cpu_burn(BurnN, K) || K <- lists:seq(1, N)],
    ok;
phase_do(call, N, C) ->
    _ = [gen_server:call(?CALL_SERVER, work, infinity) || _ <- lists:seq(1, N)],
    counters:add(C, 1, N);
phase_do(cast, N, _) ->
    _ = [gen_server:cast(?CAST_SERVER, work) || _ <- lists:seq(1, N)],
    ok;
phase_do(pool, N0, {C, _} = Arg) ->
    N = min(N0, max(0, ?POOL_MAX - counters:get(C, 5))),
    _ = [spawn(?MODULE, short_worker, [Arg]) || _ <- lists:seq(1, N)],
    counters:add(C, 3, N).

%% ---- cpu: a plain CPU loop -------------------------------------------------

cpu_loop(K) ->
    _ = cpu_burn(100000, K),
    cpu_loop(K + 1).

cpu_burn(0, Acc) -> Acc;
cpu_burn(N, Acc) -> cpu_burn(N - 1, (Acc * 31 + N) band 16#ffffff).
