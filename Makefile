# stackwatch - build, demo, tests and benchmarks.
#
#   make demo    venv + build + trace and profile examples/demo.py, outputs in out/
#   make test    everything: the C tests (plain, ASan+UBSan, libFuzzer) and
#                the Python tests on every Python 3.9-3.13 found (a missing
#                one is skipped with a reason)
#   make check   the inner loop: incremental build + the Python tests of one
#                Python (CHECK_PYTHON, default 3.12)
#   make bench   stackwatch against its peers (see bench/README.md)
#   make bench-versions  stackwatch's instruction ratios on every Python 3.9-3.13
#   make dist    sdist + a manylinux wheel per Python found, in dist/
#   make deps    install what is missing (fast when nothing is)
#   make rooms   check the house: no include or import goes up or round in a circle
#
# Builds are out of tree, under build/ (see docs/architecture.md, "Build").

PYTHON_VERSIONS ?= 3.9 3.10 3.11 3.12 3.13
CHECK_PYTHON ?= 3.12
SHELL := /bin/bash

.PHONY: demo test test-c test-py check bench bench-versions dist clean deps rooms

deps:
	@scripts/install-deps.sh

demo:
	@scripts/install-deps.sh demo
	@scripts/demo.sh

test: deps rooms
	@scripts/test-all.sh $(PYTHON_VERSIONS)

rooms:
	@python3 scripts/check-rooms.py

test-c:
	@scripts/test-c.sh

test-py:
	@scripts/test-python.sh $(PYTHON_VERSIONS)

check: deps
	@scripts/test-python.sh $(CHECK_PYTHON)

bench: deps
	@scripts/bench.sh

bench-versions: deps
	@BENCH_VERSIONS="$(PYTHON_VERSIONS)" scripts/bench.sh

dist: deps
	@scripts/dist.sh $(PYTHON_VERSIONS)

clean:
	rm -rf build dist out .venv
