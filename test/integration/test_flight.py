#!/usr/bin/env python3
"""The flight recorder: a mailbox blown up mid-run gives one capture holding
the seconds before it; SIGUSR2 gives one too, and so does an overloaded
run queue.

One busy demo node, one daemon run with --flight-recorder 20s
--trigger 'mailbox>50000' --trigger 'run_queue>20' --after 3s and nothing
else written (no continuous files). A process pinned by name spins without
receiving; after 8 s it is sent 60000 messages. Then:

  - exactly one capture names the trigger, the value that fired it (over
    50000) and the process's pid, although the mailbox stays over the
    threshold (the trigger is held off);
  - its file is finished (no partial name), follows the grammar, holds
    samples from at least 5 s before the blow-up to after it, and
    flame_prof reads it;
  - SIGUSR2 gives a second capture, named for the signal;
  - 40 spinning processes give a third, of run_queue>20, with the run
    queue's length as its value;
  - the node directory holds no continuous file.
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

FLAME_PROF = os.environ.get("FLAME_PROF") or "build/flame_prof/flame_prof"
VICTIM = "fp_flight_victim"
SPIN = ("F = fun Loop(N) -> _ = lists:seq(1, 200), erlang:yield(), Loop(N + 1) end, "
        "P = spawn(fun() -> F(0) end), true = register(%s, P), ok" % VICTIM)
LOAD = ("Parent = spawn(fun() -> F = fun Spin() -> Spin() end, "
        "[spawn_link(fun() -> F() end) || _ <- lists:seq(1, 40)], "
        "receive stop -> ok end end), register(fp_flight_load, Parent), ok")
UNLOAD = "exit(whereis(fp_flight_load), kill)"
BLOW = ("P = whereis(%s), lists:foreach(fun(_) -> P ! blow end, lists:seq(1, 60000)), "
        "ok" % VICTIM)


def manifest(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def wait_captures(path, n, timeout):
    """The manifest's captures once it lists n of them (or the last seen)."""
    deadline = time.monotonic() + timeout
    caps = []
    while time.monotonic() < deadline:
        m = manifest(path)
        caps = (m or {}).get("captures", [])
        if len(caps) >= n:
            return caps
        time.sleep(0.2)
    return caps


def check_capture(t, ndir, cap, label):
    """The capture's file: finished, in the grammar, read by flame_prof."""
    cdir = os.path.join(ndir, cap["dir"])
    names = sorted(os.listdir(cdir)) if os.path.isdir(cdir) else []
    t.eq(names, [cap["name"]], "%s: the capture directory holds its one finished file" % label)
    path = os.path.join(cdir, cap["name"])
    try:
        pf = h.parse_perf(path)
    except Exception as e:     # ParseError, or no file
        t.check(False, "%s: the capture follows the grammar" % label, str(e))
        return []
    t.eq(len(pf.samples), cap["samples"], "%s: the manifest counts its samples" % label)
    t.check(pf.comments and pf.comments[0] == (1, pf.comments[0][1]) and
            pf.comments[0][1].startswith("# flame_profd "),
            "%s: the file opens with the header" % label, str(pf.comments[:1]))
    notes = [c for _, c in pf.comments if " capture: %s" % cap["trigger"] in c]
    t.check(notes, "%s: a note in the file names the trigger" % label)
    p = subprocess.run([FLAME_PROF, "top", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    t.check(p.returncode == 0 and ("samples: %d" % cap["samples"]) in p.stdout.decode(),
            "%s: flame_prof reads it" % label, p.stderr.decode()[-500:])
    return pf.samples


def main(t):
    node = h.start_node(idle=200)
    node.eval(SPIN)
    victim = node.pid_of(VICTIM)
    out = h.mkdtemp("out_")
    ndir = os.path.join(out, h.sanitize_node(node.name))
    mpath = os.path.join(ndir, "manifest.json")
    args = h.daemon_args(node, out, rate=10, every="1s", top=20, name=[VICTIM],
                         flight_recorder="20s", trigger=["mailbox>50000", "run_queue>20"],
                         after="3s")
    d = h.start_daemon(args)
    # the ring fills from the first sample: on a loaded host connecting and
    # the first selection take a while, so the seconds before the blow-up
    # are counted from the first interval that wrote samples
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and d.poll() is None and not any(
            int(x.get("samples", 0)) > 0 for x in h.intervals(d.read_stderr())):
        time.sleep(0.2)
    t.require(d.poll() is None, "the daemon runs", d.read_stderr()[-2000:])
    time.sleep(6.5)
    t_blow = time.time()
    node.eval(BLOW)
    h.log("blew up %s's mailbox at %.3f" % (victim, t_blow))
    caps = wait_captures(mpath, 1, 15)
    t.require(len(caps) >= 1, "the mailbox trigger gave a capture")
    time.sleep(1.5)    # the mailbox stays full: no second capture
    d.send_signal(signal.SIGUSR2)
    caps = wait_captures(mpath, 2, 15)
    node.eval(LOAD)
    try:
        caps = wait_captures(mpath, 3, 15)
    finally:
        node.eval(UNLOAD)
    rc = d.stop(signal.SIGTERM)
    se = d.read_stderr()
    if not t.eq(rc, 0, "the daemon exits 0 on SIGTERM"):
        h.log(se[-4000:])
    t.eq(h.error_lines(se), [], "no error lines")

    caps = (manifest(mpath) or {}).get("captures", [])
    mbox = [c for c in caps if c["trigger"] == "mailbox>50000"]
    sig = [c for c in caps if c["trigger"] == "SIGUSR2"]
    runq = [c for c in caps if c["trigger"] == "run_queue>20"]
    t.eq(len(mbox), 1, "exactly one capture of the mailbox trigger")
    t.eq(len(sig), 1, "one capture of SIGUSR2")
    t.eq(len(runq), 1, "one capture of the run queue trigger")
    t.eq(len(caps), 3, "no other capture")
    if runq:
        t.check(runq[0]["value"] > 20 and runq[0]["pid"] is None,
                "the run queue's capture names its length, no process", str(runq[0]))
        t.check(runq[0]["dir"].endswith(".run_queue"), "... and is named for it",
                runq[0]["dir"])
        check_capture(t, ndir, runq[0], "run_queue")
    if mbox:
        c = mbox[0]
        t.check(c["value"] > 50000, "the manifest names the value that fired (%d)" % c["value"])
        t.eq(c["pid"], victim, "the manifest names the process")
        t.check(c["dir"].startswith("capture.") and c["dir"].endswith(".mailbox"),
                "the capture directory is named by time and trigger", c["dir"])
        samples = check_capture(t, ndir, c, "mailbox")
        tss = [s["ts"] for s in samples]
        if tss:
            t.check(min(tss) <= t_blow - 5,
                    "the capture holds samples from 5 s before the blow-up",
                    "first %.3f, blow-up %.3f" % (min(tss), t_blow))
            t.check(max(tss) >= t_blow, "... and after it",
                    "last %.3f, blow-up %.3f" % (max(tss), t_blow))
            after = [s for s in samples if s["pid"] == victim.strip("<>") and
                     s["metrics"]["message_queue_len"][0] > 50000]
            t.check(after, "... among them the process with its mailbox full")
    if sig:
        t.check(sig[0]["pid"] is None and sig[0]["value"] == 0,
                "the signal's capture names no process", str(sig[0]))
        t.check(sig[0]["dir"].endswith(".signal"), "... and is named for the signal",
                sig[0]["dir"])
        check_capture(t, ndir, sig[0], "SIGUSR2")
    final, partial, other = h.output_files(out, node.name)
    t.eq([os.path.basename(p) for p in final + partial], [],
         "no continuous file is written")


if __name__ == "__main__":
    h.run(main)
