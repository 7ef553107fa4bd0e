"""Build of the bench-only null tracer (see nulltracer.c and bench/README.md).

    pip install --no-build-isolation bench/nulltracer
"""
from setuptools import Extension, setup

setup(
    name="stackwatch-bench-nulltracer",
    version="0.1.0",
    description="stackwatch benchmark: the floor of a PEP 523 recording hook",
    ext_modules=[
        Extension(
            "nulltracer",
            sources=["nulltracer.c"],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"],
        )
    ],
)
