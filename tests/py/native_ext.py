"""tests/programs/native/cgraph.c, the C extension compiled with the flags
of `stackwatch config --cflags --ldflags` (and -g for its source lines),
built once per key under build/ (conftest.built_once): shared by the
native-function tests of the tracer (tests/py/tracer/test_native_frames.py,
test_lttng.py) and those of native frames read from outside
(tests/py/cli/test_dump_native.py). NO_BINUTILS: why addr2line and nm
cannot be run, or None."""
import hashlib
import os
import shutil
import subprocess
import sysconfig

from conftest import PROGRAMS, built_once, run

NO_BINUTILS = None if shutil.which("addr2line") and shutil.which("nm") else (
    "addr2line / nm are not installed (Debian package binutils)")

SOURCE = os.path.join(PROGRAMS, "native")


def build_extension(debug=False):
    """The folder holding cgraph (built with stackwatch's flags, and -g
    when debug) and driver.py, and cgraph's path."""
    flags = run(["config", "--cflags", "--ldflags"])
    assert flags.returncode == 0, flags.stderr
    text = b""   # what the build reads: the sources and the stubs' archive
    for source in [os.path.join(SOURCE, "cgraph.c"), os.path.join(SOURCE, "driver.py")] + \
            [w for w in flags.stdout.split() if w.endswith(".a")]:
        with open(source, "rb") as f:
            text += f.read()
    name = "cgraph" + sysconfig.get_config_var("EXT_SUFFIX")

    def build(tmp, cc):
        subprocess.run([cc, "-shared", "-fPIC", "-O0", *(["-g"] if debug else []),
                        "-I" + sysconfig.get_paths()["include"],
                        os.path.join(SOURCE, "cgraph.c"), *flags.stdout.split(), "-o", name],
                       cwd=tmp, check=True, capture_output=True)
        shutil.copy(os.path.join(SOURCE, "driver.py"), tmp)

    folder = built_once("native-g" if debug else "native",
                        hashlib.sha256(text + flags.stdout.encode()).hexdigest()[:12], build)
    return folder, os.path.join(folder, name)


def addr2line(so, addresses):
    """[(file, line)] of addr2line for file addresses of so."""
    out = subprocess.run(["addr2line", "-e", so] + [hex(a) for a in addresses], capture_output=True, text=True,
                         check=True, timeout=60).stdout.splitlines()
    return [(os.path.normpath(f), int(n.split()[0])) for f, _, n in (x.rpartition(":") for x in out)]


def symbol_lines(so, names):
    """{name: (file, line)}: addr2line's for the start of each function
    symbol of so named (nm)."""
    symbols = {}
    for line in subprocess.run(["nm", so], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in names:
            symbols[parts[2]] = int(parts[0], 16)
    return dict(zip(symbols, addr2line(so, symbols.values())))
