#!/usr/bin/env python3
"""flame_profd profiles a live demo node for a fixed duration.

Checks: exit 0; only final files under OUT/<node>/; the strict grammar;
deep recognisable stacks (fp_demo:busy_loop/1 -> 20 x fp_demo:deep/2);
status values; metric sanity (memory > 0, reductions delta >= 0, the
fp_demo_sink mailbox, fp_demo_bin binaries); registered_name /
initial_call fields; quoted-atom escaping; timestamps.
"""
import os
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

QUOTED = "fp_demo:" + h.quote_atom("fp demo quoted") + "/1"
QUOTED2 = "fp_demo:" + h.quote_atom("fp+demo;semi'q\\") + "/1"


def main(t):
    node = h.start_node(idle=1000)
    out = h.mkdtemp("out_")
    pinned = ["fp_demo_sink", "fp_demo_server", "fp_demo_quoted", "fp_demo_bin"]
    args = h.daemon_args(node, out, top=20, rate=20, every="1s", duration="6s",
                         backtrace_depth=64, name=pinned)
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    rc, so, se = h.run_daemon(args, timeout=45)
    t1 = time.time()
    h.log("  exited %d after %.1fs" % (rc, t1 - t0))
    if not t.eq(rc, 0, "exit code 0 after --duration"):
        h.log(se[-4000:])
    t.check(5 <= t1 - t0 <= 20, "ran for about --duration (%.1fs)" % (t1 - t0))
    t.eq(h.error_lines(se), [], "no error lines on stderr")
    t.check(node.cookie not in so + se, "cookie not in stdout/stderr")
    msgs = [m for _, _, m in h.log_lines(se)]
    t.check(any(m.startswith("connected to " + node.name) for m in msgs),
            "log: connected to %s" % node.name)
    iv = h.intervals(se)
    t.check(len(iv) >= 3, "log: >= 3 interval lines (%d)" % len(iv))
    pins = [int(x.get("pinned", -1)) for x in iv]
    t.check(pins and max(pins) == len(pinned) and set(pins) <= {0, len(pinned)},
            "log: pinned=%d in interval lines (0 allowed before the first selection)"
            % len(pinned), str(pins))
    sel = [int(x.get("selected", -1)) for x in iv]
    t.check(sel and max(sel) <= 20 and max(sel) > 0, "log: 0 < selected <= 20", str(sel))

    files = h.check_output(t, out, node, t0, t1, min_samples=20)
    samples = h.all_samples(files)
    if not samples:
        h.fail("no samples")
    h.log("  %d files, %d samples, %d pids" % (len(files), len(samples),
                                              len({s["pid"] for s in samples})))

    # stacks
    frames = [n for s in samples for n in s["frames"]]
    t.check("fp_demo:deep/2" in frames, "fp_demo:deep/2 sampled")
    t.check("fp_demo:busy_loop/1" in frames, "fp_demo:busy_loop/1 sampled")
    full = [s for s in samples if s["frames"] and s["frames"][-1] == "fp_demo:busy_loop/1"
            and s["frames"].count("fp_demo:deep/2") == 20]
    t.check(full, "a complete busy stack: busy_loop/1 at the root, 20 x deep/2 above it")
    if full:
        f = full[0]["frames"]
        t.check(f.index("fp_demo:crunch/1") < f.index("fp_demo:deep/2") or
                "fp_demo:crunch/1" not in f, "leaf first: crunch/1 before deep/2")
    t.check(any(n.startswith("gen_server:") for n in frames), "gen_server frames sampled")
    fp_files = {fl for s in samples for n, fl in zip(s["frames"], s["frame_files"])
                if n.startswith("fp_demo:")}
    t.check(fp_files and all(fl.endswith("fp_demo.erl") for fl in fp_files),
            "fp_demo frames point at fp_demo.erl", str(sorted(fp_files)[:3]))

    # statuses (the parser already rejects unknown ones)
    st = sorted({s["status"] for s in samples})
    t.check(set(st) <= set(h.STATUSES), "statuses are process status atoms: %s" % st)

    # metrics
    t.check(all(s["metrics"]["memory"][0] > 0 for s in samples), "memory > 0 in every sample")
    t.check(all(s["metrics"]["reductions"][1] >= 0 for s in samples),
            "reductions delta >= 0 in every sample")
    t.check(all(s["metrics"]["total_heap_size"][0] >= s["metrics"]["heap_size"][0]
                for s in samples), "total_heap_size >= heap_size")
    by_name = {}
    for s in samples:
        rn = s["fields"].get("registered_name")
        if rn:
            by_name.setdefault(rn, []).append(s)
    for rn in pinned + ["fp_demo_busy"]:
        t.check(rn in by_name, "registered_name %s appears" % rn)
    sink = by_name.get("fp_demo_sink", [])
    mq = max([s["metrics"]["message_queue_len"][0] for s in sink] or [0])
    t.check(mq >= 1000, "fp_demo_sink message_queue_len large (max %d)" % mq)
    bins = by_name.get("fp_demo_bin", [])
    bb = [s["metrics"]["binary_bytes"] for s in bins]
    t.check(bb and max(v for v, _ in bb) > 64 * 1024, "fp_demo_bin binary_bytes > 64 KiB",
            str(bb[:5]))
    t.check(len({v for v, _ in bb}) > 1 or any(d != 0 for _, d in bb[1:]),
            "fp_demo_bin binary_bytes moves")
    busy = by_name.get("fp_demo_busy", [])
    red = [s["metrics"]["reductions"] for s in busy]
    t.check(any(d > 0 for _, d in red), "fp_demo_busy reductions delta > 0")
    multi = {rn: sorted({s["pid"] for s in ss}) for rn, ss in by_name.items()
             if len({s["pid"] for s in ss}) != 1}
    t.eq(multi, {}, "each registered name maps to one pid")
    # deltas: if the daemon defines DELTA as change since the previous sample
    # of the same pid, these agree; reported, not enforced (not in contract)
    prev, agree, total = {}, 0, 0
    for f in files:
        for s in f.samples:
            v, d = s["metrics"]["reductions"]
            if s["pid"] in prev:
                total += 1
                agree += (v - prev[s["pid"]] == d)
            prev[s["pid"]] = v
    h.log("  info: reductions DELTA == value - previous sample's value in %d/%d cases"
          % (agree, total))

    # fields
    srv = by_name.get("fp_demo_server", [])
    srv_pid = node.pid_of("fp_demo_server").strip("<>")
    t.check(srv and srv[0]["pid"] == srv_pid, "fp_demo_server sample pid %s" % srv_pid)
    ics = {s["fields"].get("initial_call") for s in busy} - {None}
    t.check(not ics or ics == {"fp_demo:busy_loop/1"},
            "fp_demo_busy initial_call is fp_demo:busy_loop/1 (%s)" % sorted(ics))
    t.check(any("initial_call" in s["fields"] for s in samples), "initial_call field appears")

    # quoted atoms
    q = by_name.get("fp_demo_quoted", [])
    qframes = {n for s in q for n in s["frames"]}
    t.check(QUOTED in qframes, "quoted function name written as %s" % QUOTED,
            str(sorted(qframes)[:6]))
    t.check(QUOTED2 in qframes, "quoted function name written as %s" % QUOTED2)
    anon = [n for s in samples for n in s["frames"] if "-fun-" in n or "-Loop/" in n]
    t.check(anon, "anonymous fun frames appear (%s)" % sorted(set(anon))[:3])

    lines_and_rotation(t, node)


def source_line(pattern, after=None):
    """1-based line of the first line in fp_demo.erl containing pattern
    (after the first line containing `after`, if given)."""
    with open(h.FP_DEMO_SRC) as f:
        lines = f.read().split("\n")
    start = 0
    if after:
        start = next(i for i, l in enumerate(lines) if after in l)
    return next(i + 1 for i, l in enumerate(lines) if i >= start and pattern in l)


def lines_and_rotation(t, node):
    """--lines writes MOD:FUN/ARITY:LINE; --rotate 1s splits the output."""
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, rate=20, every="1s", duration="3500ms", rotate="1s",
                         backtrace_depth=64, lines=True, name=["fp_demo_busy", "fp_demo_quoted"])
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    rc, so, se = h.run_daemon(args, timeout=40)
    t1 = time.time()
    if not t.eq(rc, 0, "--lines/--rotate run: exit code 0"):
        h.log(se[-3000:])
    files = h.check_output(t, out, node, t0, t1, min_samples=5)
    t.check(len(files) >= 3, "--rotate 1s over 3.5s: >= 3 files (%d)" % len(files))
    t.check(all(f.samples for f in files[:-1]), "every rotated file but the last has samples",
            str([len(f.samples) for f in files]))
    stamps = [h.file_stamp(f.path) for f in files]
    t.check(stamps == sorted(stamps) and len(set(stamps)) == len(stamps),
            "file name timestamps strictly increasing")
    nonempty = [f.samples for f in files if f.samples]
    t.check(all(a[-1]["ts"] <= b[0]["ts"] for a, b in zip(nonempty, nonempty[1:])),
            "samples ordered across rotated files")
    samples = h.all_samples(files)
    fp = [n for s in samples for n in s["frames"] if n.startswith("fp_demo:")]
    t.check(fp and all(n.count(":") == 2 for n in fp), "--lines: fp_demo frames end in :LINE",
            str([n for n in fp if n.count(":") != 2][:3]))
    deep_lines = {int(n.rsplit(":", 1)[1]) for n in fp if n.startswith("fp_demo:deep/2:")}
    want = {source_line("1 + deep(N - 1, Work)"), source_line("2 + deep(N - 1, Work)")}
    # (a leaf deep/2 frame may also sit on its first clause, before the tail call)
    allowed = want | set(range(source_line("deep(0, Work) ->"), min(want)))
    t.check(want <= deep_lines <= allowed, "--lines: deep/2 lines are its two call sites %s"
            % sorted(want), "got %s" % sorted(deep_lines))
    busy = {int(n.rsplit(":", 1)[1]) for n in fp if n.startswith("fp_demo:busy_loop/1:")}
    call = source_line("_ = deep(Depth, Work)", "busy_loop(#{")
    # (as the leaf frame busy_loop/1 may be anywhere in its 4-line body)
    t.check(call in busy and busy <= set(range(call - 1, call + 3)),
            "--lines: busy_loop/1 at its call site, line %d" % call, "got %s" % sorted(busy))
    q = "fp_demo:" + h.quote_atom("fp demo quoted") + "/1:"
    t.check(any(n.startswith(q) for n in fp), "--lines: quoted name keeps its :LINE")


if __name__ == "__main__":
    h.run(main)
