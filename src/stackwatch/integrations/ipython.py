"""The IPython / Jupyter magics: `%load_ext stackwatch`, then

    %stackwatch [options] statement        trace (or profile) one line
    %%stackwatch [options]                 ... the whole cell
    options: -p/--profile   sample the stacks instead of tracing every call
             -i/--interval  the profile's sampling interval (default 1ms)
             -o/--output FILE  also keep the trace (.swt, default: a file in the
                            current directory) or write the profile (any
                            profile format, by its name: .html, .json, .swprof...)
             -q/--quiet     no inline flame graph (the summary only)

The code runs in the user's namespace, as %time runs it (a line's
expression value is returned). Afterwards the magic shows the flame graph
inline (the HTML page of stackwatch.render.flamegraph inside an iframe's
srcdoc, so that its script runs in the notebook's output) and prints a
short summary: the top functions by own time. A trace's flame graph is
its exact call trees (Trace.trees(): widths are time, counts are calls). Under a running tracing session (`stackwatch run -m
ipython`) a traced cell is a region of that trace instead.

Nothing of stackwatch is loaded until the extension is (its entry,
stackwatch.load_ipython_extension, imports this module) and nothing native
until a magic runs.
"""
import html
import itertools
import os
import re
import shlex
import time

_counter = itertools.count(1)
_VALUED = {"-o": "output", "--output": "output", "-i": "interval", "--interval": "interval"}
_FLAGS = {"-p": "profile", "--profile": "profile", "-q": "quiet", "--quiet": "quiet"}


def load(ipython):
    """Registers %stackwatch and %%stackwatch in the shell `ipython`."""
    def magic(line, cell=None):
        return run_magic(ipython, line, cell)
    magic.__doc__ = __doc__
    ipython.register_magic_function(magic, magic_kind="line_cell", magic_name="stackwatch")


class UsageError(Exception):
    """A bad option (shown by IPython as one line)."""


def parse(line):
    """(options dict, the statement) of a magic's line: options first, then
    everything after them (or after "--") verbatim."""
    opts = {"output": None, "interval": "1ms", "profile": False, "quiet": False}
    pos = 0
    while True:
        m = re.compile(r"\s*(\S+)").match(line, pos)
        if not m or not m.group(1).startswith("-"):
            break
        word, pos = m.group(1), m.end()
        if word == "--":
            break
        name, eq, value = word.partition("=")
        if name in _FLAGS and not eq:
            opts[_FLAGS[name]] = True
        elif name in _VALUED:
            if not eq:
                v = re.compile(r"\s*(\S+)").match(line, pos)
                if not v:
                    raise UsageError(f"{name} needs a value")
                value, pos = v.group(1), v.end()
            opts[_VALUED[name]] = shlex.split(value)[0] if value else value
        else:
            raise UsageError(f"unknown option {word} (known: -p/--profile, -i/--interval, -o/--output, "
                             "-q/--quiet)")
    return opts, line[pos:].strip()


def run_magic(ipython, line, cell):
    from IPython.core.error import UsageError as IPythonUsageError
    try:
        opts, stmt = parse(line)
    except UsageError as e:
        raise IPythonUsageError(f"%stackwatch: {e}") from None
    if cell is not None:
        if stmt:
            raise IPythonUsageError(f"%%stackwatch: the cell is the code; {stmt!r} after the options is not "
                                    "an option")
        source, mode = ipython.transform_cell(cell), "exec"
    else:
        if not stmt:
            raise IPythonUsageError("%stackwatch: give a statement (or use %%stackwatch for a cell)")
        source = ipython.transform_cell(stmt)
        try:
            compile(source, "<stackwatch>", "eval")
            mode = "eval"
        except SyntaxError:
            mode = "exec"
    n = next(_counter)
    code = compile(source, _filename(ipython, source, n), mode)
    try:
        session = (_Profile if opts["profile"] else _Trace)(opts, n)
    except (OSError, ValueError, RuntimeError) as e:
        raise IPythonUsageError(f"%stackwatch: {e}") from None
    result = error = None
    namespace = ipython.user_ns    # (a property: read before the session starts)
    session.start()
    try:
        result = eval(code, namespace)   # noqa: S307 - the user's own cell, as %time runs it
    except BaseException as e:   # shown after the results, then raised to IPython
        error = e
    finally:
        session.stop()
    show(session.summary(), None if opts["quiet"] else session.page())
    if error is not None:
        raise error
    return result if mode == "eval" else None


def _filename(ipython, source, n):
    """A file name for the cell that linecache knows (its source lines in
    the flame graph): IPython's own cache of cells where it has one."""
    try:
        return ipython.compile.cache(source, number=n)
    except Exception:
        return f"<stackwatch cell {n}>"


def show(summary, page):
    """Displays the page (inline, in an iframe) and prints the summary."""
    if page is not None:
        from IPython.display import HTML, display
        display(HTML(iframe(page)))
    print(summary)


def iframe(page):
    """The HTML of an iframe whose document is `page` (srcdoc: the page's
    own script runs, under its own Content-Security-Policy), in a div."""
    return (f'<div class="stackwatch"><iframe srcdoc="{html.escape(page, quote=True)}" style="width: 100%; '
            'height: 520px; border: 1px solid #ccc" sandbox="allow-scripts"></iframe></div>')


def _fmt_ns(ns):
    for unit, div in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns} ns"


def _table(title, rows):
    """rows: (calls or samples, total ns, own ns, where), biggest own first."""
    out = [title, f"{'own':>10} {'total':>10} {'count':>9}  function"]
    for count, total, own, where in rows:
        out.append(f"{_fmt_ns(own):>10} {_fmt_ns(total):>10} {count:>9}  {where}")
    return "\n".join(out)


class _Trace:
    """Every call of the code, into a trace file (or a region of the
    running trace)."""

    def __init__(self, opts, n):
        from ..tracer import session
        self.session = session
        self.nested = session.is_tracing()
        self.path = opts["output"] or f"stackwatch-ipython-{os.getpid()}-{n}.swt"
        self.label = f"cell {n}"
        self.summary_ = None
        if not self.nested:
            with open(self.path, "ab"):   # a clear error before the code runs
                pass

    def start(self):
        if self.nested:
            from ..tracer import regions
            regions.region_begin(self.label)
        else:
            self.session.start(self.path, meta={"command": "ipython"})
        self.t0 = time.perf_counter_ns()

    def stop(self):
        self.wall = time.perf_counter_ns() - self.t0
        if self.nested:
            from ..tracer import regions
            regions.region_end()
        elif self.session.is_tracing():
            self.summary_ = self.session.stop()

    def summary(self):
        if self.nested:
            return (f"stackwatch: {self.label} is a region of the running trace "
                    f"({_fmt_ns(self.wall)} wall)")
        from ..tracer.tracefile import Trace
        t = Trace(self.path)
        self.trace = t
        s = self.summary_
        rows = {}
        for r in t.stats():
            c = t.codes.get(r.code)
            where = f"{c.qualname}  ({os.path.basename(c.filename)}:{c.firstlineno})" if c else f"<code {r.code}>"
            calls, total, own = rows.get(where, (0, 0, 0))
            rows[where] = (calls + r.calls, total + r.total_ns, own + r.own_ns)
        top = sorted(((v[0], v[1], v[2], k) for k, v in rows.items()), key=lambda r: -r[2])[:10]
        head = (f"stackwatch: traced {s.events if s else '?'} events in {_fmt_ns(self.wall)} wall into "
                f"{self.path}" + (f" (error: {s.error})" if s and s.error else ""))
        return head + "\n" + _table("top functions by own time:", top) if top else head

    def page(self):
        if self.nested:
            return None
        from ..render import formats
        t = getattr(self, "trace", None)
        if t is None:
            from ..tracer.tracefile import Trace
            t = self.trace = Trace(self.path)
        return formats.html_document(t.trees(), f"%stackwatch {self.label}")   # exact: calls and their times



class _Profile:
    """The statistical profiler around the code."""

    def __init__(self, opts, n):
        from ..profiler import Profiler
        from ..render import formats
        self.output = opts["output"]
        self.fmt = None
        if self.output:
            self.fmt = formats.of_output(self.output, formats.TREES, formats.PROFILES)
        self.label = f"cell {n}"
        self.p = Profiler(interval=opts["interval"], maxlen=None if self.fmt == "stackwatch" else 1)

    def start(self):
        self.t0 = time.perf_counter_ns()
        self.p.start()

    def stop(self):
        self.p.stop()
        self.wall = time.perf_counter_ns() - self.t0
        if self.output:
            self.p.write(self.output, self.fmt)

    def summary(self):
        from ..profiler import CallTree, merge, waiting_note, waiting_threads
        # Threads that only waited (IPython's history thread, idle pool
        # threads) would crowd the code's functions out of the table.
        waited = waiting_threads(self.p.threads())
        skip = {t["thread_id"] for t in waited}
        tree = merge(*(CallTree(t) for _, tid, t in self.p._trees().threads if tid not in skip)).tree()
        rows = {}
        todo = [(tree, frozenset())]
        while todo:
            n, above = todo.pop()
            key = f"{n['name']}  ({os.path.basename(n['filename'])}:{n['line']})"
            if n["name"] != "<root>":
                count, total, own = rows.get(key, (0, 0, 0))
                # total: once per stack even when the function recurses
                rows[key] = (count + n["self"], total + (0 if key in above else n["time_ns"]),
                             own + n["self_time_ns"])
            todo.extend((c, above | {key}) for c in n["children"])
        top = sorted(((v[0], v[1], v[2], k) for k, v in rows.items()), key=lambda r: -r[2])[:10]
        head = (f"stackwatch: {tree['count']} samples in {_fmt_ns(self.wall)} wall"
                + (f", written to {self.output}" if self.output else ""))
        if not tree["count"]:
            return head + " (the code ran shorter than the sampling interval)"
        note = waiting_note(waited)
        return (head + "\n" + _table("top functions by own time (count: samples ending there):", top)
                + (f"\n{note}" if note else ""))

    def page(self):
        from ..render import formats
        return formats.html_document(self.p._trees(), f"%stackwatch -p {self.label}")
