"""`stackwatch run --lttng`: the Python calls and returns emitted live to the
LTTng-UST tracepoints stackwatch:function_entry / function_exit, recorded
by a real LTTng session (Debian lttng-tools 2.13: lttng-sessiond, `lttng
create / enable-event -u / add-context / start / stop`) and read back with
babeltrace2: on every thread the same sequence of entries and exits, of
the same functions, as stackwatch's own trace of the same run (an
__init__ in a hot loop too: on 3.13 it takes the tracer's second path).
In the same session, LTTng's own liblttng-ust-cyg-profile records a C
program: the CTF export's function events follow its conventions.
One Python runs it (3.12; STACKWATCH_ALL_VERSIONS=1 runs it on each)."""
import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import missing, needs, run, run_traced

# The consumer is the same C on every Python; one version runs it.
pytestmark = pytest.mark.versions("3.12")
from stackwatch import Trace
from stackwatch.tracer.tracefile import KIND_NAMES

NO_LTTNG = None
for tool, package in (("lttng", "lttng-tools"), ("lttng-sessiond", "lttng-tools"), ("babeltrace2", "babeltrace2")):
    if not shutil.which(tool) and not NO_LTTNG:
        NO_LTTNG = f"{tool} is not installed (Debian package {package}; scripts/install-deps.sh installs it)"

PROGRAM = """
import threading

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def gen(n):
    for i in range(n):
        yield fib(i)

def fails():
    raise ValueError

class Point:
    def __init__(self, x):
        self.x = x

def work():
    sum(gen(12))
    for i in range(50):
        Point(i)
    try:
        fails()
    except ValueError:
        pass

t = threading.Thread(target=work)
t.start()
work()
t.join()
"""


def lttng(*args, check=True):
    r = subprocess.run(["lttng", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 or not check, (args, r.stdout, r.stderr)
    return r


@pytest.fixture(scope="module")
def sessiond():
    """A session daemon: the one running, else one started here (in the
    foreground, stopped at the end)."""
    if NO_LTTNG:
        yield None
        return
    if lttng("list", check=False).returncode == 0:
        yield None
        return
    d = subprocess.Popen(["lttng-sessiond", "--no-kernel"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    end = time.monotonic() + 20
    while lttng("list", check=False).returncode != 0:
        if d.poll() is not None or time.monotonic() > end:
            d.kill()
            # (the tool is here but its daemon cannot run: skipped even under CI)
            pytest.skip(f"lttng-sessiond cannot run here: {d.stderr.read().decode(errors='replace')[-300:]}")
        time.sleep(0.1)
    yield d
    d.terminate()
    d.wait(timeout=30)


CYG_PROGRAM = """
static int leaf(int x) { return x + 1; }
int main(void) { int s = 0; for (int i = 0; i < 3; i++) s += leaf(i); return s == 6 ? 0 : 1; }
"""


@pytest.fixture(scope="module")
def recorded(sessiond, tmp_path_factory):
    """One LTTng session (stackwatch:* and lttng_ust_cyg_profile:* with the
    vpid, vtid and procname contexts) over two programs: PROGRAM run with
    --lttng, and a C program built with -finstrument-functions run with
    LTTng's own liblttng-ust-cyg-profile. (stackwatch's trace path, the
    session's output folder, babeltrace2's text of it, the folder.)"""
    folder = tmp_path_factory.mktemp("lttng")
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler"
    (folder / "cyg.c").write_text(CYG_PROGRAM)
    subprocess.run([cc, "-O0", "-finstrument-functions", "cyg.c", "-o", "cyg"], cwd=folder, check=True)
    name = f"stackwatch-test-{uuid.uuid4().hex[:12]}"
    out = folder / "lttng"
    lttng("create", name, f"--output={out}")
    try:
        lttng("enable-event", "-u", "-s", name, "stackwatch:*,lttng_ust_cyg_profile:*")
        lttng("add-context", "-u", "-s", name, "-t", "vpid", "-t", "vtid", "-t", "procname")
        lttng("start", name)
        path, r = run_traced(folder, PROGRAM, "--lttng")
        c = subprocess.run(["./cyg"], cwd=folder, env={"LD_PRELOAD": "liblttng-ust-cyg-profile.so"},
                           capture_output=True, text=True, timeout=60)
        lttng("stop", name)
    finally:
        lttng("destroy", name, check=False)
    assert r.returncode == 0, r.stderr
    assert c.returncode == 0, c.stderr
    b = subprocess.run(["babeltrace2", str(out)], capture_output=True, text=True, timeout=120)
    assert b.returncode == 0, b.stderr[-2000:]
    return path, out, b.stdout, folder


@needs(NO_LTTNG)
def test_lttng_session_records_the_traces_calls(recorded):
    path, _, output, _ = recorded
    line = re.compile(r'stackwatch:function_(entry|exit): \{ cpu_id = \d+ \}, \{ vpid = \d+, vtid = (\d+), '
                      r'procname = "[^"]*" \}, \{ function = "([^"]*)", file = "([^"]*)", line = (-?\d+) \}$')
    theirs = {}
    for text in output.splitlines():
        if " stackwatch:" not in text:
            continue
        m = line.search(text)
        assert m, text
        theirs.setdefault(int(m[2]), []).append((m[1], m[3], m[4]))
    t = Trace(path)
    entry = {"call", "resume"}
    ours = {}
    for pos, th in enumerate(t.threads):
        seq = [("entry" if KIND_NAMES[e.kind] in entry else "exit", t.codes[e.code].qualname,
                t.codes[e.code].filename) for e in t.events(pos)]
        if seq:
            ours[th["native_tid"]] = seq
    assert theirs == ours
    # Both threads ran work(): fib's calls, the generator's resumptions and
    # the unwind out of fails() are all there, on each.
    assert len(ours) == 2
    for seq in ours.values():
        assert sum(1 for kind, fn, _ in seq if kind == "entry" and fn == "fib") == sum(
            calls(n) for n in range(12))
        assert sum(1 for kind, fn, _ in seq if kind == "entry" and fn == "gen") == 13
        assert sum(1 for kind, fn, _ in seq if fn == "fails") == 2
        assert sum(1 for kind, fn, file in seq if kind == "entry" and fn.endswith("__init__")
                   and file.endswith("prog.py")) == 50


def shapes(text):
    """{event name: (its contexts' keys, its payload's keys)} of
    babeltrace2's text (the packet context, when printed, left out)."""
    out = {}
    for line in text.splitlines():
        m = re.search(r" (\S+): (.*)$", line)
        groups = [re.findall(r"(\w+) = ", g) for g in re.findall(r"\{([^{}]*)\}", m[2])]
        if groups and groups[0] == ["cpu_id"]:
            groups = groups[1:]
        out.setdefault(m[1], (tuple(groups[0]), tuple(groups[-1])))
    return out


def env(directory):
    r = subprocess.run(["babeltrace2", "--output-format=ctf-metadata", str(directory)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    block = re.search(r"^env \{(.*?)^\};", r.stdout, re.S | re.M)[1]
    return dict(re.findall(r"^\s*(\w+) = \"?([^\";]*)\"?;", block, re.M))


@needs(NO_LTTNG)
def test_ctf_export_follows_lttngs_own_cyg_profile_trace(recorded):
    """The CTF export's function events against LTTng's own: a C program
    built with -finstrument-functions run with liblttng-ust-cyg-profile
    under a session with the vpid, vtid and procname contexts (what Trace
    Compass's LTTng-UST call-stack view reads): the same event names and
    contexts, the payload's addr, and the env that makes it an LTTng-UST
    trace (domain, tracer). LTTng's call_site is not written."""
    path, out, text, folder = recorded
    theirs = shapes("\n".join(t for t in text.splitlines() if " lttng_ust_cyg_profile:" in t))
    assert set(theirs) == {"lttng_ust_cyg_profile:func_entry", "lttng_ust_cyg_profile:func_exit"}, theirs
    ctf = folder / "t.ctf"
    r = run(["export", path, "--format", "ctf", "-o", str(ctf)])
    assert r.returncode == 0, r.stderr
    b = subprocess.run(["babeltrace2", str(ctf)], capture_output=True, text=True, timeout=60)
    assert b.returncode == 0, b.stderr
    ours = shapes(b.stdout)
    for event, (context, payload) in theirs.items():
        assert ours[event][0] == context, event
        assert set(payload) - {"call_site"} <= set(ours[event][1]), (event, payload, ours[event][1])
    mine, lttngs = env(ctf / "ust"), env(next(p.parent for p in out.rglob("metadata")))
    for key in ("domain", "tracer_name", "tracer_major", "tracer_minor", "hostname"):
        assert mine[key] == lttngs[key], key


def test_probes_lists_the_tracepoints():
    """`stackwatch probes` lists them, with the provider library, where the
    build made it (everywhere lttng-ust's headers are: scripts/venv.sh's
    builds here)."""
    import stackwatch
    provider = os.path.join(os.path.dirname(stackwatch.__file__), "libstackwatch_lttng.so")
    r = run(["probes"])
    assert r.returncode == 0, r.stderr
    if not os.path.exists(provider):
        assert "LTTng-UST tracepoints: not built" in r.stdout
        missing("stackwatch was built without lttng-ust (Debian liblttng-ust-dev; scripts/install-deps.sh "
                "installs it)")
    assert f"LTTng-UST tracepoints (provider library {provider}):" in r.stdout
    assert "  stackwatch:function_entry { function, file, line }\n  stackwatch:function_exit { function, file, " \
           "line }\n" in r.stdout


def calls(n):
    """fib(n)'s number of calls."""
    return 1 if n < 2 else 1 + calls(n - 1) + calls(n - 2)
