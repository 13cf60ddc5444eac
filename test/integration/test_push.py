#!/usr/bin/env python3
"""--push against a local receiver (test/push-receiver.py) that checks
every request against Pyroscope's documented /ingest API and parses
every profile with `go tool pprof`, across two outages and a restart:

1. a real node and the real daemon with --rotate 2s and --push: the
   receiver takes the first file; it is stopped (connection refused)
   until the daemon has failed a request, started again until the
   daemon says the server takes profiles again, and stopped once more
   until a profile waits in the spool; then the daemon is stopped
   (SIGTERM), leaving the spool for the next run;
2. the receiver up, a second run on the same directory sends the
   spool first, then its own file.

Then: the receiver refused nothing; every finished file of the node
directory arrived exactly once (one request per file, by its time
range, no profile twice), with pprof's sample total equal to
`flame_prof top`'s on that file; the query's name, labels, sampleRate
and spyName and the headers of --push-header-file are as documented,
the header file's secret is in no log line; the spool is empty.
Bad --push values exit 64 and a bad header file 66, before any node is
reached.

Skips (77) without erl, or without go (golang-go, scripts/install-deps).
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

SOURCE = os.environ.get("FP_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
RECEIVER = os.path.join(SOURCE, "test", "push-receiver.py")
FLAME_PROF = os.environ.get("FLAME_PROF") or os.path.join(SOURCE, "build", "flame_prof",
                                                          "flame_prof")
SECRET = "Bearer fp-secret-5e1f"
# libcurl would take a proxy from these: the receiver is local
NO_PROXY = {k: None for k in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY",
                              "HTTPS_PROXY", "ALL_PROXY")}


class Receiver:
    def __init__(self, out, go, port=0):
        self.out = out
        self.proc = subprocess.Popen([sys.executable, RECEIVER, "--port", str(port),
                                      "--out", out, "--go", go],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        h.on_cleanup("receiver %d" % self.proc.pid, self.stop)
        line = self.proc.stdout.readline().decode()
        m = re.match(r"listening (\d+)", line)
        if not m:
            h.fail("receiver did not start: %r" % line)
        self.port = int(m.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def entries(out, name):
    try:
        with open(os.path.join(out, name)) as f:
            return [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        return []


def wait_for(what, cond, timeout):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            h.fail("timeout waiting for %s" % what)
        time.sleep(0.1)


def top_samples(path):
    p = subprocess.run([FLAME_PROF, "top", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    m = re.match(r"samples: (\d+)\n", p.stdout.decode("utf-8", "replace"))
    return int(m.group(1)) if m else -1


def receiver_refuses(t, rdir, port):
    """The receiver itself: requests off the documented API get 400."""
    import urllib.error
    import urllib.request

    def post(query, body=b"", ctype="text/plain"):
        req = urllib.request.Request("http://127.0.0.1:%d/ingest?%s" % (port, query),
                                     data=body, headers={"Content-Type": ctype})
        try:
            return urllib.request.urlopen(req, timeout=30).status
        except urllib.error.HTTPError as e:
            return e.code

    ok_q = "name=app%7Bnode%3Dn%7D&from=1&until=2&format=pprof"
    form = (b"--b\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"p\"\r\n"
            b"\r\nnot a profile\r\n--b--\r\n")
    cases = [
        ("folded body", "name=app%7B%7D&from=1&until=2", b"foo;bar 1\n", "text/plain"),
        ("no from", "name=app%7B%7D&until=2&format=pprof", form, "multipart/form-data; boundary=b"),
        ("bad label", "name=app%7Bno%20de%3Dx%7D&from=1&until=2&format=pprof", form,
         "multipart/form-data; boundary=b"),
        ("not multipart", ok_q, b"x", "application/octet-stream"),
        ("not a profile", ok_q, form, "multipart/form-data; boundary=b"),
    ]
    for what, q, body, ctype in cases:
        t.eq(post(q, body, ctype), 400, "the receiver refuses a request: %s" % what)
    t.eq(len(entries(rdir, "rejected.jsonl")), len(cases), "... and logs each refusal")
    os.unlink(os.path.join(rdir, "rejected.jsonl"))


def bad_options(t, node, out, port):
    base = h.daemon_args(node, out, duration="1s")
    rc, _, se = h.run_daemon(base + ["--push", "ftp://127.0.0.1/"])
    t.eq(rc, 64, "--push ftp://: exit 64")
    t.check("--push" in se and "http://" in se, "--push ftp://: says what it expects", se)
    rc, _, se = h.run_daemon(base + ["--push-header-file", "/dev/null"])
    t.eq(rc, 64, "--push-header-file without --push: exit 64")
    bad = os.path.join(h.mkdtemp("hdr_"), "headers")
    with open(bad, "w") as f:
        f.write("Authorization: %s\n" % SECRET)
    os.chmod(bad, 0o644)
    rc, _, se = h.run_daemon(base + ["--push", "http://127.0.0.1:%d" % port,
                                     "--push-header-file", bad])
    t.eq(rc, 66, "a header file others can read: exit 66")
    t.check("chmod 600" in se and SECRET not in se, "... says so", se)
    with open(bad, "w") as f:
        f.write("Authorization %s\n" % SECRET)
    os.chmod(bad, 0o600)
    rc, _, se = h.run_daemon(base + ["--push", "http://127.0.0.1:%d" % port,
                                     "--push-header-file", bad])
    t.eq(rc, 66, "a header file that is not Name: value lines: exit 66")
    t.check("line 1" in se and SECRET not in se,
            "... names the line, never its text", se)


def main(t):
    go = shutil.which("go")
    if not go:
        raise h.Skip("go not found (apt-get install golang-go, or scripts/install-deps)")
    node = h.start_node(idle=200)
    out = h.mkdtemp("out_")
    rdir = h.mkdtemp("recv_")
    rcv = Receiver(rdir, go)
    port = rcv.port
    receiver_refuses(t, rdir, port)
    bad_options(t, node, out, port)

    hdir = h.mkdtemp("hdr_")
    hfile = os.path.join(hdir, "headers")
    with open(hfile, "w") as f:
        f.write("# the tenant and the token\nX-Scope-OrgID: fp-test\r\nAuthorization: %s\n"
                % SECRET)
    os.chmod(hfile, 0o600)
    ndir = os.path.join(out, h.sanitize_node(node.name))
    spool = os.path.join(ndir, "push-spool")
    args = h.daemon_args(node, out, rate=20, rotate="2s", top=10) + [
        "--push", "http://127.0.0.1:%d/" % port, "--push-timeout", "3s",
        "--push-header-file", hfile]

    # 1. two outages, then stopped with a profile in the spool
    dm = h.start_daemon(args, env=NO_PROXY)
    wait_for("the first profile", lambda: len(entries(rdir, "accepted.jsonl")) >= 1, 20)
    rcv.stop()
    dm.wait_log(r"--push \[.*\]: no answer from the server", timeout=15)
    rcv = Receiver(rdir, go, port)
    dm.wait_log(r"--push \[.*\]: the server takes profiles again", timeout=20)
    rcv.stop()
    wait_for("a profile in the spool",
             lambda: any(n.endswith(".pprof.gz") for n in os.listdir(spool)), 15)
    t.eq(dm.stop(), 0, "first run: exit 0 after SIGTERM")
    se1 = dm.read_stderr()
    t.check(re.search(r"profiles? stay in the spool for the next run", se1),
            "first run: what the server did not take stays in the spool")
    left = [n for n in os.listdir(spool) if n.endswith(".pprof.gz")]
    t.check(len(left) >= 1, "first run: the spool holds %d profiles" % len(left))

    # 2. the spool first, on the next run
    rcv = Receiver(rdir, go, port)
    rc, _, se2 = h.run_daemon(args + ["--duration", "3s"], env=NO_PROXY, timeout=60)
    rcv.stop()
    t.eq(rc, 0, "second run: exit 0")
    t.check(re.search(r"%d profiles? left in the spool by an earlier run are sent first"
                      % len(left), se2), "second run: sends the spool first", se2[-2000:])
    t.eq(sorted(os.listdir(spool)), [".pushed"],
         "the spool holds no profile at the end, only its mark")

    # what arrived
    t.eq(entries(rdir, "rejected.jsonl"), [], "the receiver refused no request")
    acc = entries(rdir, "accepted.jsonl")
    final, partial, _ = h.output_files(out, node.name)
    t.eq(partial, [], "no partial files")
    want = {}
    for p in final:
        ts = [s["ts"] for s in h.parse_perf(p).samples]
        want[(int(math.floor(min(ts))), int(math.ceil(max(ts))))] = \
            (os.path.basename(p), top_samples(p))
    got = {}
    for e in acc:
        got.setdefault((e["from"], e["until"]), []).append(e)
    t.check(len(final) >= 4, "several files finished (%d)" % len(final))
    t.eq(sorted(got), sorted(want), "one request per finished file, by its time range")
    t.eq([k for k, v in got.items() if len(v) > 1], [], "no file arrived twice")
    t.eq(len({e["sha256"] for e in acc}), len(acc), "no profile sent twice")
    t.eq({k: v[0]["samples"] for k, v in got.items() if k in want},
         {k: v[1] for k, v in want.items() if k in got},
         "each profile's sample total (go tool pprof) is flame_prof top's of its file")
    short = node.name.split("@")[0]
    t.eq(sorted({(e["app"], e["labels"].get("node")) for e in acc}),
         [(short, node.name)], "name=SERVICE{node=NODE}, the service the node's name")
    t.eq(sorted({(e["sampleRate"], e["spyName"]) for e in acc}), [("20", "flame_profd")],
         "sampleRate is --rate, spyName flame_profd")
    t.eq(sorted({tuple(e["types"]) for e in acc}), [("samples",)],
         "one sample type, samples")
    t.check(all(e["sample_labels"] in ([], ["status"]) for e in acc),
            "samples labelled by status only", str({tuple(e["sample_labels"]) for e in acc}))
    t.eq(sorted({(e["headers"].get("X-Scope-OrgID"), e["headers"].get("Authorization"))
                 for e in acc}), [("fp-test", SECRET)],
         "every request carries the header file's lines")
    t.check(SECRET not in se1 + se2, "the header file's secret is in no log line")


if __name__ == "__main__":
    h.run(main)
