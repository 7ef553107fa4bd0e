#!/usr/bin/env bash
# make bench: stackwatch against its peers in one run, three tables (see
# bench/README.md). A benchmark, not a test.
#
#   BENCH_PYTHON=3.12   the Python version (default 3.12; 3.9-3.13)
#   BENCH_QUICK=1       tiny sizes and 2 rounds: a smoke run
#   BENCH_ARGS="..."    more options for bench/run.py (e.g. --workloads fib,methods)
#   BENCH_SKIP_SETUP=1  reuse .venv/bench-<version> as it is (no rebuild, no pip)
#   BENCH_DISPATCH=0    skip the dispatch-layer table (bench/dispatch.py)
#
# make bench-versions (BENCH_VERSIONS="3.9 3.10 3.11 3.12 3.13"): instead,
# for each version, callgrind instruction ratios of stackwatch / plain and
# stackwatch / null tracer on fib and the pyperformance programs, then one
# table of all versions (bench/versions.py);
#   BENCH_BASELINE=FILE compares them with an earlier out/bench/versions.json
#   (each ratio after / before, '!' over 1%).
#
# Sets up the venv .venv/bench-<version> (stackwatch built from this tree,
# the peers from PyPI, the bench-only null tracer), then runs bench/run.py.
# A peer that cannot be installed is reported as n/a; it never stops the run.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
outdir="$root/out/bench"
mkdir -p "$outdir"
log="$outdir/setup.log"
: >"$log"
status="$outdir/peer-status.tsv"   # peers that failed to install: name<TAB>reason
: >"$status"
t_start=$SECONDS

# valgrind (instruction counts); without it the table has wall times only.
if ! command -v valgrind >/dev/null 2>&1; then
  echo "bench: installing valgrind" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; } >>"$log" 2>&1 ||
    echo "bench: could not install valgrind: instruction counts will be n/a" >&2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# setup_venv VERSION PEER...: sets py to the python of .venv/bench-VERSION,
# with stackwatch built from this tree, the peers and the null tracer.
setup_venv() {
  local v="$1"; shift
  local peers=("$@")
  export SW_VENV_NAME="bench-$v"
  if [ -z "$("$root/scripts/find-python.sh" "$v")" ]; then
    echo "bench: Python $v is not installed (try BENCH_PYTHON=3.12)" >&2
    return 1
  fi
  if [ "${BENCH_SKIP_SETUP:-0}" != "0" ] && [ -x "$root/.venv/$SW_VENV_NAME/bin/python" ]; then
    py="$root/.venv/$SW_VENV_NAME/bin/python"
    echo "bench: BENCH_SKIP_SETUP: using $py as it is" >&2
    return 0
  fi
  echo "bench: setting up .venv/$SW_VENV_NAME (stackwatch from this tree, ${peers[*]}) ..." >&2
  if ! py="$("$root/scripts/venv.sh" "$v" "${peers[@]}" 2>>"$log")"; then
    # One peer may not exist for this Python: build stackwatch alone, then
    # install the peers one by one and remember which failed.
    echo "bench: setup with all peers failed; building stackwatch alone, then the peers one by one" >&2
    if ! py="$("$root/scripts/venv.sh" "$v" 2>>"$log")"; then
      echo "bench: cannot build stackwatch for Python $v:" >&2
      grep -v "WARNING: Location" "$log" | tail -30 >&2
      return 1
    fi
    local p plog reason
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
  # The bench-only null tracer, built from a private copy (no build/ in the
  # tree) with setuptools (stackwatch itself builds with meson-python).
  rm -rf "$tmp/nulltracer"
  cp -r "$root/bench/nulltracer" "$tmp/"
  if ! { "$py" -m pip install -q --disable-pip-version-check setuptools wheel &&
         "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
           --force-reinstall "$tmp/nulltracer"; } >>"$log" 2>&1; then
    echo "bench: cannot build bench/nulltracer (it also holds the measuring markers):" >&2
    grep -v "WARNING: Location" "$log" | tail -30 >&2
    return 1
  fi
}

if [ -n "${BENCH_VERSIONS:-}" ]; then
  # Per-version instruction ratios: callgrind only (deterministic counts).
  vdir="$outdir/versions"
  mkdir -p "$vdir"
  files=()
  for v in ${BENCH_VERSIONS}; do
    t0=$SECONDS
    if ! setup_venv "$v" pyperf pyperformance; then
      echo "bench: Python $v: no venv, skipped" >&2
      continue
    fi
    echo "bench: Python $v: setup $((SECONDS - t0)) s" >&2
    # shellcheck disable=SC2206
    "$py" "$root/bench/run.py" --no-wall --no-profilers --no-big-traces --tracers null,stackwatch --cg-repeat stackwatch \
      --workloads fib,richards,deltablue,raytrace,go,chaos,json_dumps \
      --peer-status "$status" --out "$vdir/$v.json" ${BENCH_ARGS:-} | tee "$vdir/report-$v.txt"
    [ -f "$vdir/$v.json" ] && files+=("$vdir/$v.json")
  done
  [ ${#files[@]} -gt 0 ] || { echo "bench: no version could run" >&2; exit 1; }
  vargs=(--out "$outdir/versions.json")
  [ -n "${BENCH_BASELINE:-}" ] && vargs+=(--baseline "$BENCH_BASELINE")
  "$py" "$root/bench/versions.py" "${vargs[@]}" "${files[@]}" | tee "$outdir/versions.txt"
  rc="${PIPESTATUS[0]}"
  echo "bench-versions: $(( (SECONDS - t_start) / 60 )) min $(( (SECONDS - t_start) % 60 )) s in all" >&2
  exit "$rc"
fi

v="${BENCH_PYTHON:-3.12}"
# austin-dist: Austin for bench/outside.py; 3.7.0 because the binary of 4.x
# needs glibc 2.38 (Debian 12 has 2.36).
setup_venv "$v" viztracer pyinstrument yappi pyperf pyperformance py-spy austin-dist==3.7.0 || exit 1
t_setup=$((SECONDS - t_start))
echo "bench: setup took $t_setup s" >&2

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
t_all=$((SECONDS - t_start))
echo "make bench: $((t_all / 60)) min $((t_all % 60)) s in all (setup $t_setup s)" | tee -a "$outdir/report.txt"
exit "$rc"
