#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, once per machine.
# Needs root (or sudo); does nothing when everything is already there.
set -euo pipefail
need=()
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
{ [ -e /usr/include/sys/sdt.h ] || [ -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/sys/sdt.h" ]; } || need+=(systemtap-sdt-dev)
# clang brings libFuzzer (its recommended libclang-rt) for tests/c's fuzz run,
# which is skipped with a reason when clang is missing.
command -v clang >/dev/null || need+=(clang)
# Real consumers of the outputs: bpftrace attaches to the USDT probes,
# go tool pprof reads pprof profiles, headless Chromium renders the HTML
# flame graph (driven through chromedriver).
command -v bpftrace >/dev/null || need+=(bpftrace)
command -v go >/dev/null || need+=(golang-go)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing Debian packages: ${need[*]}" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq "${need[@]}" >&2
