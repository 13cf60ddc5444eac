#!/usr/bin/env python3
"""scripts/flamescope DIR: patched Flamescope, serving a daemon's output.

Needs a stock Flamescope checkout in FLAMESCOPE_SRC (skips with 77
otherwise, as test_flamescope does) and Debian's python3-flask
python3-magic python3-cachetools python3-protobuf python3-zstandard (the
script is run with --no-install: it installs nothing here).

A demo node is profiled for a few seconds (zstd files, as the daemon
writes by default). scripts/flamescope --no-ui then copies the checkout
into a home of its own, applies flamescope-fork-patches/ and serves the
output directory on a free port of 127.0.0.1, printing the URL: the
server's profile list is exactly the daemon's files (the manifest left
out), and its heat map of one of them counts samples. Bad input gets one
line and the documented exit code (66: no such DIR, 64: a bad --port).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

SCRIPT = os.path.join(h.REPO, "scripts", "flamescope")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get_json(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode("utf-8"))


def bad_input(t, out):
    for args, code, want in ((["/nonexistent/fp_dir"], 66, "no directory"),
                             (["--port", "x", out], 64, "--port")):
        p = subprocess.run([SCRIPT] + args, capture_output=True, text=True, timeout=30)
        lines = p.stderr.strip().splitlines()
        t.check(p.returncode == code and len(lines) == 1 and want in lines[0],
                "scripts/flamescope %s: exit %d, one line" % (" ".join(args), code),
                "rc=%s %r" % (p.returncode, lines))


def main(t):
    node = h.start_node(idle=20, busy=1)
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out=out, top=5, rate=20,
                                           duration="4s"), timeout=60)
    t.require(rc == 0, "the daemon wrote a run", se[-2000:])
    files = sorted(os.path.relpath(os.path.join(d, f), out)
                   for d, _, fs in os.walk(out) for f in fs
                   if ".perf" in f and not f.startswith("."))
    t.require(files, "the run has files")
    bad_input(t, out)

    home = h.mkdtemp("fshome_")
    port = free_port()
    cmd = [SCRIPT, "--no-ui", "--no-install", "--home", home, "--port", str(port), out]
    h.log("running: " + " ".join(cmd))
    log = open(os.path.join(home, "..", "flamescope.log"), "w+")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    h.on_cleanup("flamescope", lambda: h._kill_pid_and_wait(proc, 5))
    url = "http://127.0.0.1:%d/" % port
    deadline = time.monotonic() + 120
    listed = None
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            listed = get_json(url + "profile/", timeout=5)
            break
        except OSError:
            time.sleep(0.3)
    log.seek(0)
    text = log.read()
    if not t.check(listed is not None, "the server answers at %s" % url, text[-3000:]):
        return
    t.check("flamescope: open %s\n" % url in text, "the script prints the URL")
    t.check("serving %s\n" % out in text, "the script says which directory it serves")
    t.eq(sorted(e["filename"] for e in listed), files,
         "the profile list is the daemon's files, the manifest left out")
    t.check(all(e["type"] == "perf" for e in listed), "every file is read as perf")
    name = files[0]
    hm = get_json(url + "heatmap/?" + urllib.parse.urlencode({"filename": name,
                                                              "type": "perf"}))
    t.check({"rows", "columns", "values"} <= set(hm), "a heat map of %s" % name)
    total = sum(map(sum, hm.get("values", [])))
    t.check(total > 0 and total == hm.get("samples"),
            "its cells count its samples (%s of %s)" % (total, hm.get("samples")))
    t.check(os.path.exists(os.path.join(home)) and any(
        os.path.exists(os.path.join(home, d, "app", "perf", "samples.py"))
        for d in os.listdir(home)), "the checkout in --home holds the patches")
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    t.check(proc.poll() is not None, "the server stops on SIGTERM")


if __name__ == "__main__":
    if not os.environ.get("FLAMESCOPE_SRC"):
        print("SKIP: FLAMESCOPE_SRC is not set (a stock Flamescope checkout)")
        sys.exit(77)
    h.run(main)
