"""The harness's ground: failing and logging, cleanup of everything a test
starts (by OS pid, also on signals), the tools it runs, temporary files and
the private epmd. harness.py re-exports it; tests use harness.NAME."""


import atexit
import glob
import os
import re
import secrets
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import time


HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FP_DEMO_SRC = os.path.join(REPO, "test", "erl", "fp_demo.erl")

EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77

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
