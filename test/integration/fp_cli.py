"""What the flame_prof command tests share: the command, its golden files,
and a tally of named checks."""
import os
import re
import shutil
import subprocess
import tempfile

FLAME_PROF = os.environ.get("FLAME_PROF") or "build/flame_prof/flame_prof"
GOLDEN = os.path.join(os.environ.get("FP_GOLDEN_DIR") or "test/golden", "flame_prof")

failures = []
checks = 0


def check(cond, label, detail=""):
    global checks
    checks += 1
    if cond:
        print("ok   " + label)
    else:
        print("FAIL " + label + (("\n     " + detail[:2000]) if detail else ""))
        failures.append(label)
    return cond


def run(args, stdin=None, input_bytes=None, cwd=None):
    p = subprocess.run([FLAME_PROF] + args, input=input_bytes, stdin=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cwd=cwd, timeout=120)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def golden(name):
    with open(os.path.join(GOLDEN, name), encoding="utf-8") as f:
        return f.read()


def fixture(name):
    return os.path.join(GOLDEN, name)


def samples_of(top_text):
    m = re.match(r"samples: (\d+)\n", top_text)
    return int(m.group(1)) if m else -1



def finish():
    """Print the tally; the exit status for it."""
    print("%d checks, %d failed" % (checks, len(failures)))
    return 1 if failures else 0


def main(tests):
    """Run @tests in order (those that take an argument get a temporary
    directory); 77 without the command, else the tally's status."""
    if not os.path.exists(FLAME_PROF):
        print("flame_prof not built at %s" % FLAME_PROF)
        return 77
    tmp = tempfile.mkdtemp(prefix="fp-cli-")
    try:
        for test in tests:
            if test.__code__.co_argcount:
                test(tmp)
            else:
                test()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()
