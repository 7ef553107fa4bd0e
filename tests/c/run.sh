#!/usr/bin/env bash
# Runs the built C tests (plain, then ASan+UBSan), the seed corpus through
# the fuzz harness, and a bounded libFuzzer run; prints the totals as the
# last line ("N passed, N failed") and exits non-zero if anything failed.
# scripts/test-c.sh builds the three meson builds and calls this.
#
# Environment: BUILD (the folder holding the builds c-plain, c-asan and
# c-fuzz; default build/ at the top of the checkout), FUZZ_SECONDS (0: no
# fuzz run), FUZZ_RSS_MB, FUZZ_SKIP (a reason not to fuzz, e.g. no clang).
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD=${BUILD:-$root/build}
OUT="$BUILD/c-run"        # seeds, fuzz corpus, logs, crash artifacts
FUZZ_SECONDS=${FUZZ_SECONDS:-12}
FUZZ_RSS_MB=${FUZZ_RSS_MB:-2048}
FUZZ_SKIP=${FUZZ_SKIP:-}
passed=0
failed=0
start=$SECONDS

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:check_initialization_order=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TMPDIR=${TMPDIR:-/tmp}

# Runs one test program; adds its check-totals line to the counts. A program
# that dies without printing its totals counts as one failure.
run_program() {
  local prog=$1 log
  log=$(mktemp)
  "$prog" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local line p f
  line=$(grep -E '^check-totals: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  rm -f "$log"
  if [ -n "$line" ]; then
    p=$(sed -E 's/^check-totals: ([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed$/\1/' <<<"$line")
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
      echo "  FAIL  $prog exited with status $rc"
      failed=$((failed + 1))
    fi
  else
    echo "  FAIL  $prog exited with status $rc before reporting its totals"
    failed=$((failed + 1))
  fi
}

for build in plain asan; do
  echo "== C unit tests ($build build)"
  for prog in "$BUILD/c-$build/tests/c"/test_*; do
    [ -f "$prog" ] && [ -x "$prog" ] || continue
    run_program "$prog"
  done
done

# ---- The generated layouts of known CPython releases are what their
# headers give (scripts/gen-layouts.py), and the asyncio tables what probing
# those releases' objects gives (scripts/gen-asyncio-layouts.py); exit 2:
# other releases installed.
for gen in "gen-layouts:layouts_generated.h, pending_generated.h" "gen-asyncio-layouts:asyncio_generated.h"; do
  echo "== generated tables (native/procmem/${gen#*:})"
  python3 "$root/scripts/${gen%%:*}.py" --check
  case $? in
    0) passed=$((passed + 1)) ;;
    2) echo "  skipped: not the releases the header was made from" ;;
    *) echo "  FAIL  native/procmem/${gen#*:} is not what scripts/${gen%%:*}.py makes"
       failed=$((failed + 1)) ;;
  esac
done

# ---- Seed corpus: valid traces written by the writer.
echo "== fuzz seed corpus"
mkdir -p "$OUT"
rm -rf "$OUT/seeds"
if "$BUILD/c-plain/tests/c/make_seed" "$OUT/seeds"; then
  nseeds=$(find "$OUT/seeds" -type f | wc -l)
  # The fuzz harness built with gcc's sanitizers, over every seed: checks
  # the harness itself, even where libFuzzer is missing.
  if "$BUILD/c-asan/tests/c/fuzz_reader_files" "$OUT/seeds"/*; then
    echo "  ok    asan  fuzz_reader_files: the harness on $nseeds seeds"
    passed=$((passed + 1))
  else
    echo "  FAIL  asan  fuzz_reader_files on the seed corpus"
    failed=$((failed + 1))
  fi
else
  echo "  FAIL  make_seed could not write the seed corpus"
  failed=$((failed + 1))
  nseeds=0
fi

# ---- libFuzzer.
echo "== libFuzzer run of the trace reader"
fuzz_skip="$FUZZ_SKIP"
fuzz_bin="$BUILD/c-fuzz/tests/c/fuzz_reader"
if [ "$FUZZ_SECONDS" = "0" ]; then
  fuzz_skip="FUZZ_SECONDS=0"
elif [ -z "$fuzz_skip" ] && [ "$nseeds" -eq 0 ]; then
  fuzz_skip="no seed corpus"
fi
if [ -n "$fuzz_skip" ]; then
  echo "  fuzz run skipped: $fuzz_skip"
else
  if [ ! -x "$fuzz_bin" ]; then
    echo "  FAIL  fuzz_reader was not built ($fuzz_bin)"
    failed=$((failed + 1))
  else
    # The corpus (inputs that found new coverage) is kept from run to run
    # on this machine; the log names the random seed of this run.
    rm -rf "$OUT/fuzz/artifacts"
    mkdir -p "$OUT/fuzz/corpus" "$OUT/fuzz/artifacts"
    "$fuzz_bin" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb="$FUZZ_RSS_MB" \
      -timeout=20 -print_final_stats=1 -artifact_prefix="$OUT/fuzz/artifacts/" \
      "$OUT/fuzz/corpus" "$OUT/seeds" >"$OUT/fuzz/fuzz.log" 2>&1
    rc=$?
    runs=$(grep -E '^stat::number_of_executed_units:' "$OUT/fuzz/fuzz.log" | awk '{print $2}')
    cov=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$OUT/fuzz/fuzz.log" | grep -oE 'cov: [0-9]+ ft: [0-9]+' | tail -n 1)
    rss=$(grep -E '^stat::peak_rss_mb:' "$OUT/fuzz/fuzz.log" | awk '{print $2}')
    if [ "$rc" -eq 0 ]; then
      echo "  ok    fuzz  fuzz_reader: ${runs:-?} inputs in ${FUZZ_SECONDS}s, ${cov:-cov: ?}, peak RSS ${rss:-?} MB (log: $OUT/fuzz/fuzz.log)"
      passed=$((passed + 1))
    else
      echo "  FAIL  fuzz  fuzz_reader: exit status $rc; end of $OUT/fuzz/fuzz.log:"
      tail -n 60 "$OUT/fuzz/fuzz.log" | sed 's/^/      /'
      ls "$OUT/fuzz/artifacts" 2>/dev/null | sed "s|^|      artifact: $OUT/fuzz/artifacts/|"
      failed=$((failed + 1))
    fi
  fi
fi

echo "== C tests took $((SECONDS - start))s (builds not included)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
