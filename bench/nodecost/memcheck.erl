-module(memcheck).
-export([main/0]).
%% Can total_heap_size / memory be derived from garbage_collection_info (no signal round trip)?
main() ->
    Ps = [nc_deep:start(30) || _ <- lists:seq(1, 20)] ++ [spawn(fun() -> L = lists:seq(1, 5000), receive stop -> L end end) || _ <- lists:seq(1, 5)],
    [P ! {msg, lists:seq(1, 100)} || P <- lists:sublist(Ps, 3)],
    timer:sleep(100),
    R = [begin
             [{total_heap_size, T}, {memory, M}, {message_queue_len, Q}, {garbage_collection_info, G}] =
                 process_info(P, [total_heap_size, memory, message_queue_len, garbage_collection_info]),
             D = proplists:get_value(heap_block_size, G) + proplists:get_value(old_heap_block_size, G)
                 + proplists:get_value(mbuf_size, G),
             {T, D, T - D, M, M - T * 8, Q}
         end || P <- Ps ++ processes()],
    Diffs = lists:usort([X || {_, _, X, _, _, _} <- R]),
    MemMinus = lists:usort([{Y, Q} || {_, _, _, _, Y, Q} <- R]),
    io:format("total_heap_size - (heap_block_size+old_heap_block_size+mbuf_size) distinct values: ~p~n", [Diffs]),
    io:format("memory - 8*total_heap_size distinct {value, msgq_len}: ~p~n", [MemMinus]).
