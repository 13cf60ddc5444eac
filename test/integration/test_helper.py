#!/usr/bin/env python3
"""--request helper: a module loaded onto the node for the connection, only
when asked, whose process samples on the node's timer and sends batches.

Against a real node:
- while the daemon runs, one module named fpdh_<13 hex> is loaded (its
  file names flame_profd) and one process of it is linked to the daemon;
  the samples are those of the default path (busy workers in
  fp_demo:deep/2, every metric, per-row times that move), the header says
  request=helper, and the helper never samples itself;
- after SIGTERM the process is gone and so is the module, current and old
  code alike (erlang:loaded/0 lists either); backtrace_depth is restored;
- after SIGKILL of the daemon the same (the link breaks, the process
  unloads its module);
- the helper killed on the node: the daemon unloads the dead helper's
  module, reconnects with a new one, and sampling goes on.
"""
import os
import signal
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

# helper modules the node has, current or old code
MODULES = ("[M || M <- erlang:loaded(),"
           " lists:prefix(\"fpdh_\", atom_to_list(M))]")
# processes linked to a pid of another node: the helper (nothing else on
# the demo node links to a remote process but the janitor, which holds
# backtrace_depth for the daemons attached)
LINKED = ("[P || P <- processes(),"
          " P =/= whereis(flame_profd_janitor),"
          " {links, L} <- [erlang:process_info(P, links)],"
          " lists:any(fun(X) -> node(X) =/= node() end, L)]")


def modules(node):
    return node.eval(MODULES).strip()


def main(t):
    node = h.start_node(idle=200)
    depth0 = node.eval_int("erlang:system_flag(backtrace_depth, 8)")
    node.eval_int("erlang:system_flag(backtrace_depth, %d)" % depth0)
    t.eq(modules(node), "[]", "no helper module before")
    out = h.mkdtemp("out_")

    args = h.daemon_args(node, out, top=10, rate=20, every="1s",
                         backtrace_depth=48, request="helper")
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    d = h.start_daemon(args)
    d.wait_samples(intervals_needed=2, timeout=30)
    t.eq(node.wait_int("length(%s)" % LINKED, 1), 1,
         "one helper process linked to the daemon")
    t.eq(node.eval_int("length(%s)" % MODULES), 1, "one helper module loaded")
    which = node.eval("code:which(hd(%s))" % MODULES)
    t.check("flame_profd" in which, "its file names flame_profd (%s)" % which.strip())
    helper_pid = node.eval("hd(%s)" % LINKED).strip().strip("<>")
    d.wait_log(r"helper module fpdh_[0-9a-f]{13} loaded", timeout=5)
    t.eq(d.stop(), 0, "SIGTERM: exit code 0")
    t1 = time.time()
    t.eq(node.wait_int("length(%s)" % LINKED, 0), 0, "helper process gone after SIGTERM")
    t.eq(node.wait_int("length(%s)" % MODULES, 0), 0,
         "helper module unloaded after SIGTERM (no current or old code)")
    t.eq(node.eval_int("erlang:system_flag(backtrace_depth, %d)" % depth0),
         depth0, "backtrace_depth restored")

    files = h.check_output(t, out, node, t0, t1, min_samples=100)
    samples = h.all_samples(files)
    busy = [s for s in samples if "fp_demo:deep/2" in s["frames"]]
    t.check(len(busy) >= len(samples) // 2,
            "busy workers sampled in fp_demo:deep/2 (%d of %d)" % (len(busy), len(samples)))
    t.check(all("reductions" in s["metrics"] and "binary_bytes" in s["metrics"]
                for s in samples), "every sample carries the metrics")
    t.check(all(s["pid"] != helper_pid for s in samples),
            "the helper is never sampled")
    times = sorted({s["ts"] for s in samples})
    t.check(len(times) >= len(samples) // 20,
            "rows carry their own times (%d distinct of %d samples)"
            % (len(times), len(samples)))
    t.check(any("request=helper" in line for _, line in files[0].comments),
            "header comment says request=helper")

    # the helper killed on the node: its module is unloaded, a new one
    # loaded, sampling goes on
    d = h.start_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=5, rate=20,
                                     every="1s", request="helper"))
    d.wait_samples(timeout=30)
    t.eq(node.wait_int("length(%s)" % LINKED, 1), 1, "one helper")
    first = modules(node)
    node.eval("exit(hd(%s), kill)" % LINKED)
    d.wait_log(r"the helper process exited; reconnecting", timeout=15)
    d.wait_log(r"info: reconnected to ", timeout=30)
    d.wait_samples(after=r"info: reconnected to ", timeout=30)
    t.check(True, "samples after the reconnect")
    now = modules(node)
    t.check(now != first and now.count("fpdh_") == 1,
            "the killed helper's module replaced (%s, then %s)" % (first, now))
    t.eq(d.stop(), 0, "SIGTERM: exit code 0")
    t.eq(node.wait_int("length(%s)" % MODULES, 0), 0, "no helper module left")

    # SIGKILL: the connection goes, the link ends the helper, which unloads
    d = h.start_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=5, rate=20,
                                     every="1s", request="helper"))
    d.wait_samples(timeout=30)
    t.eq(node.wait_int("length(%s)" % LINKED, 1), 1, "one helper again")
    d.send_signal(signal.SIGKILL)
    d.wait(timeout=10)
    t.eq(node.wait_int("length(%s)" % LINKED, 0), 0,
         "helper gone after SIGKILL of the daemon")
    t.eq(node.wait_int("length(%s)" % MODULES, 0), 0,
         "helper module unloaded after SIGKILL of the daemon")


if __name__ == "__main__":
    h.run(main)
