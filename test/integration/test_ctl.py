#!/usr/bin/env python3
"""flame_profd ctl: the control socket of a daemon running the flight
recorder.

One demo node, one daemon with --flight-recorder 10s --after 1s
--max-captures-per-hour 2. Then:

  - `ctl status` answers: the node, connected, samples taken, the ring's
    bytes, no capture and no trigger yet;
  - `ctl trigger --reason TEXT` (TEXT with an escape sequence) gives one
    capture, capture.<time>.ctl, whose manifest entry has trigger "ctl"
    and the reason escaped, and whose file holds samples and a note with
    the reason;
  - a client of another uid (4242) is refused with exit 77 and no capture,
    both when the socket's mode stops it and, with the socket opened to
    everyone by the test, when the daemon's peer check does;
  - the second capture of the hour (--node NAME) is written; the third is
    refused with exit 75, counted (status: capped 1) and writes nothing;
  - a directory with no daemon gives exit 69 and one message; a trigger
    without --reason exit 64;
  - each capture's after-window is a burst (--burst-rate 50 --burst-top
    15): its beginning and end are logged, and after it the interval
    lines ask for no more than --rate and --top again;
  - after SIGTERM the socket is gone;
  - a daemon of two nodes answers status for each; a trigger without
    --node captures both, one with --node only that node.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

OTHER_UID = 4242       # a second, unprivileged user (any uid not in use)
REASON = "deploy 42 \x1b[31mred"
REASON_ESCAPED = "deploy 42 \\x1B[31mred"


def ctl(args, uid=None, timeout=30):
    cmd = [h.daemon_path(), "ctl"] + args
    if uid is not None:
        cmd = ["setpriv", "--reuid", str(uid), "--regid", str(uid),
               "--clear-groups"] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def eq(t, got, want, what, detail):
    return t.check(got == want, what, "got %r, want %r: %s" % (got, want, detail))


def fields(text):
    d = {}
    for line in text.splitlines():
        k, sep, v = line.partition(": ")
        if sep:
            d[k] = v
    return d


def captures(mpath):
    try:
        with open(mpath) as f:
            return json.load(f).get("captures", [])
    except (OSError, ValueError):
        return []


def capture_dirs(ndir):
    return [x for x in os.listdir(ndir) if x.startswith("capture.")]


def wait_captures(mpath, n, timeout):
    deadline = time.monotonic() + timeout
    caps = captures(mpath)
    while len(caps) < n and time.monotonic() < deadline:
        time.sleep(0.2)
        caps = captures(mpath)
    return caps


def main(t):
    node = h.start_node(idle=20)
    # the other user must reach the socket's name to be stopped by its mode
    os.chmod(h.tmpdir(), 0o755)
    out = h.mkdtemp("out_")
    os.chmod(out, 0o755)
    ndir = os.path.join(out, h.sanitize_node(node.name))
    sock = os.path.join(ndir, "ctl.sock")
    mpath = os.path.join(ndir, "manifest.json")
    args = h.daemon_args(node, out, rate=20, every="1s", top=10,
                         flight_recorder="10s", after="1s",
                         max_captures_per_hour=2, dir_mode="0755",
                         burst_rate=50, burst_top=15)
    d = h.start_daemon(args)

    # status, once the daemon has taken samples
    st = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and d.poll() is None:
        rc, so, se = ctl(["--dir", out, "status"])
        st = fields(so)
        if rc == 0 and int(st.get("samples", "0")) > 0 and st.get("connected") == "yes":
            break
        time.sleep(0.3)
    t.require(d.poll() is None, "the daemon runs", d.read_stderr()[-2000:])
    t.eq(st.get("node"), node.name, "status names the node")
    t.eq(st.get("connected"), "yes", "status: connected")
    t.check(int(st.get("samples", "0")) > 0, "status counts samples", str(st))
    t.check(re.match(r"^[0-9.]+/s$", st.get("achieved", "")), "status gives the achieved rate",
            str(st))
    t.eq(st.get("flight_recorder"), "on", "status: the flight recorder is on")
    t.check(int(st.get("ring_bytes", "0")) > 0, "status gives the ring's bytes", str(st))
    t.eq((st.get("captures"), st.get("capped"), st.get("last_trigger")), ("0", "0", "none"),
         "status: no capture, nothing capped, no trigger yet")
    s = os.lstat(sock)
    t.check(oct(s.st_mode & 0o777) == oct(0o600), "the socket is 0600", oct(s.st_mode))
    time.sleep(1.5)    # the ring holds a few seconds

    # a trigger with a reason
    t0 = time.time()
    rc, so, se = ctl(["--dir", out, "trigger", "--reason", REASON])
    eq(t, rc, 0, "ctl trigger: exit 0", se)
    capture_line = fields(so).get("capture", "")
    t.check(capture_line.startswith(ndir + "/capture.") and capture_line.endswith(".ctl"),
            "ctl trigger names the capture's directory", so)
    caps = wait_captures(mpath, 1, 15)
    t.eq(len(caps), 1, "one capture")
    if caps:
        c = caps[0]
        t.eq((c["trigger"], c["reason"], c["pid"], c["capped_before"]),
             ("ctl", REASON_ESCAPED, None, 0),
             "the manifest names the trigger ctl and the reason, escaped")
        t.eq(os.path.join(ndir, c["dir"]), capture_line, "... in the directory ctl named")
        path = os.path.join(ndir, c["dir"], c["name"])
        try:
            pf = h.parse_perf(path)
            t.eq(len(pf.samples), c["samples"], "the capture's file holds its samples")
            t.check(pf.samples and min(s["ts"] for s in pf.samples) < t0 - 1,
                    "... from before the trigger")
            t.check([x for _, x in pf.comments if ("reason: " + REASON_ESCAPED) in x],
                    "... and a note with the reason, escaped")
        except Exception as e:
            t.check(False, "the capture follows the grammar", str(e))

    # another uid: refused by the socket's mode, then by the peer check
    rc, so, se = ctl(["--dir", out, "trigger", "--reason", "x"], uid=OTHER_UID)
    eq(t, rc, 77, "a client of uid 4242: exit 77", se)
    t.check("refused" in se, "... saying it is refused", se)
    os.chmod(sock, 0o666)
    rc, so, se = ctl(["--dir", ndir, "trigger", "--reason", "x"], uid=OTHER_UID)
    eq(t, rc, 77, "with the socket open to all, the daemon refuses uid 4242: exit 77", se)
    t.check("refused" in se, "... saying so", se)
    os.chmod(sock, 0o600)
    time.sleep(0.5)    # a capture would have begun at the next tick
    t.eq(len(capture_dirs(ndir)), 1, "no capture for uid 4242")
    t.check("ctl: refused a client of uid 4242" in d.read_stderr(),
            "the daemon logs the refusal")

    # the hourly cap: the second is written, the third capped
    rc, so, se = ctl(["--dir", out, "--node", node.name, "trigger", "--reason", "second"])
    eq(t, rc, 0, "the second capture of the hour (--node): exit 0", se)
    wait_captures(mpath, 2, 15)    # listed: finished
    rc, so, se = ctl(["--dir", out, "trigger", "--reason", "third"])
    eq(t, rc, 75, "the third in the hour is capped: exit 75", se)
    t.check("capped" in se and "--max-captures-per-hour" in se, "... saying why", se)
    rc, so, se = ctl(["--dir", out, "status"])
    st = fields(so)
    t.eq((rc, st.get("captures"), st.get("capped"), st.get("captures_last_hour")),
         (0, "2", "1", "2"), "status: two captures, one capped")
    t.check(st.get("last_trigger", "").startswith('ctl "third" at ') and
            st.get("last_trigger", "").endswith("(capped)"),
            "status: the last trigger, its reason and that it was capped", so)
    time.sleep(0.5)
    t.eq(len(capture_dirs(ndir)), 2, "the capped trigger wrote nothing")

    # no daemon; a bad command line
    empty = h.mkdtemp("empty_")
    rc, so, se = ctl(["--dir", empty, "status"])
    eq(t, rc, 69, "no daemon: exit 69", se)
    eq(t, len(se.strip().splitlines()), 1, "... with one line", se)
    rc, so, se = ctl(["--dir", out, "trigger"])
    eq(t, rc, 64, "trigger without --reason: exit 64", se)

    rc = d.stop(signal.SIGTERM)
    se = d.read_stderr()
    if not t.eq(rc, 0, "the daemon exits 0 on SIGTERM"):
        h.log(se[-4000:])
    t.eq(h.error_lines(se), [], "no error lines")
    t.check(not os.path.lexists(sock), "the socket is removed at exit")
    lines = [m for _, _, m in h.log_lines(se)]
    begins = [i for i, l in enumerate(lines) if "burst begins: " in l]
    ends = [i for i, l in enumerate(lines) if "burst ends: " in l]
    eq(t, (len(begins), len(ends)), (2, 2), "two captures: two bursts begun and ended",
       "\n".join(l for l in lines if "burst" in l))
    if ends:
        after = [l for l in lines[ends[-1]:] if "interval: " in l]
        bad = [l for l in after
               if float(re.search(r" rate=([0-9.]+)", l).group(1)) > 20 or
               int(re.search(r" top=([0-9]+)", l).group(1)) > 10]
        eq(t, bad, [], "after the burst: rate and top back within --rate and --top",
           "%d interval lines" % len(after))
    rc, so, se = ctl(["--dir", out, "status"])
    eq(t, rc, 69, "a stopped daemon: exit 69", se)

    fleet(t, node)


def fleet(t, a):
    """Several nodes in one daemon: a ring and a socket each."""
    b = h.start_node(idle=20)
    out = h.mkdtemp("out_fleet_")
    dirs = [os.path.join(out, h.sanitize_node(n.name)) for n in (a, b)]
    args = ["--node", "%s=%s" % (a.name, a.cookie_file),
            "--node", "%s=%s" % (b.name, b.cookie_file), "--out", out,
            "--rate", "20", "--every", "1s", "--top", "5",
            "--flight-recorder", "10s", "--after", "1s"]
    d = h.start_daemon(args)
    names = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and d.poll() is None:
        rc, so, se = ctl(["--dir", out, "status"])
        blocks = [fields(x) for x in so.split("\n\n")]
        names = sorted(x.get("node", "") for x in blocks
                       if int(x.get("samples", "0")) > 0)
        if len(names) == 2:
            break
        time.sleep(0.3)
    t.eq(names, sorted([a.name, b.name]), "several nodes: status answers for each")
    rc, so, se = ctl(["--dir", out, "trigger", "--reason", "all"])
    eq(t, rc, 0, "several nodes: a trigger without --node: exit 0", se)
    t.eq(len([x for x in so.splitlines() if x.startswith("capture: ")]), 2,
         "... names a capture for each node")
    caps = [wait_captures(os.path.join(x, "manifest.json"), 1, 15) for x in dirs]
    t.eq([len(c) for c in caps], [1, 1], "... and each node has one")
    rc, so, se = ctl(["--dir", out, "--node", b.name, "trigger", "--reason", "b"])
    eq(t, rc, 0, "a trigger with --node: exit 0", se)
    caps = wait_captures(os.path.join(dirs[1], "manifest.json"), 2, 15)
    t.eq([len(capture_dirs(x)) for x in dirs], [1, 2], "... captures that node only")
    t.eq([c["reason"] for c in caps], ["all", "b"], "... with its reason")
    rc = d.stop(signal.SIGTERM)
    se = d.read_stderr()
    if not t.eq(rc, 0, "several nodes: exit 0 on SIGTERM"):
        h.log(se[-4000:])
    t.eq(h.error_lines(se), [], "several nodes: no error lines")
    t.check(not any(os.path.lexists(os.path.join(x, "ctl.sock")) for x in dirs),
            "several nodes: the sockets are removed at exit")


if __name__ == "__main__":
    h.run(main)
