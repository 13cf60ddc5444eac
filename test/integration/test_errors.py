#!/usr/bin/env python3
"""flame_profd error handling: exit codes, one-line error messages, and the
cookie never being printed.

  wrong cookie                      -> 77, message mentions "cookie"
  node name without @               -> 64
  node not registered in epmd       -> 69
  no epmd on ERL_EPMD_PORT          -> 69
  bad flag values / unknown flag    -> 64, message names the flag
  --out under a regular file        -> 73
  --out is a regular file           -> 73
  cookie file missing               -> 66
  cookie file unreadable (a dir)    -> 66
plus the cookie fallbacks (FLAME_PROFD_COOKIE, ~/.erlang.cookie) and
--cookie-file taking precedence over FLAME_PROFD_COOKIE.
Every failing run gets --duration so a daemon that wrongly accepts the
arguments ends instead of hanging.
"""
import os
import socket
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

SECRETS = []


def expect(t, label, args, code, mention=None, env=None, timeout=40, until=None):
    """Run the daemon to its end, or with until (see harness.run_daemon_until)
    until that holds, then SIGTERM."""
    t0 = time.monotonic()
    if until:
        rc, so, se = h.run_daemon_until(args, until, env=env)
    else:
        rc, so, se = h.run_daemon(args, env=env, timeout=timeout)
    dt = time.monotonic() - t0
    errs = h.error_lines(se)
    ok = t.eq(rc, code, "%s: exit %d (%.1fs)" % (label, code, dt))
    if code != 0:
        t.check(len(errs) == 1, "%s: exactly one 'flame_profd: error: ' line" % label,
                repr(se[-1500:]))
        if mention:
            t.check(any(mention.lower() in e.lower() for e in errs),
                    "%s: error mentions %r" % (label, mention), repr(errs))
    else:
        t.eq(errs, [], "%s: no error lines" % label)
    leaked = [c for c in SECRETS if c in so or c in se]
    t.check(not leaked, "%s: no cookie in stdout/stderr" % label)
    if not ok or errs:
        h.log("    stderr: " + (" | ".join(se.strip().splitlines()[-3:]) or "(empty)"))
    return rc, so, se


def main(t):
    node = h.start_node(idle=100)
    SECRETS.append(node.cookie)
    d = h.mkdtemp("errs_")
    out = os.path.join(d, "out")
    host = h.short_hostname()
    short = ["--duration", "2s", "--every", "500ms", "--timeout", "3s"]

    # authentication
    wrong = h.random_cookie()
    SECRETS.append(wrong)
    wrong_file = h.write_cookie_file(os.path.join(d, "wrong_cookie"), wrong)
    expect(t, "wrong cookie", h.daemon_args(node, out, cookie_file=wrong_file) + short, 77,
           mention="cookie")

    # node names / reachability
    expect(t, "node name without @", h.daemon_args("fp_demo_nohost", out,
                                                   cookie_file=node.cookie_file) + short, 64)
    expect(t, "node name with empty host", h.daemon_args("fp_demo@", out,
                                                         cookie_file=node.cookie_file) + short, 64)
    expect(t, "node not registered in epmd",
           h.daemon_args("nosuchnode%d@%s" % (os.getpid(), host), out,
                         cookie_file=node.cookie_file) + short, 69)
    s = socket.socket()
    s.bind(("", 0))
    dead_port = s.getsockname()[1]
    s.close()
    expect(t, "no epmd on ERL_EPMD_PORT=%d" % dead_port,
           h.daemon_args(node, out) + short, 69, env={"ERL_EPMD_PORT": dead_port})

    # bad flag values
    for flag, val in [("--rate", "0"), ("--rate", "-5"), ("--rate", "fast"),
                      ("--every", "banana"), ("--every", "0s"), ("--duration", "5parsecs"),
                      ("--rotate", "-1s"), ("--timeout", "soon"), ("--top", "-1"),
                      ("--top", "abc"), ("--backtrace-depth", "x"),
                      ("--pid", "not-a-pid"), ("--pid", "<0.1>")]:
        expect(t, "%s %s" % (flag, val),
               h.daemon_args(node, out) + short + [flag, val], 64, mention=flag.lstrip("-"))
    expect(t, "unknown flag", h.daemon_args(node, out) + short + ["--frobnicate"], 64,
           mention="frobnicate")
    expect(t, "missing --node", ["--cookie-file", node.cookie_file, "--out", out] + short, 64,
           mention="node")
    expect(t, "flag without value", h.daemon_args(node, out) + short + ["--rate"], 64,
           mention="rate")

    # output directory
    regular = os.path.join(d, "regular_file")
    with open(regular, "w") as f:
        f.write("x")
    expect(t, "--out under a regular file", h.daemon_args(node, os.path.join(regular, "sub")) +
           short, 73)
    expect(t, "--out is a regular file", h.daemon_args(node, regular) + short, 73)

    # cookie file problems
    expect(t, "cookie file missing",
           h.daemon_args(node, out, cookie_file=os.path.join(d, "nope")) + short, 66)
    expect(t, "cookie file is a directory", h.daemon_args(node, out, cookie_file=d) + short, 66)

    # cookie fallbacks (these must succeed): each run ends once it has a
    # sample (a pinned process is sampled right after the connect, with
    # no selection to wait for), --duration ending one that takes none
    ok_args = ["--node", node.name, "--out", out, "--duration", "5s", "--every", "500ms",
               "--name", "fp_demo_sink", "--rate", "50"]

    def sampled(dm):
        dm.wait_sample_count(1)

    expect(t, "FLAME_PROFD_COOKIE fallback", ok_args, 0, env={"FLAME_PROFD_COOKIE": node.cookie},
           until=sampled)
    home = h.mkdtemp("home_")
    h.write_cookie_file(os.path.join(home, ".erlang.cookie"), node.cookie)
    expect(t, "~/.erlang.cookie fallback", ok_args, 0, env={"HOME": home}, until=sampled)
    expect(t, "--cookie-file beats FLAME_PROFD_COOKIE",
           ok_args + ["--cookie-file", node.cookie_file], 0, env={"FLAME_PROFD_COOKIE": wrong},
           until=sampled)
    expect(t, "no cookie anywhere", ok_args, 66)
    t.check(node.alive(), "demo node survived all of this")


if __name__ == "__main__":
    h.run(main)
