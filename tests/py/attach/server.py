"""A server-like program for the attach tests: a loop that handles one
request per iteration by calling known functions, each of which writes
its own name into the program's log of calls as it starts (handle also
the iteration's number and time.monotonic_ns()); it prints one line per
100 iterations. The calls of an iteration depend on its number (scrambled, so
that a run of a few dozen iterations has one place in the log). Usage: server.py LOG
[ITERATIONS [PROFILE]] (default: until killed). With PROFILE, sys.setprofile's
view of the whole loop is written there too: "call NAME" or "return NAME"
per Python function's call and return. At its end it prints the names
bound in __main__ (which an attach must not change). With SERVER_SLOW_LINK_S
in its environment, an audit hook of its own spins that many seconds at
each os.link (which the loop never calls: the attach's reports do, its
start's while its sampler runs), and on until stackwatch's sampler, if one
runs, has ticked 25 times since (a loaded machine can hold that thread up
for the whole spin), and writes "slow_link" into the log."""
import os
import sys
import time

log = open(sys.argv[1], "w", buffering=1)
profile = open(sys.argv[3], "w") if len(sys.argv) > 3 else None


def record(frame, event, arg):
    if event in ("call", "return"):
        profile.write(f"{event} {frame.f_code.co_name}\n")


def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def sampler_ticks():
    """The ticks of the attach's sampler (0 when none runs)."""
    session = sys.modules.get("stackwatch.tracer.session")
    sampler = session and session._sampler
    return sampler.stats()["ticks"] if sampler else 0


def slow_link(event, args):
    if event == "os.link":
        log.write("slow_link\n")
        ticks = sampler_ticks()
        spin(float(os.environ["SERVER_SLOW_LINK_S"]))
        end = time.monotonic() + 20
        while ticks and sampler_ticks() < ticks + 25 and time.monotonic() < end:
            pass


def parse(n):
    log.write("parse\n")
    return list(range((n * 2654435761 >> 9) % 7 + 1))


def square(x):
    log.write("square\n")
    return x * x


def work(items):
    log.write("work\n")
    total = 0
    for i in items:
        total += square(i)
    return total


def respond(value):
    log.write("respond\n")
    return str(value)


def handle(n):
    log.write(f"handle {n} {time.monotonic_ns()}\n")
    value = work(parse(n))
    return respond(value) if (n * 40503 >> 6) & 1 else None


def main():
    if os.environ.get("SERVER_SLOW_LINK_S"):
        sys.addaudithook(slow_link)
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    n = 0
    if profile:
        sys.setprofile(record)
    while limit is None or n < limit:
        handle(n)
        if n % 100 == 0:
            print(f"iteration {n}", flush=True)
        n += 1
        time.sleep(0.001)
    sys.setprofile(None)
    for f in (log, profile):
        if f:
            f.close()
    print("done")
    print(sorted(vars(sys.modules["__main__"])))


main()
