#!/usr/bin/env python3
"""Output that operations can live with: rotation, compression, retention,
manifest, and what a concurrent reader sees.

- --rotate-size cuts files by size; SIGUSR1 starts a new file at once;
- --compress zstd and gzip files pass `zstd -t` / `gzip -t` and parse;
- a reader polling the directory never sees a final file that is not
  complete (it decompresses and parses every final file it finds);
- retention by --keep-files, --keep-bytes and --keep-age, combined,
  deletes only files the daemon finished (files planted with names like
  ours and old dates are not its own and stay);
- manifest.json lists exactly the finished files with right counts.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def tool_ok(cmd):
    return subprocess.run(cmd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


class Reader(threading.Thread):
    """Polls a directory; every final file it sees must be whole."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d, self.stop, self.seen, self.bad = d, False, set(), []

    def run(self):
        while not self.stop:
            try:
                names = os.listdir(self.d)
            except FileNotFoundError:
                names = []
            for n in names:
                if n in self.seen or not h.FINAL_RE.match(n):
                    continue
                p = os.path.join(self.d, n)
                try:
                    h.parse_perf(p)
                    self.seen.add(n)
                except FileNotFoundError:
                    pass            # deleted by retention meanwhile
                except Exception as e:  # noqa: BLE001
                    self.bad.append("%s: %s" % (n, e))
                    self.seen.add(n)
            time.sleep(0.005)


def manifest_checks(t, out, node, files):
    d = os.path.join(out, h.sanitize_node(node.name))
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    t.eq(m["node"], node.name, "manifest: node")
    t.check(m["otp_release"].isdigit(), "manifest: otp_release %r" % m["otp_release"])
    t.check(isinstance(m["options"], dict) and "compress" in m["options"],
            "manifest: options")
    names = sorted(e["name"] for e in m["files"])
    t.eq(names, sorted(os.path.basename(f.path) for f in files),
         "manifest lists exactly the finished files")
    by = {os.path.basename(f.path): f for f in files}
    for e in m["files"]:
        f = by.get(e["name"])
        if not f:
            continue
        t.eq(e["samples"], len(f.samples), "manifest: samples of %s" % e["name"])
        t.eq(e["bytes"], os.path.getsize(f.path), "manifest: bytes of %s" % e["name"])
        ts = [s["ts"] for s in f.samples]
        t.check(abs(e["first_sample_us"] / 1e6 - min(ts)) < 1e-5 and
                abs(e["last_sample_us"] / 1e6 - max(ts)) < 1e-5,
                "manifest: time range of %s" % e["name"])


def main(t):
    node = h.start_node(idle=200)

    # 1. zstd, size rotation, SIGUSR1, concurrent reader, manifest
    out = h.mkdtemp("out_")
    d = os.path.join(out, h.sanitize_node(node.name))
    args = h.daemon_args(node, out, top=10, rate=50, every="1s", rotate="1h",
                         rotate_size="8K", compress="zstd", backtrace_depth=64)
    reader = Reader(d)
    reader.start()
    dm = h.start_daemon(args)
    dm.wait_samples(timeout=15, intervals_needed=3)
    before = len(h.output_files(out, node.name)[0])
    dm.send_signal(signal.SIGUSR1)
    dm.wait_log(r"SIGUSR1: rotating", timeout=5)
    time.sleep(1.5)
    t.eq(dm.stop(), 0, "zstd run: exit 0 after SIGTERM")
    reader.stop = True
    reader.join()
    t.eq(reader.bad, [], "a concurrent reader never saw an incomplete final file")
    files = h.check_output(t, out, node, min_samples=50)
    t.check(len(files) >= 3, "--rotate-size 8K made several files (%d)" % len(files))
    t.check(before >= 1, "files existed before SIGUSR1 (%d)" % before)
    sizes = [os.path.getsize(f.path) for f in files]
    # a file is cut at the first whole segment past the size (about a second)
    t.check(max(sizes) < 8 * 1024 + 64 * 1024, "file sizes near --rotate-size: %r" % sizes)
    t.check(all(f.path.endswith(".perf.zst") for f in files), "zstd files end in .perf.zst")
    t.check(all(tool_ok(["zstd", "-tq", f.path]) for f in files), "zstd -t passes on every file")
    manifest_checks(t, out, node, files)

    # 2. gzip round trip
    out2 = h.mkdtemp("out_")
    args = h.daemon_args(node, out2, top=5, rate=20, every="1s",
                         compress="gzip", compress_level=9)
    rc, _, se = h.run_daemon_until(args, lambda dm: dm.wait_sample_count(10))
    t.eq(rc, 0, "gzip run: exit 0")
    files = h.check_output(t, out2, node, min_samples=10)
    t.check(all(f.path.endswith(".perf.gz") for f in files), "gzip files end in .perf.gz")
    t.check(all(tool_ok(["gzip", "-t", f.path]) for f in files), "gzip -t passes on every file")

    # 3. retention: planted old files, foreign files, all three rules
    out3 = h.mkdtemp("out_")
    d3 = os.path.join(out3, h.sanitize_node(node.name))
    os.makedirs(d3)
    s = h.sanitize_node(node.name)
    old = ["%s.20200101T000000.000Z.perf.zst" % s, "%s.20200101T000100.000Z.perf" % s]
    foreign = ["notes.txt", "%s.20200101T000000.000Z.perf.bak" % s,
               "other@node.20200101T000000.000Z.perf", "keep-me.perf.zst"]
    for n in old + foreign:
        with open(os.path.join(d3, n), "wb") as f:
            f.write(b"x" * 100)
        os.utime(os.path.join(d3, n), (time.time() - 86400 * 30,) * 2)
    # until the first deletion: --keep-files 3 has had 4 files
    args = h.daemon_args(node, out3, top=10, rate=50, every="1s", rotate="1s",
                         compress="none", keep_files=3,
                         keep_bytes="10M", keep_age="1d")
    rc, _, se = h.run_daemon_until(args, lambda dm: dm.wait_log(r"retention: deleted",
                                                                timeout=30))
    t.eq(rc, 0, "retention run: exit 0")
    left = sorted(os.listdir(d3))
    t.check(all(n in left for n in foreign), "foreign files untouched: %r" % foreign)
    # named like the daemon's, dated long ago, but never written by it
    t.check(all(n in left for n in old),
            "files named like ours that the daemon did not write: untouched")
    finals = [n for n in left if h.FINAL_RE.match(n) and n.startswith(s + ".") and n not in old]
    t.check(len(finals) == 3, "--keep-files 3 keeps 3 files (%r)" % finals)
    t.check("retention: deleted" in se, "retention is logged")

    # --keep-age: the daemon's own files past the age go (by the time of
    # their last sample), the newest stays
    out5 = h.mkdtemp("out_")
    # until a file is deleted and 4 are finished
    args = h.daemon_args(node, out5, top=5, rate=20, every="1s", rotate="1s",
                         compress="none", keep_age="2s")

    def aged(dm):
        dm.wait_log(r"retention: deleted", timeout=30)
        dm.wait_log(r"info: finished ", timeout=30, count=4)

    rc, _, se = h.run_daemon_until(args, aged)
    t.eq(rc, 0, "keep-age run: exit 0")
    final5, _, _ = h.output_files(out5, node.name)
    finished = re.findall(r"finished \S+/(\S+) \(", se)
    deleted = re.findall(r"retention: deleted (\S+) ", se)
    t.check(len(finished) >= 4 and deleted and final5 and
            len(final5) == len(finished) - len(deleted),
            "--keep-age 2s deleted the daemon's older files (%d finished, %d deleted, %d left)"
            % (len(finished), len(deleted), len(final5)))
    t.check(deleted and set(deleted) <= set(finished[:-1]),
            "... only files it finished, never the newest")

    out4 = h.mkdtemp("out_")
    limit = 150 * 1024
    # until the first deletion: past 150K written
    args = h.daemon_args(node, out4, top=5, rate=10, every="1s", rotate="1s",
                         compress="none", keep_bytes="150K",
                         backtrace_depth=64)
    rc, _, se = h.run_daemon_until(args, lambda dm: dm.wait_log(r"retention: deleted",
                                                                timeout=30))
    t.eq(rc, 0, "keep-bytes run: exit 0")
    final4, _, _ = h.output_files(out4, node.name)
    sizes = [os.path.getsize(p) for p in final4]
    written = sum(int(b) for b in re.findall(r"finished .* samples, (\d+) bytes\)", se))
    t.check(final4 and sum(sizes[:-1]) <= limit,
            "--keep-bytes 150K: the files kept before the newest fit (%r)" % sizes)
    t.check(written <= limit or "retention: deleted" in se,
            "--keep-bytes 150K deleted older files once %d bytes were written" % written)


if __name__ == "__main__":
    h.run(main)
