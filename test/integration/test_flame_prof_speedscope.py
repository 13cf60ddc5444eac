#!/usr/bin/env python3
"""flame_prof speedscope output opened by speedscope itself (the npm
package's release build) in headless Chromium: the file is fetched
through #profileURL= from a private HTTP server on 127.0.0.1, must load
without an import error, list its profiles (one per process by default,
in seconds; per status with --per-status), and its frames must show in
speedscope's Sandwich table. flame_prof pprof's profile opens in
speedscope's pprof importer, its Sandwich totals top's. Screenshots go
to $FP_BUILD_ROOT/flame_prof-browser/.

Skips (77) when chromium, node, playwright-core or speedscope is missing:
  apt-get install chromium nodejs npm
  cd build && mkdir -p node && cd node && npm install playwright-core speedscope
(PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1; FP_NODE_DIR overrides build/node).
"""
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import BUILD, FLAME_PROF, GOLDEN, NODE_DIR, require, run_driver, skip  # noqa: E402

SCRIPT = r"""
const path = require('path');
const { chromium } = require(path.join(process.env.FP_NODE_DIR, 'node_modules', 'playwright-core'));
const cfg = JSON.parse(process.argv[2]);

(async () => {
  const out = { errors: [], runs: [] };
  const ctx = await chromium.launchPersistentContext(cfg.profile, {
    executablePath: cfg.chromium, headless: true, args: cfg.args,
    viewport: { width: 1400, height: 900 } });
  try {
    for (const run of cfg.runs) {
      /* a page per file: a new #profileURL= alone does not reload */
      const page = await ctx.newPage();
      page.on('pageerror', e => out.errors.push(String(e)));
      page.on('requestfailed', q => out.errors.push('request failed: ' + q.url()));
      page.on('dialog', d => { out.errors.push('dialog: ' + d.message()); d.dismiss(); });
      const r = { name: run.name };
      await page.goto(cfg.base + '/index.html#profileURL=' +
                      encodeURIComponent(cfg.base + '/' + run.file));
      /* loaded: the document is named after the file */
      let title = '';
      for (let i = 0; i < 120 && !title.includes(run.title); i++) {
        await page.waitForTimeout(250);
        title = await page.title();
      }
      r.title = title;
      await page.waitForTimeout(500);
      r.body = await page.evaluate(() => document.title + '\n' + document.body.innerText);
      r.canvases = await page.evaluate(() => Array.from(document.querySelectorAll('canvas'))
        .filter(c => c.width > 0 && c.height > 0).length);
      await page.screenshot({ path: path.join(cfg.shots, run.name + '-time-order.png') });
      if (run.picker) {
        /* the profile picker lists every profile of the file */
        await page.getByText(run.picker).first().click();
        await page.waitForTimeout(500);
        r.picker = await page.evaluate(() => document.body.innerText);
        await page.screenshot({ path: path.join(cfg.shots, run.name + '-profiles.png') });
        await page.keyboard.press('Escape');
        await page.waitForTimeout(250);
      }
      /* the Sandwich view lists every function as text */
      await page.getByText('Sandwich').first().click();
      await page.waitForTimeout(500);
      r.sandwich = await page.evaluate(() => document.body.innerText);
      await page.screenshot({ path: path.join(cfg.shots, run.name + '-sandwich.png') });
      await page.close();
      out.runs.push(r);
    }
  } finally {
    await ctx.close();
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(2); });
"""

failures = []


def check(cond, label, detail=""):
    print(("ok   " if cond else "FAIL ") + label + ("" if cond or not detail else "\n     " + str(detail)[:1500]))
    if not cond:
        failures.append(label)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    release = os.path.join(NODE_DIR, "node_modules", "speedscope", "dist", "release")
    require(["playwright-core", "speedscope"])
    if not os.path.exists(os.path.join(release, "index.html")):
        skip("speedscope package without dist/release/index.html")

    shots = os.path.abspath(os.path.join(BUILD, "flame_prof-browser"))
    os.makedirs(shots, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="fp-speedscope-")
    server = None
    try:
        site = os.path.join(tmp, "site")
        shutil.copytree(release, site)
        subprocess.run([FLAME_PROF, "speedscope", "--profiles", "all",
                        "-o", os.path.join(site, "demo.json"),
                        os.path.join(GOLDEN, "demo.perf")], check=True)
        # the default: a profile per process on a time axis in seconds
        proc_dir = os.path.join(site, "proc")
        os.makedirs(proc_dir)
        shutil.copy(os.path.join(GOLDEN, "demo.perf"), os.path.join(proc_dir, "procs.perf"))
        subprocess.run([FLAME_PROF, "speedscope", "-o", os.path.join(site, "procs.json"),
                        os.path.join(proc_dir, "procs.perf")], check=True)
        subprocess.run([FLAME_PROF, "speedscope", "--per-status", "-w", "memory_delta",
                        "-o", os.path.join(site, "edge.json"),
                        os.path.join(GOLDEN, "edge.perf")], check=True)
        # flame_prof pprof, opened by speedscope's own pprof importer
        subprocess.run([FLAME_PROF, "pprof", "-o", os.path.join(site, "demo.pb.gz"),
                        os.path.join(GOLDEN, "demo.perf")], check=True)
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(QuietHandler, directory=site))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = "http://127.0.0.1:%d" % server.server_address[1]

        cfg = {"base": base, "shots": shots,
               "runs": [{"name": "speedscope-demo", "file": "demo.json", "title": "demo.perf"},
                        {"name": "speedscope-procs", "file": "procs.json", "title": "procs.perf",
                         "picker": "fp_demo_busy <0.87.0>"},
                        {"name": "speedscope-edge", "file": "edge.json", "title": "edge.perf"},
                        {"name": "speedscope-pprof", "file": "demo.pb.gz", "title": "demo.pb.gz"}]}
        r, err = run_driver(tmp, SCRIPT, cfg)
        if r is None:
            check(False, "browser driver ran", err)
            return 1
        check(r["errors"] == [], "no script errors or alerts", r["errors"])
        demo, procs, edge, pprof = r["runs"]
        check("demo.perf" in demo["body"] and demo["canvases"] > 0,
              "demo: loaded and drawn", demo["body"][:500])
        for fn in ["lists:foldl_1/3", "fp_demo:deep/2", "gen_server:loop/7",
                   "fp_demo:'fp\\x2Bdemo\\x3Bsemi\\x27q\\x5C'/1", "running", "waiting"]:
            check(fn in demo["sandwich"], "demo: %s in the Sandwich table" % fn,
                  demo["sandwich"][:1500])
        # 14 processes, the one of the most samples shown first; its
        # Sandwich times are seconds (speedscope formats them "1.23s")
        check("fp_demo_busy <0.87.0>" in procs["body"] and "9/14" in procs["body"],
              "procs: one profile per process, the busiest active", procs["body"][:500])
        check(re.search(r"\b\d+\.\d\ds\b", procs["sandwich"]) is not None and
              "fp_demo:busy_loop/1" in procs["sandwich"],
              "procs: the Sandwich table in seconds", procs["sandwich"][:1500])
        for name in ["fp_demo_sink <0.96.0>", "<0.89.0> fp_demo:busy_loop/1",
                     "net_kernel <0.61.0>", "<0.2101.0> inet_tcp_dist:do_accept/7"]:
            check(name in procs.get("picker", ""), "procs: %s in the profile picker" % name,
                  procs.get("picker", "")[:1500])
        check("edge.perf" in edge["body"], "edge: loaded")
        # the heaviest profile (exiting, 10000 bytes) is shown first; 7
        # statuses have samples of non-zero memory_delta: 6 profiles
        check("exiting" in edge["body"] and "1/6" in edge["body"],
              "edge: one profile per status, the heaviest active", edge["body"][:500])
        check("lists:foldl_1/3:1270" in edge["sandwich"] and "[+memory_delta]" in edge["sandwich"],
              "edge: frames and the sign frame in the Sandwich table", edge["sandwich"][:1500])
        check("demo.pb.gz" in pprof["title"] and pprof["canvases"] > 0,
              "pprof: speedscope's pprof importer opened it", pprof["body"][:500])
        for fn in ["lists:foldl_1/3", "fp_demo:deep/2", "gen_server:loop/7",
                   "fp_demo:'fp\\x2Bdemo\\x3Bsemi\\x27q\\x5C'/1"]:
            check(fn in pprof["sandwich"], "pprof: %s in the Sandwich table" % fn,
                  pprof["sandwich"][:1500])
        # top's TOTAL and SELF of fp_demo:deep/2 (test/golden/flame_prof/demo.top)
        check(re.search(r"21 \(58%\)\s+4 \(11%\)\s+fp_demo:deep/2\b", pprof["sandwich"]),
              "pprof: speedscope's total and self of fp_demo:deep/2 are top's (21, 4)",
              pprof["sandwich"][:1500])
        for run in ["speedscope-demo", "speedscope-procs", "speedscope-edge", "speedscope-pprof"]:
            pth = os.path.join(shots, run + "-sandwich.png")
            check(os.path.exists(pth) and os.path.getsize(pth) > 1000, "screenshot " + pth)
    finally:
        if server:
            server.shutdown()
            server.server_close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
