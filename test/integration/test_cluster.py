#!/usr/bin/env python3
"""--cluster NODE: the node and every node in its nodes(), followed.

Three nodes joined with net_kernel:connect_node; --cluster names one
(with its cookie file, NAME@HOST=PATH). The other two are found in its
nodes() and attached; a fourth joins mid-run and is attached too; one of
the three is killed, and is said to have left the cluster. A node with
the same cookie that never joins the cluster is not touched, nor is one
that --discover-match leaves out. Then SIGTERM: exit 0, every attached
node's files complete under OUT/<node>/ and holding samples, and
flame_prof's heat map of OUT puts every node's samples in one grid with
the table of nodes under it (one node's, with --where node=, without).
Usage errors of --cluster get one line and exit 64.
"""
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def join(node, other):
    got = node.eval("net_kernel:connect_node('%s')" % other.name)
    if got.strip() != "true":
        h.fail("%s could not join %s: %s" % (node.name, other.name, got))


def flame_prof(*args):
    exe = os.environ.get("FLAME_PROF") or os.path.join(
        h.REPO, "build", "flame_prof", "flame_prof")
    p = subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def merged_view(t, out, names):
    """One heat map of every node's files, by wall-clock time."""
    svg = os.path.join(out, "..", "merged.svg")
    rc, _, err = flame_prof("heatmap", "-o", svg, out)
    t.eq(rc, 0, "flame_prof heatmap of the cluster's directory: exit 0 (%s)" % err.strip())
    with open(svg) as f:
        text = f.read()
    t.check(">%d nodes, " % len(names) in text, "the heat map says it holds %d nodes"
            % len(names))
    notes = re.findall(r'<text class="note"[^>]*>([^<]*)</text>', text)
    for name in names:
        t.check(any(n.startswith(name + " ") for n in notes),
                "the table under the heat map has a row of %s" % name)
    t.check(any(re.search(r"\(fpclu\S+ \d+, fpclu\S+ \d+", c)
                for c in re.findall(r"<title>([^<]*)</title>", text)),
            "a cell of the one grid holds samples of two nodes")
    rc, _, err = flame_prof("heatmap", "--where", "node=" + names[0], "-o", svg, out)
    with open(svg) as f:
        text = f.read()
    t.check(rc == 0 and "class=\"note\"" not in text and names[1] not in text,
            "--where node= leaves one node's heat map, without the table")


def usage_errors(t, a, b):
    cases = [
        (["--cluster", a.name, "--cluster", b.name], "one --cluster"),
        (["--cluster", a.name, "--pid", "<0.1.0>"], "--pid"),
        (["--cluster", "nohost"], "host part"),
    ]
    for args, want in cases:
        rc, _, se = h.run_daemon(args + ["--cookie-file", a.cookie_file,
                                         "--duration", "1s"], timeout=20)
        errs = h.error_lines(se)
        t.check(rc == 64 and len(errs) == 1 and want in errs[0],
                "usage error %s: exit 64, one line" % " ".join(args),
                "rc=%s %r" % (rc, errs))


def main(t):
    start = time.monotonic()
    prefix = "fpclu%d" % os.getpid()
    cookie = h.random_cookie()
    # alone: same cookie, never in the cluster; x_skip: in the cluster,
    # left out by --discover-match
    nodes = [h.Node(name=prefix + s, cookie=cookie, idle=50, busy=1)
             for s in ("a", "b", "c", "alone", "x_skip")]
    # booted together, from this thread (a node dies with the thread
    # that started it)
    for n in nodes:
        n.start(wait=False)
    for n in nodes:
        n.wait_up()
    a, b, c, alone, skip = nodes
    h.log("nodes up after %.1f s" % (time.monotonic() - start))
    usage_errors(t, a, b)
    for n in (b, c, skip):
        join(n, a)

    out = h.mkdtemp("out_")
    args = ["--cluster", "%s=%s" % (a.name, a.cookie_file),
            "--discover-match", prefix + "[a-d]*",
            "--out", out, "--top", "5", "--rate", "20", "--every", "1s",
            "--timeout", "2s", "--compress", "none"]
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    d = h.start_daemon(args)
    d.wait_log(r"info: \[%s\] connected to " % re.escape(a.name), timeout=15)
    for n in (b, c):
        d.wait_log(r"info: --cluster: %s found" % re.escape(n.name), timeout=15)
    # sampled before one of them leaves
    for n in (a, b, c):
        d.wait_log(r"info: \[%s\] interval: selected=\d+ pinned=0 samples=[1-9]"
                   % re.escape(n.name), timeout=20)

    # a fourth node joins the cluster mid-run, through a node that is
    # not the one named
    h.log("three attached after %.1f s" % (time.monotonic() - start))
    # one node leaves while a fourth boots and joins through a node that
    # is not the one named
    e = h.Node(name=prefix + "d", cookie=a.cookie, idle=50, busy=1).start(wait=False)
    c.kill()
    e.wait_up()
    join(e, b)
    d.wait_log(r"info: --cluster: %s no longer in the nodes\(\) of " % re.escape(c.name),
               timeout=15)
    d.wait_log(r"warning: \[%s\] lost connection to " % re.escape(c.name), timeout=15)
    d.wait_log(r"info: --cluster: %s found" % re.escape(e.name), timeout=15)
    d.wait_log(r"info: \[%s\] interval: selected=\d+ pinned=0 samples=[1-9]"
               % re.escape(e.name), timeout=20)
    t.check(d.poll() is None, "flame_profd runs on after a node left the cluster")
    rc = d.stop()
    t1 = time.time()
    h.log("daemon stopped after %.1f s" % (time.monotonic() - start))
    se = d.read_stderr()
    if not t.eq(rc, 0, "exit 0 after SIGTERM"):
        h.log(se[-3000:])
    t.eq(h.error_lines(se), [], "no error lines")

    names = [a.name, b.name, c.name, e.name]
    t.eq(sorted(os.listdir(out)), sorted(h.sanitize_node(n) for n in names),
         "one directory per cluster node, none for the node left out or alone")
    for name in names:
        if not h.check_output(t, out, name, t0, t1, min_samples=5):
            h.log("\n".join(l for l in se.splitlines() if name in l))
    for n in (alone, skip):
        t.check(not any(n.name in l for l in se.splitlines()),
                "%s is not attached" % n.sname)
    merged_view(t, out, names)


if __name__ == "__main__":
    h.run(main)
