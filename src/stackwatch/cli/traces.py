"""Several traces on the command line: `stackwatch stats` given more than
one trace or a directory (one run's processes, on the host's clock:
tracer/traceset.py), and the end of `stackwatch run` when the program
started processes of its own (their traces listed on the summary line).
"""
import os
import shutil
import sys
import tempfile

from ..render import formats
from ..tracer import follow
from ..tracer.tracefile import Trace
from ..tracer.traceset import TraceSet, expand, is_trace_file
from . import files
from .program import UsageError


def several(args):
    """True when the command names more than one file or a directory."""
    return bool(args.more) or os.path.isdir(args.file)


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


def processes(n):
    return f"{n} process{'' if n == 1 else 'es'}"


# ---- `stackwatch run` ----


def run_trace_path():
    """Where `run --format perfetto|chrome` records before converting: a
    trace in a directory of its own, where the children's traces go too."""
    return os.path.join(tempfile.mkdtemp(prefix="stackwatch-"), "trace.swt")


def convert(fmt, output, trace_path, min_ns):
    """`run --format perfetto|chrome`: the trace written as `fmt` to
    output. The children's traces stay where they are (their directory
    is removed only when there are none). Returns the children's traces."""
    children = follow.child_traces(trace_path)
    try:
        formats.write_trace(fmt, output, Trace(trace_path), min_duration_ns=min_ns)
    finally:
        if children:
            os.unlink(trace_path)
        else:
            shutil.rmtree(os.path.dirname(trace_path), ignore_errors=True)
    return children


def children_text(children, full=False):
    """The end of `run`'s summary line: the traces of the processes the
    program started, beside its own (those still running are marked)."""
    if not children:
        return ""
    names = [(p if full else os.path.basename(p)) + (" (running)" if _alive(pid) else "")
             for pid, p in children]
    n = len(children)
    return f"; {n} child process{'' if n == 1 else 'es'}: {', '.join(names)}"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
