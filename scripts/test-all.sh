#!/usr/bin/env bash
# make test: the C tests and the Python tests of every version, as jobs in
# parallel lanes (TEST_JOBS, default: the number of cores + 1, as the jobs
# wait on their programs part of the time: on 2 cores 3 lanes took 334 s
# where 2 took 410 s, its CPU 83% busy) planned to end
# together (scripts/plan-lanes.py, from each job's duration in the previous
# run, build/test-logs/JOB.secs, or an estimate).
# Each job writes build/test-logs/<job>.log; when it ends, its result line
# is printed (and the end of its log if it failed). The last lines are the
# totals; the exit status is non-zero if any job failed or no Python could
# be tested.
#
#   scripts/test-all.sh 3.9 3.10 3.11 3.12 3.13
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
jobs_max="${TEST_JOBS:-$(( $(nproc 2>/dev/null || echo 2) + 1 ))}"
logs="$root/build/test-logs"
mkdir -p "$logs"
start=$SECONDS

# Estimates for a first run (seconds on these 2-core machines, warm): the
# newest Pythons have the most tests, the C job builds three times and fuzzes.
estimate() {
  case "$1" in
    c) echo 35 ;; py-3.13) echo 140 ;; py-3.12) echo 120 ;; py-3.11) echo 115 ;;
    py-3.9) echo 110 ;; *) echo 105 ;;
  esac
}
queue=(c)
for v in "$@"; do queue+=("py-$v"); done
planned=()
for job in "${queue[@]}"; do
  secs="$(cat "$logs/$job.secs" 2>/dev/null || true)"
  [[ "$secs" =~ ^[0-9]+$ ]] || secs="$(estimate "$job")"
  planned+=("$job:$secs")
done
mapfile -t lanes < <(python3 scripts/plan-lanes.py "$jobs_max" "${planned[@]}")

# The lines of a job's log that name what failed (pytest's, the C tests').
failures_of() { grep -E '^(FAILED|ERROR|  FAIL)' "$logs/$1.log"; }

run_job() {
  local job="$1" log="$logs/$1.log" t0=$SECONDS rc
  if [ "$job" = c ]; then
    scripts/test-c.sh >"$log" 2>&1; rc=$?
  else
    scripts/test-python.sh "${job#py-}" >"$log" 2>&1; rc=$?
    if grep -q "SKIPPED (interpreter not installed)" "$log"; then
      echo 0 >"$logs/$job.rc"; echo 0 >"$logs/$job.secs"; echo "== $job: skipped (Python ${job#py-} is not installed)"; return
    fi
  fi
  echo "$rc" >"$logs/$job.rc"
  echo "$((SECONDS - t0))" >"$logs/$job.secs"
  local line
  line="$(grep -E '^(python: |[0-9]+ passed, )' "$log" | tail -n 1)"
  if [ "$rc" -eq 0 ]; then
    echo "== $job: ok in $((SECONDS - t0))s: ${line:-$(tail -n 1 "$log")}"
  else
    echo "== $job: FAILED (status $rc) in $((SECONDS - t0))s; end of $log:"
    failures_of "$job" | head -40
    tail -n 25 "$log"
  fi
}

for job in "${queue[@]}"; do rm -f "$logs/$job.rc"; done
for lane in "${lanes[@]}"; do
  echo "== lane: $lane"
  (for job in $lane; do echo "== $job: started"; run_job "$job"; done) &
done
wait

failed=0; passed_py=0; failed_py=0; skipped_py=0; tested=0; failed_jobs=()
for job in "${queue[@]}"; do
  rc="$(cat "$logs/$job.rc" 2>/dev/null || echo 1)"
  [ "$rc" -eq 0 ] || { failed=1; failed_jobs+=("$job"); }
  if [ "$job" != c ]; then
    line="$(grep -E '^python: ' "$logs/$job.log" | tail -n 1)"
    n() { grep -oE "[0-9]+ $1" <<<"$line" | grep -oE '[0-9]+' || echo 0; }
    passed_py=$((passed_py + $(n passed))); failed_py=$((failed_py + $(n failed))); skipped_py=$((skipped_py + $(n skipped)))
    grep -q "passed" <<<"$line" && tested=$((tested + 1))
  fi
done
# What failed, named again at the very end (CI shows only the output's tail).
for job in "${failed_jobs[@]}"; do
  echo "== $job failed:"
  failures_of "$job" | cut -c1-1500 | head -20
done
echo "== C: $(grep -E '^[0-9]+ passed, ' "$logs/c.log" | tail -n 1)"
echo "== Python ($tested versions): $passed_py passed, $failed_py failed, $skipped_py skipped"
echo "== make test took $((SECONDS - start))s ($jobs_max lanes)"
[ "$tested" -gt 0 ] || { echo "no Python version could be tested"; exit 1; }
exit $failed
