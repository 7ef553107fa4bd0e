#!/usr/bin/env bash
# Runs the built C tests (plain, then ASan+UBSan), the seed corpus through
# the fuzz harness, and a bounded libFuzzer run; prints the totals as the
# last line ("N passed, N failed") and exits non-zero if anything failed.
# Called by `make` in this directory (see Makefile), from this directory.
#
# Environment (set by the Makefile): BIN, FUZZ_SECONDS, FUZZ_RSS_MB, CLANG,
# FUZZ_CFLAGS, CORE_SRC, LIBS.
set -u
cd "$(dirname "$0")"
BIN=${BIN:-bin}
case $BIN in /*) SHOWN=$BIN ;; *) SHOWN=tests/c/$BIN ;; esac  # for messages
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
FUZZ_RSS_MB=${FUZZ_RSS_MB:-2048}
CLANG=${CLANG:-clang}
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
  for prog in "$BIN/$build"/test_*; do
    [ -x "$prog" ] || continue
    run_program "$prog"
  done
done

# ---- Seed corpus: valid traces written by the writer.
echo "== fuzz seed corpus"
rm -rf "$BIN/seeds"
if "$BIN/plain/make_seed" "$BIN/seeds"; then
  nseeds=$(find "$BIN/seeds" -type f | wc -l)
  # The fuzz harness built with gcc's sanitizers, over every seed: checks
  # the harness itself, even where libFuzzer is missing.
  if "$BIN/asan/fuzz_reader_files" "$BIN/seeds"/*; then
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
fuzz_skip=""
if [ "$FUZZ_SECONDS" = "0" ]; then
  fuzz_skip="FUZZ_SECONDS=0"
elif ! command -v "$CLANG" >/dev/null 2>&1; then
  fuzz_skip="$CLANG not found (scripts/install-deps.sh installs clang)"
elif [ "$nseeds" -eq 0 ]; then
  fuzz_skip="no seed corpus"
else
  # Is libFuzzer usable at all? (clang without its runtime cannot link it.)
  probe_dir=$(mktemp -d)
  printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe_dir/p.c"
  if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$probe_dir/p.c" -o "$probe_dir/p" >"$probe_dir/log" 2>&1; then
    fuzz_skip="$CLANG cannot link libFuzzer: $(head -n 1 "$probe_dir/log")"
  fi
  rm -rf "$probe_dir"
fi
if [ -n "$fuzz_skip" ]; then
  echo "  fuzz run skipped: $fuzz_skip"
else
  mkdir -p "$BIN/fuzz"
  # Rebuilt only when the command or a source is newer than the binary.
  fuzz_bin="$BIN/fuzz/fuzz_reader"
  fuzz_cmd="$CLANG $FUZZ_CFLAGS -O1 -g -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer"
  fuzz_cmd="$fuzz_cmd -fno-sanitize-recover=all fuzz_reader.c $CORE_SRC $LIBS -o $fuzz_bin"
  stale=0
  [ -x "$fuzz_bin" ] && [ "$(cat "$fuzz_bin.cmd" 2>/dev/null)" = "$fuzz_cmd" ] || stale=1
  # shellcheck disable=SC2086
  for src in fuzz_reader.c exportcheck.h fuzzprofile.h $CORE_SRC $(for d in $(dirname $CORE_SRC | sort -u); do echo "$d"/*.h; done); do
    [ "$src" -nt "$fuzz_bin" ] && stale=1
  done
  if [ "$stale" = 1 ]; then
    rm -f "$fuzz_bin" "$fuzz_bin.cmd"
    # shellcheck disable=SC2086
    $fuzz_cmd && echo "$fuzz_cmd" >"$fuzz_bin.cmd"
  fi
  if [ ! -x "$fuzz_bin" ]; then
    echo "  FAIL  building fuzz_reader with $CLANG"
    failed=$((failed + 1))
  else
    # The corpus (inputs that found new coverage) is kept from run to run
    # on this machine; the log names the random seed of this run.
    rm -rf "$BIN/fuzz/artifacts"
    mkdir -p "$BIN/fuzz/corpus" "$BIN/fuzz/artifacts"
    "$fuzz_bin" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb="$FUZZ_RSS_MB" \
      -timeout=20 -print_final_stats=1 -artifact_prefix="$BIN/fuzz/artifacts/" \
      "$BIN/fuzz/corpus" "$BIN/seeds" >"$BIN/fuzz/fuzz.log" 2>&1
    rc=$?
    runs=$(grep -E '^stat::number_of_executed_units:' "$BIN/fuzz/fuzz.log" | awk '{print $2}')
    cov=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$BIN/fuzz/fuzz.log" | grep -oE 'cov: [0-9]+ ft: [0-9]+' | tail -n 1)
    rss=$(grep -E '^stat::peak_rss_mb:' "$BIN/fuzz/fuzz.log" | awk '{print $2}')
    if [ "$rc" -eq 0 ]; then
      echo "  ok    fuzz  fuzz_reader: ${runs:-?} inputs in ${FUZZ_SECONDS}s, ${cov:-cov: ?}, peak RSS ${rss:-?} MB (log: $SHOWN/fuzz/fuzz.log)"
      passed=$((passed + 1))
    else
      echo "  FAIL  fuzz  fuzz_reader: exit status $rc; end of $SHOWN/fuzz/fuzz.log:"
      tail -n 60 "$BIN/fuzz/fuzz.log" | sed 's/^/      /'
      ls "$BIN/fuzz/artifacts" 2>/dev/null | sed "s|^|      artifact: $SHOWN/fuzz/artifacts/|"
      failed=$((failed + 1))
    fi
  fi
fi

echo "== C tests took $((SECONDS - start))s (builds not included)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
