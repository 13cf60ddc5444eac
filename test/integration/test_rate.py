#!/usr/bin/env python3
"""A set sampled fast keeps its rate across selections.

A quiet node whose only active processes are 20 tickers (they wake every
50 ms): --top 10 --rate 100 --every 500ms, so every selection rebuilds the
sampled set while sample requests are in flight. Every interval but the
first and the last must achieve at least 90% of what it requested and skip
next to nothing. (A request in flight across a rebuild once left its pids
marked busy until the next rebuild, and the rate fell to a fraction.)
Each interval also counts the sample requests sent: none carries more than
a third of the set (ceil(10 / 3) = 4 processes), so samples <= 4 x
requests, and a request is not sent per sample either.

With --request helper the node samples and sends four batches a second:
an interval of 500 ms gets one, two or three of them, so the rate is
checked over the middle intervals together (at least 90%), and the
batches carry many samples each. Each 20-ms tick owes two rounds of the
set there (10 x 100/s x 20 ms): a helper that took one round a tick
would deliver half.
"""
import os
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def main(t):
    node = h.start_node(idle=100, busy=0, opts={
        "clients": 0, "quoted": False, "anon": False, "sink": False,
        "bin": False, "tickers": 20, "tick_ms": 50})
    out = h.mkdtemp("out_")
    for request in ("rex", "eval", "helper"):
        args = h.daemon_args(node, out, top=10, rate=100,
                             every="500ms", duration="6s",
                             request=None if request == "rex" else request,
                             max_overhead=0)
        h.log("running: flame_profd " + " ".join(args))
        rc, so, se = h.run_daemon(args, timeout=40)
        if not t.eq(rc, 0, "%s: exit code 0" % request):
            h.log(se[-4000:])
        iv = [x for x in h.intervals(se) if int(x.get("selected", 0)) == 10]
        mid = iv[1:-1]
        t.check(len(mid) >= 5, "%s: at least 5 full intervals (%d)" % (request, len(mid)))
        ach = [float(x["achieved"]) / float(x["requested"]) for x in mid]
        h.log("  %s: achieved/requested per interval: %s"
              % (request, " ".join("%.2f" % a for a in ach)))
        skipped = sum(int(x["skipped"]) for x in mid)
        samples = sum(int(x["samples"]) for x in mid)
        requests = sum(int(x.get("requests", 0)) for x in mid)
        if request == "helper":
            secs = sum(int(x["samples"]) / float(x["achieved"])
                       for x in mid if float(x["achieved"]) > 0)
            got = samples / secs / float(mid[0]["requested"]) if secs else 0
            t.check(got >= 0.9, "helper: the middle intervals achieve >= 90%% "
                    "of requested together (%.2f)" % got)
            t.check(skipped <= 0.05 * max(samples, 1),
                    "helper: skipped %d of %d" % (skipped, samples + skipped))
            t.check(requests > 0 and samples >= 100 * requests,
                    "helper: batches of many samples (%d samples in %d batches)"
                    % (samples, requests))
            continue
        t.check(ach and min(ach) >= 0.9,
                "%s: every interval achieves >= 90%% of requested (min %.2f)"
                % (request, min(ach) if ach else 0))
        t.check(skipped <= 0.05 * max(samples, 1),
                "%s: skipped %d of %d" % (request, skipped, samples + skipped))
        t.check(requests > 0 and samples <= 4 * requests,
                "%s: at most a third of the set per request (%d samples in %d requests)"
                % (request, samples, requests))
        t.check(samples >= 2 * requests,
                "%s: requests carry batches, not single samples (%d samples in %d requests)"
                % (request, samples, requests))


if __name__ == "__main__":
    h.run(main)
