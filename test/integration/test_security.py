#!/usr/bin/env python3
"""The daemon holds a node's cookie (full control of the node): it must
not widen anyone's access.

- a group- or world-readable cookie file is refused (66), as erl does;
- the cookie appears in no log line, no output file, not in argv, and a
  cookie passed in FLAME_PROFD_COOKIE is scrubbed from the process
  environment; the process is not dumpable (no core dump of the cookie);
- output directories 0750 and files 0640 by default, --dir-mode and
  --file-mode change them;
- --user drops root right after start-up: the process runs as that user
  and the files are its own;
- node names cannot smuggle a path: '/' and '..' tricks are refused.
"""
import os
import pwd
import re
import subprocess
import stat
import sys
import time

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def proc_status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(l.rstrip("\n").split(":\t", 1) for l in f if ":\t" in l)


def main(t):
    node = h.start_node(idle=100)
    cookie = node.cookie

    # cookie file readable by others
    d = h.mkdtemp("ck_")
    loose = os.path.join(d, "cookie")
    with open(loose, "w") as f:
        f.write(cookie)
    os.chmod(loose, 0o640)
    rc, so, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), cookie_file=loose,
                                            duration="1s"), timeout=20)
    t.eq(rc, 66, "group-readable cookie file: exit 66")
    t.check("owner only" in se, "... naming the problem: %s" % se.strip()[:120])

    # default modes, cookie from the environment, nothing leaks
    out = h.mkdtemp("out_")
    logf = os.path.join(h.mkdtemp("log_"), "fp.log")
    args = ["--node", node.name, "--out", out, "--top", "5", "--rate", "20",
            "--every", "1s", "--compress", "none", "--log-file", logf, "-v"]
    dm = h.start_daemon(args, env={"FLAME_PROFD_COOKIE": cookie})
    time.sleep(2.5)
    st = proc_status(dm.pid)
    with open("/proc/%d/environ" % dm.pid, "rb") as f:
        environ = f.read()
    with open("/proc/%d/cmdline" % dm.pid, "rb") as f:
        cmdline = f.read()
    t.check(cookie.encode() not in environ,
            "cookie value wiped from /proc/PID/environ")
    t.check(cookie.encode() not in cmdline, "cookie not in argv")
    t.eq(dm.stop(), 0, "env cookie run: exit 0")
    leaks = []
    for root, _, files in os.walk(out):
        for n in files:
            if cookie.encode() in h.read_bytes(os.path.join(root, n)):
                leaks.append(n)
    for p in (logf, dm.stderr_path, dm.stdout_path):
        if cookie.encode() in open(p, "rb").read():
            leaks.append(p)
    t.eq(leaks, [], "cookie in no output, log or stderr")
    ndir = os.path.join(out, h.sanitize_node(node.name))
    t.eq(stat.S_IMODE(os.stat(ndir).st_mode), 0o750, "output directory mode 0750")
    final, _, _ = h.output_files(out, node.name)
    t.check(final and all(stat.S_IMODE(os.stat(p).st_mode) == 0o640 for p in final),
            "output file mode 0640")
    t.check(st.get("Uid", "").split()[0] == str(os.getuid()), "ran as the starting user")

    out = h.mkdtemp("out_")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, duration="2s",
                                           compress="none", file_mode="0600",
                                           dir_mode="0700"), timeout=30)
    t.eq(rc, 0, "--file-mode/--dir-mode: exit 0")
    ndir = os.path.join(out, h.sanitize_node(node.name))
    final, _, _ = h.output_files(out, node.name)
    t.eq(stat.S_IMODE(os.stat(ndir).st_mode), 0o700, "--dir-mode 0700")
    t.check(final and all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in final),
            "--file-mode 0600")
    rc, _, se = h.run_daemon(h.daemon_args(node, out, file_mode="0477"), timeout=10)
    t.eq(rc, 64, "--file-mode the owner cannot write: exit 64")

    # --user
    if os.getuid() == 0:
        user = pwd.getpwnam("nobody")
        out = h.mkdtemp("out_")
        os.chmod(out, 0o755)
        os.chmod(os.path.dirname(out), 0o755)
        os.chmod(node.cookie_file, 0o400)
        dm = h.start_daemon(h.daemon_args(node, out, top=5, rate=20, every="1s",
                                          compress="none", user="nobody"))
        dm.wait_samples(timeout=15)
        st = proc_status(dm.pid)
        uids = st["Uid"].split()
        t.check(all(u == str(user.pw_uid) for u in uids),
                "--user nobody: real, effective, saved uid are nobody's (%s)" % st["Uid"])
        t.eq(st.get("Groups", "").strip(), "", "--user nobody: no supplementary groups")
        dm.send_signal(1)   # SIGHUP: reopen (no log file): harmless
        t.eq(dm.stop(), 0, "--user nobody: exit 0")
        final, _, _ = h.output_files(out, node.name)
        t.check(final and all(os.stat(p).st_uid == user.pw_uid for p in final),
                "--user nobody: files belong to nobody")
        rc, _, se = h.run_daemon(h.daemon_args(node, out, user="no-such-user-x"), timeout=10)
        t.eq(rc, 64, "--user unknown: exit 64")
    else:
        h.log("not root: --user checks skipped")

    # --connect HOST:PORT (a tunnel endpoint) skips epmd: point epmd at a
    # dead port and give the node's own distribution port instead
    names = subprocess.run(["epmd", "-port", h.child_env()["ERL_EPMD_PORT"], "-names"],
                           capture_output=True, text=True).stdout
    m = re.search(r"name %s at port (\d+)" % re.escape(node.sname), names)
    t.check(m, "the node's distribution port from epmd -names")
    if m:
        out = h.mkdtemp("out_")
        rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, duration="2s",
                                               compress="none",
                                               connect="127.0.0.1:" + m.group(1)),
                                 env={"ERL_EPMD_PORT": "1"}, timeout=30)
        t.eq(rc, 0, "--connect without epmd: exit 0")
        final, _, _ = h.output_files(out, node.name)
        t.check(len(final) >= 1, "--connect without epmd: samples written")

    # node names are never paths
    for bad in ("../etc@host", "a/b@host", "a@ho/st", "a@..", "a@host/.."):
        rc, _, se = h.run_daemon(["--node", bad, "--cookie-file", node.cookie_file,
                                  "--out", h.mkdtemp("out_")], timeout=10)
        ok = rc == 64 or (bad == "a@.." and rc == 69)
        t.check(ok, "node name %r refused (rc %d)" % (bad, rc))


if __name__ == "__main__":
    h.run(main)
