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
  and the files are its own, the --log-file included, which SIGHUP
  reopens after logrotate;
- FLAME_PROFD_COOKIE is wiped also when --cookie-file is given; a FIFO or
  a device as cookie file is refused at once;
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


def wait_in_file(path, text, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path) and text in open(path, errors="replace").read():
            return True
        time.sleep(0.1)
    return False


def cookie_and_log_checks(t, node):
    cookie = node.cookie

    # FLAME_PROFD_COOKIE is wiped also when --cookie-file wins
    dm = h.start_daemon(h.daemon_args(node, h.mkdtemp("out_"), top=5, rate=20,
                                      every="1s", compress="none"),
                        env={"FLAME_PROFD_COOKIE": cookie})
    dm.wait_samples(timeout=15)
    with open("/proc/%d/environ" % dm.pid, "rb") as f:
        environ = f.read()
    t.check(cookie.encode() not in environ and b"FLAME_PROFD_COOKIE=" not in environ,
            "FLAME_PROFD_COOKIE wiped from /proc/PID/environ with --cookie-file too")
    t.eq(dm.stop(), 0, "env cookie + --cookie-file: exit 0")

    # a FIFO (or a device) as cookie file: refused at once, not waited on
    d = h.mkdtemp("ck_")
    fifo = os.path.join(d, "cookie")
    os.mkfifo(fifo, 0o600)
    for path, what in ((fifo, "a FIFO"), ("/dev/null", "a device")):
        t0 = time.time()
        rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), cookie_file=path,
                                               duration="1s"), timeout=10)
        t.eq(rc, 66, "%s as cookie file: exit 66" % what)
        t.check("not a regular file" in se and path in se and time.time() - t0 < 5,
                "... at once, naming it: %s" % se.strip()[:160])

    if os.getuid() != 0:
        h.log("not root: --user --log-file checks skipped")
        return
    # --user with --log-file: the daemon's log is the user's, made with
    # --file-mode, and SIGHUP after logrotate reopens it as the user
    user = pwd.getpwnam("nobody")
    out = h.mkdtemp("out_")
    os.chmod(out, 0o755)
    os.chmod(os.path.dirname(out), 0o755)
    logdir = h.mkdtemp("log_")
    os.chmod(logdir, 0o755)             # root's, not writable by nobody
    logf = os.path.join(logdir, "fp.log")
    os.chmod(node.cookie_file, 0o400)
    old_umask = os.umask(0o022)
    try:
        dm = h.start_daemon(h.daemon_args(node, out, top=5, rate=20, every="1s",
                                          compress="none", user="nobody",
                                          file_mode="0600", log_file=logf, verbose=True))
    finally:
        os.umask(old_umask)
    t.check(wait_in_file(logf, "running as user nobody"), "--log-file: the daemon logs there")
    st = os.stat(logf)
    t.eq((st.st_uid, st.st_gid), (user.pw_uid, user.pw_gid), "--log-file: owned by --user")
    t.eq(stat.S_IMODE(st.st_mode), 0o600, "--log-file: made with --file-mode")
    # logrotate's bare "create": rename, then a new file with the owner
    # and mode of the rotated one
    os.rename(logf, logf + ".1")
    fd = os.open(logf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchown(fd, st.st_uid, st.st_gid)
    os.close(fd)
    dm.send_signal(1)                   # SIGHUP: reopen
    time.sleep(0.5)
    dm.send_signal(10)                  # SIGUSR1: logs "rotating"
    t.check(wait_in_file(logf, "SIGUSR1: rotating"),
            "after logrotate create + SIGHUP the new lines go to the new file")
    t.check("cannot reopen" not in open(logf + ".1").read() and
            "cannot reopen" not in open(logf).read(), "... with no reopen error")
    # a log directory writable by the user: the daemon makes the new file
    os.chown(logdir, user.pw_uid, user.pw_gid)
    os.rename(logf, logf + ".2")
    dm.send_signal(1)
    time.sleep(0.5)
    dm.send_signal(10)
    t.check(wait_in_file(logf, "SIGUSR1: rotating"),
            "a directory writable by the user: SIGHUP makes the new file")
    st = os.stat(logf) if os.path.exists(logf) else None
    t.check(st and st.st_uid == user.pw_uid and stat.S_IMODE(st.st_mode) == 0o600,
            "... owned by the user, with --file-mode")
    t.eq(dm.stop(), 0, "--user --log-file: exit 0")


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

    cookie_and_log_checks(t, node)

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
