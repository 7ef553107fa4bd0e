"""What every workload script shares: the command line, the tracers and the
measured region.

A workload script defines ``make(size, args)``, which prepares the work and
returns a callable taking no argument, then calls ``main(...)``:

    python bench/workloads/fib.py --tracer stackwatch --size 27 \
        --out-dir /tmp/x --result /tmp/x/result.json

The measured region is: start the tracer, run the workload, stop the tracer,
write its output file (so every ratio is end to end). It runs inside
``nulltracer.region()`` and the workload itself inside
``nulltracer.workload()``: two C functions by which callgrind counts only the
region (client requests in region(), or --toggle-collect on it) and the
workload's share of it. The result (times, events, file sizes, or the error)
is written as JSON to ``--result``.
"""
import argparse
import gc
import json
import os
import sys
import time
import traceback

TRACERS = ("none", "null", "nullhook", "stackwatch", "cprofile", "viztracer", "pyinstrument", "yappi", "swprof",
           "sw_import", "sw_probes", "sw_c_call", "sw_line_other", "sw_line_file", "sw_all",
           "sw_tasks", "sw_tasks_log", "sw_tasks_handler", "sw_tasks_file", "viztracer_async", "yappi_coro")

# VizTracer keeps its events in a circular buffer of this many entries (the
# default is 1,000,000 and would silently drop the oldest events of the
# bigger workloads, which would flatter it): sized for every workload here.
VIZTRACER_ENTRIES = 6_000_000


class _Tracer:
    """start() / stop() / dump() around the workload; info() after."""
    name = "none"

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.path = None

    def prepare(self):
        """After the workload is made, before the region."""

    def start(self):
        pass

    def stop(self):
        pass

    def dump(self):
        pass

    def info(self):
        return {}


class _Null(_Tracer):
    name = "null"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        import nulltracer
        self.nt = nulltracer
        self.events = None

        # 3.13: stackwatch's mechanism is the PEP 523 hook plus sys.monitoring
        # PY_START/PY_RETURN on __init__ code objects (CPython pushes the
        # frames of specialised constructor calls without the hook), so the
        # floor has both. The codes are found in prepare(), before the
        # region (stackwatch finds them inside it, in C).
        self.init_codes = []
        self.tool = None

    def prepare(self):
        if sys.version_info[:2] == (3, 13) and self.init_gap:
            self.init_codes = _init_codes()

    init_gap = True

    def start(self):
        if self.init_codes:
            mon = sys.monitoring
            self.tool = next(t for t in (4, 3, 5, 2, 1, 0) if mon.get_tool(t) is None)
            mon.use_tool_id(self.tool, "nulltracer")
            mon.register_callback(self.tool, mon.events.PY_START, self.nt.mon_start)
            mon.register_callback(self.tool, mon.events.PY_RETURN, self.nt.mon_return)
            mon.register_callback(self.tool, mon.events.PY_UNWIND, self.nt.mon_return)
            for code in self.init_codes:
                mon.set_local_events(self.tool, code, mon.events.PY_START | mon.events.PY_RETURN)
            mon.set_events(self.tool, mon.events.PY_UNWIND)
        self.nt.start()

    def stop(self):
        self.events = self.nt.stop()
        if self.tool is not None:
            mon = sys.monitoring
            mon.set_events(self.tool, 0)
            for code in self.init_codes:
                mon.set_local_events(self.tool, code, 0)
            mon.free_tool_id(self.tool)
            self.tool = None

    def info(self):
        return {"events": self.events}


class _NullHook(_Null):
    """The PEP 523 hook alone (on 3.13 it misses inlined __init__ frames)."""
    name = "nullhook"
    init_gap = False


def _init_codes():
    """The code objects of the Python __init__ functions of the classes
    alive that 3.13 may push inline (no *args, **kwargs or keyword-only
    parameters: the same set stackwatch watches, native/ext/tracer/init_gap.c)."""
    out, seen, stack = {}, set(), [object]
    while stack:
        t = stack.pop()
        init = t.__dict__.get("__init__") if isinstance(t, type) else None
        if type(init) is type(_init_codes):
            co = init.__code__
            if not co.co_flags & (0x04 | 0x08) and not co.co_kwonlyargcount:
                out[id(co)] = co
        try:
            subs = type.__subclasses__(t)
        except TypeError:
            continue
        for s in subs:
            if id(s) not in seen:
                seen.add(id(s))
                stack.append(s)
    return list(out.values())


class _Stackwatch(_Tracer):
    name = "stackwatch"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        import stackwatch
        self.sw = stackwatch
        # The package imports its parts on first use (PEP 562): they are
        # imported here, outside the measured region, as before.
        stackwatch.start, stackwatch.stop   # noqa: B018
        self.path = os.path.join(out_dir, "trace.swt")
        self.summary = None

    def start(self):
        self.sw.start(self.path)

    def stop(self):
        # stop() flushes every thread and closes the file: the write counts.
        self.summary = self.sw.stop()

    def info(self):
        s = self.summary
        return {"events": s.events, "dropped": s.dropped, "summary_bytes": s.bytes,
                "threads": s.threads, "codes": s.codes, "trace_error": s.error}


class _CProfile(_Tracer):
    name = "cprofile"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        import cProfile
        self.prof = cProfile.Profile()
        self.path = os.path.join(out_dir, "profile.pstats")

    def start(self):
        self.prof.enable()

    def stop(self):
        self.prof.disable()

    def dump(self):
        self.prof.dump_stats(self.path)


class _VizTracer(_Tracer):
    name = "viztracer"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        from viztracer import VizTracer
        self.path = os.path.join(out_dir, "viztracer.json")
        self.tracer = VizTracer(tracer_entries=VIZTRACER_ENTRIES, output_file=self.path, verbose=0)

    def start(self):
        self.tracer.start()

    def stop(self):
        self.tracer.stop()

    def dump(self):
        self.tracer.save()  # its JSON dump, part of the end-to-end cost

    def info(self):
        meta = (getattr(self.tracer, "data", None) or {}).get("viztracer_metadata", {})
        return {"events": getattr(self.tracer, "total_entries", None),
                "overflow": meta.get("overflow")}


class _Pyinstrument(_Tracer):
    name = "pyinstrument"

    def __init__(self, out_dir, interval=0.001):
        super().__init__(out_dir)
        from pyinstrument import Profiler
        # Defaults: 1 ms interval, async_mode="enabled". Under callgrind the
        # runner stretches the interval by callgrind's slowdown, so that it
        # takes about as many samples per unit of work as natively.
        self.prof = Profiler(interval=interval)
        self.path = os.path.join(out_dir, "pyinstrument.json")
        self.session = None

    def start(self):
        self.prof.start()

    def stop(self):
        self.session = self.prof.stop()

    def dump(self):
        self.session.save(self.path)

    def info(self):
        return {"samples": getattr(self.session, "sample_count", None)}


class _Yappi(_Tracer):
    name = "yappi"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        import yappi
        self.yappi = yappi
        self.path = os.path.join(out_dir, "yappi.pstats")

    def start(self):
        self.yappi.start()  # defaults: CPU clock, builtins not profiled

    def stop(self):
        self.yappi.stop()

    def dump(self):
        self.yappi.get_func_stats().save(self.path, type="pstat")
        self.yappi.clear_stats()

    def info(self):
        return {"clock": self.yappi.get_clock_type()}


class _Swprof(_Tracer):
    """stackwatch's statistical profiler (stackwatch.profiler), at a rate
    and mode; its speedscope file is the output written."""
    name = "swprof"

    def __init__(self, out_dir, rate=1000, mode="wall"):
        super().__init__(out_dir)
        from stackwatch.profiler import Profiler
        self.prof = Profiler(rate=rate, mode=mode)
        self.path = os.path.join(out_dir, "profile.speedscope.json")

    def start(self):
        self.prof.start()

    def stop(self):
        self.prof.stop()

    def dump(self):
        self.prof.write(self.path, "speedscope")

    def info(self):
        st = self.prof.stats()
        # (st.get: the parks' counts are new; an older build has none)
        return {k: st.get(k) for k in ("ticks", "missed", "stored", "failed", "busy_ns", "mode", "torn", "parked",
                                       "parked_ahead", "parked_ns")}


class _SwImport(_Tracer):
    """bench/dispatch.py: stackwatch imported, no consumer (zero cost)."""
    name = "sw_import"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        import stackwatch
        self.sw = stackwatch


class _SwProbes(_SwImport):
    """... and its probe watcher running (USDT probes compiled in, nothing
    attached)."""
    name = "sw_probes"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        if not self.sw.probes.available:
            raise RuntimeError("stackwatch was built without USDT probes")
        self.sw.probes.watch()

    def info(self):
        self.sw.probes.unwatch()
        return {}


def _noop(ev):
    pass


class _SwHandler(_SwImport):
    """One no-op handler (bench/dispatch.py): events, where."""
    events, where = "c_call", None

    def start(self):
        self.h = self.sw.add_handler(_noop, events=self.events, where=self.where)

    def stop(self):
        self.h.remove()


class _SwCCall(_SwHandler):
    name = "sw_c_call"


class _SwLineOther(_SwHandler):
    """Line events of one file that is not the workload's (this one: the
    region's few lines): the workload's file runs at full speed."""
    name, events, where = "sw_line_other", "line", "*/_harness.py"


class _SwLineFile(_SwHandler):
    """Line events of the workload's own file."""
    name, events = "sw_line_file", "line"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        self.where = os.path.abspath(sys.argv[0])


class _SwAll(_Stackwatch):
    """The file tracer recording every event kind (C calls, lines and
    instructions everywhere, exceptions, GC, objects, threads)."""
    name = "sw_all"

    def start(self):
        self.sw.start(self.path, c_calls=True, events="all")


class _SwTasks(_Stackwatch):
    """bench/tasks.py: the exact trace with task events (`run --events tasks`)."""
    name = "sw_tasks"

    def start(self):
        self.sw.start(self.path, events=["tasks"])


class _SwTasksFile(_Stackwatch):
    """bench/tasks.py: task events with no trace, into a trace file without
    the call records (`run --no-trace --events tasks -o FILE`)."""
    name = "sw_tasks_file"

    def start(self):
        self.sw.start(self.path, events=["tasks"], calls=False)


class _SwTasksLog(_Tracer):
    """bench/tasks.py: task events with no trace, to the readable log of
    `run --no-trace --events tasks --log FILE` (its task lines, handed to
    the log's C writer as the command does: verbose.handle)."""
    name = "sw_tasks_log"

    def __init__(self, out_dir):
        super().__init__(out_dir)
        from stackwatch.events.handlers import verbose   # (with the log's writer: imported outside the region)
        self.verbose = verbose
        self.path = os.path.join(out_dir, "tasks.log")

    def start(self):
        self.log = self.verbose(self.path)
        self.h = self.log.handle("tasks")

    def stop(self):
        self.h.remove()
        self.log.close()


class _SwTasksHandler(_SwImport):
    """bench/tasks.py: task events with no trace and no log, to a no-op
    Python handler (`stackwatch.add_handler(fn, events="tasks")`: the
    task hooks, the dispatch and an Event per task event)."""
    name = "sw_tasks_handler"

    def start(self):
        self.h = self.sw.add_handler(_noop, events="tasks")

    def stop(self):
        self.h.remove()


class _VizTracerAsync(_VizTracer):
    """bench/tasks.py: VizTracer with log_async (a track per asyncio task)."""
    name = "viztracer_async"

    def __init__(self, out_dir):
        _Tracer.__init__(self, out_dir)
        from viztracer import VizTracer
        self.path = os.path.join(out_dir, "viztracer.json")
        self.tracer = VizTracer(tracer_entries=VIZTRACER_ENTRIES, output_file=self.path, verbose=0, log_async=True)


class _YappiCoro(_Yappi):
    """bench/tasks.py: yappi's coroutine-aware mode (wall clock: a coroutine's
    awaits count in its time, its suspensions are not exits)."""
    name = "yappi_coro"

    def start(self):
        self.yappi.set_clock_type("wall")
        self.yappi.start()


_CLASSES = {c.name: c for c in (_Tracer, _Null, _NullHook, _Stackwatch, _CProfile, _VizTracer,
                                _Pyinstrument, _Yappi, _SwImport, _SwProbes, _SwCCall,
                                _SwLineOther, _SwLineFile, _SwAll, _SwTasks, _SwTasksLog, _SwTasksHandler, _SwTasksFile,
                                _VizTracerAsync,
                                _YappiCoro)}


def make_tracer(name, out_dir, pyinstrument_interval=0.001, profiler_rate=1000, profiler_mode="wall"):
    if name == "pyinstrument":
        return _Pyinstrument(out_dir, pyinstrument_interval)
    if name == "swprof":
        return _Swprof(out_dir, profiler_rate, profiler_mode)
    return _CLASSES[name](out_dir)


def main(name, make, default_size, add_args=None):
    p = argparse.ArgumentParser(description=f"stackwatch benchmark workload: {name}")
    p.add_argument("--tracer", choices=TRACERS, default="none")
    p.add_argument("--size", type=int, default=default_size)
    p.add_argument("--warmup-size", type=int, default=0,
                   help="run the workload once at this size, untraced, before the region")
    p.add_argument("--out-dir", default=None, help="where the tracer writes (default: a temp dir)")
    p.add_argument("--result", default=None, help="write the result as JSON here (default: stdout)")
    p.add_argument("--pyinstrument-interval", type=float, default=0.001,
                   help="pyinstrument's sampling interval in seconds (default: its own, 0.001)")
    p.add_argument("--profiler-rate", type=int, default=1000,
                   help="swprof: stackwatch's profiler's sampling rate in Hz (default 1000)")
    p.add_argument("--profiler-mode", choices=("wall", "cpu"), default="wall",
                   help="swprof: stackwatch's profiler's mode (default wall)")
    if add_args:
        add_args(p)
    args = p.parse_args()

    res = {"workload": name, "tracer": args.tracer, "size": args.size,
           "python": sys.version.split()[0], "pid": os.getpid()}
    tmp = None
    try:
        out_dir = args.out_dir
        if out_dir is None:
            import tempfile
            tmp = tempfile.TemporaryDirectory(prefix="swbench-")
            out_dir = tmp.name
        os.makedirs(out_dir, exist_ok=True)
        import nulltracer  # the callgrind markers; always there in the bench venv
        tracer = make_tracer(args.tracer, out_dir, args.pyinstrument_interval,   # imports the tracer: not measured
                             args.profiler_rate, args.profiler_mode)
        work = make(args.size, args)
        if args.warmup_size:
            make(args.warmup_size, args)()
        tracer.prepare()
        gc.collect()
        times = {}

        def region():
            clock = time.perf_counter_ns
            c0 = time.thread_time()
            t0 = clock()
            tracer.start()
            value = nulltracer.workload(work)
            t1 = clock()
            tracer.stop()
            t2 = clock()
            tracer.dump()
            t3 = clock()
            times.update(start_to_end=t1 - t0, stop=t2 - t1, dump=t3 - t2, total=t3 - t0,
                         cpu=time.thread_time() - c0)
            return value

        nulltracer.region(region)
        res["seconds"] = times["total"] / 1e9
        res["seconds_tracing"] = times["start_to_end"] / 1e9
        res["seconds_stop"] = times["stop"] / 1e9
        res["seconds_dump"] = times["dump"] / 1e9
        res["cpu_seconds"] = times["cpu"]   # the workload thread's CPU time in the region
        res.update(tracer.info())
        if tracer.path:
            res["file_bytes"] = os.path.getsize(tracer.path) if os.path.exists(tracer.path) else None
    except BaseException as e:  # report, never hide: the runner shows "n/a" with this
        res["error"] = f"{type(e).__name__}: {e}"
        res["traceback"] = traceback.format_exc()
    finally:
        if tmp is not None:
            tmp.cleanup()
    text = json.dumps(res)
    if args.result:
        with open(args.result, "w") as f:
            f.write(text)
    else:
        print(text)
    return 1 if "error" in res else 0
