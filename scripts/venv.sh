#!/usr/bin/env bash
# Creates (once) a venv for a Python version, installs the test and build
# dependencies, and builds and installs stackwatch from this tree into it.
# Prints the venv's python.
#
#   scripts/venv.sh 3.12 [extra pip packages...]
#   SW_VENV_DEPS=build scripts/venv.sh 3.12     only what building needs
#
# The venv is .venv/<version>, or .venv/$SW_VENV_NAME when that is set.
# The build is incremental: meson-python builds in build/<venv>-<key>,
# which only this venv uses, and recompiles only what changed. The key
# names the interpreter and the optional features found on this machine
# (<sys/sdt.h>, lttng-ust, zlib), so a build configured before a feature was installed is
# never reused after it. SW_WERROR=0 builds without -Werror.
set -euo pipefail
v="$1"; shift
root="$(cd "$(dirname "$0")/.." && pwd)"
py="$("$root/scripts/find-python.sh" "$v")"
[ -n "$py" ] || { echo "no Python $v found" >&2; exit 3; }
name="${SW_VENV_NAME:-$v}"
venv="$root/.venv/$name"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv" >&2
fi
# What the build needs; SW_VENV_DEPS=build (make demo) installs only that.
deps=("pip>=23.1" "meson-python>=0.15" "meson>=1.2" ninja)
if [ "${SW_VENV_DEPS:-all}" != build ]; then
  # The tests' consumers; toolz and more-itertools: tests/e2e/test_real_suites.py
  # runs their test suites; ipython: tests/py/integrations/test_ipython.py
  # drives the magics in it (bounded by the last release of each Python, so
  # that pip does not backtrack through every release for the older ones);
  # pytest-xdist: tests/e2e/test_xdist.py runs a suite on its workers.
  # pyflakes: tests/py/tracer/test_sample_vs_trace.py samples it on a source tree.
  # greenlet and gevent (no wheel for 3.9 here): tests/py/tracer/test_tasks.py;
  # trio and uvloop: tests/py/tracer/test_task_events.py records their tasks.
  # cython: tests/py/tracer/test_cython.py compiles a module with profile=True.
  # setuptools (3.12+ venvs have none): tests/py/tracer/test_native_builds.py builds
  # an extension by README.md's setuptools recipe.
  deps+=(pytest protobuf perfetto coverage selenium jsonschema toolz==1.2.0 more-itertools==10.8.0 pytest-xdist
         pyflakes==3.2.0 greenlet "gevent; python_version>='3.10'" trio uvloop cython setuptools
         "ipython<8.19; python_version<'3.10'" "ipython<9; python_version=='3.10'"
         "ipython; python_version>='3.11'" "$@")
fi
# The stamp lists what was installed: pip runs only when something asked
# for is not in it (a new package or a new pin).
stamp="$venv/.deps-installed"
have=" $(cat "$stamp" 2>/dev/null || true) "
missing=()
for d in "${deps[@]}"; do [[ "$have" == *" $d "* ]] || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
  "$venv/bin/python" -m pip install -q -U --disable-pip-version-check "${deps[@]}" >&2
  echo $have "${missing[@]}" > "$stamp"   # (have unquoted: its words)
fi
sdt=nosdt
{ [ -e /usr/include/sys/sdt.h ] || [ -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/sys/sdt.h" ]; } && sdt=sdt
ver="$("$venv/bin/python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
lttng=nolttng
pkg-config --exists lttng-ust 2>/dev/null && lttng=lttng
# zlib (meson.build: compressed debug sections): meson finds it by pkg-config,
# else by its header (zlib1g-dev has both).
zlib=nozlib
{ pkg-config --exists zlib 2>/dev/null || [ -e /usr/include/zlib.h ]; } && zlib=zlib
builddir="$root/build/$name-$ver-$sdt-$lttng-$zlib"
werror=true; [ "${SW_WERROR:-1}" = 0 ] && werror=false
log="$builddir.log"
mkdir -p "$root/build"
# The tree as it is (tracked and untracked files, not the ignored ones),
# hashed into a temporary index: when it, the build directory and the
# flags are those of the last install, that install stands (pip takes
# 3-8 s even when nothing changed, once per Python in make test).
built=""
if tmpidx="$(mktemp -u)" && tree="$(cd "$root" && GIT_INDEX_FILE="$tmpidx" git add -A 2>/dev/null &&
                                     GIT_INDEX_FILE="$tmpidx" git write-tree 2>/dev/null)"; then
  built="$tree $builddir $werror"
fi
rm -f "$tmpidx"
bstamp="$venv/.build-installed"
if [ -z "$built" ] || [ "$(cat "$bstamp" 2>/dev/null)" != "$built" ] || [ ! -d "$builddir" ]; then
  rm -f "$bstamp"
  if ! (cd "$root" && PATH="$venv/bin:$PATH" "$venv/bin/python" -m pip install --disable-pip-version-check --no-build-isolation \
          --no-deps -Cbuild-dir="$builddir" -Csetup-args=-Dwerror=$werror .) >"$log" 2>&1; then
    grep -v "WARNING: Location" "$log" | tail -40 >&2; exit 1
  fi
  [ -z "$built" ] || echo "$built" > "$bstamp"
fi
echo "$venv/bin/python"
