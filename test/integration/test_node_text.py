#!/usr/bin/env python3
"""What a node's applications control never harms the node, and never
reaches a terminal or a log unescaped.

1. Initial calls: busy proc_lib processes in the top-N, one with
   '$initial_call' {m, f, -1}, one with arity 2000000, neighbours with
   well-formed ones between them. proc_lib:initial_call/1 would make an
   atom per argument (the first never stops, the second passes the atom
   table's limit: the VM aborts). The node lives, its atom count moves by
   a handful, the daemon samples both odd processes (with their own
   initial call, proc_lib:init_p/3) and every neighbour gets its recorded
   call.
2. Node text: a process registered as 'a\\0b' beside one registered as a,
   labels, keys and Logger keys (where the node lets them be read: OTP
   26.2 and later) holding ESC, OSC, BEL, CR, LF, NUL. The file, flame_prof top, folded,
   procs (text, CSV, JSON) and speedscope show them escaped, 'a\\x00b'
   apart from a, no control byte in any output, every folded line one
   line with one frame per label.
3. A badrpc whose reason holds ESC, BEL and a newline with a forged log
   line after it (rex replaced for a moment by a process that answers
   so): the daemon's warning shows it escaped, on one line.
"""
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

# a busy proc_lib process with the given '$initial_call', registered
BUSY_IC = (
    "P = proc_lib:spawn(fun() -> "
    "  put('$initial_call', %s), "
    "  (fun L(I) -> _ = lists:seq(1, 3000), timer:sleep(1), L(I + 1) end)(0) "
    "end), register(%s, P)")

ODD = {"fp_nt_neg": "{m, f, -1}", "fp_nt_huge": "{m, f, 2000000}"}
GOOD = {"fp_nt_n1": ("{fp_nt_first, run, 1}", "fp_nt_first:run/1"),
        "fp_nt_n2": ("{fp_nt_second, run, 2}", "fp_nt_second:run/2"),
        "fp_nt_n3": ("{fp_nt_third, run, 3}", "fp_nt_third:run/3")}

# ESC, OSC (a title), BEL, CR, LF, NUL and a forged folded line, as
# atoms: the daemon writes an atom's text as it is (escaped in its field),
# a binary that is no printable UTF-8 as Erlang prints it (#Bin<...>)
LABEL = r'list_to_atom("\e]0;pwned\^G\rx\nfake_root;forged:frame/0 1000000")'
KEY = r'list_to_atom([27, $[, $2, $J, 0, $n, $u, $l])'
LOGGER = r'list_to_atom("req\e[31m\^G\n")'

# rex answers {badrpc, {'EXIT', Atom}} for MS milliseconds, then is itself
FAKE_REX = r"""
Real = whereis(rex), Until = erlang:monotonic_time(millisecond) + %(ms)d,
Evil = list_to_atom("evil\e]0;pwned\^G\n2026-11-27T00:00:00.000Z flame_profd error: forged"),
Fake = spawn(fun() ->
    Loop = fun L() ->
        case erlang:monotonic_time(millisecond) >= Until of
            true -> catch unregister(rex), register(rex, Real);
            false ->
                receive
                    {'$gen_call', {From, Ref}, _} ->
                        From ! {Ref, {badrpc, {'EXIT', Evil}}}, L()
                after 50 -> L()
                end
        end
    end,
    Loop()
end),
unregister(rex), register(rex, Fake), ok
"""


def flame_prof_path():
    p = os.environ.get("FLAME_PROF")
    if p:
        return p
    return os.path.join(os.path.dirname(os.path.dirname(h.daemon_path())),
                        "flame_prof", "flame_prof")


def flame_prof(*args):
    p = subprocess.run([flame_prof_path()] + list(args), capture_output=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def inert(data, crlf=False):
    """The bytes a terminal would act on in data: C0 but LF (and CR before
    LF in CSV), DEL, C1 and what is no UTF-8."""
    text = data.decode("utf-8", "replace")
    if crlf:
        text = text.replace("\r\n", "\n")
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) < 0xa0
            or c == "\ufffd"]


def initial_calls(t, node):
    for name, ic in list(ODD.items()) + [(n, v[0]) for n, v in GOOD.items()]:
        node.eval(BUSY_IC % (ic, name))
    atoms0 = node.eval_int("erlang:system_info(atom_count)")
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=20, rate=10, every="1s",
                                           duration="5s", compress="none", verbose=True),
                             timeout=60)
    t.eq(rc, 0, "initial calls: the daemon's run ends with exit 0")
    t.require(node.alive(), "the node survives the initial-call questions",
              node.log_tail())
    atoms1 = node.eval_int("erlang:system_info(atom_count)")
    h.log("atom count %d before the run, %d after" % (atoms0, atoms1))
    t.check(0 <= atoms1 - atoms0 < 200,
            "the node's atom table grows by a handful (%d -> %d)" % (atoms0, atoms1))
    files = h.check_output(t, out, node)
    samples = h.all_samples(files)
    ics = {}
    for s in samples:
        reg = s["fields"].get("registered_name")
        if reg:
            ics.setdefault(reg, set()).add(s["fields"].get("initial_call"))
    for name in ODD:
        t.check(ics.get(name) == {"proc_lib:init_p/3"},
                "%s (%s) sampled, named by its own initial call" % (name, ODD[name]),
                repr(ics.get(name)))
    for name, (_, mfa) in GOOD.items():
        t.check(mfa in ics.get(name, set()),
                "neighbour %s keeps its recorded call %s" % (name, mfa),
                repr(ics.get(name)))
    t.check("unexpected initial_call reply" not in se,
            "no initial-call reply refused whole")
    for name in list(ODD) + list(GOOD):
        node.eval("exit(whereis(%s), kill)" % name)


def node_text(t, node):
    keys = node.eval("case catch process_info(whereis(rex), {dictionary, '$initial_call'}) "
                     "of {{dictionary, _}, _} -> true; _ -> false end") == "true"
    label_set = ("case erlang:function_exported(proc_lib, set_label, 1) of "
                 "true -> proc_lib:set_label(%s); false -> put('$process_label', %s) end"
                 % (LABEL, LABEL))
    spawn = ("P = spawn(fun() -> %s, put(fp_nt_key, %s), "
             "logger:update_process_metadata(#{request_id => %s}), "
             "(fun L(I) -> _ = lists:seq(1, 3000), timer:sleep(1), L(I + 1) end)(0) "
             "end), register(%%s, P)" % (label_set, KEY, LOGGER))
    node.eval(spawn % "list_to_atom([$a, 0, $b])")
    node.eval(spawn % "a")
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=20, rate=10, every="1s",
                                           duration="4s", compress="none",
                                           key="fp_nt_key", logger_key="request_id"),
                             timeout=60)
    t.eq(rc, 0, "node text: the daemon's run ends with exit 0")
    files = h.check_output(t, out, node)
    samples = h.all_samples(files)
    regs = {s["fields"].get("registered_name") for s in samples}
    t.check("'a\\x00b'" in regs and "a" in regs,
            "the file: 'a\\0b' written 'a\\x00b', apart from a", repr(sorted(r for r in regs if r)))
    ndir = os.path.join(out, h.sanitize_node(node.name))
    if keys:
        labs = {s["fields"].get("label") for s in samples}
        want = "\x1b]0;pwned\x07\rx\nfake_root;forged:frame/0 1000000"
        t.check(want in labs, "the file: the label escaped in its field, read back whole",
                repr(labs))
        raw = b"".join(h.read_bytes(f.path) for f in files)
        t.check(b"\tkey.fp_nt_key: \\x1B[2J\\x00nul" in raw and
                b"\tkey.request_id: req\\x1B[31m\\x07\\x0A" in raw,
                "the file: key and Logger key escaped, the NUL as \\x00")
    else:
        h.log("OTP %s reads no dictionary key alone: labels and keys are not recorded"
              % node.eval_str("erlang:system_info(otp_release)"))

    # flame_prof: no byte a terminal acts on in any output
    outputs = [("top", ["top"]), ("folded --process", ["folded", "--process"]),
               ("procs", ["procs"]),
               ("procs csv", ["procs", "--format", "csv"]),
               ("procs json", ["procs", "--format", "json"]),
               ("speedscope", ["speedscope"])]
    if keys:
        for by in ("label", "key:fp_nt_key", "key:request_id"):
            outputs += [("top --by " + by, ["top", "--by", by]),
                        ("folded --by " + by, ["folded", "--by", by]),
                        ("speedscope --by " + by, ["speedscope", "--by", by])]
    got = {}
    for what, args in outputs:
        rc, so, se = flame_prof(*(args + [ndir]))
        got[what] = so
        t.check(rc == 0 and not inert(so, crlf="csv" in what),
                "flame_prof %s: exit 0, no control byte" % what,
                "rc %d %s %r" % (rc, se[:200], inert(so, crlf="csv" in what)[:5]))
    procs = got["procs"].decode()
    t.check(re.search(r"  'a\\x00b' \(", procs) and re.search(r"  a \(", procs),
            "procs: 'a\\x00b' and a are two processes", procs[:1500])
    try:
        rows = json.loads(got["procs json"])
        names = {r["registered_name"] for r in rows}
        t.check("'a\\x00b'" in names and "a" in names,
                "procs --format json: valid JSON, 'a\\x00b' apart from a", repr(names))
    except ValueError as e:
        t.check(False, "procs --format json: valid JSON", str(e))
    try:
        ss = json.loads(got["speedscope"])
        names = [p["name"] for p in ss["profiles"]]
        t.check(any(n.startswith("'a\\x00b' <") for n in names) and
                any(n.startswith("a <") for n in names),
                "speedscope: a profile for 'a\\x00b' and one for a", repr(names[:12]))
    except ValueError as e:
        t.check(False, "speedscope: valid JSON", str(e))
    # top selects each by its name: neither takes the other's samples
    regs = [s["fields"].get("registered_name") for s in samples]
    for name in ("'a\\x00b'", "a"):
        rc, so, _ = flame_prof("top", "--name", name, ndir)
        m = re.match(r"samples: (\d+)\n", so.decode())
        t.check(rc == 0 and m and int(m.group(1)) == regs.count(name) > 0,
                "top --name %s: its own %d samples" % (name, regs.count(name)),
                so.decode()[:200])
    folded = got["folded --process"].decode()
    t.check(re.search(r"^\w+;'a\\x00b';", folded, re.M) and re.search(r"^\w+;a;", folded, re.M),
            "folded --process: 'a\\x00b' and a are two process frames", folded[:600])
    if keys:
        lines = got["folded --by label"].decode().splitlines()
        t.check(lines and all(re.match(r"^label:[^;]*;.* \d+$", l) for l in lines),
                "folded --by label: every line one stack, the label one frame",
                repr(lines[:4]))
        t.check(not any(l.startswith("fake_root;") for l in lines),
                "folded --by label: the newline forged no line")
        t.check(any(l.startswith("label:\\x1B]0\\x3Bpwned\\x07\\x0Dx\\x0Afake_root"
                                 "\\x3Bforged:frame/0 1000000;") for l in lines),
                "folded --by label: the label escaped in its frame", repr(lines[:4]))
        top = got["top --by key:fp_nt_key"].decode()
        t.check("== fp_nt_key: \\x1B[2J\\x00nul (" in top,
                "top --by key:NAME: the value escaped in its heading, NUL as \\x00",
                top[:300])
        top = got["top --by key:request_id"].decode()
        t.check("== request_id: req\\x1B[31m\\x07\\x0A (" in top,
                "top --by key:NAME: a Logger key escaped in its heading", top[:300])
        try:
            ss = json.loads(got["speedscope --by label"])
            frames = [f["name"] for f in ss["shared"]["frames"]]
            t.check(any(f.startswith("label:\\x1B]0\\x3Bpwned") for f in frames),
                    "speedscope --by label: valid JSON, the label frame escaped",
                    repr(frames[:6]))
        except ValueError as e:
            t.check(False, "speedscope --by label: valid JSON", str(e))
    for name in ("list_to_atom([$a, 0, $b])", "a"):
        node.eval("exit(whereis(%s), kill)" % name)


def badrpc(t, node):
    out = h.mkdtemp("out_")
    dm = h.start_daemon(h.daemon_args(node, out, top=5, rate=20, every="1s",
                                      timeout="1s", compress="none"))
    dm.wait_samples(timeout=20)
    node.eval(FAKE_REX % {"ms": 2500})
    dm.wait_log(r"warning: rpc failed on ", timeout=20)
    time.sleep(3)
    t.eq(node.eval("whereis(rex) =/= undefined"), "true", "rex is back")
    t.eq(dm.stop(), 0, "badrpc: the daemon runs on, exit 0")
    with open(dm.stderr_path, "rb") as f:
        err = f.read()
    t.check(not inert(err), "the daemon's log holds no control byte",
            repr(inert(err)[:5]))
    text = err.decode("utf-8", "replace")
    t.check(not re.search(r"^2026-11-27T00:00:00\.000Z flame_profd error: forged", text, re.M),
            "the reason forged no log line")
    hits = [l for l in text.splitlines() if "rpc failed on" in l]
    t.check(any("\\x1B]0;pwned\\x07\\x0A2026-11-27T00:00:00.000Z flame_profd error: forged"
                in l for l in hits),
            "the reason is logged escaped, on its line", repr(hits[:2]))


def main(t):
    node = h.start_node(idle=50, busy=1)
    initial_calls(t, node)
    node_text(t, node)
    badrpc(t, node)


if __name__ == "__main__":
    h.run(main)
