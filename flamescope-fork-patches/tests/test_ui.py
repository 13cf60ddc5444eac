"""The patched UI in headless Chromium: the metric picker, a metric heat map
and a metric flame graph render for a flame_profd file; the group picker,
the label and key filters offer the labels and keys a file has, and a flame
graph grouped by label puts label frames at the root. Every file of a
flame_profd output directory (FP_OUTPUT_DIR, else the fixtures under the
daemon's names: node@host directories, '@' and dots in the names) opens
from Flamescope's own file list, clicked with playwright-core (FP_NODE_DIR,
default the project's build/node: scripts/install-node-deps).

Runs only with FLAMESCOPE_UI=1, a UI built in FLAMESCOPE_SRC (app/public/
main.js, see README.md: npm ci && npm run webpack) and Chromium (Debian:
chromium). Screenshots go to FLAMESCOPE_UI_SHOTS (default: pytest's tmp).
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from conftest import FIXTURES

SRC = os.environ.get('FLAMESCOPE_SRC')
HERE_DIR = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = shutil.which('chromium') or shutil.which('chromium-browser')

pytestmark = pytest.mark.skipif(
    os.environ.get('FLAMESCOPE_UI') != '1',
    reason='UI test: set FLAMESCOPE_UI=1 (needs the UI built with npm and chromium)')


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serve(profiles):
    """Run the patched Flamescope on PROFILE_DIR=profiles; yields (base URL,
    profiles)."""
    if not SRC:
        pytest.skip('FLAMESCOPE_SRC is not set')
    if not os.path.isfile(os.path.join(SRC, 'app', 'public', 'main.js')):
        pytest.fail('no UI bundle in %s/app/public: build it first '
                    '(npm ci && NODE_OPTIONS=--openssl-legacy-provider npm run webpack)' % SRC)
    if not CHROMIUM:
        pytest.fail('chromium not found (Debian: apt-get install chromium)')
    port = free_port()
    env = dict(os.environ, PROFILE_DIR=str(profiles), PORT=str(port), HOST='127.0.0.1',
               PYTHONPATH=SRC)
    proc = subprocess.Popen([sys.executable, 'run.py'], cwd=SRC, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = 'http://127.0.0.1:%d' % port
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + '/profile/', timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail('Flamescope did not start on %s' % base)
        yield base, str(profiles)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    profiles = tmp_path_factory.mktemp('profiles')
    shutil.copy(os.path.join(FIXTURES, 'flame_profd-demo.perf'), str(profiles / 'demo.perf'))
    shutil.copy(os.path.join(FIXTURES, 'flame_profd-labels.perf'), str(profiles / 'labels.perf'))
    shutil.copy(os.path.join(FIXTURES, 'flame_profd-idle.perf'), str(profiles / 'idle.perf'))
    for base, _ in serve(profiles):
        yield base


def chromium(url, *args):
    profile = tempfile.mkdtemp(prefix='fs-ui-chromium.')
    try:
        out = subprocess.run(
            [CHROMIUM, '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
             '--no-first-run', '--disable-background-networking', '--disable-component-update',
             '--disable-sync', '--user-data-dir=' + profile, '--window-size=1400,900',
             '--virtual-time-budget=15000'] + list(args) + [url],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120)
        return out.stdout.decode('utf-8', 'replace')
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def shots_dir(tmp_path):
    d = os.environ.get('FLAMESCOPE_UI_SHOTS') or str(tmp_path)
    os.makedirs(d, exist_ok=True)
    return d


def test_heatmap_with_metric_picker(server, tmp_path):
    url = server + '/#/heatmap/perf/demo.perf?metric=erlang_message_queue_len_delta'
    dom = chromium(url, '--dump-dom')
    assert 'id="metric-picker"' in dom
    assert 'erlang_message_queue_len delta' in dom           # the picked metric
    assert 'id="status-filter"' in dom and 'id="name-filter"' in dom
    heatmap = dom[dom.index('id="heatmap"'):]
    assert heatmap.count('<rect') > 100                     # cells drawn
    shot = os.path.join(shots_dir(tmp_path), 'heatmap-metric.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000


def test_metric_flame_graph(server, tmp_path):
    url = server + '/#/flamegraph/perf/demo.perf?metric=erlang_memory_delta&group=name'
    dom = chromium(url, '--dump-dom')
    graph = dom[dom.index('id="flamegraph"'):]
    assert '<svg' in graph and 'name="root"' in graph
    assert 'name="fp_demo_server"' in graph                 # group=name level
    shot = os.path.join(shots_dir(tmp_path), 'flamegraph-metric.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000


def test_heatmap_group_and_label_filters(server, tmp_path):
    url = server + '/#/heatmap/perf/labels.perf?label=%7Brw_pool%2C2%7D&group=label,status'
    dom = chromium(url, '--dump-dom')
    assert 'id="group-picker"' in dom and 'id="label-filter"' in dom
    assert 'id="key-filter-request_id"' in dom
    group = dom[dom.index('id="group-picker"'):dom.index('id="label-filter"')]
    for option in ('status', 'registered name', 'initial call', 'label', 'callers', 'key request_id'):
        assert '>%s<' % option in group, option
    labels = dom[dom.index('id="label-filter"'):dom.index('id="key-filter-request_id"')]
    for n in (1, 2, 3):
        assert '{rw_pool,%d}' % n in labels
    assert '(no label)' in labels
    # the pool's processes record no request id: with the label selected
    # the key's list offers none (only "no value"), without it, the ids
    keys = dom[dom.index('id="key-filter-request_id"'):dom.index('id="heatmap"')]
    assert 'req-10' not in keys and '(no value)' in keys
    heatmap = dom[dom.index('id="heatmap"'):]
    assert heatmap.count('<rect') > 50
    whole = chromium(server + '/#/heatmap/perf/labels.perf?group=label,status', '--dump-dom')
    assert 'req-10' in whole[whole.index('id="key-filter-request_id"'):whole.index('id="heatmap"')]
    shot = os.path.join(shots_dir(tmp_path), 'heatmap-labels.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000
    # a file without labels or keys offers neither
    dom = chromium(server + '/#/heatmap/perf/demo.perf', '--dump-dom')
    assert 'id="group-picker"' in dom
    assert 'id="label-filter"' not in dom and 'key-filter-' not in dom
    group = dom[dom.index('id="group-picker"'):]
    assert '>key ' not in group and '>callers<' not in group


def test_flame_graph_grouped_by_label(server, tmp_path):
    url = server + '/#/flamegraph/perf/labels.perf?group=label,key:request_id'
    dom = chromium(url, '--dump-dom')
    graph = dom[dom.index('id="flamegraph"'):]
    assert '<svg' in graph and 'name="root"' in graph
    for n in (1, 2, 3):
        assert 'name="label:{rw_pool,%d}"' % n in graph
    assert 'name="request_id:req-10"' in graph
    shot = os.path.join(shots_dir(tmp_path), 'flamegraph-labels.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000


def test_empty_selection_says_so(server, tmp_path):
    """A selection without samples: a message, no one-colour map with a
    lone "0" legend, no bare "root" flame graph; the selected status stays
    in its list (with 0) and the name list offers only names that have
    samples with it."""
    url = server + '/#/heatmap/perf/demo.perf?status=garbage_collecting&name=fp_demo_server'
    dom = chromium(url, '--dump-dom')
    assert 'id="empty-selection"' in dom and 'No samples in this selection' in dom
    heatmap = dom[dom.index('id="heatmap"'):]
    assert '<rect' not in heatmap[:heatmap.index('id="legend"')]
    status = dom[dom.index('id="status-filter"'):dom.index('id="name-filter"')]
    assert 'garbage_collecting (0)' in status
    shot = os.path.join(shots_dir(tmp_path), 'heatmap-empty-selection.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000
    url = server + '/#/flamegraph/perf/demo.perf?name=no_such_process'
    dom = chromium(url, '--dump-dom')
    assert 'id="empty-flamegraph"' in dom
    assert 'name="root"' not in dom[dom.index('id="flamegraph"'):]
    shot = os.path.join(shots_dir(tmp_path), 'flamegraph-empty-selection.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000


def test_idle_samples_left_out_says_so(server, tmp_path):
    """The count heat map of a file with samples marked idle leaves them
    out, as stock Flamescope does, and says how many; statuses chosen, or
    a file without the mark, no such note."""
    idle = sum(1 for line in open(os.path.join(FIXTURES, 'flame_profd-idle.perf'))
               if line.rstrip('\n').endswith('\tidle: swapper/cpu_idle'))
    assert idle
    url = server + '/#/heatmap/perf/idle.perf'
    dom = chromium(url, '--dump-dom')
    assert 'id="idle-left-out"' in dom and '%d idle samples left out' % idle in dom
    assert 'id="empty-selection"' not in dom
    heatmap = dom[dom.index('id="heatmap"'):]
    assert heatmap.count('<rect') > 50
    shot = os.path.join(shots_dir(tmp_path), 'heatmap-idle-left-out.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000
    # only idle samples selected: said so, not "no samples"
    dom = chromium(server + '/#/heatmap/perf/idle.perf?status=waiting', '--dump-dom')
    assert 'id="idle-left-out"' not in dom and 'id="empty-selection"' not in dom
    dom = chromium(server + '/#/heatmap/perf/demo.perf', '--dump-dom')
    assert 'id="idle-left-out"' not in dom


def test_filter_lists_follow_the_selection(server):
    """With status=waiting the name and pid lists hold only processes that
    have waiting samples; the pid list is there, with <0.N.S> pids."""
    dom = chromium(server + '/#/heatmap/perf/demo.perf', '--dump-dom')
    names_all = dom[dom.index('id="name-filter"'):dom.index('id="pid-filter"')]
    pids = dom[dom.index('id="pid-filter"'):dom.index('id="group-picker"')]
    assert '&lt;0.' in pids and pids.count('class="item') >= 2
    dom = chromium(server + '/#/heatmap/perf/demo.perf?status=waiting', '--dump-dom')
    names = dom[dom.index('id="name-filter"'):dom.index('id="pid-filter"')]
    assert names.count('class="item') < names_all.count('class="item')
    assert names.count('class="item') >= 1


def test_signed_metric_legend(server, tmp_path):
    """A delta's legend runs from the largest decrease (blue) through 0 to
    the largest increase (red)."""
    url = server + '/#/heatmap/perf/demo.perf?metric=erlang_memory_delta'
    dom = chromium(url, '--dump-dom')
    legend = dom[dom.index('id="legend"'):]
    assert 'id="signed-legend"' in legend
    assert 'decrease' in legend and 'increase' in legend
    assert '\u2212' in legend                     # negative ticks (d3 writes a minus sign)
    shot = os.path.join(shots_dir(tmp_path), 'heatmap-signed-legend.png')
    chromium(url, '--screenshot=' + shot)
    assert os.path.getsize(shot) > 10000
    # an unsigned metric keeps the 0..max legend
    dom = chromium(server + '/#/heatmap/perf/demo.perf?metric=erlang_memory', '--dump-dom')
    assert 'id="signed-legend"' not in dom


# --- the file list, as a user opens flame_profd's output ---------------------

NODE_DIR = os.environ.get('FP_NODE_DIR') or os.path.join(
    os.path.dirname(os.path.dirname(HERE_DIR)), 'build', 'node')

FILE_LIST_DRIVER = r"""
const path = require('path');
const { chromium } = require(path.join(process.env.FP_NODE_DIR, 'node_modules', 'playwright-core'));
const cfg = JSON.parse(process.argv[2]);

(async () => {
  const out = { errors: [], runs: [] };
  const browser = await chromium.launch({ executablePath: cfg.chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  try {
    for (const [i, name] of cfg.files.entries()) {
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      page.on('pageerror', e => out.errors.push(String(e)));
      const bad = [];
      page.on('response', r => { if (r.status() >= 400) bad.push(r.status() + ' ' + r.url()); });
      await page.goto(cfg.base + '/#/');
      /* the row of the file, by its name in the first cell */
      const row = page.locator('tr', { has: page.locator('td', { hasText: name }) }).first();
      await row.waitFor({ timeout: 20000 });
      const listed = await page.evaluate(() =>
        Array.from(document.querySelectorAll('tbody tr td:first-child')).map(td => td.innerText));
      await row.getByRole('button', { name: 'Open as Linux Perf' }).click();
      let cells = 0;
      for (let k = 0; k < 80 && cells < 10; k++) {
        await page.waitForTimeout(250);
        cells = await page.locator('#heatmap rect').count();
      }
      const r = { name, listed, url: page.url(), cells, bad,
                  hasPicker: await page.locator('#metric-picker').count() };
      await page.screenshot({ path: path.join(cfg.shots, 'file-list-' + i + '-heatmap.png') });
      /* and on to the flame graph of the whole file */
      const requests = [];
      page.on('request', q => { if (q.url().includes('/flamegraph/?')) requests.push(q.url()); });
      await page.goto(page.url().replace('#/heatmap/', '#/flamegraph/'));
      let frames = 0;
      for (let k = 0; k < 80 && frames < 3; k++) {
        await page.waitForTimeout(250);
        frames = await page.locator('#flamegraph g').count();
      }
      r.frames = frames;
      r.flamegraphRequests = requests;
      r.badAfter = bad.slice();
      await page.screenshot({ path: path.join(cfg.shots, 'file-list-' + i + '-flamegraph.png') });
      await page.close();
      out.runs.push(r);
    }
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(e); process.exit(2); });
"""


def flame_profd_output_dir(root):
    """A flame_profd output directory: FP_OUTPUT_DIR's when given (a real
    run), else the real fixtures under the names and node directories the
    daemon gives them (OUT/<node>/<node>.<time>.perf[.zst])."""
    out = os.environ.get('FP_OUTPUT_DIR')
    if out:
        dst = os.path.join(root, 'out')
        shutil.copytree(out, dst)
        return dst
    demo = os.path.join(root, 'out', 'fp_demo@vm-1.example')
    labels = os.path.join(root, 'out', 'rw_ex@vm-1.example')
    os.makedirs(demo)
    os.makedirs(labels)
    shutil.copy(os.path.join(FIXTURES, 'flame_profd-demo.perf'),
                os.path.join(demo, 'fp_demo@vm-1.example.20261125T101500.123Z.perf'))
    shutil.copy(os.path.join(FIXTURES, 'flame_profd-labels.perf'),
                os.path.join(labels, 'rw_ex@vm-1.example.20261125T101502.007Z.perf'))
    if shutil.which('zstd'):
        subprocess.run(['zstd', '-q', os.path.join(demo, 'fp_demo@vm-1.example.20261125T101500.123Z.perf'),
                        '-o', os.path.join(demo, 'fp_demo@vm-1.example.20261125T101510.456Z.perf.zst')],
                       check=True)
    with open(os.path.join(demo, 'manifest.json'), 'w') as f:
        f.write('{"flame_profd_version": "0.1.0", "node": "fp_demo@vm-1.example", "files": []}\n')
    return os.path.join(root, 'out')


@pytest.fixture(scope='module')
def output_server(tmp_path_factory):
    if not os.path.isdir(os.path.join(NODE_DIR, 'node_modules', 'playwright-core')):
        pytest.skip('no playwright-core in %s/node_modules (scripts/install-node-deps)' % NODE_DIR)
    out = flame_profd_output_dir(str(tmp_path_factory.mktemp('fp-output')))
    yield from serve(out)


def test_file_list_opens_flame_profd_files(output_server, tmp_path):
    """Every finished file of the output directory opens from Flamescope's
    own file list: a heat map, then its flame graph, with no failed
    request (names hold '@', dots and the node directory)."""
    base, out = output_server
    files = sorted(os.path.relpath(os.path.join(d, n), out)
                   for d, _, names in os.walk(out) for n in names
                   if '.perf' in n and not n.startswith('.'))
    assert files and any('@' in f and '/' in f for f in files)
    import json
    shots = shots_dir(tmp_path)
    js = os.path.join(str(tmp_path), 'drive.js')
    with open(js, 'w') as f:
        f.write(FILE_LIST_DRIVER)
    cfg = {'base': base, 'files': files[:4], 'chromium': CHROMIUM, 'shots': shots}
    p = subprocess.run(['node', js, json.dumps(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=dict(os.environ, FP_NODE_DIR=os.path.abspath(NODE_DIR)), timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    res = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert not res['errors'], res['errors']
    for r in res['runs']:
        assert r['name'] in r['listed']
        assert 'manifest.json' not in ' '.join(r['listed'])
        assert '/error/' not in r['url'], r
        assert not r['bad'] and not r['badAfter'], r
        assert r['hasPicker'] == 1 and r['cells'] >= 10, r
        assert r['frames'] >= 3, r
        # the request names the file once encoded, not twice
        assert r['flamegraphRequests'] and all('%25' not in u for u in r['flamegraphRequests']), r
