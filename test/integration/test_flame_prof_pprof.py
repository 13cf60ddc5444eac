#!/usr/bin/env python3
"""flame_prof pprof read by Google's pprof: Debian's `go tool pprof`
(package golang-go) with -top, -traces, -raw and -tags on profiles made
from flame_profd's real output (flamescope-fork-patches' fixtures: the
demo node, its idle samples, and an OTP 27 Elixir node with process
labels, a Logger key and callers) and the writer's golden files (quoted
names, escapes, a sample without frames).

Checked against flame_prof's own readings of the same files: the total
is `flame_prof top`'s samples: line, also under --status, --where,
--pid, --name and --from/--to; every function's flat and cum are top's
SELF and TOTAL over every sample; the stacks of -traces are
`flame_prof folded --no-status`'s; per pid, per status and per label
value the counts and the summed metric columns are the file's; the
period is the header's rate.

Skips (77) only without go (apt-get install golang-go, or
scripts/install-deps) or the built flame_prof.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp_cli  # noqa: E402
from fp_cli import FLAME_PROF, check, fixture, run, samples_of  # noqa: E402

SOURCE = os.environ.get("FP_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
REAL = os.path.join(SOURCE, "flamescope-fork-patches", "tests", "fixtures")
FILES = [os.path.join(REAL, "flame_profd-demo.perf"),
         os.path.join(REAL, "flame_profd-idle.perf"),
         os.path.join(REAL, "flame_profd-labels.perf"),
         fixture("demo.perf"),
         os.path.join(SOURCE, "test", "golden", "basic.perf")]
LABELS = os.path.join(REAL, "flame_profd-labels.perf")
STATUSES = "running,runnable,waiting,garbage_collecting,suspended,exiting,free,unknown,cpu"
METRICS = ["reductions", "memory", "message_queue_len", "total_heap_size", "heap_size",
           "stack_size", "binary_bytes", "minor_gcs"]

GO = shutil.which("go")
ENV = None


def pprof(args):
    p = subprocess.run([GO, "tool", "pprof"] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=ENV, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def make(tmp, path, extra=()):
    out = os.path.join(tmp, os.path.basename(path) + ".pb.gz")
    rc, _, err = run(["pprof", "-o", out] + list(extra) + [path])
    check(rc == 0 and err == "", "pprof %s %s: exit 0, quiet" % (" ".join(extra),
          os.path.basename(path)), "rc=%d %s" % (rc, err))
    return out


def file_samples(path):
    """[status, pid, {metric: (value, delta)}, {field: text}, frames]
    of each sample, read straight from the perf-script text."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if out and re.match(r"\t[0-9a-f]{16} ", line):
                out[-1][4] += 1
                continue
            m = re.match(r"(\S+) (\d+)[/.](\d+)(?:\.(\d+))? \[000\] \d+\.\d+: cpu-clock:(.*)", line)
            if not m:
                continue
            # 0.N.S (earlier files) or N/S
            num, serial = (m.group(3), m.group(4)) if m.group(4) else (m.group(2), m.group(3))
            fields, metrics = {}, {}
            for part in m.group(5).split("\t")[1:]:
                k, _, v = part.partition(": ")
                if k.startswith("metric_erlang_"):
                    a, b = v.split(", ")
                    metrics[k[len("metric_erlang_"):]] = (int(a), int(b))
                else:
                    fields[k] = v
            out.append([m.group(1), "<0.%s.%s>" % (num, serial), metrics, fields, 0])
    return out


def pprof_total(text):
    m = re.search(r"of (\d+) total", text)
    return int(m.group(1)) if m else -1


def parse_raw(text):
    """The samples of -raw: (values, labels text) each; and the header."""
    head, _, rest = text.partition("\nSamples:\n")
    lines = rest.split("\n")
    types = lines[0].split()
    samples = []
    for line in lines[1:]:
        if line.startswith("Locations"):
            break
        m = re.match(r"\s+(-?\d+(?:\s+-?\d+)*):", line)
        if m:
            samples.append([[int(v) for v in m.group(1).split()], ""])
        elif samples and line.strip():
            samples[-1][1] += line.strip() + " "
    return head, [t.split("/")[0].replace("[dflt]", "") for t in types], samples


def parse_traces(text):
    """-traces as {root;...;leaf: count}, and the labels of each trace."""
    stacks = collections.Counter()
    blocks = text.split("-----------+-------------------------------------------------------")
    labels = []
    for block in blocks[1:]:
        count, frames, labs = None, [], {}
        for line in block.split("\n"):
            m = re.match(r"\s+(\d+)   (.*)$", line)
            if count is None and m:
                count = int(m.group(1))
                frames.append(m.group(2))
            elif count is not None and line.startswith(" " * 13) and line.strip():
                frames.append(line.strip())
            elif count is None and ":" in line and line.strip():
                k, _, v = line.strip().partition(":")
                labs[k.strip()] = v.strip()
        if count is None:
            continue
        frames = [f for f in frames if f]
        if frames:
            stacks[";".join(reversed(frames))] += count
        labels.append((labs, count))
    return stacks, labels


def top_rows(text):
    """flame_prof top's rows: {function: (self, total)}."""
    rows = {}
    for line in text.split("\n"):
        m = re.match(r"\s+(\d+)\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+)$", line)
        if m:
            rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    return rows


def pprof_rows(text):
    """go tool pprof -top's rows: {function: (flat, cum)}."""
    rows = {}
    for line in text.split("\n"):
        m = re.match(r"\s+(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.+)$", line)
        if m:
            rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    return rows


def test_files(tmp):
    for path in FILES:
        name = os.path.basename(path)
        prof = make(tmp, path)
        want = file_samples(path)
        rc, top, _ = run(["top", "-n", "0", path])
        rc2, out, err = pprof(["-top", "-nodecount=100000", prof])
        check(rc == 0 and rc2 == 0, "%s: top and go tool pprof -top exit 0" % name, err)
        check(pprof_total(out) == samples_of(top) == len(want),
              "%s: pprof's total is top's samples: (%d)" % (name, len(want)),
              "pprof %d, top %d\n%s" % (pprof_total(out), samples_of(top), out[:600]))

        # every function's flat and cum are top's SELF and TOTAL over
        # every sample (--status: top then ranks idle samples too)
        _, top_all, _ = run(["top", "-n", "0", "--status", STATUSES, path])
        mine, theirs = top_rows(top_all), pprof_rows(out)
        check(mine == theirs and len(mine) > 0,
              "%s: flat/cum of %d functions are top's SELF/TOTAL" % (name, len(mine)),
              "only in top: %s\nonly in pprof: %s" % (
                  sorted(set(mine.items()) - set(theirs.items()))[:8],
                  sorted(set(theirs.items()) - set(mine.items()))[:8]))

        # -traces: the stacks of folded, root first, without the status
        rc, traces, err = pprof(["-traces", prof])
        stacks, _ = parse_traces(traces)
        _, folded, _ = run(["folded", "--no-status", path])
        fstacks = collections.Counter()
        for line in folded.splitlines():
            stack, _, n = line.rpartition(" ")
            fstacks[stack] += int(n)
        check(rc == 0 and stacks == fstacks and len(stacks) > 0,
              "%s: -traces has folded's %d stacks" % (name, len(fstacks)),
              "only in folded: %s\nonly in pprof: %s" % (
                  list((fstacks - stacks).items())[:4], list((stacks - fstacks).items())[:4]))

        # -raw: per pid and status the counts, and every metric column
        # summed, are the file's
        rc, raw, err = pprof(["-raw", prof])
        head, types, samples = parse_raw(raw)
        check(rc == 0 and types[:2] == ["samples", "reductions"] and
              "reductions_delta" in types and "minor_gcs_delta" in types and
              "memory_delta" not in types, "%s: -raw sample types" % name, types)
        by_pid, by_status = collections.Counter(), collections.Counter()
        sums = collections.Counter()
        for values, labs in samples:
            pid = re.search(r"pid:\[([^\]]*)\]", labs)
            status = re.search(r"status:\[([^\]]*)\]", labs)
            by_pid[pid.group(1) if pid else None] += values[0]
            by_status[status.group(1) if status else None] += values[0]
            for t, v in zip(types, values):
                sums[t] += v
        # -raw leaves out a sample without frames (-top counts it)
        framed = [s for s in want if s[4]]
        want_pid = collections.Counter(s[1] for s in framed)
        want_status = collections.Counter(s[0] for s in framed)
        check(by_pid == want_pid and by_status == want_status,
              "%s: samples per pid (%d) and per status (%d) survive" % (
                  name, len(want_pid), len(want_status)),
              "%s\n%s" % (by_pid, by_status))
        want_sums = collections.Counter()
        for _, _, metrics, _, _ in framed:
            for mname in METRICS:
                want_sums[mname] += metrics[mname][0]
                if mname in ("reductions", "minor_gcs"):
                    want_sums[mname + "_delta"] += metrics[mname][1]
        check(all(sums[k] == v for k, v in want_sums.items()) and sums["samples"] == len(framed),
              "%s: every metric column sums to the file's" % name,
              "%s\n%s" % (sums, want_sums))
        rate = None
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"# options: .*\brate=([\d.]+)", line)
                if m:
                    rate = float(m.group(1))
                    break
        if rate:
            check("PeriodType: wall nanoseconds" in head and
                  "Period: %d" % round(1e9 / rate) in head,
                  "%s: the period is 1/%g s of wall time" % (name, rate), head)


def test_labels(tmp):
    """Labels of a real OTP 27 Elixir node survive: node, process labels,
    a Logger key and callers, each value's count the file's."""
    prof = make(tmp, LABELS)
    want = file_samples(LABELS)
    rc, tags, err = pprof(["-tags", prof])
    tags = "\n" + tags
    check(rc == 0, "labels: -tags exits 0", err)
    node = None
    with open(LABELS, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# node: "):
                node = line[len("# node: "):].strip()
                break
    check(re.search(r"node: Total %d\.0\n\s+%d\.0 \(\s*100%%\): %s\n" % (
          len(want), len(want), re.escape(node)), tags) is not None,
          "labels: every sample's node is the header's (%s)" % node, tags[:400])
    for field, key in (("label", "label"), ("key.request_id", "key.request_id"),
                       ("callers", "callers"), ("registered_name", "registered_name"),
                       ("initial_call", "initial_call")):
        counts = collections.Counter(s[3][field] for s in want if field in s[3])
        check(len(counts) > 0, "labels: the file has %s" % field)
        section = re.search(r"\n %s: Total (\d+)\.0\n((?:\s+[\d.]+ \(.*\n)+)" % re.escape(key), tags)
        got = {}
        if section:
            for line in section.group(2).splitlines():
                m = re.match(r"\s+(\d+)\.0 \(\s*[\d.]+%\): (.*)$", line)
                if m:
                    got[m.group(2)] = int(m.group(1))
        check(got == dict(counts), "labels: %s values and counts (%d) survive" % (key, len(counts)),
              "%s\n%s" % (got, counts))
    # a trace carries its labels with its frames
    rc, traces, _ = pprof(["-traces", "-tagfocus=key.request_id=req-11", prof])
    _, labs = parse_traces(traces)
    n = sum(c for l, c in labs)
    want_n = sum(1 for s in want if s[3].get("key.request_id") == "req-11")
    check(n == want_n and all(l.get("key.request_id") == "req-11" for l, _ in labs),
          "labels: -tagfocus key.request_id=req-11 keeps its %d samples" % want_n,
          traces[:800])
    check("RwEx." in traces, "labels: Elixir frames in the traces", traces[:800])


def test_nodes(tmp):
    """Files of several nodes: each sample's node is its file's."""
    files = [os.path.join(REAL, "flame_profd-demo.perf"), LABELS,
             os.path.join(REAL, "flame_profd-idle.perf")]
    want = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            node = next(l[len("# node: "):].strip() for l in f if l.startswith("# node: "))
        want[node] = len(file_samples(path))
    prof = os.path.join(tmp, "nodes.pb.gz")
    rc, _, err = run(["pprof", "-o", prof] + files)
    rc2, tags, err2 = pprof(["-tags", prof])
    section = ("\n" + tags).partition("\n node: Total ")[2].partition("\n\n")[0]
    got = {m.group(2): int(m.group(1)) for m in
           re.finditer(r"\n\s+(\d+)\.0 \(\s*[\d.]+%\): (\S+)", section)}
    check(rc == 0 and rc2 == 0 and got == want,
          "three nodes' files: each sample's node is its file's", "%s\n%s %s%s" % (
              got, want, err, err2))


def test_filters(tmp):
    """What selects samples for top selects them for pprof."""
    cases = [["--status", "running"], ["--status", "runnable,waiting"],
             ["--where", "key.request_id=req-11"], ["--where", "label~rw_pool"],
             ["--where", "callers~<0.565.0>"], ["--pid", "<0.103.0>"],
             ["--name", "RwEx.Counter"], ["--from", "+1s", "--to", "+3s"],
             ["--erlang-names", "--name", "Elixir.RwEx.Counter"]]
    for args in cases:
        prof = make(tmp, LABELS, args)
        rc, top, _ = run(["top"] + args + [LABELS])
        rc2, out, err = pprof(["-top", prof])
        n = samples_of(top)
        check(rc == 0 and rc2 == 0 and n > 0 and pprof_total(out) == n,
              "filter %s: pprof's total is top's (%d)" % (" ".join(args), n),
              "pprof %d, top %d %s" % (pprof_total(out), n, err))
    # --strip-lines merges the lines of a function, as top's does
    edge = fixture("edge.perf")
    prof = make(tmp, edge, ["--strip-lines"])
    rc, out, _ = pprof(["-raw", prof])
    check(":1263" not in out and "lists.erl:0" in out and "lists.erl:1263" not in out,
          "--strip-lines: no line in the locations", out[-800:])
    prof = make(tmp, edge)
    rc, out, _ = pprof(["-raw", prof])
    check("lists:foldl_1/3 lists.erl:1263" in out and "lists:foldl_1/3 lists.erl:1270" in out,
          "lines: a location per line, the name without it", out[-1200:])


def test_errors(tmp):
    rc, _, err = run(["pprof", "-w", "memory", "-o", os.path.join(tmp, "x"), fixture("demo.perf")])
    check(rc == 64 and "does not apply" in err, "pprof -w: refused by name, exit 64", err)
    rc, _, err = run(["pprof", "-o", os.path.join(tmp, "no", "such", "x.pb.gz"),
                      fixture("demo.perf")])
    check(rc == 73, "pprof into a missing directory: exit 73", "rc=%d %s" % (rc, err))
    rc, _, err = run(["pprof", "-o", os.path.join(tmp, "x"), os.path.join(tmp, "missing.perf")])
    check(rc == 66, "pprof of a missing input: exit 66", "rc=%d %s" % (rc, err))
    # standard output that is not a terminal takes the profile
    p = subprocess.run([FLAME_PROF, "pprof", fixture("demo.perf")], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    check(p.returncode == 0 and p.stdout[:2] == b"\x1f\x8b",
          "pprof to a pipe: a gzip stream", "rc=%d %r" % (p.returncode, p.stderr))


def main():
    global ENV
    if not GO:
        print("SKIP: no go (Debian package golang-go: apt-get install golang-go, "
              "or scripts/install-deps)")
        return 77
    tmp = tempfile.mkdtemp(prefix="fp-pprof-")
    # go and pprof keep caches and fetched profiles under $HOME
    ENV = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"),
               PPROF_TMPDIR=tmp, GOFLAGS="", GOTOOLCHAIN="local")
    try:
        return fp_cli.main([test_files, test_labels, test_nodes, test_filters, test_errors])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
