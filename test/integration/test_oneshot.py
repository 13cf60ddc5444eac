#!/usr/bin/env python3
"""Fixed-duration runs for CI: the exit code says whether the run got
what it came for.

- a run that samples exits 0 with finished files (see test_profile);
- a run with nothing to sample (only a --name that is not registered)
  exits 65;
- a run whose node dies and does not come back exits 69, keeping the file
  written before the loss.
"""
import os
import sys
import threading
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def main(t):
    node = h.start_node(idle=100)
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=0, name=["no_such_process"],
                                           every="1s", duration="3s"), timeout=30)
    t.eq(rc, 65, "nothing sampled: exit 65")
    t.check("no sample" in se, "... saying so")

    out = h.mkdtemp("out_")
    killer = threading.Timer(3.0, node.kill)
    killer.start()
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, rate=20, every="1s",
                                           duration="7s", timeout="1s"), timeout=40)
    killer.join()
    t.eq(rc, 69, "node lost and not back by the end: exit 69")
    t.check("lost and not regained" in se, "... saying so")
    final, partial, _ = h.output_files(out, node.name)
    t.check(len(final) >= 1 and not partial, "the file written before the loss is kept")


if __name__ == "__main__":
    h.run(main)
