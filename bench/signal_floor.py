"""The floor under the in-process sampler's parks, in `make bench` after
the in-process within-run line (bench/profilers.py): what a signal every
millisecond to an empty handler costs a busy thread on this machine
(bench/signal_floor.c, built here with cc into a temporary folder: a worker
pinned to one CPU, windows with and without the signals alternating, the
mean batch time's ratio, the median round's). A park is such a signal (sent by the sampler
from another CPU) plus the handler's read, so no park can cost less than
`other_cpu`; on this VM an interrupt from another CPU costs the thread far
more than on bare metal. See bench/README.md "The floor under a park".

    python bench/signal_floor.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
WAYS = {"other_cpu": "sent from another CPU (as the sampler does)",
        "same_cpu": "sent from the thread's own CPU",
        "timer": "a POSIX timer the thread armed (CLOCK_MONOTONIC)"}


def measure():
    """{way: {"ratio", "q1", "q3", "signals", "seconds"}} or {"error": ...}."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return {"error": "no C compiler"}
    tmp = tempfile.mkdtemp(prefix="swbench-floor-")
    try:
        exe = os.path.join(tmp, "signal_floor")
        p = subprocess.run([cc, "-O2", "-pthread", "-o", exe, os.path.join(HERE, "signal_floor.c")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if p.returncode != 0:
            return {"error": "cannot build signal_floor.c: " + p.stdout.decode(errors="replace").strip()[-200:]}
        p = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            return {"error": p.stderr.decode(errors="replace").strip()[-200:] or f"exit status {p.returncode}"}
        return json.loads(p.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)[:200]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def text(res):
    """One line: each way's cost at 1 kHz, in % and microseconds a signal."""
    if "error" in res:
        return f"the floor under a park (a bare signal at 1 kHz): n/a ({res['error']})"
    parts = []
    for way, what in WAYS.items():
        r = res.get(way)
        if not r:
            continue
        rate = r["signals"] / r["seconds"] if r["seconds"] else 0
        us = (r["ratio"] - 1) * 1e6 / rate if rate else 0
        parts.append(f"{what} {r['ratio']:.4f}x [{r['q1']:.3f}-{r['q3']:.3f}], ~{us:.0f} us a signal")
    return ("the floor under a park: a busy thread sent 1,000 signals/s to an empty handler (bench/signal_floor.c; "
            "mean batch time with / without, windows alternating, median round): " + "; ".join(parts))


if __name__ == "__main__":
    r = measure()
    print(text(r))
    print(json.dumps(r))
    sys.exit(1 if "error" in r else 0)
