"""Several traces on the command line: `stackwatch stats` and `stackwatch
export` given more than one trace or a directory (one run's processes, on
the host's clock: tracer/traceset.py), and the end of `stackwatch run`
when the program started processes of its own (their traces listed on the
summary line, and merged into the --format output).
"""
import os
import shutil
import sys
import tempfile

from ..render import formats
from ..tracer import follow
from ..tracer.task_events import read_task_events
from ..tracer.tracefile import Trace
from ..tracer.traceset import TraceSet, expand, is_trace_file
from . import files, progress, tasks
from .program import UsageError, check_writable, output_what, writing


def several(args):
    """True when the command names more than one file or a directory."""
    return bool(args.more) or os.path.isdir(args.file)


def refuse_one_trace_options(args, more=()):
    """UsageError when the command names an option that applies to one
    trace (the filters, and `more` of the command's own)."""
    for name in ("thread", "start", "stop", "include", "exclude", "max_depth") + tuple(more):
        if getattr(args, name, None):
            raise UsageError(f"--{name.replace('_', '-')} applies to one trace, not to several")


def gather(args):
    """The trace files the command names (directories expanded); UsageError
    for a file that is no trace, or for none at all."""
    paths = expand([args.file] + list(args.more))
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"{p}: No such file or directory")
        if not is_trace_file(p):
            kind = files.kind_of(p)   # UsageError for a file that is neither
            raise UsageError(f"{p}: a {kind} cannot be merged with traces")
    if not paths:
        raise UsageError(f"{args.file}: no stackwatch trace in this directory")
    return paths


def opened(paths):
    """The TraceSet of the paths, with a warning for each damaged trace and
    for traces of several hosts (whose clocks need not agree)."""
    s = TraceSet(paths)
    for t in s.traces:
        if t.damage:
            print(f"warning: {t.path}: {t.damage}; using the intact part", file=sys.stderr)
    hosts = s.hosts()
    if len(hosts) > 1:
        print(f"warning: the traces come from {len(hosts)} hosts ({', '.join(hosts)}): their clocks "
              f"need not agree", file=sys.stderr)
    return s


def export(args, min_ns):
    """`stackwatch export A.swt B.swt ... | DIR -o OUT`: the processes of
    one run as one timeline (or one set of call trees)."""
    refuse_one_trace_options(args)
    if formats.FORMATS[args.format].directory:
        raise UsageError(f"the {args.format} export of several processes is not supported yet: export one trace")
    paths = gather(args)
    check_writable(args.output, output_what(args.format))
    s = opened(paths)
    if not min_ns:
        warn_if_big(args.format, s, "--min-duration 10us")
    try:
        with writing(args.output):
            formats.write_trace(args.format, args.output, s, min_duration_ns=min_ns)
    except MemoryError as e:      # call trees too large: the message says what helps
        raise UsageError(str(e) or "out of memory") from None
    print(f"stackwatch: wrote {args.output} ({processes(len(s))})", file=sys.stderr)
    return 0


def processes(n):
    return f"{n} process{'' if n == 1 else 'es'}"


def each_trace(data):
    """The Trace objects of a Trace or of a TraceSet."""
    return getattr(data, "traces", [data])


def warn_if_big(fmt, data, cuts):
    """Before a timeline export of a Trace or a TraceSet (every process's
    events) that would be over 1 GB: the warning line of `export`, naming
    the options `cuts` that would cut it."""
    events = sum(t.event_count() for t in each_trace(data))
    warning = progress.big_export_warning(fmt, events, True, cuts=cuts)
    if warning:
        print(f"stackwatch: {warning}", file=sys.stderr)


# ---- `stackwatch run` ----


def run_trace_path():
    """Where `run --format perfetto|chrome` records before converting: a
    trace in a directory of its own, where the children's traces go too."""
    return os.path.join(tempfile.mkdtemp(prefix="stackwatch-"), "trace.swt")


def discard_run_trace(trace_path):
    """The program did not start: the directory of run_trace_path() goes."""
    shutil.rmtree(os.path.dirname(trace_path), ignore_errors=True)


def convert(fmt, output, trace_path, min_ns):
    """`run --format perfetto|chrome|...`: the trace, and those of the
    processes the program started merged with it, written as `fmt` to
    output (after the warning of a big export); the temporary traces
    removed. Returns (the children's traces that were merged, the events
    and the threads of every process merged)."""
    children = follow.child_traces(trace_path)
    try:
        if formats.FORMATS[fmt].takes == formats.TASKS:   # the sequence diagram: this process's tasks
            children, data = [], Trace(trace_path)
            with writing(output):
                formats.write_trace(fmt, output, data, tasks=read_task_events(data))
            return children, data.event_count(), len(data.threads)
        data = TraceSet([trace_path] + [p for _, p in children]) if children else Trace(trace_path)
        if not min_ns:
            warn_if_big(fmt, data, "--min-duration 10us, --max-depth or --exclude")
        flows = tasks.flows_of(data, None, fmt) if isinstance(data, Trace) else None   # (one process's)
        with writing(output):
            formats.write_trace(fmt, output, data, min_duration_ns=min_ns, task_flows=flows)
    finally:
        shutil.rmtree(os.path.dirname(trace_path), ignore_errors=True)
    merged = each_trace(data)
    return children, sum(t.event_count() for t in merged), sum(len(t.threads) for t in merged)


def children_text(children, merged=False):
    """The end of `run`'s summary line: the traces of the processes the
    program started, beside its own (those still running are marked), or
    with merged=True how many processes the output holds."""
    if not children:
        return ""
    n = len(children)
    if merged:
        return f"; {processes(n + 1)} merged"
    names = [os.path.basename(p) + (" (running)" if _alive(pid) else "") for pid, p in children]
    return f"; {n} child process{'' if n == 1 else 'es'}: {', '.join(names)}"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
