"""The HTML flame graph (stackwatch.render.flamegraph, `--format html`): the page is
one self-contained file whose embedded data are the profiler's call trees
exactly, whatever the names hold; and, in real headless Chromium, it
renders without errors, the tooltip shows name, file, line, source line,
samples, time and share, clicking zooms, search highlights, the thread
selector and native frames work.

The browser tests run on the Python versions in conftest.BROWSER_VERSIONS (the page
does not depend on the interpreter; the data do, and the data tests run
everywhere), or on every version with STACKWATCH_BROWSER_TESTS=all.
"""
import base64
import hashlib
import json
import os
import re
import stat
import threading
import time
from decimal import ROUND_HALF_UP, Decimal

import pytest

from conftest import (SAMPLER, check_clean, needs_sampler, nested, open_page, page_data, parse_page,
                      profile_summary, run, tree_nodes, write)
from stackwatch.render import flamegraph

if SAMPLER:
    from stackwatch.profiler import Profiler



# ---- reading a page back (parse_page, page_data: conftest.py) ----

def without_source(tree):
    out = {k: v for k, v in tree.items() if k not in ("source", "children")}
    out["children"] = [without_source(c) for c in tree["children"]]
    return out


def js_fixed(x, digits=2):
    """Number.prototype.toFixed: the exact binary value, ties up."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def hot_part():
    spin(0.004)


def cold_part():
    spin(0.001)


def synthetic(name, children=(), count=1, filename="/src/app.py", line=1, native=False):
    """A tree node as Profiler.tree() makes it; count/time add up."""
    children = list(children)
    total = count + sum(c["count"] for c in children)
    node = {"name": name, "filename": filename, "line": line, "count": total, "self": count,
            "time_ns": total * 1000, "self_time_ns": count * 1000, "children": children}
    if native:
        node["native"] = True
    return node


def root_of(*children):
    return synthetic("<root>", children, count=0, filename="", line=0)


# ---- the data and the page, without a browser ----

@needs_sampler
def test_data_are_the_profilers_trees(tmp_path):
    stop = threading.Event()

    def background():
        while not stop.is_set():
            cold_part()

    t = threading.Thread(target=background, name="bg")
    with Profiler(interval="500us") as p:
        t.start()
        for _ in range(40):
            hot_part()
            cold_part()
        stop.set()
        t.join()
    out = tmp_path / "p.html"
    p.write(out, "html")
    text = out.read_text(encoding="utf-8")
    data = page_data(text)
    threads = p.threads()
    assert [d["thread_id"] for d in data["threads"]] == [t["thread_id"] for t in threads]
    assert any(d["name"] == f"bg ({t.ident})" for d in data["threads"]), [d["name"] for d in data["threads"]]
    for d in data["threads"]:
        tree = nested(data, d)
        assert without_source(tree) == p.tree(d["thread_id"])   # node for node
        assert d["samples"] == tree["count"]
    merged = p.tree()
    assert sum(d["samples"] for d in data["threads"]) == merged["count"] == p.stats()["stored"]
    assert sum(nested(data, d)["time_ns"] for d in data["threads"]) == merged["time_ns"]
    assert data["interval_ns"] == 500_000 and data["title"] == "p.html"
    # the source line of each frame is the text of its line
    nodes = [n for d in data["threads"] for n in tree_nodes(nested(data, d))]
    hot = [n for n in nodes if n["name"] == "hot_part"]
    assert hot and all(n["source"] == "def hot_part():" and n["filename"] == __file__ for n in hot)
    assert any(n["name"] == "spin" and n["source"] == "def spin(seconds):" for n in nodes)


@needs_sampler
def test_write_while_running(tmp_path):
    with Profiler(interval="500us") as p:
        spin(0.1)
        p.write(tmp_path / "a.html", "html")
        spin(0.02)
    data = page_data((tmp_path / "a.html").read_text(encoding="utf-8"))
    assert 0 < sum(d["samples"] for d in data["threads"]) <= p.tree()["count"]


NASTY = [
    "</script><script>window.__pwned = 1</script>",
    "</SCRIPT ><!-- <script>",
    "a & b &amp; \"q\" 'q' <i>x</i>",
    "\u2028line\u2029sep \u00e4\u00f6 \u4e2d\u6587 \U0001f525",
    "/*STACKWATCH_DATA*/ <!--STACKWATCH_TITLE--> STACKWATCH_SCRIPT_HASH",
    "",
]


def nasty_threads():
    kids = [synthetic(n, filename=f"/weird/{n}.py", line=i + 1) for i, n in enumerate(NASTY)]
    kids.append(synthetic("odd_file", filename="/tmp/\udcff\udcfe.py", line=3))
    return [{"name": "T </script> \u00e4", "thread_id": 7, "tree": root_of(*kids)}]


def test_names_cannot_break_the_page():
    title = "</title><script>x</script> & \u00e4 \udcff"
    text = flamegraph.document(nasty_threads(), title=title)
    page = parse_page(text)
    # exactly the page's own two scripts: the data and the program
    assert [a.get("id") for a, _ in page.scripts] == ["stackwatch-data", None]
    assert page.title.startswith("</title><script>x</script> & \u00e4 ")
    # the data block holds no "<", ">" or "&" at all, and only ASCII
    body = page.scripts[0][1]
    assert not set("<>&") & set(body) and body.isascii()
    data = json.loads(body)
    names = [n["name"] for n in tree_nodes(nested(data, data["threads"][0]))]
    assert set(NASTY) | {"odd_file"} <= set(names)
    files = {n["filename"] for n in tree_nodes(nested(data, data["threads"][0]))}
    assert "/tmp/\udcff\udcfe.py" in files
    assert data["threads"][0]["name"] == "T </script> \u00e4"
    assert data["title"] == title


def test_page_is_self_contained():
    text = flamegraph.document(nasty_threads())
    page = parse_page(text)
    program = page.scripts[1][1]
    # The Content-Security-Policy forbids every fetch and allows only the
    # page's own script, by its hash.
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', text).group(1)
    digest = base64.b64encode(hashlib.sha256(program.encode("utf-8")).digest()).decode()
    assert "default-src 'none'" in csp and f"script-src 'sha256-{digest}'" in csp, csp
    # nothing refers to another file or the network
    outside = text.replace(page.scripts[0][1], "")
    assert not re.search(r"\b(src|href)\s*=|url\(|@import|https?:|<link|<iframe|fetch\(|XMLHttpRequest", outside)


def test_empty_profile_and_deep_stacks():
    assert page_data(flamegraph.document([]))["threads"] == []
    # stacks far deeper than json or a recursive walk could take
    deep = synthetic("leaf", count=5)
    for i in range(20000):
        deep = synthetic(f"f{i}", [deep], count=0, line=i + 1)
    data = page_data(flamegraph.document([{"name": "deep", "thread_id": 1, "tree": root_of(deep)}]))
    flat = data["threads"][0]["nodes"]
    assert len(flat) == 6 * 20002
    assert flat[-6:] == [20000, flat[-5], 5, 5, 5000, 5000]
    assert flat[:6] == [-1, -1, 5, 0, 5000, 0]


def test_source_lines(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("x = 1\n    def  f(a):   \n" + "y = '" + "z" * 500 + "'\n", encoding="utf-8")
    assert flamegraph.source_line(str(src), 2) == "def  f(a):"
    long = flamegraph.source_line(str(src), 3)
    assert len(long) == flamegraph.MAX_SOURCE_CHARS and long.endswith("\u2026")
    assert flamegraph.source_line(str(src), 99) == ""
    assert flamegraph.source_line(str(src), 0) == ""
    assert flamegraph.source_line("<string>", 1) == ""
    assert flamegraph.source_line(str(tmp_path / "missing.py"), 1) == ""
    assert flamegraph.source_line("bad\0name", 1) == ""
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert flamegraph.source_line(str(fifo), 1) == ""    # returns at once, never blocks
    # native frames are never looked up
    data = flamegraph.data([{"name": "t", "thread_id": 1, "tree": root_of(
        synthetic("py", filename=str(src), line=2), synthetic("nat", filename=str(src), line=2, native=True))}])
    assert sorted((data["strings"][f[0]], data["strings"][f[3]], f[4]) for f in data["frames"]) == [
        ("nat", "", 1), ("py", "def  f(a):", 0)]


PROGRAM = '''\
import threading, time

def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

def hot_leaf():
    spin(0.004)

def cold_leaf():
    spin(0.001)

def branch():
    for _ in range(70):
        hot_leaf()
        cold_leaf()

def worker():
    spin(0.1)

t = threading.Thread(target=worker, name="w\u00f6rker<&>")
t.start()
branch()
t.join()
'''


def profile_program(tmp_path, *extra, output="prog.html"):
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", *extra, "-o", output, script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    program_stderr, _, wrote = profile_summary(r.stderr)
    assert program_stderr == ""
    m = re.fullmatch(r"stackwatch: wrote (.+) \((?:\w+ mode, )?(\d+) samples of 2 threads(, \d+ failed reads of a stack)?\)\n",
                     wrote)
    assert m, r.stderr
    return m.group(1), int(m.group(2))


@needs_sampler
@pytest.mark.timing
@pytest.mark.slow
@pytest.mark.versions("3.12")   # (the HTML writer: the same on every version)
def test_cli_html_by_suffix_and_by_format(tmp_path):
    path, samples = profile_program(tmp_path)
    assert path == str(tmp_path / "prog.html")
    text = (tmp_path / "prog.html").read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    data = page_data(text)
    assert sum(d["samples"] for d in data["threads"]) == samples
    names = {n["name"] for d in data["threads"] for n in tree_nodes(nested(data, d))}
    assert {"hot_leaf", "cold_leaf", "branch", "worker"} <= names
    here = os.path.dirname(flamegraph.__file__)
    assert not [n for d in data["threads"] for n in tree_nodes(nested(data, d)) if n["filename"].startswith(here)]
    path, _ = profile_program(tmp_path, "--format", "html", output="p.out")
    assert (tmp_path / "p.out").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    # without -o: stackwatch-PID.flamegraph.html
    script = str(tmp_path / "prog.py")
    r = run(["profile", "-q", "--format", "html", script], cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    made = [f for f in os.listdir(tmp_path) if re.fullmatch(r"stackwatch-\d+\.flamegraph\.html", f)]
    assert len(made) == 1, os.listdir(tmp_path)


# ---- in headless Chromium (the browser fixture, open_page, check_clean: conftest.py) ----

def drawn(driver, cls=""):
    """The names of the frames drawn (with class `cls`)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#chart .frame' + arguments[0]))"
        ".map(function (e) { return e.dataset.name; })", "." + cls if cls else "")


def frames(driver, name):
    """The elements of the frames drawn for function `name`."""
    return driver.execute_script(
        "var name = arguments[0]; return Array.from(document.querySelectorAll('#chart .frame'))"
        ".filter(function (e) { return e.dataset.name === name; })", name)


def width(el):
    return el.rect["width"]


def chart_width(driver):
    return driver.execute_script("return document.getElementById('chart').clientWidth")


def hover(driver, el):
    from selenium.webdriver.common.action_chains import ActionChains
    ActionChains(driver).move_to_element(el).perform()
    tip = driver.find_element("id", "tooltip")
    assert tip.is_displayed()
    return tip.text


@needs_sampler
@pytest.mark.timing
@pytest.mark.slow
def test_browser_renders_hovers_zooms_and_searches(tmp_path, browser):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    _, samples = profile_program(tmp_path)
    page = tmp_path / "prog.html"
    data = page_data(page.read_text(encoding="utf-8"))
    d = open_page(browser, page)
    check_clean(d)

    # everything drawn, the totals are the profile's
    names = set(drawn(d))
    assert {"all threads", "<module>", "branch", "hot_leaf", "cold_leaf", "spin", "worker"} <= names, names
    totals = d.execute_script("return window.stackwatchFlame.totals(0)")
    trees = [nested(data, t) for t in data["threads"]]
    assert totals == {"count": samples, "time": sum(t["time_ns"] for t in trees)}
    assert f"{samples} samples of 2 threads" in d.find_element("id", "summary").text

    # hovering hot_leaf: name, file:line, source line, samples, time, share
    node, = [n for t in trees for n in tree_nodes(t) if n["name"] == "hot_leaf"]
    line = PROGRAM.splitlines().index("def hot_leaf():") + 1
    el, = frames(d, "hot_leaf")
    text = hover(d, el)
    assert text.splitlines()[0] == "hot_leaf"
    assert f"{tmp_path / 'prog.py'}:{line}" in text
    assert "def hot_leaf():" in text
    assert f"Samples {node['count']} (self {node['self']})" in text
    assert f"Time {js_fixed(node['time_ns'] / 1e6)} ms" in text
    share = js_fixed(node["time_ns"] / totals["time"] * 100)
    assert f"Share {share}% of all wall time" in text, text
    assert 30 < float(share) < 95, share

    # click zooms: the frame spans the whole chart, its ancestors too; Esc goes back
    full = chart_width(d)
    assert width(el) < 0.97 * full
    el.click()
    el, = frames(d, "hot_leaf")
    assert abs(width(el) - full) < 1, (width(el), full)
    assert not frames(d, "cold_leaf") and not frames(d, "worker")
    assert d.find_element("id", "reset").is_enabled()
    spin_el, = frames(d, "spin")
    inner, = [c for c in node["children"] if c["name"] == "spin"]
    assert abs(width(spin_el) - full * inner["time_ns"] / node["time_ns"]) < 1
    assert f"In zoom {js_fixed(inner['time_ns'] / node['time_ns'] * 100)}% of hot_leaf" in hover(d, spin_el)
    ActionChains(d).send_keys(Keys.ESCAPE).perform()
    el, = frames(d, "hot_leaf")
    assert width(el) < 0.97 * full and frames(d, "worker")
    assert not d.find_element("id", "reset").is_enabled()

    # search: every cold_leaf frame and only those highlighted, with its share
    box = d.find_element("id", "search")
    box.send_keys("cold_leaf")
    assert set(drawn(d, "match")) == {"cold_leaf"}
    cold, = [n for t in trees for n in tree_nodes(t) if n["name"] == "cold_leaf"]
    assert d.find_element("id", "matched").text == \
        f"matched {js_fixed(cold['time_ns'] / totals['time'] * 100)}% of wall time (1 frame)"
    box.clear()
    box.send_keys(" ")      # an empty query clears the highlight
    assert drawn(d, "match") == []

    # one thread at a time; its name (unicode, "<&>") shown verbatim
    sel = Select(d.find_element("id", "thread"))
    label, = [o.text for o in sel.options if o.text.startswith("w\u00f6rker<&>")]
    sel.select_by_visible_text(label)
    names = set(drawn(d))
    assert "worker" in names and "branch" not in names and "hot_leaf" not in names
    root, = drawn(d, "root")
    assert root.startswith("w\u00f6rker<&> (")
    # widths by samples instead of time
    Select(d.find_element("id", "weight")).select_by_value("count")
    worker_tree, = [t for t, th in zip(trees, data["threads"]) if th["name"].startswith("w\u00f6rker")]
    spin_node, = [n for n in tree_nodes(worker_tree) if n["name"] == "spin"]
    spin_el, = frames(d, "spin")
    assert f"{js_fixed(spin_node['count'] / worker_tree['count'] * 100)}% of this thread's samples" in hover(d, spin_el)
    check_clean(d)


def test_browser_native_frames_and_odd_names(tmp_path, browser):
    py = synthetic("py_caller", [synthetic("native_call", [synthetic("py_callback", count=2)],
                                           count=3, filename="/usr/lib/libfoo.so", line=0, native=True)],
                   count=1, filename="/src/app.py", line=10)
    tree = root_of(py, *[synthetic(n, count=2, filename=f"/weird/{i}.py") for i, n in enumerate(NASTY) if n])
    page = tmp_path / "odd.html"
    page.write_text(flamegraph.document([{"name": "T", "thread_id": 1, "tree": tree}], title="</title>"),
                    encoding="utf-8")
    d = open_page(browser, page)
    check_clean(d)
    assert d.execute_script("return window.__pwned") is None
    assert d.title.startswith("</title>")
    names = set(drawn(d))
    assert {n for n in NASTY if n} <= names, names
    nat, = frames(d, "native_call")
    assert "native" in nat.get_attribute("class").split()
    assert nat.value_of_css_property("font-style") == "italic"
    text = hover(d, nat)
    assert text.splitlines()[0] == "native_call native" and text.splitlines()[1] == "/usr/lib/libfoo.so"
    for name in ("py_caller", "py_callback"):
        el, = frames(d, name)
        assert "native" not in el.get_attribute("class").split()
        assert "native" not in hover(d, el).splitlines()[0]
    assert nat.value_of_css_property("background-color") != frames(d, "py_caller")[0].value_of_css_property(
        "background-color")
    check_clean(d)


def test_browser_deep_stack(tmp_path, browser):
    deep = synthetic("bottom", count=1)
    for i in range(3000):
        deep = synthetic(f"level{i}", [deep], count=0, line=i + 1)
    page = tmp_path / "deep.html"
    page.write_text(flamegraph.document([{"name": "T", "thread_id": 1, "tree": root_of(deep)}]), encoding="utf-8")
    d = open_page(browser, page)
    check_clean(d)
    assert len(drawn(d)) == 3002
    el, = frames(d, "bottom")
    assert abs(width(el) - chart_width(d)) < 1


@needs_sampler
@pytest.mark.slow
def test_browser_default_profile_output(tmp_path, browser):
    """`stackwatch profile prog.py` with no -o or --format: the page it
    leaves (stackwatch-PID.flamegraph.html) is the flame graph, drawn with
    the program's functions and no error. A screenshot is kept beside it
    (default.png) to look at."""
    script = write(tmp_path / "prog.py", PROGRAM)
    r = run(["profile", script], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _, rows, wrote = profile_summary(r.stderr)
    page, = [f for f in os.listdir(tmp_path) if re.fullmatch(r"stackwatch-\d+\.flamegraph\.html", f)]
    assert wrote.startswith(f"stackwatch: wrote {tmp_path / page} (")
    assert rows[0][4].startswith("spin  (")
    d = open_page(browser, tmp_path / page)
    check_clean(d)
    assert {"all threads", "<module>", "branch", "hot_leaf", "cold_leaf", "spin", "worker"} <= set(drawn(d))
    hot, = frames(d, "hot_leaf")
    cold, = frames(d, "cold_leaf")
    assert width(hot) > width(cold)     # 280 ms against 70 ms
    d.save_screenshot(str(tmp_path / "default.png"))
    assert (tmp_path / "default.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
