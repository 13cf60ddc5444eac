#!/usr/bin/env python3
"""--perf refused by the kernel: exit 77, saying what it needs.

The daemon runs as nobody with no capabilities (setpriv) against a node
root started with +JPperf true, under the machine's own
kernel.perf_event_paranoid. perf_event_open(2) on another user's
process needs CAP_PERFMON (or CAP_SYS_ADMIN) and ptrace access to it,
whatever the paranoid level, so both --perf OSPID (refused before the
connect) and --perf auto (refused once the node has told its pid) exit
77 with the one error line that says what is needed. A kernel that
lets nobody sample root's process after all is told, and the test is
skipped.
"""
import os
import pwd
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

NEEDS = "needs root or CAP_PERFMON"


def paranoid():
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def run_as_nobody(node, perf, user):
    """The daemon as nobody, no capabilities; the cookie in its
    environment, the output in a directory of nobody's."""
    out = h.mkdtemp("out_")
    os.chown(out, user.pw_uid, user.pw_gid)
    cmd = ([shutil.which("setpriv"), "--reuid=%d" % user.pw_uid,
            "--regid=%d" % user.pw_gid, "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"] + h.daemon_cmd() +
           ["--node", node.name, "--out", out, "--top", "5", "--duration", "3s",
            "--compress", "none", "--perf", str(perf)])
    h.vlog("daemon: " + " ".join(cmd))
    p = subprocess.run(cmd, env=h.child_env(FLAME_PROFD_COOKIE=node.cookie, HOME="/"),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=40,
                       preexec_fn=h._die_with_parent)
    return p.returncode, p.stderr.decode("utf-8", errors="replace")


def main(t):
    if os.geteuid() != 0:
        raise h.Skip("runs as root, to start the daemon as nobody")
    if not shutil.which("setpriv"):
        raise h.Skip("no setpriv(1) to run the daemon as nobody")
    user = pwd.getpwnam("nobody")
    # nobody walks to its output directory through the test's own
    os.chmod(h.tmpdir(), 0o711)
    node = h.start_node(busy=1, idle=5, erl_args=["+JPperf", "true"])
    h.log("  kernel.perf_event_paranoid = %s" % paranoid())

    for perf, what in [(node.os_pid, "--perf OSPID"), ("auto", "--perf auto")]:
        rc, se = run_as_nobody(node, perf, user)
        if rc == 0:
            raise h.Skip("this kernel (perf_event_paranoid %s) lets nobody sample "
                         "root's process: %s ran" % (paranoid(), what))
        t.eq(rc, 77, "%s as nobody, node root's: exit 77" % what)
        errs = h.error_lines(se)
        t.check(len(errs) == 1 and "--perf %d: cannot sample its threads" % node.os_pid
                in errs[0] and NEEDS in errs[0],
                "%s: one error line, naming the pid and what it needs" % what, se[-2000:])
        if perf == "auto":
            t.check("--perf auto: %s is OS process %d" % (node.name, node.os_pid) in se,
                    "--perf auto: the pid was found before the kernel refused", se[-2000:])


if __name__ == "__main__":
    h.run(main)
