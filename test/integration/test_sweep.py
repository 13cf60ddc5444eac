#!/usr/bin/env python3
"""Busy processes started after the idle ones are picked at the first ranking.

The demo node runs FP_SWEEP_IDLE (200 000) idle processes and, started
after them (so last in the process table), four busy workers
(fp_demo:busy_loop/1). The daemon runs with --scan-max 20000 and its
other defaults but --timeout 20s (the sweep stops after three quarters
of it: on a loaded 2-core machine an OTP 29 node, whose walk is
interpreted, can take over the default 3.75 s for 200 000 processes): a
window alone would
reach the busy workers only after 2 x 200 000 / 20 000 selections. The
first selection is a sweep of the whole table:

- the first `selection:` debug line is the sweep: it reads every process
  and replies with at most --scan-max pids (about 100 bytes each);
- the second selection (the first ranking) picks the four busy workers,
  and the later ones read no more than --scan-max pids;
- the output holds samples of each of the four workers;
- no request times out, and after the daemon exits the node's memory
  (after a GC of every process) is back to what it was, +-20 MB, and rex
  holds no more than before.

Then, on a node of 3000 idle processes with --scan-max 1000 --every 500ms,
the windows reach the end of the table and start again (on OTP 28+ the
iterator says `none` there) with no failed scan. On the same node, with
--scan-max 100 --every 1s --sweep-every 2s, a worker started after the
first ranking (last in the table, 60 windows away) is swept again,
ranked and sampled while the windows are still far from it.

The node's OTP release is the first erl on PATH's: OTP 25-27 sweep
erlang:processes() in chunks, OTP 28+ walk the table with
erlang:processes_iterator/0.
"""
import os
import re
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

N = int(os.environ.get("FP_SWEEP_IDLE", "200000"))
SCAN_MAX = 20000
BUSY = 4
BYTES_PER_PID = 100
MB = 1 << 20

SEL_RE = re.compile(r"selection: (\d+) processes, (\d+) read( \((?:all|sweep)\))?, "
                    r"\d+ alive, (-?\d+) picked, reply (\d+) bytes")


def main(t):
    node = h.Node(idle=N, busy=0, erl_args=["+P", "2000000"],
                  opts={"quoted": False, "anon": False, "clients": 0,
                        "sink": False, "bin": False}).start(timeout=120)
    # the busy workers, started after the idle processes
    txt = node.eval("W = #{c => persistent_term:get({fp_demo, counters}), "
                    "depth => 20, work => 200}, "
                    "[begin P = spawn(fp_demo, busy_loop, [W]), "
                    "Ps = erlang:processes(), "
                    "{element(2, lists:keyfind(P, 1, lists:zip(Ps, lists:seq(1, length(Ps))))), "
                    "pid_to_list(P)} end || _ <- lists:seq(1, %d)]" % BUSY, timeout=60)
    places = [int(x) for x in re.findall(r"\{(\d+),", txt)]
    busy = set("0.%s.%s" % m for m in re.findall(r"<0\.(\d+)\.(\d+)>", txt))
    count = node.eval_int("erlang:system_info(process_count)")
    h.log("  node: %d processes, OTP %s; busy workers %s at %s in the table"
          % (count, node.eval("erlang:system_info(otp_release)"), sorted(busy), places))
    t.require(len(busy) == BUSY, "%d busy workers started (%s)" % (BUSY, txt))
    t.check(all(p > N for p in places),
            "the busy workers come after the idle processes in the table (%s)" % places)
    base_total, base_rex = node.memory_after_gc()

    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, verbose=True, compress="none",
                         scan_max=SCAN_MAX, timeout="20s")
    d = h.start_daemon(args)
    d.wait_log(r"debug: selection: ", timeout=120, count=3)
    rc = d.stop()
    se = d.read_stderr()
    t.eq(rc, 0, "daemon exit code 0")

    sels = [(int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)), int(m.group(5)))
            for m in map(SEL_RE.search, se.splitlines()) if m]
    h.log("  selections (processes, read, kind, picked, bytes): %s" % sels[:5])
    t.require(len(sels) >= 3, "at least 3 selections (%d)" % len(sels))
    procs, read, kind, picked, nbytes = sels[0]
    t.check(kind == " (sweep)", "the first selection is a sweep (%r)" % kind)
    t.check(read >= count - 100, "the sweep read every process (%d of %d)" % (read, count))
    t.check(nbytes <= SCAN_MAX * BYTES_PER_PID,
            "the sweep's reply is bounded by --scan-max (%d bytes)" % nbytes)
    t.check(sels[1][3] >= BUSY, "the first ranking picks the busy workers (%d picked)"
            % sels[1][3])
    t.check(all(r <= SCAN_MAX and k is None for _, r, k, _, _ in sels[1:]),
            "later selections read no more than --scan-max pids")
    t.check(not re.search(r"timed out", se), "no request timed out",
            "\n".join(l for l in se.splitlines() if "timed out" in l))
    way = ("erlang:processes_iterator/0" if node.eval("erlang:function_exported("
           "erlang, processes_next, 1)") == "true" else "lists:sublist")
    t.check(("selection scan: " + way) in se, "the scan walks the table by %s" % way)

    files = h.check_output(t, out, node, min_samples=BUSY)
    sampled = {s["pid"] for f in files for s in f.samples
               if "fp_demo:deep/2" in s["frames"]}
    t.check(busy <= sampled, "each busy worker is sampled (%s of %s)"
            % (sorted(busy & sampled), sorted(busy)))

    total, rex = node.memory_after_gc()
    h.log("  node memory %.1f -> %.1f MiB, rex %d -> %d bytes"
          % (base_total / MB, total / MB, base_rex, rex))
    t.check(abs(total - base_total) <= 20 * MB,
            "node memory back to its baseline +-20 MB (%+.1f MB)"
            % ((total - base_total) / MB))
    t.check(rex <= base_rex + 64 * 1024, "rex holds no more than before (%d -> %d)"
            % (base_rex, rex))
    node.stop()

    small = h.Node(idle=3000, busy=0,
                   opts={"quoted": False, "anon": False, "clients": 0,
                         "sink": False, "bin": False}).start(timeout=60)
    n = small.eval_int("erlang:system_info(process_count)")
    d = h.start_daemon(h.daemon_args(small, h.mkdtemp("out_"), verbose=True,
                                     scan_max=1000, every="500ms"))
    # the sweep, then windows moving by about 500: past the end and back
    d.wait_log(r"debug: selection: ", timeout=60, count=2 + 2 * n // 1000 + 4)
    rc = d.stop()
    se = d.read_stderr()
    t.eq(rc, 0, "daemon exit code 0 (windows)")
    t.check(not re.search(r"unexpected reply to the selection scan|rpc failed", se),
            "no failed scan where the windows meet the end of the table",
            "\n".join(l for l in se.splitlines() if "scan" in l or "rpc failed" in l)[-3000:])

    # A worker that turns busy after the first ranking, at the end of the
    # table: the windows (100 pids, moving by 50 a second) would need
    # 2 x n / 100 selections to reach it; a sweep again every 2 s finds it.
    out3 = h.mkdtemp("out_")
    d = h.start_daemon(h.daemon_args(small, out3, verbose=True, compress="none",
                                     scan_max=100, every="1s", sweep_every="2s"))
    d.wait_log(r"debug: selection: ", timeout=60, count=2)
    small.eval("spawn(fp_demo, busy_loop, [#{c => persistent_term:get({fp_demo, counters}), "
               "depth => 20, work => 200}])")
    late = small.eval("[pid_to_list(P) || P <- erlang:processes(), "
                      "erlang:process_info(P, initial_call) =:= "
                      "{initial_call, {fp_demo, busy_loop, 1}}]")
    place = small.eval_int("P = hd([P || P <- erlang:processes(), "
                           "erlang:process_info(P, initial_call) =:= "
                           "{initial_call, {fp_demo, busy_loop, 1}}]), "
                           "length(lists:takewhile(fun(Q) -> Q =/= P end, erlang:processes()))")
    before = len(SEL_RE.findall(d.read_stderr()))

    # The first sweep logged after the worker started may have been sent
    # before it: the second was sent after the first's reply.
    def swept_and_ranked():
        kinds = [m.group(3) for m in SEL_RE.finditer(d.read_stderr())][before:]
        at = [i for i, k in enumerate(kinds) if k == " (sweep)"]
        return len(at) >= 2 and len(kinds) - at[1] >= 3

    deadline = time.monotonic() + 60
    while not swept_and_ranked() and time.monotonic() < deadline and d.poll() is None:
        time.sleep(0.2)
    found = swept_and_ranked()
    se = d.read_stderr()
    rc = d.stop()
    sels = [m for m in map(SEL_RE.search, se.splitlines()) if m]
    later = sels[before:]
    windows = sum(1 for m in later if m.group(3) is None)
    h.log("  busy worker %s at %d of %d; selections after it: %s"
          % (late, place, n, [(m.group(2), m.group(3), m.group(4)) for m in later]))
    t.eq(rc, 0, "daemon exit code 0 (sweep again)")
    t.check(place > n - 20, "the late worker is at the end of the table (%d)" % place)
    t.check(found, "the node is swept again after the worker starts, and ranked twice")
    t.check(windows * 50 < place - 100,
            "the windows since the worker started could not reach it "
            "(%d windows since it started)" % windows)
    files = h.check_output(t, out3, small, min_samples=1)
    lpids = set("0.%s.%s" % m for m in re.findall(r"<0\.(\d+)\.(\d+)>", late))
    sampled = {s["pid"] for f in files for s in f.samples}
    t.check(lpids and lpids <= sampled, "the late worker is sampled (%s)" % sorted(lpids))


if __name__ == "__main__":
    h.run(main)
