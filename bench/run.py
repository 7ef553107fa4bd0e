"""The stackwatch benchmark runner (see bench/README.md).

Runs every workload (bench/workloads/*.py) plain and under every tracer, in
one process per run, one workload at a time:

  1. wall time: alternating runs (plain, then every tracer, in an order
     rotated each round) of the in-process time of the measured region
     (tracer start, workload, tracer stop, output file written); each cell
     gets 2-7 runs, capped by time (bench/benchlib.py), so a tracer that
     slows the program 30x gets two;
  2. instructions: one run per tracer under ``valgrind --tool=callgrind``,
     counting only the measured region, at a smaller size, two at a time
     (counts are deterministic and do not depend on the load);

and prints that workload's row of the table as soon as it is measured (wall
x / instr x and the runs behind each median), then the geometric means.
Then the task events section (bench/tasks.py: 10,000 asyncio tasks and a
thread-heavy queue program with and without task events, beside VizTracer's
log_async and yappi's coroutine mode), the big-trace section (bench/big_traces.py: time and peak memory of
`stats` and the exports of recorded traces, the largest over 100M events,
and the exports' bytes per event) the sampling profilers' section
(bench/profilers.py), streamed the same way, and the outside section
(bench/outside.py: `record --pid` beside py-spy and Austin). Every raw number goes to
out/bench/results.json, rewritten after each row. A tracer or a run that fails is shown as "n/a" with its reason; it
never stops the benchmark.

    python bench/run.py [--quick] [--rounds N] [--cell-seconds S] [--jobs N] [--out PATH]
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib
import big_traces
import kernel_events
import outside
import profilers
import tasks

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS_DIR = os.path.join(HERE, "workloads")

TRACERS = ("null", "stackwatch", "cprofile", "viztracer", "pyinstrument", "yappi")
EXTRA_TRACERS = ("nullhook",)   # only when named in --tracers
# A wall cell runs again (up to --rounds) only while its runs so far, plus
# one more, fit in this many seconds of whole-process time.
CELL_SECONDS = 5.0
LABELS = {"none": "plain", "null": "null", "nullhook": "null hook", "stackwatch": "stackwatch", "cprofile": "cProfile",
          "viztracer": "viztracer", "pyinstrument": "pyinstrument", "yappi": "yappi"}
# The PyPI distribution a tracer comes from (None: stdlib or bench-only).
DISTS = {"stackwatch": "stackwatch", "viztracer": "viztracer", "pyinstrument": "pyinstrument",
         "yappi": "yappi", "null": "stackwatch-bench-nulltracer", "nullhook": "stackwatch-bench-nulltracer"}


class Workload:
    def __init__(self, name, label, script, args, wall, cg, quick_wall, quick_cg, warmup=None, cg_slow=None):
        self.name, self.label, self.script, self.args = name, label, script, args
        self.sizes = {"wall": wall, "cg": cg, "quick_wall": quick_wall, "quick_cg": quick_cg}
        # VizTracer's callgrind run, about a quarter of the work of "cg"
        # (None: the workload has no smaller size), against a plain run there
        if cg_slow:
            self.sizes["cg_slow"] = cg_slow
        self.warmup = warmup or (lambda size: max(1, size // 10))

    def command(self, python, tracer, size, warmup, extra=()):
        cmd = [python, os.path.join(WORKLOADS_DIR, self.script), "--tracer", tracer,
               "--size", str(size)] + list(self.args) + list(extra)
        if warmup:
            cmd += ["--warmup-size", str(warmup)]
        return cmd


def _pp(program, wall, cg, quick_wall, quick_cg, unit, warmup=None, cg_slow=None):
    return Workload(f"pyperformance:{program}", f"{program}({{}}{unit})", "pyperformance_programs.py",
                    ["--program", program], wall, cg, quick_wall, quick_cg, warmup, cg_slow)


# Sizes: "wall" runs take ~0.1-0.15 s plain (VizTracer's JSON dump makes
# them ~20-80x longer); "cg" runs count ~30-140 M instructions plain;
# "cg_slow" (VizTracer's callgrind run) a quarter of that: its runs took
# half of all the callgrind time at "cg" (fib(25): 10 G instructions).
WORKLOADS = [
    Workload("fib", "fib({})", "fib.py", [], 29, 25, 22, 17, warmup=lambda n: max(2, n - 6), cg_slow=22),
    Workload("methods", "methods({})", "methods.py", [], 150_000, 5_000, 10_000, 1_000, cg_slow=1_250),
    Workload("asyncio", "asyncio({} tasks)", "asyncio_tasks.py", ["--awaits", "3"],
             5_000, 1_000, 1_000, 200, cg_slow=250),
    _pp("richards", 15_000, 1_000, 1_000, 200, " idle", cg_slow=250),
    _pp("deltablue", 20, 1, 2, 1, "x100"),
    _pp("raytrace", 50, 10, 10, 4, "px", warmup=lambda n: max(4, n // 4), cg_slow=5),
    _pp("go", 90, 5, 6, 1, " games", cg_slow=1),
    _pp("chaos", 7_500, 300, 500, 50, " it", cg_slow=75),
    _pp("json_dumps", 4, 1, 1, 1, "x"),
]
SLOW_CG = ("viztracer",)   # tracers counted at the "cg_slow" size


# ---------------------------------------------------------------------------
# running one workload process

def valgrind_options():
    """With the null tracer's client requests, interpreter start-up runs
    uninstrumented (much faster) and the region switches callgrind on;
    without them, --toggle-collect on the region's marker function."""
    try:
        import nulltracer
        requests = bool(getattr(nulltracer, "CALLGRIND_REQUESTS", 0))
    except ImportError:
        requests = False
    if requests:
        return ["--instr-atstart=no", "--collect-atstart=no"]
    return ["--collect-atstart=no", "--toggle-collect=nulltracer_region"]


VALGRIND_OPTIONS = None

# Under valgrind the client's stack starts at a fixed address, below the
# argument and environment strings: their total size moves the stack pointer,
# so the alignment of everything on the stack, and with it the count (plain
# richards on 3.12: 53.6 M or 54.9 M instructions, 2.4% apart, for
# environments 8 or 16 bytes apart; repeating with a 32-byte period). So a
# callgrind run gets a fixed environment, padded to a fixed total size with
# the client's arguments: counts do not depend on who started the run, nor on
# the checkout's path.
CG_STRINGS = 4096


def callgrind_env(client_cmd):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/"),
           "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    used = (sum(len(a) + 1 for a in client_cmd) + len(client_cmd[0]) + 1   # argv, and the exe's path
            + sum(len(k) + len(v) + 2 for k, v in env.items()) + len("SWBENCH_PAD=") + 1)
    env["SWBENCH_PAD"] = "x" * (CG_STRINGS * (used // CG_STRINGS + 1) - used)
    return env


def run_once(cmd, timeout, valgrind_out=None, whole_process=False):
    """Runs one workload process. Returns its result dict; on a failure the
    dict has "error" (a one-line reason). whole_process: callgrind counts
    every thread from the start (not the region's thread alone)."""
    tmp = tempfile.mkdtemp(prefix="swbench-")
    result_path = os.path.join(tmp, "result.json")
    full = list(cmd) + ["--out-dir", os.path.join(tmp, "out"), "--result", result_path]
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    if valgrind_out:
        global VALGRIND_OPTIONS
        if VALGRIND_OPTIONS is None:
            VALGRIND_OPTIONS = valgrind_options()
        env = callgrind_env(full)
        full = (["valgrind", "--tool=callgrind", f"--callgrind-out-file={valgrind_out}", "-q"]
                + ([] if whole_process else VALGRIND_OPTIONS) + full)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=timeout, cwd=tmp)
        elapsed = time.perf_counter() - t0
        res = None
        if os.path.exists(result_path):
            with open(result_path) as f:
                res = json.load(f)
        if res is None:
            tail = _tail(p.stderr) or _tail(p.stdout) or f"exit status {p.returncode}"
            res = {"error": f"no result (exit {p.returncode}): {tail}"}
        elif p.returncode != 0 and "error" not in res:
            res["error"] = f"exit status {p.returncode}: {_tail(p.stderr)}"
        res["process_seconds"] = elapsed
        err = p.stderr.decode(errors="replace").strip()
        if err:
            res["stderr"] = err[-2000:]
        return res
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    except OSError as e:
        return {"error": f"cannot run: {e}"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tail(data):
    lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else ""


def callgrind_counts(path):
    """(instructions in the region, instructions in the workload alone)."""
    total = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("totals:"):
                total = int(line.split()[1])
    workload = None
    try:
        out = subprocess.run(["callgrind_annotate", "--inclusive=yes", path],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=300).stdout
        for line in out.decode(errors="replace").splitlines():
            if line.rstrip().endswith("]") and ":nulltracer_workload " in line:
                workload = int(line.split()[0].replace(",", ""))
                break
    except (OSError, subprocess.TimeoutExpired, ValueError):
        pass
    return total, workload


# ---------------------------------------------------------------------------
# the measurements, one workload at a time

def preflight(python, tracers, unavailable, log):
    """A tiny traced run per tracer: a tracer that cannot run at all is
    marked n/a once, with its reason, instead of failing every cell."""
    fib = WORKLOADS[0]
    for t in ("none",) + tracers:
        if t in unavailable:
            continue
        res = run_once(fib.command(python, t, 12, 0), timeout=300)
        if "error" in res:
            unavailable[t] = res["error"]
            log(f"  {LABELS[t]}: n/a ({res['error']})")


def wall_workload(python, w, order, rounds, quick):
    """Alternating rounds of the region's wall time, capped by time per cell."""
    size = w.sizes["quick_wall" if quick else "wall"]
    warm = w.warmup(size)
    runs = benchlib.alternate(order, lambda t: run_once(w.command(python, t, size, warm), timeout=900),
                              rounds)
    return {"size": size, "warmup_size": warm, "runs": runs}


# A quick run counts instructions for these only (a smoke test of the path).
QUICK_CALLGRIND = ("fib", "methods", "asyncio", "pyperformance:richards")


def callgrind_workload(python, w, order, size, jobs, log, repeat=(), slow_size=None):
    """One callgrind run per tracer, `jobs` at a time; the tracers named in
    `repeat` run 3 times and keep the run with the median count (stackwatch's
    count moves by ~0.1%, once seen by 4%, from run to run; plain's and the
    null tracer's by ~0.03%). pyinstrument samples by wall time: its interval
    is stretched by callgrind's slowdown of the plain run (plain under
    callgrind vs natively at the same size), so it samples about as often per
    unit of work as natively (its count stays approximate). The tracers in
    SLOW_CG run at `slow_size` (when given), with a plain run of their own
    there ("none@slow")."""
    cgdir = tempfile.mkdtemp(prefix="swbench-cg-")
    out = {"size": size, "runs": {}}
    slow = [t for t in order if t in SLOW_CG] if slow_size and slow_size != size else []
    if slow:
        out["slow_size"] = slow_size

    def one(t, extra=(), i=0):
        cgout = os.path.join(cgdir, f"{w.name.replace(':', '_')}.{t}.{i}.cg")
        tracer, n = (t.split("@")[0], slow_size) if t.endswith("@slow") or t in slow else (t, size)
        t0 = time.perf_counter()
        res = run_once(w.command(python, tracer, n, 0, extra), timeout=1800, valgrind_out=cgout)
        res["valgrind_seconds"] = time.perf_counter() - t0
        if "error" not in res:
            if os.path.exists(cgout):
                res["instructions"], res["instructions_workload"] = callgrind_counts(cgout)
                if not res["instructions"]:
                    res["error"] = "callgrind counted nothing (marker not found?)"
            else:
                res["error"] = "callgrind wrote no output"
        try:
            os.unlink(cgout)
        except OSError:
            pass
        if "error" in res:
            log(f"  {w.name} / {LABELS[tracer]} under callgrind: {res['error']}")
        return res

    try:
        native = [run_once(w.command(python, "none", size, 0), timeout=300) for _ in range(3)]
        out["native_plain_seconds"] = _median(native)
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            plain = ex.submit(one, "none")
            # the longest first (VizTracer's dump), so the jobs finish together
            rest = sorted((t for t in order if t not in ("none", "pyinstrument")), key=lambda t: t != "viztracer")
            futures = {t: [ex.submit(one, t, (), i) for i in range(REPEATS if t in repeat else 1)] for t in rest}
            if slow:
                futures["none@slow"] = [ex.submit(one, "none@slow")]
            out["runs"]["none"] = p = plain.result()
            slowdown = None
            if p.get("seconds") and out["native_plain_seconds"]:
                slowdown = p["seconds"] / out["native_plain_seconds"]
            out["callgrind_slowdown"] = slowdown
            if "pyinstrument" in order:
                interval = 0.001 * (slowdown or 50.0)
                out["pyinstrument_interval"] = interval
                futures["pyinstrument"] = [ex.submit(one, "pyinstrument",
                                                     ("--pyinstrument-interval", f"{interval:.6f}"))]
            for t, fs in futures.items():
                out["runs"][t] = _median_run([f.result() for f in fs])
    finally:
        shutil.rmtree(cgdir, ignore_errors=True)
    return out


REPEATS = 3   # callgrind runs of a tracer named in --cg-repeat


def _median_run(runs):
    """Of repeated callgrind runs, the one with the median count (with every
    count in "instructions_runs"); a single run as it is."""
    if len(runs) == 1:
        return runs[0]
    ok = sorted((r for r in runs if r.get("instructions")), key=lambda r: r["instructions"])
    if not ok:
        return runs[0]
    res = dict(ok[(len(ok) - 1) // 2])
    res["instructions_runs"] = [r.get("instructions") for r in runs]
    return res


# ---------------------------------------------------------------------------
# one row: summary and cells

def summarize_row(w, tracers, wall_w, cg_w, unavailable, na_instr=None):
    """The numbers of one workload's row (ratios to plain)."""
    row = {"label": w.label.format(wall_w["size"] if wall_w else (cg_w or {}).get("size", "?")),
           "cells": {}}
    wr = (wall_w or {}).get("runs", {})
    cr = (cg_w or {}).get("runs", {})
    plain_wall = _median(wr.get("none", []))
    plain_cg = cr.get("none", {})
    row["plain_seconds"] = plain_wall
    row["plain_instructions"] = plain_cg.get("instructions")
    row["plain_rounds"] = len([r for r in wr.get("none", []) if "error" not in r])
    for t in ("none",) + tracers:
        cell = {}
        if t in unavailable:
            cell["na"] = unavailable[t]
            row["cells"][t] = cell
            continue
        runs = wr.get(t, [])
        errs = [r["error"] for r in runs if "error" in r]
        med = _median(runs)
        if errs:
            cell["na_wall"] = errs[0]
        cell["wall_seconds"] = med
        cell["wall_samples"] = [r.get("seconds") for r in runs if "error" not in r]
        cell["rounds"] = len(cell["wall_samples"])
        if med and plain_wall:
            cell["wall_ratio"] = med / plain_wall
        c = cr.get(t)
        base = cr.get("none@slow", {}) if t in SLOW_CG and "slow_size" in (cg_w or {}) else plain_cg
        if c is None and na_instr:
            cell["na_instr"] = na_instr
        if c is not None:
            if "error" in c:
                cell["na_instr"] = c["error"]
            cell["instructions"] = c.get("instructions")
            cell["instructions_workload"] = c.get("instructions_workload")
            if c.get("instructions") and base.get("instructions"):
                cell["instr_ratio"] = c["instructions"] / base["instructions"]
            if c.get("instructions_workload") and base.get("instructions_workload"):
                cell["instr_ratio_while_tracing"] = (c["instructions_workload"]
                                                     / base["instructions_workload"])
        if t in ("stackwatch", "null"):
            ok = [r for r in runs if "error" not in r and r.get("events")]
            if ok:
                r = ok[0]
                cell["events"] = r["events"]
                if t == "stackwatch":
                    cell["file_bytes"] = r.get("file_bytes")
                    cell["dropped"] = r.get("dropped")
                    cell["trace_error"] = r.get("trace_error")
                    if r.get("file_bytes"):
                        cell["bytes_per_event"] = r["file_bytes"] / r["events"]
        row["cells"][t] = cell
    sw, nl = row["cells"].get("stackwatch", {}), row["cells"].get("null", {})
    if sw.get("events") and nl.get("events"):
        row["events_sw_vs_null"] = sw["events"] / nl["events"]
    if sw.get("instructions") and nl.get("instructions"):
        row["sw_vs_floor_instr"] = sw["instructions"] / nl["instructions"]
    if sw.get("wall_seconds") and nl.get("wall_seconds"):
        row["sw_vs_floor_wall"] = sw["wall_seconds"] / nl["wall_seconds"]
    return row


def row_notes(name, row, wall_w):
    notes = []
    sw = row["cells"].get("stackwatch", {})
    if sw.get("dropped") or sw.get("trace_error"):
        notes.append(f"! stackwatch on {name}: dropped {sw.get('dropped')} events, "
                     f"error {sw.get('trace_error')!r}")
    vz = [r for r in (wall_w or {}).get("runs", {}).get("viztracer", []) if r.get("overflow")]
    if vz:
        notes.append(f"! viztracer on {name}: its buffer overflowed ({vz[0].get('events')} "
                     "entries): it dropped early events, so it did less work than the others")
    ratio = row.get("events_sw_vs_null")
    if ratio and abs(ratio - 1) > 0.001:
        notes.append(f"events on {name}: stackwatch {sw['events']}, null hook "
                     f"{row['cells']['null']['events']} ({ratio:.3f}x; see bench/README.md)")
    return notes


def _median(runs):
    return benchlib.median_seconds(runs)


_fmt_ratio = benchlib.fmt_ratio
_geomean = benchlib.geomean


class TracerTable(benchlib.StreamTable):
    """The tracer table: rows = workloads, cells = 'wall x / instr x rN'
    (only the half that was measured with --no-wall or --no-callgrind)."""

    def __init__(self, tracers, with_wall, with_cg):
        self.tracers, self.with_wall, self.with_cg = tracers, with_wall, with_cg
        plain = " / ".join(x for x, on in (("plain ms", with_wall), ("Minstr", with_cg)) if on)
        head = ["workload", plain] + [LABELS[t] for t in tracers] + ["sw B/ev", "sw vs floor"]
        super().__init__(head, width=[17 if with_wall else 8] + [15 if with_wall else 8] * len(tracers) + [7, 11],
                         first_width=20)

    def _pair(self, wall, instr):
        return " / ".join(x for x, on in ((wall, self.with_wall), (instr, self.with_cg)) if on)

    def _value(self, x, fmt, reason):
        return fmt(x) if x else (self.mark(reason) if reason else "n/a")

    def cells(self, row):
        pc = row["cells"].get("none", {})
        ps, pi = row["plain_seconds"], row["plain_instructions"]
        plain = self._pair(self._value(ps, lambda x: f"{x * 1e3:.0f}", pc.get("na_wall") or pc.get("na")),
                           self._value(pi, lambda x: f"{x / 1e6:.0f}", pc.get("na_instr")))
        if ps:
            plain += f" r{row['plain_rounds']}"
        cells = [row["label"], plain]
        for t in self.tracers:
            c = row["cells"].get(t, {})
            if "na" in c:
                cells.append(self.mark(c["na"]))
                continue
            cell = self._pair(self._value(c.get("wall_ratio"), _fmt_ratio, c.get("na_wall")),
                              self._value(c.get("instr_ratio"), _fmt_ratio, c.get("na_instr")))
            cells.append(cell + (f" r{c['rounds']}" if c.get("rounds") else ""))
        sw = row["cells"].get("stackwatch", {})
        cells.append(f"{sw['bytes_per_event']:.2f}" if sw.get("bytes_per_event") else "n/a")
        cells.append(_fmt_ratio(row.get("sw_vs_floor_instr")))
        return cells

    def closing(self, rows, notes):
        """The geometric means over the workloads."""
        gm = ["geometric mean", ""]
        for t in self.tracers:
            wr = [r["cells"].get(t, {}).get("wall_ratio") for r in rows.values()] if self.with_wall else []
            ir = [r["cells"].get(t, {}).get("instr_ratio") for r in rows.values()] if self.with_cg else []
            if not any(wr) and not any(ir):
                gm.append("n/a")
                continue
            cell = self._pair(_fmt_ratio(_geomean(wr)), _fmt_ratio(_geomean(ir)))
            if not (all(wr) and all(ir)):
                cell += "*"
                notes.append("* geometric mean over the workloads with a number only")
            gm.append(cell)
        bpe = [r["cells"].get("stackwatch", {}).get("bytes_per_event") for r in rows.values()]
        gm.append(f"{_geomean(bpe):.2f}" if any(bpe) else "n/a")
        gm.append(_fmt_ratio(_geomean([r.get("sw_vs_floor_instr") for r in rows.values()])))
        return gm


def print_tracer_legend(rounds, with_wall):
    print()
    if with_wall:
        print(f"cells: wall x / instr x rN, ratios to plain. wall: median of N alternating runs ({rounds.describe()})")
        print("of the region tracer start .. output written; instr: callgrind instructions of the same "
              "region at a smaller size, one run.")
    else:
        print("cells: wall x / instr x, ratios to plain (instr: callgrind instructions of the region "
              "tracer start .. output written, one run).")
    print("sw B/ev: stackwatch file bytes / events. sw vs floor: stackwatch instructions / null-tracer "
          "instructions (null = PEP 523 hook")
    print("+ rdtsc + 16-byte ring store; on 3.13 also sys.monitoring PY_START/PY_RETURN on inlinable "
          "__init__ codes, as stackwatch).")
    print(flush=True)


def print_tracer_footer(rows, tracers, notes, cg_sizes):
    for n in dict.fromkeys(notes):
        print(n)
    wt = []
    for t in tracers:
        vals = [r["cells"].get(t, {}).get("instr_ratio_while_tracing") for r in rows.values()]
        if any(vals):
            wt.append(f"{LABELS[t]} {_fmt_ratio(_geomean(vals))}")
    if wt:
        print("instr x while tracing only (before stop and dump), geometric mean: " + ", ".join(wt))
    if cg_sizes:
        print("callgrind sizes: " + ", ".join(f"{n.split(':')[-1]} {s}" for n, s in cg_sizes.items()))
    print("viztracer: end to end, including its JSON dump. pyinstrument samples every 1 ms of wall "
          "time; under callgrind its interval is")
    print("stretched by callgrind's slowdown, so its instr x is approximate. yappi: its default "
          "CPU clock. See bench/README.md.", flush=True)


# ---------------------------------------------------------------------------
# machine info

def machine_info(python):
    info = {"python": sys.version.replace("\n", " "), "python_executable": python,
            "implementation": platform.python_implementation(),
            "platform": platform.platform(), "machine": platform.machine(),
            "hostname": platform.node(), "cpus": os.cpu_count(),
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            info["cpu"] = m.group(1).strip() if m else None
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"^MemTotal:\s*(\d+) kB", f.read(), re.M)
            info["memory_gib"] = round(int(m.group(1)) / 2**20, 1) if m else None
    except OSError:
        pass
    try:
        info["valgrind"] = subprocess.run(["valgrind", "--version"], stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL).stdout.decode().strip()
    except OSError:
        info["valgrind"] = None
    versions = {}
    try:
        from importlib import metadata
        for dist in ("stackwatch", "viztracer", "pyinstrument", "yappi", "pyperf", "pyperformance", "py-spy"):
            try:
                versions[dist] = metadata.version(dist)
            except Exception:
                versions[dist] = None
    except ImportError:
        pass
    info["versions"] = versions
    return info


def _loadavg():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def read_peer_status(path):
    """bench.sh's record of peers that failed to install: 'name<TAB>reason'."""
    out = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, _, reason = line.rstrip("\n").partition("\t")
                if name and reason:
                    out[name] = reason
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes, 2 rounds: a smoke run")
    p.add_argument("--rounds", type=int, default=None,
                   help="at most this many alternating wall runs per cell (default 7, quick 2)")
    p.add_argument("--min-rounds", type=int, default=None,
                   help="at least this many wall runs per cell, whatever they cost (default 2)")
    p.add_argument("--cell-seconds", type=float, default=None,
                   help="a cell runs again only while its runs fit in this many seconds (default "
                        f"{CELL_SECONDS:g}; profilers {profilers.CELL_SECONDS:g})")
    p.add_argument("--jobs", type=int, default=2, help="callgrind runs at once (default 2)")
    p.add_argument("--cg-repeat", default="",
                   help=f"comma-separated tracers whose callgrind run is done {REPEATS} times (median kept)")
    p.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "results.json"))
    p.add_argument("--workloads", default=None, help="comma-separated subset of workload names")
    p.add_argument("--tracers", default=None, help="comma-separated subset of " + ",".join(TRACERS))
    p.add_argument("--no-callgrind", action="store_true", help="wall times only (the task section too)")
    p.add_argument("--no-wall", action="store_true", help="instruction counts only")
    p.add_argument("--peer-status", default=None, help="file of peers that failed to install")
    p.add_argument("--no-profilers", action="store_true", help="skip the sampling-profiler section")
    p.add_argument("--no-big-traces", action="store_true",
                   help="skip the big-trace section (stats and exports of recorded traces)")
    p.add_argument("--no-outside", action="store_true",
                   help="skip the outside section (bench/outside.py: record --pid beside py-spy and Austin)")
    p.add_argument("--outside-only", action="store_true", help="only the outside section (bench/outside.py)")
    p.add_argument("--no-kernel", action="store_true",
                   help="skip the kernel-events and native-functions section (bench/kernel_events.py)")
    p.add_argument("--profilers-only", action="store_true",
                   help="only the sampling-profiler section (bench/profilers.py)")
    p.add_argument("--no-tasks", action="store_true", help="skip the task events section (bench/tasks.py)")
    p.add_argument("--tasks-only", action="store_true", help="only the task events section (bench/tasks.py)")
    args = p.parse_args()

    max_rounds = args.rounds or (2 if args.quick else 7)
    min_rounds = args.min_rounds or (max_rounds if args.quick else 2)
    rounds = benchlib.Rounds(min_rounds, max_rounds,
                             args.cell_seconds if args.cell_seconds is not None else CELL_SECONDS)
    workloads = WORKLOADS
    if args.workloads:
        want = args.workloads.split(",")
        workloads = [w for w in WORKLOADS if w.name in want or w.name.split(":")[-1] in want]
    tracers = TRACERS if not args.tracers else tuple(t for t in TRACERS + EXTRA_TRACERS
                                                     if t in args.tracers.split(","))
    python = sys.executable

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    info = machine_info(python)
    print(f"stackwatch benchmark ({'QUICK smoke run' if args.quick else 'full run'}), {info['date']}")
    print(f"Python {info['python']} ({python})")
    print(f"machine: {info.get('cpu')}, {info['cpus']} CPUs, {info.get('memory_gib')} GiB, {info['platform']}")
    print(f"{info.get('valgrind') or 'valgrind: not found'}; "
          + ", ".join(f"{k} {v or 'not installed'}" for k, v in info["versions"].items()))
    load_before = _loadavg()
    print(f"load average: {load_before} (other processes on this machine make wall times noisy)", flush=True)
    unavailable = {}
    for t, reason in read_peer_status(args.peer_status).items():
        if t in tracers:
            unavailable[t] = reason
    if shutil.which("valgrind") is None and not args.no_callgrind:
        log("valgrind not found: no instruction counts")
        args.no_callgrind = True
    profilers_cg = not args.no_callgrind   # (the profilers' callgrind line runs with --profilers-only too)
    tasks_cg = not args.no_callgrind       # (and the task section's with --tasks-only)
    if args.profilers_only:
        args.no_wall = args.no_callgrind = args.no_big_traces = args.no_tasks = args.no_outside = args.no_kernel = True
    if args.tasks_only:
        args.no_wall = args.no_callgrind = args.no_big_traces = args.no_profilers = args.no_outside = args.no_kernel = True
    if args.outside_only:
        args.no_tasks = True
        args.no_wall = args.no_callgrind = args.no_big_traces = args.no_profilers = args.no_kernel = True

    t0 = time.perf_counter()
    sections = {}
    wall, cg, rows, notes, prof, big, out, kern, task_res = {}, {}, {}, [], {}, {}, {}, {}, {}

    def save(done):
        """results.json, rewritten after every row: an interrupted run keeps
        what it measured."""
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        doc = {"quick": args.quick, "complete": done, "rounds": rounds.as_dict(), "machine": info,
               "unavailable": unavailable, "notes": list(dict.fromkeys(notes)),
               "workloads": {w.name: {"label": w.label, "script": w.script, "args": w.args,
                                      "sizes": w.sizes} for w in workloads},
               "summary": rows, "wall": wall, "callgrind": cg, "profilers": prof, "big_traces": big, "outside": out,
               "kernel": kern, "tasks": task_res,
               "section_seconds": sections, "elapsed_seconds": time.perf_counter() - t0}
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, args.out)

    if not args.outside_only:   # (the outside section runs no workload)
        log("preflight (a tiny run per tracer) ...")
        preflight(python, tracers, unavailable, log)
        if "none" in unavailable:
            print(f"the workloads cannot run at all: {unavailable['none']}")
            return 1
    sections["preflight"] = time.perf_counter() - t0

    if not (args.no_wall and args.no_callgrind):
        ts = time.perf_counter()
        order = [t for t in ("none",) + tracers if t not in unavailable]
        table = TracerTable(tracers, not args.no_wall, not args.no_callgrind)
        print_tracer_legend(rounds, not args.no_wall)
        table.start()
        cg_sizes = {}
        for w in workloads:
            tw = time.perf_counter()
            if not args.no_wall:
                wall[w.name] = wall_workload(python, w, order, rounds, args.quick)
            na_instr = None
            if not args.no_callgrind:
                if args.quick and w.name not in QUICK_CALLGRIND:
                    na_instr = ("quick run: instructions counted for "
                                + ", ".join(n.split(":")[-1] for n in QUICK_CALLGRIND) + " only")
                else:
                    size = w.sizes["quick_cg" if args.quick else "cg"]
                    slow_size = None if args.quick else w.sizes.get("cg_slow")
                    cg[w.name] = callgrind_workload(python, w, order, size, args.jobs, log,
                                                    args.cg_repeat.split(","), slow_size)
                    cg_sizes[w.name] = f"{size} (viztracer {slow_size})" if "slow_size" in cg[w.name] else size
            rows[w.name] = row = summarize_row(w, tracers, wall.get(w.name), cg.get(w.name), unavailable,
                                               na_instr)
            row["seconds_measuring"] = time.perf_counter() - tw
            notes += row_notes(w.name, row, wall.get(w.name))
            table.row(table.cells(row))
            save(False)
        table.finish(table.closing(rows, notes))
        print()
        print_tracer_footer(rows, tracers, notes, cg_sizes)
        sections["tracers"] = time.perf_counter() - ts
        print(f"(tracer table: {sections['tracers'] / 60:.1f} min)", flush=True)

    if not args.no_tasks and "stackwatch" not in unavailable:
        ts = time.perf_counter()
        peers = {f"{t}_{mode}": unavailable[t] for t, mode in (("viztracer", "async"), ("yappi", "coro"))
                 if t in unavailable}
        task_res.update(tasks.section(run_once, callgrind_counts, WORKLOADS_DIR, python, rounds, args.quick,
                                      tasks_cg and not args.quick and shutil.which("valgrind") is not None, peers, log,
                                      lambda: save(False)))
        sections["tasks"] = time.perf_counter() - ts
        print(f"(task events: {sections['tasks'] / 60:.1f} min)", flush=True)

    if not args.no_big_traces and "stackwatch" not in unavailable:
        ts = time.perf_counter()
        big.update(big_traces.section({w.name: w for w in WORKLOADS}, python, args.quick, log,
                                      lambda: save(False)))
        sections["big_traces"] = time.perf_counter() - ts
        print(f"(big traces: {sections['big_traces'] / 60:.1f} min)", flush=True)

    if not args.no_profilers:
        ts = time.perf_counter()
        prounds = benchlib.Rounds(min_rounds if args.min_rounds or args.quick else 2,
                                  args.rounds or (2 if args.quick else 5),
                                  args.cell_seconds if args.cell_seconds is not None else profilers.CELL_SECONDS)
        prof.update(profilers.section(run_once, {w.name: w for w in WORKLOADS}, python, prounds,
                                      args.quick, log, lambda: save(False), callgrind_counts, profilers_cg))
        sections["profilers"] = time.perf_counter() - ts
        print(f"(sampling profilers: {sections['profilers'] / 60:.1f} min)", flush=True)

    if not args.no_outside:
        ts = time.perf_counter()
        out.update(outside.section(python, args.quick, log, lambda: save(False)))
        sections["outside"] = time.perf_counter() - ts
        print(f"(outside: {sections['outside'] / 60:.1f} min)", flush=True)

    if not args.no_kernel and "stackwatch" not in unavailable:
        ts = time.perf_counter()
        krounds = benchlib.Rounds(min_rounds if args.min_rounds or args.quick else 2,
                                  args.rounds or (1 if args.quick else 5),
                                  args.cell_seconds if args.cell_seconds is not None else kernel_events.CELL_SECONDS)
        kern.update(kernel_events.section(python, krounds, args.quick, log, lambda: save(False)))
        sections["kernel"] = time.perf_counter() - ts
        print(f"(kernel events and native functions: {sections['kernel'] / 60:.1f} min)", flush=True)

    elapsed = time.perf_counter() - t0
    print()
    print("raw numbers, per-run samples, 'while tracing' (before stop/dump) instruction ratios: "
          + os.path.relpath(args.out, os.getcwd()))
    print(f"benchmark time: {elapsed / 60:.1f} min; load average before {load_before}, "
          f"after {_loadavg()}", flush=True)
    save(True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
