#!/usr/bin/env python3
"""Crash safety and lifecycle of the output directory.

- SIGKILL mid-run: finished files stay intact; the hidden partial file is
  readable up to its last complete segment; the next start finishes it
  (whole samples only, marked recovered in the manifest) or sets it aside;
- a second daemon on the same output directory exits 75 with a clear
  message while the first runs;
- SIGTERM finishes the current file and exits 0 promptly (time printed);
- a second SIGINT exits at once.
"""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def digest(p):
    with open(p, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# A pinned process is sampled right after the connect, with no selection
# to wait for: the file opens at once.
PINNED = ["fp_demo_sink"]


def main(t):
    node = h.start_node(idle=200)
    for comp in ("zstd", "gzip", "none"):
        out = h.mkdtemp("out_")
        d = os.path.join(out, h.sanitize_node(node.name))
        args = h.daemon_args(node, out, top=10, name=PINNED, rate=50, every="1s",
                             rotate="2s", compress=comp, backtrace_depth=64)
        dm = h.start_daemon(args)
        dm.wait_log(r"info: finished ", timeout=20)
        time.sleep(1.6)      # well into the next file, past a segment
        final, partial, _ = h.output_files(out, node.name)
        sums = {p: digest(p) for p in final}
        dm.send_signal(signal.SIGKILL)
        dm.wait()
        final, partial, _ = h.output_files(out, node.name)
        t.check(len(partial) == 1, "%s: SIGKILL leaves one partial file" % comp)
        t.check(all(digest(p) == s for p, s in sums.items()),
                "%s: finished files intact after SIGKILL" % comp)
        if partial:
            raw = open(partial[0], "rb").read()
            if comp == "zstd":
                r = subprocess.run(["zstd", "-dc"], input=raw, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
                text = r.stdout
            elif comp == "gzip":
                r = subprocess.run(["gzip", "-dc"], input=raw, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL)
                text = r.stdout
            else:
                text = raw
            t.check(b": cpu-clock:" in text and text.endswith(b"\n"),
                    "%s: the partial file reads up to a complete segment (%d bytes)"
                    % (comp, len(text)))

        # restart: the leftover is finished (or set aside), then a new run
        # until it writes samples
        args2 = h.daemon_args(node, out, top=5, name=PINNED, rate=20, every="1s",
                              compress=comp)
        rc, _, se = h.run_daemon_until(args2, lambda dm: dm.wait_samples(timeout=30))
        t.eq(rc, 0, "%s: restart exits 0" % comp)
        t.check("recovered " in se, "%s: restart logs the recovery" % comp)
        files = h.check_output(t, out, node, min_samples=10)
        with open(os.path.join(d, "manifest.json")) as f:
            m = json.load(f)
        rec = [e for e in m["files"] if e["recovered"]]
        t.eq(len(rec), 1, "%s: manifest marks one recovered file" % comp)
        by = {os.path.basename(f.path): f for f in files}
        if rec and rec[0]["name"] in by:
            t.eq(rec[0]["samples"], len(by[rec[0]["name"]].samples),
                 "%s: recovered file holds whole samples only" % comp)

    # lock contention
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=5, rate=10, every="1s", compress="none")
    first = h.start_daemon(args)
    first.wait_log(r"info: connected", timeout=15)
    rc, _, se = h.run_daemon(args, timeout=20)
    t.eq(rc, 75, "second daemon on the same directory exits 75")
    t.check("another flame_profd" in se, "... saying why: %s" % se.strip()[:160])
    t.check(first.poll() is None, "the first daemon keeps running")

    # SIGTERM: prompt, clean, exit 0
    first.wait_samples(timeout=15)
    t0 = time.monotonic()
    rc = first.stop(signal.SIGTERM)
    dt = time.monotonic() - t0
    h.log("SIGTERM to exit: %.3f s" % dt)
    t.eq(rc, 0, "SIGTERM: exit 0")
    t.check(dt < 2.0, "SIGTERM: exit within 2 s (%.3f s)" % dt)
    final, partial, _ = h.output_files(out, node.name)
    t.check(final and not partial, "SIGTERM: current file finished")

    # a second SIGINT exits at once, even while stopping is held up:
    # SIGSTOP the node so the sample in flight never returns
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=5, rate=10, every="1s", compress="none",
                         timeout="30s")
    dm = h.start_daemon(args)
    dm.wait_samples(timeout=15)
    os.kill(node.os_pid, signal.SIGSTOP)
    try:
        time.sleep(0.3)
        dm.send_signal(signal.SIGINT)
        time.sleep(0.3)
        t.check(dm.poll() is None, "first SIGINT waits for the sample in flight")
        t0 = time.monotonic()
        dm.send_signal(signal.SIGINT)
        rc = dm.wait(timeout=5)
        t.check(time.monotonic() - t0 < 1.0, "second SIGINT exits at once")
    finally:
        os.kill(node.os_pid, signal.SIGCONT)


if __name__ == "__main__":
    h.run(main)
