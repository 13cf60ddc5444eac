#!/usr/bin/env python3
"""flame_prof, the command: outputs against the golden files of the unit
tests (the command and the library must agree byte for byte), SVGs parsed
as XML with their frames and widths checked, inputs (gzip, zstd,
directories, time ranges, standard input), filters, exit codes and
messages. Its inputs at their edges: test_flame_prof_inputs.py.

Needs only python3 and the built flame_prof (FLAME_PROF); gzip and zstd
command-line tools are used when present.
"""
import calendar
import collections
import gzip
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True

import fp_cli
from fp_cli import FLAME_PROF, GOLDEN, check, fixture, golden, run, samples_of

SVG = "{http://www.w3.org/2000/svg}"


def test_golden_outputs():
    cases = [
        (["folded", fixture("demo.perf")], "demo.folded"),
        (["folded", fixture("edge.perf")], "edge.folded"),
        (["folded", "-w", "memory_delta", fixture("edge.perf")], "edge.memory_delta.folded"),
        (["top", "--limit", "0", fixture("demo.perf")], "demo.top"),
        (["top", "--sort", "total", "-n", "5", fixture("demo.perf")], "demo.top-total-5"),
        (["top", "-n", "0", "-w", "memory_delta", fixture("edge.perf")], "edge.memory_delta.top"),
        (["speedscope", fixture("demo.perf")], "demo.speedscope.json"),
        (["speedscope", "--per-status", "--weight", "memory_delta", fixture("edge.perf")],
         "edge.per-status.memory_delta.speedscope.json"),
    ]
    for args, name in cases:
        rc, out, err = run(args)
        check(rc == 0 and out == golden(name), "%s == golden %s" % (" ".join(args[:-1]), name),
              "rc=%d err=%s\n%s" % (rc, err, out[:800]))
        check(err == "", "%s: quiet stderr when not a terminal" % args[0], err)

    rc, out, err = run(["diff", "-n", "0", fixture("demo.perf"), fixture("edge.perf")])
    check(rc == 1, "diff: regression exits 1", "rc=%d %s" % (rc, err))
    check(out == golden("demo-edge.diff"), "diff == golden demo-edge.diff", out[:800])
    rc, out, _ = run(["diff", "-n", "0", "--by", "total", fixture("demo.perf"), fixture("edge.perf")])
    check(out == golden("demo-edge.total.diff"), "diff --by total == golden", out[:800])
    rc, out, _ = run(["diff", "--threshold", "30", fixture("demo.perf"), fixture("edge.perf")])
    check(rc == 0 and "0 functions over the threshold" in out, "diff under --threshold exits 0",
          "rc=%d" % rc)
    rc, out, _ = run(["diff", fixture("demo.perf"), fixture("demo.perf")])
    check(rc == 0, "diff of a profile with itself exits 0", "rc=%d" % rc)


def frames_of(svg_path):
    root = ET.parse(svg_path).getroot()
    frames = []
    for g in root.iter(SVG + "g"):
        if g.get("class") != "f":
            continue
        title = g.find(SVG + "title").text
        rect = g.find(SVG + "rect")
        text = g.find(SVG + "text")
        frames.append({
            "name": title[:title.rfind(" (")],
            "title": title,
            "x": float(rect.get("x")), "w": float(rect.get("width")),
            "y": float(rect.get("y")),
            "o": int(g.get("data-o")), "v": int(g.get("data-v")), "d": int(g.get("data-d")),
            "label": text.text or "",
        })
    return root, frames


def test_svg(tmp):
    out = os.path.join(tmp, "demo.svg")
    rc, _, err = run(["svg", "--minwidth", "0", "-o", out, fixture("demo.perf")])
    check(rc == 0, "svg: exit 0", err)
    root, frames = frames_of(out)
    check(root.tag == SVG + "svg", "svg: an <svg> document that parses as XML")
    check(root.find(SVG + "script") is not None, "svg: has its script")
    check(all(not (s.get("href") or s.get("{http://www.w3.org/1999/xlink}href"))
              for s in root.iter(SVG + "script")), "svg: no external script")
    by_depth = {}
    for f in frames:
        by_depth.setdefault(f["d"], []).append(f)
    check(len(by_depth[0]) == 1 and by_depth[0][0]["name"] == "all" and
          abs(by_depth[0][0]["w"] - 1180) < 0.01 and by_depth[0][0]["v"] == 36,
          "svg: root 'all' spans 1180 px for 36 samples")
    names1 = sorted(f["name"] for f in by_depth[1])
    check(names1 == ["running", "waiting"], "svg: statuses are the first level", repr(names1))
    widths = {f["name"]: f["w"] for f in by_depth[1]}
    check(abs(widths["running"] - 1180 * 30 / 36) < 0.02 and
          abs(widths["waiting"] - 1180 * 6 / 36) < 0.02, "svg: status widths by samples", repr(widths))
    # every frame lies within a frame one level down, and children never
    # outgrow their parent
    nested = True
    for f in frames:
        if f["d"] == 0:
            continue
        parents = [p for p in by_depth[f["d"] - 1]
                   if p["o"] <= f["o"] and p["o"] + p["v"] >= f["o"] + f["v"]]
        nested = nested and len(parents) == 1
    check(nested, "svg: every frame sits on exactly one parent")
    check(any(f["name"] == "fp_demo:'fp\\x2Bdemo\\x3Bsemi\\x27q\\x5C'/1" for f in frames),
          "svg: escaped Erlang names stay one frame")
    check(all(len(f["label"]) * 7.08 <= f["w"] for f in frames),
          "svg: labels fit their frames")
    cut = [f for f in frames if f["label"].startswith("..")]
    check(cut and all(f["name"].endswith(f["label"][2:]) for f in cut) and
          not any(f["label"].endswith("..") for f in frames),
          "svg: a cut label keeps the end of the name (..function/arity)",
          repr([(f["name"], f["label"]) for f in cut][:5]))
    y0 = by_depth[0][0]["y"]
    check(all(f["y"] < y0 for f in frames if f["d"] > 0), "svg: root at the bottom")

    inv = os.path.join(tmp, "inv.svg")
    rc, _, _ = run(["svg", "--inverted", "--width", "800", "--title", "<T&>", "-o", inv,
                    fixture("edge.perf")])
    root, frames = frames_of(inv)
    check(root.get("width") == "800", "svg --width 800")
    title = [t for t in root.iter(SVG + "text") if t.get("id") == "title"][0].text
    check(title == "<T&>", "svg --title escaped and read back", repr(title))
    y0 = [f for f in frames if f["d"] == 0][0]["y"]
    check(all(f["y"] > y0 for f in frames if f["d"] > 0), "svg --inverted: root at the top")
    check(any(f["name"] == "weird:'<&>'/0" for f in frames), "svg: '<&>' atom read back")

    w = os.path.join(tmp, "w.svg")
    rc, _, _ = run(["svg", "-w", "memory_delta", "--minwidth", "0", "-o", w, fixture("edge.perf")])
    root, frames = frames_of(w)
    top = sorted((f["name"], f["v"]) for f in frames if f["d"] == 1)
    check(top == [("[+memory_delta]", 13048), ("[-memory_delta]", 8596)],
          "svg -w memory_delta: growth and release trees by magnitude", repr(top))
    rc, _, _ = run(["svg", "-w", "memory_delta", "--sign", "abs", "--minwidth", "0", "-o", w,
                    fixture("edge.perf")])
    root, frames = frames_of(w)
    check(root.get("data-total") == "21644" and
          not any(f["name"].startswith("[") for f in frames), "svg --sign abs: one tree")
    rc, _, _ = run(["svg", "-w", "memory_delta", "--sign", "negative", "--minwidth", "0", "-o", w,
                    fixture("edge.perf")])
    root, frames = frames_of(w)
    check(root.get("data-total") == "8596", "svg --sign negative: release only")
    rc, _, _ = run(["svg", "-w", "reductions_delta", "--process", "--minwidth", "0", "-o", w,
                    fixture("edge.perf")])
    root, frames = frames_of(w)
    check(root.get("data-total") == str(500 + 200 + 300 + 100 + 10),
          "svg -w reductions_delta: weights summed", root.get("data-total"))
    check(any(f["name"] == "<0.9.1> erlang:apply/2" and f["d"] == 2 for f in frames),
          "svg --process: a process frame under the status")

    d = os.path.join(tmp, "diff.svg")
    rc, _, _ = run(["diff", "--svg", d, fixture("demo.perf"), fixture("edge.perf")])
    root, frames = frames_of(d)
    check(rc == 1 and len(frames) > 3, "diff --svg: a differential graph")
    fills = [g.find(SVG + "rect").get("fill") for g in root.iter(SVG + "g") if g.get("class") == "f"]
    check(any(f.startswith("rgb(255,") and f != "rgb(255,255,255)" for f in fills) and
          any(f.endswith(",255)") for f in fills), "diff --svg: red and blue frames")


def test_heatmap(tmp):
    out = os.path.join(tmp, "h.svg")
    rc, _, err = run(["heatmap", "-o", out, fixture("edge.perf")])
    check(rc == 0, "heatmap: exit 0", err)
    root = ET.parse(out).getroot()
    cells = [r for r in root.iter(SVG + "rect") if r.get("class") == "c"]
    check(len(cells) == 8, "heatmap: 8 cells", str(len(cells)))
    cols = {int(c.get("data-c")) for c in cells}
    rows = {int(c.get("data-r")) for c in cells}
    check(cols == {0, 1, 2} and max(rows) == 49 and min(rows) == 0, "heatmap: 3 columns, 50 rows",
          repr((cols, rows)))
    check(root.get("data-t0") == "1795248000", "heatmap: first second")
    rc, _, _ = run(["heatmap", "--rows", "4", "-w", "memory_delta", "-o", out, fixture("edge.perf")])
    root = ET.parse(out).getroot()
    cells = [r for r in root.iter(SVG + "rect") if r.get("class") == "c"]
    vals = sorted(int(c.get("data-v")) for c in cells)
    check(max(int(c.get("data-r")) for c in cells) <= 3 and sum(vals) == 4452,
          "heatmap --rows 4 -w memory_delta: signed sums", repr(vals))
    rc, _, _ = run(["heatmap", "-o", out, fixture("demo.perf")])
    root = ET.parse(out).getroot()
    check(sum(int(r.get("data-v")) for r in root.iter(SVG + "rect") if r.get("class") == "c") == 36,
          "heatmap: cells add up to the samples")
    # the writer's golden: 3 samples, the waiting one marked idle
    # (docs/FORMAT.md "Idle samples"), left out as stock Flamescope does
    # unless statuses are chosen
    basic = os.path.join(os.path.dirname(fp_cli.GOLDEN), "basic.perf")
    for args, want, said in ((["heatmap"], 2, True),
                             (["heatmap", "--status", "running,waiting,garbage_collecting"], 3, False),
                             (["heatmap", "--status", "waiting"], 1, False)):
        rc, _, err = run(args + ["-o", out, basic])
        root, texts = svg_texts(out)
        n = sum(int(r.get("data-v")) for r in root.iter(SVG + "rect") if r.get("class") == "c")
        check(rc == 0 and n == want and any("1 idle sample left out" in t for t in texts) == said,
              "%s: %d of the 3 samples counted%s" % (" ".join(args), want,
                                                     ", the idle one said left out" if said else ""),
              repr((rc, n, texts[:2], err)))


def svg_texts(path):
    root = ET.parse(path).getroot()
    return root, ["".join(t.itertext()) for t in root.iter(SVG + "text")]


def test_keys_and_titles(tmp):
    """What is drawn and weighted is said: legends, keys, titles."""
    out = os.path.join(tmp, "k.svg")
    rc, _, err = run(["heatmap", "--rows", "4", "-w", "memory_delta", "-o", out, fixture("edge.perf")])
    root, texts = svg_texts(out)
    legend = [g for g in root.iter(SVG + "g") if g.get("id") == "legend"]
    check(rc == 0 and len(legend) == 1, "heatmap: a legend", err)
    swatches = [r.get("fill") for r in legend[0].iter(SVG + "rect")] if legend else []
    check("rgb(235,235,235)" in swatches and "rgb(255,255,255)" in swatches and
          "samples summing to 0" in texts and "no samples" in texts and
          "-10000" in texts and "+10000" in texts,
          "heatmap: signed scale, grey (sums of 0) and white (no samples) explained", repr(texts))
    rc, _, _ = run(["heatmap", "-o", out, fixture("demo.perf")])
    root, texts = svg_texts(out)
    check("samples per cell" in texts and "samples summing to 0" not in texts and "5" in texts,
          "heatmap: sample scale 1..max, no grey cells to explain", repr(texts))
    rc, _, _ = run(["heatmap", "--sign", "negative", "-w", "memory_delta", "-o", out,
                    fixture("edge.perf")])
    root, texts = svg_texts(out)
    vals = [int(r.get("data-v")) for r in root.iter(SVG + "rect") if r.get("class") == "c"]
    check(rc == 0 and sum(vals) == 8596 and min(vals) >= 0 and
          any("memory_delta, release only" in t for t in texts),
          "heatmap --sign negative: release by magnitude, said so", repr((vals, texts[:3])))

    rc, _, _ = run(["diff", "--svg", out, fixture("demo.perf"), fixture("edge.perf")])
    root, texts = svg_texts(out)
    key = [g for g in root.iter(SVG + "g") if g.get("id") == "key"]
    check(rc == 1 and len(key) == 1 and
          any("change of share since BEFORE" in t for t in texts) and
          any("blue shrank, red grew" in t for t in texts), "diff --svg: a key", repr(texts[:6]))

    rc, _, _ = run(["svg", "-w", "memory_delta", "-o", out, fixture("edge.perf")])
    root, texts = svg_texts(out)
    check(texts[0] == "Flame Graph of memory_delta" and
          texts[1].startswith("memory_delta: 21644 grown and released in all (8 samples"),
          "svg -w: titled by the weight", repr(texts[:2]))
    rc, _, _ = run(["svg", "-o", out, fixture("demo.perf")])
    root, texts = svg_texts(out)
    check(texts[0] == "Flame Graph" and texts[1].startswith("36 samples, "),
          "svg: an unweighted graph keeps its title", repr(texts[:2]))


def test_options():
    """--help of a command lists the options it takes, and only those;
    an option of another command is refused by its name."""
    helps = {}
    for cmd in ["folded", "svg", "heatmap", "top", "speedscope", "diff", "procs"]:
        rc, out, _ = run([cmd, "--help"])
        helps[cmd] = set(re.findall(r"^(?:  -\w, |      )(--[\w-]+)", out, re.M))
    check({"--sign", "--rows", "--title"} <= helps["heatmap"] and
          not helps["heatmap"] & {"--no-status", "--process", "--by", "--limit"},
          "heatmap --help: its options only", repr(sorted(helps["heatmap"])))
    check({"--sign", "--sort", "--limit", "--strip-lines", "--by"} <= helps["top"] and
          not helps["top"] & {"--no-status", "--process", "--rows", "--title"},
          "top --help: its options only", repr(sorted(helps["top"])))
    check({"--sort", "--format", "--limit", "--pid"} <= helps["procs"] and
          not helps["procs"] & {"--weight", "--sign", "--by"},
          "procs --help: its options only", repr(sorted(helps["procs"])))
    check("--rows" not in helps["folded"] and "--profiles" in helps["speedscope"],
          "folded, speedscope --help", repr(sorted(helps["speedscope"])))
    # every option a --help lists is taken by that command
    e = fixture("edge.perf")
    for cmd, opts in helps.items():
        for opt in sorted(opts - {"--help"}):
            rc, _, err = run([cmd, opt, e, e] if cmd == "diff" else [cmd, opt, e])
            check("does not apply" not in err and "unrecognized" not in err,
                  "%s takes %s" % (cmd, opt), err)

    cases = [
        (["procs", "--sign", "abs", e], "procs: option '--sign' does not apply"),
        (["procs", "-w", "memory", e], "procs: option '--weight' does not apply"),
        (["heatmap", "--by", "label", e], "heatmap: option '--by' does not apply"),
        (["top", "--sign", "positive", e], "option '--sign' needs a signed weight"),
        (["top", "--sign", "positive", "-w", "reductions_delta", e],
         "option '--sign' needs a signed weight"),
        (["top", "--sort", "wself+", "-w", "memory", e], "--sort wself+ needs a signed weight"),
        (["procs", "--format", "xml", e], "bad --format 'xml'"),
        (["speedscope", "--profiles", "node", e], "bad --profiles 'node'"),
    ]
    for args, msg in cases:
        rc, _, err = run(args)
        check(rc == 64 and msg in err, "%s -> 64, %r" % (" ".join(args[:-1]), msg), err)


def test_sign_and_gross():
    """A signed weight ranks by net sums and by gross growth or release."""
    e = fixture("edge.perf")
    rc, out, err = run(["top", "--sign", "positive", "-w", "memory_delta", "-n", "0", e])
    rows = re.findall(r"^\s+\d+\s+\S+\s+\d+\s+\S+\s+(-?\d+)\s+\S+\s+-?\d+\s+\S+\s+(\S.*)$", out, re.M)
    check(rc == 0 and "weight: memory_delta, growth only (sum 13048," in out and
          rows[0] == ("10000", "lists:foldl_1/3:1270") and
          all(int(w) >= 0 for w, _ in rows), "top --sign positive: gross growth", out + err)
    rc, out, _ = run(["top", "--sign", "negative", "-w", "memory_delta", "-n", "1", e])
    check(rc == 0 and re.search(r"\b4096\b.*lists:foldl_1/3:1263\n", out) is not None,
          "top --sign negative: the biggest release first", out)
    rc, out, _ = run(["top", "--sort", "wself-", "-w", "memory_delta", "-n", "1", e])
    check(rc == 0 and re.search(r"-4096 .* 0 +4096  lists:foldl_1/3:1263\n", out) is not None,
          "top --sort wself-: by gross release, net and gross columns", out)
    rc, out, _ = run(["folded", "--sign", "abs", "-w", "memory_delta", e])
    check(rc == 0 and sum(int(l.rsplit(" ", 1)[1]) for l in out.splitlines()) == 21644,
          "folded --sign abs: magnitudes", out)


def test_procs():
    """A table of the processes, as text, CSV and JSON, sortable."""
    d = fixture("demo.perf")
    rc, out, err = run(["procs", d])
    lines = out.splitlines()
    check(rc == 0 and lines[0] == "processes: 14" and lines[1] == "samples: 36" and
          lines[3].split()[:6] == ["PID", "SAMPLES", "SAMPLES%", "REDUCTIONS", "MAILBOX_MAX",
                                   "MEMORY_MAX"] and
          lines[4].startswith("<0.87.0>") and lines[4].endswith("fp_demo_busy (running 7)"),
          "procs: busiest first, with its name and statuses", out + err)
    rc, out, _ = run(["procs", "--sort", "mailbox", "-n", "1", d])
    check(rc == 0 and "fp_demo_sink (running 1, waiting 1)" in out and "19999" in out and
          "(13 more processes; --limit 0 shows all)" in out, "procs --sort mailbox -n 1", out)
    import csv
    import io
    import json
    rc, out, _ = run(["procs", "--format", "csv", d])
    rows = list(csv.DictReader(io.StringIO(out)))
    check(rc == 0 and len(rows) == 14 and sum(int(r["samples"]) for r in rows) == 36 and
          sum(int(r["running"]) + int(r["waiting"]) for r in rows) == 36,
          "procs --format csv: every process, the statuses add up", out[:500])
    rc, out, _ = run(["procs", "--format", "json", "--sort", "reductions", fixture("edge.perf")])
    procs = json.loads(out)
    check(rc == 0 and procs[0]["pid"] == "<0.100.0>" and
          procs[0]["registered_name"] == "MyApp.Worker" and procs[0]["reductions"] == 1100 and
          procs[0]["statuses"] == {"running": 2, "garbage_collecting": 1, "exiting": 1} and
          sum(p["samples"] for p in procs) == 8,
          "procs --format json --sort reductions", out[:800])
    rc, out, _ = run(["procs", "--format", "csv", "--status", "waiting", d])
    rows = list(csv.DictReader(io.StringIO(out)))
    check(rc == 0 and {r["pid"] for r in rows} >= {"<0.61.0>", "<0.96.0>"} and
          all(r["running"] == "0" for r in rows), "procs --status: the selection applies", out)


def test_speedscope_profiles():
    """speedscope: a profile per process on a time axis in seconds."""
    import json
    rc, out, _ = run(["speedscope", fixture("demo.perf")])
    doc = json.loads(out)
    profs = {p["name"]: p for p in doc["profiles"]}
    busy = profs.get("fp_demo_busy <0.87.0>")
    check(rc == 0 and len(profs) == 14 and busy and busy["unit"] == "seconds" and
          doc["profiles"][doc["activeProfileIndex"]] is busy,
          "speedscope: 14 process profiles in seconds, the busiest active", out[:300])
    check(all(abs(sum(p["weights"]) - p["endValue"]) < 1e-5 and
              len(p["weights"]) == len(p["samples"]) for p in doc["profiles"]),
          "speedscope: weights add up to each profile's end")
    rc, out, _ = run(["speedscope", "--profiles", "all", fixture("demo.perf")])
    doc = json.loads(out)
    check(rc == 0 and [p["name"] for p in doc["profiles"]] == ["all"] and
          doc["profiles"][0]["unit"] == "none" and sum(doc["profiles"][0]["weights"]) == 36,
          "speedscope --profiles all: one profile of samples", out[:300])


METRICS = "".join("\tmetric_erlang_%s: 1, 0" % m for m in (
    "reductions", "memory", "message_queue_len", "total_heap_size", "heap_size",
    "stack_size", "binary_bytes", "minor_gcs"))


def renamed_file(path):
    """Two processes whose names arrive after their first samples: a
    proc_lib process whose recorded initial call is read later, and one
    that registers mid-file."""
    def sample(pid, t, fields, status="running"):
        return "%s %s [000] %s: cpu-clock:%s%s\n\t%016x a:f/0 (a.erl)\n\n" % (
            status, pid, t, METRICS, "".join("\t" + f for f in fields), 1)
    text = ("# flame_profd 0.1.0 perf-script (docs/FORMAT.md)\n# node: n@h\n" +
            sample("90/0", "1795248000.100000", ["initial_call: proc_lib:init_p/5"]) +
            sample("91/0", "1795248000.100000", ["initial_call: worker:loop/1"]) +
            sample("90/0", "1795248000.200000", ["initial_call: my_srv:init/1"],
                   "waiting") +
            sample("91/0", "1795248000.200000",
                   ["registered_name: late_name", "initial_call: worker:loop/1"]) +
            sample("90/0", "1795248000.300000", ["initial_call: my_srv:init/1"]) +
            sample("91/0", "1795248000.300000", ["initial_call: worker:loop/1"]))
    with open(path, "w") as f:
        f.write(text)


def test_one_name_per_process(tmp):
    """folded/svg --process and speedscope name a process once, as procs
    does, whichever of its samples carry the name."""
    import json
    path = os.path.join(tmp, "renamed.perf")
    renamed_file(path)
    want = {"<0.90.0> my_srv:init/1", "late_name"}
    rc, out, err = run(["folded", "--process", path])
    roots = {line.split(";")[1] for line in out.splitlines()}
    check(rc == 0 and roots == want, "folded --process: one name per process",
          "rc=%d err=%s\n%s" % (rc, err, out))
    with open(path, "rb") as f:
        rc, piped, err = run(["folded", "--process", "-"], stdin=f)
    check(rc == 0 and piped == out, "folded --process -: the same from a pipe's copy",
          "rc=%d err=%s\n%s" % (rc, err, piped))
    rc, piped, err = run(["folded", "--process", "-"],
                         input_bytes=open(path, "rb").read())
    check(rc == 0 and piped == out, "folded --process -: the same from a pipe",
          "rc=%d err=%s\n%s" % (rc, err, piped))
    svg = os.path.join(tmp, "renamed.svg")
    rc, _, err = run(["svg", "--process", "-o", svg, path])
    _, frames = frames_of(svg)
    names = {f["name"] for f in frames if f["d"] == 2}
    check(rc == 0 and names == want, "svg --process: one name per process", repr(names))
    rc, out, err = run(["speedscope", path])
    profs = sorted(p["name"] for p in json.loads(out)["profiles"]) if rc == 0 else []
    check(profs == ["<0.90.0> my_srv:init/1", "late_name <0.91.0>"],
          "speedscope: one profile per process", repr(profs) + err)
    rc, out, err = run(["speedscope", "--process", "--per-status", path])
    check(rc == 0 and "proc_lib:init_p" not in out and out.count('"late_name"') == 1,
          "speedscope --process --per-status: one process frame each", out[:400])
    rc, out, err = run(["procs", path])
    check(rc == 0 and "my_srv:init/1 (running 2, waiting 1)" in out and
          "late_name (running 3)" in out, "procs: the same names", out)


def test_inputs(tmp):
    want = golden("demo.folded")
    gz = os.path.join(tmp, "demo.perf.gz")
    with open(fixture("demo.perf"), "rb") as f, gzip.open(gz, "wb") as g:
        g.write(f.read())
    rc, out, err = run(["folded", gz])
    check(rc == 0 and out == want, "gzip input", err)
    if shutil.which("zstd"):
        zs = os.path.join(tmp, "demo.perf.zst")
        subprocess.run(["zstd", "-q", "-f", fixture("demo.perf"), "-o", zs], check=True)
        rc, out, err = run(["folded", zs])
        check(rc == 0 and out == want, "zstd input", err)
    with open(fixture("demo.perf"), "rb") as f:
        rc, out, err = run(["folded", "-"], stdin=f)
    check(rc == 0 and out == want, "standard input", err)

    # a flame_profd output directory: rotated files of one node, a file
    # being written (dot-file, half a sample) that must be skipped
    out_dir = os.path.join(tmp, "out")
    node = os.path.join(out_dir, "edge@host")
    os.makedirs(node)
    text = open(fixture("edge.perf"), encoding="utf-8").read()
    head, body = text.split("running 0.100.0", 1)
    body = "running 0.100.0" + body
    parts = body.split("exiting 0.100.0")
    first = head + parts[0]
    second = head + "exiting 0.100.0" + parts[1]
    t0 = "edge@host.20261121T080000.000Z.perf"
    t1 = "edge@host.20261121T080001.000Z.perf.gz"
    with open(os.path.join(node, t0), "w", encoding="utf-8") as f:
        f.write(first)
    with gzip.open(os.path.join(node, t1), "wt", encoding="utf-8") as f:
        f.write(second)
    with open(os.path.join(node, ".edge@host.20261121T080002.000Z.perf.partial"), "w") as f:
        f.write("running 0.1.0 [000] 1")
    with open(os.path.join(node, "notes.txt"), "w") as f:
        f.write("not a profile\n")
    rc, out, err = run(["folded", out_dir])
    check(rc == 0 and out == golden("edge.folded"), "directory: rotated files, partial skipped",
          err + out)
    rc, out, _ = run(["top", "--from", "1795248001", out_dir])
    check(samples_of(out) == 5, "--from epoch over rotated files", out[:200])
    rc, out, _ = run(["top", "--from", "1795248001", "--to", "1795248002", out_dir])
    check(samples_of(out) == 2, "--from/--to epoch", out[:200])
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1795248002))
    rc, out, _ = run(["top", "--to", iso + ".5Z", out_dir])
    check(samples_of(out) == 6, "--to ISO-8601 with fraction", out[:200])
    # the first sample is at .010: +1s..+2s holds 1.020, 1.999999, 2.000
    rc, out, _ = run(["top", "--from", "+1s", "--to", "+2s", fixture("edge.perf")])
    check(samples_of(out) == 3, "--from/--to relative to the first sample", out[:200])
    assert calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%S")) == 1795248002

    # the time in the names keeps files out of a range without opening
    # them: a broken file outside the range does no harm
    with open(os.path.join(node, "edge@host.20261121T090000.000Z.perf"), "w") as f:
        f.write("garbage\n")
    rc, out, err = run(["top", "--to", "1795248002", out_dir])
    check(rc == 0 and samples_of(out) == 5, "--to skips files that start later", err)
    rc, out, err = run(["top", out_dir])
    check(rc == 65 and "edge@host.20261121T090000.000Z.perf:1: " in err,
          "without the range the broken file is read and named", err)


def test_filters():
    e = fixture("edge.perf")
    for args, n in [(["--status", "waiting"], 1), (["--status", "running,exiting"], 3),
                    (["--pid", "0.100.0"], 4), (["--pid", "<0.100.0>,0.8.0"], 5),
                    (["--pid", "0.100.0", "--status", "running"], 2),
                    (["--name", "Elixir.MyApp.Worker"], 4), (["--name", "'Elixir.MyApp.Worker'"], 4),
                    (["--name", "MyApp.Worker"], 4),
                    (["--erlang-names", "--name", "MyApp.Worker"], 4),
                    (["--name", "'Elixir.MyApp.Worker'", "--erlang-names"], 4),
                    (["--name", "+"], 1), (["--name", "nobody"], 0)]:
        rc, out, err = run(["top"] + args + [e])
        check(rc == 0 and samples_of(out) == n, "top %s: %d samples" % (" ".join(args), n),
              out[:300] + err)
    rc, _, err = run(["top", "--name", "nobody", e])
    check("no samples matched" in err, "warning when nothing matches", err)

    rc, out, _ = run(["folded", "--no-status", e])
    check("garbage_collecting" not in out and
          "erlang:apply/2;timer:sleep/1:200 2\n" in out, "folded --no-status", out)
    rc, out, _ = run(["folded", "--strip-lines", e])
    check("running;proc_lib:init_p_do_apply/3;gen_server:loop/7;MyApp.Worker.handle_call/3;"
          "lists:foldl_1/3 2\n" in out and ":1270" not in out, "folded --strip-lines", out)
    # a file of an earlier version (Erlang form) in either form
    rc, out, _ = run(["folded", "--process", e])
    check(";MyApp.Worker;proc_lib:" in out and "'Elixir." not in out,
          "folded: Elixir names by default, also of the process", out)
    rc, out, _ = run(["folded", "--process", "--erlang-names", e])
    check(";'Elixir.MyApp.Worker';proc_lib:" in out and
          ";'Elixir.MyApp.Worker':handle_call/3:12;" in out and "MyApp.Worker." not in out,
          "folded --erlang-names: as written", out)
    rc, out, _ = run(["folded", "--process", e])
    check("waiting;'\\x2B';erlang:apply/2;" in out and "unknown;<0.8.0>;erlang:hibernate/3 1\n" in out,
          "folded --process", out)
    rc, out, _ = run(["folded", "-w", "reductions", e])
    check("suspended;erlang:apply/2;timer:sleep/1:200 10\n" in out and "unknown;" not in out,
          "folded -w reductions: zero weights left out", out)
    rc, out, _ = run(["top", "--strip-lines", "-n", "0", e])
    check(re.search(r"\n +3 +37\.50% +3 +37\.50%  lists:foldl_1/3\n", out) is not None,
          "top --strip-lines merges lines", out)


def test_errors(tmp):
    e = fixture("edge.perf")
    bad = os.path.join(tmp, "bad.perf")
    with open(e, encoding="utf-8") as f:
        lines = f.read().split("\n")
    lines[6] = "\t0123 not a frame"
    with open(bad, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    foreign = os.path.join(tmp, "perf.script")
    with open(foreign, "w") as f:
        f.write("swapper     0 [000] 12345.678901: cpu-clock: \n\tffffffff81 do_idle+0x1 ([kernel.kallsyms])\n\n")
    empty_dir = os.path.join(tmp, "empty")
    os.makedirs(empty_dir)
    cases = [
        (["folded", "/nonexistent/x.perf"], 66, "cannot open /nonexistent/x.perf"),
        (["folded", empty_dir], 66, empty_dir + ": no perf-script files"),
        (["folded", bad], 65, bad + ":7: bad frame address"),
        (["svg", foreign], 65, foreign + ":1: not a flame_profd perf-script file"),
        (["folded", "--frobnicate", e], 64, "folded: unrecognized option '--frobnicate'"),
        (["folded", "-o"], 64, "option '-o' needs a value"),
        (["frobnicate", e], 64, "unknown command 'frobnicate'"),
        (["folded", "--rows", "5", e], 64, "does not apply"),
        (["folded"], 64, "no input"),
        (["folded", "-w", "bogus", e], 64, "unknown weight 'bogus'"),
        (["top", "--from", "yesterday", e], 64, "bad time 'yesterday'"),
        (["top", "--status", "sleeping", e], 64, "bad --status"),
        (["top", "--pid", "1.2.3", e], 64, "bad --pid"),
        (["top", "--sort", "wself", e], 64, "needs --weight"),
        (["top", "--from", "5", "--to", "4", e], 64, "--to must be after --from"),
        (["diff", e], 64, "two inputs"),
        (["heatmap", "--rows", "0", e], 64, "bad --rows"),
        (["folded", "-o", "/nonexistent/dir/x", e], 73, "cannot create /nonexistent/dir/x"),
        (["folded", "-o", "/dev/full", e], 74, "write error on /dev/full"),
        (["diff", e, os.path.join(tmp, "none.perf")], 66, "none.perf"),
        (["diff", "--status", "free", e, e], 65, "no samples to compare"),
    ]
    for args, code, msg in cases:
        rc, out, err = run(args)
        check(rc == code and msg in err, "%s -> %d, %r" % (" ".join(args)[:60], code, msg),
              "rc=%d err=%s" % (rc, err))
        check(rc == 0 or err.startswith("flame_prof: "), "%s: message prefixed" % args[0], err)
    # nothing half-written is left behind
    target = os.path.join(tmp, "x.folded")
    rc, _, _ = run(["folded", "-o", target, bad])
    check(rc == 65 and not os.path.exists(target) and
          not [n for n in os.listdir(tmp) if n.startswith("x.folded.tmp")],
          "no output file after an input error")
    rc, _, _ = run(["folded", "-o", target, e])
    check(rc == 0 and open(target).read() == golden("edge.folded"), "-o writes the file")
    check(os.path.exists("/dev/null") and not os.path.isfile("/dev/null"), "/dev/null untouched")
    rc, _, _ = run(["folded", "-o", "/dev/null", e])
    check(rc == 0 and not os.path.isfile("/dev/null"), "-o /dev/null writes in place")

    for cmd in ["folded", "svg", "heatmap", "top", "speedscope", "diff"]:
        rc, out, err = run([cmd, "--help"])
        check(rc == 0 and out.startswith("Usage: flame_prof " + cmd) and "Exit status" in out,
              "%s --help" % cmd, out[:200] + err)
    rc, out, _ = run(["--help"])
    check(rc == 0 and "heatmap" in out and "speedscope" in out, "flame_prof --help")
    rc, out, _ = run(["help", "diff"])
    check(rc == 0 and "--threshold" in out, "flame_prof help diff")


def test_nodes(tmp):
    """Several nodes' directories at once: --by node and --where node=
    go by each file's header, a table or a root frame per node."""
    real = os.path.join(os.environ.get("FP_SOURCE_ROOT") or ".", "flamescope-fork-patches",
                        "tests", "fixtures")
    dirs, counts = [], {}
    for name in ("flame_profd-demo.perf", "flame_profd-labels.perf"):
        src = os.path.join(real, name)
        with open(src, encoding="utf-8") as f:
            node = next(l[len("# node: "):].strip() for l in f if l.startswith("# node: "))
        d = os.path.join(tmp, "nodes", node)
        os.makedirs(d)
        shutil.copy(src, os.path.join(d, node + ".20261125T141152.000Z.perf"))
        rc, top, _ = run(["top", d])
        counts[node] = samples_of(top)
        dirs.append(d)
    rc, out, err = run(["top", "-n", "1", "--by", "node"] + dirs)
    heads = re.findall(r"^== node: (\S+) \((\d+) samples\)$", out, re.M)
    check(rc == 0 and {n: int(c) for n, c in heads} == counts and len(heads) == 2,
          "top --by node: a table per node with its samples", err + out[:800])
    rc, out, _ = run(["top", "--by", "node", os.path.join(tmp, "nodes")])
    check(re.findall(r"^== node: (\S+) ", out, re.M) == sorted(counts),
          "top --by node of the parent directory: both nodes", out[:400])
    for node, n in counts.items():
        rc, out, err = run(["top", "--where", "node=" + node] + dirs)
        check(rc == 0 and samples_of(out) == n, "--where node=%s: its %d samples" % (node, n),
              err + out[:300])
    rc, out, _ = run(["top", "--where", "node~@vm"] + dirs)
    check(samples_of(out) == sum(counts.values()), "--where node~@vm: every sample", out[:300])
    rc, out, err = run(["folded", "--by", "node"] + dirs)
    per = collections.Counter()
    for line in out.splitlines():
        stack, _, c = line.rpartition(" ")
        per[stack.split(";")[0]] += int(c)
    check(rc == 0 and dict(per) == {"node:" + n: c for n, c in counts.items()},
          "folded --by node: a node:NAME root frame per node", err + out[:400])
    # nodes: a row per node, its samples, its interval notes' mean
    # achieved rate and cost, its hottest function as top ranks it
    rc, out, err = run(["nodes"] + dirs)
    rows = {}
    for line in out.splitlines()[1:]:
        f = line.split()
        rows[f[0]] = f
    check(rc == 0 and sorted(rows) == sorted(counts), "nodes: a row per node", err + out)
    for node, d in zip(sorted(counts), sorted(dirs)):
        f = rows.get(node, [""] * 9)
        achieved, costs = [], []
        for name in os.listdir(d):
            with open(os.path.join(d, name), encoding="utf-8") as fh:
                for line in fh:
                    if re.match(r"# flame_profd: \S+ interval: ", line):
                        achieved.append(float(re.search(r" achieved=([\d.]+)", line).group(1)))
                        m = re.search(r" cost=([\d.]+)%", line)
                        if m:
                            costs.append(float(m.group(1)))
        _, top, _ = run(["top", "-n", "1", d])
        hot = re.search(r"^\s+\d+\s+([\d.]+)%\s+\d+\s+[\d.]+%\s+(.+)$", top, re.M)
        check(f[1] == str(counts[node]) and f[4] == str(len(achieved)) and
              f[5] == "%.1f" % (sum(achieved) / len(achieved)) and
              f[6] == ("%.2f" % (sum(costs) / len(costs)) if costs else "-") and
              f[8] == hot.group(2) and f[9] == "(%.1f%%)" % float(hot.group(1)),
              "nodes: %s: %d samples, %d intervals, mean achieved and cost, hottest %s"
              % (node, counts[node], len(achieved), hot.group(2)), out)
    node = sorted(counts)[0]
    rc, out, _ = run(["nodes", "--where", "node=" + node] + dirs)
    check(rc == 0 and len(out.splitlines()) == 2 and out.splitlines()[1].startswith(node + " "),
          "nodes --where node=: one row", out)
    svg = os.path.join(tmp, "nodes.svg")
    rc, _, err = run(["svg", "--by", "node", "-o", svg] + dirs)
    check(rc == 0 and all(("node:" + n) in open(svg, encoding="utf-8").read() for n in counts),
          "svg --by node: one graph of both nodes", err)


def main():
    return fp_cli.main([
        test_golden_outputs,
        test_svg,
        test_heatmap,
        test_keys_and_titles,
        test_options,
        test_sign_and_gross,
        test_procs,
        test_speedscope_profiles,
        test_one_name_per_process,
        test_inputs,
        test_filters,
        test_errors,
        test_nodes,
    ])


if __name__ == "__main__":
    sys.exit(main())
