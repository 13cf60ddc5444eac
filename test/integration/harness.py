"""Integration-test harness for flame_profd (standard library only).

Every test script does

    import harness
    def main(t): ...
    harness.run(main)

harness.run() handles skipping (exit 77 only when `erl` is absent), failures
(exit 1) and cleanup: every Erlang node, epmd and daemon started through this
module is killed by OS pid when the test ends, also on exceptions, SIGTERM
and SIGINT.

Erlang processes never touch the default epmd on port 4369: the harness
starts a private `epmd -port P` (a child process it owns) on a free port and
puts ERL_EPMD_PORT=P into the environment of every child (nodes, erl_call,
helper nodes, the daemon).

Environment:
  FLAME_PROFD        path of the daemon binary (default: <repo>/build/daemon/flame_profd)
  FP_TEST_KEEP=1     keep the temporary directory (its path is printed)
  FP_TEST_VERBOSE=1  print every command the harness runs
  FP_TEST_ERL_ARGS   extra erl flags for test nodes (e.g. "+S 1:1")
  FP_HARNESS_NO_ERL_CALL=1  evaluate via a helper node instead of erl_call
  FP_DEMO_BEAM, FP_DEMO_ERLC  the build's fp_demo.beam and the erlc that
                     made it (meson test sets them): the nodes load it when
                     that erlc is the one on PATH, else fp_demo.erl is
                     compiled once per test
"""

import os
import re
import signal
import subprocess
import sys
import time
import traceback

from hbase import *  # noqa: F401,F403 (re-exported for the tests)
from hbase import _die_with_parent, _kill_pid_and_wait, _on_signal
from nodes import *  # noqa: F401,F403
from perf_files import *  # noqa: F401,F403


# --------------------------------------------------------------------------
# daemon

def _daemon_env(env):
    e = child_env()
    # no accidental ~/.erlang.cookie: HOME is an empty private directory
    home = os.path.join(tmpdir(), "daemon_home")
    os.makedirs(home, mode=0o700, exist_ok=True)
    e["HOME"] = home
    if env:
        for k, v in env.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = str(v)
    return e


def run_daemon(args, env=None, timeout=60):
    """Run flame_profd to completion; returns (exit code, stdout, stderr)."""
    cmd = daemon_cmd() + [str(a) for a in args]
    vlog("daemon: " + " ".join(cmd))
    p = subprocess.Popen(cmd, env=_daemon_env(env), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, preexec_fn=_die_with_parent)
    on_cleanup("daemon %d" % p.pid, lambda: _kill_pid_and_wait(p, 0))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_pid_and_wait(p, 2)
        out, err = p.communicate()
        fail("flame_profd did not exit within %ss: %s\nstderr:\n%s"
             % (timeout, " ".join(cmd), err.decode(errors="replace")[-4000:]))
    return (p.returncode, out.decode("utf-8", errors="replace"),
            err.decode("utf-8", errors="replace"))


class Daemon(subprocess.Popen):
    """A running flame_profd; stdout/stderr go to files (no pipe stalls)."""

    def __init__(self, args, env=None, preexec=None):
        """preexec: called in the child before the exec (e.g. setrlimit)."""
        d = mkdtemp("daemon_")
        self.stdout_path = os.path.join(d, "stdout")
        self.stderr_path = os.path.join(d, "stderr")
        cmd = daemon_cmd() + [str(a) for a in args]
        vlog("daemon: " + " ".join(cmd))
        def child():
            _die_with_parent()
            if preexec:
                preexec()
        with open(self.stdout_path, "wb") as so, open(self.stderr_path, "wb") as se:
            super().__init__(cmd, env=_daemon_env(env), stdin=subprocess.DEVNULL,
                             stdout=so, stderr=se, start_new_session=True,
                             preexec_fn=child)
        on_cleanup("daemon %d" % self.pid, lambda: _kill_pid_and_wait(self, 0))

    def read_stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")

    def read_stdout(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")

    def wait_log(self, pattern, timeout=20, count=1):
        """Wait until stderr has `count` lines matching regex; returns them."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            hits = [l for l in self.read_stderr().splitlines() if rx.search(l)]
            if len(hits) >= count:
                return hits
            if self.poll() is not None:
                fail("flame_profd exited (rc=%s) while waiting for /%s/; stderr:\n%s"
                     % (self.returncode, pattern, self.read_stderr()[-4000:]))
            if time.monotonic() > deadline:
                fail("timeout waiting for /%s/ in flame_profd stderr:\n%s"
                     % (pattern, self.read_stderr()[-4000:]))
            time.sleep(0.1)

    def wait_samples(self, after=None, timeout=20, intervals_needed=1):
        """Wait for `intervals_needed` interval log lines with samples > 0
        (only counting lines after the last line matching regex `after`)."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.read_stderr().splitlines()
            if after:
                idx = [i for i, l in enumerate(lines) if re.search(after, l)]
                lines = lines[idx[-1] + 1:] if idx else []
            got = [kv for kv in intervals("\n".join(lines)) if int(kv.get("samples", 0)) > 0]
            if len(got) >= intervals_needed:
                return got
            if self.poll() is not None:
                fail("flame_profd exited (rc=%s) while waiting for samples; stderr:\n%s"
                     % (self.returncode, self.read_stderr()[-4000:]))
            if time.monotonic() > deadline:
                fail("no interval with samples%s within %ss; stderr:\n%s"
                     % (" after /%s/" % after if after else "", timeout,
                        self.read_stderr()[-4000:]))
            time.sleep(0.1)

    def wait_sample_count(self, n, after=None, timeout=30):
        """Wait until the interval lines count at least n samples in all
        (only lines after the last line matching regex `after`); returns
        that count. What a run writes is what its interval lines count."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.read_stderr().splitlines()
            if after:
                idx = [i for i, l in enumerate(lines) if re.search(after, l)]
                lines = lines[idx[-1] + 1:] if idx else []
            got = sum(int(kv.get("samples", 0)) for kv in intervals("\n".join(lines)))
            if got >= n:
                return got
            if self.poll() is not None:
                fail("flame_profd exited (rc=%s) with %d of %d samples; stderr:\n%s"
                     % (self.returncode, got, n, self.read_stderr()[-4000:]))
            if time.monotonic() > deadline:
                fail("%d of %d samples within %ss; stderr:\n%s"
                     % (got, n, timeout, self.read_stderr()[-4000:]))
            time.sleep(0.1)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Send sig and wait; returns the exit code (fails the test on timeout)."""
        if self.poll() is None:
            self.send_signal(sig)
        try:
            return self.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_pid_and_wait(self, 0)
            fail("flame_profd did not exit within %ss of signal %d; stderr:\n%s"
                 % (timeout, sig, self.read_stderr()[-4000:]))


def start_daemon(args, env=None, preexec=None):
    return Daemon(args, env, preexec)


def run_daemon_until(args, until, env=None, timeout=20):
    """Run flame_profd until until(daemon) returns (it waits for what the
    run must hold: Daemon.wait_log, wait_samples, wait_sample_count, their
    timeouts bounding only a failure), then SIGTERM; returns (exit code,
    stdout, stderr) as run_daemon does. For runs that need some samples
    or files, not a length of time."""
    dm = Daemon(args, env)
    until(dm)
    rc = dm.stop(timeout=timeout)
    return rc, dm.read_stdout(), dm.read_stderr()


LOG_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) flame_profd "
                    r"(debug|info|notice|warning|error): (.*)$")
# one per selection interval; further key=value pairs are allowed
INTERVAL_RE = re.compile(r"info: interval: selected=(\d+) pinned=(\d+) samples=(\d+) ")


def intervals(stderr):
    """[{key: value}] for every `interval:` log line (values as strings;
    'achieved'/'requested' without the /s)."""
    out = []
    for _, level, msg in log_lines(stderr):
        if level == "info" and msg.startswith("interval: "):
            kv = dict(re.findall(r"(\w+)=(\S+)", msg))
            for k in ("achieved", "requested"):
                if k in kv and kv[k].endswith("/s"):
                    kv[k] = kv[k][:-2]
            out.append(kv)
    return out


def log_lines(stderr):
    """[(timestamp, level, message)] for stderr lines in log format."""
    return [m.groups() for m in map(LOG_RE.match, stderr.splitlines()) if m]


def error_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("flame_profd: error: ")]


def daemon_args(node, out=None, cookie_file=None, **opts):
    """Build a flame_profd command line.  opts: top=5 -> --top 5,
    backtrace_depth=40 -> --backtrace-depth 40, name=[a, b] -> --name a
    --name b, lines=True -> --lines."""
    args = ["--node", node.name if isinstance(node, Node) else node]
    cf = cookie_file or (node.cookie_file if isinstance(node, Node) else None)
    if cf:
        args += ["--cookie-file", cf]
    if out:
        args += ["--out", out]
    for k, v in opts.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            args.append(flag)
        elif v is None or v is False:
            continue
        elif isinstance(v, (list, tuple)):
            for x in v:
                args += [flag, str(x)]
        else:
            args += [flag, str(v)]
    return args


def check_output(t, out, node, t_start=None, t_end=None, min_samples=1):
    """Common checks on OUT/<node>/: only final files, every file parses,
    timestamps plausible and non-decreasing per file, names without ';'.
    Returns the list of PerfFile (sorted by file name)."""
    nodename = node.name if isinstance(node, Node) else node
    final, partial, other = output_files(out, nodename)
    t.check(os.path.isdir(os.path.join(out, sanitize_node(nodename))),
            "output directory OUT/%s exists" % sanitize_node(nodename))
    t.check(len(final) >= 1, "at least one final .perf file (%d)" % len(final))
    t.eq([os.path.basename(p) for p in partial], [], "no .partial files left")
    t.eq([os.path.basename(p) for p in other], [], "no unexpected files")
    files = []
    for p in final:
        try:
            files.append(parse_perf(p))
        except ParseError as e:
            t.check(False, "%s follows the grammar" % os.path.basename(p), str(e))
    t.check(len(files) == len(final), "all %d files follow the grammar" % len(final))
    nsamples = sum(len(f.samples) for f in files)
    t.check(nsamples >= min_samples, "at least %d samples (%d)" % (min_samples, nsamples))
    bad_order = [os.path.basename(f.path) for f in files
                 if any(b["ts"] < a["ts"] for a, b in zip(f.samples, f.samples[1:]))]
    t.eq(bad_order, [], "timestamps non-decreasing within each file")
    if t_start is not None and t_end is not None:
        tss = [s["ts"] for f in files for s in f.samples]
        if tss:
            t.check(t_start - 1 <= min(tss) and max(tss) <= t_end + 1,
                    "sample timestamps are epoch seconds within the run",
                    "samples %.3f..%.3f, run %.3f..%.3f" % (min(tss), max(tss), t_start, t_end))
        stamps = [file_stamp(f.path) for f in files]
        t.check(all(t_start - 2 <= s <= t_end + 2 for s in stamps),
                "file name timestamps within the run (UTC)",
                "%r vs %.3f..%.3f" % (stamps, t_start, t_end))
    semis = [n for f in files for s in f.samples for n in s["frames"] if ";" in n]
    t.eq(semis[:5], [], "no ';' in frame names")
    return files


def all_samples(files):
    return [s for f in files for s in f.samples]


# --------------------------------------------------------------------------
# checks / test runner

class Checker:
    """Collects check results; a failed check does not stop the test."""

    def __init__(self):
        self.failures = []
        self.count = 0

    def check(self, cond, what, detail=""):
        self.count += 1
        if cond:
            log("  ok   %s" % what)
        else:
            log("  FAIL %s%s" % (what, (": " + detail) if detail else ""))
            self.failures.append(what)
        return bool(cond)

    def require(self, cond, what, detail=""):
        """Like check, but a failure ends the test."""
        if not self.check(cond, what, detail):
            raise TestFailure(what)

    def eq(self, got, want, what):
        return self.check(got == want, what, "got %r, want %r" % (got, want))


def run(main, needs_daemon=True):
    """Run main(checker); exit 0/1/77.  Always cleans up."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    name = os.path.basename(sys.argv[0])
    t = Checker()
    rc = EXIT_PASS
    try:
        erlang_tools()
        if needs_daemon:
            log("flame_profd: %s" % daemon_path())
        main(t)
        if t.failures:
            rc = EXIT_FAIL
    except Skip as e:
        log("SKIP %s: %s" % (name, e))
        rc = EXIT_SKIP
    except TestFailure as e:
        log("FAIL %s: %s" % (name, e))
        rc = EXIT_FAIL
    except KeyboardInterrupt:
        log("interrupted")
        rc = EXIT_FAIL
    except SystemExit as e:
        log("exiting (%s)" % e.code)
        rc = EXIT_FAIL
    except Exception:
        traceback.print_exc()
        rc = EXIT_FAIL
    finally:
        cleanup()
    if rc == EXIT_PASS:
        log("PASS %s (%d checks)" % (name, t.count))
    elif rc == EXIT_FAIL and t.failures:
        log("FAIL %s: %d failed check(s): %s" % (name, len(t.failures), "; ".join(t.failures)))
    sys.stdout.flush()
    sys.exit(rc)
