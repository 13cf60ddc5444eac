#!/usr/bin/env python3
"""A local stand-in for a Pyroscope server's POST /ingest, for the
--push tests: it checks every request against the documented ingest API
(Grafana Pyroscope, docs/sources/configure-server/about-server-api.md,
"pprof format" and "Sample Type Configuration") and parses every profile
with Google's pprof (`go tool pprof -raw` and `-top`), answering 400 to
anything off the documented API.

    push-receiver.py --port PORT --out DIR [--go GO]

Prints "listening PORT" once it takes connections (PORT 0: a free one).
Each request taken is one JSON line in DIR/accepted.jsonl (name, from,
until, sampleRate, spyName, the profile's sample total as pprof reads
it, its sha256, the labels of its samples); each refused one a line in
DIR/rejected.jsonl with why. Ends on SIGTERM.

Checked, per the documented API:
  - POST to /ingest; the query holds name, from, until (required, UNIX
    seconds, from <= until), format=pprof, sampleRate (a positive whole
    number of Hz), spyName; nothing else but units and aggregationType;
  - name is APP{KEY=VALUE,...}: APP of letters, digits, '_', '-', '.';
    keys as Prometheus label names; values non-empty, without ',', '{',
    '}', '=';
  - Content-Type multipart/form-data with a boundary; the form holds a
    file field `profile` (gzip'd profile.proto) and optionally
    `sample_type_config` (JSON: per sample type units in samples,
    objects, bytes; aggregation sum or average; display-name a string;
    sampled a boolean) and `prev_profile`, nothing else;
  - every sample type the profile has is in sample_type_config;
  - go tool pprof reads the profile (-raw and -top).
"""
import argparse
import email.parser
import email.policy
import hashlib
import http.server
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.parse

APP_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ALLOWED_PARAMS = {"name", "from", "until", "format", "sampleRate", "spyName",
                  "units", "aggregationType"}
UNITS = {"samples", "objects", "bytes"}
AGGREGATIONS = {"sum", "average"}


class Bad(Exception):
    pass


def parse_name(name):
    m = re.match(r"^([^{}]*)\{(.*)\}$", name)
    if not m:
        raise Bad("name %r is not APP{LABELS}" % name)
    app, body = m.groups()
    if not APP_RE.match(app):
        raise Bad("application name %r" % app)
    labels = {}
    if body:
        for pair in body.split(","):
            k, eq, v = pair.partition("=")
            if not eq or not KEY_RE.match(k) or not v or re.search(r"[{}=,]", v):
                raise Bad("label %r in name %r" % (pair, name))
            if k in labels:
                raise Bad("label %r twice" % k)
            labels[k] = v
    return app, labels


def check_query(query):
    params = urllib.parse.parse_qs(query, keep_blank_values=True, strict_parsing=True)
    for k, v in params.items():
        if k not in ALLOWED_PARAMS:
            raise Bad("unknown query parameter %r" % k)
        if len(v) != 1:
            raise Bad("query parameter %r given %d times" % (k, len(v)))
    q = {k: v[0] for k, v in params.items()}
    for k in ("name", "from", "until"):
        if k not in q:
            raise Bad("required query parameter %r missing" % k)
    app, labels = parse_name(q["name"])
    if not re.match(r"^\d+$", q["from"]) or not re.match(r"^\d+$", q["until"]):
        raise Bad("from/until not UNIX seconds: %r %r" % (q["from"], q["until"]))
    if int(q["from"]) > int(q["until"]):
        raise Bad("from after until")
    if q.get("format") != "pprof":
        raise Bad("format %r (this receiver takes pprof)" % q.get("format"))
    if "sampleRate" in q and not re.match(r"^[1-9]\d*$", q["sampleRate"]):
        raise Bad("sampleRate %r" % q["sampleRate"])
    if "spyName" in q and not q["spyName"]:
        raise Bad("empty spyName")
    return q, app, labels


def parse_form(content_type, body):
    if not content_type or not content_type.startswith("multipart/form-data"):
        raise Bad("Content-Type %r, not multipart/form-data" % content_type)
    if "boundary=" not in content_type:
        raise Bad("multipart without a boundary")
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    if not msg.is_multipart():
        raise Bad("body is not multipart")
    fields = {}
    for part in msg.iter_parts():
        disp = part.get("Content-Disposition", "")
        if not disp.startswith("form-data"):
            raise Bad("part without Content-Disposition: form-data")
        name = part.get_param("name", header="content-disposition")
        filename = part.get_param("filename", header="content-disposition")
        if name not in ("profile", "prev_profile", "sample_type_config"):
            raise Bad("unknown form field %r" % name)
        if name in fields:
            raise Bad("form field %r twice" % name)
        if not filename:
            raise Bad("form field %r is not a file field" % name)
        fields[name] = part.get_payload(decode=True)
    if "profile" not in fields:
        raise Bad("no form field 'profile'")
    return fields


def check_config(raw):
    try:
        cfg = json.loads(raw)
    except ValueError as e:
        raise Bad("sample_type_config is not JSON: %s" % e)
    if not isinstance(cfg, dict) or not cfg:
        raise Bad("sample_type_config is not an object of sample types")
    for t, c in cfg.items():
        if not isinstance(c, dict):
            raise Bad("sample_type_config[%r] not an object" % t)
        for k in c:
            if k not in ("units", "aggregation", "display-name", "sampled"):
                raise Bad("sample_type_config[%r] has unknown key %r" % (t, k))
        if "units" in c and c["units"] not in UNITS:
            raise Bad("units %r" % c["units"])
        if "aggregation" in c and c["aggregation"] not in AGGREGATIONS:
            raise Bad("aggregation %r" % c["aggregation"])
        if "display-name" in c and not isinstance(c["display-name"], str):
            raise Bad("display-name not a string")
        if "sampled" in c and not isinstance(c["sampled"], bool):
            raise Bad("sampled not a boolean")
    return cfg


def pprof(go, env, args):
    p = subprocess.run([go, "tool", "pprof"] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def read_profile(go, env, data):
    if data[:2] != b"\x1f\x8b":
        raise Bad("profile is not gzip'd")
    with tempfile.NamedTemporaryFile(suffix=".pb.gz", dir=env["HOME"]) as f:
        f.write(data)
        f.flush()
        rc, raw, err = pprof(go, env, ["-raw", f.name])
        if rc != 0:
            raise Bad("go tool pprof -raw: %s" % err.strip())
        rc, top, err = pprof(go, env, ["-top", f.name])
        if rc != 0:
            raise Bad("go tool pprof -top: %s" % err.strip())
    head, _, rest = raw.partition("\nSamples:\n")
    types = [t.split("/")[0].replace("[dflt]", "") for t in rest.split("\n")[0].split()]
    labels = sorted(set(re.findall(r"(\w+):\[", rest.split("Locations")[0])))
    m = re.search(r"of (\d+) total", top)
    total = int(m.group(1)) if m else None
    if total is None and re.search(r"Showing nodes accounting for 0, 0% of 0 total", top):
        total = 0
    if total is None:
        raise Bad("go tool pprof -top shows no total")
    return types, labels, total


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, code, text):
        body = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def record(self, fname, entry):
        with self.server.lock:
            with open(os.path.join(self.server.out, fname), "a") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")

    def do_GET(self):
        self.answer(405, "only POST /ingest")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        try:
            if self.headers.get("Transfer-Encoding"):
                raise Bad("chunked body (no Content-Length)")
            if url.path != "/ingest":
                raise Bad("path %r, not /ingest" % url.path)
            q, app, labels = check_query(url.query)
            fields = parse_form(self.headers.get("Content-Type"), body)
            cfg = check_config(fields["sample_type_config"]) \
                if "sample_type_config" in fields else {}
            types, plabels, total = read_profile(self.server.go, self.server.env,
                                                 fields["profile"])
            missing = [t for t in types if cfg and t not in cfg]
            if missing:
                raise Bad("sample types %r not in sample_type_config" % missing)
        except Bad as e:
            self.record("rejected.jsonl", {"path": self.path, "why": str(e)})
            self.answer(400, "off the /ingest API: %s" % e)
            return
        self.record("accepted.jsonl", {
            "app": app, "labels": labels, "from": int(q["from"]),
            "until": int(q["until"]), "sampleRate": q.get("sampleRate"),
            "spyName": q.get("spyName"), "types": types,
            "sample_labels": plabels, "samples": total,
            "sha256": hashlib.sha256(fields["profile"]).hexdigest(),
            "profile_bytes": len(fields["profile"]), "request_bytes": len(body),
            "headers": {k: v for k, v in self.headers.items()
                        if k.lower() in ("authorization", "x-scope-orgid")},
        })
        self.answer(200, "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--go", default="go")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    home = os.path.join(a.out, "home")
    os.makedirs(home, exist_ok=True)
    http.server.ThreadingHTTPServer.allow_reuse_address = True
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.out = a.out
    srv.go = a.go
    srv.lock = threading.Lock()
    # go and pprof keep caches and fetched profiles under $HOME
    srv.env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "gocache"),
                   PPROF_TMPDIR=home)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    print("listening %d" % srv.server_address[1], flush=True)
    srv.serve_forever()
    srv.server_close()


if __name__ == "__main__":
    sys.exit(main())
