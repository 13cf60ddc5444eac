#!/usr/bin/env python3
"""flame_profd output loads in stock Netflix FlameScope.

Needs a FlameScope checkout in FLAMESCOPE_SRC (skips with 77 otherwise)
and Flask, python-magic and cachetools (Debian: apt-get install -y
python3-flask python3-magic python3-cachetools).  If the running python
lacks them, the test re-executes itself with /usr/bin/python3.

FlameScope's own code is imported from FLAMESCOPE_SRC (never copied):
app.common.fileutil.get_profile_type, app.perf.heatmap.perf_read_offsets and
app.perf.flame_graph.perf_generate_flame_graph, with app.config.PROFILE_DIR
pointed at the output directory.  If app/__init__.py cannot be imported
(it wires the web UI and needs the pip-only nflxprofile package), the `app`
package is set up without running it; the perf modules are unchanged.

For every output file:
  * get_profile_type() == 'perf'
  * the idle field (docs/FORMAT.md "Idle samples") on exactly the samples
    of the rule that ships (status waiting or suspended)
  * perf_read_offsets(): one offset per sample not marked idle, equal to
    their times, as many as `flame_prof heatmap` counts in its cells, and
    the heat map's start at the first sample of all
  * perf_generate_flame_graph(): root children are exactly the process
    statuses seen, and the whole tree (names and counts) equals the tree
    built from this harness's strict parse -- so FlameScope split every
    frame exactly as we did (no '+' truncation, no '->' splitting)
  * every file has at least one sample (FlameScope classifies a
    comment-only file as 'trace_event' and cannot open it)
Across files: both idle and counted samples are there; fp_demo:deep/2 is a frame; the quoted names
fp_demo:'fp\\x20demo\\x20quoted'/1 and fp_demo:'fp\\x2Bdemo\\x3Bsemi\\x27q\\x5C'/1
survive intact.

Usage: test_flamescope.py                 run a demo node + flame_profd, check its output
       test_flamescope.py --files F...    only check existing perf files (no Erlang needed)
"""
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import time
import types

DEPS = ("flask", "magic", "cachetools")
SYSTEM_PYTHON = "/usr/bin/python3"


def _deps_missing():
    return [m for m in DEPS if importlib.util.find_spec(m) is None]


if (os.environ.get("FLAMESCOPE_SRC") and _deps_missing()
        and os.path.exists(SYSTEM_PYTHON)
        and os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)
        and not os.environ.get("FP_FLAMESCOPE_REEXEC")):
    os.environ["FP_FLAMESCOPE_REEXEC"] = "1"
    sys.stdout.flush()
    os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

FLAME_PROF = os.environ.get("FLAME_PROF") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "flame_prof", "flame_prof")
# the rule fp_sample_is_idle() ships (model/term.c)
IDLE_STATUSES = ("waiting", "suspended")

QUOTED = ["fp_demo:" + h.quote_atom("fp demo quoted") + "/1",
          "fp_demo:" + h.quote_atom("fp+demo;semi'q\\") + "/1"]


def load_flamescope(src):
    app_dir = os.path.join(src, "app")
    if not os.path.isfile(os.path.join(app_dir, "perf", "flame_graph.py")):
        h.fail("FLAMESCOPE_SRC=%s does not look like a FlameScope checkout" % src)
    missing = _deps_missing()
    if missing:
        h.fail("FlameScope needs %s (python %s); on Debian: apt-get install -y "
               "python3-flask python3-magic python3-cachetools" % (missing, sys.executable))
    sys.path.insert(0, src)
    try:
        importlib.import_module("app")
        how = "full app package"
    except ImportError as e:
        for k in [k for k in sys.modules if k == "app" or k.startswith("app.")]:
            del sys.modules[k]
        pkg = types.ModuleType("app")
        pkg.__path__ = [app_dir]
        pkg.__file__ = os.path.join(app_dir, "__init__.py")
        sys.modules["app"] = pkg
        how = "app package without app/__init__.py (%s)" % e
    mods = {}
    for m in ("app.config", "app.common.fileutil", "app.perf.heatmap", "app.perf.flame_graph"):
        mods[m] = importlib.import_module(m)
        if not os.path.realpath(mods[m].__file__).startswith(os.path.realpath(src)):
            h.fail("%s imported from %s, not from FLAMESCOPE_SRC" % (m, mods[m].__file__))
    h.log("FlameScope from %s (%s; python %s)" % (src, how, sys.executable))
    return mods


def merge_tree(node):
    """FlameScope tree -> {name: [value, children]} (merging equal names,
    which FlameScope keeps apart only when their library type differs)."""
    out = {}
    for c in node["c"]:
        e = out.setdefault(c["n"], [0, {}])
        e[0] += c["v"]
        sub = merge_tree(c)
        _merge_into(e[1], sub)
    return out


def _merge_into(dst, src):
    for k, (v, ch) in src.items():
        e = dst.setdefault(k, [0, {}])
        e[0] += v
        _merge_into(e[1], ch)


def our_tree(samples):
    root = {}
    for s in samples:
        path = [s["status"]] + list(reversed(s["frames"]))
        level = root
        for i, name in enumerate(path):
            e = level.setdefault(name, [0, {}])
            if i == len(path) - 1:
                e[0] += 1
            level = e[1]
    return root


def names_in(tree):
    for k, (_, ch) in tree.items():
        yield k
        yield from names_in(ch)


def total(tree):
    return sum(v + total(ch) for v, ch in tree.values())


def tree_diff(a, b, path=()):
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            return "%s: %r only in %s" % (";".join(path), k, "ours" if k in a else "FlameScope")
        if a[k][0] != b[k][0]:
            return "%s: count %d vs %d" % (";".join(path + (k,)), a[k][0], b[k][0])
        d = tree_diff(a[k][1], b[k][1], path + (k,))
        if d:
            return d
    return None


def flame_prof_heatmap_count(path):
    """The samples `flame_prof heatmap` counts in its cells (unweighted,
    no --status: what stock Flamescope's heat map counts)."""
    p = subprocess.run([FLAME_PROF, "heatmap", path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        h.fail("flame_prof heatmap %s: %s" % (path, p.stderr.decode()[-500:]))
    return sum(int(v) for v in re.findall(r'data-v="(-?[0-9]+)"', p.stdout.decode()))


def check_files(t, fs, profile_dir, paths):
    fs["app.config"].PROFILE_DIR = profile_dir
    get_type = fs["app.common.fileutil"].get_profile_type
    read_offsets = fs["app.perf.heatmap"].perf_read_offsets
    flame = fs["app.perf.flame_graph"].perf_generate_flame_graph
    all_names = set()
    idle_total = counted_total = 0
    for p in paths:
        b = os.path.basename(p)
        samples = h.read_samples(p)
        if not t.check(samples, "%s: has samples (FlameScope cannot open sample-less files)" % b):
            t.eq(get_type(p), "trace_event", "%s: (FlameScope sees a sample-less file as)" % b)
            continue
        t.eq(get_type(p), "perf", "%s: FlameScope profile type" % b)
        wrong = [(s["line"], s["status"]) for s in samples
                 if s["idle"] != (s["status"] in IDLE_STATUSES)]
        t.check(not wrong, "%s: idle field on the samples of %s only" % (b, "/".join(IDLE_STATUSES)),
                str(wrong[:5]))
        counted = [s for s in samples if not s["idle"]]
        idle_total += len(samples) - len(counted)
        counted_total += len(counted)
        off = read_offsets(p)
        t.eq(len(off.offsets), len(counted), "%s: one FlameScope heat-map offset per sample not "
             "marked idle (%d of %d)" % (b, len(counted), len(samples)))
        t.eq(len(off.offsets), flame_prof_heatmap_count(p),
             "%s: FlameScope's heat map counts what flame_prof heatmap counts" % b)
        t.check(off.offsets == [s["ts"] for s in counted], "%s: offsets are their times" % b)
        t.check(off.start == samples[0]["ts"] and off.end == samples[-1]["ts"],
                "%s: FlameScope start/end" % b)
        tree = flame(p)
        statuses = {s["status"] for s in samples}
        kids = [c["n"] for c in tree["c"]]
        t.eq(sorted(kids), sorted(statuses), "%s: root children are the statuses" % b)
        fs_tree = merge_tree(tree)
        mine = our_tree(samples)
        t.eq(total(fs_tree), len(samples), "%s: FlameScope tree counts every sample" % b)
        d = tree_diff(mine, fs_tree)
        t.check(d is None, "%s: FlameScope tree == tree from our parse" % b, d or "")
        all_names |= set(names_in(fs_tree))
    t.check(idle_total and counted_total, "idle samples (%d) left out of the heat maps and samples "
            "counted (%d)" % (idle_total, counted_total))
    t.check("fp_demo:deep/2" in all_names, "fp_demo:deep/2 is a FlameScope frame")
    for q in QUOTED:
        t.check(q in all_names, "quoted name %s intact in FlameScope" % q,
                str(sorted(n for n in all_names if "fp" in n and "demo" in n and "'" in n)))
    fun = sorted(n for n in all_names if n.startswith("fp_demo:'-"))
    t.check(fun, "fun names (fp_demo:'-...-fun-N-'/A) intact: %s" % fun[:3])


def main(t):
    src = os.environ.get("FLAMESCOPE_SRC")
    if not src:
        raise h.Skip("set FLAMESCOPE_SRC to a Netflix FlameScope checkout to run this test")
    fs = load_flamescope(os.path.abspath(src))
    if "--files" in sys.argv:
        paths = [os.path.abspath(p) for p in sys.argv[sys.argv.index("--files") + 1:]]
        if not paths:
            h.fail("--files needs file names")
        for p in paths:
            h.parse_perf(p)  # strict grammar first: clearer errors
        check_files(t, fs, os.path.commonpath([os.path.dirname(p) for p in paths]), paths)
        return
    node = h.start_node(idle=500)
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=10, rate=20, every="1s", duration="4s", rotate="2s", compress="gzip",
                         backtrace_depth=64, name=["fp_demo_quoted", "fp_demo_anon"])
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    rc, so, se = h.run_daemon(args, timeout=40)
    t1 = time.time()
    if not t.eq(rc, 0, "exit code 0"):
        h.log(se[-3000:])
    files = h.check_output(t, out, node, t0, t1, min_samples=10)
    if files:
        check_files(t, fs, out, [f.path for f in files])


if __name__ == "__main__":
    files_mode = "--files" in sys.argv
    if files_mode:
        # no Erlang needed: do not let harness.run() skip for a missing erl
        h.erlang_tools = lambda: (None, None, None)
    h.run(main, needs_daemon=not files_mode and bool(os.environ.get("FLAMESCOPE_SRC")))
