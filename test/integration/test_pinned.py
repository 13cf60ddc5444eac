#!/usr/bin/env python3
"""--name / --pid without --top samples exactly the pinned processes.

Pins fp_demo_sink by name and fp_demo_server by pid ('<0.X.0>'); no
other pid may appear.  Repeated with --top 0 (no top-N) and with the pid
given without angle brackets (only reported: the contract does not say
whether that form is accepted).
"""
import os
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def run(t, node, label, extra):
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, rate=20, every="1s", **extra)
    h.log("%s: flame_profd %s" % (label, " ".join(args)))
    t0 = time.time()
    # until a second's worth of samples of the two
    rc, so, se = h.run_daemon_until(args, lambda dm: dm.wait_sample_count(20))
    t1 = time.time()
    if not t.eq(rc, 0, "%s: exit code 0" % label):
        h.log(se[-4000:])
        return None, se
    files = h.check_output(t, out, node, t0, t1, min_samples=4)
    return h.all_samples(files), se


def main(t):
    node = h.start_node(idle=1000)
    srv = node.pid_of("fp_demo_server")
    sink = node.pid_of("fp_demo_sink")
    h.log("fp_demo_server=%s fp_demo_sink=%s" % (srv, sink))
    want = {srv.strip("<>"), sink.strip("<>")}
    for label, extra in [("pinned", {"name": ["fp_demo_sink"], "pid": [srv]}),
                         ("pinned, --top 0", {"name": ["fp_demo_sink"], "pid": [srv], "top": 0})]:
        samples, se = run(t, node, label, extra)
        if samples is None:
            continue
        got = {s["pid"] for s in samples}
        t.eq(got, want, "%s: sampled pids are exactly the pinned ones" % label)
        regs = {s["pid"]: s["fields"].get("registered_name") for s in samples}
        t.eq(regs.get(sink.strip("<>")), "fp_demo_sink", "%s: sink registered_name" % label)
        t.eq(regs.get(srv.strip("<>")), "fp_demo_server", "%s: server registered_name" % label)
        mq = [s["metrics"]["message_queue_len"][0] for s in samples
              if s["pid"] == sink.strip("<>")]
        t.check(mq and max(mq) >= 1000, "%s: sink mailbox large (%s)" % (label, mq[:5]))
        pins = [int(x.get("pinned", -1)) for x in h.intervals(se)]
        t.check(pins and max(pins) == 2 and set(pins) <= {0, 2},
                "%s: log says pinned=2" % label, str(pins))
        sel = [int(x.get("selected", -1)) for x in h.intervals(se)]
        t.check(sel and max(sel) <= 2, "%s: log says selected <= 2 (no top-N)" % label, str(sel))
    # informational: bare pid form
    out = h.mkdtemp("out_")
    rc, so, se = h.run_daemon(h.daemon_args(node, out, pid=[srv.strip("<>")], duration="1s",
                                            every="500ms"), timeout=30)
    h.log("  info: --pid %s (no brackets) -> exit %d %s"
          % (srv.strip("<>"), rc, "; ".join(h.error_lines(se))))


if __name__ == "__main__":
    h.run(main)
