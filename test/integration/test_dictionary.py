#!/usr/bin/env python3
"""A process with a ~100 MB dictionary costs the node no dictionary copy.

Where the node cannot read one dictionary key alone (OTP 25 to 26.1),
reading what proc_lib recorded ('$initial_call') copies the whole
dictionary of the process asked about (process_info(P, dictionary)).
The process here was started by proc_lib, is busy (so --top picks it)
and is also pinned, while --every 1s makes the set churn. Every call of
process_info(P, dictionary) on the node is traced by argument: the big
process is never its argument, and no process is its argument twice
(each is asked once in its life). Where
the node reads one dictionary key without copying (probed), the big
process gets its real initial call. The node's memory, less the big
process's own heap, is back to where it was (±20 MB) once the daemon has
gone.
"""
import os
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

MB = 1024 * 1024

BIG = (
    "begin "
    "Parent = self(), "
    "P = proc_lib:spawn(fun() -> "
    "  [put({fp_big, N}, lists:seq(1, 100)) || N <- lists:seq(1, 60000)], "
    "  Parent ! {self(), filled}, "
    "  (fun L(I) -> receive stop -> ok after 0 -> L(I + 1) end end)(0) "
    "end), "
    "receive {P, filled} -> ok after 60000 -> timeout end, "
    "register(fp_big_dict, P), "
    "pid_to_list(P) "
    "end")

# counts process_info(P, dictionary) calls by P
TRACER = (
    "begin "
    "T = spawn(fun() -> "
    "  (fun L(M) -> "
    "     receive "
    "       {trace, _, call, {erlang, process_info, [A, dictionary]}} -> "
    "         L(maps:update_with(A, fun(C) -> C + 1 end, 1, M)); "
    "       {get, From} -> From ! {counts, M}, L(M); "
    "       _ -> L(M) "
    "     end "
    "   end)(#{}) "
    "end), "
    "register(fp_ic_tracer, T), "
    "erlang:trace_pattern({erlang, process_info, 2}, "
    "                     [{['_', dictionary], [], []}], [global]), "
    "erlang:trace(all, true, [call, {tracer, T}]), "
    "ok "
    "end")

COUNTS = (
    "begin "
    "fp_ic_tracer ! {get, self()}, "
    "receive {counts, M} -> "
    "  lists:flatten(io_lib:format(\"~p\", [[{pid_to_list(K), V} || {K, V} <- maps:to_list(M)]])) "
    "after 5000 -> \"timeout\" end "
    "end")


def memory(node):
    """The node's memory after a collection of every process, less the big
    process's own: a process whose live data is 80 MB gets a heap one of
    several sizes 20% apart, as its collections go, whoever looks at it."""
    return node.eval_int("begin [erlang:garbage_collect(P) || P <- processes()], "
                         "{memory, Big} = process_info(whereis(fp_big_dict), memory), "
                         "erlang:memory(total) - Big end")


def main(t):
    # no sink or binary churner: the node's memory holds still
    node = h.start_node(idle=200, opts={"sink": False, "bin": False})
    big = node.eval_str(BIG, timeout=90)
    big_mem = node.eval_int("element(2, process_info(whereis(fp_big_dict), memory))")
    h.log("big process %s: %.1f MB" % (big, big_mem / MB))
    t.check(big_mem > 80 * MB, "the big process holds > 80 MB (%.1f MB)" % (big_mem / MB))
    node.eval(TRACER)
    before = memory(node)

    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=10, rate=20, every="1s", duration="8s",
                         pid=[big], verbose=True)
    rc, _, se = h.run_daemon(args, timeout=60)
    if not t.eq(rc, 0, "exit 0"):
        h.log(se[-3000:])
    files = h.check_output(t, out, node, min_samples=10)

    counts = dict(eval(node.eval_str(COUNTS).replace("[", "[").replace("{", "(")
                       .replace("}", ")")))
    h.log("process_info(P, dictionary) calls by P: %s" % counts)
    t.eq(counts.get(big, 0), 0, "the big process's dictionary was never copied")
    t.check(all(v == 1 for v in counts.values()),
            "no process was asked twice", str(counts))
    big_samples = [s for s in h.all_samples(files) if s["pid"] == big.strip("<>")]
    t.check(len(big_samples) >= 10, "the big process was sampled (%d)" % len(big_samples))
    reads_keys = node.eval_str(
        "case catch process_info(whereis(rex), {dictionary, '$initial_call'}) of "
        "{'EXIT', _} -> \"no\"; _ -> \"yes\" end") == "yes"
    ics = {s["fields"].get("initial_call") for s in big_samples}
    h.log("big process initial calls: %s (node reads dictionary keys: %s)"
          % (ics, reads_keys))
    if reads_keys:
        last = big_samples[-1]["fields"].get("initial_call") or ""
        t.check(not last.startswith("proc_lib:init_p"),
                "the big process has its real initial call (%s)" % last)

    after = memory(node)
    h.log("node memory but the big process's %.1f MB before, %.1f MB after"
          % (before / MB, after / MB))
    t.check(abs(after - before) < 20 * MB, "node memory back to where it was "
            "(%+.1f MB)" % ((after - before) / MB))
    node.eval("erlang:trace(all, false, [call]), fp_big_dict ! stop, ok")


if __name__ == "__main__":
    h.run(main)
