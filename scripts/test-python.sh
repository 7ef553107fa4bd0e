#!/usr/bin/env bash
# Runs the Python test suite on each given Python version; a version that is
# not installed is skipped with a printed reason. Fails if any run fails or
# if no version at all could be tested.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
failed=0; tested=0; summary=()
total_passed=0; total_failed=0; total_skipped=0
count() {  # adds pytest's closing counts ("3 failed, 95 passed, 4 skipped in 9s")
  local line="$1" n
  n=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+'); total_passed=$((total_passed + ${n:-0}))
  n=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+'); total_failed=$((total_failed + ${n:-0}))
  n=$(grep -oE '[0-9]+ error' <<<"$line" | grep -oE '[0-9]+'); total_failed=$((total_failed + ${n:-0}))
  n=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+'); total_skipped=$((total_skipped + ${n:-0}))
}
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
  log="$(mktemp)"
  if "$py" -m pytest -q -p no:cacheprovider --durations=15 --junitxml="$root/build/test-logs/py-$v.xml" tests/py tests/e2e 2>&1 | tee "$log"; [ "${PIPESTATUS[0]}" -eq 0 ]; then
    summary+=("$v: passed")
  else
    summary+=("$v: FAILED"); failed=1
  fi
  tested=$((tested+1))
  count "$(tail -n 1 "$log")"
  rm -f "$log"
done
echo "=== per-version results:"; printf '  %s\n' "${summary[@]}"
[ "$tested" -gt 0 ] || { echo "no Python version could be tested"; exit 1; }
echo "python: $total_passed passed, $total_failed failed, $total_skipped skipped"
exit $failed
