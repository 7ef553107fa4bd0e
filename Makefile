# stackwatch - build, demo, tests and benchmarks.
#
#   make demo    venv + build + trace the bundled example, write outputs to out/
#   make test    C unit tests (also under ASan/UBSan) + pytest on every Python
#                3.9-3.13 found (a missing one is skipped with a reason)
#   make bench   stackwatch against its peers (see bench/README.md)
#   make bench-versions  stackwatch's instruction ratios on every Python 3.9-3.13

PYTHON_VERSIONS ?= 3.9 3.10 3.11 3.12 3.13
VENV_DIR := .venv
SHELL := /bin/bash

.PHONY: demo test test-c test-py bench bench-versions clean deps

deps:
	@scripts/install-deps.sh

demo: deps
	@scripts/demo.sh

test: deps test-c test-py

test-c:
	@$(MAKE) -s -C tests/c

test-py:
	@scripts/test-python.sh $(PYTHON_VERSIONS)

bench: deps
	@scripts/bench.sh

bench-versions: deps
	@BENCH_VERSIONS="$(PYTHON_VERSIONS)" scripts/bench.sh

clean:
	rm -rf build out $(VENV_DIR) tests/c/bin src/*.egg-info
