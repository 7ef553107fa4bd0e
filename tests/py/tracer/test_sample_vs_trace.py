"""Sampled stacks checked against the exact trace (`stackwatch run
--sample`: both records in one file, on one clock). Every sample's Python
stack must be a stack the exact tracer had open at some instant of the
sample's read: a sampler that shows a stack the program never had (a
generator without its callers, two instants mixed) is wrong.

The rule, exactly:
- The read of a sample lies between its time (the sampling round's start)
  and the next round's start (of any thread; the trace's end after the
  last round). The stacks open then are the one open at the round's start
  and the one after each of the thread's events up to the next round.
- One event more on each side: the tracer stamps an entry after the frame
  became visible to a reader (3.12+: sys.monitoring's PY_START fires after
  RESUME's eval-breaker check, where a thread may wait 5 ms for the GIL)
  and an exit before the frame is unlinked, so the stack a read sees may be
  the one after the next event or before the previous one.
- 3.9/3.10 read the frames one by one, leaf first, while the thread runs
  (3.11+ copy the stack at once): the leaf may return or call on while its
  callers are read, so the leaf frame may be one open at an instant of the
  window and its callers (read after it) those of a later one: the sample
  minus its leaf must be the callers of an open stack at or after the one
  whose leaf matches. Nothing else is loosened.
- Frames that the trace leaves out by design are handled exactly, not
  skipped: the launcher's frames of `-m` (runpy's, outermost; the trace
  never holds a runpy frame); (3.11+) a generator's frame while it is
  being created (CPython runs it on the thread's stack up to
  RETURN_GENERATOR; sys.setprofile reports no call), as the leaf only;
  stackwatch's stand-in for signal.signal and signal.getsignal
  (tracer/signals.py), a frame of stackwatch's own, which the stream cuts
  with everything outside it: a sample whose outermost frame is the real
  signal.signal or signal.getsignal (that the stand-in calls) must be the
  inner end of an open stack.
- Failed samples (counted, stackless) and samples with no frame of the
  program (the stream cuts stackwatch's own frames) are counted, not
  checked; the trace having nothing open for the thread (before its first
  event) likewise.
"""
import os
import signal
import sys
from bisect import bisect_right
from pathlib import Path

import pytest

from conftest import needs_sampler, run
from stackwatch import Trace, _native

pytestmark = [needs_sampler]

PROGRAMS = Path(__file__).resolve().parents[2] / "programs"
ENTER = {_native.OP_CALL, _native.OP_RESUME}
EXIT = {_native.OP_RETURN, _native.OP_YIELD, _native.OP_UNWIND}
FAILED = 2   # SW_SAMPLE_FAILED
ONE_BY_ONE = sys.version_info < (3, 11)


class Stacks:
    """The stacks a thread had open, as nodes of a trie of frames (each
    frame as (filename, first line)): node 0 is the empty stack."""

    def __init__(self):
        self.parent, self.frame, self.child = [0], [None], {}

    def enter(self, node, frame):
        k = (node, frame)
        if k not in self.child:
            self.child[k] = len(self.parent)
            self.parent.append(node)
            self.frame.append(frame)
        return self.child[k]

    def find(self, frames):
        node = 0
        for f in frames:
            node = self.child.get((node, f))
            if node is None:
                return None
        return node

    def frames(self, node):
        out = []
        while node:
            out.append(self.frame[node])
            node = self.parent[node]
        return tuple(reversed(out))


def open_stacks(t, pos, stacks):
    """([t_ns], [node]): the thread's Python stack after each of its
    events, and the functions that resumed or yielded (generators)."""
    times, nodes, generators = [], [], set()
    node = 0
    key = {i: (c.filename, c.firstlineno) for i, c in t.codes.items()}
    for kind, t_ns, code, _, _ in t._t.events(pos):
        if kind in ENTER:
            node = stacks.enter(node, key[code])
        elif kind in EXIT:
            node = stacks.parent[node]
        else:
            continue
        if kind in (_native.OP_RESUME, _native.OP_YIELD):
            generators.add(key[code])
        times.append(t_ns)
        nodes.append(node)
    return times, nodes, generators


STANDIN_CALLS = {(signal.__file__, f.__code__.co_firstlineno) for f in (signal.signal, signal.getsignal)}


def is_runpy(filename):
    return filename in ("<frozen runpy>",) or filename.endswith(os.sep + "runpy.py")


def matches(sample, cands, stacks, generators):
    """Whether the sample's stack (frames, outermost first) is one of the
    candidate stacks (trie nodes, in time order) by the rule of the
    module's docstring."""
    node = stacks.find(sample)
    if node is not None and node in cands:
        return True
    if sample[0] in STANDIN_CALLS:
        return any(len(c) > len(sample) and c[-len(sample):] == sample for c in map(stacks.frames, cands))
    if not ONE_BY_ONE:
        # a generator's frame being created, as the leaf
        return len(sample) > 1 and sample[-1] in generators and stacks.find(sample[:-1]) in cands
    for i, c in enumerate(cands):
        c = stacks.frames(c)
        if c and c[-1] == sample[-1] and any(stacks.frames(d)[:len(sample) - 1] == sample[:-1] for d in cands[i:]):
            return True
    return False


def compare(path):
    """(checked, differing examples, counts of the samples not checked)."""
    t = Trace(path)
    assert all(not is_runpy(c.filename) for c in t.codes.values())
    raw = t._t.samples(-1)
    samples = t.samples()
    rounds = sorted({s.t_ns for s in samples})
    names = {(c.filename, c.firstlineno): c.qualname for c in t.codes.values()}
    checked, differ = 0, []
    skipped = {"failed": 0, "no frame": 0, "nothing open": 0}
    for pos in range(len(t.threads)):
        stacks = Stacks()
        times, nodes, generators = open_stacks(t, pos, stacks)
        for s, r in zip(samples, raw):
            if s.thread != pos:
                continue
            if r[3] & FAILED:
                skipped["failed"] += 1
                continue
            st = [(f.filename, f.line) for f in s.stack]
            while st and is_runpy(st[0][0]):
                st.pop(0)   # the launcher's frames (-m), outermost
            if not st:
                skipped["no frame"] += 1
                continue
            k = bisect_right(rounds, s.t_ns)
            nxt = rounds[k] if k < len(rounds) else t.end_ns
            i, j = bisect_right(times, s.t_ns), bisect_right(times, nxt)
            if i == 0:
                skipped["nothing open"] += 1
                continue
            cands = nodes[max(i - 2, 0):min(j + 1, len(nodes))]
            checked += 1
            if not matches(tuple(st), cands, stacks, generators):
                differ.append(([names.get(f, f) for f in st],
                               [[names.get(f, f) for f in stacks.frames(c)] for c in cands[:4]]))
    return checked, differ, skipped


def run_sampled(tmp_path, args, name):
    out = str(tmp_path / f"{name}.swt")
    r = run(["run", "--sample=200us", "-o", out, *args])
    assert r.returncode == 0, r.stderr
    return out


def report(name, checked, differ, skipped):
    print(f"{name} on {sys.version.split()[0]}: {checked} samples checked, {len(differ)} differ, not checked: "
          + ", ".join(f"{v} {k}" for k, v in skipped.items()))
    for sample, cands in differ[:5]:
        print("  sample:", sample[-10:])
        for c in cands:
            print("  trace: ", c[-10:])


@pytest.mark.timing
def test_generators_coroutines_threads_exceptions(tmp_path):
    path = run_sampled(tmp_path, [str(PROGRAMS / "gen_shapes.py"), "7", "4"], "shapes")
    checked, differ, skipped = compare(path)
    report("gen_shapes", checked, differ, skipped)
    assert not differ
    # (how many depends on how busy the machine was; the program runs
    # about 0.5 s under the tracer, at 5 kHz on two threads)
    assert checked >= 100
    # Both threads sampled, inside generators and coroutines.
    t = Trace(path)
    leaves = {s.stack[-1].name for s in t.samples() if s.stack}
    assert {"iter_child_nodes", "flatten", "leaf"} & leaves
    assert len({s.thread for s in t.samples()}) == 2


def pyflakes_target():
    try:
        import pyflakes
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("pyflakes is not installed (scripts/venv.sh installs it)")
        pytest.skip("pyflakes is not installed (scripts/venv.sh installs it)")
    return str(Path(pyflakes.__file__).parent)


@pytest.mark.timing
def test_pyflakes_on_a_source_tree(tmp_path):
    """A real program from PyPI, run with -m (runpy's frames outermost in
    the samples, none in the trace)."""
    src = pyflakes_target()
    path = run_sampled(tmp_path, ["-m", "pyflakes", src], "pyflakes")
    checked, differ, skipped = compare(path)
    report("pyflakes", checked, differ, skipped)
    assert not differ
    assert checked >= 100
