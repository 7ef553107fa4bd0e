"""`make bench-versions`: stackwatch's callgrind instruction ratios on each
Python version, in one table, to check a refactor for regressions.

scripts/bench.sh runs bench/run.py once per version (callgrind only, tracers
null and stackwatch, fib and the pyperformance programs) and passes the
results.json files here. For every workload and version this prints

  sw/plain   stackwatch instructions / plain instructions (the region:
             start, workload, stop, trace file written)
  sw/null    stackwatch instructions / null-tracer instructions (its floor)

and writes them to --out. With --baseline (an earlier --out file, e.g. from
before a refactor) it also prints each ratio after / before and marks with
'!' every one that grew by more than 1%. Callgrind counts are deterministic
(PYTHONHASHSEED=0), so 1% is far above their noise (see bench/README.md).

    python bench/versions.py [--baseline OLD.json] [--out versions.json] 3.9.json 3.10.json ...
"""
import argparse
import json
import os
import subprocess
import sys

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT = 1.01
KINDS = (("sw_plain", "stackwatch / plain"), ("sw_null", "stackwatch / null tracer"))


def collect(paths):
    """{version: {"python": ..., "workloads": {name: {...counts, ratios}}}}"""
    out = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        python = doc["machine"]["python"].split()[0]
        version = ".".join(python.split(".")[:2])
        rows = {}
        for name, cg in doc.get("callgrind", {}).items():
            runs = cg.get("runs", {})
            counts = {t: runs.get(t, {}).get("instructions") for t in ("none", "null", "stackwatch")}
            row = {"size": cg.get("size"), "plain": counts["none"], "null": counts["null"],
                   "stackwatch": counts["stackwatch"]}
            repeated = [n for n in runs.get("stackwatch", {}).get("instructions_runs") or [] if n]
            if len(repeated) > 1:
                row["stackwatch_runs"] = repeated
                row["stackwatch_spread"] = max(repeated) / min(repeated) - 1
            if counts["stackwatch"] and counts["none"]:
                row["sw_plain"] = counts["stackwatch"] / counts["none"]
            if counts["stackwatch"] and counts["null"]:
                row["sw_null"] = counts["stackwatch"] / counts["null"]
            rows[name.split(":")[-1]] = row
        out[version] = {"python": python, "stackwatch": doc["machine"]["versions"].get("stackwatch"),
                        "pyperformance": doc["machine"]["versions"].get("pyperformance"), "workloads": rows}
    return out


def _versions(data):
    return sorted(data, key=lambda v: tuple(int(x) for x in v.split(".")))


def table(data, kind, fmt, baseline=None):
    """Rows = workloads, columns = versions, then the geometric mean."""
    versions = _versions(data)
    names = list(dict.fromkeys(n for v in versions for n in data[v]["workloads"]))
    t = benchlib.StreamTable(["workload"] + versions, width=8, first_width=14)
    t.start()
    over = []
    cols = {v: [] for v in versions}
    for n in names:
        cells = [n]
        for v in versions:
            x = data[v]["workloads"].get(n, {}).get(kind)
            if baseline is not None:
                old = baseline.get(v, {}).get("workloads", {}).get(n, {}).get(kind)
                x = x / old if x and old else None
                if x and x > LIMIT:
                    over.append(f"{n} on {v}")
            cols[v].append(x)
            cells.append(fmt(x) + (" !" if baseline is not None and x and x > LIMIT else "") if x else "n/a")
        t.row(cells)
    t.finish(["geometric mean"] + [fmt(benchlib.geomean(cols[v])) if any(cols[v]) else "n/a"
                                   for v in versions])
    return over


def _git(*args):
    try:
        p = subprocess.run(["git", "-C", os.path.dirname(HERE)] + list(args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return p.stdout.decode().strip() or None
    except OSError:
        return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="bench/run.py results.json files, one per version")
    p.add_argument("--baseline", help="an earlier --out file to compare with")
    p.add_argument("--out", help="write the ratios and counts as JSON here")
    args = p.parse_args()
    data = collect(args.results)
    commit = _git("describe", "--always", "--dirty")
    # the last commit that changed what is measured (stackwatch's sources)
    source = _git("log", "-1", "--format=%h %cs", "--", "native", "src", "setup.py", "pyproject.toml")
    print()
    print(f"stackwatch per Python version, callgrind instructions of the region (start .. trace written), "
          f"commit {commit or '?'} (sources last changed in {source or '?'})")
    any_v = next(iter(data.values()))
    print("sizes: " + ", ".join(f"{n} {r['size']}" for n, r in any_v["workloads"].items()))
    print("Pythons: " + ", ".join(f"{data[v]['python']} (pyperformance {data[v]['pyperformance']})"
                                  for v in _versions(data)))
    spreads = sorted((r["stackwatch_spread"], n, v, len(r["stackwatch_runs"]))
                     for v, d in data.items() for n, r in d["workloads"].items() if "stackwatch_spread" in r)
    if spreads:
        worst, name, version, k = spreads[-1]
        print(f"stackwatch: the median of {k} callgrind runs, which differed by up to {worst:.2%} ({name} on "
              f"{version}; median spread {spreads[len(spreads) // 2][0]:.2%})")
    for kind, title in KINDS:
        print(f"\n{title}:")
        table(data, kind, lambda x: f"{x:.4f}")
    if args.baseline:
        with open(args.baseline) as f:
            base = json.load(f)
        print(f"\nafter / before ({args.baseline}: commit {base.get('commit')}, sources of "
              f"{base.get('source_commit')}); '!' = grew more than {LIMIT - 1:.0%}:")
        over = []
        for kind, title in KINDS:
            print(f"\n{title}, after / before:")
            over += [f"{title}: {o}" for o in table(data, kind, lambda x: f"{x:.4f}", base["versions"])]
        print("\n" + ("over 1%: " + "; ".join(over) if over else "no ratio grew by more than 1%"))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"about": "stackwatch's callgrind instruction counts and ratios per Python version, "
                                "written by bench/versions.py (make bench-versions; see bench/README.md)",
                       "commit": commit, "source_commit": source, "versions": data}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
