"""The CTF export (`stackwatch export --format ctf -o DIR`) read by its real
consumer, babeltrace2 (Debian's 2.0.4): it reads the directory without an
error, and what it prints equals the trace itself - one entry event per
call of each function on each thread (Trace.stats), the exact sequence of
entries and exits of every thread with their timestamps (Trace.events),
every EXT event (exceptions, GC, threads) and every sampler sample."""
import os
import re
import shutil
import subprocess
from collections import Counter

import pytest

from conftest import needs, run, run_traced, write
import tracecompass

# The exporter is C over the trace file, the same on every Python (on
# 3.11, whose job is shorter than 3.12's).
pytestmark = pytest.mark.versions("3.11")
from stackwatch import Trace
from stackwatch.tracer.tracefile import KIND_NAMES

NO_BABELTRACE = None if shutil.which("babeltrace2") else ("babeltrace2 is not installed (Debian package "
                                                          "babeltrace2; scripts/install-deps.sh installs it)")

PROGRAM = """
import gc, threading, time

def leaf(i):
    if i % 7 == 0:
        try:
            raise ValueError(i)
        except ValueError:
            pass
    return len(str(i))

def gen(n):
    for i in range(n):
        yield leaf(i)

def work(rounds):
    for _ in range(rounds):
        sum(gen(30))
    gc.collect()
    end = time.perf_counter() + 0.03
    while time.perf_counter() < end:
        leaf(1)

t = threading.Thread(target=work, args=(3,), name="helper")
t.start()
work(5)
t.join()
"""

# One event line of `babeltrace2 --clock-cycles`: its timestamp, its name,
# its context's thread id (vtid in the ust trace, tid in the kernel trace,
# whose lines also say the CPU) and its payload.
LINE = re.compile(r"^\[(\d+)\] \S+ \S+ (\S+): (?:\{ cpu_id = (\d+) \}, )?\{ v?pid = \d+, v?tid = (\d+), "
                  r"procname = \"[^\"]*\" \}, \{ ?(.*?) ?\}$")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(Trace, [(t, name, vtid, payload)] as babeltrace2 prints the CTF
    export of a trace with exceptions, GC, threads and samples)."""
    folder = tmp_path_factory.mktemp("ctf")
    path, _ = run_traced(folder, PROGRAM, "--events", "exceptions,gc,threads", "--sample", "1ms")
    out = folder / "t.ctf"
    r = run(["export", path, "--format", "ctf", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    return path, Trace(path), out


def read_ctf(directory, cpu=False):
    """[(t, name, vtid, payload)] in babeltrace2's order (by time); with
    cpu, [(t, name, cpu_id, vtid, payload)] (cpu_id: None in ust/)."""
    r = subprocess.run(["babeltrace2", "--clock-cycles", str(directory)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and not r.stderr, r.stderr[-2000:]
    events = []
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        assert m, line
        events.append((int(m[1]), m[2]) + ((m[3] and int(m[3]),) if cpu else ()) + (int(m[4]), m[5]))
    return events


@needs(NO_BABELTRACE)
def test_the_clock_is_the_traces_with_its_wall_clock_offset(exported):
    _, t, directory = exported
    r = subprocess.run(["babeltrace2", "--clock-seconds", str(directory)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    first = re.match(r"^\[(\d+)\.(\d{9})\]", r.stdout)
    assert first, r.stdout[:200]
    t0 = read_ctf(directory)[0][0]   # the same first event, in the trace's own ns
    assert t0 > 0 and int(first[1]) * 10**9 + int(first[2]) == int(t.meta["real0_ns"]) + t0
    assert f"stackwatch_mono0_ns = {int(t.meta['mono0_ns'])};" in (directory / "ust" / "metadata").read_text()


def field(payload, name):
    m = re.search(rf"\b{name} = (\"(?:[^\"\\\\]|\\\\.)*\"|[^,]+)", payload)
    return m[1].strip('"') if m else None


@needs(NO_BABELTRACE)
def test_babeltrace2_reads_the_trace_exactly(exported):
    _, t, directory = exported
    events = read_ctf(directory)
    tid = {pos: th["native_tid"] for pos, th in enumerate(t.threads)}
    # One entry per call, per function and thread: stats' own count.
    entries = Counter((vtid, field(p, "name")) for _, name, vtid, p in events
                      if name == "lttng_ust_cyg_profile:func_entry")
    calls = Counter()
    for row in t.stats():
        calls[(tid[row.thread], t.codes[row.code].qualname)] += row.calls
    assert entries == +calls
    assert sum(entries.values()) == sum(1 for _, name, _, _ in events if name == "lttng_ust_cyg_profile:func_exit")
    # Each thread's entries and exits, in order, with their code and time.
    entry = {"call", "resume", "c_call"}
    for pos in range(len(t.threads)):
        mine = [(ts, name.rpartition("_")[2], int(field(p, "addr"), 16)) for ts, name, vtid, p in events
                if vtid == tid[pos] and name.startswith("lttng_ust_cyg_profile:")]
        theirs = [(max(e.t_ns, 0), "entry" if KIND_NAMES[e.kind] in entry else "exit", e.code)
                  for e in t.events(pos)]
        assert mine == theirs and len(mine) > 100, pos
    # The EXT events: every kind as often as the trace holds it.
    ext = Counter(name.partition(":")[2] for _, name, _, _ in events if name.startswith("stackwatch:")
                  and name != "stackwatch:sample")
    assert ext == Counter(e.kind for e in t.ext_events())
    assert ext["raise"] >= 8 and ext["gc_start"] >= 2 and ext["thread_start"] == 1
    raised = Counter((vtid, field(p, "type"), field(p, "function"), int(field(p, "line")))
                     for _, name, vtid, p in events if name == "stackwatch:raise")
    assert raised == Counter((tid[e.thread], e.data["type"], t.codes[e.code].qualname, e.line)
                             for e in t.ext_events(kinds="raise"))
    assert sum(n for (_, kind, function, _), n in raised.items() if (kind, function) == ("ValueError", "leaf")) == 5 * (5 + 3)
    # Every sample, on its thread.
    samples = Counter(vtid for _, name, vtid, _ in events if name == "stackwatch:sample")
    assert samples == +Counter({tid[pos]: th["samples"] for pos, th in enumerate(t.threads)})
    assert sum(samples.values()) > 0


@needs(NO_BABELTRACE)
def test_name_map_names_every_entry_address(exported):
    """functions.nm (nm's format, Trace Compass's name mapping file): the
    name of each address the entry events carry is the name they carry."""
    _, t, directory = exported
    names = {}
    for line in (directory / "functions.nm").read_text().splitlines():
        addr, kind, name = line.split(" ", 2)
        assert kind == "T" and int(addr, 16) not in names
        names[int(addr, 16)] = name
    assert names == {code: c.qualname for code, c in t.codes.items()}
    entries = {(int(field(p, "addr"), 16), field(p, "name")) for _, name, _, p in read_ctf(directory)
               if name == "lttng_ust_cyg_profile:func_entry"}
    assert entries and all(names[addr] == name for addr, name in entries)


def test_refusals_are_one_line(exported, tmp_path):
    path, _, directory = exported
    r = run(["export", path, "--format", "ctf", "-o", str(directory)])
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "not empty" in r.stderr, r.stderr
    r = run(["export", path, path, "--format", "ctf", "-o", str(tmp_path / "two.ctf")])
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "several processes" in r.stderr, r.stderr


@needs(NO_BABELTRACE)
def test_each_event_class_has_its_own_name(tmp_path):
    """The task events of a trace and of the same trace as 1.15 wrote
    it (their older kinds, the channel inline) are the same CTF event
    classes: no name is declared twice in the metadata, and babeltrace2
    counts each stackwatch:* event of either export as the trace holds
    it."""
    from test_task_events import THREADS, _as_format
    swt, _ = run_traced(tmp_path, THREADS, "--events", "tasks", args=(str(tmp_path / "log.json"),))
    old = tmp_path / "old.swt"
    old.write_bytes(_as_format(open(swt, "rb").read(), 15))
    counts = []
    for path in (swt, str(old)):
        out = tmp_path / (os.path.basename(path) + ".ctf")
        r = run(["export", path, "--format", "ctf", "-o", str(out)])
        assert r.returncode == 0, r.stderr
        names = re.findall(r'^event \{\n\tname = "([^"]+)";', (out / "ust" / "metadata").read_text(), re.M)
        assert len(names) > 30 and len(names) == len(set(names)), Counter(names).most_common(3)
        ext = Counter(name.partition(":")[2] for _, name, _, _ in read_ctf(out) if name.startswith("stackwatch:"))
        assert ext == Counter(e.kind for e in Trace(path).ext_events())
        counts.append(ext)
    assert counts[0] == counts[1] and counts[0]["task_send"] == 8 and counts[0]["task_block"] > 0


@needs(NO_BABELTRACE)
def test_what_trace_compass_reads_of_the_ust_trace(exported):
    """Trace Compass's rules (tracecompass.py, from its source) applied to
    the export as babeltrace2 reads it: ust/ is taken for an LTTng-UST
    trace with the 2.9+ layout, on the host of this boot (the clock's
    uuid); the call-stack analysis finds its contexts and events, and
    every exit pops the function its thread entered last; functions.nm is
    read as nm's format and names every entry's address as the entry
    names it."""
    _, t, directory = exported
    meta = tracecompass.metadata(directory / "ust" / "metadata")
    assert tracecompass.trace_type(meta) == ("ust", 29)
    assert tracecompass.host_id(meta, "ust") == t.meta["boot_id"] == open("/proc/sys/kernel/random/boot_id").read().strip()
    # LttngUstCallStackAnalysisRequirement: "context._vtid" in both events;
    # getThreadName: "context._procname"; getProcessId: "context._vpid".
    assert {"_vtid", "_vpid", "_procname"} <= set(meta["context"])
    assert {"lttng_ust_cyg_profile:func_entry", "lttng_ust_cyg_profile:func_exit"} <= set(meta["events"])
    assert all("_addr" in meta["events"][n] for n in ("lttng_ust_cyg_profile:func_entry",
                                                        "lttng_ust_cyg_profile:func_exit"))
    events = read_ctf(directory)
    stacks, unmatched = tracecompass.call_stacks(events, field)
    assert not unmatched and sum(n.startswith("lttng_ust_cyg_profile:") for _, n, _, _ in events) > 1000
    assert set(stacks) == {th["native_tid"] for th in t.threads}
    # The symbol configuration's mapping file: global (no pid in its
    # name), nm's format, every entry's address named exactly.
    assert not tracecompass.PID_IN_NAME.search("functions.nm")
    table = tracecompass.name_map(directory / "functions.nm")
    assert table is not None
    named = {(int(field(p, "addr"), 16), field(p, "name")) for _, n, _, p in events if n in tracecompass.FUNC_ENTRY}
    assert len(named) > 5 and all(tracecompass.symbol(table, addr) == name for addr, name in named)


THREE_PHASES = "".join(f"def {n}(i):\n    return i\nfor i in range(20000):\n    {n}(i)\n" for n in "fgh") + (
    "def odd():\n    pass\nodd.__code__ = odd.__code__.replace(co_qualname='odd\\nline')\nodd()\n")


def test_name_map_of_a_trace_that_lost_a_code_chunk(tmp_path):
    """A trace whose second CODE chunk is lost (a flipped byte): the ids it
    defined have a line "?" in functions.nm, as their entry events are
    named; without it Trace Compass would name each after the function of
    the id below it (MappingFile's nearest symbol). A name's line break is
    written as "?" (it would start a line of its own)."""
    prog = write(tmp_path / "prog.py", THREE_PHASES)
    path = tmp_path / "t.swt"
    r = run(["run", "-q", "--buffer-size", "4K", "-o", str(path), prog])
    assert r.returncode == 0, r.stderr
    data = bytearray(path.read_bytes())
    codes, i = [], 16
    while i + 12 <= len(data):
        n = int.from_bytes(data[i + 4:i + 8], "little")
        if data[i] == 2:   # (a CODE chunk: docs/format.md "Chunk types")
            codes.append((i, n))
        i += 12 + n
    assert len(codes) >= 3, codes
    data[codes[1][0] + 12 + codes[1][1] // 2] ^= 0x10
    path.write_bytes(bytes(data))
    t = Trace(str(path))
    lost = [c for c in range(max(t.codes)) if c not in t.codes]
    assert t.damage and lost
    out = tmp_path / "t.ctf"
    r = run(["export", str(path), "--format", "ctf", "-o", str(out)])
    assert "damaged" in r.stderr, r.stderr
    table = tracecompass.name_map(out / "functions.nm")
    assert all(table[c] == "?" for c in lost) and len(table) == max(t.codes) + 1
    assert all(table[c] == t.codes[c].qualname.replace("\n", "?") for c in t.codes)
    assert "odd?line" in table.values()
    named = {(int(field(p, "addr"), 16), field(p, "name").replace("\\?", "?").replace("\\n", "?"))
             for _, n, _, p in read_ctf(out) if n in tracecompass.FUNC_ENTRY}   # (babeltrace2 escapes "?", "\n")
    assert {addr for addr, _ in named} & set(lost)
    assert all(tracecompass.symbol(table, addr) == name for addr, name in named)
