#!/usr/bin/env python3
"""flame_prof's SVGs in a real browser: the flame graph and the heat map
opened in headless Chromium (driven by playwright-core, never a downloaded
browser), checking that frames render, hover fills the details line, click
zooms and Reset Zoom restores, search highlights and reports the matched
share, the ?s= parameter searches on load, and the heat map's cells
hover and select a range. No script error may occur. Screenshots go to
$FP_BUILD_ROOT/flame_prof-browser/.

Skips (77) when chromium, node or playwright-core is missing:
  apt-get install chromium nodejs npm
  cd build && mkdir -p node && cd node && npm install playwright-core
(PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1; FP_NODE_DIR overrides build/node).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import BUILD, FLAME_PROF, GOLDEN, require, run_driver  # noqa: E402

SCRIPT = r"""
const path = require('path');
const { chromium } = require(path.join(process.env.FP_NODE_DIR, 'node_modules', 'playwright-core'));
const cfg = JSON.parse(process.argv[2]);

async function center(page, selector, index) {
  return page.evaluate(([sel, i]) => {
    const el = document.querySelectorAll(sel)[i];
    const r = el.getBoundingClientRect();
    return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
  }, [selector, index]);
}

(async () => {
  const out = { errors: [] };
  const ctx = await chromium.launchPersistentContext(cfg.profile, {
    executablePath: cfg.chromium, headless: true, args: cfg.args,
    viewport: { width: 1300, height: 900 } });
  try {
    const page = await ctx.newPage();
    page.on('pageerror', e => out.errors.push(String(e)));
    page.on('console', m => { if (m.type() === 'error') out.errors.push(m.text()); });

    /* flame graph */
    await page.goto('file://' + cfg.svg);
    await page.waitForFunction(() => typeof frames !== 'undefined' && frames.length > 0);
    out.frames = await page.evaluate(() => frames.length);
    out.rendered = await page.evaluate(() => Array.from(document.querySelectorAll('g.f rect'))
      .filter(r => r.getBoundingClientRect().width > 0).length);
    out.fontOk = await page.evaluate(() => getComputedStyle(document.querySelector('g.f text')).fontSize);
    await page.screenshot({ path: path.join(cfg.shots, 'flamegraph.png') });

    /* hover: the details line */
    const hoverIndex = await page.evaluate(n => frames.findIndex(g => g.fpName === n), cfg.hover);
    let p = await center(page, 'g.f rect', hoverIndex);
    await page.mouse.move(p.x, p.y);
    out.details = await page.evaluate(() => document.getElementById('details').textContent);

    /* click to zoom */
    const zi = await page.evaluate(n => frames.findIndex(g => g.fpName === n), cfg.zoom);
    p = await center(page, 'g.f rect', zi);
    await page.mouse.click(p.x, p.y);
    out.zoom = await page.evaluate(i => {
      const g = frames[i], r = g.querySelector('rect');
      return { width: +r.getAttribute('width'), x: +r.getAttribute('x'),
               hidden: frames.filter(f => f.classList.contains('hide')).length,
               parents: frames.filter(f => f.classList.contains('parent')).length,
               unzoomShown: !document.getElementById('unzoom').classList.contains('hide'),
               label: g.querySelector('text').textContent,
               rootLabel: frames[0].querySelector('text').textContent };
    }, zi);
    await page.screenshot({ path: path.join(cfg.shots, 'flamegraph-zoomed.png') });
    p = await center(page, '#unzoom', 0);
    await page.mouse.click(p.x, p.y);
    out.unzoom = await page.evaluate(i => ({
      width: +frames[i].querySelector('rect').getAttribute('width'),
      v: frames[i].fpV,
      hidden: frames.filter(f => f.classList.contains('hide')).length,
      unzoomShown: !document.getElementById('unzoom').classList.contains('hide') }), zi);

    /* search through the prompt */
    page.once('dialog', d => d.accept(cfg.search));
    p = await center(page, '#search', 0);
    await page.mouse.click(p.x, p.y);
    await page.waitForFunction(() => !document.getElementById('matched').classList.contains('hide'));
    out.search = await page.evaluate(() => ({
      matched: document.getElementById('matched').textContent,
      frames: document.querySelectorAll('g.f.match').length,
      purple: Array.from(document.querySelectorAll('g.f.match rect'))
        .every(r => getComputedStyle(r).fill === 'rgb(230, 0, 230)'),
      button: document.getElementById('search').textContent }));
    await page.screenshot({ path: path.join(cfg.shots, 'flamegraph-search.png') });
    await page.keyboard.press('Escape');
    out.searchReset = await page.evaluate(() => document.querySelectorAll('g.f.match').length);

    /* ?s= searches on load */
    await page.goto('file://' + cfg.svg + '?s=' + encodeURIComponent(cfg.search));
    await page.waitForFunction(() => typeof frames !== 'undefined' && frames.length > 0);
    out.urlSearch = await page.evaluate(() => document.getElementById('matched').textContent);

    /* heat map */
    await page.goto('file://' + cfg.heatmap);
    await page.waitForFunction(() => typeof T0 !== 'undefined' && T0 > 0);
    out.cells = await page.evaluate(() => Array.from(document.querySelectorAll('rect.c'))
      .filter(r => r.getBoundingClientRect().width > 0).length);
    p = await center(page, 'rect.c', 0);
    await page.mouse.move(p.x, p.y);
    out.cellDetails = await page.evaluate(() => document.getElementById('details').textContent);
    await page.mouse.click(p.x, p.y);
    const n = await page.evaluate(() => document.querySelectorAll('rect.c').length);
    p = await center(page, 'rect.c', n - 1);
    await page.mouse.click(p.x, p.y);
    out.range = await page.evaluate(() => document.getElementById('details').textContent);
    out.selected = await page.evaluate(() => document.querySelectorAll('rect.sel').length);
    await page.screenshot({ path: path.join(cfg.shots, 'heatmap.png') });
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


def main():
    require(["playwright-core"])

    shots = os.path.join(BUILD, "flame_prof-browser")
    os.makedirs(shots, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="fp-browser-")
    try:
        svg = os.path.join(tmp, "demo.svg")
        heat = os.path.join(tmp, "heat.svg")
        subprocess.run([FLAME_PROF, "svg", "--minwidth", "0", "-o", svg,
                        os.path.join(GOLDEN, "demo.perf")], check=True)
        subprocess.run([FLAME_PROF, "heatmap", "-o", heat,
                        os.path.join(GOLDEN, "edge.perf")], check=True)
        cfg = {"svg": os.path.abspath(svg), "heatmap": os.path.abspath(heat),
               "shots": os.path.abspath(shots),
               "hover": "running", "zoom": "fp_demo:crunch/1", "search": "deep/2"}
        r, err = run_driver(tmp, SCRIPT, cfg)
        if r is None:
            check(False, "browser driver ran", err)
            return 1
        print(json.dumps(r, indent=1))

        check(r["errors"] == [], "no script errors", r["errors"])
        check(r["frames"] > 20 and r["rendered"] == r["frames"], "every frame renders",
              (r["frames"], r["rendered"]))
        check(r["details"].startswith("running (30 samples, 83.33%)"), "hover fills the details line",
              r["details"])
        z = r["zoom"]
        check(abs(z["width"] - 1180) < 0.01 and abs(z["x"] - 10) < 0.01,
              "click zooms the frame to the full width", z)
        check(z["hidden"] > 0 and z["parents"] >= 2 and z["unzoomShown"],
              "zoom hides other frames, dims the parents, shows Reset Zoom", z)
        check(z["label"] == "fp_demo:crunch/1", "zoomed frame labelled in full", z["label"])
        u = r["unzoom"]
        check(u["hidden"] == 0 and not u["unzoomShown"] and
              abs(u["width"] - 1180 * u["v"] / 36) < 0.01, "Reset Zoom restores the graph", u)
        s = r["search"]
        # fp_demo:deep/2 is on the stack of 21 of the 36 samples
        check(s["matched"] == "Matched: 58.33%" and s["frames"] > 0 and s["purple"],
              "search highlights frames and reports the matched share", s)
        check(s["button"] == "Reset Search", "search button turns into Reset Search", s)
        check(r["searchReset"] == 0, "Escape resets the search")
        check(r["urlSearch"] == "Matched: 58.33%", "?s= searches on load", r["urlSearch"])
        check(r["cells"] == 8, "heat map: 8 cells render", r["cells"])
        check(r["cellDetails"].startswith("+0s 0-20 ms: 1 samples"), "heat map: hover details",
              r["cellDetails"])
        check(r["range"] == "flame_prof svg --from 1795248000.000 --to 1795248002.620"
              and r["selected"] == 2, "heat map: two clicks give the --from/--to of the range",
              r["range"])
        for name in ["flamegraph.png", "flamegraph-zoomed.png", "flamegraph-search.png",
                     "heatmap.png"]:
            pth = os.path.join(shots, name)
            check(os.path.exists(pth) and os.path.getsize(pth) > 1000, "screenshot " + pth)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
