#!/usr/bin/env python3
"""flame_prof, the command, at the edges of its input: the progress report
on a terminal, directory walks (depth, non-regular files), the limits on
frames and sums, and running out of memory.

Needs only python3 and the built flame_prof (FLAME_PROF).
"""
import os
import pty
import shutil
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True

import fp_cli
from fp_cli import FLAME_PROF, check, fixture, run, samples_of


def test_progress():
    """Progress goes to a terminal on stderr, and is wiped at the end."""
    chunk = open(fixture("demo.perf"), "rb").read() * 40   # 1440 samples
    master, slave = pty.openpty()
    p = subprocess.Popen([FLAME_PROF, "top", "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            got.append(data)
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    for _ in range(4):
        p.stdin.write(chunk)
        p.stdin.flush()
        time.sleep(0.3)
    p.stdin.close()
    out = p.stdout.read().decode()
    p.wait(timeout=60)
    t.join(timeout=5)
    os.close(master)
    err = b"".join(got).decode("utf-8", "replace")
    check(p.returncode == 0 and samples_of(out) == 4 * 1440, "progress run: all samples read",
          out[:200])
    check("flame_prof: file 1/1 -: " in err and "samples" in err and err.endswith("\r\x1b[K"),
          "progress shown on a terminal and cleared", repr(err[-300:]))
    rc, out, err = run(["top", "-q", "-"], input_bytes=chunk)
    check(rc == 0 and err == "", "-q: nothing on stderr", err)


def run_timed(args, timeout=20, preexec=None):
    """run() with a short timeout: a FIFO that blocks fails, not hangs."""
    try:
        p = subprocess.run([FLAME_PROF] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout,
                           preexec_fn=preexec)
    except subprocess.TimeoutExpired:
        return None, "", "timed out after %ds" % timeout
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


EVENT = ("running 0.1.0 [000] 1795248000.%06d: cpu-clock:"
         "\tmetric_erlang_reductions: %d, %d\tmetric_erlang_memory: 2, -2"
         "\tmetric_erlang_message_queue_len: 0, 0\tmetric_erlang_total_heap_size: 3, 0"
         "\tmetric_erlang_heap_size: 4, 0\tmetric_erlang_stack_size: 5, 0"
         "\tmetric_erlang_binary_bytes: 6, 0\tmetric_erlang_minor_gcs: 7, 0\n")
FRAME = "\t0123456789abcdef lists:foldl/3 (lists.erl)\n"


def test_directory_walk(tmp):
    """Links to directories are not followed, each file is read once,
    depth past the limit is an error naming the directory."""
    demo_samples = samples_of(run(["top", fixture("demo.perf")])[1])
    out_dir = os.path.join(tmp, "walk")
    node = os.path.join(out_dir, "app@host")
    os.makedirs(node)
    shutil.copy(fixture("demo.perf"), os.path.join(node, "app@host.20261121T080000.000Z.perf"))
    os.symlink("app@host", os.path.join(out_dir, "latest"))
    rc, out, err = run(["top", out_dir])
    check(rc == 0 and samples_of(out) == demo_samples,
          "a latest -> node link does not double the counts (%d)" % samples_of(out), err)
    os.symlink(".", os.path.join(node, "self"))
    rc, out, err = run_timed(["top", out_dir])
    check(rc == 0 and samples_of(out) == demo_samples,
          "a link to its own directory counts each sample once", err + out[:200])
    # a link to a file, and the same file named twice: read once
    os.symlink("app@host.20261121T080000.000Z.perf", os.path.join(node, "again.perf"))
    rc, out, err = run(["top", out_dir, os.path.join(node, "app@host.20261121T080000.000Z.perf")])
    check(rc == 0 and samples_of(out) == demo_samples,
          "a file reached through a link and by name is read once", err)
    # a link named on the command line is followed
    rc, out, err = run(["top", os.path.join(out_dir, "latest")])
    check(rc == 0 and samples_of(out) == demo_samples, "an input named as a link is followed", err)

    deep = os.path.join(tmp, "deep")
    d = deep
    for i in range(12):
        d = os.path.join(d, "d%d" % i)
    os.makedirs(d)
    shutil.copy(fixture("demo.perf"), os.path.join(d, "x.perf"))
    rc, out, err = run(["top", deep])
    check(rc == 0 and samples_of(out) == demo_samples, "a file 12 directories down is read", err)
    too = os.path.join(tmp, "toodeep")
    d = too
    for i in range(40):
        d = os.path.join(d, "d")
    os.makedirs(d)
    shutil.copy(fixture("demo.perf"), os.path.join(d, "x.perf"))
    rc, out, err = run(["top", too])
    check(rc == 66 and "deeper than 32 levels" in err and too in err,
          "directories past the depth limit: exit 66 naming the directory", err)


def test_non_regular(tmp):
    fifo = os.path.join(tmp, "in.perf")
    os.mkfifo(fifo)
    rc, out, err = run_timed(["top", fifo], timeout=10)
    check(rc == 66 and "not a regular file" in err and fifo in err,
          "a FIFO input is refused at once (exit 66)", "rc=%s %s" % (rc, err))
    rc, out, err = run_timed(["top", "/dev/null"], timeout=10)
    check(rc == 66 and "not a regular file" in err, "a device input is refused", err)
    # a FIFO inside a directory is not a perf-script file: left out
    d = os.path.join(tmp, "withfifo")
    os.makedirs(d)
    os.mkfifo(os.path.join(d, "a.perf"))
    shutil.copy(fixture("demo.perf"), os.path.join(d, "b.perf"))
    rc, out, err = run_timed(["top", d], timeout=10)
    check(rc == 0 and samples_of(out) > 0, "a FIFO below a directory is skipped", err)


def test_limits(tmp):
    """The sums saturate with one warning; a sample past the grammar's
    bounds is an error naming file and line; a zstd bomb of one endless
    sample stays small in memory."""
    big = os.path.join(tmp, "big.perf")
    with open(big, "w") as f:
        for i in range(3):
            f.write(EVENT % (i, 9223372036854775807, 9223372036854775807) + FRAME + "\n")
    for cmd in (["top"], ["folded"], ["svg", "-o", os.path.join(tmp, "big.svg")],
                ["heatmap", "-o", os.path.join(tmp, "big-heat.svg")]):
        rc, out, err = run(cmd + ["-w", "reductions", big])
        check(rc == 0 and err.count("warning: sums of reductions pass the 64-bit range") == 1,
              "%s: saturated sums, one warning" % cmd[0], err)
        if cmd[0] == "top":
            check("sum 9223372036854775807," in out and "-" not in out.split("\n")[1],
                  "top: the net sum is held at INT64_MAX", out[:400])
        if cmd[0] == "folded":
            check(out.endswith(" 18446744073709551615\n") or " 27670116110564327421" not in out,
                  "folded: weights never wrap", out[-200:])
    rc, out, err = run(["top", "-q", "-w", "reductions", big])
    check(rc == 0 and err == "", "-q: no saturation warning", err)
    neg = os.path.join(tmp, "neg.perf")
    with open(neg, "w") as f:
        for i in range(3):
            f.write(EVENT % (i, 1, -9223372036854775807) + FRAME + "\n")
    rc, out, err = run(["top", "-w", "reductions_delta", neg])
    check(rc == 0 and "sum -9223372036854775808," in out and "warning" in err,
          "top: a negative sum is held at INT64_MIN", out[:300] + err)

    many = os.path.join(tmp, "many.perf")
    with open(many, "w") as f:
        f.write("# x\n" + EVENT % (0, 1, 1) + FRAME * 10001 + "\n")
    rc, out, err = run(["top", many])
    check(rc == 65 and ("%s:10003: more than 10000 frames in the sample of line 2" % many) in err,
          "10001 frames: exit 65 naming file and line", err)
    ok = os.path.join(tmp, "ok.perf")
    with open(ok, "w") as f:
        f.write(EVENT % (0, 1, 1) + FRAME * 10000 + "\n")
    rc, out, err = run(["top", ok])
    check(rc == 0 and samples_of(out) == 1, "10000 frames are read", err)

    # no frame lines at all is valid grammar (and no UB: the sanitizer
    # build runs this too)
    empty = os.path.join(tmp, "empty-stack.perf")
    with open(empty, "w") as f:
        f.write(EVENT % (0, 1, 1) + "\n")
    for cmd in (["top"], ["folded"], ["speedscope"], ["svg"], ["heatmap"]):
        rc, out, err = run(cmd + [empty])
        check(rc == 0, "%s: a sample without frames" % cmd[0], err)

    if not shutil.which("zstd"):
        print("skip zstd bomb: no zstd")
        return
    bomb = os.path.join(tmp, "bomb.perf.zst")
    # 8 GB of text in a few hundred KB: one event line, then frames
    # without end
    gen = subprocess.Popen([sys.executable, "-c",
                            "import sys\n"
                            "sys.stdout.buffer.write(sys.argv[1].encode())\n"
                            "chunk = sys.argv[2].encode() * 65536\n"
                            "for _ in range(8 * 1024 * 1024 * 1024 // len(chunk)):\n"
                            "    sys.stdout.buffer.write(chunk)\n",
                            EVENT % (0, 1, 1), FRAME], stdout=subprocess.PIPE)
    with open(bomb, "wb") as f:
        z = subprocess.Popen(["zstd", "-q", "-1", "-c"], stdin=gen.stdout, stdout=f)
        gen.stdout.close()
        # a few seconds are enough: the reader stops at frame 10001
        time.sleep(3)
        gen.kill()
        z.wait()
    gen.wait()
    size = os.path.getsize(bomb)

    def limit_memory():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))

    # ASan reserves terabytes of shadow: no address-space limit there
    asan = bool(os.environ.get("ASAN_OPTIONS"))
    rc, out, err = run_timed(["top", bomb], timeout=60, preexec=None if asan else limit_memory)
    check(rc == 65 and ("%s:10002: more than 10000 frames" % bomb) in err and
          "out of memory" not in err,
          "a zstd bomb (%d KB) is refused at frame 10001 within 512 MB" % (size // 1024), err)


def test_out_of_memory(tmp):
    """flame_prof's allocation failures name flame_prof, not the daemon:
    a 12 MiB comment line needs a 16 MiB line buffer, more than an
    18 MiB address space leaves after the program's own 7 MiB."""
    if os.environ.get("ASAN_OPTIONS"):
        print("skip out of memory: an address-space limit and ASan's shadow do not mix")
        return
    path = os.path.join(tmp, "long-comment.perf")
    with open(path, "w") as f:
        f.write("# " + "x" * (12 << 20) + "\n")

    def limit_memory():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (18 << 20, 18 << 20))

    rc, out, err = run_timed(["folded", path], timeout=30, preexec=limit_memory)
    check(rc is not None and rc != 0 and "flame_prof: out of memory" in err and
          "flame_profd" not in err,
          "out of memory: the message names flame_prof", "rc=%s %s" % (rc, err))


def main():
    return fp_cli.main([
        test_progress,
        test_directory_walk,
        test_non_regular,
        test_limits,
        test_out_of_memory,
    ])


if __name__ == "__main__":
    sys.exit(main())
