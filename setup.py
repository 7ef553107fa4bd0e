"""Build of the stackwatch C extension (the C core plus the CPython glue).

The core (native/core) is plain C11 without Python.h; native/ext is the only
code that includes Python.h. Both compile into stackwatch._native.
"""
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def sources():
    files = sorted(glob.glob("native/core/*.c")) + sorted(glob.glob("native/ext/*.c")) + sorted(glob.glob("native/reader/*.c"))
    return [f for f in files if not os.path.basename(f).startswith("test_")]


CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-fvisibility=hidden",
          "-fno-strict-aliasing"]
if os.environ.get("STACKWATCH_DEBUG_BUILD"):
    CFLAGS += ["-O0", "-g"]

setup(
    ext_modules=[
        Extension(
            "stackwatch._native",
            sources=sources(),
            depends=glob.glob("native/*/*.h"),
            extra_compile_args=CFLAGS,
            libraries=["pthread"],
        )
    ],
)
