#!/usr/bin/env python3
"""Self-test of the integration harness; does not need flame_profd.

Checks the strict perf-script parser on a hand-made file (and that it
rejects off-grammar variants), atom quoting helpers, and the node
lifecycle: private epmd, node start/eval/kill/restart, cleanup; a node
started with +JPperf true leaves no /tmp/perf-PID.map once stopped or
killed (also one in its own pid namespace, whose map is named by pid 1
there).
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

M = "\t".join("metric_erlang_%s: %d, %d" % (n, v, d) for n, v, d in [
    ("reductions", 123456, 2000), ("memory", 10240, -512), ("message_queue_len", 0, 0),
    ("total_heap_size", 987, 0), ("heap_size", 376, 0), ("stack_size", 40, -3),
    ("binary_bytes", 0, 0), ("minor_gcs", 12, 1)])

GOOD = (
    "# ========\n"
    "# captured on    : 2026-11-21T07:50:00Z\n"
    "# flame_profd node: demo@vm\n"
    "# ========\n"
    "running 87/0 [000] 1700000000.000100: cpu-clock:\t" + M +
    "\tregistered_name: fp_demo_busy\tinitial_call: fp_demo:busy_loop/1\n"
    "\t0000000000000000 fp_demo:'-crunch/1-fun-0-'/2 (/src/fp_demo.erl)\n"
    "\t0000000000000001 lists:foldl_1/3 (lists.erl)\n"
    "\t0000000000000002 fp_demo:deep/2 (/src/fp_demo.erl)\n"
    "\t0000000000000003 fp_demo:busy_loop/1 (/src/fp_demo.erl)\n"
    "\n"
    "# flame_profd: interval 2 selected=5\n"
    "runnable 91/0 [000] 1700000000.250000: cpu-clock:\t" + M +
    "\tregistered_name: fp_demo_quoted\n"
    "\t00000000000000aa fp_demo:deep/2 (/src/fp_demo.erl)\n"
    "\t00000000000000ab fp_demo:'fp+demo;semi\\'q\\\\'/1 (/src/fp_demo.erl)\n"
    "\t00000000000000ac fp_demo:'fp demo quoted'/1 (unknown)\n"
    "\n"
    "waiting 96/0 [000] 1700000000.250000: cpu-clock:\t" + M + "\n"
    "\n"
)
# GOOD above is written the way Erlang's io_lib would print the atoms;
# the contract wants \xHH escapes instead -- fix that up:
GOOD = (GOOD.replace("'fp+demo;semi\\'q\\\\'", "'fp\\x2Bdemo\\x3Bsemi\\x27q\\x5C'")
            .replace("'fp demo quoted'", "'fp\\x20demo\\x20quoted'"))

# (description, transform of GOOD) -> must be rejected
BAD = [
    ("blank line after header", lambda s: s.replace("# ========\nrunning", "# ========\n\nrunning", 1)),
    ("missing final blank line", lambda s: s[:-1]),
    ("no trailing newline", lambda s: s[:-2]),
    ("comment inside a sample", lambda s: s.replace("\t0000000000000001", "# x\n\t0000000000000001", 1)),
    ("unknown status", lambda s: s.replace("runnable 91/0", "sleeping 91/0", 1)),
    ("pid as 0.N.S", lambda s: s.replace("running 87/0", "running 0.87.0", 1)),
    ("3 decimals", lambda s: s.replace("1700000000.000100:", "1700000000.000:", 1)),
    ("cpu index", lambda s: s.replace("[000]", "[001]", 1)),
    ("metric missing", lambda s: s.replace("\tmetric_erlang_minor_gcs: 12, 1", "", 1)),
    ("metric order", lambda s: s.replace("metric_erlang_heap_size", "metric_erlang_XX", 1)
     .replace("metric_erlang_total_heap_size", "metric_erlang_heap_size", 1)
     .replace("metric_erlang_XX", "metric_erlang_total_heap_size", 1)),
    ("metric not integer", lambda s: s.replace("metric_erlang_memory: 10240", "metric_erlang_memory: 10.2", 1)),
    ("fields order", lambda s: s.replace(
        "\tregistered_name: fp_demo_busy\tinitial_call: fp_demo:busy_loop/1",
        "\tinitial_call: fp_demo:busy_loop/1\tregistered_name: fp_demo_busy", 1)),
    ("unknown field", lambda s: s.replace("\tregistered_name: fp_demo_quoted", "\tcurrent: x", 1)),
    ("raw space in quoted atom", lambda s: s.replace("'fp\\x20demo\\x20quoted'", "'fp demo quoted'", 1)),
    ("raw ; in quoted atom", lambda s: s.replace("\\x3B", ";", 1)),
    ("raw + in quoted atom", lambda s: s.replace("\\x2B", "+", 1)),
    ("lowercase hex escape", lambda s: s.replace("\\x2B", "\\x2b", 1)),
    ("unquoted atom with space", lambda s: s.replace("'fp\\x20demo\\x20quoted'", "fp demo quoted", 1)),
    ("unquoted reserved word", lambda s: s.replace("fp_demo:deep/2 (", "fp_demo:receive/2 (", 1)),
    ("frame without file", lambda s: s.replace(" (lists.erl)", "", 1)),
    ("frame with 8-digit address", lambda s: s.replace("\t0000000000000001", "\t00000001", 1)),
    ("frame indented with spaces", lambda s: s.replace("\t0000000000000001", "    0000000000000001", 1)),
    ("CRLF", lambda s: s.replace("\n", "\r\n")),
    ("file ends inside sample", lambda s: s[:-2] + "\n"),
]


def write(path, text):
    with open(path, "w", newline="") as f:
        f.write(text)
    return path


def test_parser(t):
    log = h.log
    log("parser: hand-made file that follows the grammar")
    d = h.mkdtemp("parser_")
    good = write(os.path.join(d, "good.perf"), GOOD)
    pf = h.parse_perf(good)
    t.eq(len(pf.samples), 3, "3 samples parsed")
    t.eq(len(pf.comments), 5, "5 comment lines")
    s0, s1, s2 = pf.samples
    t.eq(s0["status"], "running", "status")
    t.eq(s0["pid"], "0.87.0", "pid")
    t.eq(s0["ts"], 1700000000.0001, "timestamp")
    t.eq(s0["metrics"]["memory"], (10240, -512), "metric value/delta (negative delta)")
    t.eq(s0["fields"], {"registered_name": "fp_demo_busy", "initial_call": "fp_demo:busy_loop/1"},
         "optional fields")
    t.eq(s0["frames"][0], "fp_demo:'-crunch/1-fun-0-'/2", "leaf frame first")
    t.eq(s0["frames"][-1], "fp_demo:busy_loop/1", "root frame last")
    t.eq(s0["frame_files"][1], "lists.erl", "frame file")
    t.eq(s1["frames"][1], "fp_demo:" + h.quote_atom("fp+demo;semi'q\\") + "/1",
         "quote_atom matches the contract's escaping")
    t.eq(h.decode_atom(h.quote_atom("fp demo quoted")), "fp demo quoted", "decode_atom round trip")
    t.eq(h.quote_atom("receive"), "'receive'", "reserved words get quoted")
    t.eq(h.quote_atom("a@b_C1"), "a@b_C1", "plain atoms stay unquoted")
    t.eq(s2["frames"], [], "a sample without frames is allowed")
    t.eq(s2["fields"], {}, "no optional fields")
    for what, fn in BAD:
        p = write(os.path.join(d, "bad.perf"), fn(GOOD))
        if fn(GOOD) == GOOD:
            t.check(False, "mutation applies: " + what)
            continue
        try:
            h.parse_perf(p)
            t.check(False, "rejects: " + what)
        except h.ParseError as e:
            t.check(True, "rejects: %s (%s)" % (what, str(e).split(": ", 2)[1]))
    t.eq(len(h.parse_perf(write(os.path.join(d, "empty.perf"), "")).samples), 0,
         "empty file parses to no samples")
    t.eq(len(h.parse_perf(write(os.path.join(d, "hdr.perf"), "# only\n# comments\n")).samples), 0,
         "comment-only file parses to no samples")


def test_names(t):
    h.log("output file names")
    t.eq(h.sanitize_node("app@host"), "app@host", "sanitize keeps @")
    t.eq(h.sanitize_node("a b/c@h"), "a_b_c@h", "sanitize replaces other chars")
    d = h.mkdtemp("out_")
    nd = os.path.join(d, "app@host")
    os.mkdir(nd)
    for n in ("app@host.20261121T075000.123Z.perf", ".app@host.20261121T075005.000Z.perf.partial",
              "junk.txt"):
        open(os.path.join(nd, n), "w").close()
    final, partial, other = h.output_files(d, "app@host")
    t.eq([os.path.basename(p) for p in final], ["app@host.20261121T075000.123Z.perf"], "final files")
    t.eq(len(partial), 1, "partial files")
    t.eq(len(other), 1, "other files")
    t.eq(h.file_stamp(final[0]), 1795247400.123, "file name timestamp")


def test_nodes(t):
    h.log("node lifecycle")
    ep = h.epmd()
    t.check(ep.port != 4369, "private epmd port %d" % ep.port)
    t.eq(os.environ.get("ERL_EPMD_PORT"), str(ep.port), "ERL_EPMD_PORT exported to children")
    t0 = time.monotonic()
    n = h.start_node(idle=500)
    h.log("  node %s up in %.1fs" % (n.name, time.monotonic() - t0))
    t.check(n.name.endswith("@" + h.short_hostname()), "full node name %s" % n.name)
    st = os.stat(n.cookie_file)
    t.eq(st.st_mode & 0o777, 0o400, "cookie file mode 0400")
    cmdline = open("/proc/%d/cmdline" % n.os_pid, "rb").read().decode(errors="replace")
    t.check(n.cookie not in cmdline, "cookie not on the node's command line")
    t.eq(n.eval("1 + 1"), "2", "eval")
    t.check(n.eval_int("erlang:system_info(process_count)") > 500, "idle processes exist")
    srv = n.pid_of("fp_demo_server")
    t.check(srv.startswith("<0."), "pid_of fp_demo_server = %s" % srv)
    a = n.eval_int("fp_demo:throughput()")
    time.sleep(0.5)
    b = n.eval_int("fp_demo:throughput()")
    t.check(b > a, "throughput increases (%d -> %d)" % (a, b))
    q = n.eval_int("element(2, process_info(whereis(fp_demo_sink), message_queue_len))")
    t.check(q > 1000, "fp_demo_sink queue is large (%d)" % q)
    old = n.set_backtrace_depth(12)
    t.eq(n.get_backtrace_depth(), 12, "backtrace_depth set (was %d)" % old)
    # the loop spends nearly all its time inside deep/2, not all of it:
    # a look that lands between two calls is tried again
    for _ in range(20):
        st = n.eval("[F || {M, F, _, _} <- element(2, process_info(whereis(fp_demo_quoted), "
                    "current_stacktrace)), M =:= fp_demo]")
        if "deep" in st:
            break
    t.check("deep" in st, "deep/2 on fp_demo_quoted's stack: %s" % st.replace("\n", " "))
    try:
        n.eval("erlang:error(oops)")
        t.check(False, "eval raises on error")
    except h.EvalError:
        t.check(True, "eval raises on error")
    t.check(n.sname in ep.names(), "node registered in private epmd")
    pid = n.os_pid
    n.kill()
    t.check(not os.path.exists("/proc/%d/cmdline" % pid) or
            open("/proc/%d/cmdline" % pid, "rb").read() == b"", "node killed by pid")
    t.check(n.wait_unregistered(), "killed node unregistered from epmd")
    n2 = h.Node(name=n.sname, cookie=n.cookie, idle=10).start()
    t.eq(n2.name, n.name, "restarted with the same name")
    n2.stop()
    t.check(not n2.alive(), "graceful stop")
    for sig, want_rc in ((signal.SIGTERM, 1), (signal.SIGKILL, -signal.SIGKILL)):
        check_child_cleanup(t, sig, want_rc)
    check_perf_maps(t)


def check_perf_maps(t):
    """The perf map of a +JPperf node goes with the node, by the file it
    had open."""
    boxes = [("stop", []), ("kill", [])]
    unshare = shutil.which("unshare")
    if unshare and os.geteuid() == 0:
        boxes.append(("stop", [unshare, "--pid", "--fork", "--kill-child"]))
    else:
        h.log("  (no unshare(1) or not root: the pid namespace case is not run)")
    for how, wrapper in boxes:
        what = "%s%s" % (how, " (own pid namespace)" if wrapper else "")
        n = h.Node(idle=10, erl_args=["+JPperf", "true"], wrapper=wrapper).start()
        maps = n.perf_maps[n.proc.pid]
        path = "/tmp/perf-%d.map" % n.os_pid
        t.check([m[0] for m in maps] == [path] and os.path.exists(path),
                "%s: the running node has %s open" % (what, path), maps)
        getattr(n, how)()
        holders = [m[3] for m in maps]
        t.check(not n.alive() and
                not any(os.path.exists("/proc/%d/fd/%s" % (m[3], m[4])) for m in maps),
                "%s: the emulator is gone (%s)" % (what, holders))
        t.check(not os.path.exists(path) or os.stat(path).st_ino != maps[0][2],
                "%s: and so is its map" % what)


def check_child_cleanup(t, sig, want_rc):
    """A test process that gets `sig` leaves no node or epmd behind (SIGKILL:
    via PR_SET_PDEATHSIG, since no cleanup code can run)."""
    name = signal.Signals(sig).name
    h.log("cleanup when the test process gets %s" % name)
    code = ("import sys, time; sys.path.insert(0, %r); import harness as h\n"
            "def main(t):\n"
            "    n = h.start_node(idle=10)\n"
            "    print('PIDS', n.os_pid, h.epmd().proc.pid, flush=True)\n"
            "    time.sleep(60)\n"
            "h.run(main)\n" % os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, ERL_EPMD_PORT=""))
    pids = None
    for line in p.stdout:
        if line.startswith("PIDS"):
            pids = [int(x) for x in line.split()[1:]]
            break
    p.send_signal(sig)
    rest = p.stdout.read()
    rc = p.wait(timeout=30)
    t.check(pids is not None, "%s: child started a node and epmd" % name)
    t.eq(rc, want_rc, "%s: child exit status" % name)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_running(x) for x in pids or []):
        time.sleep(0.1)
    alive = [x for x in pids or [] if _running(x)]
    t.eq(alive, [], "%s: child's node and epmd are gone" % name + ("" if not alive else " " + rest))
    for x in alive:
        os.kill(x, signal.SIGKILL)


def _running(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[1][0] not in "ZX"
    except OSError:
        return False


def main(t):
    test_parser(t)
    test_names(t)
    test_nodes(t)


if __name__ == "__main__":
    h.run(main, needs_daemon=False)
