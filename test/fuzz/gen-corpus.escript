#!/usr/bin/env escript
%% gen-corpus.escript DIR -- seed corpus for fuzz-reply: the replies
%% flame_profd gets from a node, made here from this VM's own processes
%% (the same BIF calls the daemon sends as rpcs), plus a few envelopes.
-mode(compile).

main([Dir]) ->
    Self = self(),
    Busy = [spawn(fun() -> busy(0) end) || _ <- lists:seq(1, 3)],
    Named = spawn(fun() -> receive stop -> ok end end),
    register('fp corpus named', Named),
    Gs = [proc_lib:spawn(fun() -> receive stop -> ok end end) || _ <- lists:seq(1, 2)],
    timer:sleep(50),
    erlang:system_flag(backtrace_depth, 64),
    Items = [status, registered_name, current_stacktrace, reductions, memory,
             message_queue_len, total_heap_size, heap_size, stack_size,
             garbage_collection, garbage_collection_info],
    %% the daemon asks each process twice (libsample/node.c)
    Instant = [status, registered_name],
    Signalled = [current_stacktrace, reductions, memory, message_queue_len,
                 total_heap_size, heap_size, stack_size, garbage_collection,
                 garbage_collection_info],
    Probe = [status, registered_name, reductions, message_queue_len,
             heap_size, stack_size, garbage_collection],
    Pairs = fun(Pids, Ic) ->
                    lists:zipwith(fun erlang:process_info/2,
                                  lists:append([[P, P] || P <- Pids]),
                                  lists:append([[Instant ++ Ic, Signalled] || _ <- Pids]))
            end,
    Ps = lists:sublist(erlang:processes(), 40),
    Sample = Busy ++ [Named, Self | Gs],
    Ref = make_ref(),
    Cases = [
        {processes, Ps},
        {reductions, lists:zipwith(fun erlang:process_info/2, Ps,
                                   lists:duplicate(length(Ps), reductions))},
        {sample, lists:zipwith(fun erlang:process_info/2, Sample,
                               lists:duplicate(length(Sample), Items))},
        {sample_ic, lists:zipwith(fun erlang:process_info/2, Sample,
                                  lists:duplicate(length(Sample), Items ++ [initial_call]))},
        {sample_dead, [undefined | lists:zipwith(fun erlang:process_info/2, Busy,
                                                 lists:duplicate(3, Items))]},
        {sample_pairs, Pairs(Sample, [])},
        {sample_pairs_ic, Pairs(Sample, [initial_call])},
        {sample_pairs_dead, [undefined, undefined | Pairs(Busy, [])]},
        {whereis, lists:map(fun erlang:whereis/1, [rex, 'fp corpus named', nope])},
        {initial_call, lists:map(fun proc_lib:initial_call/1, Sample)},
        {reply, {Ref, [1, 2, 3]}},
        {badrpc, {Ref, {badrpc, {'EXIT', {undef, [{m, f, [], []}]}}}}},
        {setup, {Ref, erlang:system_info(otp_release)}},
        %% a --request helper batch: rows as term_to_binary, one full
        %% and one probed process each (libsample/flame_profd_helper.erl)
        {helper_batch, {flame_profd_batch, os:system_time(microsecond), 321, 2, false,
                        [term_to_binary({os:system_time(microsecond), [P, Named],
                                         <<0, 2>>,
                                         [erlang:process_info(P, Instant ++ [initial_call]),
                                          erlang:process_info(P, Signalled),
                                          erlang:process_info(Named, Probe)]})
                         || P <- Busy]}},
        {helper_error, {flame_profd_error, {error, badarg}}},
        {mixed, [1.5, <<"bin">>, #{a => [self()]}, make_ref(), hd(erlang:ports()),
                 fun lists:map/2, {}, [], "str", 1 bsl 70, -(1 bsl 40)]}
    ],
    ok = filelib:ensure_dir(filename:join(Dir, "x")),
    [ok = file:write_file(filename:join(Dir, atom_to_list(Name)), term_to_binary(T))
     || {Name, T} <- Cases],
    [exit(P, kill) || P <- Busy ++ Gs ++ [Named]],
    io:format("~b corpus files in ~s~n", [length(Cases), Dir]);
main(_) ->
    io:format(standard_error, "usage: gen-corpus.escript DIR~n", []),
    halt(64).

busy(N) -> deep(20, N), busy(N + 1).
deep(0, N) -> lists:sum(lists:seq(1, 100)) + N;
deep(D, N) -> 1 + deep(D - 1, N).
