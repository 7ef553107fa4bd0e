"""The outside section of `make bench` (run by bench/run.py; see
bench/README.md): sampling a running process from another one, stackwatch
(`stackwatch record --pid`) side by side with py-spy (`py-spy record
--pid`, --nonblocking and its default, blocking) and Austin (PyPI
austin-dist), on the same target, tests/programs/deep_known.py: one thread
28 to 34 frames deep whose possible stacks are known exactly.

1. rate: each tool asked for 125 kHz on the running target for SECONDS:
   samples per second really taken (stackwatch: rounds tried; py-spy: its
   "Samples:" over the time it ran, stopped with SIGINT at the end, as its
   --duration counts samples, not seconds, and takes minutes when it falls
   behind; Austin: its sample lines), the failed share each tool reports,
   and the samples whose stack the program can never have (impossible);
2. slowdown at 1 kHz: the target runs a fixed amount of work (--work N)
   alone and under each tool (non-blocking: stackwatch, py-spy
   --nonblocking, Austin; then the blocking ones: stackwatch --blocking,
   stackwatch --native, py-spy's default mode and py-spy --native; the
   cost per sample is (time - plain) / samples asked), in alternating
   rounds; the median wall time of the work / plain's; then stackwatch's
   CPU per round at 1 kHz in each mode (a 2.3 s record minus a 0.3 s one,
   over the rounds between) and the time --blocking stopped the target
   per round (its summary line);
   Then the same non-blocking tools measured inside one run of the target
   (--batches): windows with no tool and with each tool alternate, and
   each tool's figure is its windows' median batch time over the
   tool-less windows' (the VM's slow and quick spells, which move runs
   minutes apart by several percent, fall on both alike);
3. attach: `stackwatch attach PID --trace --duration 1` on the target
   running batches (--batches): the time from the command's start to the
   first event in the trace, and from the trace's end to the first batch
   back at full speed (within 20% of the median batch before).

stackwatch's record --pid --blocking stops every thread of the target with
ptrace for each round (as py-spy's default does for each sample); --native
stops each thread in turn while it is read and unwinds its C stack.
"""
import bisect
import json
import os
import re
import resource
import runpy
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = os.path.join(os.path.dirname(HERE), "tests", "programs", "deep_known.py")
RATE = 125000
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def tool_path(python, name):
    p = os.path.join(os.path.dirname(python), name)
    return p if os.access(p, os.X_OK) else None


def austin_works(austin):
    """austin-dist 4.x needs glibc 2.38 (Debian 12 has 2.36): None if it
    runs, else why not."""
    try:
        p = subprocess.run([austin, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    except OSError as e:
        return str(e)
    return None if p.returncode == 0 else (p.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]


_TARGET_DEFS = runpy.run_path(TARGET, run_name="deep_known")   # (its functions; it runs nothing so)
possible_stacks = _TARGET_DEFS["possible_stacks"]
read_collapsed = _TARGET_DEFS["recorded_stacks"]


class Target:
    def __init__(self, python, *args):
        self.p = subprocess.Popen([python, TARGET, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline() == "ready\n"
        self.pid = self.p.pid

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        self.p.stdin.close()


def count_impossible(stacks, possible):
    return sum(n for s, n in stacks.items() if s not in possible)


# --- 1. rate -----------------------------------------------------------

def rate_stackwatch(python, pid, seconds, tmp):
    out = os.path.join(tmp, "sw.txt")
    p = subprocess.run([python, "-m", "stackwatch", "record", "--pid", str(pid), "--rate", str(RATE), "--duration",
                        str(seconds), "--format", "collapsed", "-o", out], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    m = re.search(r"in ([\d.]+) s: [\d.]+% failed \((\d+) of (\d+)\), (\d+) rounds/s", p.stderr)
    if p.returncode != 0 or not m:
        return {"error": p.stderr[-300:]}
    stacks = read_collapsed(out)
    secs, failed, tried = float(m.group(1)), int(m.group(2)), int(m.group(3))
    # (ticks missed: in many short stalls, rounds too slow for the rate; in
    # a few long ones, the sampler kept off its CPU)
    st = re.search(r"(\d+) ticks missed in (\d+) stalls \(longest ([\d.]+) ms; (\d+) of them off its CPU\)",
                   p.stderr)
    stalls = {"missed": int(st.group(1)), "stalls": int(st.group(2)), "longest_ms": float(st.group(3)),
              "off_cpu": int(st.group(4))} if st else {}
    return {"seconds": secs, "samples": tried, "failed": failed, "stacks": stacks, **stalls}


def rate_pyspy(spy, pid, seconds, tmp, blocking):
    out = os.path.join(tmp, "spy.txt")
    cmd = [spy, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw", "-o", out]
    if not blocking:
        cmd.append("--nonblocking")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.monotonic()
    time.sleep(seconds)
    p.send_signal(signal.SIGINT)
    try:
        said, _ = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        said, _ = p.communicate()
    took = time.monotonic() - t0
    m = re.findall(r"Samples: (\d+) Errors: (\d+)", said)
    if not m or not os.path.exists(out):
        return {"error": said[-300:]}
    stacks = read_collapsed(out)
    samples, errors = int(m[-1][0]), int(m[-1][1])
    return {"seconds": min(took, seconds + 0.05), "samples": samples + errors, "failed": errors, "stacks": stacks}


def rate_austin(austin, pid, seconds, tmp):
    out = os.path.join(tmp, "austin.txt")
    # (-x takes whole seconds)
    p = subprocess.run([austin, "-i", f"{int(1e6 / RATE)}us", "-x", str(max(1, round(seconds))), "-p", str(pid),
                        "-o", out],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    said = ANSI.sub("", p.stderr)
    m = re.search(r"Error rate : (\d+)/(\d+)", said)
    d = re.search(r"Sampling duration : ([\d.]+) s", said)
    if not os.path.exists(out):
        return {"error": said[-300:]}
    stacks = {}
    lines = 0
    with open(out) as f:
        for line in f:
            if not line.startswith("P"):
                continue
            lines += 1
            st, _, _ = line.rstrip("\n").rpartition(" ")
            frames = st.split(";")[2:]
            k = tuple(fr.rsplit(":", 2)[-2] if fr.count(":") >= 2 else fr for fr in frames)
            stacks[k] = stacks.get(k, 0) + 1
    errors, total = (int(m.group(1)), int(m.group(2))) if m else (0, lines)
    return {"seconds": float(d.group(1)) if d else seconds, "samples": total, "failed": errors, "stacks": stacks}


def load_now():
    """The 1-minute load average (wall figures move with it: printed beside them)."""
    return round(os.getloadavg()[0], 1)


def rate_section(python, spy, austin, seconds, possible, log):
    rows = {}
    with tempfile.TemporaryDirectory(prefix="swbench-outside-") as tmp:
        runs = [("stackwatch", lambda pid: rate_stackwatch(python, pid, seconds, tmp))]
        if spy:
            runs += [("py-spy nb", lambda pid: rate_pyspy(spy, pid, seconds, tmp, False)),
                     ("py-spy", lambda pid: rate_pyspy(spy, pid, seconds, tmp, True))]
        if austin:
            runs.append(("austin", lambda pid: rate_austin(austin, pid, seconds, tmp)))
        for name, fn in runs:
            log(f"  outside: {name} at {RATE} Hz ...")
            t = Target(python)
            load = load_now()
            try:
                r = fn(t.pid)
            finally:
                t.stop()
            r["load"] = [load, load_now()]
            if "stacks" in r:
                r["impossible"] = count_impossible(r["stacks"], possible)
                r["distinct"] = len(r["stacks"])
                r["deepest"] = max((len(s) for s in r["stacks"]), default=0)
                del r["stacks"]
            rows[name] = r
    return rows


def rate_text(rows, seconds, na):
    out = [f"\noutside, rate: each tool asked for {RATE} samples/s for {seconds:g} s of a running "
           f"deep_known.py (28-34 frames; its possible stacks known)",
           f"{'tool':<12}{'samples/s':>11}{'failed':>9}{'impossible':>12}{'deepest':>9}{'load':>11}"]
    for name, r in rows.items():
        if "error" in r:
            out.append(f"{name:<12} error: {r['error'][:200]!r}")
            continue
        rate = r["samples"] / r["seconds"] if r["seconds"] else 0
        failed = r["failed"] / r["samples"] if r["samples"] else 0
        load = "-".join(f"{x:g}" for x in r.get("load", []))
        out.append(f"{name:<12}{rate:>11.0f}{failed:>9.2%}{r['impossible']:>12}{r['deepest']:>9}{load:>11}")
    for name, r in rows.items():
        if r.get("stalls"):
            # (the rate over the time the sampler was on a CPU: the ticks
            # of stalls over 2 ms, whose rounds could not run, taken out)
            on_cpu = r["seconds"] - r["off_cpu"] / RATE
            out.append(f"{name}: {r['missed']} ticks missed in {r['stalls']} stalls of over 1 ms "
                       f"(longest {r['longest_ms']:g} ms), {r['off_cpu']} of them in stalls over 2 ms, off its CPU: "
                       f"{r['samples'] / on_cpu:.0f} samples/s of the time it was on a CPU")
    out += [f"{k}: n/a ({v})" for k, v in na.items()]
    return "\n".join(out)


# --- 2. slowdown -------------------------------------------------------

def slow_configs(python, spy, austin, quick):
    """name -> the command attaching to a pid given last (plain: None);
    quick: the non-blocking ones only."""
    c = {"plain": None,
         "stackwatch": [python, "-m", "stackwatch", "record", "--rate", "1000", "-o", "{tmp}/sw.txt",
                        "--format", "collapsed", "--pid"]}
    spy_base = [spy, "record", "--rate", "1000", "--format", "raw", "-o", "{tmp}/spy.txt"]
    if spy:
        c["py-spy nb"] = spy_base + ["--nonblocking", "--pid"]
    if austin:
        c["austin"] = [austin, "-i", "1ms", "-o", "{tmp}/austin.txt", "-p"]
    if not quick:
        # --blocking stops the whole process for each round; --native each
        # thread while it is read
        c["stackwatch blocking"] = c["stackwatch"][:-1] + ["--blocking", "--pid"]
        c["stackwatch native"] = c["stackwatch"][:-1] + ["--native", "--pid"]
    if spy and not quick:
        c["py-spy blocking"] = spy_base + ["--pid"]
        c["py-spy native nb"] = spy_base + ["--nonblocking", "--native", "--pid"]
    return c


STOPPED = re.compile(r"blocking: the process stopped (\d+) us per round")
ROUNDS = re.compile(r"\((\d+) of (\d+)\), (\d+) rounds/s")


def slow_once(python, cmd, work, tmp, stops=None):
    """Seconds the target's work took with cmd attached (None: alone).
    stackwatch --blocking adds to stops (a list) the us its summary says
    the target was stopped per round."""
    t = Target(python, "--work", str(work))
    prof = None
    out = b""
    try:
        if cmd:
            # Each tool says something once it runs (stackwatch its first
            # line, py-spy "Sampling process ...", Austin its banner): the
            # work starts after that and a little more (plain waits too).
            prof = subprocess.Popen([a.format(tmp=tmp) for a in cmd] + [str(t.pid)], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            if not select.select([prof.stdout], [], [], 30)[0]:
                raise OSError("the tool said nothing in 30 s")
            prof.stdout.readline()
        time.sleep(0.3)
        t.p.stdin.write("go\n")
        t.p.stdin.flush()
        secs = float(t.p.stdout.readline())
    finally:
        t.stop()
        if prof:
            try:
                out = prof.communicate(timeout=60)[0]
            except subprocess.TimeoutExpired:
                prof.kill()
                prof.communicate()
    stop = STOPPED.search(out.decode(errors="replace"))
    if stop and stops is not None:
        stops.append(int(stop.group(1)))
    return secs


def reader_cpu(python, more, seconds, tmp):
    """(CPU seconds, rounds) of `record --pid` with the options more on
    the running target for seconds: its process's user + system time (the
    only child reaped meanwhile) and the samples its summary says it tried
    (one thread: one a round)."""
    t = Target(python)
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([python, "-m", "stackwatch", "record", "--pid", str(t.pid), "--rate", "1000",
                            "--duration", str(seconds), "--format", "collapsed", "-o", os.path.join(tmp, "c.txt")]
                           + more, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        t.stop()
    m = ROUNDS.search(p.stderr)
    if p.returncode != 0 or not m:
        raise OSError(p.stderr[-300:])
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, int(m.group(2))


CPU_MODES = {"stackwatch": [], "stackwatch blocking": ["--blocking"], "stackwatch native": ["--native"]}


def cpu_section(python, rounds, log):
    """The reader's CPU per round at 1 kHz, each mode: a 2.3 s record
    minus a 0.3 s one (start-up and writing cancel out) over the
    difference in rounds, modes alternating; the median of rounds."""
    out = {n: [] for n in CPU_MODES}
    with tempfile.TemporaryDirectory(prefix="swbench-outside-") as tmp:
        for k in range(rounds):
            for n, more in CPU_MODES.items():
                try:
                    (c0, n0), (c1, n1) = reader_cpu(python, more, 0.3, tmp), reader_cpu(python, more, 2.3, tmp)
                except (OSError, AssertionError) as e:
                    log(f"  outside: {n} CPU run failed: {e}")
                    continue
                if n1 > n0:
                    out[n].append((c1 - c0) / (n1 - n0) * 1e6)
    return {n: statistics.median(v) for n, v in out.items() if v}


def slow_section(python, spy, austin, rounds, work, quick, log):
    configs = slow_configs(python, spy, austin, quick)
    names = list(configs)
    runs = {n: [] for n in names}
    stops = {"stackwatch blocking": []}
    with tempfile.TemporaryDirectory(prefix="swbench-outside-") as tmp:
        for k in range(rounds):
            order = names[k % len(names):] + names[:k % len(names)]
            for n in order:
                try:
                    runs[n].append(slow_once(python, configs[n], work, tmp, stops.get(n)))
                except (ValueError, OSError, AssertionError) as e:
                    log(f"  outside: {n} run failed: {e}")
    med = {n: statistics.median(v) for n, v in runs.items() if v}
    stopped = {n: statistics.median(v) for n, v in stops.items() if v}
    cpu = cpu_section(python, 2, log) if not quick else {}
    return {"work_batches": work, "rounds": rounds, "runs": runs, "median": med, "stopped_us": stopped,
            "cpu_us": cpu, "load": os.getloadavg()[0]}


def slow_text(res, na):
    med = res["median"]
    plain = med.get("plain")
    out = [f"\noutside, slowdown at 1 kHz: the target's work ({res['work_batches']} batches) alone and with "
           f"each tool attached, median of {res['rounds']} alternating runs (load {res.get('load', 0):.1f} at "
           f"the end); stackwatch's CPU per round (a 2.3 s record minus a 0.3 s one, over the rounds between) "
           f"and the target's time stopped per round (--blocking, its summary line)",
           f"{'tool':<20}{'seconds':>9}{'x plain':>9}{'us/sample':>11}{'CPU us/round':>14}{'stopped us':>12}"]
    for n, s in med.items():
        ratio = s / plain if plain else float("nan")
        cost = (s - plain) / (1000 * s) * 1e6 if plain and n != "plain" else None
        cpu, stopped = res.get("cpu_us", {}).get(n), res.get("stopped_us", {}).get(n)
        out.append(f"{n:<20}{s:>9.3f}{ratio:>9.3f}" + (f"{cost:>11.1f}" if cost is not None else " " * 11)
                   + (f"{cpu:>14.1f}" if cpu is not None else " " * 14)
                   + (f"{stopped:>12.0f}" if stopped is not None else ""))
    out += [f"{k}: n/a ({v})" for k, v in na.items()]
    return "\n".join(out)


# --- 2b. slowdown within one run --------------------------------------

def within_configs(python, spy, austin):
    """The non-blocking tools of the slowdown table (its quick set), each
    the command attaching to a pid given last, stopped by SIGINT."""
    return {n: c for n, c in slow_configs(python, spy, austin, True).items() if c}


def _window(seconds):
    """(start, end) CLOCK_MONOTONIC ns of a window of `seconds` from now."""
    t0 = time.monotonic_ns()
    time.sleep(seconds)
    return t0, time.monotonic_ns()


def _tool_window(cmd, pid, tmp, seconds):
    """Runs cmd on pid; the window from 0.2 s after its first line to the
    SIGINT that ends it (its start-up and its writing are left out)."""
    prof = subprocess.Popen([a.format(tmp=tmp) for a in cmd] + [str(pid)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        if not select.select([prof.stdout], [], [], 30)[0]:
            raise OSError("the tool said nothing in 30 s")
        prof.stdout.readline()
        time.sleep(0.2)
        win = _window(seconds)
        prof.send_signal(signal.SIGINT)
        prof.communicate(timeout=60)
    finally:
        if prof.poll() is None:
            prof.kill()
            prof.communicate()
    return win


def _batches_in(ends, windows):
    """The durations (ns) of the batches that lie wholly inside one of the
    windows, per window."""
    out = []
    for a, b in windows:
        i, j = bisect.bisect_left(ends, a), bisect.bisect_right(ends, b)
        out.append([e1 - e0 for e0, e1 in zip(ends[i:j], ends[i + 1:j])])
    return out


def within_section(python, spy, austin, rounds, seconds, log):
    """Slowdown at 1 kHz measured inside one run of the target: it runs
    batches (--batches) while windows of `seconds` alternate, one with no
    tool, then one with a tool sampling it, the tools in turn, `rounds`
    times. Each tool's figure is the median batch time in its windows over
    the median in the windows with none: the machine's slow and quick
    spells fall on both alike, as runs minutes apart do not. The spread:
    the same ratio per round (its window over the tool-less one before)."""
    configs = within_configs(python, spy, austin)
    windows = {"plain": [], **{n: [] for n in configs}}
    pairs = {n: [] for n in configs}
    with tempfile.TemporaryDirectory(prefix="swbench-outside-") as tmp:
        ends_file = os.path.join(tmp, "batches.json")
        t = Target(python, "--batches", ends_file)
        try:
            time.sleep(1.0)
            for k in range(rounds):
                names = list(configs)
                for n in names[k % len(names):] + names[:k % len(names)]:
                    time.sleep(0.2)   # (the last tool's exit settles)
                    off = _window(seconds)
                    try:
                        on = _tool_window(configs[n], t.pid, tmp, seconds)
                    except (OSError, subprocess.TimeoutExpired) as e:
                        log(f"  outside: {n} within-run window failed: {e}")
                        continue
                    windows["plain"].append(off)
                    windows[n].append(on)
                    pairs[n].append((off, on))
            t.p.stdin.close()
            t.p.wait(timeout=60)
        finally:
            t.stop()
        with open(ends_file) as f:
            ends = json.load(f)
    med = {}
    for n, ws in windows.items():
        every = [d for w in _batches_in(ends, ws) for d in w]
        if every:
            med[n] = (statistics.median(every), len(every))
    per_round = {}
    for n, ps in pairs.items():
        rs = []
        for off, on in ps:
            a, b = _batches_in(ends, [off, on])
            if a and b:
                rs.append(statistics.median(b) / statistics.median(a))
        per_round[n] = rs
    return {"rounds": rounds, "seconds": seconds, "median_ns": med, "per_round": per_round,
            "load": os.getloadavg()[0]}


def within_text(res):
    med = res["median_ns"]
    plain = med.get("plain")
    out = [f"\noutside, slowdown at 1 kHz within one run of the target: {res['rounds']} rounds of a {res['seconds']:g} s "
           f"window with no tool then one with each tool (non-blocking), the tools in turn; median batch time in "
           f"the tool's windows / in the tool-less ones, and the per-round ratios' range (load "
           f"{res.get('load', 0):.1f} at the end)",
           f"{'tool':<20}{'batch us':>10}{'batches':>9}{'x plain':>9}{'per round':>20}"]
    for n, (ns, count) in med.items():
        ratio = ns / plain[0] if plain and n != "plain" else None
        rs = res["per_round"].get(n) or []
        spread = f"{min(rs):.3f}-{max(rs):.3f}" if rs else ""
        out.append(f"{n:<20}{ns / 1e3:>10.1f}{count:>9}" + (f"{ratio:>9.3f}" if ratio else " " * 9) + f"{spread:>20}")
    return "\n".join(out)


# --- 3. attach ---------------------------------------------------------

def attach_section(python, log):
    from stackwatch import Trace
    with tempfile.TemporaryDirectory(prefix="swbench-outside-") as tmp:
        ends_file = os.path.join(tmp, "batches.json")
        trace = os.path.join(tmp, "t.swt")
        t = Target(python, "--batches", ends_file)
        try:
            time.sleep(1.0)
            t_cmd = time.monotonic_ns()
            p = subprocess.run([python, "-m", "stackwatch", "attach", str(t.pid), "--trace", "--duration", "1",
                                "-o", trace], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
            t_done = time.monotonic_ns()
            time.sleep(1.0)
            t.p.stdin.close()
            t.p.wait(timeout=60)
        finally:
            t.stop()
        if p.returncode != 0:
            return {"error": p.stderr[-300:]}
        with open(ends_file) as f:
            ends = json.load(f)
        tr = Trace(trace)
        mono0 = tr.meta["mono0_ns"]
        firsts = [evs[0].t_ns for evs in (tr.events(i) for i in range(len(tr.threads))) if evs]
        first = mono0 + min(firsts)
        end = mono0 + tr.end_ns
    spans = [(a, b) for a, b in zip(ends, ends[1:])]
    before = [b - a for a, b in spans if b < t_cmd]
    base = statistics.median(before)
    back = next((a for a, b in spans if a >= end and b - a <= 1.2 * base), None)
    return {"to_first_event_ms": (first - t_cmd) / 1e6, "end_to_full_speed_ms": (back - end) / 1e6 if back else None,
            "end_to_command_exit_ms": (t_done - end) / 1e6, "batch_ms": base / 1e6}


def attach_text(a):
    if "error" in a:
        return f"\noutside, attach --trace: error: {a['error'][:200]!r}"
    back = f"{a['end_to_full_speed_ms']:.1f} ms" if a["end_to_full_speed_ms"] is not None else "not seen"
    return (f"\noutside, attach --trace --duration 1: command start -> first event in the trace "
            f"{a['to_first_event_ms']:.0f} ms; end of tracing -> first batch at full speed {back} "
            f"(a batch {a['batch_ms']:.1f} ms); end of tracing -> command exit {a['end_to_command_exit_ms']:.0f} ms")


def section(python, quick, log, saved):
    """The whole section; returns its raw numbers."""
    res = {}
    spy, austin = tool_path(python, "py-spy"), tool_path(python, "austin")
    na = {}
    if not spy:
        na["py-spy"] = "not installed"
    if austin and austin_works(austin):
        na["austin"] = austin_works(austin)
        austin = None
    elif not austin:
        na["austin"] = "not installed"
    possible = possible_stacks()
    seconds = 0.5 if quick else 2.0
    t0 = time.perf_counter()
    res["rate"] = rate_section(python, spy, austin, seconds, possible, log)
    saved_na = dict(na)
    print(rate_text(res["rate"], seconds, saved_na), flush=True)
    res["slowdown"] = slow_section(python, spy, austin, 2 if quick else 5, 20 if quick else 150, quick, log)
    print(slow_text(res["slowdown"], {} if not quick else {"stackwatch blocking": "not in a quick run"}),
          flush=True)
    res["within"] = within_section(python, spy, austin, 2 if quick else 6, 0.5 if quick else 1.0, log)
    print(within_text(res["within"]), flush=True)
    res["attach"] = attach_section(python, log)
    print(attach_text(res["attach"]), flush=True)
    res["na"] = na
    res["seconds"] = time.perf_counter() - t0
    saved()
    return res


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    r = section(sys.executable, quick, lambda m: print(m, file=sys.stderr, flush=True), lambda: None)
    print(json.dumps(r, indent=1, default=str)[:4000] if "--json" in sys.argv else "")
