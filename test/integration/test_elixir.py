#!/usr/bin/env python3
"""Frames of Elixir modules read in the Elixir form, on a node running Elixir.

A node with Elixir's stdlib on its path (-pa /usr/lib/elixir/lib/elixir/ebin,
Debian's `elixir`) runs bench/elixir/rw_ex.ex, compiled with elixirc when the
test runs: a GenServer (RwEx.Counter) called in a loop by two clients, and a
process spinning in anonymous functions (RwEx.Spin). Skipped with a message
when elixirc or Elixir's ebin is missing.

flame_profd by default:
  * the header says frame_names=elixir;
  * no name in the file is in the Erlang form of an Elixir module ('Elixir.
    anywhere); RwEx.Counter.handle_call/3, RwEx.Client.loop/1 and an
    "anonymous fn/N in RwEx." frame are there, Enum's frames too, Erlang
    frames (gen_server:*) as before; the GenServer's registered name is
    RwEx.Counter;
  * `flame_prof top` and `flame_prof svg` show the same: every frame of an
    Elixir module in the Elixir form; cut SVG labels keep their end;
  * with FLAMESCOPE_SRC (a stock Flamescope checkout), Flamescope's own parser
    builds the same tree from the file as ours, Elixir names whole.
flame_profd --erlang-names: the file has the Erlang form ('Elixir.RwEx.
Counter':handle_call/3), frame_names=erlang; flame_prof reads it in the
Elixir form by default and in the Erlang form with --erlang-names.

Labels and request ids (the labelled pool and the Task pipeline of
bench/elixir/rw_ex.ex started too):
  * --name RwEx.Counter alone (--top 0) samples the GenServer and nothing else;
  * with --logger-key request_id --callers, on a node with labels (OTP 27
    and later; Debian's Elixir runs on 25 and 27): the pool's samples carry
    label {rw_pool,N}; `flame_prof top --where label~rw_pool` shows only
    RwEx.Pool's stacks, `--where request_id=req-N` only that request's
    (RwEx.Pipeline) and as many samples as the file holds with that id, and
    the Tasks' callers are the pipeline process. On OTP 25 the node note says
    labels=no keys=unavailable and nothing is recorded.
"""
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

ELIXIR_EBIN = os.environ.get("FP_ELIXIR_EBIN", "/usr/lib/elixir/lib/elixir/ebin")
LOGGER_EBIN = os.path.join(os.path.dirname(os.path.dirname(ELIXIR_EBIN)), "logger", "ebin")
SRC = os.path.join(h.REPO, "bench", "elixir", "rw_ex.ex")
SVG = "{http://www.w3.org/2000/svg}"


def flame_prof_path():
    p = os.environ.get("FLAME_PROF")
    if p:
        return p
    return os.path.join(os.path.dirname(os.path.dirname(h.daemon_path())),
                        "flame_prof", "flame_prof")


def flame_prof(*args):
    p = subprocess.run([flame_prof_path()] + list(args), capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def compile_workload():
    elixirc = shutil.which("elixirc")
    if not elixirc or not os.path.isdir(ELIXIR_EBIN):
        raise h.Skip("Elixir is not installed (elixirc, %s): apt-get install elixir"
                     % ELIXIR_EBIN)
    d = h.mkdtemp("rw_ex_")
    r = subprocess.run([elixirc, "-o", d, SRC], capture_output=True, text=True,
                       timeout=300, env=h.child_env(HOME=d))
    if r.returncode != 0 and "please re-compile this module" in r.stdout + r.stderr:
        # elixirc runs on the erl of PATH: Debian's Elixir 1.14 (compiled by
        # OTP 24) loads on OTP 25 and 27, not on 29
        raise h.Skip("the erl on PATH cannot load Debian's Elixir (%s): it runs on "
                     "OTP 25 and 27" % shutil.which("erl"))
    if r.returncode != 0:
        h.fail("elixirc %s failed:\n%s%s" % (SRC, r.stdout, r.stderr))
    return d


def names_of(files):
    """Every frame, initial call and registered name of the files."""
    out = []
    for f in files:
        for s in f.samples:
            out += s["frames"]
            out += [v for v in s["fields"].values()]
    return out


def header_options(f):
    return [c for _, c in f.comments if c.startswith("# options: ")]


def run_daemon(t, node, label, **extra):
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=10, rate=20, every="1s", duration="5s",
                         compress="none", backtrace_depth=64, **extra)
    h.log("running: flame_profd " + " ".join(args))
    rc, _, se = h.run_daemon(args, timeout=60)
    if not t.eq(rc, 0, "%s: exit code 0" % label):
        h.log(se[-3000:])
    files = h.check_output(t, out, node, min_samples=20)
    return out, files


def check_top_and_svg(t, out, label, *opts):
    rc, top, err = flame_prof("top", "-n", "0", *(list(opts) + [out]))
    t.check(rc == 0, "%s: flame_prof top exits 0" % label, err)
    t.check("'Elixir." not in top, "%s: flame_prof top: no Erlang form of an Elixir module"
            % label, top[:3000])
    t.check("RwEx.Counter.handle_call/3" in top and "anonymous fn/" in top,
            "%s: flame_prof top: RwEx.Counter.handle_call/3 and anonymous fns" % label,
            top[:3000])
    svg = os.path.join(h.mkdtemp("svg_"), "g.svg")
    rc, _, err = flame_prof("svg", "--minwidth", "0", "--width", "600", "-o", svg,
                            *(list(opts) + [out]))
    t.check(rc == 0, "%s: flame_prof svg exits 0" % label, err)
    frames = []
    for g in ET.parse(svg).getroot().iter(SVG + "g"):
        if g.get("class") == "f":
            title = g.find(SVG + "title").text
            frames.append((title[:title.rfind(" (")], g.find(SVG + "text").text or ""))
    names = [n for n, _ in frames]
    t.check(not any("'Elixir." in n for n in names),
            "%s: flame_prof svg: no Erlang form of an Elixir module" % label,
            repr([n for n in names if "'Elixir." in n][:5]))
    t.check(any(n.startswith("RwEx.") or " in RwEx." in n for n in names),
            "%s: flame_prof svg: RwEx frames in the Elixir form" % label)
    cut = [(n, lab) for n, lab in frames if lab.startswith("..")]
    t.check(all(n.endswith(lab[2:]) for n, lab in cut),
            "%s: flame_prof svg: %d cut labels keep the end of their names" % (label, len(cut)),
            repr(cut[:5]))


def check_flamescope(t, out, files):
    src = os.environ.get("FLAMESCOPE_SRC")
    if not src:
        h.log("FLAMESCOPE_SRC not set: stock Flamescope's parser not checked")
        return
    import test_flamescope as tf
    fs = tf.load_flamescope(os.path.abspath(src))
    fs["app.config"].PROFILE_DIR = out
    flame = fs["app.perf.flame_graph"].perf_generate_flame_graph
    for f in files:
        b = os.path.basename(f.path)
        fs_tree = tf.merge_tree(flame(f.path))
        d = tf.tree_diff(tf.our_tree(f.samples), fs_tree)
        t.check(d is None, "Flamescope: %s: tree == tree from our parse" % b, d or "")
        names = set(tf.names_in(fs_tree))
        ex = sorted(n for n in names if n.startswith("RwEx.") or " in RwEx." in n)
        t.check(ex, "Flamescope: %s: Elixir names whole: %s" % (b, ex[:4]))


def main(t):
    ebin = compile_workload()
    node = h.start_node(demo=False, erl_args=["-pa", ELIXIR_EBIN, "-pa", LOGGER_EBIN,
                                              "-pa", ebin])
    loads = node.eval("case code:ensure_loaded('Elixir.Kernel') of "
                      "{module, _} -> ok; Other -> Other end")
    if loads != "ok":
        otp = node.eval("erlang:system_info(otp_release)")
        node.stop()
        raise h.Skip("this node (OTP %s) cannot load Elixir's .beam files from %s (%s): "
                     "Debian's Elixir 1.14 runs on OTP 25 and 27" % (otp, ELIXIR_EBIN, loads))
    t.eq(node.eval("{ok, _} = application:ensure_all_started(elixir), "
                   "'Elixir.RwEx':start()"), "ok", "the Elixir workload started")

    out, files = run_daemon(t, node, "elixir names")
    t.check(all(any(o.endswith(" frame_names=elixir") for o in header_options(f))
                for f in files), "header: frame_names=elixir")
    names = names_of(files)
    t.eq([n for n in names if "'Elixir." in n][:5], [],
         "no name in the Erlang form of an Elixir module")
    frames = set(n for f in files for s in f.samples for n in s["frames"])
    for want in ("RwEx.Counter.handle_call/3", "RwEx.Client.loop/1"):
        t.check(want in frames, "frame %s" % want, repr(sorted(frames)[:40]))
    t.check(any(n.startswith("gen_server:") for n in frames),
            "Erlang frames as before (gen_server:*)", repr(sorted(frames)[:40]))
    anon = sorted(n for n in frames if n.startswith("anonymous fn/") and " in RwEx." in n)
    t.check(anon, "anonymous fns of RwEx: %s" % anon[:4], repr(sorted(frames)[:40]))
    t.check(any(n.startswith("Enum.") for n in frames), "Elixir's stdlib frames (Enum.*)",
            repr(sorted(frames)[:40]))
    regs = set(s["fields"].get("registered_name") for f in files for s in f.samples)
    t.check("RwEx.Counter" in regs, "registered name RwEx.Counter", repr(regs))
    check_top_and_svg(t, out, "elixir names")
    check_flamescope(t, out, files)

    out, files = run_daemon(t, node, "erlang names", erlang_names=True)
    t.check(all(any(o.endswith(" frame_names=erlang") for o in header_options(f))
                for f in files), "--erlang-names: header frame_names=erlang")
    frames = set(n for f in files for s in f.samples for n in s["frames"])
    t.check("'Elixir.RwEx.Counter':handle_call/3" in frames,
            "--erlang-names: frames in the Erlang form", repr(sorted(frames)[:40]))
    t.check(not any(n.startswith("RwEx.") or n.startswith("anonymous fn/") for n in frames),
            "--erlang-names: no frame in the Elixir form")
    check_top_and_svg(t, out, "erlang-names file read in the Elixir form")
    rc, top, _ = flame_prof("top", "-n", "0", "--erlang-names", out)
    t.check("'Elixir.RwEx.Counter':handle_call/3" in top and "RwEx.Counter.handle" not in
            top.replace("'Elixir.RwEx.Counter':handle", ""),
            "flame_prof top --erlang-names: the Erlang form", top[:2000])
    check_labels(t, node)
    node.stop()


def check_labels(t, node):
    t.eq(node.eval("'Elixir.RwEx.Pool':start(3), 'Elixir.RwEx.Pipeline':start(), ok"),
         "ok", "the labelled pool and the Task pipeline started")
    otp = int(node.eval("list_to_integer(erlang:system_info(otp_release))"))

    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=0, name="RwEx.Counter", rate=20, every="1s",
                         compress="none")
    rc, _, se = h.run_daemon_until(args, lambda dm: dm.wait_sample_count(10))
    t.eq(rc, 0, "--name RwEx.Counter: exit code 0")
    files = h.check_output(t, out, node, min_samples=10)
    regs = set(s["fields"].get("registered_name") for f in files for s in f.samples)
    t.eq(regs, {"RwEx.Counter"}, "--name RwEx.Counter: only the GenServer sampled")

    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, top=20, rate=20, every="1s", duration="6s",
                         compress="none", logger_key="request_id", callers=True)
    rc, _, se = h.run_daemon(args, timeout=60)
    t.eq(rc, 0, "--logger-key --callers: exit code 0")
    files = h.check_output(t, out, node, min_samples=20)
    samples = [s for f in files for s in f.samples]
    notes = [c for f in files for _, c in f.comments if " node: name=" in c]
    if otp < 27:
        t.check(all(" labels=no keys=unavailable" in c for c in notes),
                "OTP %d: the node note says labels=no keys=unavailable" % otp, repr(notes))
        t.check(not any("label" in s["fields"] or "key.request_id" in s["fields"]
                        for s in samples), "OTP %d: nothing recorded" % otp)
        t.check("cannot read one key" in se, "OTP %d: warned once" % otp, se[-2000:])
        h.log("OTP %d: labels need 27 (process_info label), keys 26.2: checked absent" % otp)
        check_pprof(t, out, node, {}, ["--status", "running"], None)
        return
    t.check(all(" labels=item keys=yes" in c for c in notes),
            "node note: labels=item keys=yes", repr(notes))
    labels = set(s["fields"].get("label") for s in samples) - {None}
    t.check({"{rw_pool,1}", "{rw_pool,2}", "{rw_pool,3}"} & labels,
            "pool samples labelled {rw_pool,N}", repr(labels))
    rc, top, err = flame_prof("top", "-n", "0", "--where", "label~rw_pool", out)
    t.check(rc == 0 and "RwEx.Pool.work/1" in top, "top --where label~rw_pool: the pool",
            err + top[:2000])
    funcs = [ln.split()[-1] for ln in top.splitlines()
             if ln[:1] == " " and "%" in ln and "FUNCTION" not in ln]
    t.check(funcs and all(fn.startswith("RwEx.Pool.") for fn in funcs),
            "top --where label~rw_pool: only RwEx.Pool's functions", repr(funcs))

    ids = {}
    for s in samples:
        v = s["fields"].get("key.request_id")
        if v:
            ids[v] = ids.get(v, 0) + 1
    if not t.check(ids, "samples carry key.request_id", repr(samples[:2])):
        return
    rid = max(ids, key=ids.get)
    rc, top, err = flame_prof("top", "-n", "0", "--where", "request_id=" + rid, out)
    t.check(rc == 0 and ("samples: %d\n" % ids[rid]) in top,
            "top --where request_id=%s: its %d samples" % (rid, ids[rid]), err + top[:1500])
    t.check("RwEx.Pipeline.serve/1" in top or "RwEx.Pipeline.step/2" in top,
            "top --where request_id=%s: the pipeline's stacks" % rid, top[:1500])
    callers = set(s["fields"].get("callers") for s in samples if s["fields"].get("key.request_id"))
    t.check(len(callers) >= 1 and None not in callers,
            "the Tasks' samples carry their callers", repr(callers))
    rc, top, err = flame_prof("top", "-n", "3", "--by", "label", out)
    t.check(rc == 0 and "== label: {rw_pool,1} (" in top and "== label: - (" in top,
            "top --by label: one table per label", top[:1500])
    check_pprof(t, out, node, {"key.request_id": (rid, ids[rid])},
                ["--where", "request_id=" + rid], ids[rid])


def check_pprof(t, out, node, expect, where, where_n):
    """flame_prof pprof of this run read by go tool pprof: its total is
    top's, the node and the labels survive with their counts, and
    --where selects what top's does. Only where go is installed."""
    go = shutil.which("go")
    if not go:
        h.log("no go (Debian package golang-go): the pprof checks skipped")
        return
    d = h.mkdtemp("pprof_")
    env = dict(os.environ, HOME=d, GOCACHE=os.path.join(d, "gocache"), PPROF_TMPDIR=d)

    def pprof(*args):
        p = subprocess.run([go, "tool", "pprof"] + list(args), capture_output=True,
                           text=True, timeout=120, env=env)
        return p.returncode, p.stdout, p.stderr

    for sel, n in ((), None), (where, where_n):
        prof = os.path.join(d, "p%d.pb.gz" % len(sel))
        rc, _, err = flame_prof("pprof", "-o", prof, *(list(sel) + [out]))
        _, top, _ = flame_prof("top", *(list(sel) + [out]))
        if n is None:
            m = re.match(r"samples: (\d+)\n", top)
            n = int(m.group(1)) if m else -1
        rc2, so, se = pprof("-top", prof)
        t.check(rc == 0 and rc2 == 0 and ("of %d total" % n) in so,
                "pprof %s: go tool pprof's total is top's (%d)" % (" ".join(sel), n),
                err + se + so[:800])
    rc, tags, se = pprof("-tags", os.path.join(d, "p0.pb.gz"))
    tags = "\n" + tags
    t.check(re.search(r"\n node: Total \d+\.0\n\s+\d+\.0 \(\s*100%%\): %s\n"
                      % re.escape(node.name), tags) is not None,
            "pprof: every sample's node is %s" % node.name, se + tags[:600])
    for key, (value, count) in expect.items():
        section = tags.partition("\n %s: Total " % key)[2].partition("\n\n")[0]
        t.check(re.search(r"\n\s+%d\.0 \(\s*[\d.]+%%\): %s(\n|$)"
                          % (count, re.escape(value)), section) is not None,
                "pprof: label %s=%s on its %d samples" % (key, value, count), tags[:1500])


if __name__ == "__main__":
    if (os.environ.get("FLAMESCOPE_SRC") and os.path.exists("/usr/bin/python3")
            and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3")
            and not os.environ.get("FP_FLAMESCOPE_REEXEC")):
        os.environ["FP_FLAMESCOPE_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__)] + sys.argv[1:])
    h.run(main)
