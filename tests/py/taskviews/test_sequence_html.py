"""The HTML sequence diagram (render/sequence.py, `export --format
sequence`) opened in headless Chromium: the lifelines' labels are text
(hostile names too), the arrows and marks are there in the order of the
events with the lanes they join, hovering a lane shows its creation
stack, and a page of 10,000 events draws bands until zoomed in. A
screenshot of each page is kept in the test's directory."""
import json

import pytest

from conftest import BROWSER_VERSIONS, check_clean, open_page
from hand_doc import DOC, HOSTILE
from stackwatch.render import formats, sequence

# The page and its writer are the same on every version.
pytestmark = pytest.mark.versions(*BROWSER_VERSIONS)


def _page(tmp_path, doc, name="t.sequence.html"):
    path = tmp_path / name
    formats.FORMATS["sequence"].write(str(path), doc)
    return path


def _drawn(driver):
    """[(kind, from lane's task name, to lane's, top y)] of the events drawn."""
    return driver.execute_script("""
        var names = Array.prototype.map.call(document.querySelectorAll('#lanes .lane'),
            function (d) { return [+d.dataset.task, d.querySelector('.name').textContent]; });
        var byTask = {}; names.forEach(function (p) { byTask[p[0]] = p[1]; });
        return Array.prototype.map.call(document.querySelectorAll('#chart g.event'), function (g) {
            var f = +g.dataset.from, t = +g.dataset.to;
            return [g.dataset.kind, f >= 0 ? byTask[f] : null, t >= 0 ? byTask[t] : null,
                    g.getBoundingClientRect().top];
        });""")


def _want(doc):
    """What the page should draw for each event: (kind, from, to): arrows
    from the creator, the task left, the waker or the sender to the task,
    a send from the task to its receiver; marks (block, exit, or no other
    task) on the task's lane."""
    return [(e["kind"], e["task"], e["other"]) if e["kind"] == "send" else (e["kind"], e["other"], e["task"])
            for e in doc["events"]]


def test_lifelines_arrows_and_hover(browser, tmp_path):
    path = _page(tmp_path, DOC)
    d = open_page(browser, path)
    labels = d.execute_script("return Array.prototype.map.call(document.querySelectorAll('#lanes .lane .name'),"
                              " function (e) { return e.textContent; })")
    assert labels == [t["name"] for t in DOC["tasks"]]
    # The hostile name is text: no element was made of it, the page's own script ran.
    assert d.execute_script("return document.querySelectorAll('#lanes b, #chart b').length") == 0
    drawn = _drawn(d)
    assert [tuple(x[:3]) for x in drawn] == _want(DOC)
    tops = [x[3] for x in drawn]
    assert tops == sorted(tops) and tops[0] < tops[-1]    # time runs down, in the events' order
    assert d.execute_script("return document.querySelectorAll('#chart .lifeline').length") == 4
    # Hover over a's lane: its creation stack, innermost first.
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    lane = d.find_elements(By.CSS_SELECTOR, "#lanes .lane")[2]
    ActionChains(d).move_to_element(lane).perform()
    tip = d.find_element(By.ID, "tip")
    assert tip.is_displayed()
    text = tip.text
    assert "worker a" in text and "creation stack" in text
    assert text.index("spawn (prog.py:7)") < text.index("driver (prog.py:30)")
    assert "blocked 20ns in 1 waits" in text      # its queue wait: from its switch out to its wake
    # Hover over the send arrow: its channel and value.
    send = d.find_elements(By.CSS_SELECTOR, "#chart g.event[data-kind=send]")[0]
    ActionChains(d).move_to_element(send).perform()
    assert "channel q" in tip.text and "value 1" in tip.text
    # The group filter keeps the two workers only.
    d.execute_script("var s = document.getElementById('group'); s.value = 'workers';"
                     "s.dispatchEvent(new Event('change'));")
    assert d.execute_script("return document.querySelectorAll('#lanes .lane').length") == 2
    d.execute_script("var s = document.getElementById('group'); s.value = '';"
                     "s.dispatchEvent(new Event('change'));")
    d.save_screenshot(str(tmp_path / "sequence.png"))
    check_clean(d)


def test_tasks_coloured_by_creation_stack(browser, tmp_path):
    """Tasks made at the same creation stack share a colour (their name's
    border and their running spans); tasks made elsewhere, or with none
    recorded, have another."""
    import copy
    doc = copy.deepcopy(DOC)
    twin = copy.deepcopy(next(t for t in doc["tasks"] if t["name"] == "worker a"))
    doc["tasks"].append({**twin, "id": 3, "name": "worker b"})   # made at worker a's stack
    doc["events"].append({**doc["events"][-1], "kind": "switch", "task": "worker b", "other": "main", "t_ns": 110})
    d = open_page(browser, _page(tmp_path, doc))
    border = dict(d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#lanes .lane'), function (l) {"
        " var n = l.querySelector('.name'); return [n.textContent, getComputedStyle(n).borderBottomColor]; })"))
    assert border["worker a"] == border["worker b"]
    assert len({border["worker a"], border[HOSTILE], border["main"]}) == 3, border
    # The running spans of a lane are in its colour.
    spans = d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#chart rect.running'), function (r) {"
        " return [+r.dataset.task, getComputedStyle(r).fill]; })")
    lane_of = {t["name"]: i for i, t in enumerate(doc["tasks"])}
    fills = {}
    for task, fill in spans:
        fills.setdefault(task, set()).add(fill)
    assert fills[lane_of["worker a"]] == fills[lane_of["worker b"]] != fills[lane_of[HOSTILE]]
    check_clean(d)


def _many(n):
    """A document of n events: 8 greenlets taking turns (each switch
    preceded by a send to the next one on every other turn)."""
    names = [f"g{i}" for i in range(8)]
    tasks = [{"id": i, "name": nm, "group": None, "kind": "greenlet", "thread": 1, "created_by": None,
              "created_t_ns": None, "creation_stack": [], "exit_t_ns": None, "outcome": None, "result": None}
             for i, nm in enumerate(names)]
    events = []
    for i in range(n):
        a, b = names[i % 8], names[(i + 1) % 8]
        kind = "send" if i % 2 else "switch"
        events.append({"kind": kind, "task": b if kind == "switch" else a, "task_id": 0,
                       "other": a if kind == "switch" else b, "channel": "c", "value": repr(i), "reason": None,
                       "t_ns": 1000 * i, "thread": 1, "function": "f", "file": "x.py", "line": i})
    return {"tasks": tasks, "events": events}


def test_ten_thousand_events_bands_then_arrows(browser, tmp_path):
    doc = _many(10_000)
    path = _page(tmp_path, doc, "many.sequence.html")
    d = open_page(browser, path)
    # Too many to draw at once: bands, and the status says so.
    assert d.execute_script("return document.querySelectorAll('#chart g.event').length") == 0
    assert d.execute_script("return document.querySelectorAll('#chart .band').length") > 8
    assert "too many to draw" in d.find_element("id", "status").text
    # Zoomed to 50 us: the 50 events in it, as arrows, in order.
    d.execute_script("stackwatchSequence.setView(2000000, 2049999)")
    drawn = _drawn(d)
    assert [tuple(x[:3]) for x in drawn] == _want({"events": doc["events"][2000:2050]})
    d.save_screenshot(str(tmp_path / "many.png"))
    check_clean(d)


def test_two_thousand_tasks_draw_the_lanes_in_view(browser, tmp_path):
    """Thousands of lanes: only those in view are drawn, and scrolling
    sideways draws the others."""
    tasks = [{"id": i, "name": f"task {i}", "group": None, "kind": "asyncio", "thread": 1, "created_by": None,
              "created_t_ns": None, "creation_stack": [], "exit_t_ns": None, "outcome": None, "result": None}
             for i in range(2000)]
    events = [{"kind": "switch", "task": f"task {(i + 1) % 2000}", "task_id": 0, "other": f"task {i}",
               "channel": None, "value": None, "reason": None, "t_ns": 100 * i, "thread": 1, "function": None,
               "file": None, "line": None} for i in range(2000)]
    d = open_page(browser, _page(tmp_path, {"tasks": tasks, "events": events}, "wide.sequence.html"))
    lanes = "return Array.prototype.map.call(document.querySelectorAll('#chart .lifeline'), " \
            "function (e) { return +e.dataset.task; })"
    first = d.execute_script(lanes)
    assert 3 <= len(first) <= 12 and min(first) == 0
    assert d.execute_script("return document.querySelectorAll('#lanes .lane').length") == 2000
    d.execute_script("var s = document.getElementById('scroll'); s.scrollLeft = 150 * 1000;"
                     "s.dispatchEvent(new Event('scroll'));")
    d.execute_script("return new Promise(function (r) { requestAnimationFrame(function () { r(); }); })")
    later = d.execute_script(lanes)
    assert 3 <= len(later) <= 12 and 995 <= min(later) <= 1001
    check_clean(d)


def test_embedded_data_round_trips(tmp_path):
    """The page's data decodes to the document's events (times, names,
    values), whatever characters they hold."""
    from conftest import page_data
    text = _page(tmp_path, DOC).read_text()
    assert "<b>bold" not in text            # no name reaches the page as markup
    data = page_data(text)
    t, times = 0, []
    for dt in data["events"]["dt"]:
        t += dt
        times.append(t)
    assert times == [e["t_ns"] for e in DOC["events"]]
    names = [x["name"] for x in data["tasks"]]
    assert [names[i] for i in data["events"]["task"]] == [e["task"] for e in DOC["events"]]
    values = [None if v < 0 else data["strings"][v] for v in data["events"]["value"]]
    assert values == [e["value"] for e in DOC["events"]]
    # The waits as stackwatch tasks counts them (hand_doc.py): a's queue
    # wait from its switch out (5 ns after its block) to its wake; main's
    # join from its switch out to its switch back in; T2's lock (a thread)
    # from its block to its wake.
    blocks = [i for i, e in enumerate(DOC["events"]) if e["kind"] == "block"]
    assert [(DOC["events"][i]["task"], data["events"]["wait"][i], data["events"]["wait_from"][i]) for i in blocks] == [
        ("T2", 10, 0), ("main", 70, 5), ("worker a", 20, 5)]
    assert json.loads(json.dumps(sequence.data(DOC, "x"))) == sequence.data(DOC, "x")


def test_a_real_greenlet_trace(browser, tmp_path):
    """`export --format sequence` of a greenlet program's trace: its lanes
    and switch arrows in the order the program logged its switches."""
    from conftest import run
    from greenlet_prog import traced
    swt, log = traced(tmp_path)
    out = tmp_path / "greenlets.sequence.html"
    r = run(["export", swt, "--format", "sequence", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    d = open_page(browser, out)
    labels = d.execute_script("return Array.prototype.map.call(document.querySelectorAll('#lanes .lane .name'),"
                              " function (e) { return e.textContent; })")
    assert labels == ["MainThread", "greenlet produce", "greenlet consume"]
    drawn = _drawn(d)
    assert [[x[2], x[1]] for x in drawn if x[0] == "switch"] == log["switches"]
    # The greenlets' creations (at their first switch in), the values
    # switch() passed (sent, received) and the consumer's exit.
    assert [list(x[:3]) for x in drawn if x[0] != "switch"] == log["events"]
    # Each greenlet's running spans are drawn on its lane.
    assert d.execute_script("return document.querySelectorAll('#chart rect.running').length") >= 3
    d.save_screenshot(str(tmp_path / "greenlets.png"))
    check_clean(d)
