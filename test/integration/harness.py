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
"""

import atexit
import calendar
import glob
import os
import re
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FP_DEMO_SRC = os.path.join(REPO, "test", "erl", "fp_demo.erl")

EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77

STATUSES = ("running", "runnable", "waiting", "garbage_collecting",
            "suspended", "exiting", "cpu")
METRICS = ("reductions", "memory", "message_queue_len", "total_heap_size",
           "heap_size", "stack_size", "binary_bytes", "minor_gcs")

VERBOSE = os.environ.get("FP_TEST_VERBOSE") == "1"


class Skip(Exception):
    """Raise to end the test with exit code 77."""


class TestFailure(Exception):
    """Raise to end the test with exit code 1 (harness.fail())."""


def fail(msg):
    raise TestFailure(msg)


def log(msg):
    print(msg, flush=True)


def vlog(msg):
    if VERBOSE:
        print("  [harness] " + msg, flush=True)


# --------------------------------------------------------------------------
# cleanup

_cleanups = []          # LIFO list of (description, callable)
_cleaned = False


def on_cleanup(desc, fn):
    """Register fn to run at exit (LIFO).  Returns fn."""
    _cleanups.append((desc, fn))
    return fn


def cleanup():
    global _cleaned
    if _cleaned:
        return
    _cleaned = True
    while _cleanups:
        desc, fn = _cleanups.pop()
        try:
            fn()
        except Exception as e:  # keep cleaning up
            print("  [harness] cleanup of %s failed: %r" % (desc, e), flush=True)


atexit.register(cleanup)


def _on_signal(signum, _frame):
    # turn SIGTERM/SIGHUP (e.g. from meson's timeout) into a normal exit so
    # finally blocks and atexit run and every child gets killed
    raise SystemExit(128 + signum)


try:
    import ctypes
    _prctl = ctypes.CDLL(None, use_errno=True).prctl     # loaded before any fork
except Exception:
    _prctl = None
_harness_pid = os.getpid()


def _die_with_parent():
    """preexec_fn: SIGKILL this child if the test process dies, even by
    SIGKILL (prctl PR_SET_PDEATHSIG survives the exec chain erl ->
    erlexec -> beam.smp)."""
    if _prctl is not None:
        _prctl(1, signal.SIGKILL, 0, 0, 0)    # PR_SET_PDEATHSIG
    if os.getppid() != _harness_pid:         # parent already gone
        os._exit(1)


def _kill_pid_and_wait(proc, grace):
    """SIGTERM (if grace > 0) then SIGKILL a Popen; always reaps it."""
    if proc.poll() is not None:
        return proc.returncode
    if grace > 0:
        try:
            proc.send_signal(signal.SIGTERM)
            return proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    return proc.wait()


# --------------------------------------------------------------------------
# environment / tools

def erlang_tools():
    """Return paths of erl, erlc, epmd; raise Skip only if erl is absent."""
    erl = shutil.which("erl")
    if not erl:
        raise Skip("erl not found in PATH")
    erlc = shutil.which("erlc")
    epmd = shutil.which("epmd")
    if not erlc or not epmd:
        # erl is there, so a missing erlc/epmd is a broken install: fail
        fail("erl found but erlc (%s) or epmd (%s) missing" % (erlc, epmd))
    return erl, erlc, epmd


def find_erl_call():
    if os.environ.get("FP_HARNESS_NO_ERL_CALL") == "1":
        return None
    p = shutil.which("erl_call")
    if p:
        return p
    erl = shutil.which("erl")
    roots = ["/usr/lib/erlang", "/usr/local/lib/erlang"]
    if erl:
        roots.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(erl))))
    for root in roots:
        cands = sorted(glob.glob(os.path.join(root, "lib", "erl_interface-*", "bin", "erl_call")))
        if cands:
            return cands[-1]
    return None


def short_hostname():
    return socket.gethostname().split(".")[0]


def daemon_cmd():
    """The daemon's command prefix: FP_DAEMON_WRAPPER (e.g. valgrind ...)
    in front of the binary when set."""
    wrapper = os.environ.get("FP_DAEMON_WRAPPER", "").split()
    return wrapper + [daemon_path()]


def daemon_path():
    p = os.environ.get("FLAME_PROFD") or os.path.join(REPO, "build", "daemon", "flame_profd")
    if not (os.path.isfile(p) and os.access(p, os.X_OK)):
        fail("flame_profd binary not found or not executable: %s "
             "(set FLAME_PROFD or build into build/)" % p)
    return os.path.abspath(p)


_tmp_root = None


def tmpdir():
    """The per-test temporary directory (removed at exit unless FP_TEST_KEEP=1)."""
    global _tmp_root
    if _tmp_root is None:
        _tmp_root = tempfile.mkdtemp(prefix="fp_it_")
        if os.environ.get("FP_TEST_KEEP") == "1":
            log("  (keeping temporary directory %s)" % _tmp_root)
        else:
            on_cleanup("tmpdir", lambda: shutil.rmtree(_tmp_root, ignore_errors=True))
    return _tmp_root


def mkdtemp(prefix):
    return tempfile.mkdtemp(prefix=prefix, dir=tmpdir())


def random_cookie():
    return "".join(secrets.choice(string.ascii_uppercase) for _ in range(32))


def write_cookie_file(path, cookie):
    """Write cookie to path with mode 0400 (replacing an existing file)."""
    if os.path.exists(path):
        os.chmod(path, 0o600)
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "w") as f:
        f.write(cookie)
    os.chmod(path, 0o400)
    return path


def _clean_env():
    env = dict(os.environ)
    # hermetic: no user Erlang flags, no inherited daemon cookie
    for k in ("ERL_FLAGS", "ERL_AFLAGS", "ERL_ZFLAGS", "ERL_LIBS",
              "FLAME_PROFD_COOKIE"):
        env.pop(k, None)
    return env


# --------------------------------------------------------------------------
# private epmd

class Epmd:
    def __init__(self):
        self.port = None
        self.proc = None

    def start(self):
        _, _, epmd = erlang_tools()
        last = ""
        for _ in range(10):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            port = s.getsockname()[1]
            s.close()
            logf = open(os.path.join(tmpdir(), "epmd.log"), "ab")
            env = _clean_env()
            env["ERL_EPMD_PORT"] = str(port)
            vlog("epmd -port %d" % port)
            proc = subprocess.Popen([epmd, "-port", str(port)], env=env,
                                    stdin=subprocess.DEVNULL, stdout=logf,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_die_with_parent)
            logf.close()
            on_cleanup("epmd %d" % proc.pid, lambda p=proc: _kill_pid_and_wait(p, 0))
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    last = "epmd exited with %s" % proc.returncode
                    break
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        pass
                    self.port, self.proc = port, proc
                    os.environ["ERL_EPMD_PORT"] = str(port)   # inherited by every child
                    return self
                except OSError as e:
                    last = repr(e)
                    time.sleep(0.05)
            _kill_pid_and_wait(proc, 0)
        fail("could not start a private epmd: %s" % last)

    def names(self):
        """Node names registered in our epmd (without @host)."""
        _, _, epmd = erlang_tools()
        env = _clean_env()
        env["ERL_EPMD_PORT"] = str(self.port)
        r = subprocess.run([epmd, "-names"], env=env, capture_output=True,
                           text=True, timeout=10)
        return re.findall(r"^name (\S+) at port \d+", r.stdout, re.M)

    def stop(self):
        if self.proc is not None:
            _kill_pid_and_wait(self.proc, 0)


_epmd = None


def epmd():
    """Start (once) and return the private epmd."""
    global _epmd
    if _epmd is None:
        _epmd = Epmd().start()
    return _epmd


def child_env(**extra):
    """Environment for children: clean, with our ERL_EPMD_PORT."""
    env = _clean_env()
    env["ERL_EPMD_PORT"] = str(epmd().port)
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


# --------------------------------------------------------------------------
# Erlang nodes

_ebin = None


def demo_ebin():
    """Compile fp_demo.erl once into a temporary ebin."""
    global _ebin
    if _ebin is None:
        _, erlc, _ = erlang_tools()
        d = mkdtemp("ebin_")
        r = subprocess.run([erlc, "-o", d, FP_DEMO_SRC], capture_output=True,
                           text=True, timeout=120, env=child_env())
        if r.returncode != 0:
            fail("erlc fp_demo.erl failed:\n%s%s" % (r.stdout, r.stderr))
        _ebin = d
    return _ebin


class EvalError(Exception):
    pass


_counter = [0]


def _unique(prefix):
    _counter[0] += 1
    return "%s%d_%d_%s" % (prefix, os.getpid(), _counter[0], secrets.token_hex(2))


def _erl_string(s):
    """An Erlang string literal for s (ASCII-safe)."""
    return '"' + "".join(c if c.isalnum() or c in " _-./@:" else "\\x{%x}" % ord(c)
                         for c in s) + '"'


class Node:
    """A real Erlang node running fp_demo.

    Node(idle=1000, busy=4, opts={...}) -> not started; call start().
    name: short name (unique by default); cookie: random by default.
    The cookie is in self.cookie_file (0400) and in HOME/.erlang.cookie of
    the node's private HOME, so it never appears on a command line.
    """

    def __init__(self, name=None, cookie=None, idle=1000, busy=4, opts=None,
                 erl_args=(), demo=True, longname=False):
        self.sname = name or _unique("fpt")
        if not re.match(r"^[A-Za-z0-9_-]+$", self.sname):
            raise ValueError("bad node short name %r" % self.sname)
        self.cookie = cookie or random_cookie()
        self.opts = {"idle": idle, "busy": busy}
        self.opts.update(opts or {})
        # FP_TEST_ERL_ARGS: extra emulator flags for every test node, e.g.
        # "+S 1:1" to keep a noisy 2-core machine responsive
        self.erl_args = os.environ.get("FP_TEST_ERL_ARGS", "").split() + list(erl_args)
        self.longname = longname
        self.demo = demo
        self.dir = mkdtemp("node_%s_" % self.sname)
        self.home = os.path.join(self.dir, "home")
        os.mkdir(self.home, 0o700)
        self.cookie_file = write_cookie_file(os.path.join(self.dir, "cookie"), self.cookie)
        write_cookie_file(os.path.join(self.home, ".erlang.cookie"), self.cookie)
        self.log_path = os.path.join(self.dir, "node.log")
        self.ready_path = os.path.join(self.dir, "ready")
        self.proc = None
        self.name = None          # full node name, known once up
        self.os_pid = None

    # -- lifecycle ---------------------------------------------------------

    def _opts_erl(self):
        parts = []
        for k, v in self.opts.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            parts.append("%s => %s" % (k, v))
        return "#{" + ", ".join(parts) + "}"

    def start(self, timeout=30):
        erl, _, _ = erlang_tools()
        ep = epmd()
        if self.sname in ep.names():
            # a killed namesake may still be registered for a moment
            self._wait_unregistered(5)
        if os.path.exists(self.ready_path):
            os.unlink(self.ready_path)
        start = "ok"
        if self.demo:
            start = "{ok, _} = fp_demo:start(%s)" % self._opts_erl()
        ev = ("%s, ok = file:write_file(%s, io_lib:format(\"~s ~s\", [node(), os:getpid()]))."
              % (start, _erl_string(self.ready_path)))
        name_flag = (["-name", self.sname + "@127.0.0.1"] if self.longname
                     else ["-sname", self.sname])
        cmd = ([erl] + name_flag + ["-start_epmd", "false", "-noshell",
                "-noinput", "-pa", demo_ebin()] + self.erl_args + ["-eval", ev])
        vlog("node: " + " ".join(cmd))
        logf = open(self.log_path, "ab")
        # erl execs erlexec which execs beam.smp: proc.pid is the emulator
        self.proc = subprocess.Popen(cmd, env=child_env(HOME=self.home), cwd=self.dir,
                                     stdin=subprocess.DEVNULL, stdout=logf,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_die_with_parent)
        logf.close()
        on_cleanup("node %s" % self.sname, lambda p=self.proc: _kill_pid_and_wait(p, 0))
        self.wait_up(timeout)
        return self

    def wait_up(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                fail("node %s exited during start (rc=%s); log:\n%s"
                     % (self.sname, None if self.proc is None else self.proc.returncode,
                        self.log_tail()))
            try:
                with open(self.ready_path) as f:
                    txt = f.read().split()
                if len(txt) == 2:
                    self.name, self.os_pid = txt[0], int(txt[1])
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.1)
        else:
            fail("node %s not up after %ss; log:\n%s" % (self.sname, timeout, self.log_tail()))
        if self.os_pid != self.proc.pid:
            fail("node os pid %s != spawned pid %s" % (self.os_pid, self.proc.pid))
        # the node is distributed from boot; check it answers remote calls
        while True:
            try:
                if self.eval("ok", timeout=10) == "ok":
                    return self
            except EvalError as e:
                if time.monotonic() > deadline:
                    fail("node %s does not answer: %s" % (self.name, e))
            time.sleep(0.2)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=15):
        """Graceful stop (SIGTERM -> init:stop), SIGKILL after timeout."""
        if self.proc is not None:
            _kill_pid_and_wait(self.proc, timeout)

    def kill(self):
        """SIGKILL the emulator (simulates a crash)."""
        if self.proc is not None:
            _kill_pid_and_wait(self.proc, 0)

    def _wait_unregistered(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sname not in epmd().names():
                return
            time.sleep(0.1)

    def wait_unregistered(self, timeout=10):
        self._wait_unregistered(timeout)
        return self.sname not in epmd().names()

    def log_tail(self, n=30):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"

    # -- remote evaluation -------------------------------------------------

    def eval(self, expr, timeout=20):
        """Evaluate Erlang expression(s) (no trailing dot) on the node and
        return the result printed with ~tp (may span lines)."""
        if self.name is None:
            raise EvalError("node not started")
        # the value comes back hex-encoded: no quoting/escaping ambiguity
        wrapped = ("binary_to_list(binary:encode_hex(unicode:characters_to_binary("
                   "io_lib:format(\"~tp\", [begin %s end]))))" % expr)
        ec = find_erl_call()
        if ec:
            out = self._eval_erl_call(ec, wrapped, timeout)
        else:
            out = self._eval_helper_node(wrapped, timeout)
        try:
            return bytes.fromhex(out).decode("utf-8")
        except ValueError:
            raise EvalError("unexpected eval output %r" % out)

    def eval_int(self, expr, timeout=20):
        return int(self.eval(expr, timeout))

    def wait_int(self, expr, want, timeout=15):
        """Evaluate expr until it is want or timeout s pass; the last value."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.eval_int(expr)
            if got == want or time.monotonic() > deadline:
                return got
            time.sleep(0.2)

    def eval_str(self, expr, timeout=20):
        """expr must evaluate to a string/iolist; returns it as text."""
        out = self.eval("binary_to_list(binary:encode_hex(unicode:characters_to_binary(%s)))"
                        % expr, timeout)
        return bytes.fromhex(out.strip('"')).decode("utf-8")

    def _eval_erl_call(self, ec, wrapped, timeout):
        # -h: a unique client name (-r picks names that can collide between
        # concurrent erl_call processes, and the node then refuses one)
        cmd = [ec, "-n", self.name, "-h", _unique("fpec"), "-e",
               "-timeout", str(int(max(1, timeout)))]
        vlog("eval: %s <<< %s" % (" ".join(cmd), wrapped))
        try:
            r = subprocess.run(cmd, input=wrapped + ".\n", capture_output=True, text=True,
                               env=child_env(HOME=self.home), timeout=timeout + 5)
        except subprocess.TimeoutExpired:
            raise EvalError("erl_call timed out")
        m = re.match(r'^\{ok, "([0-9A-Fa-f]*)"\}\s*$', r.stdout)
        if r.returncode != 0 or not m:
            raise EvalError("erl_call rc=%d out=%r err=%r" % (r.returncode, r.stdout[:2000],
                                                              r.stderr[:2000]))
        return m.group(1)

    def _eval_helper_node(self, wrapped, timeout):
        erl, _, _ = erlang_tools()
        ev = ('{ok, Ts, _} = erl_scan:string(os:getenv("FP_EVAL_EXPR")),'
              ' {ok, Es} = erl_parse:parse_exprs(Ts),'
              ' Node = list_to_atom(os:getenv("FP_EVAL_NODE")),'
              ' case rpc:call(Node, erl_eval, exprs, [Es, []], %d) of'
              '   {value, V, _} -> io:format("~s", [V]), halt(0);'
              '   Other -> io:format(standard_error, "~p", [Other]), halt(2)'
              ' end.' % (int(timeout * 1000)))
        cmd = [erl, "-sname", _unique("fpeval"), "-hidden", "-start_epmd", "false",
               "-noshell", "-noinput", "-eval", ev]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 15,
                               env=child_env(HOME=self.home, FP_EVAL_EXPR=wrapped + ".",
                                             FP_EVAL_NODE=self.name))
        except subprocess.TimeoutExpired:
            raise EvalError("helper node timed out")
        if r.returncode != 0 or not re.match(r"^[0-9A-Fa-f]*$", r.stdout):
            raise EvalError("helper node rc=%d out=%r err=%r" % (r.returncode, r.stdout[:2000],
                                                                 r.stderr[:2000]))
        return r.stdout

    # -- convenience -------------------------------------------------------

    def pid_of(self, regname):
        """'<0.X.0>' of a registered process."""
        s = self.eval_str("pid_to_list(whereis(%s))" % regname)
        if not re.match(r"^<\d+\.\d+\.\d+>$", s):
            fail("whereis(%s) on %s gave %r" % (regname, self.name, s))
        return s

    def get_backtrace_depth(self):
        """Current backtrace_depth (erlang:system_info/1 has no such item:
        swap the flag and put the old value straight back)."""
        return self.eval_int("D = erlang:system_flag(backtrace_depth, 8), "
                             "erlang:system_flag(backtrace_depth, D), D")

    def set_backtrace_depth(self, d):
        return self.eval_int("erlang:system_flag(backtrace_depth, %d)" % d)


def start_node(**kw):
    return Node(**kw).start()


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

    def __init__(self, args, env=None):
        d = mkdtemp("daemon_")
        self.stdout_path = os.path.join(d, "stdout")
        self.stderr_path = os.path.join(d, "stderr")
        cmd = daemon_cmd() + [str(a) for a in args]
        vlog("daemon: " + " ".join(cmd))
        with open(self.stdout_path, "wb") as so, open(self.stderr_path, "wb") as se:
            super().__init__(cmd, env=_daemon_env(env), stdin=subprocess.DEVNULL,
                             stdout=so, stderr=se, start_new_session=True,
                             preexec_fn=_die_with_parent)
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


def start_daemon(args, env=None):
    return Daemon(args, env)


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


# --------------------------------------------------------------------------
# output files

NAME_OK = re.compile(r"[^A-Za-z0-9._@-]")
FINAL_RE = re.compile(r"^(?P<node>[A-Za-z0-9._@-]+)\.(?P<stamp>\d{8}T\d{6}\.\d{3})Z\.perf(?P<comp>\.gz|\.zst)?$")
PARTIAL_RE = re.compile(r"^\.(?P<node>[A-Za-z0-9._@-]+)\.(?P<stamp>\d{8}T\d{6}\.\d{3})Z\.perf(\.gz|\.zst)?\.partial$")
# bookkeeping the daemon keeps beside the files
META_FILES = {"manifest.json", ".flame_profd.index", ".flame_profd.lock",
              ".flame_profd.reserve"}


def sanitize_node(node):
    return NAME_OK.sub("_", node)


def output_files(out_dir, node):
    """(final, partial, other) file lists (full paths, sorted by name) in
    OUT/<node>/.  `other` are names matching neither pattern."""
    d = os.path.join(out_dir, sanitize_node(node))
    final, partial, other = [], [], []
    if not os.path.isdir(d):
        return final, partial, other
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        m = FINAL_RE.match(n)
        if m and m.group("node") == sanitize_node(node):
            final.append(p)
        elif PARTIAL_RE.match(n):
            partial.append(p)
        elif n not in META_FILES:
            other.append(p)
    return final, partial, other


def file_stamp(path):
    """Unix time encoded in an output file name (UTC)."""
    m = FINAL_RE.match(os.path.basename(path))
    st = m.group("stamp")
    t = time.strptime(st[:15], "%Y%m%dT%H%M%S")
    return calendar.timegm(t) + int(st[16:]) / 1000.0


# --------------------------------------------------------------------------
# perf-script parser (strict)

class ParseError(Exception):
    pass


RESERVED = {"after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl",
            "bsr", "bxor", "case", "catch", "cond", "div", "end", "fun", "if",
            "let", "not", "of", "or", "orelse", "receive", "rem", "try",
            "when", "xor", "maybe", "else"}

_UNQ = r"[a-z][A-Za-z0-9_@]*"
# inside quotes: no control chars, space, ; + ' \ (those are \xHH-escaped)
_QUO = r"'(?:[^\x00-\x20\x7f;+'\\()]|\\x[0-9A-F]{2})*'"
ATOM = r"(?:%s|%s)" % (_QUO, _UNQ)
ATOM_RE = re.compile(r"^%s$" % ATOM)
# The Elixir form of names of Elixir modules (docs/FORMAT.md): an alias,
# a function bare, an operator or quoted "...", "anonymous fn/A in ".
ALIAS = r"[A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)*"
_EXFUN = (r'(?:"(?:[^\x00-\x20\x7f;+"\\()]|\\x[0-9A-F]{2})*"'
          r"|[a-z_][A-Za-z0-9_]*[?!]?|[-&!^@~<>\\:|=*/]+)")
EX_MFA = r"(?:anonymous fn/\d+ in )?%s\.%s/\d+" % (ALIAS, _EXFUN)
EVENT_RE = re.compile(r"^(?P<status>[a-z_]+) (?P<num>\d+)/(?P<serial>\d+) \[000\] "
                      r"(?P<ts>\d+\.\d{6}): cpu-clock:(?P<rest>\t.*)?$")
METRIC_RE = re.compile(r"^metric_erlang_(?P<name>[a-z_]+): (?P<value>\d+), (?P<delta>-?\d+)$")
REGNAME_RE = re.compile(r"^registered_name: (?P<atom>%s|%s)$" % (ATOM, ALIAS))
TAG_RE = re.compile(r"^(?P<name>label|callers|key\.[A-Za-z0-9_@.$-]+): (?P<text>[^\x00-\x20\x7f]+)$")
INITCALL_RE = re.compile(r"^initial_call: (?P<mfa>(?P<m>%s):(?P<f>%s)/(?P<a>\d+)|%s)$"
                         % (ATOM, ATOM, EX_MFA))
FRAME_RE = re.compile(r"^\t(?P<addr>[0-9a-fA-F]{16}) "
                      r"(?P<name>(?:(?P<m>%s):(?P<f>%s)/(?P<a>\d+)|%s)(?::(?P<line>\d+))?) "
                      r"\((?P<file>[^\t]+)\)$" % (ATOM, ATOM, EX_MFA))


def _check_atom(text, where):
    if text is None:        # a name in the Elixir form
        return text
    if not text.startswith("'") and text in RESERVED:
        raise ParseError("%s: reserved word %r must be quoted" % (where, text))
    return text


def decode_atom(text):
    """Atom text as written in the file -> the atom's characters."""
    if not text.startswith("'"):
        return text
    return re.sub(r"\\x([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), text[1:-1])


def quote_atom(name):
    """The contract's encoding of an atom (for building expected strings)."""
    if re.match(r"^%s$" % _UNQ, name) and name not in RESERVED:
        return name
    out = []
    for ch in name:
        if ord(ch) < 0x21 or ord(ch) == 0x7f or ch in ";+'\\()":
            out.append("\\x%02X" % ord(ch))
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


class PerfFile:
    def __init__(self, path, comments, samples):
        self.path, self.comments, self.samples = path, comments, samples


def read_bytes(path):
    """A file's text, decompressed by its suffix (.gz, .zst)."""
    if path.endswith(".gz"):
        import gzip
        with gzip.open(path, "rb") as f:
            return f.read()
    if path.endswith(".zst"):
        return subprocess.run(["zstd", "-dc", "--", path], check=True,
                              stdout=subprocess.PIPE).stdout
    with open(path, "rb") as f:
        return f.read()


def parse_perf(path):
    """Strictly parse one output file.  Returns PerfFile(path, comments,
    samples); raises ParseError(path:line: reason) on anything off-grammar."""
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError("%s: not UTF-8: %s" % (path, e))
    if "\r" in text:
        raise ParseError("%s: contains CR" % path)
    if text and not text.endswith("\n"):
        raise ParseError("%s: last line not terminated by newline" % path)
    lines = text.split("\n")[:-1] if text else []
    comments, samples = [], []
    cur = None

    def err(i, why):
        raise ParseError("%s:%d: %s: %r" % (path, i + 1, why, lines[i][:300]))

    for i, line in enumerate(lines):
        if cur is None:
            if line.startswith("#"):
                comments.append((i + 1, line))
                continue
            if line == "":
                err(i, "blank line outside a sample")
            m = EVENT_RE.match(line)
            if not m:
                err(i, "expected comment or event line")
            if m.group("status") not in STATUSES:
                err(i, "unknown status %r" % m.group("status"))
            cur = {"status": m.group("status"),
                   "pid": "0.%s.%s" % (m.group("num"), m.group("serial")),
                   "ts": float(m.group("ts")), "ts_text": m.group("ts"),
                   "metrics": {}, "fields": {}, "frames": [], "frame_files": [],
                   "frame_addrs": [], "line": i + 1}
            fields = (m.group("rest") or "").split("\t")[1:]
            if len(fields) < len(METRICS):
                err(i, "expected %d metric fields" % len(METRICS))
            for k, fld in enumerate(fields[:len(METRICS)]):
                mm = METRIC_RE.match(fld)
                if not mm or mm.group("name") != METRICS[k]:
                    err(i, "field %d should be metric_erlang_%s: VALUE, DELTA, got %r"
                        % (k + 1, METRICS[k], fld))
                cur["metrics"][METRICS[k]] = (int(mm.group("value")), int(mm.group("delta")))
            rest = fields[len(METRICS):]
            if rest and rest[0].startswith("registered_name:"):
                mm = REGNAME_RE.match(rest[0])
                if not mm:
                    err(i, "bad registered_name field %r" % rest[0])
                cur["fields"]["registered_name"] = _check_atom(mm.group("atom"), path)
                rest = rest[1:]
            if rest and rest[0].startswith("initial_call:"):
                mm = INITCALL_RE.match(rest[0])
                if not mm:
                    err(i, "bad initial_call field %r" % rest[0])
                _check_atom(mm.group("m"), path)
                _check_atom(mm.group("f"), path)
                cur["fields"]["initial_call"] = mm.group("mfa")
                rest = rest[1:]
            # label, key.NAME, callers (docs/FORMAT.md "Labels and keys")
            for want in ("label", "key.", "callers"):
                while rest and rest[0].startswith(want):
                    mm = TAG_RE.match(rest[0])
                    if not mm or (want != "key." and mm.group("name") != want):
                        err(i, "bad %s field %r" % (want, rest[0]))
                    cur["fields"][mm.group("name")] = re.sub(
                        r"\\x([0-9A-F]{2})", lambda e: chr(int(e.group(1), 16)),
                        mm.group("text"))
                    rest = rest[1:]
                    if want != "key.":
                        break
            if rest:
                err(i, "unexpected fields %r" % rest)
            continue
        # inside a sample
        if line == "":
            samples.append(cur)
            cur = None
            continue
        m = FRAME_RE.match(line)
        if not m:
            err(i, "expected frame line or blank line")
        _check_atom(m.group("m"), path)
        _check_atom(m.group("f"), path)
        if int(m.group("a") or 0) > 255:
            err(i, "arity > 255")
        cur["frames"].append(m.group("name"))
        cur["frame_files"].append(m.group("file"))
        cur["frame_addrs"].append(m.group("addr"))
    if cur is not None:
        raise ParseError("%s: file ends inside the sample starting at line %d"
                         % (path, cur["line"]))
    return PerfFile(path, comments, samples)


def read_samples(path):
    """List of sample dicts: status, pid, ts (float), ts_text, metrics
    {name: (value, delta)}, fields {registered_name, initial_call},
    frames [names, leaf first], frame_files, frame_addrs, line."""
    return parse_perf(path).samples


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
