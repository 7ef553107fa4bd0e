"""Native frames and lines in the samples of a trace (`stackwatch run
--sample --native --sample-lines`, format 1.3): a program that spends a
long time in one C library call (zlib.compress of a big buffer) and in one
line of Python. In the exact trace the C call is one opaque slice of its
Python caller; the samples inside that slice, on the same thread and the
same clock, show zlib's own native frames (deflate) under the Python caller,
in the Trace API, in the Perfetto trace (decoded with the official
perfetto protos) and in the Chrome JSON. With --sample-lines each Python
frame carries the line it was running: the lines the program is known to
spend its time on."""
import json
import platform
import sys

import pytest

import stackwatch
from conftest import (chrome_slices, needs_sampler, perfetto_timeline, run, run_traced, slice_of,
                      thread_pos)
from stackwatch import Trace

pytestmark = [
    needs_sampler,
    pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.machine() == "x86_64"),
                       reason="native frames are captured on Linux x86-64 only"),
]

PROGRAM = '''\
import os
import zlib


def squeeze(data):
    return zlib.compress(data, 9)  # SQUEEZE


def spin(n):
    total = 0
    for i in range(n): total += i * i  # SPIN
    return total


def main():
    data = os.urandom(1 << 20) * 12
    squeeze(data)  # CALL
    spin(1_500_000)


main()  # MODULE
'''


def line_of(marker):
    return next(i for i, text in enumerate(PROGRAM.splitlines(), 1) if text.endswith("# " + marker))


SQUEEZE, SPIN, CALL, MODULE = line_of("SQUEEZE"), line_of("SPIN"), line_of("CALL"), line_of("MODULE")
NATIVE = " [native]"
# ns: a sample's time is its round's start, and its thread is read a few
# microseconds later, or milliseconds when the sampler loses its CPU in
# between (a make test beside a busy loop: one sample of spin's last 2 ms
# read after spin returned; the sampler's stalls reach 4-8 ms there)
MARGIN = 10_000_000


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    return run_traced(tmp_path_factory.mktemp("native"), PROGRAM, "--sample=1ms", "--native", "--sample-lines")[0]


def main_pos(t):
    return thread_pos(t, "MainThread")


def core_samples(t, name):
    pos = main_pos(t)
    start, end = slice_of(t, pos, name)
    return [s for s in t.samples(pos) if start + MARGIN <= s.t_ns <= end - MARGIN], (start, end)


@pytest.mark.timing
def test_samples_show_zlib_under_the_python_caller(traced):
    t = Trace(traced)
    core, (start, end) = core_samples(t, "squeeze")
    assert end - start >= 100_000_000, "the C call should take a while"
    assert len(core) >= 50
    under = without_native = 0
    for s in core:
        names = [f.name for f in s.stack]
        # The Python frames are the program's call chain, as in the trace.
        assert [f.name for f in s.stack if not f.native] == ["<module>", "main", "squeeze"], names
        below = names[names.index("squeeze") + 1:]
        assert all(n.endswith(NATIVE) for n in below), names
        if not below:
            # The thread did not answer the sampler in time (a loaded
            # machine): END counts each such sample, checked below.
            without_native += 1
            continue
        if "zlib_compress" + NATIVE in below and "deflate" + NATIVE in below:
            assert below.index("zlib_compress" + NATIVE) < below.index("deflate" + NATIVE), names
            under += 1
    # Every sample without native frames is one the sampler counted as
    # failed (it may have failed others outside the slice too).
    assert without_native <= t.meta["sampler.native_failed"], (without_native, t.meta)
    assert under >= 0.8 * (len(core) - without_native) > 0, (under, len(core), without_native)
    deflate = [f for s in core for f in s.stack if f.name == "deflate" + NATIVE]
    assert all(f.native and f.line == 0 and "libz" in f.filename for f in deflate)
    # stackwatch's own frames (Python or native) are left out.
    assert not any("stackwatch" in f.filename for s in t.samples() for f in s.stack)


@pytest.mark.timing
def test_lines_are_the_lines_being_run(traced):
    t = Trace(traced)
    core, _ = core_samples(t, "squeeze")
    for s in core:
        assert s.lines is not None and len(s.lines) == len(s.stack)
        at = {f.name: line for f, line in zip(s.stack, s.lines) if not f.native}
        assert at == {"<module>": MODULE, "main": CALL, "squeeze": SQUEEZE}, at
        assert all(line == 0 for f, line in zip(s.stack, s.lines) if f.native)
    spin, _ = core_samples(t, "spin")
    # (about 60 rounds fall due in spin; a machine loaded on both cores
    # makes the sampler miss most of them: with fewer than 20 samples the
    # 95% below asks every one to be right)
    # A sample is dated when its stack is read, but a sampler preempted
    # between the two (by a few ms, the margin) shows the frames of just
    # after spin: such samples say nothing of spin's lines, and are few.
    in_spin = [s for s in spin if any(f.name == "spin" for f in s.stack)]
    assert len(in_spin) >= 5 and len(in_spin) >= 0.8 * len(spin), [[f.name for f in s.stack] for s in spin]
    leaf_lines = [dict((f.name, line) for f, line in zip(s.stack, s.lines) if not f.native)["spin"]
                  for s in in_spin]
    assert leaf_lines.count(SPIN) >= 0.95 * len(leaf_lines), leaf_lines


def perfetto_samples(path, tmp_path):
    """The Perfetto export's slices on thread tracks, {name: [(begin, end,
    track)]}, and its samples (conftest.perfetto_timeline)."""
    tl = perfetto_timeline(path, tmp_path / "t.pftrace")
    slices = {}
    for name, begin, end, track, _ in tl.slices:
        if tl.tracks[track].HasField("thread"):
            slices.setdefault(name, []).append((begin, end, track))
    return slices, tl.samples


def test_perfetto_shows_native_frames_inside_the_call_slice(traced, tmp_path):
    slices, samples = perfetto_samples(traced, tmp_path)
    (begin, end, thread_track), = slices["squeeze"]
    inside = [te for ts, tr, te in samples if tr == thread_track and begin + MARGIN <= ts <= end - MARGIN]
    # (how many depends on how busy the machine was: exactly the trace's)
    core, _ = core_samples(Trace(traced), "squeeze")
    assert len(inside) == len(core) > 0
    with_deflate = 0
    for te in inside:
        frames = [(fr.function_name, fr.source_file, fr.line_number) for fr in te.callstack.frames]
        fnames = [f[0] for f in frames]
        i = fnames.index("squeeze")
        assert [n for n in fnames if not n.endswith(NATIVE)] == ["<module>", "main", "squeeze"], fnames
        # (a sample without native frames: see the test above)
        assert all(n.endswith(NATIVE) for n in fnames[i + 1:]), fnames
        assert te.name == fnames[-1]
        # Native frames told apart: the name suffix, and the category of a
        # sample whose innermost frame is native.
        assert ("native" in te.categories) == fnames[-1].endswith(NATIVE)
        # --sample-lines: a Python frame's line is the line it runs.
        assert frames[i][2] == SQUEEZE and frames[i][1].endswith("prog.py"), frames
        if "deflate" + NATIVE in fnames[i + 1:]:
            with_deflate += 1
            assert "libz" in frames[fnames.index("deflate" + NATIVE)][1]
    assert with_deflate == sum("deflate" + NATIVE in [f.name for f in s.stack] for s in core)


def test_chrome_shows_native_frames_inside_the_call_slice(traced, tmp_path):
    out = tmp_path / "t.json"
    r = run(["export", traced, "--format", "chrome", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    lo, hi, tid = [(b, e, tid) for name, b, e, tid in chrome_slices(doc) if name == "squeeze"][-1]
    samples = [e for e in doc["traceEvents"] if e.get("cat") == "sample"]
    assert len(samples) == Trace(traced).sample_count()
    inside = [e for e in samples if e["tid"] == tid and lo + MARGIN / 1000 <= e["ts"] <= hi - MARGIN / 1000]
    core, _ = core_samples(Trace(traced), "squeeze")
    assert len(inside) == len(core) > 0
    with_deflate = 0
    for e in inside:
        stack = e["args"]["stack"].split(";")
        lines = [int(x) for x in e["args"]["lines"].split(";")]
        assert len(lines) == len(stack)
        i = stack.index("squeeze")
        assert [n for n in stack if not n.endswith(NATIVE)] == ["<module>", "main", "squeeze"], stack
        assert lines[i] == SQUEEZE and lines[stack.index("main")] == CALL
        assert e["name"] == stack[-1] and e["args"].get("native", False) == stack[-1].endswith(NATIVE)
        with_deflate += "deflate" + NATIVE in stack[i + 1:]
    assert with_deflate == sum("deflate" + NATIVE in [f.name for f in s.stack] for s in core)


def test_stats_shows_native_frames_and_lines(traced):
    r = run(["stats", "-n", "100", traced])
    assert r.returncode == 0, r.stderr
    funcs = r.stdout.split("top functions by samples")[1].split("top lines by samples")[0]
    row = next(x for x in funcs.splitlines() if "  deflate" + NATIVE + "  (" in x)
    assert "libz" in row
    lines = r.stdout.split("top lines by samples")[1].splitlines()[2:]
    top = {x.split()[1]: int(x.split()[0]) for x in lines if x.strip()}
    t = Trace(traced)
    core_squeeze, _ = core_samples(t, "squeeze")
    core_spin, _ = core_samples(t, "spin")
    # (the program's path as the trace has it; a sample made while the
    # machine is busy may fall in the launcher's imports, before it)
    prog = next(f.filename for s in t.samples() for f in s.stack if f.filename.endswith("prog.py"))
    assert top[f"{prog}:{SQUEEZE}"] >= len(core_squeeze)
    assert top[f"{prog}:{SPIN}"] >= len(core_spin)


@pytest.mark.timing
def test_native_without_lines_and_the_api(tmp_path):
    import zlib
    data = bytes(range(256)) * 40000

    def pack():
        return zlib.compress(data, 9)

    p = str(tmp_path / "a.swt")
    with stackwatch.trace(p, sample="1ms", sample_native=True):
        for _ in range(8):
            pack()
    t = Trace(p)
    samples = t.samples()
    assert samples and all(s.lines is None for s in samples)
    hits = [s for s in samples if "deflate" + NATIVE in [f.name for f in s.stack]]
    assert len(hits) >= 20
    for s in hits:
        names = [f.name for f in s.stack]
        pack = next(i for i, n in enumerate(names) if n.endswith("pack"))
        assert pack < names.index("deflate" + NATIVE)


@pytest.mark.parametrize("opt", ["--native", "--sample-lines"])
def test_cli_needs_sample(tmp_path, opt):
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    r = run(["run", opt, "-o", str(tmp_path / "o.swt"), str(prog)])
    assert r.returncode == 2 and "ran" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert lines == [f"stackwatch: error: {opt} describes the samples: it needs --sample"], r.stderr


@pytest.mark.parametrize("kw", [{"sample_native": True}, {"sample_lines": True}])
def test_api_needs_sample(tmp_path, kw):
    with pytest.raises(ValueError, match="need sample"):
        stackwatch.start(str(tmp_path / "x.swt"), **kw)
    assert not stackwatch.is_tracing()


def _crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xffffffff


def test_unknown_frame_kind_is_reported(traced, tmp_path):
    """A SAMPLE_FRAMES entry of a kind this reader does not know (a newer
    format's): the chunk is refused with a message naming the kind, the
    part before it is read, the CLI warns in one line."""
    import struct
    assert _crc32c(b"123456789") == 0xE3069283
    buf = bytearray(open(traced, "rb").read())
    off, patched = 16, None
    while off + 12 <= len(buf):
        plen, = struct.unpack_from("<I", buf, off + 4)
        if buf[off] == 6:  # SAMPLE_FRAMES: varint id 0, u8 kind, ...
            p = off + 12
            assert buf[p] == 0 and buf[p + 1] in (0, 1)
            buf[p + 1] = 7
            struct.pack_into("<I", buf, off + 8, _crc32c(bytes(buf[p:p + plen])))
            patched = off
            break
        off += 12 + plen
    assert patched is not None
    bad = tmp_path / "bad.swt"
    bad.write_bytes(bytes(buf))
    t = Trace(str(bad))
    assert t.damage == f"sample frame of unknown kind 7 (written by a newer stackwatch?) in the SAMPLE_FRAMES " \
                       f"chunk at offset {patched}"
    assert t.sample_count() == 0  # the first SAMPLES chunk comes after it
    r = run(["stats", str(bad)])
    assert r.returncode == 1
    assert [x for x in r.stderr.splitlines() if x] == [
        f"stackwatch: error: {bad} is damaged ({t.damage}); the output above is what could be read "
        f"({t.event_count()} events)"]


FORKING = '''\
import os
import zlib

data = os.urandom(1 << 20) * 6


def squeeze():
    zlib.compress(data, 9)


pid = os.fork()
if pid == 0:
    squeeze()
    os._exit(0)
squeeze()
os.waitpid(pid, 0)
'''


@pytest.mark.timing
def test_forked_child_samples_native_frames_too(tmp_path):
    """The child's own sampler takes the native capture over from the
    parent's (which does not exist in the child)."""
    prog = tmp_path / "fork.py"
    prog.write_text(FORKING)
    out = tmp_path / "f.swt"
    r = run(["run", "--sample", "--native", "-o", str(out), str(prog)])
    assert r.returncode == 0, r.stderr
    assert "not tracing forked child" not in r.stderr, r.stderr
    children = list(tmp_path.glob("f.[0-9]*.swt"))
    assert len(children) == 1, r.stderr
    for path in (out, children[0]):
        t = Trace(str(path))
        assert t.damage is None
        deflate = [s for s in t.samples() if "deflate" + NATIVE in [f.name for f in s.stack]]
        # (without the capture there would be none; a fresh clone's make
        # test at load ~15 had fewer than 20 of 269 samples: a thread that
        # misses the capture signal's wait is read Python-only for a while)
        assert len(deflate) >= 5, (path, len(t.samples()))
        assert all([f.name for f in s.stack if not f.native] == ["<module>", "squeeze"] for s in deflate)


def test_samples_whose_native_frames_failed_are_counted_in_end(tmp_path):
    # The main thread blocks the sampler's signal (SIGRTMAX - 3): its
    # native frames can never be captured. Its samples keep their Python
    # frames, and END's sampler.native_failed counts every one of them.
    blocked = PROGRAM.replace("def main():\n",
                              "def main():\n    import signal\n"
                              "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMAX - 3})\n")
    path, _ = run_traced(tmp_path, blocked, "--sample=1ms", "--native")
    t = Trace(path)
    core, _ = core_samples(t, "squeeze")
    assert core and all(not any(f.native for f in s.stack) for s in core)
    # Without the capture the thread is not stopped while its stack is read:
    # on a loaded machine the read can come milliseconds after the sample's
    # time, past the slice's end (then the stack is spin's, or main's alone
    # between the two calls: seen once at load 17).
    odd = [[(f.name, f.native) for f in s.stack] for s in core
           if [f.name for f in s.stack] not in (["<module>", "main", "squeeze"], ["<module>", "main", "spin"],
                                                ["<module>", "main"])]
    assert not odd, odd
    assert any([f.name for f in s.stack] == ["<module>", "main", "squeeze"] for s in core)
    assert t.meta["sampler.native_failed"] >= len(core)
    assert t.meta["sampler.stored"] == t.sample_count()
