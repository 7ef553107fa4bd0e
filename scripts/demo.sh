#!/usr/bin/env bash
# make demo: build stackwatch into a venv (with only what building needs),
# trace and profile examples/demo.py (a small log analyser doing real
# work), and write to out/ the trace, its statistics, its Perfetto and
# Chrome exports, the HTML flame graph and a speedscope profile; the end
# lists them with how to open each.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
v=""
for cand in 3.12 3.13 3.11 3.10 3.9; do
  if [ -n "$(scripts/find-python.sh "$cand")" ]; then v="$cand"; break; fi
done
[ -n "$v" ] || { echo "make demo: no CPython 3.9-3.13 found" >&2; exit 1; }
echo "== building stackwatch for Python $v (.venv/$v)"
py="$(SW_VENV_DEPS=build scripts/venv.sh "$v")"
sw="$(dirname "$py")/stackwatch"
mkdir -p out
echo "== stackwatch run -o out/demo.swt examples/demo.py   (every call of every thread)"
"$sw" run -o out/demo.swt examples/demo.py
echo
echo "== stackwatch stats out/demo.swt -n 10"
"$sw" stats out/demo.swt -n 10 | tee out/demo-stats.txt
"$sw" export out/demo.swt --format perfetto -o out/demo.pftrace
"$sw" export out/demo.swt --format chrome --min-duration 5us -o out/demo.json
echo
echo "== stackwatch profile -o out/demo.flamegraph.html examples/demo.py   (sampling every 1 ms)"
"$sw" profile -o out/demo.flamegraph.html examples/demo.py > /dev/null
"$sw" profile -q --interval 500us -o out/demo.speedscope.json examples/demo.py > /dev/null
cat <<END

Outputs in out/, and how to open each:
  demo.swt                the exact trace (every call and return):  $sw stats out/demo.swt
  demo-stats.txt          its top functions (what 'stats' printed above)
  demo.pftrace            the trace in Perfetto: open https://ui.perfetto.dev, "Open trace file", pick it
  demo.json               the trace in Chrome's format (slices of 5 us or more): https://ui.perfetto.dev too
  demo.flamegraph.html    the sampled profile as a flame graph: open file://$root/out/demo.flamegraph.html
                          in any browser (self-contained, no network)
  demo.speedscope.json    the sampled profile for https://www.speedscope.app: drop the file on the page
END
