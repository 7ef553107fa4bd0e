"""Workloads of the kernel-events section (bench/kernel_events.py), run as
plain programs under each tool (stackwatch run, perf, strace, uftrace):

    python kernel_io.py io_wait N      N steps: wait 1 ms on a pipe nobody
                                       writes (select), read 256 bytes of a
                                       file (pread), write a line to
                                       /dev/null: ~3 system calls and one
                                       sleep per ~1.2 ms, under 10,000
                                       system calls a second
    python kernel_io.py write_loop N   N os.write calls of one byte to
                                       /dev/null: system-call bound

Prints the seconds the loop took (the measured region: without the
interpreter's and the tools' start and stop)."""
import os
import select
import sys
import time


def io_wait(n):
    r, _w = os.pipe()
    out = os.open(os.devnull, os.O_WRONLY)
    src = os.open(__file__, os.O_RDONLY)

    def step(i):
        select.select([r], [], [], 0.001)
        os.pread(src, 256, 0)
        os.write(out, b"%d\n" % i)

    t = time.perf_counter()
    for i in range(n):
        step(i)
    return time.perf_counter() - t


def write_loop(n):
    out = os.open(os.devnull, os.O_WRONLY)
    write = os.write
    t = time.perf_counter()
    for _ in range(n):
        write(out, b"x")
    return time.perf_counter() - t


if __name__ == "__main__":
    program = {"io_wait": io_wait, "write_loop": write_loop}[sys.argv[1]]
    print(f"{program(int(sys.argv[2])):.6f}")
