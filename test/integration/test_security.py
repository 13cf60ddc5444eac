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
- node names cannot smuggle a path: '/' and '..' tricks are refused;
- paths (as root with --user nobody, beside a second user): a --log-file
  replaced by a link to root's file, OUT/<node> a link to a root 0700
  directory, a sticky 1777 OUT with the node directory planted by another
  user, a foreign or 0777 node directory: each refused with one message
  and exit 73, the victim untouched and not chowned; retention with files
  named for 2099, another user's file and a hard link deletes only the
  daemon's own files and the manifest lists what is left; links at the
  next file names move the run to the next free name.
"""
import json
import os
import pwd
import re
import signal
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


OTHER_UID = 4242       # a second, unprivileged user (any uid not in use)


def name_at(node_s, ms, suffix=".perf"):
    return "%s.%s.%03dZ%s" % (node_s, time.strftime("%Y%m%dT%H%M%S", time.gmtime(ms // 1000)),
                              ms % 1000, suffix)


def refused(t, rc, se, what, text):
    errs = h.error_lines(se)
    t.eq(rc, 73, "%s: exit 73" % what)
    t.check(len(errs) == 1 and text in errs[0],
            "%s: one error line saying %r" % (what, text), se[-1500:])


def victim_dir():
    """A root 0700 directory holding a root manifest.json."""
    d = h.mkdtemp("victim_")
    os.chmod(d, 0o700)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        f.write("root's\n")
    return d


def victim_untouched(t, d, what):
    st = os.stat(d)
    t.check((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o700),
            "%s: the victim directory is still root:root 0700" % what)
    t.eq(sorted(os.listdir(d)), ["manifest.json"], "%s: nothing written into it" % what)
    t.eq(open(os.path.join(d, "manifest.json")).read(), "root's\n",
         "%s: its manifest.json untouched" % what)


def path_checks(t, node):
    """Issue 29's path probes, as root beside a second user."""
    if os.getuid() != 0:
        h.log("not root: path checks skipped")
        return
    user = pwd.getpwnam("nobody")
    node_s = h.sanitize_node(node.name)
    os.chmod(h.tmpdir(), 0o755)
    os.chmod(node.cookie_file, 0o400)

    # 1. --log-file in a directory the service user can write, replaced
    #    by a link to root's file: refused before anything is appended
    logdir = h.mkdtemp("log_")
    os.chown(logdir, user.pw_uid, user.pw_gid)
    victim = os.path.join(h.mkdtemp("victim_"), "passwd")
    with open(victim, "w") as f:
        f.write("root:x:0:0\n")
    os.chmod(victim, 0o644)
    logf = os.path.join(logdir, "app.log")
    os.symlink(victim, logf)
    os.lchown(logf, user.pw_uid, user.pw_gid)
    rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), user="nobody",
                                           log_file=logf, duration="3s"), timeout=20)
    refused(t, rc, se, "--log-file a link", "log file %s is a symbolic link" % logf)
    t.eq(open(victim).read(), "root:x:0:0\n", "--log-file a link: root's file untouched")
    t.eq(os.stat(victim).st_uid, 0, "--log-file a link: root's file not chowned")
    # ... and a hard link to it (no link to follow, but not the user's file)
    os.unlink(logf)
    os.link(victim, logf)
    rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), user="nobody",
                                           log_file=logf, duration="3s"), timeout=20)
    refused(t, rc, se, "--log-file a hard link", "has other hard links")
    t.eq(open(victim).read(), "root:x:0:0\n", "--log-file a hard link: root's file untouched")
    # ... in a directory all users can write
    os.unlink(logf)
    os.chmod(logdir, 0o777)
    rc, _, se = h.run_daemon(h.daemon_args(node, h.mkdtemp("out_"), user="nobody",
                                           log_file=logf, duration="3s"), timeout=20)
    refused(t, rc, se, "--log-file in a 0777 directory", "is writable by all users")
    t.check(not os.path.lexists(logf), "--log-file in a 0777 directory: nothing made there")

    # 2. OUT writable by the user, OUT/<node> a link to a root 0700
    #    directory: not written into, not chowned
    out = h.mkdtemp("out_")
    os.chown(out, user.pw_uid, user.pw_gid)
    os.chmod(out, 0o755)
    vd = victim_dir()
    os.symlink(vd, os.path.join(out, node_s))
    os.lchown(os.path.join(out, node_s), user.pw_uid, user.pw_gid)
    rc, _, se = h.run_daemon(h.daemon_args(node, out, user="nobody", duration="3s"),
                             timeout=20)
    refused(t, rc, se, "OUT/<node> a link", "%s/%s is a symbolic link" % (out, node_s))
    victim_untouched(t, vd, "OUT/<node> a link")

    # 3. a sticky 1777 OUT, the node directory planted by another user
    out = h.mkdtemp("out_")
    os.chmod(out, 0o1777)
    planted = os.path.join(out, node_s)
    os.mkdir(planted, 0o755)
    os.chown(planted, OTHER_UID, OTHER_UID)
    rc, _, se = h.run_daemon(h.daemon_args(node, out, user="nobody", duration="3s"),
                             timeout=20)
    refused(t, rc, se, "sticky 1777 OUT", "%s is writable by all users" % out)
    st = os.stat(planted)
    t.check(os.listdir(planted) == [] and st.st_uid == OTHER_UID,
            "sticky 1777 OUT: the planted directory untouched, still the other user's")
    # the same node directory in an OUT of root's: another user's
    os.chmod(out, 0o755)
    rc, _, se = h.run_daemon(h.daemon_args(node, out, user="nobody", duration="3s"),
                             timeout=20)
    refused(t, rc, se, "another user's OUT/<node>", "%s belongs to another user" % planted)
    t.check(os.listdir(planted) == [] and os.stat(planted).st_uid == OTHER_UID,
            "another user's OUT/<node>: untouched, not chowned")
    # a 0777 one of root's
    os.chown(planted, 0, 0)
    os.chmod(planted, 0o777)
    rc, _, se = h.run_daemon(h.daemon_args(node, out, duration="3s"), timeout=20)
    refused(t, rc, se, "a 0777 OUT/<node>", "%s is writable by all users" % planted)
    t.eq(os.listdir(planted), [], "a 0777 OUT/<node>: nothing written")
    # a node directory of root's that this run did not make is not handed
    # to --user
    os.chmod(planted, 0o750)
    rc, _, se = h.run_daemon(h.daemon_args(node, out, user="nobody", duration="3s"),
                             timeout=20)
    refused(t, rc, se, "root's OUT/<node> with --user", "not handed over")
    t.eq(os.stat(planted).st_uid, 0, "root's OUT/<node> with --user: not chowned")
    t.eq(os.listdir(planted), [], "root's OUT/<node> with --user: nothing written")

    # 4. retention: files named for 2099 (planted by the service user),
    #    another user's file and a hard link named like the daemon's
    out = h.mkdtemp("out_")
    os.chmod(out, 0o755)
    d = os.path.join(out, node_s)
    os.mkdir(d, 0o750)
    os.chown(d, user.pw_uid, user.pw_gid)
    future = [name_at(node_s, 4070908800000 + i) for i in range(2)]
    for n in future:
        with open(os.path.join(d, n), "w") as f:
            f.write("# planted\n")
        os.chown(os.path.join(d, n), user.pw_uid, user.pw_gid)
    now_ms = int(time.time() * 1000)
    foreign = name_at(node_s, now_ms - 7200000)
    with open(os.path.join(d, foreign), "w") as f:
        f.write("# another user's\n")
    os.chown(os.path.join(d, foreign), OTHER_UID, OTHER_UID)
    hard = name_at(node_s, now_ms - 3600000)
    vfile = os.path.join(h.mkdtemp("victim_"), "precious")
    with open(vfile, "w") as f:
        f.write("precious\n")
    os.link(vfile, os.path.join(d, hard))
    theirs = set(future + [foreign, hard])
    rc, _, se = h.run_daemon(h.daemon_args(node, out, user="nobody", top=5, rate=20,
                                           every="1s", rotate="1s", duration="6s",
                                           compress="none", keep_files=2), timeout=40)
    t.eq(rc, 0, "retention beside planted files: exit 0")
    left = set(os.listdir(d))
    t.check(theirs <= left, "retention: the 2099 files, the other user's file and the "
            "hard link are all still there", str(sorted(left)))
    t.eq(open(vfile).read(), "precious\n", "retention: the hard link's file untouched")
    finished = re.findall(r"finished \S+/(\S+) \(", se)
    deleted = re.findall(r"retention: deleted (\S+) ", se)
    t.check(len(finished) >= 4 and set(deleted) <= set(finished) and
            len(deleted) == len(finished) - 2,
            "retention: only the daemon's own files deleted, the last 2 kept "
            "(%d finished, %d deleted)" % (len(finished), len(deleted)))
    man = json.load(open(os.path.join(d, "manifest.json")))
    listed = [f["name"] for f in man["files"]]
    t.eq(listed, finished[-2:], "retention: the manifest lists the daemon's 2 files left")
    t.check(all(n in left for n in listed), "... and they are there")
    t.check("named for a time in the future; left alone" in se,
            "retention: the 2099 files are reported", se[-1500:])

    # 5. links at the next file names (and the partial names): the run
    #    goes on with the next free name
    out = h.mkdtemp("out_")
    os.chmod(out, 0o755)
    vfile = os.path.join(h.mkdtemp("victim_"), "precious")
    with open(vfile, "w") as f:
        f.write("precious\n")
    dm = h.start_daemon(h.daemon_args(node, out, user="nobody", top=5, rate=20,
                                      every="1s", compress="none"))
    dm.wait_samples(timeout=15)
    d = os.path.join(out, node_s)
    # every name of 900 ms (fewer than the 1000 the daemon tries) a few
    # seconds ahead, planted before that time comes (planting is slow on a
    # loaded machine); SIGUSR1 then opens the new file inside the window
    links, lead = [], 3000
    for _ in range(5):
        start = int(time.time() * 1000) + lead
        for ms in range(start, start + 900):
            final = name_at(node_s, ms)
            for n in (final, "." + final + ".partial"):
                os.symlink(vfile, os.path.join(d, n))
                links.append(n)
        if time.time() * 1000 < start:
            break
        lead *= 2
    time.sleep(max(0, start + 50 - time.time() * 1000) / 1000)
    dm.send_signal(signal.SIGUSR1)      # a new file now, at a taken name
    dm.wait_log(r"already taken by something not ours", timeout=10)
    dm.send_signal(signal.SIGUSR1)
    time.sleep(1.5)
    t.eq(dm.stop(), 0, "links at the next names: the run goes on, exit 0")
    se = dm.read_stderr()
    t.eq(open(vfile).read(), "precious\n", "links at the next names: the target untouched")
    t.check(all(os.path.islink(os.path.join(d, n)) for n in links),
            "links at the next names: every link still there, none replaced")
    finished = re.findall(r"finished \S+/(\S+) \(", se)
    late = [n for n in finished if n > name_at(node_s, start + 899)]
    t.check(len(late) >= 1 and all(not os.path.islink(os.path.join(d, n)) for n in late),
            "links at the next names: files finished under the next free names", str(finished))
    t.check("cannot create a file" not in se and "I/O error" not in se,
            "links at the next names: no write error")


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
    rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, duration="3s",
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
    path_checks(t, node)

    # --connect HOST:PORT (a tunnel endpoint) skips epmd: point epmd at a
    # dead port and give the node's own distribution port instead
    names = subprocess.run(["epmd", "-port", h.child_env()["ERL_EPMD_PORT"], "-names"],
                           capture_output=True, text=True).stdout
    m = re.search(r"name %s at port (\d+)" % re.escape(node.sname), names)
    t.check(m, "the node's distribution port from epmd -names")
    if m:
        out = h.mkdtemp("out_")
        rc, _, se = h.run_daemon(h.daemon_args(node, out, top=5, duration="3s",
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
