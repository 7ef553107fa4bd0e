"""The task events section of `make bench` (run by bench/run.py; see
bench/README.md): what recording tasks (issue 22) costs, on two programs:

  tasks_asyncio(N)   N asyncio tasks (10,000), each created, stepped
                     twice, sending a number through an asyncio.Queue
                     to one consumer task
  tasks_threads(N)   4 producer and 4 consumer threads passing N numbers
                     (20,000) through a queue.Queue of 16 places

each plain and under: stackwatch's exact trace (`run`), the same with task
events (`run --events tasks`), task events with no trace: to a no-op
Python handler (`add_handler(fn, events="tasks")`, no log) and into the
readable log (`run --no-trace --events tasks --log FILE`, task lines),
into a trace file without the call records (`run --no-trace --events
tasks -o FILE`),
VizTracer with log_async (a track per asyncio task) and yappi in its
coroutine-aware mode (wall clock). Wall: the median of the measured region
(start .. output written) over alternating runs, as a ratio to plain; the
column "tasks/trace" is the trace with task events over the trace alone
(the targets: at most 1.3 on the asyncio program, 1.2 on the threads';
and the "no trace" columns at most 1.3x plain). Then callgrind instructions (not in a
quick run), the stable figures of the same ratios: of the region on the
asyncio program at 2,000 tasks; of the whole process, every thread, on
the threads' program, per item (the slope between 1,000 and 5,000 items:
callgrind counts a region on its own thread only, and the start-up is
the same at both sizes). And the traces' sizes: what the task
events add to a trace, per task event (format 1.16 writes a channel's
name once, 1.18 a task's: STRINGS).
"""
import os
import tempfile
import time

import benchlib

# (workload script, label, full size, quick size, callgrind: a size (the
# region) or two (the whole process's slope between them, per item))
WORKLOADS = [("tasks_asyncio.py", "asyncio({} tasks)", 10_000, 1_000, 2_000),
             ("tasks_threads.py", "threads({} items)", 20_000, 2_000, (1_000, 5_000))]
CONFIGS = ["none", "stackwatch", "sw_tasks", "sw_tasks_handler", "sw_tasks_log", "sw_tasks_file", "viztracer_async",
           "yappi_coro"]
COLUMNS = ["trace", "trace+tasks", "tasks/trace", "no trace", "no trace --log", "no trace (file)", "viztracer async",
           "yappi coro"]
TARGETS = {"tasks_asyncio.py": 1.3, "tasks_threads.py": 1.2}   # tasks/trace at most
NO_TRACE_TARGET = 1.3
CG_CONFIGS = ["none", "stackwatch", "sw_tasks", "sw_tasks_handler", "sw_tasks_log", "sw_tasks_file"]
CG_LABELS = {"stackwatch": "trace", "sw_tasks": "trace+tasks", "sw_tasks_handler": "no trace",
             "sw_tasks_log": "no trace --log", "sw_tasks_file": "no trace (file)"}   # (the wall table's names)
NO_TRACE = ("sw_tasks_handler", "sw_tasks_log", "sw_tasks_file")


def _command(python, workloads_dir, script, tracer, size, warmup=0):
    cmd = [python, os.path.join(workloads_dir, script), "--tracer", tracer, "--size", str(size)]
    return cmd + (["--warmup-size", str(warmup)] if warmup else [])


def _ratio(a, b):
    return a / b if a and b else None


def section(run_once, callgrind_counts, workloads_dir, python, rounds, quick, with_cg, unavailable, log, saved):
    """Legend, the wall table a row at a time, the callgrind line (with_cg).
    Returns the raw numbers; calls saved() after each row."""
    labels = [c for c in CONFIGS if c not in unavailable]
    res = {"rounds": rounds.as_dict(), "workloads": {}, "callgrind": {}}
    print()
    print(f"task events: wall x = median region time / plain over rN alternating runs ({rounds.describe()}).")
    print("trace = stackwatch run; trace+tasks = run --events tasks; tasks/trace = the two's ratio (target: "
          "asyncio <= 1.3, threads <= 1.2);")
    print("no trace = task events alone, to a no-op Python handler (add_handler(fn, events='tasks'), no log); "
          "no trace --log = run --no-trace --events tasks --log FILE (task lines); no trace (file) = run --no-trace "
          "--events tasks -o FILE (the task records, no call records); all three target <= 1.3x plain;")
    print("viztracer async = log_async=True;")
    print("yappi coro = yappi, wall clock (coroutine-aware).", flush=True)
    table = benchlib.StreamTable(["program", "plain ms"] + COLUMNS, width=[12] + [15] * len(COLUMNS), first_width=22)
    table.start()
    for script, label, full, small, _ in WORKLOADS:
        size = small if quick else full
        t0 = time.perf_counter()
        runs = benchlib.alternate(labels, lambda t: run_once(_command(python, workloads_dir, script, t, size,
                                                                     max(1, size // 10)), timeout=900), rounds)
        med = {t: benchlib.median_seconds(rs) for t, rs in runs.items()}
        n = {t: len([r for r in rs if "error" not in r]) for t, rs in runs.items()}
        plain = med.get("none")
        cells = [label.format(size), f"{plain * 1e3:.0f} r{n['none']}" if plain else "n/a"]
        for t in ("stackwatch", "sw_tasks"):
            cells.append(_cell(table, med, n, runs, unavailable, t, plain))
        tt = _ratio(med.get("sw_tasks"), med.get("stackwatch"))
        cells.append(benchlib.fmt_ratio(tt) + ("" if tt is None or tt <= TARGETS[script] else " !"))
        for t in NO_TRACE:
            r = _ratio(med.get(t), plain)
            cells.append(_cell(table, med, n, runs, unavailable, t, plain) + (" !" if r and r > NO_TRACE_TARGET else ""))
        for t in ("viztracer_async", "yappi_coro"):
            cells.append(_cell(table, med, n, runs, unavailable, t, plain))
        table.row(cells)
        res["workloads"][script] = {"label": label.format(size), "size": size, "runs": runs,
                                    "tasks_over_trace": tt, "seconds_measuring": time.perf_counter() - t0}
        saved()
    table.finish()
    print("! over its target. Wall ratios on this shared 2-core VM move by 10-30% between runs.", flush=True)
    for script, label, full, small, _ in WORKLOADS:
        line = _sizes(res["workloads"].get(script, {}).get("runs", {}))
        if line:
            print(f"trace size, {label.format(small if quick else full)}: {line}", flush=True)
    if with_cg:
        for script, label, _, _, cg_size in WORKLOADS:
            if cg_size:
                res["callgrind"][script] = counts = _callgrind(run_once, callgrind_counts, python, workloads_dir,
                                                               script, cg_size, unavailable, log)
                base = counts.get("none")
                parts = []
                for t in CG_CONFIGS[1:]:
                    r = _ratio(counts.get(t), base)
                    parts.append(f"{CG_LABELS[t]} {benchlib.fmt_ratio(r)}x"
                                 + (" !" if t in NO_TRACE and r and r > NO_TRACE_TARGET else ""))
                tt = _ratio(counts.get("sw_tasks"), counts.get("stackwatch"))
                if isinstance(cg_size, tuple):
                    plain = f"{base / 1e3:.1f}k per item" if base else "n/a"
                    label = label.format(f"{cg_size[0]}-{cg_size[1]}") + ", whole process"
                else:
                    plain = f"{base / 1e6:.0f} M" if base else "n/a"
                    label = label.format(cg_size)
                print(f"instructions (callgrind), {label}: plain {plain}; " + ", ".join(parts)
                      + f"; tasks/trace {benchlib.fmt_ratio(tt)}" + (" !" if tt and tt > TARGETS[script] else ""),
                      flush=True)
                saved()
    return res


def _sizes(runs):
    """The trace's size without and with task events, and the bytes a task
    event adds (the runs' median sizes and event counts), or None."""
    med = {}
    for t in ("stackwatch", "sw_tasks"):
        ok = [r for r in runs.get(t, []) if "error" not in r and r.get("file_bytes") and r.get("events")]
        if not ok:
            return None
        med[t] = (benchlib.median_seconds(ok, "file_bytes"), benchlib.median_seconds(ok, "events"))
    (b0, e0), (b1, e1) = med["stackwatch"], med["sw_tasks"]
    per = f" ({(b1 - b0) / (e1 - e0):.1f} bytes per task event)" if e1 > e0 else ""
    return f"trace {b0 / 1e3:.0f} KB, trace+tasks {b1 / 1e3:.0f} KB{per}"


def _cell(table, med, n, runs, unavailable, t, plain):
    if t in unavailable:
        return table.mark(unavailable[t])
    if not med.get(t):
        errs = [r["error"] for r in runs.get(t, []) if "error" in r]
        return table.mark(errs[0][:200]) if errs else "n/a"
    return f"{benchlib.fmt_ratio(_ratio(med[t], plain))} r{n[t]}"


def _callgrind(run_once, callgrind_counts, python, workloads_dir, script, size, unavailable, log):
    """The region's instructions of each stackwatch configuration, one run
    each; with two sizes, the whole process's instructions per item (the
    slope between them)."""
    out = {}
    cgdir = tempfile.mkdtemp(prefix="swbench-tasks-cg-")
    try:
        for t in CG_CONFIGS:
            if t in unavailable:
                continue
            counts = []
            for n in (size if isinstance(size, tuple) else (size,)):
                path = os.path.join(cgdir, f"{t}.{n}.cg")
                r = run_once(_command(python, workloads_dir, script, t, n), timeout=1800, valgrind_out=path,
                             whole_process=isinstance(size, tuple))
                if "error" in r or not os.path.exists(path):
                    log(f"  tasks / {t} under callgrind: {r.get('error', 'no output')}")
                    break
                counts.append(callgrind_counts(path)[0])
            else:
                out[t] = counts[0] if len(counts) == 1 else (counts[1] - counts[0]) / (size[1] - size[0])
    finally:
        for f in os.listdir(cgdir):
            os.unlink(os.path.join(cgdir, f))
        os.rmdir(cgdir)
    return out
