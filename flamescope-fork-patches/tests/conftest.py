"""pytest setup for the Flamescope patch tests.

The tests run against a Flamescope checkout with the patches applied, given
by FLAMESCOPE_SRC; without it every test is skipped (as in CI, where
Flamescope's code is not available). Flamescope's code is imported from
there, never copied into this repository.

Environment:
  FLAMESCOPE_SRC           patched Flamescope checkout (required)
  FLAMESCOPE_BASELINE_SRC  unpatched upstream checkout (optional): ordinary
                           perf files must give the same output as there
  FP_OUTPUT_DIR            directory of flame_profd output, e.g. the
                           directory test/integration/test_profile.py keeps
                           with FP_TEST_KEEP=1 (optional; every *.perf,
                           *.perf.gz and *.perf.zst under it is checked like
                           the bundled fixture)
  FLAMESCOPE_UI=1          also run the UI test (needs the UI built with npm
                           in FLAMESCOPE_SRC and Debian's chromium)
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, 'fixtures')
SRC = os.environ.get('FLAMESCOPE_SRC')

sys.dont_write_bytecode = True

SKIP_REASON = ('FLAMESCOPE_SRC is not set: these tests need a Flamescope checkout with '
               'flamescope-fork-patches applied (see flamescope-fork-patches/README.md)')


def pytest_collection_modifyitems(config, items):
    if SRC:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        item.add_marker(skip)


def pytest_report_header(config):
    if not SRC:
        return 'flamescope-fork-patches: ' + SKIP_REASON
    return 'flamescope-fork-patches: FLAMESCOPE_SRC=%s' % SRC


@pytest.fixture(scope='session')
def fs():
    """The patched Flamescope: (app module, flask test client)."""
    if not SRC:
        pytest.skip(SKIP_REASON)
    if not os.path.isfile(os.path.join(SRC, 'app', 'perf', 'samples.py')):
        pytest.fail('FLAMESCOPE_SRC=%s is not a Flamescope checkout with the patches applied '
                    '(no app/perf/samples.py)' % SRC)
    sys.path.insert(0, SRC)
    import app
    return app, app.APP.test_client()


@pytest.fixture
def profile_dir(fs):
    """Point PROFILE_DIR at a directory for one test; returns a setter."""
    app, _ = fs
    old = app.config.PROFILE_DIR

    def set_dir(path):
        app.config.PROFILE_DIR = str(path)
        return str(path)
    yield set_dir
    app.config.PROFILE_DIR = old


def flame_profd_files():
    """The bundled fixtures plus every finished file under FP_OUTPUT_DIR."""
    files = [os.path.join(FIXTURES, 'flame_profd-demo.perf'),
             os.path.join(FIXTURES, 'flame_profd-labels.perf'),
             os.path.join(FIXTURES, 'flame_profd-idle.perf')]
    out = os.environ.get('FP_OUTPUT_DIR')
    if out:
        for root, dirs, names in os.walk(out):
            files.extend(os.path.join(root, n) for n in sorted(names)
                         if n.endswith(('.perf', '.perf.gz', '.perf.zst')) and not n.startswith('.'))
    return files
