#!/usr/bin/env python3
"""The cost budget and the circuit breaker, against a real node.

- a tiny --max-overhead makes the daemon lower the rate, then the top-N;
  each change is logged, noted in the output and counted in the manifest;
- --breaker-run-queue 1 on a node whose busy workers keep its run queues
  above 1 opens the circuit breaker: sampling pauses (samples that fall due
  are counted as skipped), it probes and stays open, all noted; the daemon
  still stops cleanly;
- the interval line carries the node-side time and cost, and the daemon's
  own CPU (self_cpu); the node runs on this host, which the daemon says,
  so its CPU is part of the cost: cost >= self_cpu / schedulers.
"""
import json
import os
import re
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def manifest(out, node):
    with open(os.path.join(out, h.sanitize_node(node.name), "manifest.json")) as f:
        return json.load(f)


def main(t):
    node = h.start_node(idle=200)

    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=10, rate=20, every="1s", duration="7s",
                         compress="none", max_overhead="0.001", backtrace_depth=64)
    rc, _, se = h.run_daemon(args, timeout=40)
    t.eq(rc, 0, "budget run: exit 0")
    ivs = h.intervals(se)
    t.check(ivs and all("cost" in kv and "target_ms" in kv and "self_cpu" in kv
                        for kv in ivs),
            "interval lines carry target_ms, cost and self_cpu")
    t.check(re.search(r"info: connected to \S+ \(OTP \d+, on this host\)", se),
            "a node on this host is known as one")
    sched = node.eval_int("erlang:system_info(schedulers_online)")
    pct = [(float(kv["cost"].rstrip("%")), float(kv["self_cpu"].rstrip("%")))
           for kv in ivs]
    t.check(pct and all(c >= s / sched - 0.01 for c, s in pct),
            "the daemon's CPU counts in the cost of a node on this host",
            "(cost, self_cpu) per interval, %d schedulers: %s" % (sched, pct))
    t.check(any(s > 0 for _, s in pct), "self_cpu is measured", str(pct))
    t.check(re.search(r"info: budget: cost .* over budget .*: rate 20 -> [0-9.]+/s", se),
            "over budget: the rate comes down first")
    t.check(re.search(r"info: budget: cost .* over budget .*: top \d+ -> \d+", se),
            "... then the top-N")
    files = h.check_output(t, out, node, min_samples=5)
    notes = [c for f in files for _, c in f.comments if "budget:" in c]
    t.check(len(notes) >= 2, "budget changes noted in the output (%d)" % len(notes))
    t.check(sum(e["throttle_events"] for e in manifest(out, node)["files"]) >= 2,
            "budget changes counted in the manifest")

    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=10, rate=20, every="1s", duration="8s",
                         compress="none", breaker_run_queue="1", max_overhead="0",
                         backtrace_depth=64)
    rc, _, se = h.run_daemon(args, timeout=40)
    # 65 when the breaker opened before the first sample
    t.check(rc in (0, 65), "breaker run: exit 0 (or 65: no sample at all) (%d)" % rc)
    t.check(re.search(r"warning: circuit breaker open: run queues at \d+ \(limit 1\)", se),
            "busy run queues open the breaker")
    t.check("probe" in se or "stays open" in se, "the breaker probes")
    ivs = h.intervals(se)
    open_ivs = [kv for kv in ivs if kv.get("breaker") == "open"]
    t.check(open_ivs and all(int(kv["samples"]) == 0 for kv in open_ivs[1:]),
            "no samples while open")
    due = [kv for kv in open_ivs[1:] if int(kv["selected"]) > 0]
    t.check(all(int(kv["skipped"]) > 0 for kv in due),
            "samples due while open are counted as skipped (%d intervals)" % len(due))
    final, _, _ = h.output_files(out, node.name)
    if final:
        files = h.check_output(t, out, node, min_samples=1)
        notes = [c for f in files for _, c in f.comments if "circuit breaker" in c]
        t.check(notes, "breaker noted in the output")


if __name__ == "__main__":
    h.run(main)
