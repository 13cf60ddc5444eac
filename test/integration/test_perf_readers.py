#!/usr/bin/env python3
"""flame_profd files read by the common readers of `perf script` text,
each through its own code, with the totals and top frames of
`flame_prof folded`:

  * speedscope's "perf script" importer (the npm package's release build,
    in headless Chromium): the file is opened through #profileURL= and
    exported again with speedscope's own Export button; its profiles are
    one per status and process ("running pid: 87"), their samples add up
    to flame_prof's total, and its heaviest leaf frames are flame_prof's.
    Skips (77) without chromium, node, playwright-core or speedscope
    (scripts/install-deps, scripts/install-node-deps).
  * Brendan Gregg's stackcollapse-perf.pl (inferno follows its rules):
    its folded stacks equal flame_prof's, names compared as it tidies
    them (quotes dropped). Neither Debian nor npm packages it: it runs
    when FLAMEGRAPH_SRC names a FlameGraph checkout and perl is there,
    and is reported skipped otherwise.

  * Netflix Flamescope's and the ebegumisa fork's perf parsers (their
    own modules, imported from a checkout by Debian's python3): FLAMESCOPE_SRC
    names a stock checkout, FLAMESCOPE_FORK_SRC one of the fork (its
    metric branch); each heat map counts the samples `flame_prof heatmap`
    counts (those not marked idle), each flame graph every sample, the
    status as its top level with flame_prof's per-status totals, and the
    fork weighs by metric_erlang_memory to flame_prof's `-w memory` total.
    Reported skipped without a checkout (Flamescope's code is never part
    of this repository). test_flamescope.py and flamescope-fork-patches/tests
    check stock Flamescope's and the patched series' trees frame by frame.

The files: flame_profd's real output in flamescope-fork-patches (300
samples of the demo node; 150 with the idle field) and
test/golden/flame_prof/demo.perf, and the writer's golden basic.perf
(quoted names with spaces, '+', ';' and parentheses, an idle sample). Screenshots go to $FP_BUILD_ROOT/perf-readers/.
"""
import collections
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import BUILD, FLAME_PROF, require, run_driver  # noqa: E402

SOURCE = os.environ.get("FP_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
FILES = [os.path.join(SOURCE, "flamescope-fork-patches", "tests", "fixtures", "flame_profd-demo.perf"),
         os.path.join(SOURCE, "flamescope-fork-patches", "tests", "fixtures", "flame_profd-idle.perf"),
         os.path.join(SOURCE, "test", "golden", "flame_prof", "demo.perf"),
         os.path.join(SOURCE, "test", "golden", "basic.perf")]

SPEEDSCOPE_DRIVER = r"""
const path = require('path');
const fs = require('fs');
const { chromium } = require(path.join(process.env.FP_NODE_DIR, 'node_modules', 'playwright-core'));
const cfg = JSON.parse(process.argv[2]);

(async () => {
  const out = { errors: [], runs: [] };
  const browser = await chromium.launch({ executablePath: cfg.chromium, headless: true, args: cfg.args });
  try {
    for (const run of cfg.runs) {
      const ctx = await browser.newContext({ acceptDownloads: true, viewport: { width: 1400, height: 900 } });
      const page = await ctx.newPage();
      page.on('pageerror', e => out.errors.push(String(e)));
      page.on('dialog', d => { out.errors.push('dialog: ' + d.message()); d.dismiss(); });
      await page.goto(cfg.base + '/index.html#profileURL=' + encodeURIComponent(cfg.base + '/' + run.file));
      const exp = page.getByText('Export', { exact: false }).first();
      await exp.waitFor({ timeout: 30000 });
      await page.waitForTimeout(500);
      await page.screenshot({ path: path.join(cfg.shots, run.name + '-speedscope.png') });
      const [download] = await Promise.all([page.waitForEvent('download'), exp.click()]);
      const file = path.join(cfg.tmp, run.name + '.speedscope.json');
      await download.saveAs(file);
      out.runs.push({ name: run.name, title: await page.title(), exported: file });
      await ctx.close();
    }
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(2); });
"""

failures = []
skipped = []


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def check(cond, label, detail=""):
    print(("ok   " if cond else "FAIL ") + label + ("" if cond or not detail else "\n     " + str(detail)[:1500]))
    if not cond:
        failures.append(label)
    return cond


def folded(path):
    """flame_prof folded: {stack tuple (status first, root to leaf): count}."""
    p = subprocess.run([FLAME_PROF, "folded", path], stdout=subprocess.PIPE, check=True)
    out = collections.Counter()
    for line in p.stdout.decode("utf-8").splitlines():
        stack, _, n = line.rpartition(" ")
        out[tuple(stack.split(";"))] += int(n)
    return out


def heatmap_count(path):
    """The samples flame_prof heatmap counts (unweighted, no --status):
    those not marked idle (docs/FORMAT.md "Idle samples")."""
    p = subprocess.run([FLAME_PROF, "heatmap", path], stdout=subprocess.PIPE, check=True)
    return sum(int(v) for v in re.findall(r'data-v="(-?[0-9]+)"', p.stdout.decode("utf-8")))


def processes(path):
    """The (status, N, S) of a file's event lines."""
    with open(path, encoding="utf-8") as f:
        return {m.groups() for m in
                (re.match(r"^([a-z_]+) (\d+)/(\d+) \[000\] ", line) for line in f) if m}


def evented_stacks(profile, frames, status):
    """The stacks (status first) an evented speedscope profile holds for
    some time."""
    out = set()
    open_ = []
    events = profile["events"]
    for k, e in enumerate(events):
        if e["type"] == "O":
            open_.append(frames[e["frame"]])
        else:
            open_.pop()
        nxt = events[k + 1]["at"] if k + 1 < len(events) else e["at"]
        if open_ and nxt > e["at"]:
            out.add((status,) + tuple(open_))
    return out


def top_leaves(counter, n=5):
    leaves = collections.Counter()
    for stack, c in counter.items():
        leaves[stack[-1]] += c
    return leaves.most_common(n)


def tidy(name):
    """A name as stackcollapse-perf.pl tidies it: quotes dropped."""
    return name.replace("'", "").replace('"', "")


def check_stackcollapse(paths):
    src = os.environ.get("FLAMEGRAPH_SRC")
    script = src and os.path.join(src, "stackcollapse-perf.pl")
    if not script or not os.path.isfile(script) or not shutil.which("perl"):
        skipped.append("stackcollapse-perf.pl: set FLAMEGRAPH_SRC to a checkout of "
                       "Brendan Gregg's FlameGraph (no Debian or npm package ships it)")
        print("SKIP " + skipped[-1])
        return
    for path in paths:
        b = os.path.basename(path)
        p = subprocess.run(["perl", script, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(p.returncode == 0, "%s: stackcollapse-perf.pl runs" % b, p.stderr.decode()[-500:])
        got = collections.Counter()
        for line in p.stdout.decode("utf-8").splitlines():
            stack, _, n = line.rpartition(" ")
            got[tuple(stack.split(";"))] += int(n)
        want = collections.Counter()
        for stack, c in folded(path).items():
            want[tuple(tidy(f) for f in stack)] += c
        check(sum(got.values()) == sum(want.values()),
              "%s: stackcollapse total %d == flame_prof folded %d" % (b, sum(got.values()), sum(want.values())))
        check(set(s[0] for s in got) == set(s[0] for s in want),
              "%s: stackcollapse roots are the statuses" % b, sorted(set(s[0] for s in got)))
        check(got == want, "%s: stackcollapse stacks == flame_prof folded (quotes dropped)" % b,
              sorted(set(got) ^ set(want))[:3])
        check(top_leaves(got) == top_leaves(want), "%s: top frames %s" % (b, top_leaves(want, 3)))


# Run with Debian's python3 (Flask, python-magic): the checkout's app.perf
# modules, without app/__init__.py (which wires the web UI); prints, per
# file, the sample offsets, the flame graph's per-status totals and, for
# the fork, the tree weighed by metric_erlang_memory.
FLAMESCOPE_SCRIPT = r"""
import importlib, json, os, sys, types
src = sys.argv[1]
sys.path.insert(0, src)
pkg = types.ModuleType("app")
pkg.__path__ = [os.path.join(src, "app")]
sys.modules["app"] = pkg
config = importlib.import_module("app.config")
heatmap = importlib.import_module("app.perf.heatmap")
flame_graph = importlib.import_module("app.perf.flame_graph")
fork = "which" in flame_graph.perf_generate_flame_graph.__code__.co_varnames


def total(n):
    return n.get("v", 0) + sum(total(c) for c in n.get("c", []))


def statuses(tree):
    # the fork puts the samples under 'positive' and 'negative'
    top = tree["c"]
    if fork:
        top = [c for k in top if k["n"] in ("positive", "negative") for c in k["c"]]
    out = {}
    for c in top:
        out[c["n"]] = out.get(c["n"], 0) + total(c)
    return out


out = []
for path in sys.argv[2:]:
    config.PROFILE_DIR = os.path.dirname(path)
    r = {"offsets": len(heatmap.perf_read_offsets(path).offsets)}
    if fork:
        r["statuses"] = statuses(flame_graph.perf_generate_flame_graph(path, which="samples"))
        r["memory"] = total(flame_graph.perf_generate_flame_graph(path, which="erlang_memory"))
    else:
        r["statuses"] = statuses(flame_graph.perf_generate_flame_graph(path))
    out.append(r)
print(json.dumps({"fork": fork, "files": out}))
"""


def check_flamescopes(paths):
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    for env, what in (("FLAMESCOPE_SRC", "stock Flamescope"), ("FLAMESCOPE_FORK_SRC", "the ebegumisa fork")):
        src = os.environ.get(env)
        if not src or not os.path.isfile(os.path.join(src, "app", "perf", "flame_graph.py")):
            skipped.append("%s: set %s to a checkout" % (what, env))
            print("SKIP " + skipped[-1])
            continue
        p = subprocess.run([py, "-c", FLAMESCOPE_SCRIPT, src] + paths, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        if not check(p.returncode == 0, "%s reads the files" % what, p.stderr.decode()[-1500:]):
            continue
        res = json.loads(p.stdout.decode().strip().splitlines()[-1])
        check(res["fork"] == (env == "FLAMESCOPE_FORK_SRC"), "%s is %s" % (src, what))
        for path, r in zip(paths, res["files"]):
            b = os.path.basename(path)
            want = folded(path)
            by_status = collections.Counter()
            for stack, c in want.items():
                by_status[stack[0]] += c
            # the heat map leaves out the samples marked idle, the flame
            # graph holds every sample
            counted = heatmap_count(path)
            check(r["offsets"] == counted, "%s: %s's heat map counts %d of %d samples "
                  "(flame_prof heatmap %d)" % (b, what, r["offsets"], sum(want.values()), counted))
            check(r["statuses"] == dict(by_status), "%s: %s's statuses %s" % (b, what, r["statuses"]),
                  dict(by_status))
            if "memory" in r:
                p = subprocess.run([FLAME_PROF, "folded", "-w", "memory", path], stdout=subprocess.PIPE,
                                   check=True)
                mem = sum(int(line.rpartition(" ")[2]) for line in p.stdout.decode().splitlines())
                check(r["memory"] == mem, "%s: %s's memory weight %d == flame_prof -w memory %d"
                      % (b, what, r["memory"], mem))


def check_speedscope(paths, shots):
    require(["playwright-core", "speedscope"])
    tmp = tempfile.mkdtemp(prefix="fp-readers.")
    root = os.path.join(tmp, "www")
    shutil.copytree(os.path.join(BUILD, "node", "node_modules", "speedscope", "dist", "release")
                    if not os.environ.get("FP_NODE_DIR") else
                    os.path.join(os.environ["FP_NODE_DIR"], "node_modules", "speedscope", "dist", "release"),
                    root)
    runs = []
    for i, path in enumerate(paths):
        name = "file%d" % i
        shutil.copy(path, os.path.join(root, name + ".perf"))
        runs.append({"name": name, "file": name + ".perf"})
    handler = functools.partial(QuietHandler, directory=root)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        res, err = run_driver(tmp, SPEEDSCOPE_DRIVER, {
            "base": "http://127.0.0.1:%d" % srv.server_address[1], "runs": runs,
            "shots": shots, "tmp": tmp})
    finally:
        srv.shutdown()
    if not check(res is not None, "speedscope driver ran", err):
        shutil.rmtree(tmp, ignore_errors=True)
        return
    check(not res["errors"], "no page errors in speedscope", res["errors"])
    for run, path in zip(res["runs"], paths):
        b = os.path.basename(path)
        with open(run["exported"], encoding="utf-8") as f:
            doc = json.load(f)
        frames = [fr["name"] for fr in doc["shared"]["frames"]]
        profiles = doc["profiles"]
        names = sorted(p["name"] for p in profiles)
        want_procs = processes(path)
        # speedscope names a profile "COMMAND pid: PID tid: TID", leaving
        # out a pid or tid of 0
        want_names = sorted(st + (" pid: " + n if n != "0" else "") + (" tid: " + sr if sr != "0" else "")
                            for st, n, sr in want_procs)
        check(names == want_names, "%s: speedscope profiles are the status and pid pairs (%d)"
              % (b, len(want_names)), names[:5])
        # speedscope weighs a sample by the time to the next one of its
        # profile and exports evented profiles: sample counts are not
        # there, but every stack it shows must be one of flame_prof's,
        # and flame_prof's heaviest stacks must be among them
        want = folded(path)
        stacks = set()
        for p in profiles:
            stacks |= evented_stacks(p, frames, p["name"].split(" ")[0])
        check(stacks and stacks <= set(want), "%s: speedscope's %d stacks are flame_prof folded stacks"
              % (b, len(stacks)), sorted(stacks - set(want))[:3])
        heavy = [st for st, _ in want.most_common() if len(st) > 1][:3]
        check(all(st in stacks for st in heavy),
              "%s: flame_prof's heaviest stacks are in speedscope" % b,
              [st for st in heavy if st not in stacks])
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    if not os.path.exists(FLAME_PROF):
        print("SKIP: flame_prof not built at " + FLAME_PROF)
        sys.exit(77)
    shots = os.path.join(BUILD, "perf-readers")
    os.makedirs(shots, exist_ok=True)
    check_stackcollapse(FILES)
    check_flamescopes(FILES)
    check_speedscope(FILES, shots)
    if failures:
        print("FAIL test_perf_readers.py: %d failed check(s): %s" % (len(failures), "; ".join(failures)))
        sys.exit(1)
    print("PASS test_perf_readers.py" + ("" if not skipped else " (skipped: %s)" % "; ".join(skipped)))


if __name__ == "__main__":
    main()
