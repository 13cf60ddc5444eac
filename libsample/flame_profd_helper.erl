%% flame_profd's opt-in sampling helper: --request helper.
%%
%% Loaded onto the profiled node only when the daemon is run with
%% --request helper, under a name of its own per connection (the daemon
%% renames the module in the binary it loads: see libsample/helper.c), and
%% gone with the connection: the process is linked to the daemon's C node
%% and, when the link breaks or the daemon says stop, deletes and purges
%% its own module. Nothing else on the node calls it.
%%
%% One process samples the set the daemon last sent on the node's own
%% timer and sends what it took a few times a second, so that a second of
%% sampling costs the node a few distribution messages instead of one
%% request and reply per 20 ms row. It asks exactly what the rex path asks
%% (the item lists come from the daemon), in the same two steps, and
%% probes a process that was idle at its last sample the same way
%% (fp_sampler_decode()): a probe that finds it has run since is followed
%% at once by the full question.
%%
%% Messages from the daemon:
%%   {flame_profd_config, Pids, Rate, IdleReuse, Paused}
%%   {flame_profd_forget, Pids}  (ask these in full next: the daemon lost
%%                                what it needs to take a probe)
%%   flame_profd_stop            (send what is left, then go)
%% To the daemon, {Ref, Batch}, Batch one of
%%   {flame_profd_batch, SentAtUs, WorkUs, Skipped, Last, Rows},
%%     Rows a list of term_to_binary({TimeUs, Pids, Asks, Results}) (a
%%     row lives off the heap until it is sent), Asks a binary of one
%%     byte per pid (0 full, 2 probe: enum fp_ask), Results the flat list
%%     of process_info/2 answers lists:zipwith/3 gives on the rex path;
%%   {flame_profd_error, Reason}.
%% Times are os:system_time(microsecond) of the node; WorkUs is the wall
%% time this process spent sampling and sending since the last batch.
-module(flame_profd_helper).
-export([init/5]).

-record(st, {daemon, ref, instant, signalled, probe,
             tick_ms, flush_ms,
             set = {}, cursor = 0, rate = 0.0, reuse = true, paused = true,
             owed = 0.0, last = undefined, next_flush,
             known = #{},
             rows = [], skipped = 0, work = 0}).

-define(ASK_FULL, 0).
-define(ASK_PROBE, 2).

init(Daemon, Ref, {Instant, Signalled, Probe}, TickMs, FlushMs) ->
    process_flag(trap_exit, true),
    true = link(Daemon),
    Now = erlang:monotonic_time(microsecond),
    erlang:send_after(TickMs, self(), flame_profd_tick),
    S = #st{daemon = Daemon, ref = Ref, instant = Instant,
            signalled = Signalled, probe = Probe,
            tick_ms = TickMs, flush_ms = FlushMs,
            next_flush = Now + FlushMs * 1000},
    try loop(S)
    catch Class:Reason ->
        Daemon ! {Ref, {flame_profd_error, {Class, Reason}}}
    end,
    cleanup().

loop(S) ->
    receive
        flame_profd_tick ->
            loop(tick(S));
        {flame_profd_config, Pids, Rate, Reuse, Paused} ->
            loop(config(S, Pids, Rate, Reuse, Paused));
        {flame_profd_forget, Pids} ->
            loop(S#st{known = maps:without(Pids, S#st.known)});
        flame_profd_stop ->
            flush(S, true),
            ok;
        {'EXIT', Daemon, _} when Daemon =:= S#st.daemon ->
            ok;
        _Other ->
            loop(S)
    end.

%% The module goes with its last process: delete makes our code old (we
%% go on running it), and the purge, from another process, ends us if we
%% are still here and frees it. The name is asked at run time: the daemon
%% renames the module in its atom table, not in literals such as [?MODULE].
cleanup() ->
    Mod = module_info(module),
    code:delete(Mod),
    spawn(code, purge, [Mod]),
    ok.

config(S, Pids, Rate, Reuse, Paused) ->
    Known = maps:with(Pids, S#st.known),
    N = length(Pids),
    Cursor = case N of 0 -> 0; _ -> S#st.cursor rem N end,
    S#st{set = list_to_tuple(Pids), cursor = Cursor, rate = float(Rate),
         reuse = Reuse, paused = Paused, known = Known,
         owed = case Paused of true -> 0.0; false -> S#st.owed end}.

tick(S0) ->
    erlang:send_after(S0#st.tick_ms, self(), flame_profd_tick),
    Now = erlang:monotonic_time(microsecond),
    S1 = rows(owe(S0, Now)),
    case Now >= S1#st.next_flush of
        true ->
            S2 = flush(S1, false),
            S2#st{next_flush = Now + S2#st.flush_ms * 1000};
        false ->
            S1
    end.

%% What falls due since the last tick; never more than a round (or two
%% ticks' worth): what is beyond was missed, and counted.
owe(S = #st{last = undefined}, Now) ->
    S#st{last = Now, owed = 0.0};
owe(S = #st{paused = true}, Now) ->
    S#st{last = Now, owed = 0.0};
owe(S, Now) ->
    N = tuple_size(S#st.set),
    PerUs = N * S#st.rate / 1.0e6,
    Owed = S#st.owed + PerUs * (Now - S#st.last),
    Cap = max(float(N), 2.0 * PerUs * S#st.tick_ms * 1000),
    case Owed > Cap of
        true ->
            Missed = trunc(Owed - Cap),
            S#st{last = Now, owed = Owed - Missed,
                 skipped = S#st.skipped + Missed};
        false ->
            S#st{last = Now, owed = Owed}
    end.

%% What is owed, in rows of at most one round each: at more than one
%% round a tick (100/s each at 20-ms ticks) a process is in every row.
rows(S) ->
    case S#st.owed >= 1.0 andalso tuple_size(S#st.set) > 0 of
        true -> rows(sample(S));
        false -> S
    end.

sample(S) ->
    N = tuple_size(S#st.set),
    Want = min(trunc(S#st.owed), N),
    case Want of
        0 ->
            S;
        _ ->
            T0 = erlang:monotonic_time(microsecond),
            Stamp = os:system_time(microsecond),
            {Pids, Asks, Results, Known} =
                take(S, S#st.cursor, Want, N, [], [], [], S#st.known),
            T1 = erlang:monotonic_time(microsecond),
            Row = term_to_binary({Stamp, Pids, list_to_binary(Asks), Results}),
            S#st{cursor = (S#st.cursor + Want) rem N,
                 owed = S#st.owed - Want, known = Known,
                 rows = [Row | S#st.rows], work = S#st.work + (T1 - T0)}
    end.

take(_S, _Pos, 0, _N, Pids, Asks, Results, Known) ->
    {lists:reverse(Pids), lists:reverse(Asks),
     lists:append(lists:reverse(Results)), Known};
take(S, Pos, Left, N, Pids, Asks, Results, Known) ->
    Pid = element(Pos + 1, S#st.set),
    {Ask, Answer, Known1} = one(S, Pid, Known),
    take(S, (Pos + 1) rem N, Left - 1, N, [Pid | Pids], [Ask | Asks],
         [Answer | Results], Known1).

%% Known: Pid => {Idle, ExpectReds, Key}, what the last sample left, as
%% the daemon's sampler keeps it (apply_history()).
one(S, Pid, Known) ->
    case maps:find(Pid, Known) of
        {ok, {true, Expect, Key}} when S#st.reuse ->
            case erlang:process_info(Pid, S#st.probe) of
                undefined ->
                    {?ASK_PROBE, [undefined], maps:remove(Pid, Known)};
                Probe ->
                    case unchanged(Probe, Expect, Key) of
                        true ->
                            {?ASK_PROBE, [Probe], Known};
                        false ->
                            full(S, Pid, Probe, reds(Probe), Known)
                    end
            end;
        {ok, {_, Expect, _}} ->
            first(S, Pid, S#st.instant, Expect, Known);
        error ->
            first(S, Pid, S#st.instant ++ [initial_call], none, Known)
    end.

first(S, Pid, Items, Expect, Known) ->
    case erlang:process_info(Pid, Items) of
        undefined ->
            {?ASK_FULL, [undefined, undefined], maps:remove(Pid, Known)};
        Instant ->
            full(S, Pid, Instant, Expect, Known)
    end.

%% The signalled half; idle when its reductions are where the last
%% sample (or the probe just now) left them.
full(S, Pid, Instant, Expect, Known) ->
    case erlang:process_info(Pid, S#st.signalled) of
        undefined ->
            {?ASK_FULL, [Instant, undefined], maps:remove(Pid, Known)};
        Answer ->
            Reds = reds(Answer),
            Entry = {Reds =:= Expect, Reds + 1, key(Answer)},
            {?ASK_FULL, [Instant, Answer], Known#{Pid => Entry}}
    end.

unchanged(Probe, Expect, Key) ->
    idle_status(proplists:get_value(status, Probe)) andalso
        reds(Probe) =:= Expect andalso key(Probe) =:= Key.

idle_status(waiting) -> true;
idle_status(runnable) -> true;
idle_status(suspended) -> true;
idle_status(_) -> false.

reds(Items) ->
    proplists:get_value(reductions, Items).

key(Items) ->
    GC = proplists:get_value(garbage_collection, Items, []),
    {proplists:get_value(message_queue_len, Items),
     proplists:get_value(heap_size, Items),
     proplists:get_value(stack_size, Items),
     proplists:get_value(minor_gcs, GC)}.

flush(S, Last) ->
    T0 = erlang:monotonic_time(microsecond),
    S#st.daemon ! {S#st.ref, {flame_profd_batch, os:system_time(microsecond),
                              S#st.work, S#st.skipped, Last,
                              lists:reverse(S#st.rows)}},
    T1 = erlang:monotonic_time(microsecond),
    S#st{rows = [], skipped = 0, work = T1 - T0}.
