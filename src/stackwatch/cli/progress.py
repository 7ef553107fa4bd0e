"""Progress of long conversions (`stats`, `export`) and the warning before
a big export.

Progress(total) is the callable the trace reader calls with the bytes it
has replayed so far (at most every 0.1 s); on a terminal it draws a bar
on stderr once the work has taken over a second (STACKWATCH_PROGRESS_AFTER
seconds), and nothing when stderr is not a terminal.

big_export_warning() says, before a timeline export expected over 1 GB
(STACKWATCH_WARN_BYTES bytes), how big it will be and which options would
cut it.
"""
import os
import sys
import time

# Bytes per event of the timeline exports, measured on real traces (Chrome
# 90 on the more-itertools suite, with its JSON per slice end; Perfetto 16,
# with interned names and timestamps as deltas: 15.6 on fib and json.dumps
# calls; CTF 55, its contexts and the name and file of each call in every
# entry: 54.5 on fib; tests/py/tracer/test_big_traces.py checks them on a
# real trace).
BYTES_PER_EVENT = {"perfetto": 16, "chrome": 90, "ctf": 55}
WARN_BYTES = 1 << 30


def _size(n):
    for unit, k in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


class Progress:
    def __init__(self, total, what, stream=None, after=None):
        self.total = max(int(total), 1)
        self.what = what
        self.stream = stream or sys.stderr
        self.after = float(os.environ.get("STACKWATCH_PROGRESS_AFTER", 1.0)) if after is None else after
        self.start = time.monotonic()
        self.shown = False
        self.enabled = self.stream.isatty()

    def __call__(self, done):
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        if elapsed < self.after:
            return
        frac = min(done / self.total, 1.0)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        self.stream.write(f"\r{self.what} [{bar}] {frac * 100:3.0f}% of {_size(self.total)}, {elapsed:.0f}s")
        self.stream.flush()
        self.shown = True

    def done(self):
        """Ends the bar's line (when one was drawn)."""
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def expected_bytes(fmt, events):
    """The expected size of a timeline export of `events` events, or None
    for the formats whose size does not grow with the events."""
    per = BYTES_PER_EVENT.get(fmt)
    return None if per is None else per * events


def big_export_warning(fmt, events, filtered, limit=None, cuts=None):
    """The warning line (or None) for a timeline export of `events`
    events; `filtered`: a filter is already given. cuts: the options that
    would cut it (default: export's filters)."""
    size = expected_bytes(fmt, events)
    if limit is None:
        limit = int(os.environ.get("STACKWATCH_WARN_BYTES", WARN_BYTES))
    if size is None or size <= limit:
        return None
    if cuts is None:
        cuts = "--min-duration 10us," + ("" if filtered else " --thread, --start/--stop,") + " --max-depth or --exclude"
    return (f"warning: the {fmt} export of {events} events will be about {_size(size)}; "
            f"{cuts} would cut it, and --format html or pprof "
            f"gives a flame graph of the same trace in a few MB")
