"""The sequence diagram at 1,000,000 task events (issue 22: "usable at
1,000,000"), by hand (bench/README.md, "Task events"): a real program's
trace exported as the HTML page, then opened in headless Chromium.

    .venv/3.12/bin/python bench/sequence_page.py [--events N] [--keep DIR]

Eight greenlets pass a number round a ring with switch() (each switch a
switch, a send and a receive: three task events) until N task events are
recorded (`run --events tasks`). Prints,
with the load average next to each wall time: the events in the trace,
`stackwatch export FILE --format sequence` (the page's size and the
export's wall time), the page's load in Chromium (navigation until its
script has drawn: the status line is filled), and a zoom to 1/1000 of the
time span, around the middle event (stackwatchSequence.setView, timed in the page up to the
next frame). Needs greenlet, selenium and /usr/bin/chromium, chromedriver
(tests/py/conftest.py's browser).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

PROGRAM = r'''
import sys, greenlet
N = int(sys.argv[1])
ring = []
def hop(n):
    me = ring.index(greenlet.getcurrent())
    while n < N:
        n = ring[(me + 1) % len(ring)].switch(n + 1)
    main.switch(n)
main = greenlet.getcurrent()
ring.extend(greenlet.greenlet(hop) for _ in range(8))
ring[0].switch(0)
'''


def _load():
    return "load %.1f" % os.getloadavg()[0]


def _timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"bench/sequence_page.py: {' '.join(cmd)} failed: {r.stderr.strip()}")
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="task events to record (default 1,000,000)")
    p.add_argument("--keep", help="write the trace and the page here, kept (default: a temporary folder, removed); "
                   "a page already there is opened again, not made")
    a = p.parse_args()
    folder = a.keep or tempfile.mkdtemp(prefix="sw-sequence-")
    os.makedirs(folder, exist_ok=True)
    prog, swt, page = (os.path.join(folder, n) for n in ("ring.py", "ring.swt", "ring.html"))
    with open(prog, "w") as f:
        f.write(PROGRAM)
    try:
        _measure(a.events, prog, swt, page)
    finally:
        if not a.keep:
            subprocess.run(["rm", "-rf", folder])


def _measure(events, prog, swt, page):
    if os.path.exists(page):   # (--keep's folder of an earlier run: its page opened again)
        print(f"page: {page} ({os.path.getsize(page) / 1e6:.1f} MB), made before")
    else:
        _export(events, prog, swt, page)
    _browse(page)


def _export(events, prog, swt, page):
    sw = [sys.executable, "-m", "stackwatch"]
    secs = _timed(sw + ["run", "-q", "--events", "tasks", "-o", swt, prog, str(events // 3)])
    from stackwatch.tracer.task_events import read_task_events
    n = len(read_task_events(swt)["events"])
    print(f"recorded: {n:,} task events in {secs:.1f} s ({_load()})")
    secs = _timed(sw + ["export", swt, "--format", "sequence", "-o", page])
    print(f"export --format sequence: {os.path.getsize(page) / 1e6:.1f} MB page in {secs:.1f} s ({_load()})")


def _browse(page):

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    profile = tempfile.mkdtemp(prefix="sw-chromium-")
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,800", f"--user-data-dir={profile}"):
        opts.add_argument(arg)
    d = webdriver.Chrome(options=opts, service=Service(executable_path="/usr/bin/chromedriver"))
    try:
        d.set_page_load_timeout(300)
        t = time.perf_counter()
        d.get("file://" + page)
        WebDriverWait(d, 300).until(lambda d: d.find_element("id", "status").text)
        secs = time.perf_counter() - t
        print(f"page loaded and drawn in Chromium: {secs:.1f} s ({_load()}); status: "
              f"{d.find_element('id', 'status').text[:80]!r}")
        for what, view in (("1/1000 of the time around the middle event",
                            "var m = T[T.length >> 1], w = (T[T.length - 1] - T[0]) / 2000; S.setView(m - w, m + w);"),
                           ("the 50 events around the middle one",
                            "var m = T.length >> 1; S.setView(T[m - 25], T[m + 24]);")):
            ms, arrows, bands = d.execute_async_script("""
                var done = arguments[arguments.length - 1], S = stackwatchSequence, T = S.times;
                var t0 = performance.now();
                """ + view + """
                requestAnimationFrame(function () { done([performance.now() - t0,
                    document.querySelectorAll('#chart g.event').length,
                    document.querySelectorAll('#chart .band').length]); });""")
            print(f"zoom to {what}: {ms:.0f} ms to the next frame, {arrows} events drawn as arrows, "
                  f"{bands} bands ({_load()})")
    finally:
        d.quit()
        subprocess.run(["rm", "-rf", profile])


if __name__ == "__main__":
    main()
