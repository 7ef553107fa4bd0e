"""The IPython / Jupyter magics (stackwatch.integrations.ipython), driven
in a real IPython shell (InteractiveShell, run_line_magic /
run_cell_magic): `%load_ext stackwatch`; %stackwatch traces a line (its
value returned, the calls in the trace and in the inline flame graph
equal to the known count), %%stackwatch -p profiles a cell; the HTML it
displays (an iframe whose srcdoc is the flame graph page) renders in
headless Chromium with the frames drawn and no error; bad options are one
line; an exception in the code is raised after the results, with tracing
stopped. IPython comes from PyPI into the test venvs (scripts/venv.sh)."""
import html
import os
import re
import sys
import threading

import pytest

from conftest import check_clean, needs_module, needs_sampler, nested, open_page, page_data, tree_nodes

IPython = needs_module("IPython", "IPython is not installed in this venv (scripts/venv.sh installs it from "
                       "PyPI)")

FIB = """
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def spin(seconds):
    import time
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return seconds
"""


@pytest.fixture(scope="module")
def shell():
    """A real IPython shell, without the history thread (the other tests of
    this process sample every thread; none may be left behind)."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config
    before = set(threading.enumerate())
    c = Config()
    c.HistoryManager.enabled = False
    ip = InteractiveShell.instance(config=c)
    ip.run_line_magic("load_ext", "stackwatch")
    ip.run_cell(FIB)
    yield ip
    InteractiveShell.clear_instance()
    assert set(threading.enumerate()) <= before


@pytest.fixture
def shown(shell, monkeypatch):
    """What the magic displays: [the HTML of each display()]."""
    out = []

    def publish(data, metadata=None, **kw):
        out.append(data.get("text/html"))
    monkeypatch.setattr(shell.display_pub, "publish", publish)
    return out


def srcdoc(iframe_html):
    m = re.fullmatch(r'<div class="stackwatch"><iframe srcdoc="([^"]*)" style="[^"]*" sandbox="allow-scripts">'
                     r'</iframe></div>', iframe_html)
    assert m, iframe_html[:200]
    return html.unescape(m.group(1))


def test_line_is_traced_and_its_value_returned(shell, shown, tmp_path, capsys):
    from stackwatch import Trace, is_tracing
    out = tmp_path / "line.swt"
    assert shell.run_line_magic("stackwatch", f"-o {out} fib(15)") == 610
    assert not is_tracing()
    # fib(15) makes 2 * fib(16) - 1 calls of fib.
    t = Trace(str(out))
    calls = sum(r.calls for r in t.stats() if t.codes[r.code].qualname == "fib")
    assert calls == 1973
    printed = capsys.readouterr().out
    assert f"into {out}" in printed and "top functions by own time:" in printed
    assert re.search(r"\s1973\s+fib\s+\(", printed), printed
    assert "user_ns" not in printed      # only the line's own calls
    # The flame graph shown: fib's calls summed over its nodes, and the
    # root's time the sum of the top frames'.
    page, = shown
    data = page_data(srcdoc(page))
    trees = [nested(data, th) for th in data["threads"]]
    fibs = [n for tr in trees for n in tree_nodes(tr) if n["name"] == "fib"]
    assert sum(n["self"] for n in fibs) == 1973      # a node's own calls
    assert all(tr["time_ns"] > 0 for tr in trees)
    assert "<root>" not in [n["name"] for tr in trees for n in tree_nodes(tr)][1:]


def test_statement_and_quiet(shell, shown, tmp_path, capsys):
    out = tmp_path / "stmt.swt"
    assert shell.run_line_magic("stackwatch", f"-q --output={out} x_from_magic = fib(5)") is None
    assert shell.user_ns["x_from_magic"] == 5
    assert shown == [] and os.path.exists(out)


@needs_sampler
def test_cell_is_profiled(shell, shown, tmp_path, capsys):
    out = tmp_path / "cell.html"
    r = shell.run_cell_magic("stackwatch", f"-p -i 200us -o {out}", "y_from_cell = spin(0.2)\n")
    assert r is None and shell.user_ns["y_from_cell"] == 0.2
    printed = capsys.readouterr().out
    m = re.search(r"stackwatch: (\d+) samples in .* wall, written to (\S+)", printed)
    assert m and int(m.group(1)) > 0 and m.group(2) == str(out), printed
    assert re.search(r"spin\s+\(", printed), printed
    page, = shown
    data = page_data(srcdoc(page))
    names = {n["name"] for th in data["threads"] for n in tree_nodes(nested(data, th))}
    assert "spin" in names
    # -o wrote the same profile in the format its name says.
    assert "spin" in {n["name"] for th in page_data(out.read_text())["threads"]
                      for n in tree_nodes(nested(page_data(out.read_text()), th))}


@needs_sampler
def test_threads_that_only_waited_are_left_out_of_the_table(shell, shown, capsys):
    # Pool threads idle on a condition for the whole cell (as IPython's own
    # history thread) would fill the table with their waiting.
    # The cell before the profiled one waits until both are in their wait:
    # a pool thread still starting when the profile begins is running.
    shell.run_cell("import threading, time\nfrom concurrent.futures import ThreadPoolExecutor\n"
                   "go_idle = threading.Event()\nidle_pool = ThreadPoolExecutor(2)\n"
                   "waiting = threading.Semaphore(0)\n"
                   "for _ in range(2): idle_pool.submit(lambda: (waiting.release(), go_idle.wait()))\n"
                   "for _ in range(2): waiting.acquire()\n"
                   "time.sleep(0.05)\n")
    try:
        shell.run_cell_magic("stackwatch", "-p -q", "spin(0.2)\n")
    finally:
        shell.run_cell("go_idle.set(); idle_pool.shutdown()")
    printed = capsys.readouterr().out
    rows = printed.split("samples ending there):\n", 1)[1].splitlines()
    assert re.search(r"\sspin\s+\(", rows[1]), printed       # rows[0]: the column heads
    m = re.search(r"^2 threads that only waited .* left out: (.*)$", printed, re.M)
    assert m and all(n.startswith("ThreadPoolExecutor-") for n in m.group(1).split(", ")), printed


@pytest.mark.parametrize("line, message", [
    ("--bogus 1", "unknown option --bogus"),
    ("-o", "-o needs a value"),
    ("", "give a statement"),
    ("-p -o out.unknown 1", "its ending names no known format"),
])
def test_bad_options_are_one_line(shell, line, message):
    from IPython.core.error import UsageError
    with pytest.raises(UsageError, match=re.escape(message)):
        shell.run_line_magic("stackwatch", line)


def test_an_exception_is_raised_after_the_results(shell, shown, tmp_path, capsys):
    from stackwatch import is_tracing
    with pytest.raises(ZeroDivisionError):
        shell.run_line_magic("stackwatch", f"-o {tmp_path / 'e.swt'} fib(3) / 0")
    assert not is_tracing()
    assert "traced" in capsys.readouterr().out and len(shown) == 1


def test_under_a_running_trace_a_cell_is_a_region(shell, shown, tmp_path, capsys):
    import stackwatch
    path = str(tmp_path / "outer.swt")
    with stackwatch.trace(path):
        shell.run_cell_magic("stackwatch", "", "fib(4)\n")
    assert "is a region of the running trace" in capsys.readouterr().out and shown == []
    names = [e.data["name"] for e in stackwatch.Trace(path).ext_events(kinds=["region_begin"])]
    assert len(names) == 1 and names[0].startswith("cell ")


def test_the_displayed_html_renders_in_chromium(shell, shown, tmp_path, browser):
    """The output cell as a notebook holds it: the iframe runs the page's
    script, which draws fib's frames, with no error or CSP violation."""
    shell.run_line_magic("stackwatch", f"-o {tmp_path / 'b.swt'} fib(12)")
    page, = shown
    doc = tmp_path / "output.html"
    doc.write_text(f"<!DOCTYPE html><html><body>{page}</body></html>", encoding="utf-8")
    d = open_page(browser, doc)
    d.switch_to.frame(d.find_element("tag name", "iframe"))
    try:
        drawn = d.execute_script("return Array.from(document.querySelectorAll('#chart .frame'))"
                                 ".map(function (e) { return e.dataset.name; })")
        assert "fib" in drawn, drawn[:20]
        assert "466 calls" in d.find_element("id", "summary").text   # fib(12): 465 calls, and the line
    finally:
        d.switch_to.default_content()
    check_clean(d)   # no error, CSP violation or console warning in either document
    assert sys.modules.get("stackwatch.integrations.ipython") is not None
