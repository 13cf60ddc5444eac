"""Erlang nodes for the tests: start, evaluate, stop (by OS pid).
harness.py re-exports it; tests use harness.Node / harness.start_node."""


import os
import re
import secrets
import subprocess
import time

from hbase import (FP_DEMO_SRC, _die_with_parent, _kill_pid_and_wait, child_env,
                   epmd, erlang_tools, fail, find_erl_call, mkdtemp, on_cleanup,
                   random_cookie, vlog, write_cookie_file)


# --------------------------------------------------------------------------
# Erlang nodes

_ebin = None


def _built_demo(erlc):
    """The directory of the build's fp_demo.beam (FP_DEMO_BEAM, made by
    FP_DEMO_ERLC), if that erlc is the one on PATH, the one whose release
    the nodes run, and the beam is not older than the source; else None."""
    beam, built_by = os.environ.get("FP_DEMO_BEAM"), os.environ.get("FP_DEMO_ERLC")
    if not beam or not built_by or os.path.realpath(built_by) != os.path.realpath(erlc):
        return None
    try:
        if os.path.getmtime(beam) < os.path.getmtime(FP_DEMO_SRC):
            return None
    except OSError:
        return None
    return os.path.dirname(beam)


def demo_ebin():
    """The ebin of fp_demo: the build's, or fp_demo.erl compiled once into
    a temporary one."""
    global _ebin
    if _ebin is None:
        _, erlc, _ = erlang_tools()
        _ebin = _built_demo(erlc)
    if _ebin is None:
        d = mkdtemp("ebin_")
        r = subprocess.run([erlc, "-o", d, FP_DEMO_SRC], capture_output=True,
                           text=True, timeout=120, env=child_env())
        if r.returncode != 0:
            fail("erlc fp_demo.erl failed:\n%s%s" % (r.stdout, r.stderr))
        _ebin = d
    return _ebin


class EvalError(Exception):
    pass


# The emulator never removes the perf map +JPperf true writes: a node the
# tests start leaves /tmp/perf-PID.map behind unless they remove it.
PERF_MAP_RE = re.compile(r"^/tmp/perf-\d+\.map$")


def _process_tree(pid):
    """pid and the pids of its descendants, alive now."""
    pids, i = [pid], 0
    while i < len(pids):
        try:
            for tid in os.listdir("/proc/%d/task" % pids[i]):
                with open("/proc/%d/task/%s/children" % (pids[i], tid)) as f:
                    pids += [int(c) for c in f.read().split()]
        except OSError:
            pass
        i += 1
    return pids


def open_perf_maps(pid):
    """[(path, st_dev, st_ino, holder pid, fd)] of the perf maps that pid
    or a descendant (an emulator under a wrapper names its map by the pid
    of its own namespace) has open: the files they wrote, not namesakes."""
    maps = []
    for p in _process_tree(pid):
        fd_dir = "/proc/%d/fd" % p
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                path = os.readlink(os.path.join(fd_dir, fd))
                if PERF_MAP_RE.match(path):
                    st = os.stat(path)
                    maps.append((path, st.st_dev, st.st_ino, p, fd))
            except OSError:
                pass
    return maps


def _holds(pid, fd, path):
    try:
        return os.readlink("/proc/%d/fd/%s" % (pid, fd)) == path
    except OSError:
        return False


def remove_perf_maps(maps, timeout=10):
    """Remove the maps open_perf_maps() found once their writer has exited
    (a wrapper's child may outlive the wrapper for a moment; one still
    open after timeout s is left). A file of that name made since is
    someone else's: left alone."""
    deadline = time.monotonic() + timeout
    for path, dev, ino, pid, fd in maps:
        while _holds(pid, fd, path) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _holds(pid, fd, path):
            continue
        try:
            st = os.stat(path)
            if (st.st_dev, st.st_ino) == (dev, ino):
                os.unlink(path)
        except FileNotFoundError:
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
    wrapper: a command erl runs under (e.g. unshare); then os_pid is what
    the node says, not the spawned pid.
    runtime_name: no -sname/-name on the command line; the node names
    itself with net_kernel:start/1 once up (as RabbitMQ does).
    """

    def __init__(self, name=None, cookie=None, idle=1000, busy=4, opts=None,
                 erl_args=(), demo=True, longname=False, wrapper=(),
                 runtime_name=False):
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
        self.wrapper = list(wrapper)
        self.runtime_name = runtime_name
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
        self.perf_maps = {}       # spawned pid -> open_perf_maps() once up

    # -- lifecycle ---------------------------------------------------------

    def _opts_erl(self):
        parts = []
        for k, v in self.opts.items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            parts.append("%s => %s" % (k, v))
        return "#{" + ", ".join(parts) + "}"

    def start(self, timeout=30, wait=True):
        """Start the node and wait until it answers; wait=False: return
        once started (call wait_up() later), so that several nodes boot
        at once."""
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
        if self.runtime_name:
            ev = ("{ok, _} = net_kernel:start(['%s', %s]), %s"
                  % (name_flag[1], "longnames" if self.longname else "shortnames", ev))
            name_flag = []
        cmd = (self.wrapper + [erl] + name_flag + ["-start_epmd", "false", "-noshell",
                "-noinput", "-pa", demo_ebin()] + self.erl_args + ["-eval", ev])
        vlog("node: " + " ".join(cmd))
        logf = open(self.log_path, "ab")
        # erl execs erlexec which execs beam.smp: proc.pid is the emulator
        self.proc = subprocess.Popen(cmd, env=child_env(HOME=self.home), cwd=self.dir,
                                     stdin=subprocess.DEVNULL, stdout=logf,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_die_with_parent)
        logf.close()
        on_cleanup("node %s" % self.sname, lambda p=self.proc: self._end(p, 0))
        if wait:
            self.wait_up(timeout)
        return self

    def _end(self, proc, grace):
        """Stop proc (reaped), then remove the perf maps its emulator wrote."""
        rc = _kill_pid_and_wait(proc, grace)
        remove_perf_maps(self.perf_maps.pop(proc.pid, []))
        return rc

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
                    self.perf_maps[self.proc.pid] = open_perf_maps(self.proc.pid)
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.1)
        else:
            fail("node %s not up after %ss; log:\n%s" % (self.sname, timeout, self.log_tail()))
        if not self.wrapper and self.os_pid != self.proc.pid:
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
            self._end(self.proc, timeout)

    def kill(self):
        """SIGKILL the emulator (simulates a crash)."""
        if self.proc is not None:
            self._end(self.proc, 0)

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

    def memory_after_gc(self):
        """erlang:memory(total) and rex's memory, after a GC of every
        process (a demo node: fp_demo:gc_all/0)."""
        txt = self.eval("ok = fp_demo:gc_all(), "
                        "{erlang:memory(total), "
                        "element(2, process_info(whereis(rex), memory))}", timeout=60)
        total, rex = map(int, re.findall(r"\d+", txt))
        return total, rex


def start_node(**kw):
    return Node(**kw).start()
