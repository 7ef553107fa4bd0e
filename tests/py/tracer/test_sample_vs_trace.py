"""Sampled stacks checked against the exact trace (`stackwatch run
--sample`: both records in one file, on one clock). Every sample's Python
stack must be a stack the exact tracer had open at some instant of the
sample's read: a sampler that shows a stack the program never had (a
generator without its callers, two instants mixed) is wrong. Its programs:
tests/programs/gen_shapes.py, tests/programs/resumed_by_c.py, pyflakes,
tests/programs/greenlet_switches.py,
tests/programs/fresh_codes.py, tests/programs/entered_from_c.py,
tests/programs/slot_reuse.py and toolz's
test suite.

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
- Greenlets (`--events tasks`): the trace has a track per task, each
  nesting its own calls from its run function; the sampler reads the
  thread's current stack, the running task's. The thread's stack is the
  tracks merged by time: after each event, the open stack of the task whose
  event it is. A switch comes between the last event of one task and the
  next of another (the switch itself is a C call, not an event), so it is
  one more instant of the thread, stamped as that last event, whose stack
  is the open stack of the task switched to (its frames when it was last
  switched out): without it, a read in the gap between the switch and the
  next task's first event would have no stack to match. A task whose run
  function returns has ended, into its parent: the thread's own stack
  (task 0: every greenlet of greenlet_switches.py is made by the main
  one), which may run with no event of its own before it switches on. The
  rest of the rule applies to this merged stack unchanged; a thread
  without tasks has one track and no switch.
- (With tasks only.) Task events hook greenlet as the program imports it
  (a finder in C: no frame of stackwatch's inside the program's import);
  switching them on runs stackwatch's start-up once tracing has begun,
  whose samples hold the stdlib frames it calls, cut at stackwatch's
  frames, while the trace has nothing open until the program's first
  frame. A sample whose round starts before the program's first frame
  while the trace has nothing open is that start-up: counted, not checked.
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
import heapq
import os
import shutil
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


def open_stacks(t, positions, stacks):
    """([t_ns], [node]): a thread's Python stack after each of its events,
    and the functions that resumed or yielded (generators). `positions`:
    the thread's track and those of its tasks (greenlets), merged by time:
    the thread runs the task of the track whose event came last. Between
    the last event of one task and the next of another the thread switched
    to that other task's open stack (the frames it had when it was last
    switched out), an instant stamped as the first one's event (the switch
    may come at any time before the other's event)."""
    times, nodes, generators = [], [], set()
    key = {i: (c.filename, c.firstlineno) for i, c in t.codes.items()}
    tracks = [[(t_ns, p, kind, code) for kind, t_ns, code, _, _ in t._t.events(p) if kind in ENTER | EXIT]
              for p in positions]
    top = dict.fromkeys(positions, 0)   # each task's open stack
    running = positions[0]
    for t_ns, p, kind, code in heapq.merge(*tracks):
        if p != running:
            running = p
            times.append(times[-1] if times else t_ns)
            nodes.append(top[p])
        if kind in ENTER:
            top[p] = stacks.enter(top[p], key[code])
        else:
            top[p] = stacks.parent[top[p]]
        if kind in (_native.OP_RESUME, _native.OP_YIELD):
            generators.add(key[code])
        times.append(t_ns)
        nodes.append(top[p])
        if p != positions[0] and top[p] == 0:
            # the greenlet's run function returned: it ended, into its
            # parent (the thread's own, task 0, in greenlet_switches.py)
            running = positions[0]
            times.append(t_ns)
            nodes.append(top[running])
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
    skipped = {"failed": 0, "no frame": 0, "nothing open": 0, "start-up": 0}
    for pos, th in enumerate(t.threads):
        if th["task"]:
            continue   # a greenlet's track: its samples are its thread's
        tasks = [q for q, o in enumerate(t.threads) if o["task"] and o["thread"] == th["index"]]
        stacks = Stacks()
        times, nodes, generators = open_stacks(t, [pos] + tasks, stacks)
        # (with tasks: the program's first frame; stackwatch's start-up before)
        started = tasks and next((e[1] for e in t._t.events(pos)
                                  if e[0] in ENTER and e[3] == 0 and t.codes[e[2]].name == "<module>"), t.end_ns)
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
            if tasks and s.t_ns < started and nodes[i - 1] == 0:
                skipped["start-up"] += 1
                continue
            cands = nodes[max(i - 2, 0):min(j + 1, len(nodes))]
            checked += 1
            if not matches(tuple(st), cands, stacks, generators):
                differ.append(([names.get(f, f) for f in st],
                               [[names.get(f, f) for f in stacks.frames(c)] for c in cands[:4]]))
    return checked, differ, skipped


def run_sampled(tmp_path, args, name, cwd=None, env=None, interval="200us"):
    out = str(tmp_path / f"{name}.swt")
    r = run(["run", f"--sample={interval}", "-o", out, *args], cwd=cwd, env=env)
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


@pytest.mark.timing
def test_parked_ahead_of_the_walk(tmp_path):
    """The same program with every sample of the thread holding the GIL
    taken parked before any walk (STACKWATCH_TEST_PARK_AHEAD=1: the parked
    walk's path, otherwise taken only after a walk found torn; its reads
    guessed from the thread's last walk, its code objects' headers from
    its last parked one): every sample is still a stack the trace had
    open."""
    sampled_parking(tmp_path, "1")


@pytest.mark.timing
def test_generators_resumed_by_c_parked_ahead(tmp_path):
    """Generator expressions that all(), any(), sum() and others resume from
    C, at several depths of the C stack (tests/programs/resumed_by_c.py),
    every sample parked ahead: each resume is a new run of the interpreter,
    and a thread parked while a run is half made has stale words in it
    (pystack.c "Runs half made"): such a walk is torn, redone or failed,
    never a generator without its callers. (The lone generator seen in the
    lead's runs, 2 runs in ~20 of this file, was not reproduced here: 0 in
    62,697 samples of this program's first form, all its generators
    resumed at one depth of the C stack, before the fix; the instant is a
    few instructions wide and needs a stale NULL; test_dump.py's
    test_a_run_half_made_is_not_read_as_a_root makes it in gdb. This test
    keeps the shape sampled and checked.)"""
    # (at 50 us one run at load 20 took no tick at all: 6,639 missed)
    path, checked = sampled_parking(tmp_path, "1", min_checked=100, program=["resumed_by_c.py", "2500"])
    meta = {k: v for k, v in Trace(path).meta.items() if k.startswith("sampler.")}
    # Few parked walks fail: 0 in 15 of 16 runs at load 18-23, but one had
    # 77 of 281, with the first form of the rule (see test_dump.py's
    # greenlet test), its cause not found. (Its first form, before the
    # fix: 0-16 of ~1,000-2,000 a run on a busy 3.12.) A park not answered
    # in time (the thread waiting for a CPU) is followed by one unparked
    # walk, which asks each caller to hold its callee, which a generator
    # resumed from C never does: under make test's load one 3.11 run had
    # 143 of 364 failed that way. Those are the load's, not the rule's.
    assert meta["sampler.failed"] - meta["sampler.park_failed"] - meta["sampler.muted_failed"] <= max(5, checked // 4), meta


def sampled_parking(tmp_path, mode, min_checked=50, program=("gen_shapes.py", "5", "3"), interval="200us"):
    """A program (gen_shapes.py) sampled with STACKWATCH_TEST_PARK_AHEAD=mode,
    every sample checked (at least min_checked): (the trace's path, samples
    checked)."""
    path = run_sampled(tmp_path, [str(PROGRAMS / program[0]), *program[1:]], "parking",
                       env={"STACKWATCH_TEST_PARK_AHEAD": mode}, interval=interval)
    checked, differ, skipped = compare(path)
    report(f"{program[0]}, parks {mode}", checked, differ, skipped)
    assert not differ
    assert checked >= min_checked
    return path, checked


@pytest.mark.timing
@pytest.mark.versions("3.10", "3.12")
def test_a_failed_park_falls_back_to_one_checked_walk(tmp_path):
    """A park not answered in time is followed by one more walk, unparked,
    checked strictly (pystack.c walk_after_park: 3.9/3.10 objects_whole,
    3.11+ still_whole; in the sampler's counts, after_park). In real runs
    that is rare (a thread waiting 10 ms for a CPU), so here every park of
    the thread holding the GIL is counted as not answered, without a signal
    (STACKWATCH_TEST_PARK_AHEAD=unanswered: parked ahead of every walk, as
    in the test above, and each park failing): every such sample is that
    walk's, whole (a stack the trace had open) or counted failed."""
    # (The walk after a failed park also asks each caller to hold its callee,
    # pystack.c callees_held, which a generator resumed from C never does:
    # most of these walks of gen_shapes fail, 89 of 362 checked here, 7 in
    # one make test. Failed is counted, never shown as a stack.)
    # How many such walks are whole varies widely from run to run on a
    # quiet machine (1 to 97 of ~250 samples, the thread running while
    # read): up to three runs, until 5 are checked in all.
    # (The samples checked are also the other thread's, read unparked: when
    # few walks after a park are whole, most of those checked are its; a
    # make test had 16 checked, 2 of them after a park.)
    total = after = 0
    for attempt in range(3):
        (tmp_path / str(attempt)).mkdir()
        path, checked = sampled_parking(tmp_path / str(attempt), "unanswered", min_checked=0)
        meta = Trace(path).meta
        # Every park failed, none was made: the samples of the thread
        # holding the GIL (a thread of gen_shapes.py's two mostly holds it)
        # were read by the walk after it, or failed.
        assert meta["sampler.parked"] == 0 and meta["sampler.park_failed"] >= meta["sampler.parked_ahead"] > 0, meta
        total += checked
        after += meta["sampler.after_park"]
        if total >= 5 and after >= 3:
            break
    assert total >= 5 and after >= 3, (total, after)
    # (How many of those walks fail is the load's: an unparked walk of a
    # running thread on 3.10 reads its frames one by one, and in make test
    # 66 of 81 failed. What matters is above: none differs.)


@pytest.mark.timing
def test_code_objects_freed_and_made_again(tmp_path):
    """Code objects freed and made again at the same addresses while the
    program is sampled fast (tests/programs/fresh_codes.py: modules
    imported afresh, source compiled and run, each with its own file name
    and first lines). A module's code is freed once run and the next one
    takes its address at once: a frame named after the code object that
    lived there before or after (the reader preempted between a frame's
    read and its code's: 3.10), or an __init__ of such a module missing
    from the trace (3.13's inlined constructor calls), is a stack the
    program never had. (Before the fixes: about one run in two on 3.13,
    one in eight on a busy 3.10.) Modules without functions first: the
    next one's code, file name, line table and globals are mostly made
    where the last one's were, pointer for pointer, and its file name is
    freed with its code (pystack.c confirm_codes; before it, 1 run in 6
    on 3.11 named frames after the module imported before, and make test
    named an import's module frame with a freed file name's new contents,
    on 3.9, 3.10 and 3.11)."""
    path = run_sampled(tmp_path, [str(PROGRAMS / "fresh_codes.py"), str(tmp_path / "modules"), "40", "3"],
                       "fresh", interval="50us")
    checked, differ, skipped = compare(path)
    report("fresh_codes", checked, differ, skipped)
    assert not differ
    assert checked >= 100
    # Samples in the fresh code (an imported module's or compiled code's).
    files = {f.filename for s in Trace(path).samples() for f in s.stack}
    assert any(f.startswith("<compiled ") or os.path.basename(f).startswith("fresh_") for f in files), \
        sorted(files)[:20]


def slot_reuse_program():
    """tests/programs/slot_reuse.py as a module (its functions' code objects)."""
    sys.path.insert(0, str(PROGRAMS))
    try:
        import slot_reuse
    finally:
        sys.path.remove(str(PROGRAMS))
    return slot_reuse


def sampled_slot_reuse(tmp_path, args, name, leaves):
    """Runs slot_reuse.py ARGS sampled at 20 kHz: every sample must be a
    stack the trace had open, and the given functions among the leaves."""
    path = run_sampled(tmp_path, [str(PROGRAMS / "slot_reuse.py"), *args], name.replace(" ", "_"), interval="50us")
    checked, differ, skipped = compare(path)
    report(name, checked, differ, skipped)
    assert checked >= 500   # (2,500-6,400 on a quiet machine; fewer when the sampler waits for a CPU)
    got = {s.stack[-1].name for s in Trace(path).samples() if s.stack}
    assert leaves <= got, got
    assert not differ


@pytest.mark.timing
@pytest.mark.versions("3.11")
def test_a_slot_reused_by_the_next_call(tmp_path):
    """A loop calling g (which calls h), then f, at one slot
    (tests/programs/slot_reuse.py): a walk that reads the thread state
    while h runs and the frames once f took g's slot finds h above f, h's
    dead frame still linked to the slot, and the check after it may tear
    the same way (f at the same instruction). Before the check compared
    the callers' frames whole, about 1 sample in 4,000 was f calling h
    (3.11; the check is 3.11+'s, whose frames the other programs above
    exercise on 3.12 and 3.13). The check also reads the thread state
    again at the end of its read; with a core kept busy this program still
    showed f calling h (once in 30 runs, about 60,000 samples; 4 in 17,672
    at load 10): a round of its loop made whole within the check's one
    system call, the loop running on on the other core. Now the frames
    must fit (pystack.c frames_fit): h's dead frame lies g's frame size
    above the slot, not f's (f's frames are a word larger than g's here,
    which the test asserts: a slot reused by code of the same frame size
    is not told, docs/architecture.md "Torn stacks")."""
    slot_reuse = slot_reuse_program()
    assert slot_reuse.f.__code__.co_stacksize != slot_reuse.g.__code__.co_stacksize
    sampled_slot_reuse(tmp_path, ["10", "100000"], "slot_reuse", {"f", "h"})


@pytest.mark.timing
@pytest.mark.versions("3.11", "3.13")
def test_a_slot_reused_by_a_call_of_the_same_size(tmp_path):
    """The same loop with f2 and g2, whose frames are of one size
    (slot_reuse.py `same`): h2's dead frame above f2 fits, and a walk torn
    that way passed every check made while the thread runs (f2 calling h2:
    3-17 samples in 30,000-106,000 on 3.11 and 3.13, none seen on 3.12).
    Now a muted thread's walks are checked strictly too, and a walk whose
    caller does not hold its callee's function is redone parked (pystack.c
    callees_held; docs/architecture.md "Torn stacks"): 0 in 22 runs here on
    3.11, some with a core busy. On 3.13 1 run of 48 had one sample that
    differed: a muted thread's walk, which callees_held was not asked of
    (next test); since, 0 in 392,196 samples in 66 runs on 3.13, 21 of
    them with a core busy (load 9-24). On 3.11 f2's dead word still named
    h2 (docs/architecture.md "Stale words"): 1 sample in 14,674, 1 run in
    15 with a compiler running beside it; since, a walk whose leaf rests on
    a return instruction is redone parked (pystack.c "Returned frames")."""
    slot_reuse = slot_reuse_program()
    f2, g2 = slot_reuse.f2.__code__, slot_reuse.g2.__code__
    assert (f2.co_stacksize, f2.co_nlocals) == (g2.co_stacksize, g2.co_nlocals)
    sampled_slot_reuse(tmp_path, ["10", "300000", "same"], "slot_reuse same", {"f2", "h2"})


@pytest.mark.timing
@pytest.mark.versions("3.13")
def test_a_slot_of_the_same_size_in_a_thread_that_cannot_be_parked(tmp_path):
    """The same loop in a thread that blocks the sampler's signal
    (slot_reuse.py `same blocked`): its parks fail, it is muted and read unparked for a
    while, its walks checked strictly. Before such walks were asked whether
    each caller holds its callee (pystack.c callees_held), h2 called by f2
    passed the check whenever a whole round of the loop fell within each of
    the walk's two system calls: 4 samples in 57,161 in 10 runs on 3.13
    with a core busy (and once in 41 runs of the plain `same` loop, whose
    park had timed out and muted it: 4 in 232 muted walks). Now the walk is
    retried once, then failed: 0 in 56,054 (10 runs), and 0 in 231,789 in
    66 runs more, 21 of them with a core busy (load 9-24). (Those runs
    blocked every signal; 3 of them had 10-21 samples, the sampler making
    31-63 rounds in 1.4-2.5 s, not understood. Blocking only the sampler's
    signal: 0 in 51,609 in 14 runs, each at least 2,564.)"""
    path = run_sampled(tmp_path, [str(PROGRAMS / "slot_reuse.py"), "10", "200000", "same", "blocked"],
                       "slot_reuse_blocked", interval="50us")
    checked, differ, skipped = compare(path)
    report("slot_reuse same blocked", checked, differ, skipped)
    assert int(Trace(path).meta["sampler.park_failed"]) >= 1   # (it was muted)
    # (A muted walk of this thread, its reads retried while the loop runs
    # on, takes ~0.6 ms: a quiet machine checked 275-559 samples a run,
    # fewer than a busy one, where the thread is off its CPU more often.)
    assert checked >= 150
    assert not differ


@pytest.mark.timing
@pytest.mark.versions("3.12", "3.13")
def test_frames_entered_from_c(tmp_path):
    """3.12+: Python code that C code enters again and again
    (tests/programs/entered_from_c.py: isinstance's __instancecheck__,
    sorted's key function, a class's __init__, map() inside a generator),
    sampled fast. Each such call runs under a shim frame on the C stack,
    read apart from the frames copied with the top of the thread's stack;
    the call returns and the next one is made at the same addresses
    meanwhile, and the shim's memory is reused by C code in between: a
    shim read then, its link NULL, would make the frame a root, sampled
    alone, without its callers (pystack.c still_whole reads such frames
    again). (The lone frame was not reproduced here before that fix: the
    test guards the shape, its samples checked against the trace.)"""
    path = run_sampled(tmp_path, [str(PROGRAMS / "entered_from_c.py"), "2400"], "from_c", interval="50us")
    checked, differ, skipped = compare(path)
    report("entered_from_c", checked, differ, skipped)
    assert not differ
    assert checked >= 100
    # Samples in the program's rounds, under their callers. (Where in a
    # round varies: with both cores taken, the samples of a run can bunch
    # in one or two of its functions.)
    stacks = [[f.name for f in s.stack] for s in Trace(path).samples() if s.stack]
    assert sum(st[:3] == ["<module>", "main", "round_"] for st in stacks) >= 50, stacks[:20]


def need(module):
    """Imports `module` (installed by scripts/venv.sh), or skips (fails under CI)."""
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is not installed (scripts/venv.sh installs it)")
        pytest.skip(f"{module} is not installed (scripts/venv.sh installs it)")


def pyflakes_target():
    """pyflakes's own modules (not its tests: the run stays short), each
    three times: once gave 98 samples checked in a fresh clone's run, under
    the 100 the test asks for."""
    src = Path(need("pyflakes").__file__).parent
    return [str(src / name) for name in ("checker.py", "messages.py", "api.py")] * 3


# On 3.12 and 3.13 (issue 20) a frame was rarely sampled alone, without
# its callers: a frame that C code entered (ABCMeta.__subclasscheck__,
# PathFinder.find_spec during an import: below it, the shim frame of that
# run of the interpreter, on the C stack), seen twice in about 190 runs of
# fresh_codes.py and once in toolz's suite (3.13), and once in make test
# (pyflakes' Checker.checkDeadScopes, 3.12). The hole found: a shim is
# read apart from the frames copied with the top of the stack, and the
# check after the walk did not read it again, so a shim read while its
# memory was reused (its link NULL) would end the walk as the thread's
# root. Without that second read, 22 walks in 60 runs of fresh_codes.py
# with importlib.invalidate_caches() (3.13) were kept whose shim had
# changed by the check (none of them gave a differing sample: the lone
# frame itself was not reproduced). Now those frames are read again
# (pystack.c still_whole; test_frames_entered_from_c): 0 samples differing
# in 30 runs each of both tests on 3.12 and 3.13 (half of them with a core
# busy). And once in make test on 3.11, in toolz's suite under pytest, a
# sample had safe_getattr where the trace had FixtureManager._check_for_
# wrapped_fixture: a slot reused by the next call, torn the same way in
# both reads of the walk's check (test_a_slot_reused_by_the_next_call):
# 0 differing in 92 runs of both tests on 3.11 and 20 on 3.9 and 3.10
# after the fix, half with a core busy. So neither test carries an xfail
# any more.


@pytest.mark.timing
def test_pyflakes_on_a_source_tree(tmp_path):
    """A real program from PyPI, run with -m (runpy's frames outermost in
    the samples, none in the trace)."""
    src = pyflakes_target()
    path = run_sampled(tmp_path, ["-m", "pyflakes", *src], "pyflakes")
    checked, differ, skipped = compare(path)
    report("pyflakes", checked, differ, skipped)
    assert not differ
    assert checked >= 100
    # In this process a torn walk is redone with the thread parked: few
    # samples fail (before parking, 40-55% of them on a quiet 3.12; mostly
    # 0-4 in ~1,000 now). A thread muted after a park timed out is checked
    # strictly since walks of muted threads let wrong stacks through, and
    # its torn walks fail: one make test had 35 in 890 on 3.12, not
    # reproduced since (likely such a stretch: see "Noticed" of the
    # session's closing note). And one on 3.11 had 64 in 862 (7.4%), with
    # no park failed (432 parked, 548 torn), 0-2 in three runs alone after:
    # not understood (closing note of 2026-11-28). At most 10%: far below
    # what failed before parking. Not counted: those after a park not
    # answered in time (the thread waiting for a CPU; its sample is then one
    # checked unparked walk, which a busy machine's pyflakes often tears):
    # nor those of a thread muted (its parks stopped for a while after they
    # kept failing: walked unparked, checked strictly, pyflakes' walks torn
    # often). A make test from a fresh clone, its venvs built beside it,
    # had 239 of 2,328 failed; under that load 186-274 of ~1,300-1,600 in 3
    # runs of 8, 199-242 of them muted, the rest after failed parks.
    meta = Trace(path).meta
    load = meta["sampler.park_failed"] + meta["sampler.muted_failed"]
    assert skipped["failed"] - load <= max(5, checked // 10), (skipped, meta)


@pytest.mark.timing
def test_greenlets_each_on_its_task(tmp_path):
    """Greenlets switching from inside nested calls (`--events tasks`: a
    track per greenlet, each rooted at its run function): every sample of
    the thread is the open stack of the task it ran at an instant of the
    read, by the rule above over the thread's stack, which a switch changes
    to the open stack of the task switched to."""
    need("greenlet")
    path = run_sampled(tmp_path, ["--events", "tasks", str(PROGRAMS / "greenlet_switches.py")], "greenlets")
    checked, differ, skipped = compare(path)
    report("greenlet_switches", checked, differ, skipped)
    assert not differ
    assert checked >= 100
    # The samples are inside the greenlets, rooted at their run function,
    # and the trace has a track for each of the three.
    t = Trace(path)
    assert sum(bool(th["task"]) for th in t.threads) == 3
    roots = [s.stack[0].name for s in t.samples() if s.stack]
    assert roots.count("worker") > len(roots) // 2, roots[:20]


# toolz's own tests (in the installed package), one of its files: pure
# Python, about 30 tests (a fraction of a second plain).
TOOLZ_TESTS = ["test_dicttoolz.py"]


@pytest.mark.timing
def test_a_real_test_suite(tmp_path):
    """A real test suite from PyPI under pytest (-m): toolz's, copied out
    beside a pytest.ini of its own (not stackwatch's pyproject.toml), and
    without stackwatch's pytest plugin, whose hook is a frame of
    stackwatch's own in the program's stack (cut with everything outside
    it in samples, see above)."""
    toolz = need("toolz")
    suite = tmp_path / "toolz_tests"
    suite.mkdir()
    for name in TOOLZ_TESTS:
        shutil.copy(Path(toolz.__file__).parent / "tests" / name, suite / name)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    path = run_sampled(tmp_path, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:stackwatch",
                                  "toolz_tests"], "toolz", cwd=str(tmp_path))
    checked, differ, skipped = compare(path)
    report("toolz's tests", checked, differ, skipped)
    assert not differ
    assert checked >= 100


@pytest.mark.timing
@pytest.mark.versions("3.12", "3.13")
def test_a_generator_a_c_thread_iterates(tmp_path):
    """3.12+: a generator resumed by C code with no Python frame below it
    (its thread runs the builtin list()) is the root of its thread's
    stack: its samples are read whole, not counted as failed (3.9-3.11
    cannot tell that shape from a torn read: there they are failed)."""
    path = run_sampled(tmp_path, [str(PROGRAMS / "c_thread_generator.py"), "300"], "c_thread")
    checked, differ, skipped = compare(path)
    report("c_thread_generator", checked, differ, skipped)
    assert not differ
    t = Trace(path)
    pos = next(i for i, th in enumerate(t.threads) if any(e[0] in ENTER for e in t._t.events(i))
               and t.codes[next(e[2] for e in t._t.events(i) if e[0] in ENTER)].name == "produce")
    raw = t._t.samples(pos)
    mine = t.samples(pos)
    failed = sum(1 for r in raw if r[3] & FAILED)
    whole = [s for s in mine if s.stack and s.stack[0].name == "produce"]
    # (the C thread runs about 0.1 s at 5 kHz on a quiet machine, ~80
    # samples; with the other core busy, parks of threads off CPU slow the
    # rounds down to a few dozen)
    assert len(whole) >= 20 and failed <= max(2, len(mine) // 100), (len(whole), failed, len(mine))
    assert {s.stack[-1].name for s in whole} >= {"work"}
