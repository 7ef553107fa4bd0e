"""tests/programs/native/cgraph.c, the C extension compiled with the flags
of `stackwatch config --cflags --ldflags` (and -g for its source lines;
cxxthrow.cpp the same in C++, with g++),
built once per key under build/ (conftest.built_once): shared by the
native-function tests of the tracer (tests/py/tracer/test_native_frames.py,
test_lttng.py) and those of native frames read from outside
(tests/py/cli/test_dump_native.py); config_flags() for the other builds
with those flags (tests/py/tracer/test_native_builds.py); cxx_names(),
c++filt's names of a C++ extension's functions. NO_BINUTILS: why
addr2line, nm and c++filt cannot be run, or None."""
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sysconfig

from conftest import PROGRAMS, built_once, missing, run

NO_BINUTILS = None if all(map(shutil.which, ("addr2line", "nm", "c++filt"))) else (
    "addr2line / nm / c++filt are not installed (Debian package binutils)")

SOURCE = os.path.join(PROGRAMS, "native")


def build_extension(debug=False, source="cgraph.c"):
    """The folder holding the extension of tests/programs/native/`source`
    (built with stackwatch's flags, and -g when debug) and driver.py, and
    the extension's path. A .cpp source is built with g++, with the C file
    of the same name and "_c" (and its header) compiled as C."""
    module, ext = os.path.splitext(source)
    sources = [os.path.join(SOURCE, source)]
    if ext == ".cpp":
        sources += [os.path.join(SOURCE, module + "_c.c"), os.path.join(SOURCE, module + ".h")]
    flags, key = config_flags(*sources, os.path.join(SOURCE, "driver.py"))
    name = module + sysconfig.get_config_var("EXT_SUFFIX")
    cxx = shutil.which("g++") if ext == ".cpp" else None
    if ext == ".cpp" and not cxx:
        missing("g++ is not installed (Debian package g++): no C++ extension to build")

    def build(tmp, cc):
        # (g++ compiles a .c file as C++ unless told: -x c, then -x none)
        files = [sources[0]] if not cxx else ["-x", "c", sources[1], "-x", "none", sources[0]]
        subprocess.run([cxx or cc, "-shared", "-fPIC", "-O0", *(["-g"] if debug else []),
                        "-I" + sysconfig.get_paths()["include"], *files, *flags, "-o", name],
                       cwd=tmp, check=True, capture_output=True)
        shutil.copy(os.path.join(SOURCE, "driver.py"), tmp)

    folder = built_once(module + ("-g" if debug else ""), key, build)
    return folder, os.path.join(folder, name)


def config_flags(*sources, text=b""):
    """The words of `stackwatch config --cflags --ldflags`, and a key for
    conftest.built_once: a digest of what a build with them reads (the
    files sources, the stubs' archive the flags name, text and the words)."""
    flags = run(["config", "--cflags", "--ldflags"])
    assert flags.returncode == 0, flags.stderr
    words = shlex.split(flags.stdout)
    for source in list(sources) + [w for w in words if w.endswith(".a")]:
        with open(source, "rb") as f:
            text += f.read()
    return words, hashlib.sha256(text + flags.stdout.encode()).hexdigest()[:12]


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


def cxx_names(so, prefix="_Z"):
    """{symbol: name} for each C++ (mangled: "_Z...") function symbol of so
    (nm), its name as c++filt prints it; prefix "_R": Rust's v0 names."""
    symbols = []
    for line in subprocess.run(["nm", so], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW" and parts[2].startswith(prefix):
            symbols.append(parts[2])
    names = subprocess.run(["c++filt"], input="\n".join(symbols) + "\n", capture_output=True, text=True,
                           check=True, timeout=60).stdout.splitlines()
    assert len(names) == len(symbols), (symbols, names)
    return dict(zip(symbols, names))


def cxx_named(names, function):
    """The one name of cxx_names' names whose function (the last part of
    its qualified name) is `function`, with " [native]" as stackwatch
    shows it."""
    found = [n for n in names.values() if re.search(r"(?:^|[ :])%s[<(]" % re.escape(function), n)]
    assert len(found) == 1, (function, names)
    return found[0] + " [native]"
