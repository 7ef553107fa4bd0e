"""`stackwatch top PID [--once] [--rate HZ]`: a live view, like top, of
where a running Python process spends its time, read from outside by the
sampler of `record --pid`: per function its own and total share of the
samples over the last refresh window (one second), sorted by own share.
Keys: o / t sort by own / total, n by name, a cycles the thread shown
(all threads, then each), q quits. The header gives the samples per
second and the shares of samples holding the GIL and of idle threads
(whose samples are left out of the rows, as py-spy does). --once samples
for about a second and prints one screen to stdout, for scripts. --native
merges each thread's native (C) frames in, as `record --pid --native` does
(each thread stopped with ptrace while sampled): a C function's row shows
its library instead of a file and line where its library has no debug
information. --blocking stops every thread of the process for each round,
as `record --pid --blocking` does.
"""
import os
import select
import sys
import time

from . import record
from .dump import NATIVE_SUFFIX
from .stats import function_table

NAME = "top"
REFRESH_S = 1.0
FIRST_ROUND_S = 10.0   # the longest wait for the sampler's first round before the first window
SORTS = {"o": "own", "t": "total", "n": "name"}


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("top", help="a live view of where a running Python process spends its time")
    p.add_argument("pid", type=int, help="the process to watch")
    p.add_argument("--rate", help="samples per second (default 1000)")
    p.add_argument("--once", action="store_true", help="sample about a second, print one screen, exit")
    p.add_argument("--native", action="store_true", help="merge native (C) frames in, as record --pid --native "
                                                         "does (each thread stopped with ptrace while sampled; "
                                                         "Linux x86-64)")
    p.add_argument("--blocking", action="store_true", help="stop every thread of the process with ptrace for "
                   "each sampling round, as record --pid --blocking does (no stack read torn)")
    return p


class Tally:
    """What the profiler had counted at one moment: per thread its
    function table ({(name, file, line): [own, total]}) and sample count,
    and over every thread the samples by state and holding the GIL."""

    def __init__(self, prof):
        self.threads = {}
        self.states = {}
        self.gil = 0
        for t in prof.threads():
            tree = prof.tree(t["thread_id"]) if t["samples"] else None
            self.threads[t["thread_id"]] = (t["name"] or str(t["native_id"] or t["thread_id"]),
                                            function_table(tree) if tree else {}, t["samples"])
            for k, v in t["states"].items():
                self.states[k] = self.states.get(k, 0) + v
            self.gil += t["gil_held"]
        st = prof.stats()
        self.failed, self.tried = st["failed"], st["samples"] + st["failed"]   # (samples: those read whole)
        self.t = time.monotonic()


def window_rows(new, old, thread):
    """[(own, total, key)] over the window between two tallies, of one
    thread (its id) or all (None), and the window's sample count."""
    rows, samples = {}, 0
    for tid, (_, table, n) in new.threads.items():
        if thread is not None and tid != thread:
            continue
        _, before, n0 = old.threads.get(tid, (None, {}, 0))
        samples += n - n0
        for key, (own, total) in table.items():
            own0, total0 = before.get(key, (0, 0))
            if own - own0 or total - total0:
                r = rows.setdefault(key, [0, 0])
                r[0] += own - own0
                r[1] += total - total0
    return [(o, t, k) for k, (o, t) in rows.items()], samples


def screen(prof, new, old, sort, thread, width=100, height=40):
    """The lines of one screen."""
    dt = max(new.t - old.t, 1e-9)
    seen = sum(new.states.values()) - sum(old.states.values())
    idle = new.states.get("idle", 0) - old.states.get("idle", 0)
    gil = new.gil - old.gil
    rows, samples = window_rows(new, old, thread)
    share = lambda n, d: f"{100.0 * n / d:5.1f}%" if d else "  0.0%"
    version = prof.stats()["target_version"]
    who = "all threads" if thread is None else f"thread {new.threads.get(thread, ('?',))[0]} ({thread})"
    lines = [f"stackwatch top: process {prof.pid} (Python {version}), {who}",
             f"{seen / dt:.0f} samples/s  GIL {share(gil, seen).strip()}  idle {share(idle, seen).strip()}  "
             f"failed {share(new.failed - old.failed, new.tried - old.tried).strip()}  sort: {SORTS.get(sort, sort)}   [o]wn [t]otal [n]ame [a] thread [q]uit",
             "",
             f"{'own%':>6} {'total%':>6}  function"]
    if sort == "n":
        rows.sort(key=lambda r: (r[2][0], r[2][1], r[2][2]))
    else:
        i = 0 if sort == "o" else 1
        rows.sort(key=lambda r: (-r[i], -r[1 - i], r[2]))
    for own, total, (name, filename, line) in rows[:max(height - len(lines), 1)]:
        # a native frame ("symbol [native]") without debug information: its library as file, no line
        where = filename if name.endswith(NATIVE_SUFFIX) and not line else f"{filename}:{line}"
        lines.append(f"{share(own, samples)} {share(total, samples)}  {name}  ({where})"[:width])
    return lines


def first_round(prof):
    """Waits (up to FIRST_ROUND_S) until the sampler has made its first
    round: that one reads the target's files (with --native their call
    frame information and line tables), so a window begun before it would
    show fewer samples than the rate gives."""
    end = time.monotonic() + FIRST_ROUND_S
    while prof.stats()["ticks"] < 1 and time.monotonic() < end:
        time.sleep(0.005)


def run(args):
    # record's sampler, as top shows it: idle threads left out of the rows
    # (their share in the header), wall time, no history kept.
    args.idle, args.gil, args.lines, args.mode, args.cycle = False, False, False, "wall", "600s"
    try:
        prof = record.open_profiler(args, maxlen=1)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"stackwatch: error: {e}", file=sys.stderr)
        return 1
    try:
        first_round(prof)
        if args.once:
            old = Tally(prof)
            time.sleep(REFRESH_S)
            new = Tally(prof)
            prof.stop()
            sys.stdout.write("\n".join(screen(prof, new, old, "o", None)) + "\n")
            return 0
        return live(prof, args.pid)
    finally:
        if prof.running:
            prof.stop()


def live(prof, pid):
    """The live view on the terminal until q, Ctrl-C or the target's exit."""
    import termios
    import tty
    fd = sys.stdin.fileno()
    tty_state = termios.tcgetattr(fd) if os.isatty(fd) else None
    sort, thread = "o", None
    old = Tally(prof)
    next_refresh = old.t + REFRESH_S
    new = None
    try:
        if tty_state is not None:
            tty.setcbreak(fd)
        sys.stdout.write("\x1b[?25l")
        while True:
            if not record.alive(pid):
                break
            wait = max(next_refresh - time.monotonic(), 0)
            ready = select.select([fd], [], [], wait)[0]
            redraw = False
            if ready:
                key = os.read(fd, 1).decode("ascii", "replace").lower()
                if key == "q" or key == "":
                    break
                if key in SORTS:
                    sort, redraw = key, True
                elif key == "a":
                    tids = sorted((new or old).threads)
                    thread = (tids[0] if tids else None) if thread is None else \
                        (tids[tids.index(thread) + 1] if thread in tids and tids.index(thread) + 1 < len(tids)
                         else None)
                    redraw = True
            if time.monotonic() >= next_refresh:
                if new is not None:
                    old = new
                new = Tally(prof)
                next_refresh = new.t + REFRESH_S
                redraw = True
            if redraw and new is not None:
                size = os.get_terminal_size(sys.stdout.fileno()) if os.isatty(sys.stdout.fileno()) else \
                    os.terminal_size((100, 40))
                body = screen(prof, new, old, sort, thread, size.columns, size.lines - 1)
                sys.stdout.write("\x1b[H\x1b[2J" + "\r\n".join(body) + "\r\n")
                sys.stdout.flush()
    except KeyboardInterrupt:
        pass
    finally:
        sys.stdout.write("\x1b[?25h\n")
        sys.stdout.flush()
        if tty_state is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, tty_state)
    if not record.alive(pid):
        print(f"stackwatch: process {pid} exited", file=sys.stderr)
    return 0
