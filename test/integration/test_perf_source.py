#!/usr/bin/env python3
"""--perf OSPID: the node's CPU samples in the same files.

A node started with +JPperf true runs fp_demo's busy workers
(busy_loop/1 -> deep/2 -> crunch/1). With --perf its OS pid:
- the run exits 0 and its files parse (status cpu is in the grammar);
- there are samples of status cpu, each with pid 0.0.TID of one of the
  node's threads and the thread's name as label, metrics 0;
- the JIT frames are named from the node's perf map: fp_demo:crunch/1
  is on the stack of many, called from fp_demo:deep/2, and its fun (a
  name the map quotes) is a leaf;
- the process samples are there as before, and times never go back;
- the interval lines count the cpu samples (cpu=N), and the manifest's
  options name the pid and the frequency;
- a --perf pid that is no process is a bad command line (exit 64).
Where the kernel refuses to sample another process (not root, no
CAP_PERFMON, perf_event_paranoid >= 2), the daemon exits 77 saying why.
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def perf_allowed():
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return int(f.read().strip()) <= 1
    except OSError:
        return False


def main(t):
    node = h.start_node(busy=2, idle=20, erl_args=["+JPperf", "true"])
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, rate=10, every="1s",
                                           duration="4s", compress="none",
                                           perf=node.os_pid, perf_freq=199),
                             timeout=40)
    if not perf_allowed():
        t.eq(rc, 77, "kernel refuses perf events: exit 77")
        t.check("CAP_PERFMON" in se, "... saying what it needs")
        return
    t.eq(rc, 0, "run with --perf exits 0")
    h.check_output(t, out, node)
    final, _, _ = h.output_files(out, node.name)
    samples = [s for f in final for s in h.read_samples(f)]
    cpu = [s for s in samples if s["status"] == "cpu"]
    procs = [s for s in samples if s["status"] != "cpu"]
    t.check(len(cpu) >= 50, "cpu samples: %d" % len(cpu))
    t.check(len(procs) >= 10, "process samples as well: %d" % len(procs))
    tids = set(os.listdir("/proc/%d/task" % node.os_pid))
    t.check(all(s["pid"].startswith("0.0.") and s["pid"][4:] in tids for s in cpu),
            "cpu samples carry 0.0.TID of the node's threads")
    t.check(all(s["fields"].get("label") for s in cpu), "... and the thread's name")
    t.check(all(v == (0, 0) for s in cpu for v in s["metrics"].values()),
            "... and no metrics")
    crunch = [s for s in cpu if "fp_demo:crunch/1" in s["frames"]]
    t.check(len(crunch) >= len(cpu) // 4,
            "fp_demo:crunch/1 is on the stack of %d of %d cpu samples"
            % (len(crunch), len(cpu)))
    t.check(any(s["frames"].index("fp_demo:crunch/1") + 1 < len(s["frames"]) and
                s["frames"][s["frames"].index("fp_demo:crunch/1") + 1] == "fp_demo:deep/2"
                for s in crunch), "... called from fp_demo:deep/2")
    # the JIT's map quotes this name; it is written quoted once
    t.check(any(s["frames"][0] == "fp_demo:'-crunch/1-fun-0-'/2" for s in crunch),
            "crunch's fun, a quoted name, is a leaf")
    t.check(any(s["frames"] and s["frames"][0].startswith("'beam.smp':") for s in cpu),
            "the VM's C code named from beam.smp's symbols")
    t.check("--perf: sampling" in se, "the daemon says what it samples")
    counted = sum(int(iv.get("cpu", 0)) for iv in h.intervals(se))
    t.check(0.9 * len(cpu) <= counted <= len(cpu),
            "interval lines count %d of the %d cpu samples" % (counted, len(cpu)))
    with open(os.path.join(out, node.name, "manifest.json")) as f:
        opts = json.load(f)["options"]
    t.eq((opts.get("perf_pid"), opts.get("perf_freq")), (node.os_pid, 199),
         "the manifest's options name --perf and --perf-freq")

    # a pid that was a process a moment ago and is no more
    gone = subprocess.Popen(["true"])
    gone.wait()
    rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=5,
                                           duration="2s", perf=gone.pid),
                             timeout=20)
    t.eq(rc, 64, "--perf of no process: exit 64")
    t.check("--perf %d" % gone.pid in se, "... naming it")


if __name__ == "__main__":
    h.run(main)
