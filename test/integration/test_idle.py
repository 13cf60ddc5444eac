#!/usr/bin/env python3
"""Processes that have not run since their last sample are probed, not
signalled, and their samples stay right.

Two pinned processes, sampled 50 times a second for 5 s, both request
paths, with and without --no-idle-reuse:

- fp_demo_idle, blocked in receive the whole time. With reuse its
  samples come from probes, which read it without a signal: its
  reductions (one per signal it answers) hardly move, against one per
  sample without reuse. Every sample still has its stack and memory.
- fp_demo_alt, which moves between alt_a/1 and alt_b/1 every 37 ms, a
  wake-up costing it a single reduction: about half the probes find it
  where it was, the others find it moved and ask it in full at once. Its
  samples must show both functions about equally; a probe taking a moved
  process for an idle one would keep showing the first one.
"""
import os
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def reductions(node, reg):
    return node.eval_int("{reductions, R} = erlang:process_info(whereis(%s), "
                         "reductions), R" % reg)


def main(t):
    node = h.start_node(idle=20, busy=0, opts={
        "clients": 0, "sink": False, "bin": False, "quoted": False,
        "anon": False, "alt": True, "alt_ms": 37})
    idle_pid = node.pid_of("fp_demo_idle")
    alt_pid = node.pid_of("fp_demo_alt")
    for request in ("rex", "eval", "helper"):
        for reuse in (True, False):
            what = "%s, %s" % (request, "reuse" if reuse else "--no-idle-reuse")
            out = h.mkdtemp("out_")
            args = h.daemon_args(node, out, top=0, pid=[idle_pid, alt_pid],
                                 rate=50, every="1s", duration="5s",
                                 compress="none", max_overhead=0,
                                 no_idle_reuse=not reuse,
                                 request=None if request == "rex" else request)
            r0 = reductions(node, "fp_demo_idle")
            h.log("running: flame_profd " + " ".join(args))
            rc, _, se = h.run_daemon(args, timeout=40)
            r1 = reductions(node, "fp_demo_idle")
            if not t.eq(rc, 0, "%s: exit code 0" % what):
                h.log(se[-4000:])
            files = h.check_output(t, out, node, min_samples=100)
            samples = h.all_samples(files)
            idle = [s for s in samples if s["pid"] == idle_pid.strip("<>")]
            alt = [s for s in samples if s["pid"] == alt_pid.strip("<>")]
            lines = h.intervals(se)
            reused = sum(int(iv.get("reused", 0)) for iv in lines)
            probes = sum(int(iv.get("probes", 0)) for iv in lines)
            h.log("  %s: %d idle samples, reductions +%d; %d alt samples; "
                  "probes %d, reused %d" % (what, len(idle), r1 - r0, len(alt),
                                            probes, reused))

            t.check(len(idle) >= 150, "%s: idle process sampled (%d)" % (what, len(idle)))
            t.check(all("fp_demo:idle_loop/1" in s["frames"] for s in idle),
                    "%s: every idle sample has its stack" % what)
            t.check(all(s["metrics"]["memory"][0] > 0 and
                        s["metrics"]["total_heap_size"][0] > 0 for s in idle),
                    "%s: every idle sample has its memory figures" % what)
            t.check(all(s["status"] == "waiting" for s in idle),
                    "%s: the idle process is waiting" % what)
            if reuse:
                t.check(r1 - r0 <= len(idle) / 10,
                        "%s: the idle process was hardly signalled "
                        "(reductions +%d for %d samples)" % (what, r1 - r0, len(idle)))
                t.check(reused >= len(idle) * 0.8,
                        "%s: probes gave samples (reused=%d)" % (what, reused))
            else:
                t.check(r1 - r0 >= len(idle) * 0.9,
                        "%s: a signal per sample (reductions +%d for %d samples)"
                        % (what, r1 - r0, len(idle)))
                t.eq(probes, 0, "%s: no probes" % what)

            a = sum("fp_demo:alt_a/1" in s["frames"] for s in alt)
            b = sum("fp_demo:alt_b/1" in s["frames"] for s in alt)
            t.check(len(alt) >= 150, "%s: alternating process sampled (%d)" % (what, len(alt)))
            t.eq(a + b, len(alt), "%s: every alternating sample is in alt_a or alt_b" % what)
            t.check(min(a, b) >= 0.3 * len(alt),
                    "%s: both functions of the alternating process show "
                    "(alt_a %d, alt_b %d)" % (what, a, b))


if __name__ == "__main__":
    h.run(main)
