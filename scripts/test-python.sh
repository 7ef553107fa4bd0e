#!/usr/bin/env bash
# Runs the Python test suite on each given Python version; a version that is
# not installed is skipped with a printed reason. Fails if any run fails or
# if no version at all could be tested.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
failed=0; tested=0; summary=()
for v in "$@"; do
  if [ -z "$("$root/scripts/find-python.sh" "$v")" ]; then
    echo "=== Python $v: SKIPPED (interpreter not installed)"
    summary+=("$v: skipped (not installed)")
    continue
  fi
  echo "=== Python $v: building"
  if ! py="$("$root/scripts/venv.sh" "$v")"; then
    echo "=== Python $v: BUILD FAILED"; failed=1; summary+=("$v: build failed"); continue
  fi
  echo "=== Python $v: testing with $py"
  if "$py" -m pytest -q -p no:cacheprovider tests/py; then
    summary+=("$v: passed"); tested=$((tested+1))
  else
    summary+=("$v: FAILED"); failed=1
  fi
done
echo "=== per-version results:"; printf '  %s\n' "${summary[@]}"
[ "$tested" -gt 0 ] || { echo "no Python version could be tested"; exit 1; }
exit $failed
