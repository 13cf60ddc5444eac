#!/usr/bin/env python3
"""Distribution details: long node names, and distribution ticks.

- a node started with -name x@127.0.0.1 (long names) is profiled: the
  daemon names itself with a dotted host to match;
- with net_ticktime 4 s on the node and nothing for the daemon to ask for
  most of the run (--every 30s, nothing to sample), the connection must
  survive on the daemon's answers to the node's ticks alone.
"""
import os
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def main(t):
    node = h.Node(idle=100, longname=True).start()
    t.check(node.name.endswith("@127.0.0.1"), "long-name node %s" % node.name)
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon_until(h.daemon_args(node, out, top=5, rate=20, every="1s",
                                                 compress="none", backtrace_depth=64),
                                   lambda dm: dm.wait_sample_count(10))
    t.eq(rc, 0, "long names: exit 0")
    t.check("@127.0.0.1" in se and "connected to" in se, "long names: connected")
    h.check_output(t, out, node, min_samples=10)
    node.stop()

    node = h.Node(idle=100, erl_args=["-kernel", "net_ticktime", "4"]).start()
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=0, name=["no_such_process"],
                                           every="30s", duration="14s",
                                           compress="none"), timeout=40)
    t.eq(rc, 65, "ticks: exit 65 (a --duration run that had nothing to sample)")
    t.check("lost connection" not in se, "ticks: the connection outlived 3 tick timeouts")
    t.check(node.eval_int('length([N || N <- nodes(hidden), '
                          'lists:prefix("flame_profd_", atom_to_list(N))])') == 0,
            "ticks: the daemon left the node when it stopped")


if __name__ == "__main__":
    h.run(main)
