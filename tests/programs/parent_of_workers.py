"""A target for `stackwatch record --subprocesses`: a parent that starts
two Python worker processes and one that is not Python (`sleep`), waits
for the workers and exits 0. Each worker burns CPU in a function of
its own, work_NAME, called from worker_main, until the file STOP exists,
and appends "PID work_NAME" to LOG before it starts: the ground truth of
which process ran which function. The parent prints "ready" once the
workers have written their lines, and waits in wait_for_workers.

    python parent_of_workers.py LOG STOP PYTHON_A PYTHON_B
    python parent_of_workers.py --worker NAME LOG STOP      (a worker)
"""
import os
import subprocess
import sys
import time


def burn(stop):
    while not os.access(stop, os.F_OK):     # C functions only: the stack stays burn
        end = time.monotonic() + 0.01
        while time.monotonic() < end:
            pass


def work_a(stop):
    burn(stop)


def work_b(stop):
    burn(stop)


def worker_main(name, log, stop):
    work = {"a": work_a, "b": work_b}[name]
    with open(log, "a") as f:
        f.write(f"{os.getpid()} {work.__name__}\n")
    work(stop)


def wait_for_workers(procs):
    for p in procs:
        p.wait()


def main(log, stop, python_a, python_b):
    other = subprocess.Popen(["sleep", "60"])
    procs = [subprocess.Popen([python, os.path.abspath(__file__), "--worker", name, log, stop])
             for name, python in (("a", python_a), ("b", python_b))]
    while True:
        with open(log, "a+") as f:
            f.seek(0)
            if len(f.read().splitlines()) >= len(procs) or any(p.poll() is not None for p in procs):
                break
        time.sleep(0.01)
    print("ready", flush=True)
    wait_for_workers(procs)
    other.kill()
    other.wait()
    if any(p.returncode for p in procs):
        sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main(*sys.argv[1:5])
