"""System calls on the trace's clock (`stackwatch run --kernel`): a program
writes and reads a file inside known Python functions, on two threads;
each write/read system call must be a slice inside exactly the Python
slice that made it, in the Perfetto and Chrome exports, and their number
per function must be what the program made there (known by construction,
and counted again by strace -f on the same program). Without --kernel no
system call is recorded; without the privilege a line says what is missing
and the rest is recorded.

The kernel events need root (perf_event_open of tracepoints); the tests
are marked `root`, and fail rather than skip under CI=true when perf is
unavailable."""
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from conftest import chrome_slices, needs_kernel_tracepoint, perfetto_timeline, run, run_traced, write
from stackwatch import Trace, _native

pytestmark = pytest.mark.root

WRITES, READS, THREAD_WRITES = 40, 25, 15

# Every write and read of the data file happens directly inside one of the
# three functions (no C call is recorded: without --c-calls the Python
# function is the innermost slice).
PROGRAM = f'''\
import os
import sys
import threading


def write_here(fd, n):
    for i in range(n):
        os.write(fd, b"0123456789")


def read_here(fd, n):
    for i in range(n):
        os.read(fd, 10)


def thread_writes(path, n):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(n):
        os.write(fd, b"abc")
    os.close(fd)


def main():
    path = sys.argv[1]
    th = threading.Thread(target=thread_writes, args=(path + ".t", {THREAD_WRITES}), name="writer")
    th.start()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    write_here(fd, {WRITES})
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    read_here(fd, {READS})
    os.close(fd)
    th.join()


main()
'''
EXPECTED = {("write", "write_here"): WRITES, ("read", "read_here"): READS,
            ("write", "thread_writes"): THREAD_WRITES}


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    needs_kernel_tracepoint("raw_syscalls/sys_enter")
    folder = tmp_path_factory.mktemp("kernel")
    # with the sampler too where it runs: its samples share the threads'
    # timelines with the system calls (each sequence's time in order)
    sample = ["--sample=1ms"] if _native.SAMPLER_SUPPORTED else []
    swt, r = run_traced(folder, PROGRAM, "--kernel", *sample, args=[str(folder / "data")])
    assert "--kernel" not in r.stderr, r.stderr   # no complaint: it was recorded
    assert re.search(r", \d+ system calls\)", r.stderr), r.stderr   # the summary line counts them
    return folder, swt


def innermost_python(slices, name_of, begin, end, track):
    """The innermost Python slice on `track` around [begin, end]."""
    best = None
    for s in slices:
        if s["track"] == track and s["python"] and s["begin"] <= begin and end <= s["end"]:
            if best is None or s["depth"] > best["depth"]:
                best = s
    return best and name_of(best)


def perfetto_slices(swt, out):
    """The slices of the trace's Perfetto export (decoded and checked by the
    official schema: conftest.perfetto_timeline), as dicts."""
    p = perfetto_timeline(swt, out)
    return [{"name": name, "begin": b, "end": e, "track": track, "depth": info["depth"],
             "python": "python" in info["categories"], "syscall": "syscall" in info["categories"]}
            for (name, b, e, track, _), info in zip(p.slices, p.slice_info)]


def counts_by_function(slices):
    """{(syscall name, innermost Python function around it): count} over the
    syscall slices (category "syscall")."""
    out = Counter()
    for s in slices:
        if s["syscall"]:
            out[(s["name"], innermost_python(slices, lambda x: x["name"], s["begin"], s["end"], s["track"]))] += 1
    return out


def test_syscalls_nest_in_the_python_slice_that_made_them_perfetto(traced, tmp_path):
    folder, swt = traced
    slices = perfetto_slices(swt, tmp_path / "t.pftrace")
    counts = counts_by_function(slices)
    for key, n in EXPECTED.items():
        assert counts[key] == n, (key, counts)
    # Each of those functions made no other write/read: none is attributed
    # elsewhere to a function of the program.
    ours = {f for _, f in EXPECTED}
    assert sum(n for (sc, f), n in counts.items() if f in ours and sc in ("write", "read")) == sum(EXPECTED.values())
    # The thread's writes are on the thread's own track, not the main one.
    tracks = {s["track"] for s in slices if s["syscall"] and s["name"] == "write"
              and innermost_python(slices, lambda x: x["name"], s["begin"], s["end"], s["track"]) == "thread_writes"}
    main_tracks = {s["track"] for s in slices if s["name"] == "write_here"}
    assert len(tracks) == 1 and not tracks & main_tracks


def test_syscalls_nest_in_the_python_slice_that_made_them_chrome(traced, tmp_path):
    folder, swt = traced
    out = tmp_path / "t.json"
    Trace(swt).export("chrome", str(out))
    doc = json.loads(out.read_text())
    cats = {(e["name"], e["ts"], e["tid"]): e.get("cat") for e in doc["traceEvents"] if e["ph"] == "B"}
    depth = Counter()
    slices = []
    for name, b, e, tid in sorted(chrome_slices(doc), key=lambda s: (s[1], -s[2])):
        cat = cats[(name, b, tid)]
        slices.append({"name": name, "begin": b, "end": e, "track": tid, "depth": 0,
                       "python": cat == "python", "syscall": cat == "syscall"})
    # depth: how many slices of the same thread contain it
    for s in slices:
        s["depth"] = sum(1 for o in slices if o is not s and o["track"] == s["track"]
                         and o["begin"] <= s["begin"] and s["end"] <= o["end"])
    counts = counts_by_function(slices)
    for key, n in EXPECTED.items():
        assert counts[key] == n, (key, counts)


def test_strace_counts_the_same_calls(traced, tmp_path):
    """strace -f, on the same program without stackwatch, sees the writes
    and reads of the data files that the trace puts in each function."""
    strace = shutil.which("strace")
    if not strace:
        if os.environ.get("CI") == "true":
            pytest.fail("strace is not installed (scripts/install-deps.sh installs it)")
        pytest.skip("strace is not installed")
    prog = write(tmp_path / "prog.py", PROGRAM)
    log = tmp_path / "strace.log"
    data = str(tmp_path / "data")
    r = subprocess.run([strace, "-f", "-y", "-e", "trace=write,read", "-o", str(log), sys.executable, prog, data],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    seen = Counter()
    for line in log.read_text().splitlines():
        m = re.search(r"\b(write|read)\(\d+<([^>]*)>", line)
        if m and m.group(2) in (data, data + ".t"):
            seen[(m.group(1), m.group(2) == data)] += 1
    assert seen == {("write", True): WRITES, ("read", True): READS, ("write", False): THREAD_WRITES}, seen
    # and the trace (its syscall records, per thread and function) agrees
    folder, swt = traced
    slices = perfetto_slices(swt, tmp_path / "t.pftrace")
    counts = counts_by_function(slices)
    assert (counts[("write", "write_here")], counts[("read", "read_here")], counts[("write", "thread_writes")]) == \
        (seen[("write", True)], seen[("read", True)], seen[("write", False)])


def test_stats_and_records(traced, tmp_path):
    folder, swt = traced
    t = Trace(swt)
    assert t.meta["kernel.lost"] == 0 and t.meta["kernel.malformed"] == 0
    calls = t.ext_events(kinds=["syscall"])
    assert len(calls) >= sum(EXPECTED.values())
    writes = [e for e in calls if e.data["name"] == "write" and e.data["ret"] == 10]
    assert len(writes) == WRITES and all(e.data["nr"] == 1 and e.data["duration"] >= 0 for e in writes)
    r = run(["stats", swt])
    assert r.returncode == 0, r.stderr
    assert "system calls (run --kernel)" in r.stdout
    rows = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+\d+\s+\S+\s+(\w+)$", r.stdout, re.M)}
    assert rows["write"] >= WRITES + THREAD_WRITES and rows["read"] >= READS, r.stdout
    assert "0 kernel records lost" in r.stdout
    # per function: the calls each function made (its writes or reads, and
    # whatever else its thread did there: a GIL handoff's futex), the same
    # as the Perfetto export nests them
    by_fn = {t.codes[code].qualname: calls for _, code, calls, _ns in t.syscalls_by_function() if code is not None}
    nested = Counter()
    for (_name, fn), n in counts_by_function(perfetto_slices(swt, tmp_path / "t.pftrace")).items():
        nested[fn] += n
    for fn in ("write_here", "read_here", "thread_writes"):
        assert by_fn[fn] == nested[fn], (fn, by_fn, nested)
    assert by_fn["write_here"] >= WRITES and by_fn["read_here"] >= READS and by_fn["thread_writes"] >= THREAD_WRITES + 2
    assert "time in system calls by function" in r.stdout


def test_without_kernel_no_syscall(tmp_path):
    swt, r = run_traced(tmp_path, PROGRAM, args=[str(tmp_path / "data")])
    t = Trace(swt)
    assert not t.ext_events(kinds=["syscall"])
    assert "syscall" not in t.ext_summary()["counts"]
    p = perfetto_timeline(swt, tmp_path / "t.pftrace")
    assert not [1 for info in p.slice_info if "syscall" in info["categories"]]


def test_without_privilege_says_what_is_missing(tmp_path):
    """Root without its capabilities (setpriv): perf_event_open is refused;
    one line names what is missing, and the Python calls are recorded."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("setpriv (util-linux) is not installed")
    prog = write(tmp_path / "prog.py", PROGRAM)
    out = str(tmp_path / "t.swt")
    r = subprocess.run([setpriv, "--bounding-set=-all", "--inh-caps=-all",
                        "--securebits=+noroot,+noroot_locked,+no_setuid_fixup",
                        sys.executable, "-m", "stackwatch", "run", "--kernel", "-o", out, prog,
                        str(tmp_path / "data")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    line, = [x for x in r.stderr.splitlines() if "--kernel" in x]
    assert "CAP_PERFMON" in line and "perf_event_paranoid is" in line and "the rest of the trace is" in line
    t = Trace(out)
    assert not t.ext_events(kinds=["syscall"])
    names = {c.qualname for c in t.codes.values()}
    assert {"write_here", "read_here", "thread_writes"} <= names


@pytest.mark.versions("3.12")   # the kernel reader does not depend on the Python version
def test_lost_records_are_counted_and_shown(tmp_path):
    """Rings of one page (STACKWATCH_TEST_KERNEL_RING) and a burst of
    system calls: the kernel loses records, and the count is in the run's
    summary, the trace's META, `stats`, and the Chrome export as instants
    whose counts add up to it; the export still holds the calls read."""
    needs_kernel_tracepoint("raw_syscalls/sys_enter")
    prog = write(tmp_path / "burst.py", "import os\nfd = os.open(os.devnull, os.O_WRONLY)\n"
                                        "for i in range(20000):\n    os.write(fd, b'x')\n")
    swt = str(tmp_path / "t.swt")
    r = run(["run", "--kernel=syscalls", "-o", swt, prog], env={"STACKWATCH_TEST_KERNEL_RING": "4096"})
    assert r.returncode == 0, r.stderr
    lost = int(re.search(r"\((\d+) kernel records lost\)", r.stderr).group(1))
    assert lost > 0, r.stderr
    t = Trace(swt)
    assert t.meta["kernel.lost"] == lost
    s = run(["stats", swt])
    assert s.returncode == 0 and f"{lost} kernel records lost (the perf rings were full" in s.stdout, s.stdout
    out = tmp_path / "t.json"
    t.export("chrome", str(out))
    events = json.loads(out.read_text())["traceEvents"]
    shown = [e for e in events if e.get("cat") == "kernel" and e.get("name", "").startswith("kernel records lost")]
    assert shown and all(e["ph"] == "i" and e["name"] == f"kernel records lost {e['args']['count']}"
                         for e in shown), shown[:3]
    assert sum(e["args"]["count"] for e in shown) == lost, shown[:3]
    writes = sum(1 for e in events if e.get("name") == "write" and e.get("cat") == "syscall" and e["ph"] in ("B", "X"))
    assert 0 < writes < 20000, writes     # the calls whose records were read
