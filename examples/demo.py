"""The example `make demo` traces and profiles: a small log analyser doing
real work in its own functions. It makes a day of web-server log lines
(seeded, so every run is the same), parses them (a few are malformed and
raise), sums up each endpoint's latencies (percentiles), follows each
client's sessions, and prints a report; meanwhile a worker thread
compresses the raw log. Its own functions (make_lines, parse_line,
summarize, sessions, ...) are what `stackwatch stats` and the flame graph
show on top, with two threads, a generator and exceptions on one
timeline."""
import math
import random
import threading
import zlib

ENDPOINTS = ["/", "/login", "/search", "/cart", "/checkout", "/api/items", "/api/users", "/static/app.js"]
SLOW = {"/search": 4.0, "/checkout": 2.5, "/api/items": 1.5}


def make_lines(n, seed=7):
    """n log lines "time client method path status ms" (1 in 100 malformed)."""
    rnd = random.Random(seed).random
    t = 0.0
    for i in range(n):
        t -= math.log(1.0 - rnd()) / 50.0             # 50 requests a second
        path = ENDPOINTS[int(rnd() * len(ENDPOINTS))]
        ms = -math.log(1.0 - rnd()) * 12.0 * SLOW.get(path, 1.0) + 0.5
        status = 500 if rnd() < 0.01 else 200
        client = f"10.0.{int(rnd() * 40)}.{int(rnd() * 250)}"
        if i % 100 == 99:
            yield f"{t:.3f} {client} GET {path}"        # truncated: no status, no time
        else:
            yield f"{t:.3f} {client} {'POST' if path == '/login' else 'GET'} {path} {status} {ms:.2f}"


class Record:
    __slots__ = ("time", "client", "method", "path", "status", "ms")

    def __init__(self, time, client, method, path, status, ms):
        self.time, self.client, self.method = time, client, method
        self.path, self.status, self.ms = path, status, ms


def parse_line(line):
    parts = line.split(" ")
    if len(parts) != 6:
        raise ValueError(f"malformed line: {line!r}")
    time, client, method, path, status, ms = parts
    return Record(float(time), client, method, path, int(status), float(ms))


def parse_all(lines):
    records, bad = [], 0
    for line in lines:
        try:
            records.append(parse_line(line))
        except ValueError:
            bad += 1
    return records, bad


def percentile(values, p):
    """The p-th percentile of sorted `values` (linear interpolation)."""
    k = (len(values) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def summarize(records):
    by_path = {}
    for r in records:
        by_path.setdefault(r.path, []).append(r.ms)
    summary = {}
    for path, values in by_path.items():
        values.sort()
        summary[path] = (len(values), percentile(values, 50), percentile(values, 95), percentile(values, 99))
    return summary


def sessions(records, gap=30.0):
    """Each client's sessions (requests less than `gap` s apart): the
    longest one, by number of requests."""
    last, current, longest = {}, {}, (0, None)
    for r in records:
        if r.time - last.get(r.client, -gap - 1) > gap:
            current[r.client] = 0
        current[r.client] += 1
        last[r.client] = r.time
        if current[r.client] > longest[0]:
            longest = (current[r.client], r.client)
    return longest


def report(summary, bad, longest):
    lines = [f"{'endpoint':<14}{'requests':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"]
    for path, (n, p50, p95, p99) in sorted(summary.items(), key=lambda kv: -kv[1][2]):
        lines.append(f"{path:<14}{n:>9}{p50:>9.1f}{p95:>9.1f}{p99:>9.1f}")
    lines.append(f"{bad} malformed lines; longest session: {longest[0]} requests from {longest[1]}")
    return "\n".join(lines)


def compress(lines, result):
    """The worker thread: the raw log, compressed a chunk at a time."""
    z = zlib.compressobj(1)
    size = 0
    for i in range(0, len(lines), 1000):
        size += len(z.compress("\n".join(lines[i:i + 1000]).encode()))
    result.append(size + len(z.flush()))


def main():
    lines = list(make_lines(40_000))
    compressed = []
    worker = threading.Thread(target=compress, args=(lines, compressed), name="log-compressor")
    worker.start()
    records, bad = parse_all(lines)
    print(report(summarize(records), bad, sessions(records)))
    worker.join()
    print(f"raw log: {sum(map(len, lines)) // 1024} KiB, compressed {compressed[0] // 1024} KiB")


if __name__ == "__main__":
    main()
