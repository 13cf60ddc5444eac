#!/usr/bin/env python3
"""Triggers the node signals itself, through the node's watcher: its system
monitor (large_heap; long_gc watched), its memory's growth, and the node's
own erlang:system_monitor/2 left exactly as its application set it.
(A long_gc>1 capture is not asserted: on a loaded host any collection may
take 2 ms, and which process fires first is not the test's to choose.)

One demo node, four short daemon runs with --flight-recorder and --after 1s:

  A. nobody holds the node's system monitor; --trigger 'large_heap>32M':
     a process that builds a 64 MB list gives one capture naming the
     trigger, the heap's bytes and that process, holding samples from
     before it. After a normal stop the node's monitor is free again (and
     no trace session of ours is left).
  B. the node's application holds erlang:system_monitor/2 (a process of
     its own, long_gc 500 ms); --trigger 'large_heap>32M' and
     'node.memory+>200M/10s':
       - a node with trace sessions (trace:system/3) watches large_heap
         through a session of our own: the 64 MB list gives a capture
         naming its bytes and process, and the application's monitor is
         untouched meanwhile;
       - an older node says who holds the monitor in a warning, leaves it,
         and carries on;
     either way a 300 MB binary gives a capture of node.memory+, and after
     a normal stop the application's monitor is exactly as it was.
  C. --trigger 'long_gc>1' and 'sched_util>99', SIGKILLed: the
     application's monitor is still as it was, no session of ours is left
     and scheduler_wall_time, on while the daemon ran, is off again; on a
     node without sessions, the slot we took while it was free is free
     again after SIGKILL.
  D. a node whose system monitor lacks long_message_queue (before OTP 26)
     refuses --trigger 'long_message_queue>1000' with exit 78.
"""
import json
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

HEAP = ("P = spawn(fun() -> L = lists:seq(1, 4000000), erlang:garbage_collect(), "
        "receive stop -> length(L) end end), register(fp_sysmon_heap, P), "
        "pid_to_list(P)")
# 300 copies of 1 MB: one byte 300 million times takes seconds on OTP 27
# and holds its scheduler (and the timers and erlang:memory/1 with it)
BLOB = ("P = spawn(fun() -> B = binary:copy(<<0:8000000>>, 300), "
        "receive stop -> byte_size(B) end end), register(fp_sysmon_blob, P), ok")
APP = ("Me = self(), P = spawn(fun() -> "
       "erlang:system_monitor(self(), [{long_gc, 500}, {large_heap, 50000000}]), "
       "Me ! set, receive stop -> ok end end), register(fp_sysmon_app, P), "
       "receive set -> ok end, erlang:system_monitor()")
# the node's system monitor, and our trace session where the node has them
STATE = ("{erlang:system_monitor(), "
         "case erlang:function_exported(trace, session_info, 1) of "
         "true -> [N || {N, _} <- trace:session_info(all), N =:= flame_profd]; "
         "false -> [] end, "
         "erlang:statistics(scheduler_wall_time) =:= undefined}")
SWT_ON = "erlang:statistics(scheduler_wall_time) =/= undefined"
# whether the node has trace:system/3, and whether its system monitor
# takes long_message_queue (asked while nobody holds it, let go at once)
PROBE = ("{{module, trace} =:= (catch code:ensure_loaded(trace)) andalso "
         "erlang:function_exported(trace, system, 3), "
         "case catch erlang:system_monitor(self(), [{long_message_queue, {1, 2}}]) of "
         "{'EXIT', _} -> false; _ -> erlang:system_monitor(undefined), true end}")


def stopping(name):
    """An expression that ends the process registered as name, first."""
    return "case whereis(%s) of undefined -> ok; P -> exit(P, kill) end, " % name


def manifest(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def wait_capture(path, trigger, timeout):
    """The manifest's capture of trigger once it is listed (or None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        caps = (manifest(path) or {}).get("captures", [])
        mine = [c for c in caps if c["trigger"] == trigger]
        if mine:
            return mine[0]
        time.sleep(0.2)
    return None


def wait_eq(node, expr, want, timeout=10, squash=True):
    """Evaluate expr until it prints want (spaces and line breaks
    squashed); the last value."""
    deadline = time.monotonic() + timeout
    while True:
        got = node.eval(expr)
        if squash:
            got = got.replace(" ", "").replace("\n", "")
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def start(node, out, triggers):
    args = h.daemon_args(node, out, rate=10, every="1s", top=5,
                         flight_recorder="20s", after="1s", trigger=triggers)
    d = h.start_daemon(args)
    d.wait_samples(timeout=30)
    return d


def check_capture(t, ndir, cap, t_fired, label):
    """The capture is a finished file holding samples from before the
    moment its cause was set off, and after."""
    path = os.path.join(ndir, cap["dir"], cap["name"])
    try:
        pf = h.parse_perf(path)
    except Exception as e:     # ParseError, or no file
        t.check(False, "%s: the capture is a finished file in the grammar" % label, str(e))
        return
    tss = [s["ts"] for s in pf.samples]
    t.check(tss and min(tss) <= t_fired - 1.5,
            "%s: the capture holds samples from before it" % label,
            "first %s, set off at %.3f" % (min(tss) if tss else None, t_fired))
    t.check(tss and max(tss) >= t_fired, "%s: ... and after" % label)


T0 = time.monotonic()


def phase(what):
    h.log("%.1f s: %s" % (time.monotonic() - T0, what))


def main(t):
    node = h.start_node(idle=50, busy=1)
    phase("node up")
    sessions, has_mq, state = re.match(r"^\{(\w+),(\w+),\{(.*)\}\}$",
                                       node.eval("{%s, %s}" % (PROBE[1:-1], STATE))
                                       .replace(" ", "").replace("\n", "")).groups()
    sessions, has_mq = sessions == "true", has_mq == "true"
    h.log("node: trace sessions with trace:system/3: %s; long_message_queue: %s"
          % (sessions, has_mq))
    free = "{undefined,[],true}"
    t.eq("{%s}" % state, free, "nobody holds the node's system monitor at first, "
         "and scheduler_wall_time is off")

    # A: the slot is free (or a session is used): large_heap
    phase("A")
    out = h.mkdtemp("a_")
    ndir = os.path.join(out, h.sanitize_node(node.name))
    mpath = os.path.join(ndir, "manifest.json")
    d = start(node, out, ["large_heap>32M"])
    time.sleep(2)
    t_heap = time.time()
    pid = node.eval(HEAP).strip('"')
    cap = wait_capture(mpath, "large_heap>33554432", 30)
    rc = d.stop()
    se = d.read_stderr()
    t.eq(rc, 0, "A: the daemon exits 0")
    t.check(re.search(r"watching \S+'s system monitor \(large_heap\) through %s" %
                      ("a trace session" if sessions else r"erlang:system_monitor/2"), se),
            "A: it says how it watches the node's system monitor", se[-1500:])
    if t.check(cap, "A: a heap over 32M gives a capture of large_heap", se[-2000:]):
        t.check(cap["value"] > 32 << 20, "A: the manifest names the heap's bytes",
                str(cap["value"]))
        t.eq(cap["pid"], pid, "A: ... and the process")
        t.check(cap["dir"].endswith(".large_heap"), "A: the directory is named for it",
                cap["dir"])
        check_capture(t, ndir, cap, t_heap, "A")
    t.eq(wait_eq(node, stopping("fp_sysmon_heap") + STATE, free), free,
         "A: after a normal stop the node's system monitor is free again, "
         "and no trace session of ours is left")

    # B: the application holds the node's system monitor
    phase("B")
    before = node.eval(APP)
    t.check(before.startswith("{<"), "B: the application holds the system monitor", before)
    out = h.mkdtemp("b_")
    ndir = os.path.join(out, h.sanitize_node(node.name))
    mpath = os.path.join(ndir, "manifest.json")
    d = start(node, out, ["large_heap>32M", "node.memory+>200M/10s"])
    se = d.read_stderr()
    if sessions:
        t.check(re.search(r"watching \S+'s system monitor \(large_heap\) through a trace "
                          r"session of our own", se),
                "B: beside the application's monitor, a trace session of our own", se[-1500:])
        time.sleep(2)
        t_heap = time.time()
        pid = node.eval(HEAP).strip('"')
        cap = wait_capture(mpath, "large_heap>33554432", 30)
        if t.check(cap, "B: a large heap gives a capture through the session",
                   d.read_stderr()[-2000:]):
            t.check(cap["value"] > 32 << 20, "B: the manifest names the heap's bytes",
                    str(cap["value"]))
            t.eq(cap["pid"], pid, "B: ... and the process")
            check_capture(t, ndir, cap, t_heap, "B large_heap")
        t.eq(node.eval(stopping("fp_sysmon_heap") + "erlang:system_monitor()"), before,
             "B: the application's monitor is untouched while the session runs")
    else:
        t.check(re.search(r"its one system monitor is held by <\d+\.\d+\.\d+> "
                          r"\(erlang:system_monitor/2\): left to it; the triggers "
                          r"large_heap are off", se),
                "B: an older node's held monitor is said in a warning and left", se[-1500:])
        time.sleep(2)
    t_blob = time.time()
    node.eval(BLOB)
    cap = wait_capture(mpath, "node.memory+>209715200/10s", 30)
    rc = d.stop()
    se = d.read_stderr()
    t.eq(rc, 0, "B: the daemon exits 0")
    t.eq(h.error_lines(se), [], "B: no error lines")
    if t.check(cap, "B: a 300 MB binary gives a capture of node.memory+", se[-2000:]):
        t.check(cap["value"] > 200 << 20 and cap["pid"] is None,
                "B: the manifest names the growth, no process", str(cap))
        check_capture(t, ndir, cap, t_blob, "B node.memory+")
    held = "{%s,[],true}" % before.replace(" ", "").replace("\n", "")
    t.eq(wait_eq(node, stopping("fp_sysmon_blob") + STATE, held, squash=True), held,
         "B: after a normal stop the application's monitor is exactly as it was")

    # C: the same, SIGKILLed
    phase("C")
    d = h.start_daemon(h.daemon_args(node, h.mkdtemp("c_"), flight_recorder="20s",
                                     trigger=["long_gc>1", "sched_util>99"]))
    d.wait_log(r"system monitor", timeout=30)
    t.eq(node.eval(SWT_ON), "true", "C: sched_util holds scheduler_wall_time on")
    d.stop(signal.SIGKILL)
    t.eq(wait_eq(node, STATE, held, squash=True), held,
         "C: after SIGKILL the application's monitor is exactly as it was, "
         "no session of ours is left and scheduler_wall_time is off again")

    # C, on a node where we took the free slot: SIGKILL frees it
    node.eval(stopping("fp_sysmon_app") + "ok")
    if not sessions:
        d = h.start_daemon(h.daemon_args(node, h.mkdtemp("c2_"), flight_recorder="20s",
                                         trigger=["large_heap>1G"]))
        d.wait_log(r"through erlang:system_monitor/2, which nobody held", timeout=30)
        t.check(node.eval("erlang:system_monitor()").startswith("{<"),
                "C: on a free slot, our watcher holds the node's monitor")
        d.stop(signal.SIGKILL)
        t.eq(wait_eq(node, STATE, free), free,
             "C: after SIGKILL the slot we took is free again")

    # D: an event the node's monitor lacks is refused
    phase("D")
    if has_mq:
        h.log("D: skipped: this node's system monitor takes long_message_queue")
        return
    args = h.daemon_args(node, h.mkdtemp("d_"), flight_recorder="20s", duration="10s",
                         trigger=["long_message_queue>1000"])
    rc, _, err = h.run_daemon(args, timeout=30)
    t.eq(rc, 78, "D: a trigger the node's monitor lacks exits 78")
    t.check(re.search(r"flame_profd: error: .*system monitor does not offer "
                      r"long_message_queue", err),
            "D: ... saying which", err[-1500:])
    t.eq(node.eval("erlang:system_monitor()"), "undefined",
         "D: and leaves the node's monitor free")

if __name__ == "__main__":
    h.run(main)
