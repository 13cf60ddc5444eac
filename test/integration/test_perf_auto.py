#!/usr/bin/env python3
"""--perf auto: the node tells its OS pid; the daemon checks it here.

- A node started with +JPperf true: the daemon finds its OS pid (the
  log names it), writes cpu samples of the node's threads, and the
  manifest's options record that pid; flame_prof procs names the
  threads' rows by the threads' names (1_scheduler on OTP 25,
  erts_sched_1 later).
- A node named at run time (net_kernel:start/1, as RabbitMQ names
  itself): no name on its command line, but it holds its end of the
  daemon's connection; found as well.
- Every manifest a reader can see carries that pid, also the first: on a
  restart after SIGKILL, the one that lists the recovered file (read as
  soon as each version appears, from the daemon's start).
- A node started without +JPperf: no perf map; exit 78 with one line
  saying to start it with +JPperf true, and no cpu sample written.
- A node in its own pid namespace (unshare --pid): the pid it tells
  (1) is another process here; exit 78 saying so.
- A node on another host: the +JPperf node reached through a network
  namespace (a veth pair, a TCP relay in the namespace to the node's
  distribution port, --connect to the relay), so that its address is
  none of ours; exit 78 saying so, before anything is asked of it.
- --perf auto with --user: a bad command line (exit 64), before any
  connect.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp_cli  # noqa: E402
import harness as h  # noqa: E402


def run_auto(node, duration="3s", **opts):
    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, rate=10, every="1s",
                                           duration=duration, compress="none",
                                           perf="auto", **opts),
                             timeout=40)
    return rc, se, out


def cpu_samples(out, node):
    final, _, _ = h.output_files(out, node.name)
    return [s for f in final for s in h.read_samples(f) if s["status"] == "cpu"]


# A TCP relay: LISTEN_ADDR LISTEN_PORT TO_ADDR TO_PORT; "ready" once
# listening.
RELAY = r"""
import socket, sys, threading
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(4)
print("ready", flush=True)
def pump(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = ls.accept()
    u = socket.create_connection((sys.argv[3], int(sys.argv[4])))
    for x, y in ((c, u), (u, c)):
        threading.Thread(target=pump, args=(x, y), daemon=True).start()
"""
HOST_END, NS_END = "10.231.0.1", "10.231.0.2"


def ip(*args):
    subprocess.run(["ip"] + list(args), check=True, capture_output=True, timeout=10)


def remote_case(t, node):
    if os.geteuid() != 0 or not shutil.which("ip"):
        h.log("  (not root, or no ip(8): the other-host case is not run)")
        return
    ns = "fpt%d" % os.getpid()
    ip("netns", "add", ns)
    h.on_cleanup("netns " + ns, lambda: subprocess.run(["ip", "netns", "del", ns]))
    ip("link", "add", ns + "a", "type", "veth", "peer", "name", ns + "b")
    h.on_cleanup("veth " + ns, lambda: subprocess.run(["ip", "link", "del", ns + "a"],
                                                      capture_output=True))
    ip("link", "set", ns + "b", "netns", ns)
    ip("addr", "add", HOST_END + "/30", "dev", ns + "a")
    ip("link", "set", ns + "a", "up")
    ip("-n", ns, "addr", "add", NS_END + "/30", "dev", ns + "b")
    ip("-n", ns, "link", "set", ns + "b", "up")
    names = subprocess.run(["epmd", "-port", h.child_env()["ERL_EPMD_PORT"], "-names"],
                           capture_output=True, text=True).stdout
    m = re.search(r"name %s at port (\d+)" % re.escape(node.sname), names)
    t.require(m, "the node's distribution port from epmd -names")
    relay = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", RELAY,
                              NS_END, "4370", HOST_END, m.group(1)],
                             stdout=subprocess.PIPE, text=True,
                             preexec_fn=h._die_with_parent)
    h.on_cleanup("relay", lambda: h._kill_pid_and_wait(relay, 0))
    t.require(relay.stdout.readline().strip() == "ready", "the relay listens")
    rc, se, _ = run_auto(node, connect=NS_END + ":4370")
    refused(t, rc, se, "a node on another host", [node.name, "not on this host"])
    t.check("OS process" not in se, "... refused before its pid is asked")


def manifests_while(dm, path):
    """Every version of the manifest at path while dm runs, read as soon
    as it appears (each is renamed into place: a new inode)."""
    seen, last = [], None
    while True:
        running = dm.poll() is None
        try:
            st = os.stat(path)
            if (st.st_ino, st.st_mtime_ns) != last:
                with open(path) as f:
                    seen.append(json.load(f))
                last = (st.st_ino, st.st_mtime_ns)
        except FileNotFoundError:
            pass
        if not running:
            return seen
        time.sleep(0.002)


def restart_case(t, node):
    out = h.mkdtemp("out_")
    path = os.path.join(out, h.sanitize_node(node.name), "manifest.json")
    args = h.daemon_args(node, out, top=5, rate=10, every="1s", rotate="2s",
                         compress="none", perf="auto", perf_freq=99)
    dm = h.start_daemon(args)
    dm.wait_log(r"info: finished ", timeout=20)
    time.sleep(1.6)      # into the next file, past a segment
    dm.send_signal(signal.SIGKILL)
    dm.wait()
    dm = h.start_daemon(h.daemon_args(node, out, top=5, rate=10, every="1s",
                                      duration="3s", compress="none", perf="auto",
                                      perf_freq=99))
    seen = manifests_while(dm, path)
    t.eq(dm.returncode, 0, "restart after SIGKILL with --perf auto exits 0")
    mine = [m for m in seen if any(e.get("recovered") for e in m["files"])]
    t.check(mine, "the restart's manifests list the recovered file (%d versions read)"
            % len(seen))
    t.eq([m["options"].get("perf_pid") for m in mine], [node.os_pid] * len(mine),
         "... and every one of them, the first too, records the pid found")


def thread_name(node, tid):
    with open("/proc/%d/task/%s/comm" % (node.os_pid, tid)) as f:
        return f.read().strip()


def refused(t, rc, se, what, words):
    t.eq(rc, 78, "%s: exit 78" % what)
    errs = h.error_lines(se)
    t.check(len(errs) == 1 and all(w in errs[0] for w in words),
            "%s: one error line naming the problem" % what, se[-2000:])


def main(t):
    node = h.start_node(busy=2, idle=20, erl_args=["+JPperf", "true"])
    rc, se, out = run_auto(node, duration="4s", perf_freq=199)
    t.eq(rc, 0, "--perf auto on a +JPperf node exits 0")
    t.check("--perf auto: %s is OS process %d" % (node.name, node.os_pid) in se,
            "the daemon says which OS process the node is", se[-2000:])
    t.check("--perf: sampling" in se, "... and samples its threads")
    h.check_output(t, out, node)
    cpu = cpu_samples(out, node)
    tids = set(os.listdir("/proc/%d/task" % node.os_pid))
    t.check(len(cpu) >= 50, "cpu samples: %d" % len(cpu))
    t.check(all(s["pid"][4:] in tids for s in cpu), "... all of the node's threads")
    t.check(any("fp_demo:crunch/1" in s["frames"] for s in cpu),
            "... with the JIT frames named from its perf map")
    with open(os.path.join(out, node.name, "manifest.json")) as f:
        opts = json.load(f)["options"]
    t.eq(opts.get("perf_pid"), node.os_pid, "the manifest records the pid found")
    rc, table, err = fp_cli.run(["procs", "--limit", "0", os.path.join(out, node.name)])
    rows = [l.split() for l in table.splitlines() if l.startswith("<0.0.")]
    t.check(rc == 0 and rows and all(r[6] == thread_name(node, r[0][5:-1]) for r in rows),
            "flame_prof procs names the threads' rows by the threads' names",
            table[-2000:] + err)

    named = h.Node(busy=1, idle=5, erl_args=["+JPperf", "true"], runtime_name=True).start()
    with open("/proc/%d/cmdline" % named.os_pid, "rb") as f:
        t.check(b"-sname" not in f.read().split(b"\0"),
                "a node named at run time has no -sname on its command line")
    rc, se, out = run_auto(named)
    if not t.eq(rc, 0, "--perf auto on a node named at run time exits 0"):
        h.log(se[-4000:])
    t.check("--perf auto: %s is OS process %d" % (named.name, named.os_pid) in se,
            "... found by the connection it holds", se[-2000:])
    t.check(len(cpu_samples(out, named)) > 0, "... and its cpu samples written")

    restart_case(t, node)
    remote_case(t, node)

    plain = h.start_node(busy=1, idle=5)
    rc, se, out = run_auto(plain)
    refused(t, rc, se, "a node without +JPperf",
            [plain.name, "no perf map", "/tmp/perf-%d.map" % plain.os_pid,
             "+JPperf true"])
    t.check(not os.path.isdir(os.path.join(out, plain.name)) or not cpu_samples(out, plain),
            "... and no cpu sample written")

    unshare = shutil.which("unshare")
    if unshare:
        boxed = h.Node(busy=1, idle=5, erl_args=["+JPperf", "true"],
                       wrapper=[unshare, "--pid", "--fork", "--kill-child"]).start()
        t.eq(boxed.os_pid, 1, "a node in its own pid namespace is pid 1 there")
        rc, se, _ = run_auto(boxed)
        refused(t, rc, se, "a node in another pid namespace",
                [boxed.name, "OS pid is 1", "-sname or -name", "--perf OSPID"])
    else:
        h.log("  (no unshare(1): the pid namespace case is not run)")

    rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), perf="auto",
                                           user="nobody", duration="2s"),
                             timeout=20)
    t.eq(rc, 64, "--perf auto with --user: exit 64")
    t.check("--perf auto cannot be used with --user" in se, "... saying why", se)


if __name__ == "__main__":
    h.run(main)
