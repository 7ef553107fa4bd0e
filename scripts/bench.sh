#!/usr/bin/env bash
# make bench: stackwatch against its peers in one run, two tables (see
# bench/README.md). A benchmark, not a test.
#
#   BENCH_PYTHON=3.12   the Python version (default 3.12; 3.9-3.13)
#   BENCH_QUICK=1       tiny sizes and 2 rounds: a ~2-3 minute smoke run
#   BENCH_ARGS="..."    more options for bench/run.py (e.g. --workloads fib,methods)
#   BENCH_SKIP_SETUP=1  reuse .venv/bench-<version> as it is (no rebuild, no pip)
#   BENCH_DISPATCH=0    skip the dispatch-layer table (bench/dispatch.py)
#
# Sets up the venv .venv/bench-<version> (stackwatch built from this tree,
# the peers from PyPI, the bench-only null tracer), then runs bench/run.py.
# A peer that cannot be installed is reported as n/a; it never stops the run.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
v="${BENCH_PYTHON:-3.12}"
outdir="$root/out/bench"
mkdir -p "$outdir"
log="$outdir/setup.log"
: >"$log"
status="$outdir/peer-status.tsv"   # peers that failed to install: name<TAB>reason
: >"$status"

if [ -z "$("$root/scripts/find-python.sh" "$v")" ]; then
  echo "bench: Python $v is not installed (try BENCH_PYTHON=3.12)" >&2
  exit 1
fi

# valgrind (instruction counts); without it the table has wall times only.
if ! command -v valgrind >/dev/null 2>&1; then
  echo "bench: installing valgrind" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; } >>"$log" 2>&1 ||
    echo "bench: could not install valgrind: instruction counts will be n/a" >&2
fi

peers=(viztracer pyinstrument yappi pyperf pyperformance py-spy)
export SW_VENV_NAME="bench-$v"
if [ "${BENCH_SKIP_SETUP:-0}" != "0" ] && [ -x "$root/.venv/$SW_VENV_NAME/bin/python" ]; then
  py="$root/.venv/$SW_VENV_NAME/bin/python"
  echo "bench: BENCH_SKIP_SETUP: using $py as it is" >&2
else
  echo "bench: setting up .venv/$SW_VENV_NAME (stackwatch from this tree, ${peers[*]}) ..." >&2
  if ! py="$("$root/scripts/venv.sh" "$v" "${peers[@]}" 2>>"$log")"; then
    # One peer may not exist for this Python: build stackwatch alone, then
    # install the peers one by one and remember which failed.
    echo "bench: setup with all peers failed; building stackwatch alone, then the peers one by one" >&2
    if ! py="$("$root/scripts/venv.sh" "$v" 2>>"$log")"; then
      echo "bench: cannot build stackwatch for Python $v:" >&2
      grep -v "WARNING: Location" "$log" | tail -30 >&2
      exit 1
    fi
    for p in "${peers[@]}"; do
      plog="$outdir/setup-$p.log"
      if "$py" -m pip install -q --disable-pip-version-check "$p" >"$plog" 2>&1; then
        cat "$plog" >>"$log"; rm -f "$plog"
      else
        cat "$plog" >>"$log"
        reason="$(grep -E "ERROR|error:" "$plog" | tail -1 | cut -c1-200)"; rm -f "$plog"
        printf '%s\tpip install %s failed on Python %s: %s\n' "$p" "$p" "$v" "${reason:-see out/bench/setup.log}" >>"$status"
        echo "bench: $p: not installed (see out/bench/setup.log)" >&2
      fi
    done
  fi

  # The bench-only null tracer, built from a private copy (no build/ in the tree).
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$root/bench/nulltracer" "$tmp/"
  if ! "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
        --force-reinstall "$tmp/nulltracer" >>"$log" 2>&1; then
    echo "bench: cannot build bench/nulltracer (it also holds the measuring markers):" >&2
    grep -v "WARNING: Location" "$log" | tail -30 >&2
    exit 1
  fi
fi

args=(--peer-status "$status" --out "$outdir/results.json")
[ "${BENCH_QUICK:-0}" != "0" ] && args+=(--quick)
# shellcheck disable=SC2206
[ -n "${BENCH_ARGS:-}" ] && args+=(${BENCH_ARGS})
"$py" "$root/bench/run.py" "${args[@]}" | tee "$outdir/report.txt"
rc="${PIPESTATUS[0]}"
# The dispatch layer's costs (issue 3): a third table (BENCH_DISPATCH=0 skips it).
if [ "${BENCH_DISPATCH:-1}" != "0" ]; then
  dargs=(--out "$outdir/dispatch.json")
  [ "${BENCH_QUICK:-0}" != "0" ] && dargs+=(--quick)
  "$py" "$root/bench/dispatch.py" "${dargs[@]}" | tee -a "$outdir/report.txt"
fi
exit "$rc"
