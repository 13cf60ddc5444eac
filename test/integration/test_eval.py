#!/usr/bin/env python3
"""--request eval: sample batches through sampling processes that the node's
erl_eval interprets, with nothing loaded onto the node.

Against a real node: the files hold the same kind of samples as with the
default path (busy workers in fp_demo:deep/2, metrics, header request=eval);
while the daemon runs, exactly three processes on the node are linked to it
(the samplers) and no module was loaded for them; after SIGTERM they are
gone, and after SIGKILL of the daemon too (the link goes with the
connection); backtrace_depth is restored in both cases. A sampler killed
on the node makes the daemon reconnect with three new ones, and sampling
goes on.
"""
import os
import signal
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

# processes linked to a pid of another node: the samplers (nothing else on
# the demo node links to a remote process but the janitor, which holds
# backtrace_depth for the daemons attached)
SAMPLERS = ("length([P || P <- processes(),"
            " P =/= whereis(flame_profd_janitor),"
            " {links, L} <- [erlang:process_info(P, links)],"
            " lists:any(fun(X) -> node(X) =/= node() end, L)])")


def wait_samplers(node, want, timeout=15):
    return node.wait_int(SAMPLERS, want, timeout)


def main(t):
    node = h.start_node(idle=200)
    modules0 = node.eval_int("length(code:all_loaded())")
    depth0 = node.eval_int("erlang:system_flag(backtrace_depth, 8)")
    node.eval_int("erlang:system_flag(backtrace_depth, %d)" % depth0)
    out = h.mkdtemp("out_")

    args = h.daemon_args(node, out, top=10, rate=20, every="1s",
                         backtrace_depth=48, request="eval")
    h.log("running: flame_profd " + " ".join(args))
    t0 = time.time()
    d = h.start_daemon(args)
    d.wait_samples(intervals_needed=2, timeout=30)
    t.eq(wait_samplers(node, 3), 3, "three sampling processes linked to the daemon")
    # the samplers run erl_eval and prim_eval, which any node has loaded or
    # loads on demand; nothing of flame_profd's is among the modules
    mods = node.eval("[M || {M, _} <- code:all_loaded(),"
                     " lists:prefix(\"flame\", atom_to_list(M))]")
    t.eq(mods.strip(), "[]", "no flame_profd module on the node")
    t.eq(d.stop(), 0, "SIGTERM: exit code 0")
    t1 = time.time()
    t.eq(wait_samplers(node, 0), 0, "samplers gone after SIGTERM")
    t.eq(node.eval_int("erlang:system_flag(backtrace_depth, %d)" % depth0),
         depth0, "backtrace_depth restored")
    h.log("  modules loaded: %d before, %d after"
          % (modules0, node.eval_int("length(code:all_loaded())")))

    files = h.check_output(t, out, node, t0, t1, min_samples=20)
    samples = h.all_samples(files)
    busy = [s for s in samples if "fp_demo:deep/2" in s["frames"]]
    t.check(len(busy) >= len(samples) // 2,
            "busy workers sampled in fp_demo:deep/2 (%d of %d)" % (len(busy), len(samples)))
    t.check(all("reductions" in s["metrics"] and "binary_bytes" in s["metrics"]
                for s in samples), "every sample carries the metrics")
    t.check(any("request=eval" in line for _, line in files[0].comments),
            "header comment says request=eval")

    # a sampler killed on the node: reconnect, three new samplers, samples
    d = h.start_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=5, rate=20,
                                     every="1s", request="eval"))
    d.wait_samples(timeout=30)
    t.eq(wait_samplers(node, 3), 3, "three samplers")
    victim = node.eval("hd([P || P <- processes(),"
                       " P =/= whereis(flame_profd_janitor),"
                       " {links, L} <- [erlang:process_info(P, links)],"
                       " lists:any(fun(X) -> node(X) =/= node() end, L)])")
    node.eval("exit(%s, kill)" % ("list_to_pid(\"%s\")" % victim.strip()))
    d.wait_log(r"eval sampler <\d+\.\d+> exited; reconnecting", timeout=15)
    d.wait_log(r"info: reconnected to ", timeout=30)
    t.eq(wait_samplers(node, 3), 3, "three samplers after the reconnect")
    d.wait_samples(after=r"info: reconnected to ", timeout=30)
    t.check(True, "samples after the reconnect")
    t.eq(d.stop(), 0, "SIGTERM: exit code 0")
    t.eq(wait_samplers(node, 0), 0, "samplers gone")

    # SIGKILL: the connection goes, and the link takes the samplers with it
    d = h.start_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=5, rate=20,
                                     every="1s", request="eval"))
    d.wait_samples(timeout=30)
    t.eq(wait_samplers(node, 3), 3, "three samplers again")
    d.send_signal(signal.SIGKILL)
    d.wait(timeout=10)
    t.eq(wait_samplers(node, 0), 0, "samplers gone after SIGKILL of the daemon")


if __name__ == "__main__":
    h.run(main)
