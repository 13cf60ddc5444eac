#!/usr/bin/env escript
%% gen-reply.escript OUT [PROCS [DEPTH]] -- a real sample reply for
%% bench/offline: the result of the request flame_profd sends per sample
%% batch (lists:zipwith(fun erlang:process_info/2, Pids, ItemLists), every
%% pid twice, same items as fp_node_sample_request() in libsample/node.c),
%% made by this VM
%% for PROCS processes (default 100) blocked in receive under DEPTH frames
%% of non-tail recursion (default 40; backtrace_depth 64 as the daemon sets
%% it), a third of them registered, written as term_to_binary/1 (version
%% byte 131, then the term -- as fp_reply's buf/index see it).
-module(fp_bench_reply).
-mode(compile).

%% each process twice: what the caller reads, then what the process answers
instant_items() ->
    [status, registered_name].

signalled_items() ->
    [current_stacktrace, reductions, memory, message_queue_len,
     total_heap_size, heap_size, stack_size, garbage_collection,
     garbage_collection_info].

main([Out]) -> main([Out, "100"]);
main([Out, Procs]) -> main([Out, Procs, "40"]);
main([Out, Procs0, Depth0]) ->
    Procs = list_to_integer(Procs0),
    Depth = list_to_integer(Depth0),
    erlang:system_flag(backtrace_depth, 64),
    Pids = [spawn(fun() -> start(I, Depth) end) || I <- lists:seq(1, Procs)],
    timer:sleep(200),
    Reply = lists:zipwith(fun erlang:process_info/2,
                          lists:append([[P, P] || P <- Pids]),
                          lists:append(lists:duplicate(Procs, [instant_items(),
                                                               signalled_items()]))),
    Bin = term_to_binary(Reply),
    ok = file:write_file(Out, Bin),
    [exit(P, kill) || P <- Pids],
    io:format("~s: ~b processes, depth ~b, ~b bytes~n",
              [Out, Procs, Depth, byte_size(Bin)]);
main(_) ->
    io:format(standard_error, "usage: gen-reply.escript OUT [PROCS [DEPTH]]~n", []),
    halt(64).

start(I, Depth) ->
    I rem 3 =:= 0 andalso register(list_to_atom("fp_bench_proc_" ++ integer_to_list(I)), self()),
    %% some garbage, so the heap and gc metrics are not all zero
    _ = lists:seq(1, I * 10),
    %% varied depths: DEPTH/2 .. DEPTH
    deep(Depth div 2 + I rem (Depth div 2 + 1)).

deep(0) ->
    receive stop -> 0 end;
deep(N) when N band 1 =:= 0 ->
    1 + deep(N - 1);
deep(N) ->
    2 + deep(N - 1).
