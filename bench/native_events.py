"""bench/native_events.py - what the native-function runtime and `run
--cython` cost, on the Python that runs this (docs/performance.md,
"Cython and native functions"); run by hand (`make bench` measures both
in its kernel section, bench/kernel_events.py, on the bench's Python):

    .venv/3.12/bin/python bench/native_events.py

Native: tests/programs/native/cgraph.c's fib(25) (485,570 events) built
with `stackwatch config --cflags --ldflags` and without, timed in CPU time
(best of 9) untraced and under `stackwatch run`: ns per event. Cython
(when Cython is installed): tests/programs/cython/cyprog.pyx compiled
with profile=True; ns per call of a Python fib(20) and of the Cython one,
traced without and with --cython. CPU time, not wall time: the shared
2-core machines are loaded."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = os.path.join(ROOT, "tests", "programs")
CHILD = '''import sys, time
sys.path.insert(0, sys.argv[1])
def best(f, n):
    b = 1e9
    for _ in range(9):
        t = time.process_time(); f(n); b = min(b, time.process_time() - t)
    return b
if sys.argv[2] == "native":
    import cgraph
    print(best(cgraph.fib, 25) * 1e9 / (242785 * 2))
else:
    import cyprog
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)
    print(best(fib, 20) * 1e9 / 21891, best(cyprog.fib, 20) * 1e9 / 21891)
'''


def measure(tmp, folder, what, traced=False, *options, python=sys.executable):
    """The child's figures (what: "native" or "cython"), run plainly or
    under `stackwatch run OPTIONS`."""
    cmd = [python]
    if traced:
        cmd += ["-m", "stackwatch", "run", "-q", "-o", os.path.join(tmp, "t.swt"), *options]
    out = subprocess.run(cmd + [os.path.join(tmp, "child.py"), folder, what], check=True, capture_output=True,
                         text=True).stdout
    return [float(x) for x in out.split()]


def build_vars(python):
    """The -I flag of `python`'s headers and its extensions' file ending
    (the bench's Python may not be the one running this)."""
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include']); "
                          "print(sysconfig.get_config_var('EXT_SUFFIX'))"],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    return "-I" + out[0], out[1]


def native_figures(tmp, python=sys.executable):
    """ns per native event of cgraph.c's fib(25), in the folder tmp: not
    instrumented, instrumented but untraced, traced (make bench's kernel
    section calls this too)."""
    with open(os.path.join(tmp, "child.py"), "w") as f:
        f.write(CHILD)
    flags = subprocess.run([python, "-m", "stackwatch", "config", "--cflags", "--ldflags"],
                           check=True, capture_output=True, text=True).stdout.split()
    source = os.path.join(PROGRAMS, "native", "cgraph.c")
    include, suffix = build_vars(python)
    for name, extra in (("plain", []), ("runtime", flags)):
        os.makedirs(os.path.join(tmp, name), exist_ok=True)
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", include, source, *extra, "-o",
                        os.path.join(tmp, name, "cgraph" + suffix)], check=True)
    plain = measure(tmp, os.path.join(tmp, "plain"), "native", python=python)[0]
    idle = measure(tmp, os.path.join(tmp, "runtime"), "native", python=python)[0]
    traced = measure(tmp, os.path.join(tmp, "runtime"), "native", True, python=python)[0]
    return plain, idle, traced


def cython_figures(tmp, python=sys.executable):
    """ns per call of a Python fib(20) and of cyprog.pyx's (profile=True),
    traced without and with --cython, in the folder tmp:
    (Python without, with, Cython without, with), or None when `python`
    has no Cython (make bench's kernel section calls this too)."""
    if subprocess.run([python, "-c", "import Cython"], capture_output=True).returncode != 0:
        return None
    with open(os.path.join(tmp, "child.py"), "w") as f:
        f.write(CHILD)
    include, suffix = build_vars(python)
    cy = os.path.join(tmp, "cython")
    os.makedirs(cy, exist_ok=True)
    shutil.copy(os.path.join(PROGRAMS, "cython", "cyprog.pyx"), cy)
    subprocess.run([python, "-m", "cython", "-3", "cyprog.pyx", "-o", "cyprog.c"], cwd=cy, check=True,
                   capture_output=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-w", include, "cyprog.c", "-o", "cyprog" + suffix], cwd=cy,
                   check=True)
    py0, cy0 = measure(tmp, cy, "cython", True, python=python)
    py1, cy1 = measure(tmp, cy, "cython", True, "--cython", python=python)
    return py0, py1, cy0, cy1


def main():
    tmp = tempfile.mkdtemp(prefix="sw-native-bench-")
    try:
        plain, idle, traced = native_figures(tmp)
        print(f"native events, ns per event: not instrumented {plain:.2f}, instrumented untraced {idle:.2f}, "
              f"traced {traced:.2f} (recording: {traced - plain:.2f})")
        figures = cython_figures(tmp)
        if figures is None:
            print("Cython is not installed: no Cython figures")
            return 0
        py0, py1, cy0, cy1 = figures
        print(f"--cython, ns per call: Python {py0:.1f} -> {py1:.1f}, Cython {cy0:.1f} -> {cy1:.1f} "
              f"(traced without -> with)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
