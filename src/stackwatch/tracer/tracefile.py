"""Reading trace files from Python: a thin layer over the C reader."""
from collections import namedtuple

from .. import _native
from ..render import formats

Event = namedtuple("Event", "kind t_ns code depth synthetic")
Code = namedtuple("Code", "id kind name qualname filename firstlineno")
# calls: entries (calls and resumptions, like cProfile's); prim: those made
# while no frame of the function was open (cProfile's primitive calls).
StatRow = namedtuple("StatRow", "thread code calls total_ns own_ns prim")
# One (thread, function)'s kernel events (run --kernel): system calls and
# their time, intervals off CPU that began there and their time, page faults.
KernelRow = namedtuple("KernelRow", "thread code syscalls syscall_ns off_cpu off_cpu_ns faults")
# The calls from one function to another on one thread (caller None: the
# thread's outermost frames): like StatRow, for the pair; own_ns is the
# callee's own time in these calls, inclusive_ns the time of every call
# (nested ones counted again: callgrind's inclusive cost).
EdgeRow = namedtuple("EdgeRow", "thread caller callee calls prim total_ns own_ns inclusive_ns")


class Filter(namedtuple("Filter", "threads start_ns stop_ns include exclude max_depth",
                        defaults=(None, None, None, None, None, 0))):
    """What a reading of a trace keeps (native/trace/filter.h): threads
    (positions, None: all), a window of trace-clock times (None: open),
    include/exclude globs matched against a function's qualified name, its
    name and its file, and a maximum depth of kept frames (0: none). A
    frame left out gives its time to its caller and its callees to it."""
    __slots__ = ()

    def is_all(self):
        return (self.threads is None and self.start_ns is None and self.stop_ns is None and not self.include
                and not self.exclude and not self.max_depth)

    def as_tuple(self):
        return None if self.is_all() else (None if self.threads is None else list(self.threads), self.start_ns,
                                            self.stop_ns, list(self.include or ()) or None,
                                            list(self.exclude or ()) or None, self.max_depth or 0)
# An EXT event (docs/format.md): kind name, time (ns since the trace
# clock's calibration point, like Event.t_ns), thread position, depth (open
# frames), code id and line (None for kinds without a location; code None,
# line 0 for a record located nowhere, format 1.14) and the
# kind's data as a dict.
ExtEvent = namedtuple("ExtEvent", "kind t_ns thread depth code line data")

# A sampler sample (`stackwatch run --sample`, format 1.2): time (trace
# clock ns, like events), thread position, state ("running", "gil_wait",
# "idle", "unknown"), the wall time it stands for, the CPU time since the
# thread's previous sample (None if unknown), the stack, outermost frame
# first, as SampleFrame tuples, and (format 1.3, `--sample-lines`) the line
# each frame was running, parallel to the stack (0: unknown or a native
# frame), else None.
Sample = namedtuple("Sample", "t_ns thread state weight_ns cpu_ns stack lines")
# A frame of a sample: a Python function (line: its first line) or, with
# native=True (`--native`), a native frame named "symbol [native]" as the
# profiler names it, filename its shared object, line 0.
SampleFrame = namedtuple("SampleFrame", "name filename line native")
_STATES = _native.THREAD_STATES   # by number (native/base/sample.h)

# A kind of EXT record, as the table native/trace/records.h defines it
# (_native.RECORD_KINDS): its number on disk, its name, the format minor
# version that added it, who writes it ("writer", "tracer", "program",
# "dispatch": the dispatch layer's event kind of the same name, one of
# stackwatch.EVENTS; "older": an older format's kind that a newer row of
# the same name replaced, read only), its category and label in the exports, its shape
# ("instant", "open"/"close" a slice with `pair`, "nest_open"/"nest_close",
# "replay": consumed by the reader, never delivered), its stats figure
# ("gc" or "none"), the slot whose value follows its label, its slice's
# track (open kinds) and its fields as RecordField tuples.
RecordKind = namedtuple("RecordKind", "number name since source category label shape pair stat title track fields")
# A field of a record's payload: its name, type ("varint", "signed", "str",
# "code", "tid"), the slot of the decoded tuple that holds it ("code",
# "line", "a", "b", "c", "s1", "s2") and whether a str is interned
# (written as a STRINGS entry's id, format 1.16; read as the str).
RecordField = namedtuple("RecordField", "name type slot interned")
RECORD_KINDS = {row[0]: RecordKind(*row[:-1], tuple(RecordField(*f) for f in row[-1]))
                for row in _native.RECORD_KINDS}

# The EXT kinds the reader delivers, by number, named like the dispatch
# layer's event kinds (stackwatch.EVENTS); a name may have several numbers
# (format 1.16 interned the channel of the task events: new kinds, the
# old ones still read), and KIND_MASKS has the mask of all of a name's.
EXT_KINDS = {n: k.name for n, k in sorted(RECORD_KINDS.items()) if k.shape != "replay"}
KIND_MASKS = {}
for _n, _k in RECORD_KINDS.items():
    KIND_MASKS[_k.name] = KIND_MASKS.get(_k.name, 0) | 1 << _n
KIND_NAMES = {
    _native.OP_CALL: "call",
    _native.OP_RETURN: "return",
    _native.OP_RESUME: "resume",
    _native.OP_YIELD: "yield",
    _native.OP_UNWIND: "unwind",
    _native.OP_C_CALL: "c_call",
    _native.OP_C_RETURN: "c_return",
    _native.EV_DROPPED: "dropped",
}
ENTER_KINDS = {_native.OP_CALL, _native.OP_RESUME, _native.OP_C_CALL}
EXIT_KINDS = {_native.OP_RETURN, _native.OP_YIELD, _native.OP_UNWIND, _native.OP_C_RETURN}


def _spec(filter):
    return None if filter is None else filter.as_tuple()


class Trace:
    """A trace file opened for reading.

    Raises stackwatch.TraceError (a ValueError) naming the file and what is
    wrong if it is not a readable trace; a damaged file whose first chunks
    are intact opens, and ``damage`` then says what was cut off.
    """

    def __init__(self, path):
        self._t = _native.Trace(path)
        self.path = self._t.path
        self.meta = self._t.meta()
        self.threads = self._t.threads()
        self.codes = {i: Code(i, *v) for i, v in self._t.codes().items()}

    @property
    def damage(self):
        return self._t.damage

    @property
    def calls(self):
        """False for a trace recorded without call records, only events
        (`run --no-trace --events ...`: META calls 0, docs/format.md)."""
        return self.meta.get("calls", 1) != 0

    def no_calls_error(self, what):
        """The TraceError saying that `what` needs the call records this
        trace does not have."""
        return _native.TraceError(f"{self.path}: recorded without calls (run --no-trace), so {what}: read its "
                                  "events with 'stackwatch tasks', 'stackwatch stats' or a timeline export "
                                  "(perfetto, chrome, ctf, sequence)")

    @property
    def complete(self):
        return self._t.complete

    @property
    def end_ns(self):
        """When tracing stopped (ns, like event times), or -1 if unknown."""
        return self._t.end_ns

    def events(self, thread):
        """The events of the thread at position ``thread``, in order."""
        return [Event(*e) for e in self._t.events(thread)]

    def ext_events(self, thread=None, kinds=None):
        """The EXT events (line, instruction, raise, handled, gc_start,
        gc_done, new/delete start/done, thread_start, thread_exit,
        region_begin, region_end; syscall, kernel_lost, off_cpu, on_cpu,
        wakeup and page_fault of `run --kernel`, whose depth is None) of the thread at position ``thread``, or of every thread ordered by time
        when None; only the kinds named in ``kinds`` if given. A list of
        ExtEvent. Raises ValueError for an unknown kind name."""
        mask = 0
        for k in (EXT_KINDS.values() if kinds is None else ([kinds] if isinstance(kinds, str) else kinds)):
            if k not in KIND_MASKS or k not in EXT_KINDS.values():
                raise ValueError(f"unknown event kind {k!r} (known: {', '.join(dict.fromkeys(EXT_KINDS.values()))})")
            mask |= KIND_MASKS[k]
        out = []
        merged = False
        for pos in (range(len(self.threads)) if thread is None else [thread]):
            # The data of each is made in C from its kind's row (records.h).
            for kind, t_ns, depth, code, line, data in self._t.ext_events(pos, mask):
                # depth 2^32-1: a record another thread wrote (a system call): not known
                side = depth == 0xFFFFFFFF
                merged = merged or side
                out.append(ExtEvent(EXT_KINDS[kind], t_ns, pos, None if side else depth, code, line, data))
        if thread is None or merged:
            out.sort(key=lambda e: e.t_ns)   # the threads', or a thread's and its side records, merged
        return out

    def ext_summary(self, filter=None):
        """Counts of the EXT events by kind name (kinds that occur), and GC
        totals: {"counts": {...}, "malformed": n, "gc_collections": pairs of
        gc_start/gc_done, "gc_ns": their total time, "gc_collected",
        "gc_uncollectable", "syscalls": [(name, calls, errors, total_ns)] of
        `run --kernel`'s system calls, "kernel_lost": kernel records lost,
        "off_cpu_intervals" and "off_cpu_ns": the threads' intervals off CPU
        (`run --kernel=sched`) and their time, "page_faults"}."""
        s = self._t.ext_summary(_spec(filter))
        counts = {}
        for k, n in enumerate(s["counts"]):
            if n and k in EXT_KINDS:
                counts[EXT_KINDS[k]] = counts.get(EXT_KINDS[k], 0) + n
        return {"counts": counts, "malformed": s["malformed"], "gc_collections": s["gc_pairs"],
                "gc_ns": s["gc_ns"], "gc_collected": s["gc_collected"],
                "gc_uncollectable": s["gc_uncollectable"], "syscalls": s["syscalls"],
                "kernel_lost": s["kernel_lost"],
                "off_cpu_intervals": s["off_cpu_pairs"], "off_cpu_ns": s["off_cpu_ns"], "page_faults": s["faults"]}

    def syscalls_by_function(self, filter=None):
        """Time in system calls (`run --kernel`) per function: each call
        counts to the innermost frame open on its thread when it began, as
        the exports nest it. [(thread position, code id or None when no
        frame was open, calls, total ns)]."""
        return [r[:4] for r in self._t.kernel_by_function(_spec(filter)) if r[2]]

    def kernel_by_function(self, filter=None):
        """The kernel's events (`run --kernel`) per function, each counted
        where the innermost frame open on its thread was when it began:
        [KernelRow(thread position, code id or None, syscalls, syscall_ns,
        off_cpu intervals, off_cpu_ns, page faults)]."""
        return [KernelRow(*r) for r in self._t.kernel_by_function(_spec(filter))]

    def samples(self, thread=None):
        """The sampler's samples of the thread at position ``thread`` (all
        threads when None), in time order: a list of Sample."""
        frames = {i: SampleFrame(name + " [native]" if kind == 1 else name, filename, line, kind == 1)
                  for i, (kind, name, filename, line) in self._t.sample_frames().items()}
        unknown = SampleFrame("?", "", 0, False)
        return [Sample(t_ns, pos, _STATES.get(state, "unknown"), weight, cpu,
                       tuple(frames.get(f, unknown) for f in stack), lines)
                for t_ns, pos, state, _flags, weight, cpu, stack, lines
                in self._t.samples(-1 if thread is None else thread)]

    def sample_count(self):
        return sum(t["samples"] for t in self.threads)

    def stats(self, filter=None, progress=None):
        """One StatRow per (thread, function) that ran, through a Filter."""
        return [StatRow(*r) for r in self._t.stats(_spec(filter), False, progress)]

    def stats_edges(self, filter=None, progress=None):
        """(rows, edges): the StatRows and one EdgeRow per (thread,
        caller, callee), from one replay."""
        rows, edges = self._t.stats(_spec(filter), True, progress)
        return [StatRow(*r) for r in rows], [EdgeRow(*e) for e in edges]

    def trees(self, filter=None, progress=None, max_nodes=None):
        """The trace's call trees (one replay of each thread the Filter
        keeps) as a formats.Trees: per thread a CallTree whose nodes count
        the calls of their path (self) and their own nanoseconds
        (self_time_ns), exact=True. Trees of more than max_nodes nodes
        together (None: half the machine's memory's worth) raise
        MemoryError, whose message names the filters that help. A trace
        without calls raises TraceError."""
        if not self.calls:
            raise self.no_calls_error("it has no call trees")
        pairs = _native.trace_trees(self._t, _spec(filter), progress, max_nodes)
        threads = [(formats.thread_label({"name": self.threads[pos]["name"],
                                          "thread_id": self.threads[pos]["native_tid"] or pos}),
                    self.threads[pos]["native_tid"] or pos, tree) for pos, tree in pairs]
        end = self.end_ns
        return formats.Trees(threads, None, 0, int(self.meta.get("real0_ns", 0)), end if end > 0 else 0,
                             {"events": self.event_count(), "dropped": self.dropped()}, exact=True)

    def events_bytes(self):
        """Bytes of event chunks a full replay reads (what progress counts)."""
        return self._t.events_bytes()

    def export(self, fmt, path, min_duration_ns=0, filter=None, progress=None, task_flows=None):
        """Writes the trace as chrome JSON, perfetto protobuf or a CTF
        directory (`path` made, or an empty one) through a Filter;
        progress(bytes replayed) is called at most every 0.1 s. task_flows:
        the ends of flows between tasks to draw (Perfetto and Chrome), a
        list of (id, thread position, t_ns, ends, name) sorted by thread
        then time (stackwatch.taskviews.flows makes them from the task
        events)."""
        self._t.export(fmt, path, min_duration_ns, _spec(filter), progress, task_flows)

    def dropped(self):
        return sum(t["dropped"] for t in self.threads)

    def event_count(self):
        return sum(t["events"] for t in self.threads)

    def call_sequence(self, thread, synthetic=False):
        """[(kind name, qualname), ...] for the thread's real events."""
        out = []
        for e in self._t.events(thread):
            kind, _, code, _, syn = e
            if syn and not synthetic:
                continue
            c = self.codes.get(code)
            out.append((KIND_NAMES.get(kind, str(kind)), c.qualname if c else "?"))
        return out
