"""The sampling-profiler section of `make bench` (run by bench/run.py; see
bench/README.md):

1. slowdown: a few of the workloads, plain and under stackwatch's profiler
   (1 kHz and 10 kHz), pyinstrument (1 ms, its default, and 0.1 ms) and
   py-spy (`py-spy record --rate 1000 / 10000`, its default blocking mode,
   and --nonblocking), in alternating rounds. Each cell: the median of the
   measured region's wall time (profiler start .. output written; for
   py-spy, which runs outside the process, the workload alone) as a ratio
   to plain, and the samples the profiler took as a share of what its rate
   asks for in that time. Each cell gets 2-5 runs, capped by time
   (bench/benchlib.py): py-spy in blocking mode at 10 kHz, which can slow
   the program 10-14x, gets two. A workload's row is printed as soon as
   its cells are measured. Its last column, "thread 1k", is the program's
   thread cost at 1 kHz (bench/profiler_cost.py: the workload thread's CPU
   time profiled over plain, in alternating chunks in one process), which
   can show 1% where wall time cannot; a line after the table gives it for
   gen_shapes' tree walk too, with the parks per second and their cost;
   then the wall cost at 1 kHz within one run of fib, methods and richards
   (bench/profiler_within.py: windows with and without the profiler
   alternating, mean batch times, the median round), the figure for the
   1% target, and under it the floor: what a bare signal every millisecond
   costs a busy thread on this machine (bench/signal_floor.py), which no
   park can cost less than;
2. stackwatch at 1 kHz under callgrind (with_cg, not quick): the
   instructions of fib's thread in the region over plain's, the
   sampler's rate divided by callgrind's slowdown of plain's CPU time (so
   it samples as often per unit of work as natively), and again at ten
   times that rate: the stable figure of what sampling costs the
   program's own thread in code (callgrind collects per thread and the
   region is the program's: the sampler's thread is not counted; it runs
   one thread at a time, so no walk tears and nothing is parked there: a
   park's cost is the signal, the system calls and the wait, which it
   does not count);
3. the highest rate stackwatch's sampler sustains on a 50-deep stack with
   less than 1% of its ticks missed (bench/profiler_rate.py at rising
   rates, the median of a few runs per rate, up to the first rate that
   misses more), not counting the ticks of stalls over 2 ms, in which the
   sampler was kept off its CPU (`missed_off_cpu`: this VM stalls for
   4-10 ms now and then even when idle, and at 1 kHz one such stall a
   second is 1%); those are printed beside.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib
import profiler_cost
import profiler_within
import signal_floor

HERE = os.path.dirname(os.path.abspath(__file__))

# (name in run.WORKLOADS, full size, quick size): ~0.3-0.5 s plain at full size.
WORKLOADS = [("fib", 32, 27), ("methods", 500_000, 50_000), ("pyperformance:richards", 90_000, 10_000),
             ("pyperformance:raytrace", 100, 20)]

# label -> (tracer, extra workload args, py-spy arguments or None, rate asked in Hz)
CONFIGS = {
    "plain": ("none", [], None, None),
    "sw 1k": ("swprof", ["--profiler-rate", "1000"], None, 1000),
    "sw 10k": ("swprof", ["--profiler-rate", "10000"], None, 10000),
    "pyinstr 1ms": ("pyinstrument", ["--pyinstrument-interval", "0.001"], None, 1000),
    "pyinstr 0.1ms": ("pyinstrument", ["--pyinstrument-interval", "0.0001"], None, 10000),
    "py-spy 1k": ("none", [], ["--rate", "1000"], 1000),
    "py-spy 10k": ("none", [], ["--rate", "10000"], 10000),
    "py-spy nb 1k": ("none", [], ["--rate", "1000", "--nonblocking"], 1000),
    "py-spy nb 10k": ("none", [], ["--rate", "10000", "--nonblocking"], 10000),
}

# The program's thread cost at 1 kHz (issue 20: within 1%): chunk pairs
# per workload (bench/profiler_cost.py; ~3-5 s a workload at full size).
COST_CHUNKS = 12
COST_COLUMN = "program's thread cost at 1 kHz"

# A cell runs again (up to 5 runs) only while its runs so far, plus one
# more, fit in this many seconds of whole-process time.
CELL_SECONDS = 4.0

RATES = (1000, 2000, 5000, 10000, 20000, 25000, 33333, 40000, 50000)
MISSED_LIMIT = 0.01


def py_spy_path(python):
    p = os.path.join(os.path.dirname(python), "py-spy")
    return p if os.access(p, os.X_OK) else shutil.which("py-spy")


def samples_of(label, res):
    """How many samples a run's profiler took (None if unknown)."""
    tracer = CONFIGS[label][0]
    if tracer == "swprof":
        return res.get("ticks")
    if tracer == "pyinstrument":
        return res.get("samples")
    m = re.findall(r"Samples: (\d+)", res.get("pyspy_stderr", ""))
    return int(m[-1]) if m else None


def one_run(run_once, w, python, label, size, spy):
    tracer, extra, spy_args, _ = CONFIGS[label]
    cmd = w.command(python, tracer, size, w.warmup(size), extra)
    if spy_args is None:
        return run_once(cmd, timeout=600)
    tmp = tempfile.mkdtemp(prefix="swbench-spy-")
    try:
        err = os.path.join(tmp, "messages")
        # py-spy's messages (the sample count) go to a file (the workload
        # writes its result to a file of its own).
        wrapper = [sys.executable, "-c",
                   "import subprocess, sys; f = open(sys.argv[1], 'w'); "
                   "sys.exit(subprocess.run(sys.argv[2:], stdout=f, stderr=f).returncode)",
                   err, spy, "record", "--format", "raw", "-o", os.path.join(tmp, "out.txt")] + spy_args + ["--"]
        res = run_once(wrapper + cmd, timeout=900)
        try:
            with open(err, errors="replace") as f:
                res["pyspy_stderr"] = f.read()[-2000:]
        except OSError:
            pass
        said = [ln.strip() for ln in res.get("pyspy_stderr", "").splitlines() if ln.strip()]
        said = [ln for ln in said if ln.startswith("Error")] or said[-1:]
        if "error" in res and said:
            res["error"] += f" (py-spy: {said[0][:200]})"
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# fib's size under callgrind (~0.5 G instructions plain)
CG_FIB = 27


def section(run_once, workloads_by_name, python, rounds, quick, log, saved, callgrind_counts=None, with_cg=False):
    """The whole section: legend, the slowdown table a row at a time, the
    highest sustained rate. Returns the raw numbers; calls saved() after
    each row (results.json)."""
    spy = py_spy_path(python)
    labels = [c for c in CONFIGS if CONFIGS[c][2] is None or spy]
    na = {} if spy else {c: "py-spy not installed" for c in CONFIGS if CONFIGS[c][2] is not None}
    res = {"rounds": rounds.as_dict(), "slowdown": {"workloads": {}, "na": na, "configs": list(CONFIGS)}}
    print()
    print(f"sampling profilers: wall x = median region time / plain over rN alternating runs "
          f"({rounds.describe()});")
    print("region = profiler start .. output written, for py-spy, outside the process, the workload "
          "alone; (N%) = samples taken / samples")
    print("the rate asks for in that time (py-spy: whole process). sw = stackwatch.profiler (wall mode: "
          "every thread, with its state);")
    print("pyinstr = pyinstrument; py-spy record (default: pauses the process per sample), "
          "nb = --nonblocking.")
    print(flush=True)
    print(f"thread 1k = {COST_COLUMN}: the workload thread's CPU time under sw 1k / plain, median of "
          f"{COST_CHUNKS} alternating chunk pairs in one process (bench/profiler_cost.py, below the table).")
    print(flush=True)
    table = benchlib.StreamTable(["workload", "plain ms"] + [c for c in CONFIGS if c != "plain"] + ["thread 1k"],
                                 width=14, first_width=20)
    table.start()
    ratios = {c: [] for c in CONFIGS if c != "plain"}
    cost = res["thread_cost"] = {}
    cost_ratios = []
    for name, full, small in WORKLOADS:
        w = workloads_by_name.get(name)
        if w is None:
            continue
        size = small if quick else full
        t0 = time.perf_counter()
        runs = benchlib.alternate(labels, lambda c: one_run(run_once, w, python, c, size, spy), rounds)
        wr = {"label": w.label.format(size), "size": size, "runs": runs,
              "seconds_measuring": time.perf_counter() - t0}
        res["slowdown"]["workloads"][name] = wr
        short = name.split(":")[-1]
        cost[short] = profiler_cost.measure(python, [short], COST_CHUNKS, 1000, quick)[short]
        cells = row_cells(wr, na, ratios, table.mark)
        if "error" in cost[short]:
            cells.append(table.mark(cost[short]["error"]))
        else:
            cells.append(f"{cost[short]['summary']['ratio']:.4f}x")
            cost_ratios.append(cost[short]["summary"]["ratio"])
        table.row(cells)
        saved()
    table.finish(["geometric mean", ""] + [benchlib.fmt_ratio(benchlib.geomean(v)) if v else "n/a"
                                           for v in ratios.values()] +
                 [f"{benchlib.geomean(cost_ratios):.4f}x" if cost_ratios else "n/a"])
    for short in profiler_cost.WORKLOADS:
        if short not in cost:
            cost[short] = profiler_cost.measure(python, [short], COST_CHUNKS, 1000, quick)[short]
    print(cost_text(cost), flush=True)
    log("in-process 1 kHz within one run ...")
    res["within"] = profiler_within.measure(python, ["fib", "methods", "richards"], 40, 0.15, quick=quick)
    saved()
    print(profiler_within.text(res["within"]), flush=True)
    log("the floor under a park ...")
    res["signal_floor"] = signal_floor.measure()
    saved()
    print(signal_floor.text(res["signal_floor"]), flush=True)
    for c, reason in na.items():
        print(f"{c}: n/a ({reason})")
    print(overhead_text(res["slowdown"]["workloads"]), flush=True)
    if with_cg and not quick and callgrind_counts and "fib" in workloads_by_name:
        log("stackwatch at 1 kHz under callgrind ...")
        res["callgrind"] = callgrind_1k(run_once, callgrind_counts, workloads_by_name["fib"], python, log)
        saved()
        print(callgrind_text(res["callgrind"]), flush=True)
    for name, wr in res["slowdown"]["workloads"].items():
        for c, runs in wr["runs"].items():
            errs = [r["error"] for r in runs if "error" in r]
            if errs and len(errs) < len(runs):
                print(f"{name.split(':')[-1]} / {c}: {len(errs)} of {len(runs)} runs failed, the median is of "
                      f"the others ({errs[0][:200]})")
    log("sampler's highest rate on a 50-deep stack ...")
    res["rate"] = max_rate(python, quick, log)
    saved()
    print(rate_text(res["rate"]), flush=True)
    return res


def max_rate(python, quick, log):
    """bench/profiler_rate.py at rising rates; the highest whose median
    missed share is under MISSED_LIMIT."""
    reps = 1 if quick else 3
    seconds = 0.3 if quick else 1.0
    per_rate = {}
    best = None
    for rate in RATES:
        runs = []
        for _ in range(reps):
            p = subprocess.run([python, os.path.join(HERE, "profiler_rate.py"), "--rate", str(rate),
                                "--seconds", str(seconds)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=300)
            try:
                runs.append(json.loads(p.stdout.decode().strip().splitlines()[-1]))
            except (ValueError, IndexError):
                runs.append({"error": p.stderr.decode(errors="replace")[-300:]})
        ok = [r for r in runs if "error" not in r]
        if not ok:
            per_rate[rate] = {"runs": runs}
            break
        missed = statistics.median((r["missed"] - r["missed_off_cpu"]) / max(1, r["ticks"] + r["missed"]) for r in ok)
        off_cpu = statistics.median(r["missed_off_cpu"] / max(1, r["ticks"] + r["missed"]) for r in ok)
        us = statistics.median(r["busy_ns"] / max(1, r["ticks"]) / 1e3 for r in ok)
        per_rate[rate] = {"runs": runs, "missed_share": missed, "off_cpu_share": off_cpu, "us_per_round": us,
                          "deepest_stack": ok[0].get("deepest_stack")}
        log(f"  sampler at {rate:6d} Hz: {missed:.2%} missed (and {off_cpu:.2%} off its CPU), {us:.1f} us per round")
        if missed >= MISSED_LIMIT:
            break   # the highest rate is the last one below it with every lower rate below it too
        best = rate
    return {"per_rate": per_rate, "max_rate": best, "limit": MISSED_LIMIT}


def _median(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def row_cells(wr, na, ratios, mark):
    """One workload's cells: 'ratio (share) rN'; appends the ratios for the
    geometric means."""
    runs = wr["runs"]
    plain_ok = [r for r in runs.get("plain", []) if "error" not in r and r.get("seconds")]
    plain = _median([r["seconds"] for r in plain_ok])
    cells = [wr["label"], f"{plain * 1e3:.0f} r{len(plain_ok)}" if plain else "n/a"]
    for c in ratios:
        if c in na:
            cells.append("n/a")
            continue
        ok = [r for r in runs.get(c, []) if "error" not in r and r.get("seconds")]
        med = _median([r["seconds"] for r in ok])
        if not ok or not med or not plain:
            err = next((r["error"] for r in runs.get(c, []) if "error" in r), "no run")
            cells.append(mark(err))
            continue
        ratio = med / plain
        ratios[c].append(ratio)
        rate = CONFIGS[c][3]
        # py-spy samples the whole process, from launch to exit
        span = "process_seconds" if CONFIGS[c][2] is not None else "seconds_tracing"
        got = [samples_of(c, r) / (rate * r[span]) for r in ok
               if samples_of(c, r) is not None and r.get(span)]
        share = f" ({min(_median(got), 9.99):.0%})" if got else ""
        cells.append(f"{benchlib.fmt_ratio(ratio)}{share} r{len(ok)}")
    return cells


def callgrind_1k(run_once, callgrind_counts, w, python, log):
    """fib(CG_FIB)'s region under callgrind: plain, then stackwatch's
    profiler at 1 kHz of native time. Returns the counts, the slowdown
    and the rate asked, or {"error": ...}."""
    # (the slowdown in the workload thread's CPU time: its wall time moves
    # with the machine's load, natively far more than under callgrind)
    native = [run_once(w.command(python, "none", CG_FIB, 0), timeout=300) for _ in range(3)]
    native_s = _median([r.get("cpu_seconds") for r in native if "error" not in r])
    cgdir = tempfile.mkdtemp(prefix="swbench-prof-cg-")
    out = {"size": CG_FIB}
    try:
        def one(tracer, extra=()):
            path = os.path.join(cgdir, f"{tracer}.cg")
            r = run_once(w.command(python, tracer, CG_FIB, 0, extra), timeout=1800, valgrind_out=path)
            if "error" in r or not os.path.exists(path):
                raise RuntimeError(f"{tracer} under callgrind: {r.get('error', 'no output')}")
            r["instructions"] = callgrind_counts(path)[0]
            return r
        plain = one("none")
        slowdown = plain["cpu_seconds"] / native_s if native_s and plain.get("cpu_seconds") else None
        if not slowdown or not plain["instructions"]:
            raise RuntimeError("no slowdown or count of plain under callgrind")
        rate = max(1, round(1000 / slowdown))
        sw = one("swprof", ["--profiler-rate", str(rate)])
        # ... and at ten times the rate: a sample's instructions are the
        # slope (the profiler's start, stop and file are most of the rest)
        sw10 = one("swprof", ["--profiler-rate", str(10 * rate)])
        out.update(plain=plain["instructions"], sw=sw["instructions"], ticks=sw.get("ticks"), parked=sw.get("parked"),
                   sw10=sw10["instructions"], ticks10=sw10.get("ticks"), slowdown=slowdown, rate=rate)
    except (RuntimeError, ValueError, OSError) as e:
        log(f"  {e}")
        out["error"] = str(e)[:300]
    finally:
        shutil.rmtree(cgdir, ignore_errors=True)
    return out


def callgrind_text(cg):
    if "error" in cg or not cg.get("plain") or not cg.get("sw"):
        return f"stackwatch at 1 kHz under callgrind: n/a ({cg.get('error', 'no count')})"
    dt = (cg.get("ticks10") or 0) - (cg.get("ticks") or 0)
    per = (cg["sw10"] - cg["sw"]) / dt if dt > 0 and cg.get("sw10") else None
    slope = f", {per:.0f} a sample (slope to {cg['ticks10']} samples at 10x the rate)" if per is not None else ""
    return (f"stackwatch at 1 kHz under callgrind, fib({cg['size']}), the program's thread (the region's; the "
            f"sampler's thread is not counted): instructions {cg['sw'] / cg['plain']:.4f}x plain{slope}; "
            f"{cg['ticks']} samples at {cg['rate']} Hz (callgrind {cg['slowdown']:.0f}x slower in CPU time), "
            f"{cg.get('parked') or 0} parked: callgrind runs one thread at a time, so walks do not tear")


def overhead_text(workloads):
    """stackwatch's overhead at 1 kHz (issue 20's target: within 1% wall)
    per workload: the wall and the workload thread's CPU time over plain's
    (medians), and how many samples were taken with the thread parked
    (ahead: parked before any unparked walk; pystack.c)."""
    parts = []
    for name, wr in workloads.items():
        plain = [r for r in wr["runs"].get("plain", []) if "error" not in r and r.get("seconds")]
        sw = [r for r in wr["runs"].get("sw 1k", []) if "error" not in r and r.get("seconds")]
        if not plain or not sw:
            continue
        wall = _median([r["seconds"] for r in sw]) / _median([r["seconds"] for r in plain]) - 1
        cpu_p, cpu_s = _median([r.get("cpu_seconds") for r in plain]), _median([r.get("cpu_seconds") for r in sw])
        cpu = f", CPU {cpu_s / cpu_p - 1:+.1%}" if cpu_p and cpu_s else ""
        ticks = sum(r.get("ticks") or 0 for r in sw)
        parked = sum(r.get("parked") or 0 for r in sw)
        ahead = sum(r.get("parked_ahead") or 0 for r in sw)
        parks = f", parked {parked / ticks:.0%} of samples ({ahead} of {parked} ahead)" if ticks else ""
        parts.append(f"{name.split(':')[-1]} wall {wall:+.1%}{cpu}{parks}")
    return "stackwatch at 1 kHz over plain (target: within 1% wall): " + ("; ".join(parts) or "n/a")


def cost_text(cost):
    """The program's thread cost at 1 kHz, per workload (bench/profiler_cost.py)."""
    rows = [f"{name}: {r['error']}" if "error" in r else profiler_cost.text(name, r["summary"])
            for name, r in cost.items()]
    return (f"{COST_COLUMN} (thread CPU time sw 1k / plain, median [quartiles] of the pairs; low: the "
            f"chunks' lower quartiles' ratio; per second of the sampled chunks; all parked ahead: every sample "
            f"taken at the signal's instant, its cost and the default's leaf shares' total variation distance "
            f"from it):\n  " + "\n  ".join(rows))


def rate_text(mr):
    rows = [f"{rate} Hz {v['missed_share']:.1%} missed (+{v.get('off_cpu_share', 0):.1%} off CPU), "
            f"{v['us_per_round']:.1f} us/round"
            for rate, v in mr["per_rate"].items() if "missed_share" in v]
    best = mr["max_rate"]
    return (f"\nhighest sampling rate stackwatch sustains on a 50-deep stack with < {mr['limit']:.0%} "
            f"missed ticks (not counting stalls over 2 ms, the sampler off its CPU): "
            f"{f'{best} Hz' if best else 'none of the rates tried'}\n  " + "; ".join(rows))
