"""A server-like program for the attach tests: a loop that handles one
request per iteration by calling known functions, logs each iteration
(its number, on the clock of time.monotonic_ns) to a file of its own, and
prints one line per 100 iterations to stdout. Usage: server.py LOG
[ITERATIONS] (default: until killed)."""
import sys
import time


def parse(n):
    return [n, n + 1]


def work(items):
    return sum(square(i) for i in items)


def square(x):
    return x * x


def respond(value):
    return str(value)


def handle(n):
    return respond(work(parse(n)))


def main():
    log = open(sys.argv[1], "w", buffering=1)
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    n = 0
    while limit is None or n < limit:
        handle(n)
        log.write(f"{n}\n")
        if n % 100 == 0:
            print(f"iteration {n}", flush=True)
        n += 1
        time.sleep(0.001)


main()
