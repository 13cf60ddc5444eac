"""What the browser tests share: where flame_prof, node and chromium are,
the skip (77) when one is missing, and running a playwright-core driver
script with a JSON config (its last stdout line is its JSON result)."""
import json
import os
import shutil
import subprocess
import sys

FLAME_PROF = os.environ.get("FLAME_PROF") or "build/flame_prof/flame_prof"
BUILD = os.environ.get("FP_BUILD_ROOT") or "build"
GOLDEN = os.path.join(os.environ.get("FP_GOLDEN_DIR") or "test/golden", "flame_prof")
NODE_DIR = os.environ.get("FP_NODE_DIR") or os.path.join(BUILD, "node")
CHROMIUM = os.environ.get("FP_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def require(modules):
    """Skip unless flame_prof, chromium, node and the npm modules are there."""
    if not os.path.exists(FLAME_PROF):
        skip("flame_prof not built at " + FLAME_PROF)
    if not os.access(CHROMIUM, os.X_OK):
        skip("no chromium (Debian package 'chromium'; or set FP_CHROMIUM)")
    if not shutil.which("node"):
        skip("no node (Debian package 'nodejs')")
    for mod in modules:
        if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", mod)):
            skip("no %s in %s/node_modules (scripts/install-node-deps)" % (mod, NODE_DIR))


def run_driver(tmp, script, cfg):
    """Run the driver; returns (result dict or None, stderr tail)."""
    js = os.path.join(tmp, "drive.js")
    with open(js, "w") as f:
        f.write(script)
    cfg = dict(cfg, chromium=CHROMIUM, args=CHROMIUM_ARGS,
               profile=os.path.join(tmp, "profile"))
    env = dict(os.environ, FP_NODE_DIR=os.path.abspath(NODE_DIR))
    p = subprocess.run(["node", js, json.dumps(cfg)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=150)
    if p.returncode != 0:
        return None, p.stderr.decode()[-2000:]
    return json.loads(p.stdout.decode().strip().splitlines()[-1]), ""
