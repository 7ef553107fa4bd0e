"""What the sections of `make bench` share (bench/run.py, bench/profilers.py,
bench/dispatch.py): rounds of alternating runs capped by time per cell, and
tables printed a row at a time, as soon as each row is measured.

A cell (one configuration on one workload) gets at least ``min_rounds``
runs and at most ``max_rounds``; in between it runs again only while the
time it has taken so far plus the mean time of one of its runs stays within
``budget`` seconds. So a configuration that slows the program 14x gets its
one or two runs, and a fast one keeps enough runs for a stable median. The
number of runs each cell got is printed in the table ("r7").
"""
import math
import statistics
import sys
import time


class Rounds:
    """How many alternating runs a cell gets: min_rounds .. max_rounds,
    within budget seconds (the whole process's time of its runs)."""

    def __init__(self, min_rounds, max_rounds, budget):
        self.min_rounds = max(1, min(min_rounds, max_rounds))
        self.max_rounds = max_rounds
        self.budget = budget

    def describe(self):
        if self.min_rounds == self.max_rounds:
            return f"{self.max_rounds} runs per cell"
        return (f"{self.min_rounds}-{self.max_rounds} runs per cell, more while a cell's runs "
                f"fit in {self.budget:g} s")

    def as_dict(self):
        return {"min_rounds": self.min_rounds, "max_rounds": self.max_rounds, "budget_seconds": self.budget}


def alternate(labels, run, rounds):
    """Runs run(label) for every label in rounds: each round runs every
    label that still wants a run, in an order rotated every round (A B C,
    B C A, ...), so that slow drifts of the machine hit all of them alike.
    A label stops after its second failed run (a result dict with "error"):
    one that cannot run at all costs two runs, a passing failure does not
    take the cell with it. Returns {label: [result, ...]}."""
    runs = {c: [] for c in labels}
    spent = {c: 0.0 for c in labels}

    def wants(c):
        n = len(runs[c])
        if sum("error" in r for r in runs[c]) >= 2:
            return False
        if n < rounds.min_rounds:
            return True
        if n >= rounds.max_rounds:
            return False
        return spent[c] + spent[c] / n <= rounds.budget

    for r in range(rounds.max_rounds):
        k = r % len(labels)
        todo = [c for c in labels[k:] + labels[:k] if wants(c)]
        if not todo:
            break
        for c in todo:
            t0 = time.perf_counter()
            runs[c].append(run(c))
            spent[c] += time.perf_counter() - t0
    return runs


def median_seconds(runs, key="seconds"):
    vals = [r[key] for r in runs if "error" not in r and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt_ratio(x):
    if x is None:
        return "n/a"
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def geomean(vals):
    vals = [v for v in vals if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


class StreamTable:
    """A table printed as it is filled: header at once, then each row as
    soon as it is added (stdout flushed), then a closing row and the
    footnotes. Columns have fixed widths (at least `width`, or the header's),
    so later rows line up with earlier ones; a longer cell just widens its
    row. n/a reasons become footnotes: mark(reason) -> "n/a[k]"."""

    def __init__(self, head, width=12, first_width=24, out=None):
        """width: of every column after the first, or a list of them."""
        self.head = list(head)
        widths = width if isinstance(width, (list, tuple)) else [width] * (len(self.head) - 1)
        self.widths = [max(first_width, len(self.head[0]))] + [max(w, len(h)) for w, h in zip(widths, self.head[1:])]
        self.out = out or sys.stdout
        self.reasons = []
        self.rows = []

    def mark(self, reason):
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"n/a[{self.reasons.index(reason) + 1}]"

    def _fmt(self, cells):
        return "  ".join(str(c).ljust(self.widths[i]) if i == 0 else str(c).rjust(self.widths[i])
                         for i, c in enumerate(cells)).rstrip()

    def _print(self, text):
        print(text, file=self.out, flush=True)

    def start(self):
        self._print(self._fmt(self.head))
        self._print(self.rule())

    def rule(self):
        return "  ".join("-" * w for w in self.widths)

    def row(self, cells):
        self.rows.append(list(cells))
        self._print(self._fmt(cells))

    def finish(self, closing=None):
        if closing:
            self._print(self.rule())
            self._print(self._fmt(closing))
        for i, r in enumerate(self.reasons):
            self._print(f"[{i + 1}] {r}")
