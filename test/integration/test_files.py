#!/usr/bin/env python3
"""Output files: nothing overwritten, nothing lost, nothing counted twice.

1. Links planted at the manifest's and the index's temporary names point
   at a victim file: the victim is untouched, the manifest a regular file.
2. A leftover partial whose finished name is taken: the finished file
   stays as it was, the leftover is recovered under another name, and the
   manifest lists each file once.
3. A leftover partial that is a zstd bomb (1 GiB of text in 40 KB): the
   daemon starts, sets it aside, and its memory stays small.
4. A finished file the index does not list (a kill between the rename and
   the index update): the next start lists it with its counts.
5. The output directory deleted while running: made again, the file
   being written carried over, the run ends 0 with its files there.
6. Every name a file could be finished under taken: the run exits 74
   with the file left under its partial name.
7. Kills before the first segment leave empty partials: the next start
   removes them, and keeps at most 8 set-aside leftovers, none empty.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

sys.dont_write_bytecode = True     # keep __pycache__ out of the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402


def manifest(d):
    with open(os.path.join(d, "manifest.json")) as f:
        return json.load(f)


# A pinned process is sampled right after the connect, with no selection
# to wait for: the file opens at once.
PINNED = ["fp_demo_sink"]


def run(node, out, *extra):
    """A run that ends (SIGTERM) once it has written samples."""
    args = h.daemon_args(node, out, top=5, name=PINNED, rate=20, every="1s") + list(extra)
    return h.run_daemon_until(args, lambda dm: dm.wait_samples(timeout=30))


def stamp(dt):
    return dt.strftime("%Y%m%dT%H%M%S.") + "%03dZ" % (dt.microsecond // 1000)


def samples_in(path):
    return len(h.parse_perf(path).samples)


def main(t):
    node = h.start_node(idle=100)
    node_s = h.sanitize_node(node.name)

    # 1. links at the temporary names
    out = h.mkdtemp("out_")
    d = os.path.join(out, node_s)
    os.makedirs(d)
    victim = os.path.join(h.mkdtemp("victim_"), "precious")
    with open(victim, "w") as f:
        f.write("precious\n")
    for tmp in (".manifest.json.tmp", "..flame_profd.index.tmp"):
        os.symlink(victim, os.path.join(d, tmp))
    rc, _, se = run(node, out)
    t.eq(rc, 0, "1: exit 0 with links planted")
    t.eq(open(victim).read(), "precious\n", "1: the file the links point at is untouched")
    t.check(not os.path.islink(os.path.join(d, "manifest.json")) and
            os.path.isfile(os.path.join(d, "manifest.json")),
            "1: manifest.json is a file of ours")

    # 2. a leftover whose finished name is taken
    final, _, _ = h.output_files(out, node.name)
    taken = final[0]
    before = open(taken, "rb").read()
    n_taken = samples_in(taken)
    partial = os.path.join(d, "." + os.path.basename(final[-1]) + ".partial")
    with open(final[-1], "rb") as src, open(partial, "wb") as dst:
        dst.write(src.read())
    os.rename(partial, os.path.join(d, "." + os.path.basename(taken) + ".partial"))
    rc, _, se = run(node, out)
    t.eq(rc, 0, "2: exit 0")
    t.eq(open(taken, "rb").read(), before, "2: the finished file is as it was")
    t.check(re.search(r"recovered .* left by an earlier run", se), "2: the leftover recovered",
            se[-1500:])
    names = [e["name"] for e in manifest(d)["files"]]
    t.eq(len(names), len(set(names)), "2: the manifest lists each file once")
    on_disk = sorted(os.path.basename(p) for p in h.output_files(out, node.name)[0])
    t.eq(sorted(names), on_disk, "2: the manifest lists exactly the files there")
    m = {e["name"]: e for e in manifest(d)["files"]}
    t.eq(m[os.path.basename(taken)]["samples"], n_taken,
         "2: the taken file keeps its own count")

    # 3. a zstd bomb left as a partial
    bomb = os.path.join(d, ".%s.%s.perf.zst.partial"
                        % (node_s, stamp(datetime.now(timezone.utc) - timedelta(hours=1))))
    with open(bomb, "wb") as f:
        subprocess.run("head -c 1073741824 /dev/zero | zstd -q -c", shell=True,
                       stdout=f, check=True)
    h.log("bomb: %d bytes" % os.path.getsize(bomb))
    dm = h.start_daemon(h.daemon_args(node, out, top=5, name=PINNED, rate=20, every="1s"))
    dm.wait_samples(timeout=30)
    hwm = 0
    with open("/proc/%d/status" % dm.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
    t.eq(dm.stop(), 0, "3: a bomb left behind: the daemon runs, exit 0")
    t.check(hwm < 128 << 20, "3: its memory stays small (peak %.1f MB)" % (hwm / 1e6))
    t.check(os.path.exists(bomb + ".unrecoverable"), "3: the bomb is set aside")

    # 4. a finished file the index does not list
    idx = os.path.join(d, ".flame_profd.index")
    lines = open(idx).read().splitlines()
    dropped_name = lines[-1].split()[0]
    with open(idx, "w") as f:
        f.write("\n".join(lines[:-1]) + "\n")
    rc, _, se = run(node, out)
    t.eq(rc, 0, "4: exit 0")
    m = {e["name"]: e for e in manifest(d)["files"]}
    t.check(dropped_name in m, "4: the unlisted file is in the manifest again")
    if dropped_name in m:
        t.eq(m[dropped_name]["samples"], samples_in(os.path.join(d, dropped_name)),
             "4: with the samples it holds")

    # 5. the output directory deleted while running
    out = h.mkdtemp("out_")
    d = os.path.join(out, node_s)
    dm = h.start_daemon(h.daemon_args(node, out, top=5, name=PINNED, rate=20, every="1s",
                                      rotate="30s"))
    dm.wait_samples(timeout=20)
    time.sleep(1.5)
    subprocess.run(["rm", "-rf", d], check=True)
    t_gone = time.time()
    dm.wait_log(r"output directory .* was deleted", timeout=10)
    # the second interval after the deletion is half a second past it
    dm.wait_samples(after=r"output directory .* was deleted", intervals_needed=2)
    rc = dm.stop()
    t.eq(rc, 0, "5: exit 0")
    final, partial, _ = h.output_files(out, node.name)
    t.check(len(final) == 1 and not partial, "5: the file is finished in the new directory")
    late = [s for f in final for s in h.parse_perf(f).samples if s["ts"] > t_gone + 0.5]
    t.check(len(late) > 10, "5: samples after the deletion are there (%d)" % len(late))
    written = re.search(r"stopped: (\d+) samples written", dm.read_stderr())
    t.check(written and int(written.group(1)) == sum(samples_in(f) for f in final),
            "5: the last line counts what the files hold")

    # 6. every name taken: the file cannot be finished. The names are
    # taken once the file being written has its name, from it on.
    out = h.mkdtemp("out_")
    d = os.path.join(out, node_s)
    dm = h.start_daemon(h.daemon_args(node, out, top=5, name=PINNED, rate=20, every="1s",
                                      verbose=True))
    line = dm.wait_log(r"writing .*\.partial", timeout=30)[0]
    name = re.search(r"/\.([^/]*)\.partial", line).group(1)
    ms = re.search(r"\.(\d{8}T\d{6})\.(\d{3})Z\.", name)
    first = datetime.strptime(ms.group(1), "%Y%m%dT%H%M%S").replace(
        tzinfo=timezone.utc) + timedelta(milliseconds=int(ms.group(2)))
    for k in range(1000):
        open(os.path.join(d, "%s.%s.perf.zst" % (node_s, stamp(first + timedelta(milliseconds=k)))),
             "w").close()
    rc = dm.stop()
    se = dm.read_stderr()
    t.eq(rc, 74, "6: every name taken: exit 74")
    t.check("could not be finished" in se, "6: saying so", se[-1500:])
    _, partial, _ = h.output_files(out, node.name)
    t.eq(len(partial), 1, "6: the file stays under its partial name")

    # 7. kills before the first segment
    out = h.mkdtemp("out_")
    d = os.path.join(out, node_s)
    for _ in range(12):
        dm = h.start_daemon(h.daemon_args(node, out, top=5, name=PINNED, rate=20,
                                          every="1s", verbose=True))
        dm.wait_log(r"writing .*\.partial", timeout=20)
        dm.send_signal(signal.SIGKILL)
        dm.wait()
    rc, _, se = run(node, out)
    t.eq(rc, 0, "7: exit 0 after the kills")
    left = [n for n in os.listdir(d) if n.endswith(".partial") or n.endswith(".unrecoverable")]
    aside = [n for n in left if n.endswith(".unrecoverable")]
    t.check(len(aside) <= 8, "7: at most 8 leftovers set aside (%d)" % len(aside))
    t.check(all(os.path.getsize(os.path.join(d, n)) > 0 for n in aside),
            "7: no empty leftover kept")


if __name__ == "__main__":
    h.run(main)
