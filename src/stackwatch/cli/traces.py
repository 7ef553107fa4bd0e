"""The traces of the processes a program started, on the command line: the
end of `stackwatch run` when the program started processes of its own
(their traces listed on the summary line).
"""
import os
import shutil
import tempfile

from ..render import formats
from ..tracer import follow
from ..tracer.tracefile import Trace


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
        formats.FORMATS[fmt].write(output, Trace(trace_path), min_duration_ns=min_ns)
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
