"""The stackwatch benchmark runner (see bench/README.md).

Runs every workload (bench/workloads/*.py) plain and under every tracer, in
one process per run:

  1. wall time: rounds of alternating runs (plain, then every tracer, in an
     order rotated each round), the in-process time of the measured region
     (tracer start, workload, tracer stop, output file written);
  2. instructions: one run per (workload, tracer) under
     ``valgrind --tool=callgrind``, counting only the measured region
     (``--toggle-collect`` on the null tracer's marker function), at a
     smaller size, two at a time (counts do not depend on the load);

then prints one table (ratios to plain) and writes every raw number to
out/bench/results.json. A tracer or a run that fails is shown as "n/a" with
its reason; it never stops the benchmark.

    python bench/run.py [--quick] [--rounds N] [--jobs N] [--out PATH]
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS_DIR = os.path.join(HERE, "workloads")

TRACERS = ("null", "stackwatch", "cprofile", "viztracer", "pyinstrument", "yappi")
EXTRA_TRACERS = ("nullhook",)   # only when named in --tracers
LABELS = {"none": "plain", "null": "null", "nullhook": "null hook", "stackwatch": "stackwatch", "cprofile": "cProfile",
          "viztracer": "viztracer", "pyinstrument": "pyinstrument", "yappi": "yappi"}
# The PyPI distribution a tracer comes from (None: stdlib or bench-only).
DISTS = {"stackwatch": "stackwatch", "viztracer": "viztracer", "pyinstrument": "pyinstrument",
         "yappi": "yappi", "null": "stackwatch-bench-nulltracer", "nullhook": "stackwatch-bench-nulltracer"}


class Workload:
    def __init__(self, name, label, script, args, wall, cg, quick_wall, quick_cg, warmup=None):
        self.name, self.label, self.script, self.args = name, label, script, args
        self.sizes = {"wall": wall, "cg": cg, "quick_wall": quick_wall, "quick_cg": quick_cg}
        self.warmup = warmup or (lambda size: max(1, size // 10))

    def command(self, python, tracer, size, warmup, extra=()):
        cmd = [python, os.path.join(WORKLOADS_DIR, self.script), "--tracer", tracer,
               "--size", str(size)] + list(self.args) + list(extra)
        if warmup:
            cmd += ["--warmup-size", str(warmup)]
        return cmd


def _pp(program, wall, cg, quick_wall, quick_cg, unit, warmup=None):
    return Workload(f"pyperformance:{program}", f"{program}({{}}{unit})", "pyperformance_programs.py",
                    ["--program", program], wall, cg, quick_wall, quick_cg, warmup)


# Sizes: "wall" runs take ~0.1-0.15 s plain (VizTracer's JSON dump makes
# them ~20-80x longer); "cg" runs count ~30-140 M instructions plain.
WORKLOADS = [
    Workload("fib", "fib({})", "fib.py", [], 29, 25, 22, 17, warmup=lambda n: max(2, n - 6)),
    Workload("methods", "methods({})", "methods.py", [], 150_000, 5_000, 10_000, 1_000),
    Workload("asyncio", "asyncio({} tasks)", "asyncio_tasks.py", ["--awaits", "3"],
             5_000, 1_000, 1_000, 200),
    _pp("richards", 15_000, 1_000, 1_000, 200, " idle"),
    _pp("deltablue", 20, 1, 2, 1, "x100"),
    _pp("raytrace", 50, 10, 10, 4, "px", warmup=lambda n: max(4, n // 4)),
    _pp("go", 90, 5, 6, 1, " games"),
    _pp("chaos", 7_500, 300, 500, 50, " it"),
    _pp("json_dumps", 4, 1, 1, 1, "x"),
]


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


def run_once(cmd, timeout, valgrind_out=None):
    """Runs one workload process. Returns its result dict; on a failure the
    dict has "error" (a one-line reason)."""
    tmp = tempfile.mkdtemp(prefix="swbench-")
    result_path = os.path.join(tmp, "result.json")
    full = list(cmd) + ["--out-dir", os.path.join(tmp, "out"), "--result", result_path]
    if valgrind_out:
        global VALGRIND_OPTIONS
        if VALGRIND_OPTIONS is None:
            VALGRIND_OPTIONS = valgrind_options()
        full = (["valgrind", "--tool=callgrind", f"--callgrind-out-file={valgrind_out}", "-q"]
                + VALGRIND_OPTIONS + full)
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
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
# the phases

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


def wall_phase(python, workloads, tracers, rounds, quick, unavailable, log):
    out = {}
    order = [t for t in ("none",) + tracers if t not in unavailable]
    for w in workloads:
        size = w.sizes["quick_wall" if quick else "wall"]
        warm = w.warmup(size)
        runs = {t: [] for t in order}
        t_start = time.perf_counter()
        for r in range(rounds):
            k = r % len(order)
            for t in order[k:] + order[:k]:  # rotate so no tracer always runs first
                runs[t].append(run_once(w.command(python, t, size, warm), timeout=900))
        out[w.name] = {"size": size, "warmup_size": warm, "runs": runs}
        log(f"  {w.name:24s} {time.perf_counter() - t_start:6.1f} s")
    return out


# A quick run counts instructions for these only (a smoke test of the path).
QUICK_CALLGRIND = ("fib", "methods", "asyncio", "pyperformance:richards")


def callgrind_phase(python, workloads, tracers, quick, jobs, unavailable, log):
    order = [t for t in ("none",) + tracers if t not in unavailable]
    if quick:
        workloads = [w for w in workloads if w.name in QUICK_CALLGRIND]
    cgdir = tempfile.mkdtemp(prefix="swbench-cg-")
    size_of = {w.name: w.sizes["quick_cg" if quick else "cg"] for w in workloads}
    out = {w.name: {"size": size_of[w.name], "runs": {}} for w in workloads}

    def one(task):
        w, t, extra = task
        size = size_of[w.name]
        cgout = os.path.join(cgdir, f"{w.name.replace(':', '_')}.{t}.cg")
        t0 = time.perf_counter()
        res = run_once(w.command(python, t, size, 0, extra), timeout=1800, valgrind_out=cgout)
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
        return w, t, res

    def run_all(tasks):
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            for w, t, res in ex.map(one, tasks):
                out[w.name]["runs"][t] = res
                if "error" in res:
                    log(f"  {w.name} / {LABELS[t]}: {res['error']}")

    t_start = time.perf_counter()
    try:
        # 1. plain, natively and under callgrind, at the callgrind size: how
        #    much callgrind slows the workload down.
        for w in workloads:
            native = [run_once(w.command(python, "none", size_of[w.name], 0), timeout=300)
                      for _ in range(3)]
            out[w.name]["native_plain_seconds"] = _median(native)
        run_all([(w, "none", ()) for w in workloads])
        # 2. the tracers. pyinstrument samples by wall time: stretch its
        #    interval by that slowdown so it samples as often per unit of work
        #    as it does natively (its count stays approximate).
        tasks = []
        for w in workloads:
            plain = out[w.name]["runs"].get("none", {})
            slowdown = None
            if plain.get("seconds") and out[w.name]["native_plain_seconds"]:
                slowdown = plain["seconds"] / out[w.name]["native_plain_seconds"]
            out[w.name]["callgrind_slowdown"] = slowdown
            for t in order:
                if t == "none":
                    continue
                extra = ()
                if t == "pyinstrument":
                    interval = 0.001 * (slowdown or 50.0)
                    out[w.name]["pyinstrument_interval"] = interval
                    extra = ("--pyinstrument-interval", f"{interval:.6f}")
                tasks.append((w, t, extra))
        # the longest first (VizTracer's dump), so the jobs finish together
        tasks.sort(key=lambda x: x[1] != "viztracer")
        run_all(tasks)
    finally:
        shutil.rmtree(cgdir, ignore_errors=True)
    n = sum(len(v["runs"]) for v in out.values())
    log(f"  {n} callgrind runs in {time.perf_counter() - t_start:.1f} s")
    return out


# ---------------------------------------------------------------------------
# summary and table

def summarize(workloads, tracers, wall, cg, unavailable):
    rows = {}
    for w in workloads:
        row = {"label": w.label.format(wall[w.name]["size"] if w.name in wall else "?"),
               "cells": {}}
        wr = wall.get(w.name, {}).get("runs", {})
        cr = cg.get(w.name, {}).get("runs", {})
        plain_wall = _median(wr.get("none", []))
        plain_cg = cr.get("none", {})
        row["plain_seconds"] = plain_wall
        row["plain_instructions"] = plain_cg.get("instructions")
        for t in ("none",) + tracers:
            cell = {}
            if t in unavailable:
                cell["na"] = unavailable[t]
            else:
                runs = wr.get(t, [])
                errs = [r["error"] for r in runs if "error" in r]
                med = _median(runs)
                if errs:
                    cell["na_wall"] = errs[0]
                cell["wall_seconds"] = med
                cell["wall_samples"] = [r.get("seconds") for r in runs if "error" not in r]
                if med and plain_wall:
                    cell["wall_ratio"] = med / plain_wall
                c = cr.get(t)
                if c is None and cg.get("_skipped", {}).get(w.name):
                    cell["na_instr"] = cg["_skipped"][w.name]
                if c is not None:
                    if "error" in c:
                        cell["na_instr"] = c["error"]
                    cell["instructions"] = c.get("instructions")
                    cell["instructions_workload"] = c.get("instructions_workload")
                    if c.get("instructions") and plain_cg.get("instructions"):
                        cell["instr_ratio"] = c["instructions"] / plain_cg["instructions"]
                    if c.get("instructions_workload") and plain_cg.get("instructions_workload"):
                        cell["instr_ratio_while_tracing"] = (c["instructions_workload"]
                                                             / plain_cg["instructions_workload"])
                if t == "stackwatch":
                    ok = [r for r in runs if "error" not in r and r.get("events")]
                    if ok:
                        r = ok[0]
                        cell["events"] = r["events"]
                        cell["file_bytes"] = r.get("file_bytes")
                        cell["dropped"] = r.get("dropped")
                        cell["trace_error"] = r.get("trace_error")
                        if r.get("file_bytes"):
                            cell["bytes_per_event"] = r["file_bytes"] / r["events"]
                if t == "null":
                    ok = [r for r in runs if "error" not in r and r.get("events")]
                    if ok:
                        cell["events"] = ok[0]["events"]
            row["cells"][t] = cell
        sw, nl = row["cells"].get("stackwatch", {}), row["cells"].get("null", {})
        if sw.get("events") and nl.get("events"):
            row["events_sw_vs_null"] = sw["events"] / nl["events"]
        if sw.get("instructions") and nl.get("instructions"):
            row["sw_vs_floor_instr"] = sw["instructions"] / nl["instructions"]
        if sw.get("wall_seconds") and nl.get("wall_seconds"):
            row["sw_vs_floor_wall"] = sw["wall_seconds"] / nl["wall_seconds"]
        rows[w.name] = row
    return rows


def _median(runs):
    vals = [r["seconds"] for r in runs if "error" not in r and r.get("seconds") is not None]
    return statistics.median(vals) if vals else None


def _geomean(vals):
    vals = [v for v in vals if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def _fmt_ratio(x):
    if x is None:
        return "n/a"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def render_table(rows, tracers, notes):
    """One table: rows = workloads, cells = 'wall x / instr x' vs plain."""
    reasons = []

    def mark(reason):
        if reason not in reasons:
            reasons.append(reason)
        return f"n/a[{reasons.index(reason) + 1}]"

    head = ["workload", "plain ms / Minstr"] + [LABELS[t] for t in tracers] + ["sw B/ev", "sw vs floor"]
    lines = []
    for name, row in rows.items():
        ps, pi = row["plain_seconds"], row["plain_instructions"]
        pc = row["cells"].get("none", {})
        if ps:
            plain = f"{ps * 1e3:.0f}"
        else:
            plain = mark(pc.get("na_wall") or pc.get("na")) if (pc.get("na_wall") or pc.get("na")) else "n/a"
        if pi:
            plain += f" / {pi / 1e6:.0f}"
        else:
            plain += " / " + (mark(pc["na_instr"]) if pc.get("na_instr") else "n/a")
        cells = [row["label"], plain]
        for t in tracers:
            c = row["cells"].get(t, {})
            if "na" in c:
                cells.append(mark(c["na"]))
                continue
            wv = _fmt_ratio(c.get("wall_ratio")) if c.get("wall_ratio") else (
                mark(c["na_wall"]) if c.get("na_wall") else "n/a")
            iv = _fmt_ratio(c.get("instr_ratio")) if c.get("instr_ratio") else (
                mark(c["na_instr"]) if c.get("na_instr") else "n/a")
            cells.append(f"{wv} / {iv}")
        sw = row["cells"].get("stackwatch", {})
        cells.append(f"{sw['bytes_per_event']:.2f}" if sw.get("bytes_per_event") else "n/a")
        cells.append(_fmt_ratio(row.get("sw_vs_floor_instr")))
        lines.append(cells)
    # geometric means over the workloads
    gm = ["geometric mean", ""]
    for t in tracers:
        wr = [r["cells"].get(t, {}).get("wall_ratio") for r in rows.values()]
        ir = [r["cells"].get(t, {}).get("instr_ratio") for r in rows.values()]
        if all(wr) and all(ir) and wr:
            gm.append(f"{_fmt_ratio(_geomean(wr))} / {_fmt_ratio(_geomean(ir))}")
        elif any(wr) or any(ir):
            gm.append(f"{_fmt_ratio(_geomean(wr))} / {_fmt_ratio(_geomean(ir))}*")
            notes.append("* geometric mean over the workloads with a number only")
        else:
            gm.append("n/a")
    bpe = [r["cells"].get("stackwatch", {}).get("bytes_per_event") for r in rows.values()]
    gm.append(f"{_geomean(bpe):.2f}" if any(bpe) else "n/a")
    gm.append(_fmt_ratio(_geomean([r.get("sw_vs_floor_instr") for r in rows.values()])))
    lines.append(gm)

    widths = [max(len(str(x[i])) for x in [head] + lines) for i in range(len(head))]
    def fmt(cells):
        return "  ".join(str(c).ljust(widths[i]) if i == 0 else str(c).rjust(widths[i])
                         for i, c in enumerate(cells))
    out = [fmt(head), "  ".join("-" * w for w in widths)]
    out += [fmt(c) for c in lines[:-1]]
    out.append("  ".join("-" * w for w in widths))
    out.append(fmt(lines[-1]))
    for i, r in enumerate(reasons):
        out.append(f"[{i + 1}] {r}")
    return "\n".join(out)


def print_tracer_table(rows, tracers, notes, rounds, wall, cg, workloads):
    """The tracer table (wall and instruction ratios) and its notes."""
    table = render_table(rows, tracers, notes)
    print()
    print(f"cells: wall x / instr x, ratios to plain (wall: median of {rounds} alternating runs of the "
          "region tracer start .. output written;")
    print("instr: callgrind instructions of the same region at a smaller size). sw B/ev: stackwatch "
          "file bytes / events.")
    print("sw vs floor: stackwatch instructions / null-tracer instructions (null = PEP 523 hook + "
          "rdtsc + 16-byte ring store;")
    print("on 3.13 also sys.monitoring PY_START/PY_RETURN on inlinable __init__ codes, as stackwatch).")
    print()
    print(table)
    print()
    for n in dict.fromkeys(notes):
        print(n)
    wt = []
    for t in tracers:
        vals = [r["cells"].get(t, {}).get("instr_ratio_while_tracing") for r in rows.values()]
        if any(vals):
            wt.append(f"{LABELS[t]} {_fmt_ratio(_geomean(vals))}")
    if wt:
        print("instr x while tracing only (before stop and dump), geometric mean: " + ", ".join(wt))
    if cg:
        print("callgrind sizes: " + ", ".join(
            f"{w.name.split(':')[-1]} {cg[w.name]['size']}" for w in workloads if w.name in cg))
    print("viztracer: end to end, including its JSON dump. pyinstrument samples every 1 ms of wall "
          "time; under callgrind its interval is")
    print("stretched by callgrind's slowdown, so its instr x is approximate. yappi: its default "
          "CPU clock. See bench/README.md.")


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
    p.add_argument("--rounds", type=int, default=None, help="alternating wall rounds (default 7, quick 2)")
    p.add_argument("--jobs", type=int, default=2, help="callgrind runs at once (default 2)")
    p.add_argument("--out", default=os.path.join(ROOT, "out", "bench", "results.json"))
    p.add_argument("--workloads", default=None, help="comma-separated subset of workload names")
    p.add_argument("--tracers", default=None, help="comma-separated subset of " + ",".join(TRACERS))
    p.add_argument("--no-callgrind", action="store_true", help="wall times only")
    p.add_argument("--no-wall", action="store_true", help="instruction counts only")
    p.add_argument("--peer-status", default=None, help="file of peers that failed to install")
    p.add_argument("--no-profilers", action="store_true", help="skip the sampling-profiler section")
    p.add_argument("--profilers-only", action="store_true",
                   help="only the sampling-profiler section (bench/profilers.py)")
    args = p.parse_args()

    rounds = args.rounds or (2 if args.quick else 7)
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
    sys.stdout.flush()

    load_before = _loadavg()
    print(f"load average: {load_before} (other processes on this machine make wall times noisy)")
    sys.stdout.flush()
    unavailable = {}
    for t, reason in read_peer_status(args.peer_status).items():
        if t in tracers:
            unavailable[t] = reason
    if shutil.which("valgrind") is None and not args.no_callgrind:
        log("valgrind not found: no instruction counts")
        args.no_callgrind = True

    t0 = time.perf_counter()
    log("preflight (a tiny run per tracer) ...")
    preflight(python, tracers, unavailable, log)
    if "none" in unavailable:
        print(f"the workloads cannot run at all: {unavailable['none']}")
        return 1
    if args.profilers_only:
        args.no_wall = args.no_callgrind = True
    if not args.no_wall:
        log(f"wall time: {rounds} alternating rounds per workload ...")
    wall = {} if args.no_wall else wall_phase(python, workloads, tracers, rounds, args.quick,
                                              unavailable, log)
    cg = {}
    if not args.no_callgrind:
        log(f"instructions: callgrind, {args.jobs} at a time ...")
        cg = callgrind_phase(python, workloads, tracers, args.quick, args.jobs, unavailable, log)
        if args.quick:
            cg["_skipped"] = {w.name: "quick run: instructions counted for "
                              + ", ".join(n.split(":")[-1] for n in QUICK_CALLGRIND) + " only"
                              for w in workloads if w.name not in QUICK_CALLGRIND}
    prof = {}
    if not args.no_profilers:
        import profilers
        prounds = args.rounds or (2 if args.quick else 5)
        log(f"sampling profilers: {prounds} alternating rounds per workload ...")
        prof["slowdown"] = profilers.slowdown(run_once, {w.name: w for w in WORKLOADS}, python, prounds,
                                              args.quick, log)
        prof["rounds"] = prounds
        log("sampler's highest rate on a 50-deep stack ...")
        prof["rate"] = profilers.max_rate(python, args.quick, log)
    elapsed = time.perf_counter() - t0

    rows = summarize(workloads, tracers, wall, cg, unavailable)
    notes = []
    for name, row in rows.items():
        sw = row["cells"].get("stackwatch", {})
        if sw.get("dropped") or sw.get("trace_error"):
            notes.append(f"! stackwatch on {name}: dropped {sw.get('dropped')} events, "
                         f"error {sw.get('trace_error')!r}")
        vz = [r for r in wall.get(name, {}).get("runs", {}).get("viztracer", []) if r.get("overflow")]
        if vz:
            notes.append(f"! viztracer on {name}: its buffer overflowed ({vz[0].get('events')} "
                         "entries): it dropped early events, so it did less work than the others")
        ratio = row.get("events_sw_vs_null")
        if ratio and abs(ratio - 1) > 0.001:
            notes.append(f"events on {name}: stackwatch {sw['events']}, null hook "
                         f"{row['cells']['null']['events']} ({ratio:.3f}x; see bench/README.md)")
    if wall or cg:
        print_tracer_table(rows, tracers, notes, rounds, wall, cg, workloads)
    if prof:
        import profilers
        print()
        print(f"sampling profilers: wall x = median region time / plain ({prof['rounds']} alternating rounds; "
              "region = profiler start .. output written,")
        print("for py-spy, outside the process, the workload alone); (N%) = samples taken / samples the "
              "rate asks for in that time (py-spy: whole process).")
        print("sw = stackwatch.profiler (wall mode: every thread, with its state); pyinstr = pyinstrument; "
              "py-spy record (default: pauses the process per sample), nb = --nonblocking.")
        print()
        print(profilers.render(prof, _fmt_ratio, _geomean))

    print("raw numbers, per-run samples, 'while tracing' (before stop/dump) instruction ratios: "
          + os.path.relpath(args.out, os.getcwd()))
    print(f"benchmark time: {elapsed / 60:.1f} min; load average before {load_before}, "
          f"after {_loadavg()}")

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    cg.pop("_skipped", None)
    doc = {"quick": args.quick, "rounds": rounds, "machine": info, "unavailable": unavailable,
           "notes": list(dict.fromkeys(notes)),
           "workloads": {w.name: {"label": w.label, "script": w.script, "args": w.args,
                                  "sizes": w.sizes} for w in workloads},
           "summary": rows, "wall": wall, "callgrind": cg, "profilers": prof, "elapsed_seconds": elapsed}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
