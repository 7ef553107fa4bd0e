"""Reading trace files from Python: a thin layer over the C reader."""
from collections import namedtuple

from . import _native

Event = namedtuple("Event", "kind t_ns code depth synthetic")
Code = namedtuple("Code", "id kind name qualname filename firstlineno")
StatRow = namedtuple("StatRow", "thread code calls total_ns own_ns")

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
    def complete(self):
        return self._t.complete

    def events(self, thread):
        """The events of the thread at position ``thread``, in order."""
        return [Event(*e) for e in self._t.events(thread)]

    def stats(self):
        return [StatRow(*r) for r in self._t.stats()]

    def export(self, fmt, path, min_duration_ns=0):
        self._t.export(fmt, path, min_duration_ns)

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
