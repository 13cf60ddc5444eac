#!/usr/bin/env python3
"""flame_profd survives the node crashing and reconnects when it returns.

Start a demo node and flame_profd (no --duration); once it samples, kill -9
the node.  flame_profd must log the lost connection and finalise the
current file; a new node with the same name and cookie is started and
flame_profd must log that it reconnected and write new samples to a later
file.  SIGTERM -> exit 0, all files final, the earlier file unchanged.
"""
import hashlib
import os
import re
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(t):
    n1 = h.start_node(idle=200)
    out = h.mkdtemp("out_")
    args = h.daemon_args(n1, out, top=5, rate=20, every="1s", rotate="1m", timeout="2s",
                         backtrace_depth=64)
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    d = h.start_daemon(args)
    d.wait_log("connected to " + re.escape(n1.name), timeout=15)
    d.wait_samples(timeout=15)
    t.check(True, "sampling the first node")

    t_kill = time.time()
    n1.kill()
    h.log("killed node %s (os pid %d)" % (n1.name, n1.os_pid))
    lost = d.wait_log(r"warning: lost connection to " + re.escape(n1.name), timeout=15)
    t.check(lost, "log: lost connection (%s)" % lost[0][:120])
    # the file that was open at the disconnect is finalised
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        final, partial, _ = h.output_files(out, n1.name)
        if final and not partial:
            break
        time.sleep(0.1)
    t.check(len(final) >= 1 and not partial, "file finalised at disconnect",
            "final=%s partial=%s" % (final, partial))
    first = {p: digest(p) for p in final}
    t.check(n1.wait_unregistered(), "crashed node gone from epmd")

    time.sleep(1.0)   # let the daemon try (and fail) to reconnect at least once
    t.check(d.poll() is None, "flame_profd still running while the node is down")
    n2 = h.Node(name=n1.sname, cookie=n1.cookie, idle=200).start()
    t_restart = time.time()
    h.log("restarted node %s (os pid %d)" % (n2.name, n2.os_pid))
    re_ = d.wait_log(r"info: reconnected", timeout=25)
    t.check(re_, "log: reconnected (%s)" % re_[0][:120])
    d.wait_samples(after=r"info: reconnected", timeout=15, intervals_needed=2)
    rc = d.stop()
    t1 = time.time()
    if not t.eq(rc, 0, "exit 0 after SIGTERM"):
        h.log(d.read_stderr()[-3000:])
    t.eq(h.error_lines(d.read_stderr()), [], "no error lines")

    files = h.check_output(t, out, n1, t0, t1, min_samples=10)
    t.check(len(files) >= 2, "at least two files (%d)" % len(files))
    for p, dg in first.items():
        t.check(os.path.exists(p) and digest(p) == dg,
                "earlier file %s unchanged" % os.path.basename(p))
    before = [f for f in files if f.path in first]
    after = [f for f in files if f.path not in first]
    t.check(before and all(s["ts"] <= t_kill + 0.5 for f in before for s in f.samples),
            "earlier file(s) hold only samples from before the crash")
    late = [s for f in after for s in f.samples if s["ts"] >= t_restart - 0.5]
    t.check(len(late) >= 5, "new samples after the restart in a later file (%d)" % len(late))
    t.check(any("fp_demo:deep/2" in s["frames"] for s in late),
            "new samples show the restarted node's busy workers")
    if after:
        t.check(min(h.file_stamp(f.path) for f in after) >= t_kill - 1,
                "later file named after the crash")


if __name__ == "__main__":
    h.run(main)
