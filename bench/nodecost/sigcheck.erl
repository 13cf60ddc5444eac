-module(sigcheck).
-export([main/0]).
%% Which process_info items are served by the target itself (signal round trip)?
%% Evidence: target's reductions grow when it handles process_info request signals.
main() ->
    P = nc_deep:start(30), timer:sleep(50),
    {garbage_collection_info, GI} = process_info(P, garbage_collection_info),
    io:format("gc_info keys: ~p~n", [[K || {K, _} <- GI]]),
    {garbage_collection, G} = process_info(P, garbage_collection),
    io:format("gc keys: ~p~n", [[K || {K, _} <- G]]),
    Items = [status, registered_name, current_function, current_location, current_stacktrace,
             reductions, memory, message_queue_len, total_heap_size, heap_size, stack_size,
             garbage_collection, garbage_collection_info, initial_call, backtrace],
    [begin
         {reductions, R0} = process_info(P, reductions),
         [process_info(P, [I]) || _ <- lists:seq(1, 1000)],
         {reductions, R1} = process_info(P, reductions),
         io:format("~-25s target reductions +~p per 1000 calls~n", [I, R1 - R0])
     end || I <- Items],
    ok.
