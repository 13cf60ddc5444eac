#!/usr/bin/env python3
"""flame_profd restores the node's backtrace_depth system flag.

The node's backtrace_depth is set to 12 first.  flame_profd runs with
--backtrace-depth 40 (i) until --duration ends, (ii) until SIGTERM,
(iii) until SIGINT; each time, after it exits, the flag is 12 again.
While it runs the flag is expected to be 40, and samples deeper than 12
frames must appear.
Then (iv) two daemons asking 40 and 60 overlap, and leave in both orders:
the flag is the deepest asked while either runs, 12 after both; (v) a
daemon killed with SIGKILL: the node puts 12 back by itself, and no
janitor process stays registered.
(erlang:system_info/1 has no backtrace_depth item: the value is read by
swapping the flag and putting the old value straight back.)
"""
import os
import signal
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

CUSTOM = 12
REQUESTED = 40


def main(t):
    node = h.start_node(idle=200)
    old = node.set_backtrace_depth(CUSTOM)
    t.eq(node.get_backtrace_depth(), CUSTOM, "node backtrace_depth set to %d (was %d)"
         % (CUSTOM, old))

    # (i) --duration
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=6, rate=20, every="1s", duration="3s",
                         backtrace_depth=REQUESTED)
    h.log("duration run: flame_profd " + " ".join(args))
    rc, so, se = h.run_daemon(args, timeout=40)
    if not t.eq(rc, 0, "exit 0 after --duration"):
        h.log(se[-3000:])
    t.eq(node.get_backtrace_depth(), CUSTOM, "backtrace_depth restored after --duration")
    files = h.check_output(t, out, node, min_samples=1)
    depths = [len(s["frames"]) for s in h.all_samples(files)]
    t.check(depths and max(depths) > CUSTOM,
            "samples deeper than %d frames (max %d)" % (CUSTOM, max(depths or [0])))
    t.check(depths and max(depths) <= REQUESTED,
            "no sample deeper than --backtrace-depth %d" % REQUESTED)

    # (ii) SIGTERM and (iii) SIGINT
    for sig in (signal.SIGTERM, signal.SIGINT):
        name = signal.Signals(sig).name
        out = h.mkdtemp("out_")
        args = h.daemon_args(node, out, top=6, rate=20, every="500ms",
                             backtrace_depth=REQUESTED)
        h.log("%s run: flame_profd %s" % (name, " ".join(args)))
        d = h.start_daemon(args)
        d.wait_log(h.INTERVAL_RE.pattern, timeout=20)
        during = node.get_backtrace_depth()
        t.eq(during, REQUESTED, "%s run: backtrace_depth is %d while profiling"
             % (name, REQUESTED))
        time.sleep(0.5)
        rc = d.stop(sig)
        if not t.eq(rc, 0, "exit 0 after %s" % name):
            h.log(d.read_stderr()[-3000:])
        t.eq(node.get_backtrace_depth(), CUSTOM, "backtrace_depth restored after %s" % name)
        h.check_output(t, out, node, min_samples=1)

    # (iv) two daemons, both orders
    deeper = REQUESTED + 20
    for first_out in (True, False):
        order = "first in, first out" if first_out else "last in, first out"
        a = start(node, REQUESTED)
        b = start(node, deeper)
        t.eq(node.get_backtrace_depth(), deeper,
             "%s: the deepest asked (%d) while both run" % (order, deeper))
        leaving, staying = (a, b) if first_out else (b, a)
        t.eq(leaving.stop(signal.SIGTERM), 0, "%s: first daemon exits 0" % order)
        t.eq(node.get_backtrace_depth(), deeper if first_out else REQUESTED,
             "%s: the other daemon's depth stays in force" % order)
        time.sleep(0.5)
        t.check(staying.poll() is None, "%s: the other daemon still runs" % order)
        t.eq(staying.stop(signal.SIGTERM), 0, "%s: second daemon exits 0" % order)
        t.eq(node.get_backtrace_depth(), CUSTOM,
             "%s: backtrace_depth %d after both" % (order, CUSTOM))
        t.eq(node.eval_str("atom_to_list(whereis(flame_profd_janitor))"), "undefined",
             "%s: no janitor left" % order)

    # (v) SIGKILL: the node restores the flag itself
    d = start(node, REQUESTED)
    t.eq(node.get_backtrace_depth(), REQUESTED, "SIGKILL run: %d while profiling"
         % REQUESTED)
    d.stop(signal.SIGKILL)
    t.eq(node.wait_int("D = erlang:system_flag(backtrace_depth, 8), "
                       "erlang:system_flag(backtrace_depth, D), D",
                       CUSTOM, timeout=10),
         CUSTOM, "backtrace_depth back after SIGKILL")
    t.eq(node.eval_str("atom_to_list(whereis(flame_profd_janitor))"), "undefined",
         "no janitor left after SIGKILL")


def start(node, depth):
    d = h.start_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=6, rate=20,
                                     every="500ms", backtrace_depth=depth))
    d.wait_log(h.INTERVAL_RE.pattern, timeout=20)
    return d


if __name__ == "__main__":
    h.run(main)
