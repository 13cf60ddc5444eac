#!/usr/bin/env python3
"""--scan-max holds on a node of half a million processes.

The demo node runs a busy worker (and the demo's others) (started first, so in the first
window) and FP_SCAN_IDLE (500 000) idle processes, under
+P 2000000. The daemon runs at its defaults (--scan-max 50000, --every 5s):

- samples come within 15 s of its start;
- the first selection is a sweep of the whole table; no later selection
  reads more than scan_max pids, and none answers with more than about
  scan_max pids' worth of bytes (the debug `selection:` lines and the
  interval lines' scanned= / scan_bytes=);
- no request times out (a scan that did would not be sent again: say so);
- the daemon's peak RSS stays bounded (VmHWM before it exits);
- after it exits, the node's memory (after a GC of every process) is back
  to what it was before, ±20 MB, and rex holds no more than before.

The node's OTP release is the first erl on PATH's: OTP 25-27 cut the
window out of erlang:processes() on the node, OTP 28+ walk the table with
erlang:processes_iterator/0 (the daemon says which).
"""
import os
import re
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

N = int(os.environ.get("FP_SCAN_IDLE", "500000"))
SCAN_MAX = 50000
# a pid (NEW_PID_EXT with the node's name) and {reductions, N}: ~60 bytes
BYTES_PER_PID = 100
MB = 1 << 20

SEL_RE = re.compile(r"selection: (\d+) processes, (\d+) read( \((?:all|sweep)\))?, \d+ alive, "
                    r"-?\d+ picked, reply (\d+) bytes")


def vm_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def main(t):
    node = h.Node(idle=N, busy=1, erl_args=["+P", "2000000"]).start(timeout=120)
    count = node.eval_int("erlang:system_info(process_count)")
    h.log("  node: %d processes, OTP %s" % (count, node.eval("erlang:system_info(otp_release)")))
    t.check(count > N, "the node has more than %d processes (%d)" % (N, count))
    base_total, base_rex = node.memory_after_gc()

    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, verbose=True, compress="none")
    t0 = time.monotonic()
    d = h.start_daemon(args)
    d.wait_samples(timeout=15)
    first = time.monotonic() - t0
    h.log("  first samples %.1f s after the start" % first)
    t.check(first <= 15, "samples within 15 s (%.1f s)" % first)
    # two more selections, then the peak RSS and a clean stop
    d.wait_log(r"debug: selection: ", timeout=20, count=3)
    hwm = vm_hwm_kb(d.pid)
    rc = d.stop()
    se = d.read_stderr()
    t.eq(rc, 0, "daemon exit code 0")

    sels = [(int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)))
            for m in map(SEL_RE.search, se.splitlines()) if m]
    h.log("  selections (processes, read, kind, bytes): %s" % sels[:6])
    t.check(len(sels) >= 3, "at least 3 selections (%d)" % len(sels))
    t.check(sels and sels[0][2] == " (sweep)", "the first selection is a sweep")
    t.check(all(r <= SCAN_MAX and kind is None for _, r, kind, _ in sels[1:]),
            "no later selection read more than --scan-max pids")
    t.check(all(b <= SCAN_MAX * BYTES_PER_PID for _, _, _, b in sels),
            "no reply bigger than about --scan-max pids (max %d bytes)"
            % max([b for _, _, _, b in sels] or [0]))
    ivs = h.intervals(se)
    t.check(ivs and all(int(kv.get("scan_bytes", -1)) >= 0 for kv in ivs),
            "interval lines carry scan_bytes")
    t.check(not re.search(r"timed out", se), "no request timed out",
            "\n".join(l for l in se.splitlines() if "timed out" in l))
    way = ("erlang:processes_iterator/0" if int(node.eval("erlang:function_exported("
           "erlang, processes_next, 1)") == "true") else "lists:sublist")
    t.check(("selection scan: " + way) in se, "the scan walks the table by %s" % way)
    h.log("  daemon VmHWM %.1f MiB" % (hwm / 1024))
    t.check(0 < hwm < 64 * 1024, "daemon peak RSS under 64 MiB (%d kB)" % hwm)

    total, rex = node.memory_after_gc()
    h.log("  node memory %.1f -> %.1f MiB, rex %d -> %d bytes"
          % (base_total / MB, total / MB, base_rex, rex))
    t.check(abs(total - base_total) <= 20 * MB,
            "node memory back to its baseline ±20 MB (%+.1f MB)"
            % ((total - base_total) / MB))
    t.check(rex <= base_rex + 64 * 1024, "rex holds no more than before (%d -> %d)"
            % (base_rex, rex))
    files = h.check_output(t, out, node, min_samples=10)
    busy = [s for f in files for s in f.samples if "fp_demo:deep/2" in s["frames"]]
    t.check(busy, "the busy workers are sampled (%d samples)" % len(busy))


if __name__ == "__main__":
    h.run(main)
