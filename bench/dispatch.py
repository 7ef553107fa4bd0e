"""The dispatch layer's costs (issue 3), in callgrind instructions of the
measured region relative to the same region without stackwatch imported:

  import         `import stackwatch`, no consumer             (must be <= 1.01)
  probes idle    + the USDT probe watcher running, nothing attached (<= 1.01)
  c_call         one no-op handler of c_call events only
  line: other    one no-op handler of line events of another file (the
                 workload's file runs at full speed)
  line: own      the same handler on the workload's own file (for reference)
  all + file     the file tracer recording every event kind (C calls, lines
                 and instructions everywhere, exceptions, GC, objects, threads)

Each workload's row is printed as soon as its runs are done. Run by
scripts/bench.sh after bench/run.py (same venv: stackwatch from this
tree and the null tracer, whose region markers bound what callgrind counts):

    python bench/dispatch.py [--quick] [--jobs 2] [--out results.json]
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
import run as runner  # noqa: E402  (bench/run.py: one workload process under callgrind)

CONFIGS = [("none", "plain Minstr"), ("sw_import", "import"), ("sw_probes", "probes idle"),
           ("sw_c_call", "c_call"), ("sw_line_other", "line: other"),
           ("sw_line_file", "line: own"), ("sw_all", "all + file")]
ZERO_COST = ("sw_import", "sw_probes")   # at most 1% over plain
LIMIT = 1.01
# (name, label, script, size, quick size): ~30-100 M instructions plain.
WORKLOADS = [
    ("fib", "fib({})", "fib.py", 22, 15),
    ("methods", "methods({})", "methods.py", 5_000, 500),
    ("builtin_calls", "builtin_calls({})", "builtin_calls.py", 20_000, 2_000),
]


def totals(path):
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("totals:"):
                return int(line.split()[1])
    return None


def measure(python, quick, jobs, log, on_row=None):
    """One callgrind run per (workload, configuration), `jobs` at a time;
    on_row(name, results) as soon as a workload's runs are all done."""
    cgdir = tempfile.mkdtemp(prefix="swbench-dispatch-")
    tasks = [(w, c) for w in WORKLOADS for c, _ in CONFIGS]

    def one(task):
        (name, _label, script, size, qsize), config = task
        cmd = [python, os.path.join(runner.WORKLOADS_DIR, script), "--tracer", config,
               "--size", str(qsize if quick else size)]
        cgout = os.path.join(cgdir, f"{name}.{config}.cg")
        res = runner.run_once(cmd, timeout=3600, valgrind_out=cgout)
        if "error" not in res:
            res["instructions"] = totals(cgout) if os.path.exists(cgout) else None
            if not res["instructions"]:
                res["error"] = "callgrind counted nothing"
        return name, config, res

    out = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            for name, config, res in ex.map(one, tasks):
                out.setdefault(name, {})[config] = res
                if "error" in res:
                    log(f"  {name} / {config}: {res['error']}")
                if on_row and len(out[name]) == len(CONFIGS):
                    on_row(name, out[name])
    finally:
        shutil.rmtree(cgdir, ignore_errors=True)
    return out


def row_cells(name, r, quick, over):
    """One workload's cells; appends the zero-cost cells over LIMIT to over."""
    _, label, _script, size, qsize = next(w for w in WORKLOADS if w[0] == name)
    plain = r.get("none", {}).get("instructions")
    cells = [label.format(qsize if quick else size), f"{plain / 1e6:.1f}" if plain else "n/a"]
    for config, _ in CONFIGS[1:]:
        n = r.get(config, {}).get("instructions")
        if not (n and plain):
            cells.append("n/a")
            continue
        x = n / plain
        cell = f"{x:.4f}" if x < 1.1 else (f"{x:.2f}" if x < 10 else f"{x:.1f}")
        if config in ZERO_COST and x > LIMIT:
            cell += " !"
            over.append(f"{name}/{config}")
        cells.append(cell)
    return cells


def main():
    p = argparse.ArgumentParser(description="the dispatch layer's instruction costs (issue 3)")
    p.add_argument("--quick", action="store_true", help="tiny sizes")
    p.add_argument("--jobs", type=int, default=2, help="callgrind runs at once (default 2)")
    p.add_argument("--out", default=None, help="write the raw numbers as JSON here")
    args = p.parse_args()
    if shutil.which("valgrind") is None:
        print("dispatch costs: valgrind is not installed: n/a")
        return 0

    def log(msg):
        print(msg, file=sys.stderr, flush=True)
    log("dispatch costs: callgrind runs ...")
    t0 = time.perf_counter()
    print()
    print(f"The dispatch layer (issue 3), Python {sys.version.split()[0]}: callgrind instructions of "
          "the region / plain")
    print("(plain: stackwatch not imported). import, probes idle: no consumer, must be <= "
          f"{LIMIT:.2f} ('!' marks a cell over it).")
    print("c_call: one no-op handler of c_call events. line: other / own: one no-op handler of line "
          "events of another file / of the workload's file.")
    print("all + file: the file tracer recording every event kind, lines and instructions "
          "everywhere.")
    table = benchlib.StreamTable(["workload"] + [label for _, label in CONFIGS], width=11, first_width=20)
    table.start()
    over = []
    results = measure(sys.executable, args.quick, args.jobs, log,
                      lambda name, r: table.row(row_cells(name, r, args.quick, over)))
    table.finish()
    if over:
        print(f"over {LIMIT:.2f}: {', '.join(over)}")
    elapsed = time.perf_counter() - t0
    print(f"(dispatch table: {elapsed / 60:.1f} min)", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"python": sys.version.split()[0], "quick": args.quick, "results": results,
                       "elapsed_seconds": elapsed}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
