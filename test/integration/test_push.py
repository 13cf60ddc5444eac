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

3. --push-format otlp, on the same node, against the receiver in its
   OTLP/HTTP mode, which answers the first request 503 with Retry-After
   and the next one with a partial success: every finished file arrives
   once, as an ExportProfilesServiceRequest POSTed to
   /v1development/profiles, gzip'd, as application/x-protobuf, with the
   header file's lines; the retry and the partial success are logged,
   the server's text escaped. With OTLP_PROTO_DIR (a checkout of
   opentelemetry-proto) protoc decodes each body against the official
   schema, and the resource (service.name, host.name, beam.node), the
   scope, the period, each profile's total and its stacks (by function
   name) are those of `flame_prof top` and `flame_prof folded` on its
   file; without it, protoc --decode_raw only, and the test says the
   schema check was skipped.

Skips (77) without erl, or without go (golang-go, scripts/install-deps).
Fails without protoc (protobuf-compiler, scripts/install-deps).
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
    def __init__(self, out, go, port=0, extra=()):
        self.out = out
        self.proc = subprocess.Popen([sys.executable, RECEIVER, "--port", str(port),
                                      "--out", out, "--go", go] + list(extra),
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
    rc, _, se = h.run_daemon(base + ["--push-format", "otlp"])
    t.eq(rc, 64, "--push-format without --push: exit 64")
    t.check("--push-format needs --push URL" in se, "... says so", se)
    rc, _, se = h.run_daemon(base + ["--push", "http://127.0.0.1:%d" % port,
                                     "--push-format", "otel"])
    t.eq(rc, 64, "--push-format otel: exit 64")
    t.check("pyroscope or otlp" in se, "... says what it expects", se)
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


def folded_by_function(path):
    """flame_prof folded's stacks of @path with each frame's :LINE left
    out, as OTLP holds the line on the location, not in the name."""
    p = subprocess.run([FLAME_PROF, "folded", "--no-status", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    stacks = {}
    for line in p.stdout.decode("utf-8").splitlines():
        stack, _, n = line.rpartition(" ")
        stack = ";".join(re.sub(r"(/\d+):\d+$", r"\1", f) for f in stack.split(";"))
        stacks[stack] = stacks.get(stack, 0) + int(n)
    return stacks


def otlp_run(t, node, go, hfile):
    """3. --push-format otlp against the receiver's OTLP/HTTP mode."""
    protoc = shutil.which("protoc")
    if not protoc:
        h.fail("protoc not found (apt-get install protobuf-compiler, or scripts/install-deps)")
    proto_dir = os.environ.get("OTLP_PROTO_DIR")
    if proto_dir:
        h.log("OTLP: bodies decoded by protoc against the schema in %s" % proto_dir)
    else:
        h.log("OTLP: schema check skipped (set OTLP_PROTO_DIR to a checkout of "
              "opentelemetry-proto): protoc --decode_raw only")
    out = h.mkdtemp("otlp_out_")
    rdir = h.mkdtemp("otlp_recv_")
    rcv = Receiver(rdir, go, extra=["--otlp", "--protoc", protoc, "--partial", "1",
                                    "--unavailable", "1"])
    args = h.daemon_args(node, out, rate=20, rotate="1s", top=10) + [
        "--push", "http://127.0.0.1:%d" % rcv.port, "--push-format", "otlp",
        "--push-timeout", "3s", "--push-header-file", hfile, "--push-service", "fp-otlp",
        "--duration", "4s"]
    rc, _, se = h.run_daemon(args, env=NO_PROXY, timeout=60)
    rcv.stop()
    t.eq(rc, 0, "otlp: exit 0")
    t.eq(entries(rdir, "rejected.jsonl"), [], "otlp: the receiver refused no request")
    t.check(re.search(r"--push \[.*\]: the server answered HTTP 503; retrying", se),
            "otlp: a 503 is retried", se[-2000:])
    t.check("the server took" in se and "with a warning: fp-test: kept, but \\x1B[31mred" in se
            and "\x1b" not in se, "otlp: a partial success is logged, its text escaped",
            se[-2000:])
    ndir = os.path.join(out, h.sanitize_node(node.name))
    t.eq(sorted(os.listdir(os.path.join(ndir, "push-spool"))), [".pushed"],
         "otlp: the spool holds no profile at the end")
    acc = entries(rdir, "accepted.jsonl")
    final, partial, _ = h.output_files(out, node.name)
    t.eq(partial, [], "otlp: no partial files")
    t.check(len(final) >= 2, "otlp: several files finished (%d)" % len(final))
    t.eq(len(acc), len(final), "otlp: one request per finished file")
    t.eq(len({e["sha256"] for e in acc}), len(acc), "otlp: no request sent twice")
    t.eq(sorted({(e["content_encoding"], e["headers"].get("X-Scope-OrgID"),
                  e["headers"].get("Authorization")) for e in acc}),
         [("gzip", "fp-test", SECRET)], "otlp: gzip'd, with the header file's lines")
    t.check(SECRET not in se, "otlp: the header file's secret is in no log line")
    if not proto_dir:
        t.eq({e["schema"] for e in acc}, {"skipped"},
             "otlp: protoc --decode_raw reads every body (schema check skipped)")
        return
    t.eq({e["schema"] for e in acc}, {"checked"},
         "otlp: protoc --decode reads every body against the schema")
    host = node.name.split("@")[1]
    t.eq(sorted({tuple(sorted(e["resource"].items())) for e in acc}),
         [(("beam.node", node.name), ("host.name", host), ("service.name", "fp-otlp"))],
         "otlp: resource service.name (--push-service), host.name, beam.node")
    t.check(all(e["scope"][0] == "flame_profd" and e["scope"][1] for e in acc),
            "otlp: scope flame_profd and its version", str({tuple(e["scope"]) for e in acc}))
    shapes = {tuple((p["type"], p["unit"], p["period_type"], p["period_unit"], p["period"])
                    for p in e["profiles"]) for e in acc}
    t.eq(shapes, {(("samples", "count", "wall", "nanoseconds", 50000000),)},
         "otlp: one profile, samples/count, a period of 1/--rate of wall time")
    t.check(all(p["sample_attributes"] in ([], ["beam.process.status"])
                for e in acc for p in e["profiles"]),
            "otlp: samples carry the status attribute only")
    want = {}
    for path in final:
        ts = [smp["ts"] for smp in h.parse_perf(path).samples]
        want[(int(math.floor(min(ts))), int(math.ceil(max(ts))))] = path
    got = {}
    for e in acc:
        p = e["profiles"][0]
        start = p["time_unix_nano"] / 1e9
        got[(int(math.floor(start)), int(math.ceil(start + p["duration_nano"] / 1e9)))] = p
    t.eq(sorted(got), sorted(want), "otlp: each request's time range is its file's")
    for k in sorted(set(got) & set(want)):
        path = want[k]
        t.eq(got[k]["samples"], top_samples(path),
             "otlp: %s: the profile's total is flame_prof top's" % os.path.basename(path))
        t.eq(got[k]["stacks"], folded_by_function(path),
             "otlp: %s: its stacks resolve through the dictionary to flame_prof "
             "folded's" % os.path.basename(path))


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

    otlp_run(t, node, go, hfile)


if __name__ == "__main__":
    h.run(main)
