#!/usr/bin/env bash
# make dist: the sdist and, for every Python version given that is
# installed, a wheel repaired by auditwheel to a manylinux tag (the lowest
# one its symbols allow), all in dist/. Wheels are built from the sdist
# (what PyPI users get), in isolated environments with meson-python from
# PyPI.
#
#   scripts/dist.sh 3.9 3.10 3.11 3.12 3.13
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
tools="$root/.venv/tools"
[ -x "$tools/bin/python" ] || { echo "make dist: run make deps first (.venv/tools)" >&2; exit 1; }
work="$root/build/dist"
rm -rf "$work" && mkdir -p "$work/raw" dist
echo "== sdist"
PATH="$tools/bin:$PATH" "$tools/bin/python" -m build --sdist --outdir "$work" . >"$work/sdist.log" 2>&1 ||
  { tail -30 "$work/sdist.log" >&2; exit 1; }
sdist="$(ls "$work"/stackwatch-*.tar.gz)"
cp "$sdist" dist/
built=0
for v in "$@"; do
  py="$(scripts/find-python.sh "$v")"
  if [ -z "$py" ]; then echo "== wheel for Python $v: skipped (not installed)"; continue; fi
  echo "== wheel for Python $v"
  # Without the LTTng provider library (run --lttng): auditwheel would
  # copy lttng-ust into the wheel, which must be the system's own (its
  # protocol is the session daemon's); a source build on a machine with
  # lttng-ust has it.
  if ! "$py" -m pip wheel --disable-pip-version-check --no-deps -Csetup-args=-Dlttng=disabled -w "$work/raw" \
        "$sdist" >"$work/wheel-$v.log" 2>&1; then
    grep -v "WARNING: Location" "$work/wheel-$v.log" | tail -30 >&2; exit 1
  fi
  built=$((built + 1))
done
echo "== auditwheel repair"
for w in "$work"/raw/*.whl; do
  [ -e "$w" ] || continue
  PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair --wheel-dir dist "$w" >"$work/repair.log" 2>&1 ||
    { cat "$work/repair.log" >&2; exit 1; }
  grep -E "^Fixed-up wheel written to|platform tag" "$work/repair.log" | sed 's/^/  /' || true
done
ls -l dist
echo "make dist: $(ls dist/*.whl 2>/dev/null | wc -l) wheels and $(basename "$sdist") in dist/ ($built Pythons)"
