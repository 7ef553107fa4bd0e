#!/usr/bin/env bash
# Creates (once) a venv for a Python version, installs the test dependencies
# and (re)installs stackwatch from this tree. Prints the venv's python.
#
#   scripts/venv.sh 3.12 [extra pip packages...]
#
# The venv is .venv/<version>, or .venv/$SW_VENV_NAME when that is set (so
# that several builds can run at once). The build runs in a private copy of
# the sources, so concurrent builds never share a build/ directory.
# SW_TRACKED_ONLY=1 builds only the files git tracks.
set -euo pipefail
v="$1"; shift
root="$(cd "$(dirname "$0")/.." && pwd)"
py="$("$root/scripts/find-python.sh" "$v")"
[ -n "$py" ] || { echo "no Python $v found" >&2; exit 3; }
venv="$root/.venv/${SW_VENV_NAME:-$v}"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv" >&2
fi
deps=("setuptools>=61" wheel pytest protobuf perfetto coverage selenium "$@")
stamp="$venv/.deps-installed"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${deps[*]}" ]; then
  "$venv/bin/python" -m pip install -q -U --disable-pip-version-check "${deps[@]}" >&2
  echo "${deps[*]}" > "$stamp"
fi
src="$(mktemp -d)"
trap 'rm -rf "$src"' EXIT
if [ "${SW_TRACKED_ONLY:-}" = 1 ]; then
  # Only files git tracks (with their uncommitted edits): leaves out work in
  # progress that is not added yet.
  (cd "$root" && git ls-files -z setup.py pyproject.toml README.md native src | tar --null -T - -cf -) | tar -C "$src" -xf -
else
  tar -C "$root" -cf - setup.py pyproject.toml README.md native src | tar -C "$src" -xf -
fi
log="$src/.build.log"
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall "$src" >"$log" 2>&1; then
  cat "$log" >&2; exit 1
fi
echo "$venv/bin/python"
