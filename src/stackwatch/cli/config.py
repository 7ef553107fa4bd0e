"""`stackwatch config --cflags --ldflags`: what to add to a compiler's
command line (as python3-config does) so that a C extension's functions
are recorded by the native-function runtime whenever a trace runs: compile
with -finstrument-functions (leaving out the inline functions of Python's
and the system's headers) and link the static archive of stubs that
forwards the compiler's hooks to the runtime (native/cyg). A word holding
a space or another character a shell reads is quoted as pkg-config quotes
it, with backslashes."""
import os
import re
import sysconfig

from .program import UsageError

NAME = "config"
STUBS = "libstackwatch_cyg_stubs.a"


def add_parser(subparsers):
    """Adds the command to the CLI's subparsers; returns its parser."""
    p = subparsers.add_parser("config", help="print the compiler and linker flags of an extension whose "
                              "native functions stackwatch records (-finstrument-functions)")
    p.add_argument("--cflags", action="store_true", help="the compiler's flags")
    p.add_argument("--ldflags", action="store_true", help="the linker's flags (the stubs' archive)")
    return p


def cflags():
    include = sysconfig.get_paths()["include"]
    return ["-finstrument-functions", f"-finstrument-functions-exclude-file-list={include},/usr/include"]


def ldflags():
    """Raises FileNotFoundError when the archive is not installed."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stubs = os.path.join(here, STUBS)
    if not os.path.exists(stubs):
        raise FileNotFoundError(f"{stubs} is missing: this installation of stackwatch was built without "
                                "the native-function runtime")
    # Whole: the linker takes the stubs wherever the words stand, even
    # before the objects that call them (setuptools puts LDFLAGS first).
    return ["-Wl,--whole-archive", stubs, "-Wl,--no-whole-archive", "-ldl"]


def quoted(word):
    """word with a backslash before each character a shell would split or
    expand it at (pkg-config's quoting: shells after eval, make, shlex and
    setuptools' CFLAGS/LDFLAGS read it back as one word)."""
    return re.sub(r"([^A-Za-z0-9_@%+=:,./-])", r"\\\1", word)


def run(args):
    if not (args.cflags or args.ldflags):
        raise UsageError("say what to print: --cflags, --ldflags or both (see 'stackwatch config --help')")
    words = (cflags() if args.cflags else []) + (ldflags() if args.ldflags else [])
    print(" ".join(quoted(w) for w in words))
    return 0
