"""Build of the stackwatch C extension (the C core plus the CPython glue).

The core (native/core) is plain C11 without Python.h; native/ext is the only
code that includes Python.h. Both compile into stackwatch._native.
"""
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def sources():
    return sorted(glob.glob("native/**/*.c", recursive=True))


def have_sdt():
    """USDT probes are compiled in where <sys/sdt.h> (Debian systemtap-sdt-dev) exists."""
    import subprocess
    try:
        arch = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True).stdout.strip()
    except OSError:
        arch = ""
    return any(os.path.exists(p) for p in ("/usr/include/sys/sdt.h", f"/usr/include/{arch}/sys/sdt.h"))


CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-fvisibility=hidden",
          "-fno-strict-aliasing"]
if have_sdt() and not os.environ.get("STACKWATCH_NO_PROBES"):
    CFLAGS += ["-DSW_HAVE_SDT=1"]
if os.environ.get("STACKWATCH_DEBUG_BUILD"):
    CFLAGS += ["-O0", "-g"]

setup(
    ext_modules=[
        Extension(
            "stackwatch._native",
            sources=sources(),
            depends=glob.glob("native/**/*.h", recursive=True),
            include_dirs=["native"],
            extra_compile_args=CFLAGS,
            libraries=["pthread"],
        )
    ],
)
