#!/usr/bin/env python3
"""SIGTERM is honoured within a second in every state in which flame_profd
waits for the node, and it leaves the node as it found it.

  a1. --connect to a server that accepts TCP and never answers: the
      handshake waits
  a2. an epmd that accepts and never answers: the port lookup waits
  a3. a node SIGSTOPped before the daemon starts: epmd answers, the
      kernel accepts the TCP connection, the handshake waits; after SIGCONT
      the node has no flame_profd connection and its backtrace_depth is
      what it was
  b.  a node SIGSTOPped while sampled: requests in flight, the put-back of
      backtrace_depth unanswered; the output files are complete

Each time the daemon must exit 0 (stopped by SIGTERM) within 1.5 s of the
signal (it gives the node 0.6 s; the margin is for slow builds), with no
error line and no partial file. --timeout is 60 s throughout, so that no
timeout ends a wait first.
"""
import os
import signal
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

LIMIT_S = 1.5


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and reads, never answering."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.got = 0
        self.conns = []
        self.done = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        h.on_cleanup("silent server %d" % self.port, self.close)

    def _run(self):
        self.sock.settimeout(0.2)
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except OSError:
                continue
            c.settimeout(0.2)
            self.conns.append(c)
            while not self.done:
                try:
                    b = c.recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not b:
                    break
                self.got += len(b)

    def wait_bytes(self, timeout=15):
        deadline = time.monotonic() + timeout
        while self.got == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.got > 0

    def close(self):
        self.done = True
        self.thread.join(timeout=2)
        for c in self.conns:
            c.close()
        self.sock.close()


def stop_timed(t, d, label):
    """SIGTERM; the seconds until the daemon exited, and its exit code."""
    t0 = time.monotonic()
    d.send_signal(signal.SIGTERM)
    try:
        rc = d.wait(timeout=20)
    except Exception:
        rc = d.stop(signal.SIGKILL)
    dt = time.monotonic() - t0
    t.check(dt <= LIMIT_S, "%s: exits within %.1f s of SIGTERM (%.2f s)"
            % (label, LIMIT_S, dt))
    if not t.eq(rc, 0, "%s: exit 0" % label):
        h.log(d.read_stderr()[-3000:])
    t.eq(h.error_lines(d.read_stderr()), [], "%s: no error lines" % label)
    return dt


def no_partials(t, out, node, label):
    final, partial, other = h.output_files(out, node)
    t.eq([os.path.basename(p) for p in partial + other], [],
         "%s: no partial or stray files" % label)
    return final


def case_silent_dist(t, cookie_file):
    srv = SilentServer()
    out = h.mkdtemp("out_a1_")
    name = "silent@127.0.0.1"
    d = h.start_daemon(h.daemon_args(name, out, cookie_file=cookie_file,
                                     connect="127.0.0.1:%d" % srv.port,
                                     timeout="60s"))
    t.require(srv.wait_bytes(), "a1: the daemon opened the handshake")
    time.sleep(0.3)
    t.check(d.poll() is None, "a1: the daemon waits in the handshake")
    stop_timed(t, d, "a1 handshake")
    no_partials(t, out, name, "a1")


def case_silent_epmd(t, cookie_file):
    srv = SilentServer()
    out = h.mkdtemp("out_a2_")
    name = "nobody@localhost"
    d = h.start_daemon(h.daemon_args(name, out, cookie_file=cookie_file,
                                     timeout="60s"),
                       env={"ERL_EPMD_PORT": srv.port})
    t.require(srv.wait_bytes(), "a2: the daemon asked epmd")
    time.sleep(0.3)
    t.check(d.poll() is None, "a2: the daemon waits for epmd")
    stop_timed(t, d, "a2 epmd")
    no_partials(t, out, name, "a2")


FLAME_PROFD_PEERS = ('length([N || N <- nodes(hidden), '
                     'lists:prefix("flame_profd_", atom_to_list(N))])')


def case_stopped_before(t, node):
    depth = node.get_backtrace_depth()
    out = h.mkdtemp("out_a3_")
    os.kill(node.os_pid, signal.SIGSTOP)
    try:
        d = h.start_daemon(h.daemon_args(node, out, timeout="60s",
                                         backtrace_depth=depth + 7))
        time.sleep(1.5)     # epmd lookup, TCP connect, then the wait
        t.check(d.poll() is None, "a3: the daemon waits for the stopped node")
        stop_timed(t, d, "a3 stopped node")
    finally:
        os.kill(node.os_pid, signal.SIGCONT)
    no_partials(t, out, node.name, "a3")
    # the node sees the connection's end once it runs again
    t.eq(node.wait_int(FLAME_PROFD_PEERS, 0, timeout=10), 0,
         "a3: no flame_profd connection on the node")
    t.eq(node.get_backtrace_depth(), depth, "a3: backtrace_depth as found")


def case_stopped_while_sampled(t, node):
    depth = node.get_backtrace_depth()
    out = h.mkdtemp("out_b_")
    t0 = time.time()
    d = h.start_daemon(h.daemon_args(node, out, top=5, rate=50, every="1s",
                                     timeout="60s", backtrace_depth=depth + 7))
    d.wait_samples(timeout=20)
    os.kill(node.os_pid, signal.SIGSTOP)
    try:
        time.sleep(0.5)     # requests go out and are not answered
        t.check(d.poll() is None, "b: the daemon runs on with the node stopped")
        stop_timed(t, d, "b stopped while sampled")
        t1 = time.time()
    finally:
        os.kill(node.os_pid, signal.SIGCONT)
    h.check_output(t, out, node, t0, t1, min_samples=1)
    # the put-back was sent before the daemon gave up on its answer: the
    # node applies it once it runs again (informative: the connection's
    # end may reach the node first)
    time.sleep(1.0)
    h.log("  b: backtrace_depth after SIGCONT: %d (found %d, set %d)"
          % (node.get_backtrace_depth(), depth, depth + 7))
    node.stop()


def main(t):
    cookie_file = h.write_cookie_file(os.path.join(h.mkdtemp("cookie_"), "c"),
                                      h.random_cookie())
    case_silent_dist(t, cookie_file)
    case_silent_epmd(t, cookie_file)
    # one node for both: a3 leaves it as it found it (checked)
    node = h.start_node(idle=200)
    case_stopped_before(t, node)
    case_stopped_while_sampled(t, node)


if __name__ == "__main__":
    h.run(main)
