#!/usr/bin/env python3
"""Processes waiting for a scheduler are sampled as runnable.

A node with 2 schedulers (+S 2:2, whatever the machine) and 6 CPU-bound
processes (4 x busy_loop/1, fp_demo_quoted, fp_demo_anon): at any moment
at most 2 of them run and the others wait in a run queue. Sampled with
--top 6, both request paths, their samples must show runnable as well as
running: about two thirds of them should be runnable; at least a fifth
must be.

(process_info/2 for current_stacktrace always makes the process answer
itself, and a process answering is running. Asked in one call, status
read running for every busy process, and runnable never appeared:
0 runnable in 35 134 samples of the demo workload (22 982 running). The
daemon now reads status in a call of its own, which the caller can
answer from the process's state.)

The same node with 3 gen_server clients (client_loop/1, blocked in
gen:do_call/4 but for a few microseconds a call) and a process parked
in receive with nothing to receive, all pinned, all three request
paths: the parked process is `waiting` in every sample, and marked
idle; the clients, which a reply wakes and which then wait in a run
queue behind the busy loops, answer the status request themselves, at
their receive. So does the gen_server they call (a few tenths of a
percent of the reductions), with their calls queued. Read `running` for that, they were `running` in 41-65%
of their samples here; their samples are what their state was before
the request, `runnable` or `waiting`, and `running` in at most a fifth
of them (measured: 0-8% on OTP 25, 27 and 29), or a tenth more than the
time they really were running, polled from the VM's state words during
the run: a host that deschedules the node's threads keeps a process
`running` for as long, and a sampler reads that too.
"""
import os
import re
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def main(t):
    node = h.start_node(idle=100, busy=4, erl_args=["+S", "2:2"], opts={
        "clients": 0, "sink": False, "bin": False})
    for request in ("rex", "eval"):
        out = h.mkdtemp("out_")
        args = h.daemon_args(node, out, top=6, rate=50, every="1s",
                             duration="6s", compress="none", max_overhead=0,
                             request=None if request == "rex" else request)
        h.log("running: flame_profd " + " ".join(args))
        rc, _, se = h.run_daemon(args, timeout=40)
        if not t.eq(rc, 0, "%s: exit code 0" % request):
            h.log(se[-4000:])
        files = h.check_output(t, out, node, min_samples=50)
        busy = [s for s in h.all_samples(files) if "fp_demo:deep/2" in s["frames"]]
        counts = {}
        for s in busy:
            counts[s["status"]] = counts.get(s["status"], 0) + 1
        h.log("  %s: statuses of %d busy samples: %r" % (request, len(busy), counts))
        t.check(len(busy) >= 50, "%s: busy processes sampled (%d)" % (request, len(busy)))
        n = max(len(busy), 1)
        t.check(counts.get("runnable", 0) >= 0.2 * n,
                "%s: runnable in at least a fifth of the busy samples (%d of %d)"
                % (request, counts.get("runnable", 0), len(busy)))
        t.check(counts.get("running", 0) >= 1,
                "%s: running too (%d)" % (request, counts.get("running", 0)))


PARKED = ("register(fp_status_parked, spawn(fun() -> "
          "receive fp_status_stop -> ok end end)), ok")
CLIENTS = ("[pid_to_list(P) || P <- processes(), "
           "{initial_call, {fp_demo, client_loop, 1}} <- "
           "[erlang:process_info(P, initial_call)]]")


# The clients' own status, read from the VM's state words every
# millisecond for the length of a run by a process at high priority
# (erts_debug's internal state: a test node's, never a user's): how much
# of the time the clients really were running, which a host that
# deschedules the node's threads (a loaded CI machine) stretches, and
# which no sampler can read below.
TRUTH_START = (
    "erts_debug:set_internal_state(available_internal_state, true), "
    "Ps = [list_to_pid(S) || S <- %s], "
    "Poll = fun L(Acc) -> "
    "  Acc1 = lists:foldl(fun(P, A) -> "
    "    St = erts_debug:get_internal_state({process_status, P}), "
    "    maps:update_with({P, St}, fun(C) -> C + 1 end, 1, A) end, Acc, Ps), "
    "  receive {fp_truth, From} -> From ! {fp_truth, Acc1} "
    "  after 1 -> L(Acc1) end end, "
    "register(fp_status_truth, spawn_opt(fun() -> Poll(#{}) end, "
    "                                    [{priority, high}])), ok")
TRUTH_STOP = (
    "fp_status_truth ! {fp_truth, self()}, "
    "receive {fp_truth, M} -> [{pid_to_list(P), atom_to_list(K), V} "
    "                          || {{P, K}, V} <- maps:to_list(M)] "
    "after 10000 -> [] end")


def truth(node):
    """Stop the poller TRUTH_START started; its counts, [(pid, status, n)]
    with pid as '0.X.Y'."""
    got = node.eval(TRUTH_STOP)
    return [(p, k, int(v)) for p, k, v in
            re.findall(r'\{"<([\d.]+)>","(\w+)",(\d+)\}', got)]


def counts_of(polled, pids):
    counts = {}
    for p, k, v in polled:
        if p in pids:
            counts[k] = counts.get(k, 0) + v
    return counts


def woken(t):
    node = h.start_node(idle=100, busy=4, erl_args=["+S", "2:2"], opts={
        "clients": 3})
    node.eval(PARKED)
    server = node.pid_of("fp_demo_server").strip("<>")
    parked = node.pid_of("fp_status_parked").strip("<>")
    pinned = re.findall(r"<\d+\.\d+\.\d+>", node.eval(CLIENTS))
    clients = [c.strip("<>") for c in pinned]
    t.eq(len(clients), 3, "three gen_server clients on the node")
    for request in ("rex", "eval", "helper"):
        out = h.mkdtemp("out_")
        args = h.daemon_args(node, out, top=10, rate=20, every="1s",
                             duration="6s", compress="none", max_overhead=0,
                             name=["fp_status_parked", "fp_demo_server"], pid=pinned,
                             request=None if request == "rex" else request)
        h.log("running: flame_profd " + " ".join(args))
        node.eval(TRUTH_START % ("[%s]" % ", ".join(
            '"<%s>"' % p for p in clients + [server])))
        rc, _, se = h.run_daemon(args, timeout=40)
        polled = truth(node)
        real = counts_of(polled, clients)
        real_server = counts_of(polled, [server])
        if not t.eq(rc, 0, "%s: exit code 0" % request):
            h.log(se[-4000:])
        files = h.check_output(t, out, node, min_samples=50)
        samples = h.all_samples(files)
        mine = [s for s in samples if s["pid"] == parked]
        t.check(len(mine) >= 20, "%s: the parked process sampled (%d)"
                % (request, len(mine)))
        t.check(all(s["status"] == "waiting" and s["idle"] for s in mine),
                "%s: the parked process is waiting and idle in every sample"
                % request, str(sorted({s["status"] for s in mine})))
        counts = {}
        for s in samples:
            if s["pid"] in clients:
                counts[s["status"]] = counts.get(s["status"], 0) + 1
        n = sum(counts.values())
        polls = sum(real.values())
        really = real.get("running", 0) / max(polls, 1)
        h.log("  %s: statuses of %d client samples: %r; the VM's own, "
              "polled: %r" % (request, n, counts, real))
        t.check(n >= 30, "%s: the clients sampled (%d)" % (request, n))
        t.check(polls >= 300, "%s: the clients' own status polled (%d)"
                % (request, polls))
        # A fifth, or a tenth more than the time they really ran where the
        # host stretched that: read as they answered, 41-65%.
        limit = max(0.2, really + 0.1)
        t.check(counts.get("running", 0) <= limit * max(n, 1),
                "%s: clients running in at most %.0f%% of their samples "
                "(%d of %d; running in %.1f%% of the polls)"
                % (request, 100 * limit, counts.get("running", 0), n,
                   100 * really))
        t.check(counts.get("runnable", 0) + counts.get("waiting", 0)
                >= (1 - limit) * n,
                "%s: clients otherwise runnable or waiting" % request)
        # The server: a few tenths of a percent of the reductions, woken
        # by the clients' calls, answers with their calls queued. Its
        # rate is weighed against the busiest sampled process's, known
        # once the selection has ranked the busy loops (the second
        # selection, a second in): its samples from then on.
        t0 = min((s["ts"] for s in samples), default=0)
        ss = [s for s in samples if s["pid"] == server and s["ts"] >= t0 + 2]
        srun = sum(1 for s in ss if s["status"] == "running")
        polls = sum(real_server.values())
        really = real_server.get("running", 0) / max(polls, 1)
        limit = max(0.2, really + 0.1)
        h.log("  %s: the server's statuses: %r; polled: %r"
              % (request, {k: sum(1 for s in ss if s["status"] == k)
                           for k in {s["status"] for s in ss}}, real_server))
        t.check(len(ss) >= 15, "%s: the server sampled (%d)" % (request, len(ss)))
        t.check(srun <= limit * max(len(ss), 1),
                "%s: the server running in at most %.0f%% of its samples "
                "(%d of %d; running in %.1f%% of the polls)"
                % (request, 100 * limit, srun, len(ss), 100 * really))
    node.eval("fp_status_parked ! fp_status_stop, ok")


def both(t):
    main(t)
    woken(t)


if __name__ == "__main__":
    h.run(both)
