"""`go tool pprof`, the real reader of the pprof files stackwatch writes
(Debian golang-go): GO is its path (None when missing), go_pprof() runs it
and top() reads its -top table."""
import re
import shutil
import subprocess

GO = shutil.which("go")


def go_pprof(*args):
    r = subprocess.run([GO, "tool", "pprof"] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def top(path, index, *extra):
    """(shown, total, {function: (flat, cum)}) of `go tool pprof -top`
    for the sample index ("samples" or "wall"), in counts or integer
    nanoseconds. `shown` is the part of the total left by the filters."""
    out = go_pprof("-top", f"-sample_index={index}", "-unit=ns", "-nodecount=100000", "-nodefraction=0",
                   *extra, path)
    m = re.search(r"^Showing nodes accounting for (\d+)(?:ns)?, [\d.]+% of (\d+)(?:ns)? total$", out, re.M)
    assert m, out
    rows = {}
    for line in out.splitlines():
        r = re.fullmatch(r"\s*(\d+)(?:ns)?\s+[\d.]+%\s+[\d.]+%\s+(\d+)(?:ns)?\s+[\d.]+%\s+(.+)", line)
        if r:
            rows[r.group(3)] = (int(r.group(1)), int(r.group(2)))
    return int(m.group(1)), int(m.group(2)), rows
