#!/usr/bin/env bash
# make test-c: builds the C unit tests in three meson builds under build/
# (c-plain; c-asan: ASan+UBSan; c-fuzz: clang with libFuzzer), each with
# the flags of the shipped extension plus its own, rebuilding only what
# changed, then runs them all (tests/c/run.sh).
#
#   FUZZ_SECONDS=N   length of the libFuzzer run (default 12; 0: none)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
export PATH="$root/.venv/tools/bin:$PATH"   # meson and ninja (make deps)
build="$root/build"
common=(-Dextension=false -Dtests=true -Dwerror=true)

# Configures a build once; ninja reconfigures it by itself when a
# meson.build changes.
setup() {
  local dir="$1"; shift
  [ -f "$dir/build.ninja" ] && return 0
  mkdir -p "$build"
  if ! "$@" >"$dir.setup.log" 2>&1; then
    cat "$dir.setup.log" >&2; rm -rf "$dir"; return 1
  fi
}
setup "$build/c-plain" meson setup "$build/c-plain" "${common[@]}"
setup "$build/c-asan" meson setup "$build/c-asan" "${common[@]}" -Dsanitize=true \
  -Doptimization=1 -Ddebug=true

# libFuzzer needs clang with its runtime; without it the fuzz run is
# skipped with the reason.
fuzz_skip=""
if [ "${FUZZ_SECONDS:-12}" != 0 ]; then
  if ! command -v clang >/dev/null 2>&1; then
    fuzz_skip="clang not found (make deps installs it)"
  else
    probe="$(mktemp -d)"
    printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
    if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
      fuzz_skip="clang cannot link libFuzzer: $(head -n 1 "$probe/log")"
    fi
    rm -rf "$probe"
  fi
  [ -n "$fuzz_skip" ] || setup "$build/c-fuzz" env CC=clang meson setup "$build/c-fuzz" \
    "${common[@]}" -Dfuzz=true -Doptimization=1 -Ddebug=true
fi

for dir in "$build/c-plain" "$build/c-asan" "$build/c-fuzz"; do
  [ -f "$dir/build.ninja" ] || continue
  if ! ninja -C "$dir" >"$dir.build.log" 2>&1; then
    grep -v '^\[' "$dir.build.log" | tail -40 >&2
    echo "C build failed in $dir (log: $dir.build.log)" >&2
    exit 1
  fi
done
BUILD="$build" FUZZ_SKIP="$fuzz_skip" exec bash tests/c/run.sh
