"""bench/kernel_events.py - the kernel-events and native-function section
of `make bench` (bench/run.py; `--no-kernel` leaves it out).

Kernel events: two programs (bench/workloads/kernel_io.py), one that waits
on I/O (a 1 ms select, a pread and a write per step: ~2,500 system calls
a second) and one bound by system calls (300,000 os.write calls of a
byte to /dev/null), each run plainly, under `stackwatch run` without and
with `--kernel=syscalls,sched,faults`, and, side by side, under the
tools that see the same events: `perf record` of the same tracepoints
(raw_syscalls, sched_switch, sched_wakeup, every page fault), `perf trace
-s` (its summary of the system calls), `strace -c -f` and `uftrace record
--nest-libcall` (uftrace 0.13 sees the C library's calls, write() and
read(), and the scheduler's switches, not the kernel's system calls).
Runs alternate (benchlib.alternate); a cell is the median of the loop's
own time (the program's measured region: without the interpreter's and
the tools' start and stop) over plain's, and the same for the whole
process. The kernel events need root (perf_event_open of tracepoints):
without it, or without a tool, its cells are n/a with the reason. The
target (issue 23): `--kernel` at most 5% extra wall on the program that
waits on I/O, over stackwatch without it.

CPU ids (`run --cpu`): ns per event of a Python fib(22) (114,626 events)
traced without and with `--cpu` (CPU time, best of 7 in the process).

Native functions: bench/native_events.py's figures (tests/programs/native
/cgraph.c's fib(25), built with and without `stackwatch config --cflags
--ldflags`): ns per event, target 20 ns. Cython: its figures for `run
--cython` (tests/programs/cython/cyprog.pyx, profile=True): ns per call of
a Python and of a Cython fib(20), traced without and with --cython, on
the bench's Python (docs/performance.md has them per version).
"""
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib
import native_events

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "workloads", "kernel_io.py")
# Seconds a cell's runs may take before it stops at its minimum of runs.
CELL_SECONDS = 8.0
# name, label, size, quick size
PROGRAMS = [("io_wait", "I/O wait ({} steps)", 1000, 200),
            ("write_loop", "os.write x{}", 300_000, 30_000)]
KERNEL = "--kernel=syscalls,sched,faults"
PERF_EVENTS = "raw_syscalls:sys_enter,raw_syscalls:sys_exit,sched:sched_switch,sched:sched_wakeup,page-faults"


def configs(python, tmp):
    """{label: (command prefix before the program, the tool it needs)}."""
    sw = [python, "-m", "stackwatch", "run", "-q", "-o", os.path.join(tmp, "t.swt")]
    return {
        "plain": ([python], None),
        "stackwatch": (sw, None),
        "sw --kernel": (sw[:4] + [KERNEL] + sw[4:], "root"),
        "perf record": (["perf", "record", "-q", "-c", "1", "-e", PERF_EVENTS, "-o", os.path.join(tmp, "perf.data"),
                         "--", python], "perf"),
        "perf trace -s": (["perf", "trace", "-s", "-o", os.path.join(tmp, "trace.txt"), "--", python], "perf"),
        "strace -c -f": (["strace", "-c", "-f", "-o", os.path.join(tmp, "strace.txt"), python], "strace"),
        "uftrace": (["uftrace", "record", "--force", "--nest-libcall", "-d", os.path.join(tmp, "uftrace.data"),
                     python], "uftrace"),
    }


def unavailable(need):
    if need is None:
        return None
    if need == "root" or need == "perf":
        if os.geteuid() != 0:
            return "needs root (perf_event_open of tracepoints)"
        if need == "root":
            return None
    return None if shutil.which(need) else f"{need} is not installed (scripts/install-deps.sh installs it)"


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(prefix, what, size, tmp):
    """One run: the loop's seconds, the whole process's, and the CPU
    seconds of the process and its tools (user + system, every thread)."""
    t0, c0 = time.perf_counter(), _children_cpu()
    try:
        p = subprocess.run(prefix + [PROGRAM, what, str(size)], capture_output=True, text=True, timeout=600,
                           cwd=tmp)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e).splitlines()[0]}
    elapsed, cpu = time.perf_counter() - t0, _children_cpu() - c0
    last = p.stdout.strip().splitlines()[-1:] if p.stdout.strip() else []
    if p.returncode != 0 or not last:
        tail = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        return {"error": tail[:200]}
    try:
        return {"seconds": float(last[0]), "process_seconds": elapsed, "cpu_seconds": cpu}
    except ValueError:
        return {"error": f"unexpected output: {last[0][:80]}"}


FIB = '''import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
best = 1e9
for _ in range(7):
    t = time.process_time()
    fib(22)
    best = min(best, time.process_time() - t)
print(best * 1e9 / (2 * 57313))
'''


def cpu_ids_cost(python, tmp):
    """ns per Python event of fib(22) traced without and with --cpu."""
    prog = os.path.join(tmp, "fib_cpu.py")
    with open(prog, "w") as f:
        f.write(FIB)
    out = []
    for extra in ([], ["--cpu"]):
        cmd = [python, "-m", "stackwatch", "run", "-q", *extra, "-o", os.path.join(tmp, "fib.swt"), prog]
        out.append(float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1]))
    return out


def section(python, rounds, quick, log, saved):
    """The section: the table a row at a time, then the native figures.
    Returns the raw numbers; calls saved() after each row."""
    tmp = tempfile.mkdtemp(prefix="swbench-kernel-")
    res = {"rounds": rounds.as_dict(), "programs": {}, "na": {}}
    try:
        cfg = configs(python, tmp)
        na = {c: r for c, (_, need) in cfg.items() if (r := unavailable(need))}
        res["na"] = na
        labels = [c for c in cfg if c not in na]
        print()
        print(f"kernel events: x = median loop time / plain's over rN alternating runs ({rounds.describe()}); "
              "(x) = the same for the")
        print("whole process (start and stop too). sw --kernel = stackwatch run --kernel=syscalls,sched,faults; "
              "perf record of the same")
        print("tracepoints and page faults; perf trace -s and strace -c -f count system calls; uftrace records "
              "the C library's calls.")
        print(flush=True)
        table = benchlib.StreamTable(["program", "plain s"] + [c for c in cfg if c != "plain"], width=15,
                                     first_width=22)
        table.start()
        for name, label, full, small in PROGRAMS:
            size = small if quick else full
            t0 = time.perf_counter()
            runs = benchlib.alternate(labels, lambda c: one_run(cfg[c][0], name, size, tmp), rounds)
            med = {c: benchlib.median_seconds(r) for c, r in runs.items()}
            whole = {c: benchlib.median_seconds(r, "process_seconds") for c, r in runs.items()}
            res["programs"][name] = {"label": label.format(size), "size": size, "runs": runs,
                                     "seconds_measuring": time.perf_counter() - t0}
            base, base_whole = med.get("plain"), whole.get("plain")
            cells = [label.format(size), f"{base:.3f}" if base else "n/a"]
            for c in cfg:
                if c == "plain":
                    continue
                if c in na:
                    cells.append(table.mark(na[c]))
                elif not med.get(c) or not base:
                    errs = [r["error"] for r in runs.get(c, []) if "error" in r]
                    cells.append(table.mark(errs[0] if errs else "no run"))
                else:
                    cells.append(f"{med[c] / base:.2f} ({whole[c] / base_whole:.2f})")
            table.row(cells)
            cpu = {c: benchlib.median_seconds(r, "cpu_seconds") for c, r in runs.items()}
            if med.get("sw --kernel") and med.get("stackwatch") and base:
                # The wall figure moves with the machine's load (a 1 ms wait
                # ends when the scheduler gets to it); the CPU time the
                # kernel events add (in the traced threads' system calls
                # and switches, and the reading thread) is the wall time
                # they add on an idle machine at most (under load every
                # cost is stretched by the share of a CPU the process gets).
                extra = (med["sw --kernel"] - med["stackwatch"]) / base
                bound = (cpu["sw --kernel"] - cpu["stackwatch"]) / base
                res["programs"][name].update(kernel_extra=extra, kernel_extra_cpu_bound=bound)
                line = (f"{name}: --kernel adds {extra * 100:+.1f}% of plain's wall (medians) over stackwatch "
                        f"without it; it adds CPU time {bound * 100:+.1f}% of that wall (the most it adds on an idle "
                        f"machine)")
                if name == "io_wait":
                    line += f" (target: at most +5%: {'met' if bound <= 0.05 else 'MISSED'})"
                if med.get("perf record"):
                    line += (f"; perf record adds {(med['perf record'] - base) / base * 100:+.0f}% wall, "
                             f"{(cpu['perf record'] - cpu['plain']) / base * 100:+.0f}% CPU")
                res["programs"][name]["note"] = line
            saved()
        table.finish()
        for name in res["programs"]:
            if res["programs"][name].get("note"):
                print("  " + res["programs"][name]["note"])
        try:
            without, with_cpu = cpu_ids_cost(python, tmp)
            res["cpu_ids"] = {"traced_ns": without, "cpu_ns": with_cpu}
            print(f"CPU ids (run --cpu, fib(22), CPU time): ns per Python event traced {without:.1f}, with --cpu "
                  f"{with_cpu:.1f}: {with_cpu - without:+.1f} ns", flush=True)
        except (OSError, subprocess.CalledProcessError, ValueError, IndexError) as e:
            res["cpu_ids"] = {"error": str(e).splitlines()[0]}
            print(f"CPU ids: n/a ({res['cpu_ids']['error']})", flush=True)
        try:
            plain, idle, traced = native_events.native_figures(tmp, python)
            res["native"] = {"plain_ns": plain, "instrumented_idle_ns": idle, "traced_ns": traced}
            print(f"native functions (cgraph.c fib(25), -finstrument-functions): ns per event: not instrumented "
                  f"{plain:.2f}, instrumented untraced {idle:.2f}, traced {traced:.2f}: recording "
                  f"{traced - plain:.2f} ns (target 20)", flush=True)
        except (OSError, subprocess.CalledProcessError, ValueError) as e:
            res["native"] = {"error": str(e).splitlines()[0]}
            print(f"native functions: n/a ({res['native']['error']})", flush=True)
        try:
            figures = native_events.cython_figures(tmp, python)
            if figures is None:
                res["cython"] = {"error": "Cython is not installed for this Python"}
            else:
                res["cython"] = dict(zip(("python_ns", "python_cython_ns", "cython_ns", "cython_cython_ns"), figures))
                print(f"--cython (cyprog.pyx fib(20), profile=True, CPU time): ns per call traced without -> with "
                      f"--cython: Python {figures[0]:.1f} -> {figures[1]:.1f}, Cython {figures[2]:.1f} -> "
                      f"{figures[3]:.1f}", flush=True)
        except (OSError, subprocess.CalledProcessError, ValueError) as e:
            res["cython"] = {"error": str(e).splitlines()[0]}
        if "error" in res["cython"]:
            print(f"--cython: n/a ({res['cython']['error']})", flush=True)
        saved()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res
