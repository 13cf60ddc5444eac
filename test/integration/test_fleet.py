#!/usr/bin/env python3
"""One flame_profd profiles several nodes, each in a session of its own.

Two nodes are given with --node (one with its own cookie file,
NAME@HOST=PATH, one with --cookie-file); a third, started after the
daemon, is found by --discover localhost --discover-match, then killed
and started again under its name, and must be reattached. A node that
--discover-match leaves out must not be touched. Then SIGTERM: exit 0,
every node's files complete under OUT/<node>/ holding only that node's
samples, a manifest per node naming it, interval lines per node, and the
node's backtrace_depth back as it was. A second run over two nodes with a
tiny --max-overhead: each node's own budget brings its rate down. Usage
errors of several nodes get one line and exit 64.
"""
import json
import os
import re
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def manifest(out, name):
    with open(os.path.join(out, h.sanitize_node(name), "manifest.json")) as f:
        return json.load(f)


def node_lines(stderr, name):
    """Log messages of one node: the lines tagged [name]."""
    tag = "[%s] " % name
    return [m[len(tag):] for _, _, m in h.log_lines(stderr) if m.startswith(tag)]


def wait_node_samples(d, name, after, timeout=15):
    """Wait for an interval line of node name with samples, after its
    last line starting with after."""
    deadline = time.monotonic() + timeout
    while True:
        lines = node_lines(d.read_stderr(), name)
        idx = [i for i, l in enumerate(lines) if l.startswith(after)]
        # selected: the new connection's own selection (the first line
        # after a reconnect can count samples taken before the loss)
        if idx and any(re.match(r"interval: selected=[1-9]\d* pinned=0 samples=[1-9]", l)
                       for l in lines[idx[-1] + 1:]):
            return
        if d.poll() is not None or time.monotonic() > deadline:
            h.fail("no interval with samples of %s after /%s/; stderr:\n%s"
                   % (name, after, d.read_stderr()[-4000:]))
        time.sleep(0.1)


def budgets(t, a, b):
    """Each node's budget is its own: a tiny --max-overhead brings each
    node's rate down, said in its log lines and counted in its manifest."""
    out = h.mkdtemp("out_")
    args = ["--node", a.name, "--node", "%s=%s" % (b.name, b.cookie_file),
            "--cookie-file", a.cookie_file, "--out", out, "--top", "10",
            "--rate", "20", "--every", "1s",
            "--compress", "none", "--max-overhead", "0.001"]

    def throttled(d):
        # until each node's budget has brought its rate down
        for n in (a, b):
            d.wait_log(r"info: \[%s\] budget: cost .* over budget .*: rate 20 -> "
                       % re.escape(n.name), timeout=30)

    rc, _, se = h.run_daemon_until(args, throttled)
    t.eq(rc, 0, "budget run of two nodes: exit 0")
    for n in (a, b):
        lines = node_lines(se, n.name)
        t.check(any(re.match(r"budget: cost .* over budget .*: rate 20 -> [0-9.]+/s", l)
                    for l in lines), "%s: its budget brings its rate down" % n.sname)
        t.check(sum(e["throttle_events"] for e in manifest(out, n.name)["files"]) >= 1,
                "%s: its budget's changes counted in its manifest" % n.sname)


def usage_errors(t, a, b):
    cases = [
        (["--node", a.name, "--node", b.name, "--pid", "<0.1.0>"], "--pid"),
        (["--node", a.name, "--discover", "localhost", "--perf", "auto"], "--perf"),
        (["--node", a.name, "--node", a.name], "given twice"),
        (["--discover-match", "x*", "--node", a.name], "--discover-match"),
        (["--node", a.name + "="], "COOKIE_FILE"),
    ]
    for args, want in cases:
        rc, _, se = h.run_daemon(args + ["--cookie-file", a.cookie_file,
                                         "--duration", "1s"], timeout=20)
        errs = h.error_lines(se)
        t.check(rc == 64 and len(errs) == 1 and want in errs[0],
                "usage error %s: exit 64, one line" % " ".join(args[-2:]),
                "rc=%s %r" % (rc, errs))


def main(t):
    # cookies: a and c share one (--cookie-file, and what --discover's
    # nodes are reached with), b has its own (NAME@HOST=PATH)
    a = h.start_node(idle=100, busy=2)
    b = h.start_node(idle=100, busy=2)
    usage_errors(t, a, b)
    prefix = "fpfleet%d" % os.getpid()
    other = h.start_node(name=prefix + "x_other", cookie=a.cookie, idle=20, busy=1)
    depth0 = {n.sname: n.get_backtrace_depth() for n in (a, b, other)}
    out = h.mkdtemp("out_")
    args = ["--node", a.name, "--node", "%s=%s" % (b.name, b.cookie_file),
            "--cookie-file", a.cookie_file,
            "--discover", "localhost", "--discover-match", prefix + "c*",
            "--out", out, "--top", "5", "--rate", "20", "--every", "1s",
            "--rotate", "1m", "--timeout", "2s", "--compress", "none"]
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    d = h.start_daemon(args)
    for n in (a, b):
        d.wait_log(r"info: \[%s\] connected to " % re.escape(n.name), timeout=15)

    c1 = h.Node(name=prefix + "c", cookie=a.cookie, idle=100, busy=2).start()
    cname = c1.sname + "@localhost"
    d.wait_log(r"info: --discover: %s found" % re.escape(cname), timeout=15)
    d.wait_log(r"info: \[%s\] connected to " % re.escape(cname), timeout=15)
    d.wait_log(r"info: \[%s\] interval: selected=\d+ pinned=0 samples=[1-9]"
               % re.escape(cname), timeout=15)

    c1.kill()
    t_kill = time.time()
    d.wait_log(r"warning: \[%s\] lost connection to " % re.escape(cname), timeout=15)
    t.check(c1.wait_unregistered(), "killed node gone from epmd")
    time.sleep(1.0)
    t.check(d.poll() is None, "flame_profd runs on while a node is away")
    c2 = h.Node(name=c1.sname, cookie=a.cookie, idle=100, busy=2).start()
    t_back = time.time()
    re_ = d.wait_log(r"info: \[%s\] reconnected to " % re.escape(cname), timeout=15)
    t.check(re_, "restarted node reattached")
    wait_node_samples(d, cname, after="reconnected to ")
    rc = d.stop()
    t1 = time.time()
    se = d.read_stderr()
    if not t.eq(rc, 0, "exit 0 after SIGTERM"):
        h.log(se[-3000:])
    t.eq(h.error_lines(se), [], "no error lines")

    names = [a.name, b.name, cname]
    subdirs = sorted(os.listdir(out))
    t.eq(subdirs, sorted(h.sanitize_node(n) for n in names),
         "one directory per node, none for the node --discover-match leaves out")
    for name in names:
        files = h.check_output(t, out, name, t0, t1, min_samples=10)
        m = manifest(out, name)
        t.eq(m.get("node"), name, "manifest of %s names it" % name)
        listed = [f.get("name") for f in m.get("files", [])]
        t.eq(sorted(listed), sorted(os.path.basename(f.path) for f in files),
             "manifest of %s lists its files" % name)
        lines = node_lines(se, name)
        t.check(any(l.startswith("interval: ") for l in lines),
                "interval lines of %s are tagged with it" % name)
        t.check(any(l.startswith("stopped: ") for l in lines),
                "%s's summary line is tagged with it" % name)
    # the files of each node hold its own samples: each node's comm is
    # its own node name in the header, and no file is in two directories
    for name in names:
        final, _, _ = h.output_files(out, name)
        for p in final:
            with open(p, errors="replace") as f:
                head = f.read(4096)
            t.check(name in head, "%s's file %s names it" % (name, os.path.basename(p)))
            for o in names:
                if o != name:
                    t.check(o not in head, "%s's file does not name %s" % (name, o))

    cfiles = h.output_files(out, cname)[0]
    late = [s for p in cfiles for s in h.parse_perf(p).samples if s["ts"] >= t_back]
    early = [s for p in cfiles for s in h.parse_perf(p).samples if s["ts"] <= t_kill]
    if not t.check(early and late, "the restarted node has samples from before and "
                   "after (%d, %d)" % (len(early), len(late))):
        h.log("\n".join(node_lines(se, cname)))
    t.check(any("lost connection" in l for l in node_lines(se, cname)),
            "the loss is told as %s's" % cname)
    for n in (a, b, other):
        t.eq(n.get_backtrace_depth(), depth0[n.sname],
             "%s: backtrace_depth as it was" % n.sname)
    t.check(not any(other.sname in l for l in se.splitlines()),
            "the node --discover-match leaves out is not attached")
    c2.stop()
    budgets(t, a, b)


if __name__ == "__main__":
    h.run(main)
