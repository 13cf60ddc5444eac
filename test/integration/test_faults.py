#!/usr/bin/env python3
"""Faults on the node side; the daemon keeps running, marks the gap in the
output, loses no finished file, and recovers.

1. the node is paused (SIGSTOP) for longer than --timeout, then resumed;
2. the node's rex answers with nonsense (wrong shapes, wrong tags) for a
   while: a peer that speaks distribution but makes no sense;
3. rex answers late and out of order (requests are delayed at random by up
   to 2.5 x --timeout);
4. the node closes the connection (disconnect_node) mid-run.
"""
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

# Replace the registered rex for MS milliseconds with a process that
# misbehaves (MODE nonsense | late), then put the real one back.
FAKE_REX = r"""
Real = whereis(rex), Until = erlang:monotonic_time(millisecond) + %(ms)d,
Garbage = [fun(R) -> {R, 42} end, fun(R) -> {R, [{status}, <<"x">>]} end,
           fun(R) -> {R, [[{current_stacktrace, [{m}]}]]} end,
           fun(R) -> {R, {badrpc, nonsense}} end, fun(_) -> {nope, 1} end,
           fun(R) -> R end, fun(R) -> {R, [undefined, 1.5, #{a => b}]} end],
Fake = spawn(fun() ->
    Loop = fun L(N) ->
        case erlang:monotonic_time(millisecond) >= Until of
            true -> catch unregister(rex), register(rex, Real);
            false ->
                receive
                    {'$gen_call', {From, Ref}, _} = M ->
                        case %(mode)s of
                            nonsense ->
                                G = lists:nth(N rem length(Garbage) + 1, Garbage),
                                From ! G(Ref);
                            late ->
                                spawn(fun() -> timer:sleep(rand:uniform(%(delay)d)), Real ! M end)
                        end,
                        L(N + 1)
                after 50 -> L(N)
                end
        end
    end,
    Loop(0)
end),
unregister(rex), register(rex, Fake), ok
"""

DISCONNECT = ('[erlang:disconnect_node(N) || N <- nodes(hidden), '
              'lists:prefix("flame_profd_", atom_to_list(N))]')


def main(t):
    node = h.start_node(idle=200)
    out = h.mkdtemp("out_")
    # fp_demo_sink pinned beside --top: sampled right after each connect,
    # with no selection to wait for
    args = h.daemon_args(node, out, top=5, name=["fp_demo_sink"], rate=20, every="1s",
                         timeout="1s", rotate="1h", compress="zstd", backtrace_depth=64)
    dm = h.start_daemon(args)
    dm.wait_samples(timeout=15)

    # 1. SIGSTOP past the timeout
    os.kill(node.os_pid, signal.SIGSTOP)
    try:
        dm.wait_log(r"warning: lost connection to .*stopped answering", timeout=20)
        t.check(dm.poll() is None, "paused node: daemon keeps running")
        time.sleep(2)
    finally:
        os.kill(node.os_pid, signal.SIGCONT)
    dm.wait_log(r"info: reconnected", timeout=40)
    dm.wait_samples(after=r"info: reconnected", timeout=20)
    t.check(True, "paused node: reconnected and sampling after SIGCONT")
    final, _, _ = h.output_files(out, node.name)
    t.check(len(final) >= 1, "paused node: the file open at the loss was finished")

    # 2. nonsense from rex for 3 s
    mark = len(dm.read_stderr().splitlines())
    node.eval(FAKE_REX % {"ms": 3000, "mode": "nonsense", "delay": 1})
    time.sleep(4)
    se = "\n".join(dm.read_stderr().splitlines()[mark:])
    t.check(dm.poll() is None, "nonsense: daemon keeps running")
    t.check(re.search(r"could not decode|unexpected reply|timed out|rpc failed", se),
            "nonsense: logged as such")
    dm.wait_log(r"info: interval: selected=\d+ pinned=\d+ samples=[1-9]",
                timeout=20, count=len(h.intervals(dm.read_stderr())) + 1)
    t.check(True, "nonsense: sampling resumed once rex was back")
    mark2 = len(dm.read_stderr().splitlines())

    # 3. late and out-of-order replies for 4 s
    node.eval(FAKE_REX % {"ms": 4000, "mode": "late", "delay": 2500})
    time.sleep(5)
    t.check(dm.poll() is None, "late replies: daemon keeps running")
    se = "\n".join(dm.read_stderr().splitlines()[mark2:])
    t.check("timed out" in se, "late replies: timeouts logged")
    # the breaker's probes back off 2, 4, 8, 16, 32 s while they fail; with
    # --timeout 1s a slow (sanitizer) build can fail one more after rex is
    # back, so allow for the 32 s step
    dm.wait_samples(after=re.escape(se.splitlines()[-1][:23]) if se else None,
                    timeout=70)
    t.check(True, "late replies: sampling resumed")

    # 4. the node drops the connection
    node.eval(DISCONNECT)
    dm.wait_log(r"warning: lost connection to .*connection closed", timeout=10)
    dm.wait_log(r"info: reconnected", timeout=20, count=2)
    dm.wait_samples(after=r"info: reconnected", timeout=20)
    t.check(True, "disconnect: reconnected and sampling")

    rc = dm.stop()
    t.eq(rc, 0, "exit 0 after SIGTERM")
    files = h.check_output(t, out, node, min_samples=20)
    notes = [c for f in files for _, c in f.comments if "lost connection" in c]
    t.check(len(notes) >= 2, "the gaps are noted in the output (%d notes)" % len(notes))
    errs = h.error_lines(dm.read_stderr())
    t.eq(errs, [], "no error lines")


if __name__ == "__main__":
    h.run(main)
