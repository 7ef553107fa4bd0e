"""The big-trace section of `make bench` (run by bench/run.py; see
bench/README.md): what reading a trace costs once it is recorded.

For each trace (recorded by a workload of bench/workloads/ under
`--tracer stackwatch`, the largest with over 100M events), one process per
command, one at a time:

  stats     `stackwatch stats TRACE` (the top functions);
  html      `stackwatch export TRACE -o t.html` (the flame graph of the
            exact durations);
  perfetto  `stackwatch export TRACE -o t.pftrace`;
  chrome    `stackwatch export TRACE -o t.json` (skipped when it would be
            over CHROME_MAX_BYTES: the smaller traces give its bytes per
            event);

each with its wall time and its peak resident memory (the child's
ru_maxrss from wait4), and the exports' bytes per event. A row is printed
as soon as its trace is measured; the outputs are deleted at once.

Then the call-tree formats (collapsed, pstats, callgrind, html, speedscope,
pprof: `stackwatch export TRACE --format F`), each in its own process
with its time and peak RSS, on two traces: the largest above (many events,
a small tree) and one of many distinct call paths (PATHS_PROGRAM: 2^depth
leaf paths, about 2^(depth+1) tree nodes), where the tree is big: what
they hold grows with the tree's nodes, never with the text they write.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

import benchlib

# (workload name in run.WORKLOADS, label, full size, quick size): fib(n)
# makes 2 F(n+1) - 1 calls, so fib(37) records 78M calls, 156M events.
TRACES = [("fib", "fib({})", 29, 18), ("pyperformance:richards", "richards({} idle)", 15_000, 500),
          ("fib", "fib({})", 37, 22)]
COMMANDS = ("stats", "html", "perfetto", "chrome")
TREE_FORMATS = ("collapsed", "pstats", "callgrind", "html", "speedscope", "pprof")
PATHS_DEPTH, PATHS_QUICK_DEPTH = 18, 14
PATHS_PROGRAM = """
import sys
def a(n):
    if n:
        a(n - 1)
        b(n - 1)
def b(n):
    if n:
        a(n - 1)
        b(n - 1)
a(int(sys.argv[1]))
"""
SUFFIX = {"html": ".html", "perfetto": ".pftrace", "chrome": ".json"}
CHROME_BYTES_PER_EVENT = 90      # src/stackwatch/cli/progress.py
CHROME_MAX_BYTES = 2 << 30


def measure(cmd, timeout=1800):
    """Runs cmd (output discarded); returns {"seconds", "rss_mb"} of that
    child alone, or {"error"}."""
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as e:
        return {"error": str(e)}
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            return {"error": f"timed out after {timeout} s"}
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {err.strip()[-300:]}"}
    return {"seconds": seconds, "rss_mb": ru.ru_maxrss / 1024}


def record(python, w, size, out_dir):
    """Records the workload at `size` under stackwatch into out_dir;
    returns (trace path, events) or raises RuntimeError."""
    result = os.path.join(out_dir, "result.json")
    cmd = w.command(python, "stackwatch", size, 0, ["--out-dir", out_dir, "--result", result])
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=1800, cwd=out_dir)
    if not os.path.exists(result):
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.decode(errors='replace').strip()[-300:]}")
    with open(result) as f:
        res = json.load(f)
    if "error" in res:
        raise RuntimeError(res["error"])
    return os.path.join(out_dir, "trace.swt"), res["events"]


def _cell(r):
    if r is None:
        return "-"
    if "error" in r:
        return "failed"
    return f"{r['seconds']:.1f}s {r['rss_mb']:.0f}M"


def section(workloads, python, quick, log, save):
    """Measures every trace of TRACES; prints the table a row at a time.
    Returns {label: {...}} for results.json."""
    print()
    print("Big traces: reading a recorded trace, one process per command: wall time and peak RSS "
          "(the reader streams the file chunk by chunk), bytes per event of the timeline exports.")
    table = benchlib.StreamTable(["trace", "events", "swt MB", "stats", "html", "perfetto", "chrome",
                                  "pf B/ev", "chr B/ev"], width=[11, 8, 13, 13, 13, 13, 8, 8], first_width=18)
    table.start()
    out = {}
    sw = [python, "-m", "stackwatch"]
    tree_rows = []
    for i, (name, label, size, quick_size) in enumerate(TRACES):
        size = quick_size if quick else size
        label = label.format(size)
        w = workloads.get(name)
        if w is None:
            continue
        tmp = tempfile.mkdtemp(prefix="swbench-big-")
        row = {"workload": name, "size": size}
        try:
            t0 = time.perf_counter()
            try:
                path, events = record(python, w, size, tmp)
            except (RuntimeError, KeyError, subprocess.TimeoutExpired) as e:
                row["error"] = str(e)
                table.row([label, table.mark(f"{label}: recording failed: {e}")] + [""] * 7)
                out[label] = row
                continue
            row.update(events=events, swt_bytes=os.path.getsize(path),
                       record_seconds=time.perf_counter() - t0)
            log(f"big traces: {label}: {events} events recorded, measuring ...")
            cells = {}
            for what in COMMANDS:
                if what == "chrome" and events * CHROME_BYTES_PER_EVENT > CHROME_MAX_BYTES:
                    cells[what] = None
                    row[what] = {"skipped": f"about {events * CHROME_BYTES_PER_EVENT >> 30} GB"}
                    continue
                if what == "stats":
                    cmd = sw + ["stats", path]
                else:
                    target = os.path.join(tmp, "out" + SUFFIX[what])
                    cmd = sw + ["export", path, "--format", what, "-o", target]
                r = measure(cmd)
                if what != "stats" and "error" not in r:
                    r["bytes"] = os.path.getsize(target)
                    r["bytes_per_event"] = r["bytes"] / events
                    os.unlink(target)
                cells[what] = r
                row[what] = r
            if i == len(TRACES) - 1:     # the largest: its call-tree formats too
                log(f"big traces: {label}: the call-tree formats ...")
                tree_rows.append((label, events, None, tree_formats(sw, path, tmp)))
                row["tree_formats"] = tree_rows[-1][3]
            bpe = {k: (f"{cells[k]['bytes_per_event']:.1f}" if cells.get(k) and "bytes_per_event" in cells[k]
                       else "-") for k in ("perfetto", "chrome")}
            mb = row["swt_bytes"] / 1e6
            table.row([label, f"{events / 1e6:.1f}M" if events >= 1e6 else f"{events / 1e3:.1f}k",
                       f"{mb:.0f}" if mb >= 10 else f"{mb:.2f}"]
                      + [_cell(cells[k]) for k in COMMANDS] + [bpe["perfetto"], bpe["chrome"]])
            out[label] = row
            save()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    table.finish()
    print("Each cell: wall seconds and peak RSS in MB of that one command; chrome '-': not written "
          f"(over {CHROME_MAX_BYTES >> 30} GB at {CHROME_BYTES_PER_EVENT} B/event; the smaller traces give "
          "its bytes per event).", flush=True)
    out["tree_formats"] = trees_section(sw, quick, log, tree_rows)
    save()
    return out


def tree_formats(sw, path, tmp):
    """{format: measure()} of `stackwatch export PATH --format F` for every
    call-tree format, the outputs deleted."""
    res = {}
    for fmt in TREE_FORMATS:
        target = os.path.join(tmp, "tree." + fmt)
        r = measure(sw + ["export", path, "--format", fmt, "-o", target])
        if "error" not in r:
            r["bytes"] = os.path.getsize(target)
            os.unlink(target)
        res[fmt] = r
    return res


def trees_section(sw, quick, log, rows):
    """Records the many-paths trace, measures the tree formats on it and
    prints the table of the tree formats (rows: those measured already,
    then this one). Returns {label: {...}} for results.json."""
    depth = PATHS_QUICK_DEPTH if quick else PATHS_DEPTH
    label = f"paths(2^{depth})"
    tmp = tempfile.mkdtemp(prefix="swbench-paths-")
    try:
        script = os.path.join(tmp, "paths.py")
        with open(script, "w") as f:
            f.write(PATHS_PROGRAM)
        path = os.path.join(tmp, "paths.swt")
        p = subprocess.run(sw + ["run", "-q", "-o", path, script, str(depth)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=1800)
        if p.returncode == 0:
            q = subprocess.run(sw[:1] + ["-c", "import sys; from stackwatch.tracer.tracefile import Trace; "
                                         "t = Trace(sys.argv[1]); "
                                         "print(t.event_count(), sum(x.nodes for _, _, x in t.trees().threads))",
                                         path], capture_output=True, text=True, timeout=1800)
            events, nodes = (int(x) for x in q.stdout.split()) if q.returncode == 0 else (0, 0)
            log(f"big traces: {label}: {nodes} tree nodes, measuring the call-tree formats ...")
            rows.append((label, events, nodes, tree_formats(sw, path, tmp)))
        else:
            log(f"big traces: {label}: recording failed: {p.stderr.decode(errors='replace').strip()[-300:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("Call-tree formats of a trace: wall time and peak RSS of `export --format F`, one process each; "
          "their memory follows the tree's nodes, not the trace's events nor the text written.")
    table = benchlib.StreamTable(["trace", "events", "tree nodes"] + list(TREE_FORMATS),
                                 width=[8, 10] + [12] * len(TREE_FORMATS), first_width=18)
    table.start()
    out = {}
    for label, events, nodes, cells in rows:
        table.row([label, f"{events / 1e6:.1f}M" if events >= 1e6 else f"{events / 1e3:.1f}k",
                   "-" if nodes is None else f"{nodes:,}"] + [_cell(cells[f]) for f in TREE_FORMATS])
        out[label] = {"events": events, "nodes": nodes, "formats": cells}
    table.finish()
    return out
