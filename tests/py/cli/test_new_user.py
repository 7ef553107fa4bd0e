"""The command line as a new user meets it: the help names every format
that works (from the registry, so that it cannot fall behind it), an
output's ending means one format per kind of input, and every mistake is
one line naming what is wrong and a non-zero exit status."""
import json
import os

import pytest

from conftest import run, write
from stackwatch.render import formats

PROGRAM = "def f(n):\n    return n if n < 2 else f(n - 1) + f(n - 2)\nf(12)\n"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    prog = write(d / "prog.py", PROGRAM)
    r = run(["run", "-q", "-o", str(d / "t.swt"), prog], cwd=d)
    assert r.returncode == 0, r.stderr
    return d / "t.swt"


def _flat(text):
    return " ".join(text.split())


def _said(text, option, until):
    """What the help says after `option`'s last mention, up to `until`."""
    return text.rsplit(option, 1)[1].split(until, 1)[0]


def _command_help(top, name):
    """The lines of `stackwatch --help` that describe command `name`."""
    lines, mine = [], False
    for line in top.splitlines():
        if line.startswith("    ") and not line.startswith("     "):
            mine = line.split()[0] == name
        if mine:
            lines.append(line)
    return _flat("\n".join(lines))


def test_help_names_every_format():
    top = run(["--help"]).stdout
    export = _flat(run(["export", "--help"]).stdout)
    profile = run(["profile", "--help"]).stdout
    usage = _flat(profile.split("\n\n")[0])
    for name in formats.names(formats.TRACES, written=True):
        assert name in _command_help(top, "export"), (name, top)
        assert name in _command_help(top, "run"), (name, top)
        assert f"{name} (" in _said(export, "--output OUT", "--min-duration"), (name, export)
        assert name in _said(export, "--format FORMAT", "--thread"), (name, export)
    for name in formats.names(formats.TREES, formats.PROFILES):
        assert name in _said(usage, "--format ", "]").split("|"), (name, usage)
        assert name in _command_help(top, "profile"), (name, top)
    assert "Perfetto or Chrome JSON" not in top


def test_output_option_has_help():
    for command in ("run", "profile", "export"):
        out = _flat(run([command, "--help"]).stdout)
        after = out.split("--output OUT", 1)[1].lstrip()
        assert after[:1].isalpha() and not after.startswith(("--", "-h")), (command, out)


def test_trace_json_is_chrome(trace, tmp):
    """A trace's x.json is Chrome's trace format (as the README and `export
    --help` say); x.speedscope.json is speedscope."""
    r = run(["export", str(trace), "-o", str(tmp / "x.json")])
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp / "x.json").read_text())
    assert "traceEvents" in doc and any(e.get("name") == "f" for e in doc["traceEvents"])
    r = run(["export", str(trace), "-o", str(tmp / "x.speedscope.json")])
    assert r.returncode == 0, r.stderr
    assert "speedscope" in json.loads((tmp / "x.speedscope.json").read_text())["$schema"]


# ---- run --format perfetto|chrome: every process merged, counted, warned of ----

CHILD = "def g(n):\n    return n if n < 2 else g(n - 1) + g(n - 2)\ng(10)\n"
WITH_CHILD = PROGRAM + f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {CHILD!r}], check=True)\n"


def test_run_format_counts_every_process(tmp):
    """The events and threads `run --format` counts are those of every
    process it merged: the traces themselves, read back."""
    from stackwatch import Trace
    from stackwatch.cli import traces
    d = tmp / "run"
    d.mkdir()
    prog = write(tmp / "prog.py", WITH_CHILD)
    r = run(["run", "-q", "-o", str(d / "trace.swt"), prog], cwd=tmp)
    assert r.returncode == 0, r.stderr
    read = [Trace(str(d / p)) for p in sorted(os.listdir(d))]
    assert len(read) == 2
    children, events, threads = traces.convert("chrome", str(tmp / "m.json"), str(d / "trace.swt"), 0)
    assert len(children) == 1
    assert events == sum(t.event_count() for t in read) and threads == sum(len(t.threads) for t in read)
    assert not d.exists()


def test_run_format_warns_and_says_every_process(tmp):
    """Before writing a big timeline, `run --format` warns as `export`
    does (the limit lowered here), with the events of every process, which
    its last line counts too."""
    prog = write(tmp / "prog.py", WITH_CHILD)
    r = run(["run", "--format", "chrome", "-o", "m.json", prog], cwd=tmp, env={"STACKWATCH_WARN_BYTES": "1000"})
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[-1].startswith("stackwatch: wrote ") and lines[-1].endswith("; 2 processes merged"), r.stderr
    events = int(lines[-1].split(" (", 1)[1].split(" events")[0])
    warning = [line for line in lines[:-1] if line.startswith("stackwatch: warning: the chrome export of ")]
    assert len(warning) == 1 and f" of {events} events " in warning[0], r.stderr
    assert "--thread" not in warning[0]   # not an option of run
    doc = json.loads((tmp / "m.json").read_text())
    per_pid = {}
    for e in doc["traceEvents"]:
        if e["ph"] in "BE":
            per_pid[e["pid"]] = per_pid.get(e["pid"], 0) + 1
    assert len(per_pid) == 2 and events >= sum(per_pid.values()), (events, per_pid)
    quiet = run(["run", "--format", "chrome", "-o", "q.json", prog], cwd=tmp)
    assert "warning" not in quiet.stderr


# ---- an output that cannot be written: one line naming the file ----

def _one_error_line(r):
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("stackwatch: error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.mark.parametrize("fmt", ["html", "pstats", "chrome", "perfetto"])
def test_unwritable_output_names_the_file(trace, fmt):
    """/proc/version opens for writing as root and fails on the write
    (EIO, an OSError without a file name); as another user, on open."""
    r = run(["export", str(trace), "--format", fmt, "-o", "/proc/version"])
    assert r.returncode == 2
    assert _one_error_line(r).startswith("stackwatch: error: /proc/version: "), r.stderr
    r = run(["export", str(trace), str(trace), "--format", fmt, "-o", "/proc/version"])
    assert r.returncode == 2
    assert "/proc/version: " in _one_error_line(r), r.stderr


def test_run_unwritable_output_names_the_file(tmp):
    prog = write(tmp / "prog.py", PROGRAM)
    r = run(["run", "--format", "html", "-o", "/proc/version", prog], cwd=tmp)
    assert r.returncode == 0   # the program's status: it ran
    assert "/proc/version: " in _one_error_line(r), r.stderr


@pytest.mark.parametrize("command,fmt,said", [
    ("export", "html", "html output"), ("export", "chrome", "chrome trace"),
    ("run", "html", "html output"), ("run", "swt", "the trace")])
def test_output_named_by_its_format(trace, tmp, command, fmt, said):
    (tmp / "out").mkdir()
    prog = write(tmp / "prog.py", PROGRAM)
    args = [str(trace)] if command == "export" else []
    r = run([command, "--format", fmt, "-o", str(tmp / "out")] + args + ([prog] if command == "run" else []))
    assert r.returncode == 2
    line = _one_error_line(r)
    assert f"cannot write the {said.replace('the ', '')} to {tmp / 'out'}: it is a directory" in line, line
