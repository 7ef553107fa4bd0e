#!/usr/bin/env bash
# Creates (once) .venv/<version> for a Python version, installs the test
# dependencies and (re)installs stackwatch from this tree. Prints the venv's
# python. Usage: scripts/venv.sh 3.12 [extra pip packages...]
set -euo pipefail
v="$1"; shift
root="$(cd "$(dirname "$0")/.." && pwd)"
py="$("$root/scripts/find-python.sh" "$v")"
[ -n "$py" ] || { echo "no Python $v found" >&2; exit 3; }
venv="$root/.venv/$v"
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv" >&2
fi
stamp="$venv/.deps-installed"
if [ ! -f "$stamp" ]; then
  "$venv/bin/python" -m pip install -q -U --disable-pip-version-check "setuptools>=61" wheel pytest protobuf perfetto "$@" >&2
  touch "$stamp"
fi
# Rebuild the extension from this tree (quietly; errors are shown).
log="$(mktemp)"
if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall "$root" >"$log" 2>&1; then
  cat "$log" >&2; rm -f "$log"; exit 1
fi
rm -f "$log"
rm -rf "$root/build"
echo "$venv/bin/python"
