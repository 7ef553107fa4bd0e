"""The speedscope exports read by speedscope itself: the app from npm
(pinned, fetched into build/npm by `make deps`), served on loopback and
driven in headless Chromium, loads the export of an exact trace and of a
sampled profile, opens on the main thread and draws it; both files also
validate against the file-format schema that ships with the app."""
import functools
import http.server
import json
import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "py"))
from conftest import SAMPLER, browser, missing, needs_module, run, write  # noqa: E402,F401  (tests/py/conftest.py; browser: a fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELEASE = os.path.join(ROOT, "build", "npm", "node_modules", "speedscope", "dist", "release")

pytestmark = [pytest.mark.slow]

PROGRAM = '''
import threading, time

def leaf(n):
    return sum(i * i for i in range(n))

def work():
    for _ in range(40):
        leaf(20000)

t = threading.Thread(target=time.sleep, args=(0.3,), name="sleeper")
t.start()
work()
t.join()
'''


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{kind: path} of the speedscope exports of a trace and a profile of
    PROGRAM, in a directory served with the app."""
    if not os.path.exists(os.path.join(RELEASE, "index.html")):
        missing("the speedscope app is not in build/npm (make deps fetches it with npm)")
    d = tmp_path_factory.mktemp("speedscope")
    prog = write(d / "prog.py", PROGRAM)
    out = {}
    r = run(["run", "-q", "-o", str(d / "t.swt"), str(prog)])
    assert r.returncode == 0, r.stderr
    r = run(["export", str(d / "t.swt"), "-o", str(d / "trace.speedscope.json")])
    assert r.returncode == 0, r.stderr
    out["trace"] = d / "trace.speedscope.json"
    if SAMPLER:
        r = run(["profile", "-q", "--interval", "1ms", "-o", str(d / "profile.speedscope.json"), str(prog)])
        assert r.returncode == 0, r.stderr
        out["profile"] = d / "profile.speedscope.json"
    return d, out


@pytest.fixture(scope="module")
def server(exports):
    """An HTTP server on loopback: /app/ is speedscope's release folder, /
    the exports."""
    d, _ = exports
    os.symlink(RELEASE, d / "app")
    handler = functools.partial(_QuietHandler, directory=str(d))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    th.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.parametrize("kind", ["trace", "profile"])
@pytest.mark.versions("3.11")   # the exporter's JSON: the same on every version
def test_exports_validate_against_speedscope_schema(exports, kind):
    jsonschema = needs_module("jsonschema", "jsonschema is not installed (scripts/venv.sh installs it)")
    _, out = exports
    if kind not in out:
        pytest.skip("the sampling profiler does not support this Python")
    with open(os.path.join(RELEASE, "file-format-schema.json")) as f:
        schema = json.load(f)
    doc = json.loads(out[kind].read_text())
    jsonschema.validate(doc, schema)   # raises with the first mismatch
    assert len(doc["profiles"]) == 2   # MainThread and the sleeper


@pytest.mark.parametrize("kind", ["trace", "profile"])
def test_speedscope_app_loads_and_draws_the_export(exports, server, browser, kind):
    _, out = exports
    if kind not in out:
        pytest.skip("the sampling profiler does not support this Python")
    name = out[kind].name
    browser.get("about:blank")   # (a new hash alone would not reload the app)
    browser.get_log("browser")
    browser.get(f"{server}/app/index.html#profileURL={server}/{name}")
    deadline = time.monotonic() + 30
    title = ""
    while time.monotonic() < deadline:
        title = browser.title
        if title == f"{name} - speedscope":
            break
        time.sleep(0.1)
    assert title == f"{name} - speedscope", title
    # Its toolbar names the profile it opened: the main thread, not the
    # sleeper that comes first in the file.
    body = browser.find_element("tag name", "body").text
    assert "MainThread" in body and "sleeper" not in body, body[:500]
    assert "went wrong" not in body.lower() and "error" not in body.lower(), body[:500]
    # Its flame chart is drawn on canvases with a size.
    sizes = browser.execute_script(
        "return Array.from(document.querySelectorAll('canvas')).map(c => c.width * c.height)")
    assert sizes and max(sizes) > 0, sizes
    logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert logs == [], logs
