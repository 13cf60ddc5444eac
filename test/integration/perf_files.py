"""flame_profd's output files as the tests read them: their names and a
strict parser of the perf-script grammar (docs/FORMAT.md). The harness
re-exports every public name; tests use them as harness.NAME.
"""

import calendar
import os
import re
import subprocess
import time

STATUSES = ("running", "runnable", "waiting", "garbage_collecting",
            "suspended", "exiting", "cpu", "traced")
METRICS = ("reductions", "memory", "message_queue_len", "total_heap_size",
           "heap_size", "stack_size", "binary_bytes", "minor_gcs")


# --------------------------------------------------------------------------
# output files

NAME_OK = re.compile(r"[^A-Za-z0-9._@-]")
FINAL_RE = re.compile(r"^(?P<node>[A-Za-z0-9._@-]+)\.(?P<stamp>\d{8}T\d{6}\.\d{3})Z\.perf(?P<comp>\.gz|\.zst)?$")
PARTIAL_RE = re.compile(r"^\.(?P<node>[A-Za-z0-9._@-]+)\.(?P<stamp>\d{8}T\d{6}\.\d{3})Z\.perf(\.gz|\.zst)?\.partial$")
# bookkeeping the daemon keeps beside the files
META_FILES = {"manifest.json", ".flame_profd.index", ".flame_profd.lock",
              ".flame_profd.reserve", ".flame_profd.captures"}


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
IDLE_FIELD = "idle: swapper/cpu_idle"
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
            # docs/FORMAT.md "Idle samples"
            cur["idle"] = bool(rest) and rest[0] == IDLE_FIELD
            if cur["idle"]:
                rest = rest[1:]
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
    idle (the event line ends in the idle field),
    frames [names, leaf first], frame_files, frame_addrs, line."""
    return parse_perf(path).samples
