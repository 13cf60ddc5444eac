#!/usr/bin/env python3
"""--trace-call MOD:FUN/ARITY: the next N calls of a function, in whatever
process runs them, each its own stack tree; bounded and undone.

Against one real node (fp_demo; three processes call
fp_demo:call_work/1 in a loop: a pause, fp_demo:deep/2's work, a sleep):
- --trace-calls 5 writes samples of status traced under exactly the roots
  'CALL':'1'/0 .. 'CALL':'5'/0, each with fp_demo:call_work/1 under its
  root and timer:sleep/1 inside it, fp_demo:crunch/1's work, from more
  than one process; the trace ends when the five calls have returned and
  says so;
- --trace-max-events: the trace stops itself on the cap and says how many
  events and calls it saw;
- a function the node does not export: exit 64, one clear message;
- a function a process loops in (fp_demo:idle_loop/1, a receive loop):
  exit 64, saying why;
- after each run, and after SIGKILL of the daemon mid-trace, the function
  has no trace pattern and the callers no trace flags; after SIGKILL no
  process of the tracer (the controller, the sink) is left;
- before OTP 27, a trace pattern the node set itself on the function
  makes --trace-call refuse (exit 64), and the pattern is left as it was;
  on OTP 27 and later the trace runs in a session of its own and the
  node's pattern is left as it was.
"""
import os
import re
import signal
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

MFA = "{fp_demo, call_work, 1}"
CALLERS = "[whereis(N) || N <- [fp_tc_a, fp_tc_b, fp_tc_c]]"
# before OTP 27 the node's one set of patterns and flags; from 27 on, the
# trace sessions (trace:session_info/1)
PATTERN_25 = ("[element(2, erlang:trace_info(%s, I)) || I <- [traced, meta]]"
              " =:= [false, false]" % MFA)
FLAGS_25 = ("length([P || P <- %s, element(2, erlang:trace_info(P, flags)) =/= []])"
            % CALLERS)
PATTERN_27 = "trace:session_info(%s) =:= []" % MFA
FLAGS_27 = "length([P || P <- %s, trace:session_info(P) =/= []])" % CALLERS


# the tracer's processes run at high priority; fp_demo's do not
HIGH = ("length([P || P <- processes(), "
        "process_info(P, priority) =:= {priority, high}])")


def undone(t, node, what, otp):
    pattern, flags = (PATTERN_25, FLAGS_25) if otp < 27 else (PATTERN_27, FLAGS_27)
    t.eq(node.wait_int(flags, 0), 0, "%s: the callers have no trace flags" % what)
    t.eq(node.eval(pattern).strip(), "true", "%s: no trace pattern on the function" % what)


def main(t):
    node = h.start_node(idle=5, busy=0,
                        opts={"clients": 0, "sink": False, "bin": False,
                              "quoted": False, "anon": False})
    otp = int(node.eval_str("erlang:system_info(otp_release)"))
    # the work per call: some, then little, so that a trace of every
    # call keeps up
    node.eval("persistent_term:put(fp_tc_work, 300), "
              "[register(N, spawn(fun L() -> "
              "fp_demo:call_work(persistent_term:get(fp_tc_work)), "
              "receive after 15 -> ok end, L() end)) "
              "|| N <- [fp_tc_a, fp_tc_b, fp_tc_c]], ok")
    out = h.mkdtemp("out_")

    # five calls, in several processes, each its own tree
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace_call="fp_demo:call_work/1",
                                            trace_calls=5, trace_for="8s",
                                            trace_max_rate=1000000, duration="15s"),
                              timeout=60)
    t.eq(rc, 0, "a --trace-call run exits 0 when its calls returned")
    t.check(re.search(r"--trace-call: ended, its --trace-calls calls returned: \d+ events, "
                      r".*; 5 of 5 call\(s\) begun, 5 returned", err),
            "the trace says it ended with its calls, and how many", err[-1500:])
    samples = [s for s in h.all_samples(h.check_output(t, out, node, min_samples=5))
               if s["status"] == "traced"]
    roots = sorted({s["frames"][-1] for s in samples if s["frames"]})
    t.eq(roots, ["'CALL':'%d'/0" % i for i in range(1, 6)],
         "one tree per call, rooted at 'CALL':'<n>'/0")
    t.check(all(len(s["frames"]) >= 2 and s["frames"][-2] == "fp_demo:call_work/1"
                for s in samples),
            "the function called is under each root",
            str(sorted({";".join(s["frames"]) for s in samples})[:6]))
    # each call's 5 ms in timer:sleep/1; before OTP 27 the tracer turns
    # the flags on when the call's entry reaches it, so a call may be past
    # its 10 ms pause by then
    inner = {s["frames"][-1] for s in samples
             if s["frames"][-3:-1] == ["timer:sleep/1", "fp_demo:call_work/1"]}
    t.check(len(inner) == 5 if otp >= 27 else len(inner) >= 3,
            "the calls' trees hold their inner frames (timer:sleep/1, %d)" % len(inner),
            str(sorted({";".join(s["frames"]) for s in samples})[:10]))
    t.check(any("fp_demo:crunch/1" in s["frames"] for s in samples),
            "... and their work (fp_demo:crunch/1)")
    t.check(any(s["frames"][0] == "'SLEEP':scheduled_out/0" for s in samples),
            "the call's pause is its time scheduled out")
    pids = {s["pid"] for s in samples}
    t.check(len(pids) >= 2, "calls of several processes (%d)" % len(pids))
    calls = sum(s["metrics"]["reductions"][0] for s in samples)
    t.check(calls >= 5, "calls counted in the reductions field (%d)" % calls)
    undone(t, node, "after 5 calls", otp)

    # the cap, and a function the node does not have
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace_call="fp_demo:call_work/1",
                                            trace_calls=1000, trace_max_events=40,
                                            duration="8s"), timeout=60)
    t.check(re.search(r"--trace-call: stopped itself, it reached --trace-max-events: "
                      r"40 events seen .*; \d+ of 1000 call\(s\) begun, \d+ returned", err),
            "the cap stops the trace, with how much it saw", err[-800:])
    undone(t, node, "after the cap", otp)
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace_call="fp_demo:nope/1",
                                            duration="5s"), timeout=60)
    t.eq(rc, 64, "a function the node does not export: exit 64")
    t.check(re.search(r"--trace-call: fp_demo:nope/1 is not a loaded, exported function", err),
            "... with one clear message", err[-400:])
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace_call="fp_demo:idle_loop/1",
                                            duration="5s"), timeout=60)
    t.eq(rc, 64, "a function processes loop in (a receive loop): exit 64")
    t.check(re.search(r"--trace-call: refused on \S+: a process loops in "
                      r"fp_demo:idle_loop/1, with nothing of its own below it \(\{loop, <", err),
            "... saying why", err[-400:])
    undone(t, node, "after the refusal", otp)

    # SIGKILL mid-trace
    node.eval("persistent_term:put(fp_tc_work, 20)")
    high = node.eval_int(HIGH)
    d = h.start_daemon(h.daemon_args(node, out, trace_call="fp_demo:call_work/1",
                                     trace_calls=100000, trace_for="60s",
                                     trace_max_rate=1000000))
    d.wait_log(r"--trace-call: tracing the next", timeout=40)
    live = "not (%s)" % (PATTERN_25 if otp < 27 else PATTERN_27)
    t.eq(node.eval(live).strip(), "true", "the function has a pattern while traced")
    d.stop(signal.SIGKILL)
    undone(t, node, "after SIGKILL", otp)
    t.eq(node.wait_int(HIGH, high), high,
         "no process of the tracer (controller, sink) is left after SIGKILL")

    # the node's own pattern on the function
    node.eval("erlang:trace_pattern(%s, true, [local])" % MFA)
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace_call="fp_demo:call_work/1",
                                            trace_calls=2, duration="5s"), timeout=60)
    if otp < 27:
        t.eq(rc, 64, "OTP %d: a function with a pattern of the node's: exit 64" % otp)
        t.check(re.search(r"--trace-call: refused on .*trace_pattern", err),
                "the refusal says why", err[-600:])
    else:
        t.eq(rc, 0, "OTP %d: traced in a session of its own beside the node's pattern" % otp)
    t.eq(node.eval("element(2, erlang:trace_info(%s, traced))" % MFA).strip(), "local",
         "the node's own pattern is as it was")
    node.eval("erlang:trace_pattern(%s, false, [local]), "
              "[exit(P, kill) || P <- %s], persistent_term:erase(fp_tc_work), ok"
              % (MFA, CALLERS))


if __name__ == "__main__":
    h.run(main)
