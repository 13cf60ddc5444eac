#!/usr/bin/env python3
"""--top 5 on a node with 1000 idle processes samples the busy ones.

The demo node runs 6 CPU-bound processes (4 x busy_loop/1, fp_demo_quoted,
fp_demo_anon), all running fp_demo:deep/2, plus 1000 processes blocked in
fp_demo:idle_loop/1.  With --top 5 and nothing pinned, the sampled pids
must be busy ones and no idle process may appear.
"""
import os
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def main(t):
    node = h.start_node(idle=1000)
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=5, rate=20, every="1s",
                         backtrace_depth=64)
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    # until two intervals of the top 5 have samples
    rc, so, se = h.run_daemon_until(args, lambda dm: dm.wait_samples(intervals_needed=2))
    t1 = time.time()
    if not t.eq(rc, 0, "exit code 0"):
        h.log(se[-4000:])
    files = h.check_output(t, out, node, t0, t1, min_samples=10)
    samples = h.all_samples(files)
    if not samples:
        h.fail("no samples")

    def is_idle(s):
        return ("fp_demo:idle_loop/1" in s["frames"] or
                s["fields"].get("initial_call") == "fp_demo:idle_loop/1")

    def is_busy(s):
        return "fp_demo:deep/2" in s["frames"]

    idle = [s for s in samples if is_idle(s)]
    t.eq(len(idle), 0, "no idle process sampled")
    pids = {s["pid"] for s in samples}
    busy_pids = {s["pid"] for s in samples if is_busy(s)}
    h.log("  %d samples, %d pids, %d of them busy" % (len(samples), len(pids), len(busy_pids)))
    names = {s["fields"].get("registered_name") for s in samples}
    # six processes are equally busy and --top is 5: any of them may be the
    # one left out of a given interval
    t.check(names & {"fp_demo_busy", "fp_demo_quoted", "fp_demo_anon"},
            "a registered busy worker sampled (%s)" % sorted(n for n in names if n))
    t.check(len(busy_pids) >= 3, "at least 3 distinct busy workers sampled (%d)" % len(busy_pids))
    frac = sum(map(is_busy, samples)) / len(samples)
    t.check(frac >= 0.7, "most samples are in fp_demo:deep/2 (%.0f%%)" % (100 * frac))
    t.check(len(pids) <= 5 * 6, "distinct pids bounded by top x intervals (%d)" % len(pids))
    iv = h.intervals(se)
    t.check(len(iv) >= 2, "log: interval lines (%d)" % len(iv))
    sel = [int(x.get("selected", -1)) for x in iv]
    t.check(sel and all(x <= 5 for x in sel) and max(sel) == 5,
            "log: selected <= 5 per interval, 5 reached (%s)" % sel)


if __name__ == "__main__":
    h.run(main)
