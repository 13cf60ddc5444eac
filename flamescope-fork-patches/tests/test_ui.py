"""The patched UI in headless Chromium: the metric picker, a metric heat map
and a metric flame graph render for a flame_profd file; the group picker,
the label and key filters offer the labels and keys a file has, and a flame
graph grouped by label puts label frames at the root.

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


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    if not SRC:
        pytest.skip('FLAMESCOPE_SRC is not set')
    if not os.path.isfile(os.path.join(SRC, 'app', 'public', 'main.js')):
        pytest.fail('no UI bundle in %s/app/public: build it first '
                    '(npm ci && NODE_OPTIONS=--openssl-legacy-provider npm run webpack)' % SRC)
    if not CHROMIUM:
        pytest.fail('chromium not found (Debian: apt-get install chromium)')
    profiles = tmp_path_factory.mktemp('profiles')
    shutil.copy(os.path.join(FIXTURES, 'flame_profd-demo.perf'), str(profiles / 'demo.perf'))
    shutil.copy(os.path.join(FIXTURES, 'flame_profd-labels.perf'), str(profiles / 'labels.perf'))
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
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


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
    keys = dom[dom.index('id="key-filter-request_id"'):]
    assert 'req-10' in keys
    heatmap = dom[dom.index('id="heatmap"'):]
    assert heatmap.count('<rect') > 50
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
