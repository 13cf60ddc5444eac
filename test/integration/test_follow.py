#!/usr/bin/env python3
"""flame_prof top --follow, the live view, against a real node and daemon.

One node and one daemon (rotating every few seconds, so the view follows
across files) serve every case:

- in a pseudo-terminal: the node's known frames appear on the screen; a
  resize (SIGWINCH) fits the lines to the new width; q ends it with exit
  0, the alternate screen left, the cursor shown and the terminal's modes
  as they were; Ctrl-C (a key in raw mode) and SIGTERM do the same;
- not a terminal: plain snapshots with no escape sequence, ended by
  SIGINT with exit 0; once the daemon stops, it says that no new samples
  come;
- bad input: a missing directory, a file, a file off the grammar, options
  that need --follow or do not apply to it, each with its documented exit
  code.
"""
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

FLAME_PROF = os.environ.get("FLAME_PROF") or os.path.join(
    os.path.dirname(h.daemon_path()), "..", "flame_prof", "flame_prof")
# frames of test/erl/fp_demo.erl's busy workers
KNOWN = ("fp_demo:deep/2", "fp_demo:crunch/1")
ENTER, LEAVE = b"\x1b[?1049h", b"\x1b[?1049l"
HIDE, SHOW = b"\x1b[?25l", b"\x1b[?25h"


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Pty:
    """flame_prof on the slave side of a pseudo-terminal; every byte it
    writes is kept."""

    def __init__(self, args, rows=40, cols=120):
        self.master, self.slave = os.openpty()
        set_size(self.master, rows, cols)
        self.modes = termios.tcgetattr(self.slave)
        self.out = b""
        self.p = subprocess.Popen([FLAME_PROF] + args, stdin=self.slave,
                                  stdout=self.slave, stderr=self.slave,
                                  start_new_session=True,
                                  preexec_fn=h._die_with_parent)
        h.on_cleanup("flame_prof %d" % self.p.pid,
                     lambda: h._kill_pid_and_wait(self.p, 0))

    def pump(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if r:
            try:
                self.out += os.read(self.master, 65536)
            except OSError:
                time.sleep(timeout)

    def wait_for(self, pred, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if pred(self.out):
                return True
            if self.p.poll() is not None:
                self.pump(0.05)
                return pred(self.out)
            self.pump(0.1)
        return pred(self.out)

    def wait_exit(self, timeout=10):
        end = time.time() + timeout
        while self.p.poll() is None and time.time() < end:
            self.pump(0.05)
        self.pump(0.05)
        if self.p.poll() is None:
            h._kill_pid_and_wait(self.p, 0)
            return None
        return self.p.returncode

    def close(self):
        os.close(self.master)
        os.close(self.slave)


def last_frame(out):
    """The lines of the last whole frame in @out (from a cursor-home to
    the next), escape sequences taken out; [] if it holds none."""
    frames = out.split(b"\x1b[H")
    if len(frames) < 3:
        return []
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", frames[-2])
    return text.decode("utf-8", "replace").replace("\r", "").split("\n")


def restored(t, pty, what):
    tail = pty.out[pty.out.rfind(b"\x1b[H"):]
    t.check(pty.out.count(ENTER) >= 1 and HIDE in pty.out,
            "%s: the alternate screen entered, the cursor hidden" % what)
    t.check(LEAVE in tail and SHOW in tail,
            "%s: the alternate screen left and the cursor shown at the end" % what,
            repr(tail[-200:]))
    now = termios.tcgetattr(pty.slave)
    t.check(now[3] == pty.modes[3] and now[0] == pty.modes[0],
            "%s: the terminal's modes as they were (echo, canonical input)" % what)


def terminal_cases(t, out):
    # the node's frames on the screen, fitted, and q
    pty = Pty(["top", "--follow", out, "--interval", "0.5s"])
    seen = pty.wait_for(lambda o: all(k.encode() in o for k in KNOWN), 30)
    t.require(seen, "the node's frames appear on the terminal",
              pty.out[-1500:].decode("utf-8", "replace"))
    t.check(b"window 10 s: " in pty.out and b"FUNCTION" in pty.out,
            "the screen has the window's summary and the table")
    set_size(pty.master, 20, 50)
    os.kill(pty.p.pid, signal.SIGWINCH)
    mark = len(pty.out)
    # the frames drawn after the resize, however slow the host
    pty.wait_for(lambda o: 0 < len(last_frame(o[mark:])) <= 20, 20)
    lines = last_frame(pty.out[mark:])
    t.check(lines and max(len(l) for l in lines) <= 50 and len(lines) <= 20,
            "after SIGWINCH every line fits 50 columns and 20 rows",
            repr(lines))
    # room for every process (13 on the demo node, ranked by samples
    # they nearly all share, so any of them may be last) before p
    set_size(pty.master, 60, 160)
    os.kill(pty.p.pid, signal.SIGWINCH)
    mark = len(pty.out)
    os.write(pty.master, b"p")
    pty.wait_for(lambda o: b"fp_demo_busy" in o[mark:], 15)
    t.check(b"PROCESS" in pty.out[mark:] and b"fp_demo_busy" in pty.out[mark:],
            "p: the processes, by registered name")
    os.write(pty.master, b"q")
    t.eq(pty.wait_exit(), 0, "q: exit 0")
    restored(t, pty, "q")
    pty.close()

    # Ctrl-C, a key in raw mode, and SIGTERM
    for how in ("Ctrl-C", "SIGTERM"):
        pty = Pty(["top", "--follow", out])
        t.require(pty.wait_for(lambda o: b"FUNCTION" in o, 20),
                  "%s: the view is drawn" % how)
        if how == "Ctrl-C":
            os.write(pty.master, b"\x03")
        else:
            pty.p.send_signal(signal.SIGTERM)
        t.eq(pty.wait_exit(), 0, "%s: exit 0" % how)
        restored(t, pty, how)
        pty.close()


def plain_case(t, out, dm):
    p = subprocess.Popen([FLAME_PROF, "top", "--follow", out, "--interval", "0.5s"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=h._die_with_parent)
    h.on_cleanup("flame_prof %d" % p.pid, lambda: h._kill_pid_and_wait(p, 0))
    os.set_blocking(p.stdout.fileno(), False)
    text = b""

    def until(pred, timeout):
        nonlocal text
        end = time.time() + timeout
        while time.time() < end and not pred(text):
            select.select([p.stdout], [], [], 0.2)
            text += p.stdout.read() or b""
        return pred(text)

    t.check(until(lambda s: all(k.encode() in s for k in KNOWN), 30),
            "not a terminal: snapshots with the node's frames")
    # the daemon stops: the view says so (it waits a few seconds first)
    t.eq(dm.stop(), 0, "the daemon stops on SIGTERM")
    t.check(until(lambda s: b"NO NEW SAMPLES" in s, 30),
            "once the daemon stopped: no new samples, said")
    p.send_signal(signal.SIGINT)
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        rc = None
    text += p.stdout.read() or b""
    t.eq(rc, 0, "not a terminal: SIGINT ends it with exit 0")
    t.check(b"\x1b" not in text, "not a terminal: no escape sequence written")
    t.check(text.count(b"flame_prof top --follow") >= 2,
            "not a terminal: a snapshot per interval")


def bad_input(t, out):
    def run(args):
        p = subprocess.run([FLAME_PROF] + args, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=20)
        return p.returncode, p.stderr.decode("utf-8", "replace")

    rc, err = run(["top", "--follow", os.path.join(out, "nowhere")])
    t.check(rc == 66 and "cannot open" in err, "a missing directory: exit 66",
            "%d %s" % (rc, err))
    f = os.path.join(out, "file")
    open(f, "w").close()
    rc, err = run(["top", "--follow", f])
    t.check(rc == 66 and "takes a directory" in err, "a file: exit 66",
            "%d %s" % (rc, err))
    bad = os.path.join(out, "bad")
    os.mkdir(bad)
    with open(os.path.join(bad, "n@h.20261127T000000.000Z.perf"), "w") as g:
        g.write("not perf script\n\n")
    rc, err = run(["top", "--follow", bad])
    t.check(rc == 65 and "segment" in err and "unknown process status" in err,
            "a file off the grammar: exit 65, the file named", "%d %s" % (rc, err))
    rc, err = run(["top", "--window", "5s", out])
    t.check(rc == 64 and "needs --follow" in err, "--window without --follow: exit 64",
            "%d %s" % (rc, err))
    rc, err = run(["top", "--follow", "-w", "memory", out])
    t.check(rc == 64 and "does not apply" in err, "--follow --weight: exit 64",
            "%d %s" % (rc, err))
    rc, err = run(["top", "--follow", out, out])
    t.check(rc == 64, "--follow with two directories: exit 64", "%d %s" % (rc, err))


def main(t):
    if not os.path.exists(FLAME_PROF):
        t.require(False, "flame_prof built at %s" % FLAME_PROF)
    node = h.start_node(idle=200)
    out = h.mkdtemp("out_")
    dm = h.start_daemon(h.daemon_args(node, out, top=10, rate=20, every="1s",
                                      rotate="3s", compress="zstd"))
    dm.wait_samples(timeout=20)
    terminal_cases(t, out)
    plain_case(t, out, dm)
    bad_input(t, out)


if __name__ == "__main__":
    h.run(main)
