#!/usr/bin/env python3
"""A full disk costs samples, never files.

The output directory is a small tmpfs, filled up by a filler file while
flame_profd runs: writes fail with ENOSPC. The daemon must not crash, must
log the error once (rate-limited) rather than per sample, count the
dropped samples (interval log and manifest), never leave a corrupt
finished file, and resume writing when the filler is removed.
Needs root to mount a tmpfs; skipped (77) where mounting is not allowed.
Also: a file-size limit (RLIMIT_FSIZE, EFBIG) is handled the same way;
and a disk that stays full to the end: the last line counts what the
files hold, and every dropped sample is in the manifest or said to be in
no file.
"""
import json
import os
import re
import resource
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def fill(path, chunk=4096):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * chunk)
    except OSError:
        pass
    finally:
        os.close(fd)


def main(t):
    mnt = h.mkdtemp("tmpfs_")
    # mode=0755: a tmpfs is 1777 by default, which the daemon refuses
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", mnt],
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        h.log("SKIP: cannot mount a tmpfs here: %s" % r.stderr.decode().strip())
        sys.exit(77)
    h.on_cleanup("umount " + mnt, lambda: subprocess.run(["umount", "-l", mnt]))

    node = h.start_node(idle=100)
    args = h.daemon_args(node, mnt, top=10, rate=50, every="1s", rotate="2s",
                         compress="none", backtrace_depth=64)
    filler = os.path.join(mnt, "filler")
    open(filler, "wb").close()
    dm = h.start_daemon(args)
    dm.wait_samples(timeout=15)
    fill(filler)
    h.log("disk full")
    dm.wait_log(r"error: .*(No space left|write error|cannot create)", timeout=15)
    time.sleep(3)
    t.check(dm.poll() is None, "still running with the disk full")
    os.unlink(filler)
    h.log("space back")
    t_back = time.time()

    def late_samples():
        final = h.output_files(mnt, node.name)[0]
        return sum(1 for p in final for s in h.parse_perf(p).samples
                   if s["ts"] > t_back + 0.5)

    # until finished files hold samples taken since (a file is finished
    # every --rotate 2s)
    deadline = time.monotonic() + 30
    while late_samples() <= 10 and time.monotonic() < deadline and dm.poll() is None:
        time.sleep(0.2)
    rc = dm.stop()
    t.eq(rc, 0, "exit 0")
    se = dm.read_stderr()
    errs = [l for l in se.splitlines() if " error: " in l]
    t.check(1 <= len(errs) <= 3, "errors logged rate-limited (%d lines)" % len(errs))
    ivs = h.intervals(se)
    dropped = sum(int(kv.get("dropped", 0)) + int(kv.get("skipped", 0)) for kv in ivs)
    t.check(dropped > 0, "dropped samples counted in the interval log (%d)" % dropped)
    files = h.check_output(t, mnt, node, min_samples=10)
    late = [s for f in files for s in f.samples if s["ts"] > t_back + 0.5]
    t.check(len(late) > 10, "writing resumed after space came back (%d samples)" % len(late))
    with open(os.path.join(mnt, h.sanitize_node(node.name), "manifest.json")) as f:
        m = json.load(f)
    t.check(sum(e["dropped"] + e["skipped"] for e in m["files"]) > 0,
            "manifest accounts for the lost samples")

    # full to the end: the counts add up
    mnt2 = h.mkdtemp("tmpfs_")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", mnt2], check=True)
    h.on_cleanup("umount " + mnt2, lambda: subprocess.run(["umount", "-l", mnt2]))
    filler = os.path.join(mnt2, "filler")
    open(filler, "wb").close()
    dm = h.start_daemon(h.daemon_args(node, mnt2, top=10, rate=50, every="1s",
                                      rotate="2s", compress="none", backtrace_depth=64))
    dm.wait_samples(timeout=15)
    time.sleep(2.5)
    fill(filler)
    time.sleep(5)
    t.eq(dm.stop(), 0, "full to the end: exit 0 (the last file was finished)")
    se = dm.read_stderr()
    files = h.check_output(t, mnt2, node, min_samples=1)
    on_disk = sum(len(f.samples) for f in files)
    written = re.search(r"stopped: (\d+) samples written", se)
    t.check(written and int(written.group(1)) == on_disk,
            "full to the end: the last line says what the files hold (%s, %d on disk)"
            % (written.group(1) if written else None, on_disk))
    with open(os.path.join(mnt2, h.sanitize_node(node.name), "manifest.json")) as f:
        m = json.load(f)
    logged = sum(int(kv.get("dropped", 0)) for kv in h.intervals(se))
    unrecorded = re.search(r"(\d+) samples dropped or skipped after the last file", se)
    in_files = sum(e["dropped"] for e in m["files"])
    t.check(logged > 0, "full to the end: drops logged (%d)" % logged)
    t.check(logged <= in_files + (int(unrecorded.group(1)) if unrecorded else 0),
            "full to the end: every drop logged is in the manifest (%d) or said to be in "
            "no file (%s)" % (in_files, unrecorded.group(1) if unrecorded else 0))
    t.eq(sum(e["samples"] for e in m["files"]), on_disk,
         "full to the end: the manifest's samples are the files'")

    # RLIMIT_FSIZE: EFBIG on write, same handling
    out = h.mkdtemp("out_")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (128 * 1024, 128 * 1024))

    # until the limit is hit, and the files hold 10 samples (the
    # daemon's stderr, a file here, stays far below the limit); no budget:
    # a sanitizer build's own CPU on a loaded host would bring the rate
    # down until no file reached the limit
    dm = h.start_daemon(h.daemon_args(node, out, top=5, rate=4, every="1s",
                                      rotate="5s", compress="none", backtrace_depth=64,
                                      max_overhead=0),
                        preexec=limit)
    dm.wait_log(r"File too large", timeout=30)
    dm.wait_sample_count(10)
    t.eq(dm.stop(), 0, "file-size limit: exit 0")
    files = h.check_output(t, out, node, min_samples=10)
    t.check("File too large" in dm.read_stderr(), "file-size limit: EFBIG logged")
    t.check(all(os.path.getsize(f.path) <= 128 * 1024 for f in files),
            "file-size limit: every file whole and within the limit")


if __name__ == "__main__":
    h.run(main)
