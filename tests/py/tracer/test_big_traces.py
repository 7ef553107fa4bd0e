"""Traces bigger than the memory a reader may use: `stats` and the exports
read a trace chunk by chunk (native/trace/reader.c), so a file several
times larger than an address-space limit (RLIMIT_AS, set in the child
before it runs) is read whole, with the numbers the synthetic trace
(synth_trace.py) was built with."""
import json
import os
import subprocess
import sys

import pytest

import synth_trace
from stackwatch.cli.stats import _fmt_ns

# The reader is C, the same on every version: one Python runs these.
pytestmark = pytest.mark.versions("3.11")   # (the writer and reader: the same on every version; 3.11 has the shortest job)

LIMIT = 160 << 20      # the reader's address space
CHUNKS = 84            # of 8 MiB: a 672 MiB trace, over 4 times the limit


def run_limited(args, limit=LIMIT):
    """`python -m stackwatch ARGS` with its address space limited."""
    code = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (%d, %d)); "
            "sys.argv = ['stackwatch'] + sys.argv[1:]; runpy.run_module('stackwatch', run_name='__main__')"
            % (limit, limit))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COVERAGE_CORE", "COVERAGE_PROCESS_START")}
    return subprocess.run([sys.executable, "-c", code] + args, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("big") / "big.swt")
    info = synth_trace.write(path, chunks=CHUNKS, chunk_bytes=8 << 20, pairs=2000)
    assert info["bytes"] > 4 * LIMIT
    yield path, info
    os.unlink(path)


def test_limit_is_real(big, tmp_path):
    """The limit stops a reader that holds the file: reading it into memory
    under the same limit fails."""
    path, _ = big
    r = subprocess.run([sys.executable, "-c", "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, "
                        f"({LIMIT}, {LIMIT})); open(sys.argv[1], 'rb').read()", path], capture_output=True, text=True)
    assert r.returncode != 0 and "MemoryError" in r.stderr


def _rows(stdout):
    """{function: (calls, total, own)} of stats' first table."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0].isdigit() and parts[3] in ("outer", "inner"):
            out.setdefault(parts[3], (int(parts[0]), parts[1], parts[2]))
    return out


def test_stats_streams(big):
    path, info = big
    r = run_limited(["stats", path])
    assert r.returncode == 0, r.stderr
    rows = _rows(r.stdout)
    assert rows["outer"][0] == info["outer_calls"] and rows["inner"][0] == info["inner_calls"]
    assert rows["outer"][1:] == (_fmt_ns(info["outer_total_ns"]), _fmt_ns(info["outer_own_ns"]))


def test_exports_stream(big, tmp_path):
    path, info = big
    out = tmp_path / "big.json"
    # Every slice is shorter than 1 us: the export reads the whole trace
    # (twice: the durations first) and writes only the thread's metadata.
    r = run_limited(["export", path, "--format", "chrome", "--min-duration", "1us", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert not [e for e in events if e["ph"] in ("B", "E")] and any(e["ph"] == "M" for e in events)
    r = run_limited(["export", path, "--format", "perfetto", "--min-duration", "1us", "-o", str(tmp_path / "b.pf")])
    assert r.returncode == 0, r.stderr


# ---- progress and the warning before a big export (cli/progress.py) ----

def test_progress_bar_on_a_terminal_only(big, tmp_path):
    import pty
    path, _ = big
    env = dict(os.environ, STACKWATCH_PROGRESS_AFTER="0")
    env.pop("PYTHONPATH", None)
    # not a terminal: nothing
    r = subprocess.run([sys.executable, "-m", "stackwatch", "stats", path], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "%" not in r.stderr and "\r" not in r.stderr, r.stderr
    # a terminal: the bar, ending at 100%
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "stackwatch", "stats", path], stdout=subprocess.DEVNULL,
                         stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    assert p.wait(timeout=120) == 0
    os.close(master)
    text = seen.decode()
    assert "reading the trace [" in text and "100% of" in text, text


def test_warning_before_a_big_export():
    from stackwatch.cli.progress import big_export_warning
    w = big_export_warning("perfetto", 272_000_000, False)
    assert w and "about 4.1 GB" in w and "--min-duration" in w and "--start/--stop" in w
    assert big_export_warning("perfetto", 1_000_000, False) is None
    assert big_export_warning("html", 272_000_000, False) is None   # a flame graph does not grow with events


# fib, compiled under a short file name of its own: the exports that name
# each event's file (CTF) grow with it, and the path of this checkout is
# not the program's.
_FIB = {}
exec(compile("def _calls(n):\n    return n if n < 2 else _calls(n - 1) + _calls(n - 2)\n", "lib/fib.py", "exec"),
     _FIB)


@pytest.mark.parametrize("fmt", ["perfetto", "chrome", "ctf"])
def test_expected_bytes_per_event_hold(fmt, tmp_path):
    """The warning's bytes per event are those of a real export, within a
    third (fib: two events per call, as in most traces)."""
    import stackwatch
    from stackwatch import Trace
    from stackwatch.cli.progress import BYTES_PER_EVENT
    path = str(tmp_path / "t.swt")
    with stackwatch.trace(path):
        _FIB["_calls"](20)
    t = Trace(path)
    out = tmp_path / ("t." + fmt)
    t.export(fmt, str(out))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) if out.is_dir() else out.stat().st_size
    per = size / t.event_count()
    assert BYTES_PER_EVENT[fmt] / 1.33 <= per <= BYTES_PER_EVENT[fmt] * 1.33, per
