#!/usr/bin/env python3
"""--trace: exact stacks of a traced gen_server, bounded and undone.

Against one real node (fp_demo, its server called by a paced client):
- a trace for its --trace-for writes samples of status traced whose
  stacks hold fp_demo:handle_call/3, some scheduled out (SLEEP), calls
  counted in the reductions field; it ends by itself and says so;
- --trace-max-events: the trace stops itself on the cap and says how many
  events it saw;
- a process calling a local function in a tight loop: the trace falls
  behind, stops itself, says how many it dropped, answers the daemon in
  time, and leaves no process of the tracer once the daemon has exited;
- after each of those, and after SIGKILL of the daemon mid-trace, the
  server has no trace flags and no trace pattern of ours is left; a
  process the node traced itself beforehand (another tracer, send
  events) keeps its tracer and flags;
- before OTP 27, where patterns are the node's, a trace pattern the node
  set itself makes --trace refuse with a clear message (exit 64), and
  that pattern is left as it was; on OTP 27 and later the trace runs in a
  session of its own and the node's pattern is left as it was;
- --trace-follow and --trace-server on a process that calls the server
  and spawns a Task each round: the Tasks' stacks (fp_demo's work) and
  the server's handle_call for the request are rooted at
  FOLLOWED:<the traced pid>, the traced process's own are not, and the
  other client's calls before the request's first are not in it; after
  --trace-for and after SIGKILL no Task still alive and not the server
  holds trace flags.
"""
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

# before OTP 27, the flags and patterns of the one tracer; from 27 on, the
# trace sessions that trace the server or the function (trace:session_info/1
# lists the node's own legacy session too, when it has a say)
FLAGS_25 = ("length(element(2, erlang:trace_info(whereis(fp_demo_server),"
            " flags)))")
PATTERN_25 = "element(2, erlang:trace_info({fp_demo, handle_call, 3}, traced))"
FLAGS_27 = "length(trace:session_info(whereis(fp_demo_server)))"
PATTERN_27 = ("case trace:session_info({fp_demo, handle_call, 3}) of "
              "[] -> false; L -> L end")
# the node's own tracer: fp_trace_watcher traces fp_trace_other's sends
OTHER = ("erlang:trace_info(whereis(fp_trace_other), tracer) =:= "
         "{tracer, whereis(fp_trace_watcher)} andalso "
         "erlang:trace_info(whereis(fp_trace_other), flags) =:= {flags, [send]}")


def undone(t, node, what, otp):
    flags, pattern = (FLAGS_25, PATTERN_25) if otp < 27 else (FLAGS_27, PATTERN_27)
    t.eq(node.wait_int(flags, 0), 0, "%s: the server has no trace flags" % what)
    t.eq(node.eval(pattern).strip(), "false", "%s: no trace pattern left" % what)
    t.eq(node.eval(OTHER).strip(), "true",
         "%s: the node's own tracer and flags are as they were" % what)


# the tasks of fp_trace_req that are alive and hold trace flags (before OTP
# 27) or a trace session (from 27 on)
TASKS = ("begin fp_trace_tasks ! {get, self()}, "
         "receive {tasks, Ts} -> ok after 5000 -> Ts = [] end, "
         "length([P || P <- Ts, %s]) end")
TASK_FLAGS_25 = ("case erlang:trace_info(P, flags) of {flags, [_ | _]} -> true; "
                 "_ -> false end")
TASK_FLAGS_27 = "case catch trace:session_info(P) of [_ | _] -> true; _ -> false end"


def follow(t, node, otp):
    """--trace-follow and --trace-server: a request process calls the
    server and runs a Task each round, once told to go; the paced client
    calls the server throughout. The Tasks' stacks and the server's work
    on the request's calls are the request's, rooted at
    FOLLOWED:<request pid>; the client's calls before the go are not; no
    flags stay on the Tasks or the server."""
    flags = TASK_FLAGS_25 if otp < 27 else TASK_FLAGS_27
    node.eval("register(fp_trace_tasks, spawn(fun() -> (fun L(Ts) -> receive "
              "{t, P} -> L(lists:sublist([P | Ts], 200)); "
              "{get, F} -> F ! {tasks, Ts}, L(Ts) end end)([]) end)), "
              "register(fp_trace_req, spawn(fun() -> receive go -> ok end, "
              "(fun L() -> "
              "gen_server:call(fp_demo_server, {work, 100}), "
              "spawn(fun() -> fp_trace_tasks ! {t, self()}, fp_demo:deep(3, 300), "
              "receive after 3000 -> ok end end), "
              "receive after 30 -> ok end, L() end)() end)), ok")
    req = node.eval_str("pid_to_list(whereis(fp_trace_req))").strip("<>")
    server = node.eval_str("pid_to_list(whereis(fp_demo_server))").strip("<>")
    out = h.mkdtemp("out_")
    d = h.start_daemon(h.daemon_args(node, out, trace="fp_trace_req",
                                     trace_follow=True, trace_server="fp_demo_server",
                                     trace_for="2500ms", duration="3500ms"))
    d.wait_log(r"--trace: tracing 1 process", timeout=40)
    time.sleep(1.0)
    t_go = time.time()
    node.eval("fp_trace_req ! go, ok")
    rc = d.wait(timeout=60)
    err = d.read_stderr()
    t.eq(rc, 0, "--trace-follow: the run exits 0")
    t.check(re.search(r"--trace: tracing 1 process\(es\) and what they spawn, "
                      r"and their calls to the servers", err),
            "--trace-follow: the start says it follows spawns and calls", err[-800:])
    samples = [s for s in h.all_samples(h.check_output(t, out, node, min_samples=5))
               if s["status"] == "traced"]
    root = "'FOLLOWED':'<%s>'/0" % req
    # the Tasks' stacks are charged to the request's pid, under the root
    own = [s for s in samples if s["pid"] == req and root not in s["frames"]]
    tasks = [s for s in samples if s["pid"] == req and root in s["frames"]]
    served = [s for s in samples if s["pid"] == server]
    t.eq(sorted({s["pid"] for s in samples} - {req, server}), [],
         "samples only of the request and the server")
    t.check(len(own) >= 1, "the request's own stacks, without the follow frame (%d)" % len(own))
    t.check(any("gen_server:call/2" in s["frames"] for s in own),
            "the request's stacks hold its gen_server:call")
    t.check(len(tasks) >= 1 and all(s["frames"][-1] == root for s in tasks),
            "the Tasks' stacks are rooted at %s (%d)" % (root, len(tasks)),
            str([s["frames"] for s in tasks[:3]]))
    t.check(any(f.startswith("fp_demo:") for s in tasks for f in s["frames"]),
            "the Tasks' work is in the trace (fp_demo:deep/2 and crunch/1)",
            str(sorted({";".join(s["frames"]) for s in tasks})[:8]))
    t.check(len(served) >= 1 and all(s["frames"][-1] == root for s in served),
            "the server's work for the request is rooted at %s (%d)" % (root, len(served)),
            str([s["frames"] for s in served[:3]]))
    # handle_call's fun under lists:foldl/3 (no pattern there: the return
    # to it makes it the whole stack)
    t.check(any("fp_demo:'-crunch/1-fun-0-'/2" in s["frames"] for s in served),
            "the server's handle_call work for the request is in the trace",
            str(sorted({";".join(s["frames"]) for s in served})[:8]))
    early = [s for s in served if s["ts"] < t_go]
    t.eq(len(early), 0, "nothing of the server before the request's first call "
         "(the other client's calls, %d samples of the server in all)" % len(served))
    t.eq(node.wait_int(TASKS % flags, 0), 0,
         "after --trace-for: no flags on the Tasks still alive")
    undone(t, node, "after --trace-follow", otp)

    # SIGKILL while following: the Tasks alive then keep no flags
    out = h.mkdtemp("out_")
    d = h.start_daemon(h.daemon_args(node, out, trace="fp_trace_req",
                                     trace_follow=True, trace_server="fp_demo_server",
                                     trace_for="60s"))
    d.wait_log(r"--trace: tracing 1 process", timeout=40)
    t.check(node.wait_int("min(1, %s)" % (TASKS % flags), 1) == 1,
            "Tasks traced while the daemon runs")
    d.stop(signal.SIGKILL)
    t.eq(node.wait_int(TASKS % flags, 0), 0,
         "after SIGKILL while following: no flags on the Tasks still alive")
    undone(t, node, "after SIGKILL while following", otp)
    node.eval("exit(whereis(fp_trace_req), kill), exit(whereis(fp_trace_tasks), kill), ok")


# the tracer's processes run at high priority; fp_demo's do not
HIGH = ("length([P || P <- processes(), "
        "process_info(P, priority) =:= {priority, high}])")


def behind(t, node, otp):
    """A process calling a local function in a tight loop sends trace
    messages far faster than the tracer takes them, on any host: the
    trace stops itself as behind, says how many it dropped, answers the
    daemon's requests in time, and no process of the tracer is left once
    the daemon has exited."""
    high = node.eval_int(HIGH)
    node.eval("register(fp_trace_busy, spawn(fun L() -> fp_demo:crunch(200), L() end)), ok")
    out = h.mkdtemp("out_")
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace="fp_trace_busy",
                                            trace_for="20s", trace_max_rate=10000000,
                                            duration="2s"),
                              timeout=60)
    m = re.search(r"--trace: stopped itself, the tracer fell behind the traced process "
                  r"[^:]*: \d+ events seen \((\d+) more dropped\)", err)
    t.check(m and int(m.group(1)) > 0,
            "a trace behind stops itself and says how many it dropped", err[-800:])
    t.check("did not answer" not in err and "no answer" not in err,
            "... and answers the daemon's requests in time", err[-800:])
    t.eq(rc, 0, "a trace stopped as behind: the run exits 0")
    t.eq(node.wait_int(HIGH, high), high,
         "no process of the tracer is left after the daemon exits")
    node.eval("exit(whereis(fp_trace_busy), kill), ok")
    undone(t, node, "after falling behind", otp)


def main(t):
    node = h.start_node(idle=20, busy=0,
                        opts={"clients": 0, "sink": False, "bin": False,
                              "quoted": False, "anon": False})
    otp = int(node.eval_str("erlang:system_info(otp_release)"))
    # a paced client: the server's work is handle_call's crunch/1
    node.eval("register(fp_trace_client, spawn(fun L() -> "
              "gen_server:call(fp_demo_server, {work, 100}), "
              "receive after 20 -> ok end, L() end)), ok")
    # the node's own tracer on another process
    node.eval("W = spawn(fun L() -> receive _ -> L() end end), "
              "register(fp_trace_watcher, W), "
              "O = spawn(fun L() -> receive after 50 -> self() ! x end, "
              "receive x -> ok end, L() end), "
              "register(fp_trace_other, O), "
              "1 = erlang:trace(O, true, [send, {tracer, W}]), ok")
    t.eq(node.eval(OTHER).strip(), "true", "the node traces a process itself")
    out = h.mkdtemp("out_")

    # a pattern of the node's own, set beforehand
    node.eval("erlang:trace_pattern({fp_demo, crunch, 1}, true, [local])")
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace="fp_demo_server",
                                            trace_for="2s", duration="3s"),
                              timeout=60)
    if otp < 27:
        t.eq(rc, 64, "OTP %d: a node with a trace pattern of its own: exit 64" % otp)
        t.check(re.search(r"--trace: refused on .*: \{trace_pattern, ?fp_demo\}", err),
                "the refusal names the module with a pattern", err[-600:])
    else:
        t.eq(rc, 0, "OTP %d: traced in a session of its own beside the node's pattern" % otp)
    t.eq(node.eval("element(2, erlang:trace_info({fp_demo, crunch, 1}, traced))").strip(),
         "local", "the node's own pattern is as it was")
    node.eval("erlang:trace_pattern({fp_demo, crunch, 1}, false, [local])")
    undone(t, node, "after the first run", otp)

    # a whole trace, ended by --trace-for
    out = h.mkdtemp("out_")
    t0 = time.time()
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace="fp_demo_server",
                                            trace_for="2s", duration="7s"),
                              timeout=60)
    t1 = time.time()
    t.eq(rc, 0, "a trace run exits 0")
    t.check(re.search(r"--trace: ended, its --trace-for ended: \d+ events", err),
            "the trace says it ended with its duration", err[-800:])
    files = h.check_output(t, out, node, t0, t1, min_samples=10)
    samples = [s for s in h.all_samples(files) if s["status"] == "traced"]
    t.check(len(samples) >= 10, "samples of status traced (%d)" % len(samples))
    hc = [s for s in samples if "fp_demo:handle_call/3" in s["frames"]]
    t.check(len(hc) >= 1, "stacks hold fp_demo:handle_call/3 (%d)" % len(hc))
    sleep = [s for s in samples if s["frames"] and s["frames"][0] == "'SLEEP':scheduled_out/0"]
    t.check(len(sleep) >= 1, "time scheduled out has a SLEEP frame (%d)" % len(sleep))
    on_cpu = [s for s in samples if not (s["frames"] and s["frames"][0] == "'SLEEP':scheduled_out/0")]
    t.check(len(on_cpu) >= 1, "time on a scheduler too (%d)" % len(on_cpu))
    t.check(all(s["idle"] for s in sleep) and not any(s["idle"] for s in on_cpu),
            "SLEEP samples, and only they, are marked idle (heat maps leave them out)")
    calls = sum(s["metrics"]["reductions"][0] for s in samples)
    t.check(calls > 0, "calls counted in the reductions field (%d)" % calls)
    undone(t, node, "after --trace-for", otp)

    # the cap
    out = h.mkdtemp("out_")
    rc, _, err = h.run_daemon(h.daemon_args(node, out, trace="fp_demo_server",
                                            trace_for="20s", trace_max_events=300,
                                            duration="4s"),
                              timeout=60)
    t.check(re.search(r"--trace: stopped itself, it reached --trace-max-events: "
                      r"300 events seen", err),
            "the cap stops the trace, with how much it saw", err[-800:])
    undone(t, node, "after the cap", otp)

    behind(t, node, otp)
    follow(t, node, otp)

    # SIGKILL mid-trace
    high = node.eval_int(HIGH)
    out = h.mkdtemp("out_")
    d = h.start_daemon(h.daemon_args(node, out, trace="fp_demo_server",
                                     trace_for="60s"))
    d.wait_log(r"--trace: tracing 1 process", timeout=40)
    t.check(node.wait_int("min(1, %s)" % (FLAGS_25 if otp < 27 else FLAGS_27), 1) == 1,
            "traced while the daemon runs")
    if otp >= 27:
        t.check(node.eval(PATTERN_27).strip() != "false",
                "... and handle_call has a pattern of the trace's session")
    d.stop(signal.SIGKILL)
    undone(t, node, "after SIGKILL", otp)
    t.eq(node.eval_int("length([P || P <- processes(), "
                       "{links, L} <- [erlang:process_info(P, links)], "
                       "lists:any(fun(X) -> node(X) =/= node() end, L), "
                       "P =/= whereis(flame_profd_janitor)])"), 0,
         "no tracer left on the node")
    t.eq(node.wait_int(HIGH, high), high,
         "... nor its sink (no process at high priority more than before)")
    node.eval("exit(whereis(fp_trace_client), kill), ok")


if __name__ == "__main__":
    h.run(main)
