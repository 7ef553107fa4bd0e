"""The program `make demo` traces (examples/demo.py) shows what stackwatch
is for: its own functions, not the import machinery, are on top of
`stackwatch stats`, and their call counts are those its own output
implies (40,000 lines parsed, of which it reports the malformed ones)."""
import os
import re
import subprocess
import sys

from stackwatch import Trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "examples", "demo.py")


def run(args, cwd):
    """python ARGS[1:] for args[0] == "python", else python -m stackwatch ARGS."""
    cmd = [sys.executable] + (args[1:] if args[0] == "python" else ["-m", "stackwatch"] + args)
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_demo_functions_on_top(tmp_path):
    plain = run(["python", DEMO], cwd=tmp_path)
    traced = run(["run", "-o", "demo.swt", DEMO], cwd=tmp_path)
    assert plain.returncode == traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    bad = int(re.search(r"^(\d+) malformed lines", plain.stdout, re.M).group(1))
    assert bad > 0

    t = Trace(str(tmp_path / "demo.swt"))
    own, calls = {}, {}
    for r in t.stats():
        c = t.codes[r.code]
        key = (c.name, c.filename)
        own[key] = own.get(key, 0) + r.own_ns
        calls[key] = calls.get(key, 0) + r.calls
    assert calls[("parse_line", DEMO)] == 40_000
    assert calls[("__init__", DEMO)] == 40_000 - bad      # a malformed line raises first
    assert calls[("make_lines", DEMO)] == 40_001                  # each resumption, and the end
    # By own time: the demo's functions, never the import machinery.
    top = sorted(own, key=own.get, reverse=True)[:3]
    assert [f for _, f in top] == [DEMO] * 3, top

    r = run(["stats", "demo.swt", "-n", "3"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    # stats says the same, in that order.
    rows = [row.rsplit("  (", 1) for row in r.stdout.splitlines()[-3:]]
    assert [(left.split()[-1].split(".")[-1], where.split(":")[0]) for left, where in rows] == top, r.stdout
