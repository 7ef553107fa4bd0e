"""The files `stackwatch stats` and `stackwatch export` read: which kind a
file is (a trace or a profile file, by its first bytes), a profile file
loaded with its warnings, and the error line after the output of a
damaged profile file's intact part."""
import sys

from .. import _native
from ..profiler import profile_file
from .program import UsageError

TRACE_MAGIC = b"\x89SWT\r\n\x1a\n"


def kind_of(path):
    """"trace" or "profile" from the file's first bytes; UsageError for an
    empty file or one that is neither (OSError if it cannot be read)."""
    with open(path, "rb") as f:
        head = f.read(16)
    if not head:
        raise UsageError(f"{path}: empty file (not a stackwatch trace or profile)")
    if _native.is_profile(head):
        return "profile"
    if head.startswith(TRACE_MAGIC):
        return "trace"
    raise UsageError(f"{path}: not a stackwatch trace (.swt) or profile (.swprof)")


def load_profile(path):
    """The History of a profile file; UsageError if it cannot be read at
    all. A damaged file's intact part is returned (see damaged())."""
    try:
        h = profile_file.load_profile(path)
    except ValueError as e:
        raise UsageError(str(e)) from None
    info = h.info()
    if info["evicted"]:
        print(f"warning: {path}: the first {info['evicted']} cycles ({info['evicted_samples']} samples) "
              f"were not kept (the history's maxlen)", file=sys.stderr)
    return h


def trace_damaged(path, t):
    """After the output of a damaged trace's intact part (stats printed,
    export written): one line "stackwatch: error: ..." naming each damaged
    range (offset, chunks and events lost), and exit status 1 (0 for an
    intact trace), as for a profile file (damaged())."""
    if not t.damage:
        return 0
    print(f"stackwatch: error: {path} is damaged ({t.damage}); the output above is what could be read "
          f"({t.event_count()} events)", file=sys.stderr)
    return 1


def damaged(path, h):
    """After the output of a damaged file's intact part (stats printed,
    export written): one line "stackwatch: error: ..." naming the damage,
    and exit status 1 (0 for an intact file)."""
    damage = h.info()["damage"]
    if not damage:
        return 0
    print(f"stackwatch: error: {path} is damaged ({damage}); the output above is its intact part "
          f"({len(h)} cycles)", file=sys.stderr)
    return 1
