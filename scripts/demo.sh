#!/usr/bin/env bash
# make demo: build stackwatch into a venv, trace examples/demo.py, and write
# the trace, its statistics and its Perfetto and Chrome exports to out/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
v=""
for cand in 3.12 3.13 3.11 3.10 3.9; do
  if [ -n "$(scripts/find-python.sh "$cand")" ]; then v="$cand"; break; fi
done
[ -n "$v" ] || { echo "make demo: no CPython 3.9-3.13 found" >&2; exit 1; }
echo "== building stackwatch for Python $v"
py="$(scripts/venv.sh "$v")"
bin="$(dirname "$py")"
mkdir -p out
echo "== stackwatch run examples/demo.py"
"$bin/stackwatch" run -o out/demo.swt examples/demo.py
echo "== stackwatch stats out/demo.swt"
"$bin/stackwatch" stats out/demo.swt -n 10 | tee out/demo-stats.txt
"$bin/stackwatch" export out/demo.swt --format perfetto -o out/demo.pftrace
"$bin/stackwatch" export out/demo.swt --format chrome -o out/demo.json
echo "== stackwatch profile examples/demo.py (sampling every 500us)"
"$bin/stackwatch" profile --interval 500us -o out/demo.speedscope.json examples/demo.py > /dev/null
echo
echo "Outputs in out/: demo.swt (trace), demo-stats.txt, demo.pftrace (open in https://ui.perfetto.dev),"
echo "demo.json (Chrome trace format: chrome://tracing or Perfetto), demo.speedscope.json (sampled"
echo "profile: https://www.speedscope.app)."
