"""Shared helpers and fixtures of the Python tests (tests/py/<room>/ and
tests/e2e/): run programs under stackwatch in a subprocess of the
interpreter being tested; tests marked `root` or `bpftrace` (markers in
pyproject.toml) are skipped, with the reason printed, where that is
missing. A test whose tool or package is not installed (go, bpftrace, a
browser, the speedscope app, ...) goes through missing(), needs() or
needs_module(): skipped with the reason, but failed under CI=true, so
that a green CI never hides an empty run.

The workload programs are in tests/programs/, on sys.path for every test
(`import corpus`, `import mixed_workload`); this folder is on it too
(`from conftest import run`, `import stats_bounds`)."""
import html.parser
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from collections import Counter

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(ROOT, "tests", "programs")
if PROGRAMS not in sys.path:
    sys.path.insert(0, PROGRAMS)

from stackwatch import _native  # noqa: E402

# Ctrl-C as at a terminal: a background job of a non-interactive shell
# (`(make test &)`, some CI runners) starts with SIGINT ignored, every child
# inherits that, and a Python started so keeps it ignored: the tests that
# send SIGINT to `attach` or `record` would wait for nothing. A handler here
# becomes the default again in each child at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The sampling profiler's tests (the profiler, `run --sample`) need a
# CPython whose layouts the sampler knows.
SAMPLER = bool(getattr(_native, "SAMPLER_SUPPORTED", 0))
needs_sampler = pytest.mark.skipif(
    not SAMPLER, reason=f"the sampling profiler does not support CPython {sys.version.split()[0]} "
    "(it supports 3.9 to 3.13 with the GIL)")


def run(args, cwd=None, input=None, timeout=120, env=None):
    """Runs `python -m stackwatch ARGS` (or a plain python when args[0] is
    "python") and returns the CompletedProcess. The child inherits neither
    PYTHONPATH nor a coverage configuration (COVERAGE_CORE,
    COVERAGE_PROCESS_START) nor the options of the pytest running the tests
    (PYTEST_ADDOPTS) from the environment; `env` adds to it."""
    cmd = [sys.executable] + (args[1:] if args[0] == "python" else ["-m", "stackwatch"] + args)
    e = dict(os.environ)
    for name in ("PYTHONPATH", "COVERAGE_CORE", "COVERAGE_PROCESS_START", "PYTEST_ADDOPTS"):
        e.pop(name, None)
    if env:
        e.update(env)
    return subprocess.run(cmd, cwd=cwd, input=input, capture_output=True, text=True,
                          timeout=timeout, env=e)


def profile_summary(stderr):
    """What `stackwatch profile` printed at the end of stderr, split off:
    (the program's own stderr, the top-functions table's rows [(own, own%,
    total, total%, function)], the "wrote" line). The table is left out
    when the profile has no samples ([] then); with -q there is neither.
    The notes between the table and the "wrote" line (threads left out,
    processes not merged) are not rows."""
    head, sep, table = stderr.partition("\nstackwatch: top functions (")
    rows = []
    if sep:
        lines = table.splitlines()
        assert lines[1].split() == ["own", "own%", "total", "total%", "function"], table
        for line in lines[2:-1]:
            if line.startswith("stackwatch: "):
                break
            own, own_pct, total, total_pct, function = line.split(None, 4)
            rows.append((int(own), own_pct, int(total), total_pct, function))
        wrote = lines[-1]
    else:
        head, _, wrote = stderr.rstrip("\n").rpartition("\n")
        head = head + "\n" if head else ""
    assert wrote.startswith("stackwatch: wrote "), stderr
    return head, rows, wrote + "\n"


def tree_nodes(tree):
    """Every node of a call tree (Profiler.tree() shape: dicts with
    "children"), in pre-order, without recursion (trees may be deep)."""
    stack = [tree]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n["children"]))


def read_varint(buf, i):
    """The unsigned LEB128 varint at buf[i] (the .swt format's and
    protobuf's): (value, index after it)."""
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


# ---- a test whose tool is missing: skipped here, failed under CI=true ----

def missing(reason):
    """Ends the test because a tool or package it drives is not installed
    (reason: which, and what installs it): skipped, with the reason
    printed; under CI=true (or 1) failed instead."""
    __tracebackhide__ = True   # pytest reports the test's line, not this one
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason} (CI is set: a missing tool fails the test)", pytrace=False)
    print(f"skipping: {reason}")
    pytest.skip(reason, allow_module_level=True)


def needs(reason):
    """A mark for a test of tests/py that cannot run without a tool: reason
    None when the tool is here, else why not (pytest_runtest_setup calls
    missing(reason))."""
    return pytest.mark.needs_tool(reason)


def needs_module(name, reason):
    """The module `name` imported, or missing(reason) when it is not
    installed."""
    __tracebackhide__ = True
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(reason)


# The tools some tests read their outputs with: None where installed, else
# why not (for needs()).
NO_GO = None if shutil.which("go") else ("`go` is not installed (Debian package golang-go), so `go tool pprof` "
                                          "cannot read the output")
NO_CALLGRIND = None if shutil.which("callgrind_annotate") else ("callgrind_annotate is not installed (Debian "
                                                                "package valgrind)")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs_tool"):
        if mark.args[0]:
            missing(mark.args[0])
    if item.get_closest_marker("bpftrace") and not shutil.which("bpftrace"):
        missing("bpftrace is not installed (scripts/install-deps.sh installs it)")
    elif item.get_closest_marker("root") and os.geteuid() != 0:
        print(f"skipping {item.name}: needs root")
        pytest.skip("needs root")


# ---- tests that need not run on every Python ----
# make test runs the suite on five Pythons in two lanes and must end within
# 6 minutes. A test whose subject does not depend on the interpreter (a C
# renderer or exporter over a trace file, the CLI's checks of its
# arguments, one cell of a tool-version x target-version matrix) is marked
# `versions("3.12", ...)`: it runs on those Pythons only, and on every one
# with STACKWATCH_ALL_VERSIONS=1. It is deselected elsewhere (pytest counts
# it as such), not skipped.

def pytest_collection_modifyitems(config, items):
    if os.environ.get("STACKWATCH_ALL_VERSIONS") == "1":
        return
    here = "%d.%d" % sys.version_info[:2]
    keep, drop = [], []
    for item in items:
        mark = item.get_closest_marker("versions")
        (keep if mark is None or here in mark.args else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


def write(path, text):
    path.write_text(text)
    return str(path)


def needs_kernel_tracepoint(tracepoint):
    """Ends the test through missing() when perf_event_open of a kernel
    tracepoint ("raw_syscalls/sys_enter", for `run --kernel`) cannot be
    used here."""
    __tracebackhide__ = True
    if sys.platform != "linux":
        missing("perf is unavailable: not Linux")
    for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
        if os.path.exists(f"{d}/events/{tracepoint}/id"):
            return
    if os.geteuid() == 0 and os.path.isdir("/sys/kernel/tracing"):
        return   # stackwatch mounts tracefs itself
    missing(f"perf is unavailable: the {tracepoint.split('/')[0]} tracepoints are not in tracefs")


# ---- programs compiled once per Python, kept under build/ ----

def built_once(name, key, build):
    """The folder build/<name>/<python version>-<key> in the repository,
    made by build(folder) the first time only (key: a digest of what the
    build reads): a C extension compiled for the tests costs its
    compilation once. A concurrent run building the same folder is
    harmless (each builds into a folder of its own, then renames it)."""
    out = os.path.join(ROOT, "build", name, "%d.%d-%s" % (sys.version_info[:2] + (key,)))
    if not os.path.isdir(out):
        cc = shutil.which(os.environ.get("CC", "cc"))
        if not cc:
            missing(f"no C compiler (cc) to build {name}")
        tmp = out + ".tmp%d" % os.getpid()
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        build(tmp, cc)
        try:
            os.rename(tmp, out)
        except OSError:   # built meanwhile by another run
            shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---- a program run under stackwatch, and its trace read back ----

def run_own_log(folder, program):
    """Writes `program` to folder/p.py and runs it with python as `p.py
    TRACE OWN` (it traces itself into TRACE and writes its own log, JSON,
    to OWN), checking that it exits with status 0. Returns (the trace's
    path, the log read)."""
    prog = write(folder / "p.py", program)
    swt, own = folder / "t.swt", folder / "own.json"
    r = subprocess.run([sys.executable, prog, str(swt), str(own)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return str(swt), json.loads(own.read_text())


def run_traced(folder, program, *options, name="prog.py", trace="t.swt", args=(), cwd=None):
    """Writes `program` to folder/name and runs `stackwatch run OPTIONS -o
    folder/trace folder/name ARGS` (in `cwd`), checking that it exits with
    status 0. Returns (the trace's path, the CompletedProcess)."""
    prog = write(folder / name, program)
    out = str(folder / trace)
    r = run(["run", *options, "-o", out, prog, *args], cwd=cwd)
    assert r.returncode == 0, r.stderr
    return out, r


def calls_by_name(trace):
    """{qualname: calls} of a trace (a Trace or its path)."""
    from stackwatch import Trace
    t = trace if isinstance(trace, Trace) else Trace(str(trace))
    out = {}
    for r in t.stats():
        name = t.codes[r.code].qualname
        out[name] = out.get(name, 0) + r.calls
    return out


def thread_pos(t, name):
    """The position in t.threads of the thread called `name`."""
    return next(i for i, th in enumerate(t.threads) if th["name"] == name)


def slice_of(t, pos, name):
    """(start, end) in trace ns of the only call of `name` on the thread at
    `pos` (checked to be the only one)."""
    stack, found = [], []
    for e in t.events(pos):
        if e.kind in (0, 2, 5):
            stack.append((e.code, e.t_ns))
        elif e.kind in (1, 3, 4, 6) and stack:
            code, start = stack.pop()
            if t.codes[code].name == name:
                found.append((start, e.t_ns))
    assert len(found) == 1, found
    return found[0]


# ---- a trace's exports read back ----

PERFETTO_PB2 = "perfetto.protos.perfetto.trace.perfetto_trace_pb2"
NO_PERFETTO = "the perfetto package (its trace protos) is not installed (scripts/venv.sh installs it)"

class _Sequence:
    """A packet sequence's state as trace_processor keeps it: valid once a
    packet cleared it; its TracePacketDefaults and interned messages (reset
    by SEQ_INCREMENTAL_STATE_CLEARED); its sequence-scoped clocks (not
    reset: they belong to the clock snapshots)."""

    def __init__(self):
        self.valid, self.defaults, self.interned, self.clocks = False, None, {}, {}
        self.packets = 0
        self.last_ts = None

    def clear(self):
        self.valid, self.defaults, self.interned = True, None, {}

    def intern(self, idata):
        for field in ("event_names", "event_categories", "source_locations"):
            table = self.interned.setdefault(field, {})
            for entry in getattr(idata, field):
                table[entry.iid] = entry

    def lookup(self, field, iid):
        entry = self.interned.get(field, {}).get(iid)
        assert entry is not None, f"{field} iid {iid} used before it was interned on its sequence"
        return entry


def _int64(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def perfetto_timeline(swt, out):
    """The Perfetto export of the trace file `swt`, written to `out` and
    decoded with the official schema (the test is skipped without the
    `perfetto` package), resolved as trace_processor reads it
    (importers/proto/proto_trace_reader.cc, util/clock_synchronizer.h):
    per packet sequence, SEQ_INCREMENTAL_STATE_CLEARED resets its interned
    data and TracePacketDefaults; a packet's clock is its
    timestamp_clock_id, else its sequence's default, else the trace clock
    (CLOCK_BOOTTIME); a ClockSnapshot sets each sequence-scoped clock
    (ids 64-127) it names to its timestamp and ties it to CLOCK_BOOTTIME,
    and an incremental clock's packet timestamp is a delta (an int64) from
    the sequence's previous one; names, categories and source locations
    are looked up by iid in the sequence's interned data; a TrackEvent
    without track_uuid is on its sequence's default track. Checks what
    every event needs to be kept: each track event on a described track,
    each sequence's first packet clearing its state and every later event
    packet needing it, every iid interned before its use, time never going
    back on a sequence, slices balanced per track. Returns a namespace:
      pb2        the schema module;
      tracks     {uuid: TrackDescriptor};
      slices     [(name, begin, end, track uuid, end TrackEvent)] in the
                 order they end, times in CLOCK_BOOTTIME ns;
      slice_info [{"categories", "source": (file, function, line) or None,
                 "depth": nesting depth on its track, 0 outermost}], one
                 per slice, in the same order;
      instants   [(timestamp, track uuid, TrackEvent)];
      samples    the instants of category "sample", each checked to be on
                 a "samples" track under a thread's: [(timestamp, the
                 thread's track uuid, TrackEvent)];
      begins     [(name, timestamp, track uuid, begin TrackEvent)] of the
                 slices, in the order they begin;
      sequences  {sequence id: its last timestamp};
      ftrace     [(cpu, FtraceEvent)] of the ftrace bundles (the scheduler's
                 events, from which trace_processor makes thread states),
                 each checked alone in its packet, in file order;
      encoding   how many event packets had an incremental timestamp
                 ("incremental"), took their track from the defaults
                 ("default_track"), an interned name ("name_iid"), of
                 "events"."""
    from stackwatch import Trace
    needs_module(PERFETTO_PB2, NO_PERFETTO)
    Trace(str(swt)).export("perfetto", str(out))
    return perfetto_decode(out)


def perfetto_decode(out):
    """A Perfetto file decoded and checked as perfetto_timeline() does."""
    pb2 = needs_module(PERFETTO_PB2, NO_PERFETTO)
    trace = pb2.Trace()
    trace.ParseFromString(open(out, "rb").read())
    P = pb2.TracePacket
    BOOTTIME = pb2.BUILTIN_CLOCK_BOOTTIME
    tracks, seqs, open_ = {}, {}, {}
    slices, slice_info, instants, samples, begins, ftrace = [], [], [], [], [], []
    encoding = Counter()
    for pkt in trace.packet:
        if pkt.HasField("ftrace_events"):
            assert [f.name for f, _ in pkt.ListFields()] == ["ftrace_events"], "ftrace events with other fields"
            ftrace.extend((pkt.ftrace_events.cpu, e) for e in pkt.ftrace_events.event)
            continue
        if pkt.HasField("track_descriptor"):
            assert pkt.track_descriptor.uuid not in tracks, "a track described twice"
            tracks[pkt.track_descriptor.uuid] = pkt.track_descriptor
            continue
        seq_id = pkt.trusted_packet_sequence_id
        assert seq_id, "a packet of an event stream without a sequence id"
        seq = seqs.setdefault(seq_id, _Sequence())
        first = seq.packets == 0
        seq.packets += 1
        if pkt.sequence_flags & P.SEQ_INCREMENTAL_STATE_CLEARED:
            seq.clear()
        assert not first or pkt.sequence_flags & P.SEQ_INCREMENTAL_STATE_CLEARED, \
            "a sequence's first packet does not clear its state"
        if pkt.HasField("trace_packet_defaults"):
            seq.defaults = pkt.trace_packet_defaults
        if pkt.HasField("interned_data"):
            assert seq.valid
            seq.intern(pkt.interned_data)
        if pkt.HasField("clock_snapshot"):
            snap = {c.clock_id: c for c in pkt.clock_snapshot.clocks}
            assert BOOTTIME in snap, "a clock snapshot that does not name the trace clock"
            for cid, c in snap.items():
                if 64 <= cid < 128:
                    unit = c.unit_multiplier_ns or 1
                    seq.clocks[cid] = {"incremental": c.is_incremental, "unit": unit,
                                       "last": c.timestamp * unit,
                                       "offset": snap[BOOTTIME].timestamp - c.timestamp * unit}
                else:
                    assert not c.is_incremental, "a global clock cannot be incremental"
            continue
        if not pkt.HasField("track_event"):
            continue
        assert pkt.sequence_flags & P.SEQ_NEEDS_INCREMENTAL_STATE, "an event packet that does not need the state"
        assert seq.valid, "an event packet on a sequence whose state is not valid (trace_processor skips it)"
        # Its time.
        assert pkt.HasField("timestamp"), "a track event without a timestamp"
        clock = pkt.timestamp_clock_id or (seq.defaults.timestamp_clock_id if seq.defaults else 0)
        if 64 <= clock < 128:
            c = seq.clocks.get(clock)
            assert c, "a packet on a sequence clock no snapshot defined"
            raw = _int64(pkt.timestamp) if c["incremental"] else pkt.timestamp
            encoding["incremental"] += c["incremental"]
            c["last"] = (c["last"] if c["incremental"] else 0) + raw * c["unit"]
            ts = c["last"] + c["offset"]
        else:
            assert clock in (0, BOOTTIME), clock
            ts = pkt.timestamp
        assert seq.last_ts is None or ts >= seq.last_ts, "time goes back on a sequence"
        seq.last_ts = ts
        # Its track, name, categories.
        te = pkt.track_event
        encoding["events"] += 1
        encoding["name_iid"] += te.HasField("name_iid")
        if te.HasField("track_uuid"):
            track = te.track_uuid
        else:
            encoding["default_track"] += 1
            assert seq.defaults and seq.defaults.HasField("track_event_defaults"), "an event without a track"
            track = seq.defaults.track_event_defaults.track_uuid
        assert track in tracks, "an event on a track never described"
        td = tracks[track]
        cats = list(te.categories) + [seq.lookup("event_categories", i).name for i in te.category_iids]
        if te.type == pb2.TrackEvent.TYPE_SLICE_BEGIN:
            kind = te.WhichOneof("name_field")
            name = te.name if kind == "name" else seq.lookup("event_names", te.name_iid).name
            source = None
            if te.HasField("source_location_iid"):
                sl = seq.lookup("source_locations", te.source_location_iid)
                source = (sl.file_name, sl.function_name, sl.line_number)
            stack = open_.setdefault(track, [])
            stack.append((name, ts, {"categories": cats, "source": source, "depth": len(stack)}))
            begins.append((name, ts, track, te))
        elif te.type == pb2.TrackEvent.TYPE_SLICE_END:
            assert open_.get(track), "a slice ends that did not begin"
            name, begin, info = open_[track].pop()
            slices.append((name, begin, ts, track, te))
            slice_info.append(info)
        elif te.type == pb2.TrackEvent.TYPE_INSTANT:
            instants.append((ts, track, te))
            if "sample" in cats:
                assert td.name == "samples" and tracks[td.parent_uuid].HasField("thread")
                samples.append((ts, td.parent_uuid, te))
    assert not any(open_.values()), "slices left open"
    return types.SimpleNamespace(pb2=pb2, tracks=tracks, slices=slices, slice_info=slice_info,
                                 instants=instants, samples=samples, begins=begins, ftrace=ftrace,
                                 sequences={k: v.last_ts for k, v in seqs.items() if v.last_ts is not None},
                                 encoding=encoding)


def chrome_slices(doc):
    """The slices of a Chrome JSON export (its parsed document), its B and E
    events matched per thread (checked balanced, none ending before it
    began): [(name, begin ts, end ts, tid)]."""
    open_, out = {}, []
    for e in doc["traceEvents"]:
        if e["ph"] == "B":
            open_.setdefault(e["tid"], []).append(e)
        elif e["ph"] == "E":
            b = open_[e["tid"]].pop()
            assert e["ts"] >= b["ts"]
            out.append((b["name"], b["ts"], e["ts"], e["tid"]))
    assert not any(open_.values()), "B events left open"
    return out


# ---- a flame graph page (stackwatch.render.flamegraph) read back ----

class _Scripts(html.parser.HTMLParser):
    """The <script> elements of a page, as a browser's tokenizer splits
    them: [(attrs, text)]; and the <title> text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.scripts, self.title, self._in = [], "", None

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "title"):
            self._in = (tag, dict(attrs), [])

    def handle_data(self, data):
        if self._in:
            self._in[2].append(data)

    def handle_endtag(self, tag):
        if self._in and tag == self._in[0]:
            if tag == "script":
                self.scripts.append((self._in[1], "".join(self._in[2])))
            else:
                self.title = "".join(self._in[2])
            self._in = None


def parse_page(text):
    p = _Scripts()
    p.feed(text)
    p.close()
    return p


def nested(data, thread):
    """A thread's flat node list back as nested dicts like Profiler.tree()."""
    flat, frames, strings = thread["nodes"], data["frames"], data["strings"]
    assert len(flat) % 6 == 0
    nodes = []
    for i in range(0, len(flat), 6):
        parent, frame, count, self_, time_ns, self_time = flat[i:i + 6]
        if frame < 0:
            node = {"name": "<root>", "filename": "", "line": 0}
        else:
            name, filename, line, source, native = frames[frame]
            node = {"name": strings[name], "filename": strings[filename], "line": line,
                    "source": strings[source]}
            if native:
                node["native"] = True
        node.update(count=count, self=self_, time_ns=time_ns, self_time_ns=self_time, children=[])
        if parent >= 0:
            assert parent < len(nodes)
            nodes[parent]["children"].append(node)
        else:
            assert not nodes, "only the first node is a root"
        nodes.append(node)
    return nodes[0]


def page_data(text):
    """The embedded data of a page, decoded."""
    (attrs, body), = [s for s in parse_page(text).scripts if s[0].get("id") == "stackwatch-data"]
    assert attrs.get("type") == "application/json"
    return json.loads(body)


# ---- a page in headless Chromium (the flame graph, the IPython magics' output) ----

# The page does not depend on the interpreter (the renderers are C, the
# same on every version): browser tests run on one version, or on every
# version with STACKWATCH_BROWSER_TESTS=all.
BROWSER_VERSIONS = ("3.11",)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

def _browser_missing():
    """Why the browser tests cannot run here (a tool missing), or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is not installed (Debian packages chromium, chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (scripts/venv.sh installs it)"
    return None


@pytest.fixture(scope="module")
def browser():
    v = "%d.%d" % sys.version_info[:2]
    if os.environ.get("STACKWATCH_BROWSER_TESTS") != "all" and v not in BROWSER_VERSIONS:
        pytest.skip(f"browser tests run on Python {' and '.join(BROWSER_VERSIONS)} "
                    "(STACKWATCH_BROWSER_TESTS=all for every version)")
    reason = _browser_missing()
    if reason:
        missing(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    profile_dir = tempfile.mkdtemp(prefix="sw-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--no-first-run", "--window-size=1200,800",
              f"--user-data-dir={profile_dir}"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver's path is given, so selenium never looks for (or downloads) one.
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    try:
        # Collects uncaught errors from the first line of every page on.
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": (
            "window.__errors = [];"
            "addEventListener('error', function (e) { __errors.push(String(e.message || e)); });"
            "document.addEventListener('securitypolicyviolation', function (e) {"
            " __errors.push('CSP: ' + e.violatedDirective); });")})
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile_dir, ignore_errors=True)


def open_page(driver, path):
    driver.get_log("browser")   # drops the previous page's messages
    driver.get("file://" + str(path))
    return driver


def check_clean(driver):
    """No uncaught error, CSP violation or console error/warning so far."""
    errors = driver.execute_script("return window.__errors")
    logs = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == [] and logs == [], (errors, logs)
