#!/usr/bin/env python3
"""A local stand-in for a Pyroscope server's POST /ingest, for the
--push tests: it checks every request against the documented ingest API
(Grafana Pyroscope, docs/sources/configure-server/about-server-api.md,
"pprof format" and "Sample Type Configuration") and parses every profile
with Google's pprof (`go tool pprof -raw` and `-top`), answering 400 to
anything off the documented API.

    push-receiver.py --port PORT --out DIR [--go GO]
    push-receiver.py --otlp --port PORT --out DIR [--protoc PROTOC]
                     [--proto-dir DIR] [--partial N] [--unavailable N]

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

With --otlp it stands for an OTLP/HTTP receiver of profiles instead
(the OTLP specification, "OTLP/HTTP"; opentelemetry-proto's
profiles_service_http.yaml) and checks:
  - POST to /v1development/profiles; Content-Type application/x-protobuf
    (the binary encoding); Content-Encoding gzip or none; a body;
  - with --proto-dir (or $OTLP_PROTO_DIR: a checkout of
    github.com/open-telemetry/opentelemetry-proto) the body decodes with
    `protoc --decode=opentelemetry.proto.collector.profiles.v1development.
    ExportProfilesServiceRequest` against its official .proto files, and
    what protoc decodes is checked: one resource with string attributes,
    one scope, profiles with a sample type and a period, every dictionary
    table present with its zero value at index 0 ("" for strings), every
    index in range, no string, function or stack twice; each accepted
    line holds the resource attributes, the scope, the sample total and
    the stacks (root first, ';'-joined function names) with their counts,
    "schema": "checked";
  - without it, `protoc --decode_raw` reads the body (well-formed
    protobuf) and it holds fields 1 (resource_profiles) and 2
    (dictionary); "schema": "skipped", and the line "schema check
    skipped" is printed to standard error once.
It answers 200 with an ExportProfilesServiceResponse: empty, or for the
first N requests (--partial N) a partial_success whose error_message
holds an escape character; the first N requests of --unavailable N get
503 with Retry-After: 1 instead, and are not recorded as accepted.
"""
import argparse
import codecs
import gzip
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


OTLP_PATH = "/v1development/profiles"
OTLP_REQUEST = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"
OTLP_SERVICE_PROTO = "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto"


def parse_text_format(text):
    """protoc's text output as nested dicts of lists: {field: [value or
    dict, ...]}; strings as str (decoded from protoc's escapes), numbers
    as int."""
    root = {}
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            if not stack:
                raise Bad("protoc output: unbalanced braces")
            continue
        if line.endswith("{"):
            child = {}
            stack[-1].setdefault(line[:-1].strip(), []).append(child)
            stack.append(child)
            continue
        key, sep, val = line.partition(": ")
        if not sep:
            raise Bad("protoc output: line %r" % line)
        if val.startswith('"'):
            val = codecs.escape_decode(val[1:-1].encode("latin-1"))[0].decode("utf-8")
        else:
            try:
                val = int(val)
            except ValueError:
                pass
        stack[-1].setdefault(key, []).append(val)
    if len(stack) != 1:
        raise Bad("protoc output: unbalanced braces")
    return root


def one(msg, key, default=None):
    v = msg.get(key, [])
    if len(v) > 1:
        raise Bad("%s given %d times" % (key, len(v)))
    return v[0] if v else default


def any_string(kv):
    value = one(kv, "value", {})
    s = one(value, "string_value")
    if s is None:
        raise Bad("attribute %r is not a string value" % one(kv, "key"))
    return s


def check_otlp(req):
    """The decoded request's checks; what the accepted line records."""
    rps = req.get("resource_profiles", [])
    d = one(req, "dictionary")
    if len(rps) != 1 or d is None:
        raise Bad("%d resource_profiles, dictionary %s" % (len(rps), d is not None))
    strings = d.get("string_table", [])
    if not strings or strings[0] != "":
        raise Bad("string_table[0] is not \"\"")
    if len(set(strings)) != len(strings):
        raise Bad("a string twice in string_table")
    tables = {}
    for t in ("mapping_table", "location_table", "function_table", "link_table",
              "attribute_table", "stack_table"):
        tables[t] = d.get(t, [])
        if not tables[t]:
            raise Bad("%s is empty (its zero value must be at index 0)" % t)
        if t != "link_table" and tables[t][0] != {}:
            raise Bad("%s[0] is not the zero value: %r" % (t, tables[t][0]))

    def s(i, what):
        if not isinstance(i, int) or not 0 <= i < len(strings):
            raise Bad("%s: string index %r out of range" % (what, i))
        return strings[i]

    def at(t, i):
        if not isinstance(i, int) or not 0 <= i < len(tables[t]):
            raise Bad("%s index %r out of range" % (t, i))
        return tables[t][i]

    fns = [(one(f, "name_strindex", 0), one(f, "filename_strindex", 0))
           for f in tables["function_table"][1:]]
    if len(set(fns)) != len(fns):
        raise Bad("a function twice in function_table")
    stacks = [tuple(st.get("location_indices", [])) for st in tables["stack_table"][1:]]
    if len(set(stacks)) != len(stacks):
        raise Bad("a stack twice in stack_table")
    for m in tables["mapping_table"][1:]:
        s(one(m, "filename_strindex", 0), "mapping filename")

    def frames(stack_index):
        names = []
        for li in at("stack_table", stack_index).get("location_indices", []):
            loc = at("location_table", li)
            at("mapping_table", one(loc, "mapping_index", 0))
            lines = loc.get("line", []) or loc.get("lines", [])
            if len(lines) != 1:
                raise Bad("a location of %d lines" % len(lines))
            f = at("function_table", one(lines[0], "function_index", 0))
            names.append(s(one(f, "name_strindex", 0), "function name"))
        return ";".join(reversed(names))

    rp = rps[0]
    attrs = {}
    for kv in one(rp, "resource", {}).get("attributes", []):
        k = one(kv, "key")
        if k in attrs:
            raise Bad("resource attribute %r twice" % k)
        attrs[k] = any_string(kv)
    sps = rp.get("scope_profiles", [])
    if len(sps) != 1:
        raise Bad("%d scope_profiles" % len(sps))
    scope = one(sps[0], "scope", {})
    profiles = []
    for pr in sps[0].get("profiles", []):
        st = one(pr, "sample_type", {})
        pt = one(pr, "period_type", {})
        total, folded, skeys = 0, {}, set()
        for smp in pr.get("samples", []):
            vals = smp.get("values", [])
            if len(vals) != 1:
                raise Bad("a sample of %d values" % len(vals))
            keys = []
            for ai in smp.get("attribute_indices", []):
                a = at("attribute_table", ai)
                keys.append(s(one(a, "key_strindex", 0), "attribute key"))
                any_string(dict(a, key=[keys[-1]]))
            if len(set(keys)) != len(keys):
                raise Bad("a sample with an attribute key twice")
            skeys.update(keys)
            total += vals[0]
            stack = frames(one(smp, "stack_index", 0))
            folded[stack] = folded.get(stack, 0) + vals[0]
        profiles.append({
            "type": s(one(st, "type_strindex", 0), "sample type"),
            "unit": s(one(st, "unit_strindex", 0), "sample unit"),
            "period_type": s(one(pt, "type_strindex", 0), "period type"),
            "period_unit": s(one(pt, "unit_strindex", 0), "period unit"),
            "period": one(pr, "period", 0),
            "time_unix_nano": one(pr, "time_unix_nano", 0),
            "duration_nano": one(pr, "duration_nano", 0),
            "samples": total, "stacks": folded, "sample_attributes": sorted(skeys),
        })
    if not profiles:
        raise Bad("no profile")
    return {"resource": attrs, "scope": [one(scope, "name"), one(scope, "version")],
            "profiles": profiles}


def decode_otlp(srv, body):
    if srv.proto_dir:
        p = subprocess.run([srv.protoc, "--decode=" + OTLP_REQUEST, "-I", srv.proto_dir,
                            OTLP_SERVICE_PROTO], input=body, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if p.returncode != 0:
            raise Bad("protoc --decode: %s" % p.stderr.decode("utf-8", "replace").strip())
        entry = check_otlp(parse_text_format(p.stdout.decode("utf-8")))
        entry["schema"] = "checked"
        return entry
    p = subprocess.run([srv.protoc, "--decode_raw"], input=body, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        raise Bad("protoc --decode_raw: %s" % p.stderr.decode("utf-8", "replace").strip())
    top = set(re.findall(r"^(\d+) ", p.stdout.decode("utf-8", "replace"), re.M))
    if top != {"1", "2"}:
        raise Bad("top-level fields %s, not 1 and 2" % sorted(top))
    return {"schema": "skipped"}


def otlp_response(message):
    """An ExportProfilesServiceResponse, written by hand: partial_success
    (1) holding error_message (2)."""
    def ld(field, data):
        n, v = len(data), bytearray()
        while True:
            b = n & 0x7f
            n >>= 7
            v.append(b | (0x80 if n else 0))
            if not n:
                break
        return bytes([field << 3 | 2]) + bytes(v) + data
    return ld(1, ld(2, message.encode())) if message else b""


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
        if self.server.otlp:
            self.otlp(url, body)
            return
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


    def otlp(self, url, body):
        srv = self.server
        try:
            if self.headers.get("Transfer-Encoding"):
                raise Bad("chunked body (no Content-Length)")
            if url.path != OTLP_PATH or url.query:
                raise Bad("path %r, not %s" % (self.path, OTLP_PATH))
            ctype = self.headers.get("Content-Type")
            if ctype != "application/x-protobuf":
                raise Bad("Content-Type %r, not application/x-protobuf" % ctype)
            enc = self.headers.get("Content-Encoding")
            if enc not in (None, "gzip"):
                raise Bad("Content-Encoding %r" % enc)
            if not body:
                raise Bad("empty body")
            raw = body
            if enc == "gzip":
                try:
                    raw = gzip.decompress(body)
                except (OSError, EOFError) as e:
                    raise Bad("Content-Encoding gzip, body not gzip: %s" % e)
            entry = decode_otlp(srv, raw)
        except Bad as e:
            self.record("rejected.jsonl", {"path": self.path, "why": str(e)})
            self.answer(400, "off OTLP/HTTP: %s" % e)
            return
        with srv.lock:
            srv.count += 1
            n = srv.count
        if n <= srv.unavailable:
            self.send_response(503)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        entry.update({
            "format": "otlp", "content_encoding": enc,
            "sha256": hashlib.sha256(raw).hexdigest(),
            "profile_bytes": len(raw), "request_bytes": len(body),
            "headers": {k: v for k, v in self.headers.items()
                        if k.lower() in ("authorization", "x-scope-orgid")},
        })
        self.record("accepted.jsonl", entry)
        resp = otlp_response("fp-test: kept, but \x1b[31mred" if n - srv.unavailable <= srv.partial
                             else "")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(resp)))
        self.end_headers()
        self.wfile.write(resp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--go", default="go")
    ap.add_argument("--otlp", action="store_true")
    ap.add_argument("--protoc", default="protoc")
    ap.add_argument("--proto-dir", default=os.environ.get("OTLP_PROTO_DIR") or None)
    ap.add_argument("--partial", type=int, default=0)
    ap.add_argument("--unavailable", type=int, default=0)
    a = ap.parse_args()
    if a.otlp and a.proto_dir and not os.path.exists(os.path.join(a.proto_dir,
                                                                   OTLP_SERVICE_PROTO)):
        ap.error("--proto-dir %s holds no %s" % (a.proto_dir, OTLP_SERVICE_PROTO))
    os.makedirs(a.out, exist_ok=True)
    home = os.path.join(a.out, "home")
    os.makedirs(home, exist_ok=True)
    http.server.ThreadingHTTPServer.allow_reuse_address = True
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.out = a.out
    srv.go = a.go
    srv.otlp = a.otlp
    srv.protoc = a.protoc
    srv.proto_dir = a.proto_dir
    srv.partial = a.partial
    srv.unavailable = a.unavailable
    srv.count = 0
    srv.lock = threading.Lock()
    # go and pprof keep caches and fetched profiles under $HOME
    srv.env = dict(os.environ, HOME=home, GOCACHE=os.path.join(home, "gocache"),
                   PPROF_TMPDIR=home)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    print("listening %d" % srv.server_address[1], flush=True)
    if a.otlp and not a.proto_dir:
        print("push-receiver: OTLP schema check skipped (no --proto-dir or OTLP_PROTO_DIR): "
              "protoc --decode_raw only", file=sys.stderr, flush=True)
    srv.serve_forever()
    srv.server_close()


if __name__ == "__main__":
    sys.exit(main())
