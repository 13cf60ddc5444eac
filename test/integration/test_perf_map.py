#!/usr/bin/env python3
"""--perf: the node's perf map as another user, or an odd application,
can make it.

A node started with +JPperf true runs fp_demo's busy workers; its own
map is moved aside (the node keeps writing to it) and
/tmp/perf-OSPID.map is replaced, for one --perf run each, by:
- a symbolic link owned by nobody to a root 0600 file of map-shaped
  lines naming the node's JIT code: the run goes on, a warning names the
  map and says why, the JIT frames stay unnamed, no byte of the file is
  in the output and the file is untouched; --perf auto exits 78 saying
  the node has no map of its own;
- a copy of those lines owned by nobody: the same, "owned by another
  user"; a hard link to the root file: the same, "other hard links";
- a FIFO no one writes to: the run ends at --duration (exit 0), with a
  warning;
- the node's own map with names that are not UTF-8, a catch-all line
  and a line over beam.smp's own text: the JIT frames keep their names
  (bad bytes as '?'), no frame is named by the catch-all lines, the
  VM's C code keeps its ELF names, and every file is UTF-8 that
  flame_prof reads (top and folded exit 0).
The node's own map is put back before the node stops. Where the kernel
refuses perf events (not root, no CAP_PERFMON), the run exits 77 and
nothing else is tried.
"""
import os
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fp_cli  # noqa: E402

NOBODY = 65534


def perf_allowed():
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return int(f.read().strip()) <= 1
    except OSError:
        return False


def run(t, node, what):
    """One --perf run of 3 s; (exit code, stderr, samples, raw bytes of
    every file)."""
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, rate=10, every="1s",
                                           duration="3s", compress="none",
                                           perf=node.os_pid, perf_freq=199),
                             timeout=60)
    t.eq(rc, 0, "%s: the run exits 0 at --duration" % what)
    final, _, _ = h.output_files(out, node.name)
    samples = [s for f in final for s in h.read_samples(f)]
    raw = b""
    for root, _, files in os.walk(out):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                raw += f.read()
    return rc, se, out, samples, raw


def cpu_frames(samples):
    return [n for s in samples if s["status"] == "cpu" for n in s["frames"]]


def beam_text(pid):
    """(start, end) of beam.smp's executable mapping."""
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "x" in parts[1] and parts[5].endswith("/beam.smp"):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                return start, end
    return None


def main(t):
    node = h.start_node(busy=2, idle=20, erl_args=["+JPperf", "true"])
    if not perf_allowed():
        # test_perf_refused covers this; nothing here can be tried
        rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), duration="2s",
                                               perf=node.os_pid), timeout=40)
        t.eq(rc, 77, "kernel refuses perf events: exit 77")
        return
    path = "/tmp/perf-%d.map" % node.os_pid
    aside = path + ".fp-test-aside"
    victim = h.mkdtemp("victim_") + "/secret"
    os.rename(path, aside)
    try:
        with open(aside, "rb") as f:
            own = f.read()
        # the node's own JIT code, renamed: lines a link could lead to
        lines = [l for l in own.split(b"\n") if l.count(b" ") >= 2]
        secret = b"".join(b"%s %s $victim_secret:f%d/0\n" % (tuple(l.split(b" ")[:2]) + (i,))
                          for i, l in enumerate(lines))
        with open(victim, "wb") as f:
            f.write(secret)
        os.chmod(victim, 0o600)
        before = os.stat(victim)

        # 1. a link another user planted
        os.symlink(victim, path)
        os.lchown(path, NOBODY, NOBODY)
        rc, se, _, samples, raw = run(t, node, "symlink")
        t.check("not reading the perf map %s: it is a symbolic link" % path in se,
                "symlink: a warning names the map and why", se[-2000:])
        t.check(b"victim_secret" not in raw, "symlink: no name of the file it leads to")
        t.check(len(cpu_frames(samples)) > 0 and
                "fp_demo:crunch/1" not in cpu_frames(samples),
                "symlink: cpu samples, their JIT frames unnamed")
        after = os.stat(victim)
        t.eq((after.st_mode, after.st_uid, after.st_size, after.st_mtime_ns),
             (before.st_mode, before.st_uid, before.st_size, before.st_mtime_ns),
             "symlink: the file it leads to is untouched")
        # --perf auto: the node has no map of its own
        rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=5,
                                               duration="3s", perf="auto"),
                                 timeout=60)
        t.eq(rc, 78, "symlink: --perf auto exits 78")
        t.check("has no perf map of its own: %s is a symbolic link\n" % path in se,
                "... saying why", se[-2000:])
        os.unlink(path)

        # 2. the same lines in a file of another user
        with open(path, "wb") as f:
            f.write(secret)
        os.chmod(path, 0o644)
        os.chown(path, NOBODY, NOBODY)
        rc, se, _, samples, raw = run(t, node, "foreign owner")
        t.check("it is owned by another user than the node's" in se,
                "foreign owner: a warning says so", se[-2000:])
        t.check(b"victim_secret" not in raw, "foreign owner: none of its names")
        os.unlink(path)

        # a hard link to the root 0600 file (fs.protected_hardlinks=0
        # lets any user make one): root's file, and not the map
        os.link(victim, path)
        rc, se, _, samples, raw = run(t, node, "hard link")
        t.check("it has other hard links" in se, "hard link: a warning says so", se[-2000:])
        t.check(b"victim_secret" not in raw, "hard link: none of its names")
        os.unlink(path)

        # 3. a FIFO no one writes to
        os.mkfifo(path, 0o644)
        rc, se, _, samples, raw = run(t, node, "fifo")
        t.check("it is not a regular file" in se, "fifo: a warning says so", se[-2000:])
        t.check(len(samples) > 0, "fifo: samples were written")
        os.unlink(path)

        # 4. the node's own map (root's, as the node's), with bad bytes
        # and catch-all lines
        text = beam_text(node.os_pid)
        odd = own.replace(b"$fp_demo:crunch/1", b"$fp_demo:crunch\xff/1")
        odd += b"0 ffffffffffffffff $evil_catch_all:all/0\n"
        if text:
            size = min(text[1] - text[0], 64 << 20)
            odd += b"%x %x $evil_catch_all:vm_text/0\n" % (text[0], size)
        with open(path, "wb") as f:
            f.write(odd)
        os.chmod(path, 0o644)
        rc, se, out, samples, raw = run(t, node, "odd map")
        frames = cpu_frames(samples)
        t.check("fp_demo:'crunch?'/1" in frames,
                "odd map: a name not UTF-8 is kept, its bad byte as '?'")
        t.check(b"evil_catch_all" not in raw, "odd map: no frame named by a catch-all line")
        t.check(any(n.startswith("'beam.smp':") for n in frames),
                "odd map: the VM's C code keeps its ELF names")
        t.check("names that are not UTF-8" in se, "odd map: a warning for the names")
        try:
            raw.decode("utf-8")
            utf8 = True
        except UnicodeDecodeError:
            utf8 = False
        t.check(utf8, "odd map: every file is UTF-8")
        nodedir = os.path.join(out, h.sanitize_node(node.name))
        for cmd in (["top"], ["folded"]):
            rc, so, se2 = fp_cli.run(cmd + [nodedir])
            t.check(rc == 0, "odd map: flame_prof %s reads the directory" % cmd[0], se2)
        os.unlink(path)
    finally:
        # what stands at the map's path now is the test's own
        if os.path.lexists(path):
            os.unlink(path)
        if os.path.exists(aside):
            os.rename(aside, path)
        if os.path.exists(victim):
            os.unlink(victim)
    node.stop()


if __name__ == "__main__":
    h.run(main)
