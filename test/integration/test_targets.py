#!/usr/bin/env python3
"""--pid and --name targets, checked by the node, and the node's real name.

- Pids whose numbers the node does not take (which of the candidates
  depends on the release: the node's own list_to_pid/1 says) exit 64 at
  once, naming the pid; the node logs no corrupted term and keeps no
  raised backtrace_depth.
- A dead --pid alone, an unregistered --name alone: exit 65 at once with
  a message naming it.
- The remote form rabbitmqctl prints, <node.Creation.N.S>, of this node
  is sampled; of another node, exit 64; of an earlier run of the node
  (another creation), "no such process".
- A --pid that exits during the run is said once, by name.
- The node reached by another host name (localhost) answers as NAME@HOST:
  one line says so, every request works, no warning flood.
"""
import os
import re
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

CANDIDATES = ["<0.4294967295.0>", "<0.99999.0>", "<0.32768.0>", "<0.100.8192>"]


def quick(t, node, label, want_rc, must_say, timeout=20, **opts):
    out = h.mkdtemp("out_")
    args = h.daemon_args(node, out, every="500ms", **opts)
    h.log("%s: flame_profd %s" % (label, " ".join(args)))
    t0 = time.monotonic()
    rc, _, se = h.run_daemon(args, timeout=timeout)
    took = time.monotonic() - t0
    if not t.eq(rc, want_rc, "%s: exit %d" % (label, want_rc)):
        h.log(se[-3000:])
    t.check(must_say in se, "%s: the message names %s" % (label, must_say),
            se[-1500:])
    return se, took


def main(t):
    node = h.start_node(idle=100)
    short = node.name.split("@")[1]

    # fields the node does not take
    for p in CANDIDATES:
        took = node.eval_str("case catch list_to_pid(\"%s\") of P when is_pid(P) -> "
                             "\"yes\"; _ -> \"no\" end" % p)
        if took == "yes":
            h.log("  %s is a pid this node takes: not a bad value here" % p)
            continue
        se, secs = quick(t, node, "bad --pid %s" % p, 64, p, pid=[p])
        t.check(secs < 10, "bad --pid %s: refused at start (%.1f s)" % (p, secs))
    t.check("corrupted" not in node.log_tail(200),
            "the node logged no corrupted external term")
    t.eq(node.eval_str("atom_to_list(whereis(flame_profd_janitor))"), "undefined",
         "no janitor left after the refusals")

    # a dead pid, an unregistered name
    dead = node.eval_str("begin P = spawn(fun() -> ok end), timer:sleep(50), "
                         "pid_to_list(P) end")
    se, secs = quick(t, node, "dead --pid", 65, dead, pid=[dead], duration="30s")
    t.check(secs < 10, "dead --pid: exit at once (%.1f s)" % secs)
    se, secs = quick(t, node, "unregistered --name", 65, "nobody_by_this_name",
                     name=["nobody_by_this_name"], duration="30s")
    t.check(secs < 10, "unregistered --name: exit at once (%.1f s)" % secs)

    # the remote form, of this node, of another and of an earlier run
    srv = node.pid_of("fp_demo_server")
    creation = node.eval_int("erlang:system_info(creation)")
    _, num, serial = srv.strip("<>").split(".")
    remote = "<%s.%d.%s.%s>" % (node.name, creation, num, serial)
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon_until(h.daemon_args(node, out, pid=[remote], rate=20,
                                                 every="1s"),
                                   lambda dm: dm.wait_sample_count(4))
    if t.eq(rc, 0, "remote-form --pid %s: exit 0" % remote):
        files = h.check_output(t, out, node, min_samples=4)
        t.eq({s["pid"] for s in h.all_samples(files)}, {srv.strip("<>")},
             "remote-form --pid: its process is sampled")
    else:
        h.log(se[-3000:])
    other = "<other@%s.%d.%s.%s>" % (short, creation, num, serial)
    quick(t, node, "--pid of another node", 64, other, pid=[other])
    stale = "<%s.%d.%s.%s>" % (node.name, creation + 1, num, serial)
    quick(t, node, "--pid of an earlier run of the node", 65, stale, pid=[stale],
          duration="30s")

    # a pinned process that exits during the run
    victim = node.eval_str(
        "begin P = spawn(fun() -> (fun L(N) -> receive stop -> ok after 0 -> L(N + 1) "
        "end end)(0) end), register(fp_test_victim, P), pid_to_list(P) end")
    out = h.mkdtemp("out_")
    d = h.start_daemon(h.daemon_args(node, out, pid=[victim], top=3, rate=20,
                                     every="500ms"))
    d.wait_samples(timeout=20)
    node.eval("fp_test_victim ! stop")
    d.wait_log(r"--pid %s has exited" % re.escape(victim), timeout=10)
    time.sleep(1.5)
    t.eq(d.stop(), 0, "exiting --pid: exit 0 after SIGTERM")
    t.eq(len(re.findall(r"--pid %s has exited" % re.escape(victim), d.read_stderr())), 1,
         "exiting --pid: said once")

    # Elixir aliases and atoms
    alias_pid = node.eval_str(
        "begin P = spawn(fun() -> (fun L(N) -> receive stop -> ok after 0 -> L(N + 1) "
        "end end)(0) end), register('Elixir.FpTest.Counter', P), pid_to_list(P) end")
    for given, atom in (("FpTest.Counter", "Elixir.FpTest.Counter"),
                        ("Elixir.FpTest.Counter", "Elixir.FpTest.Counter"),
                        (":fp_demo_sink", "fp_demo_sink")):
        out = h.mkdtemp("out_")
        rc, _, se = h.run_daemon_until(h.daemon_args(node, out, name=[given], rate=20,
                                                     every="1s"),
                                       lambda dm: dm.wait_sample_count(2))
        if not t.eq(rc, 0, "--name %s: exit 0" % given):
            h.log(se[-2000:])
            continue
        want = node.pid_of("'%s'" % atom)
        t.check(re.search(r"--name %s( \('%s'\))? is %s" % (re.escape(given), re.escape(atom),
                                                           re.escape(want)), se),
                "--name %s: says it is %s (%s)" % (given, want, atom), se[-1500:])
        files = h.check_output(t, out, node, min_samples=2)
        t.eq({s["pid"] for s in h.all_samples(files)}, {want.strip("<>")},
             "--name %s: that process is sampled" % given)
    node.eval("'Elixir.FpTest.Counter' ! stop")
    h.log("  (alias process was %s)" % alias_pid)

    # the node reached by another host name
    alias = "%s@localhost" % node.name.split("@")[0]
    out = h.mkdtemp("out_")
    # two intervals with samples: the selection and the samples answered
    rc, _, se = h.run_daemon_until(["--node", alias, "--cookie-file", node.cookie_file,
                                    "--out", out, "--top", "5", "--every", "1s"],
                                   lambda dm: dm.wait_samples(intervals_needed=2))
    if not t.eq(rc, 0, "--node %s: exit 0" % alias):
        h.log(se[-3000:])
    t.check("answers as %s" % node.name in se, "--node %s: says the node's real name" % alias,
            se[-1500:])
    warnings = [l for l in se.splitlines() if " warning: " in l]
    t.eq(warnings, [], "--node %s: no warnings" % alias)
    t.check(h.output_files(out, alias)[0] or h.output_files(out, node.name)[0],
            "--node %s: files written" % alias)


if __name__ == "__main__":
    h.run(main)
