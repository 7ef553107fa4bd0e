"""`stackwatch stats`: the part about sampler samples recorded with
`stackwatch run --sample`: how many per thread, and the top functions by
samples (own: the innermost frame; total: anywhere on the stack, once per
sample)."""
from collections import Counter


def print_sample_tables(out, t, limit):
    """Prints the sample tables of trace t (nothing if it has none)."""
    n = t.sample_count()
    if not n:
        return
    samples = t.samples()
    states = Counter(s.state for s in samples)
    print(f"\nsamples: {n} ({', '.join(f'{k} {v}' for k, v in sorted(states.items()))})", file=out)
    for th in t.threads:
        if th["samples"]:
            print(f"{th['samples']:>10}  thread {th['name'] or '?'} (tid {th['native_tid']})", file=out)
    own, total = Counter(), Counter()
    for s in samples:
        if s.stack:
            own[s.stack[-1]] += 1
        for f in set(s.stack):
            total[f] += 1
    print("\ntop functions by samples", file=out)
    print(f"{'own':>10} {'total':>10}  function", file=out)
    for f, c in sorted(total.items(), key=lambda kv: (-own[kv[0]], -kv[1], kv[0].name))[:limit]:
        where = f.filename if f.native else f"{f.filename}:{f.line}"
        print(f"{own[f]:>10} {c:>10}  {f.name}  ({where})", file=out)
    # With --sample-lines: the lines the samples were running (own: the
    # innermost Python frame's line, whatever native frames ran under it).
    lines = Counter()
    for s in samples:
        if s.lines:
            k = next((k for k in range(len(s.stack) - 1, -1, -1) if not s.stack[k].native), None)
            if k is not None and s.lines[k]:
                lines[(s.stack[k].filename, s.lines[k], s.stack[k].name)] += 1
    if lines:
        print("\ntop lines by samples", file=out)
        print(f"{'own':>10}  line", file=out)
        for (filename, line, name), c in sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
            print(f"{c:>10}  {filename}:{line}  ({name})", file=out)
