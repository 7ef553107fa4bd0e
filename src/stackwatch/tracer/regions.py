"""Named regions of a thread's time in a trace (format 1.6): a test, a
request, a notebook cell. The exports show each as a slice on a track of
its thread (Perfetto: the thread's "regions" track; Chrome: a complete
event on the thread, category "region"), `Trace.ext_events(kinds=
["region_begin", "region_end"])` reads them back.

    with stackwatch.region("load data"):
        load()

Regions nest among themselves; region_end() closes the thread's innermost
open region. Outside a tracing session, or on a thread that cannot record,
nothing is recorded (begin and end say so by returning False).
"""
import contextlib

from .. import _native


def region_begin(name):
    """A region named `name` (a str, cut at 200 bytes in the file) begins
    on this thread. Returns whether it was recorded."""
    return _native.region_begin(name)


def region_end():
    """This thread's innermost open region ends. Returns whether it was
    recorded."""
    return _native.region_end()


@contextlib.contextmanager
def region(name):
    """The code run in the with block is a region named `name` of this
    thread (nothing when not tracing)."""
    recorded = _native.region_begin(name)
    try:
        yield
    finally:
        if recorded:
            _native.region_end()
