"""`stackwatch stats`: the part about EXT events (line, exception, GC,
object and thread events recorded with `stackwatch run --events ...`):
counts per kind, GC time, and exceptions per type and location."""
from collections import Counter


def _fmt_ns(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.3f}s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f}ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f}us"
    return f"{ns}ns"


def print_event_tables(out, t, limit):
    """Prints the EXT event tables of trace t (nothing if it has none)."""
    s = t.ext_summary()
    if not s["counts"]:
        return
    print("\nevents", file=out)
    print(f"{'count':>10}  kind", file=out)
    for kind, n in sorted(s["counts"].items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{n:>10}  {kind}", file=out)
    if s["malformed"]:
        print(f"{s['malformed']:>10}  (malformed: payload could not be decoded)", file=out)
    if s["counts"].get("gc_start") or s["counts"].get("gc_done"):
        print(f"\nGC: {s['gc_collections']} collections, {_fmt_ns(s['gc_ns'])} in total, "
              f"{s['gc_collected']} objects collected, {s['gc_uncollectable']} uncollectable", file=out)
    for kind in ("raise", "handled"):
        if not s["counts"].get(kind):
            continue
        where = Counter()
        for e in t.ext_events(kinds=[kind]):
            if "type" not in e.data:
                continue
            c = t.codes.get(e.code)
            line = e.line or "?"   # 0: the instruction has no line (a handler's start)
            loc = f"{c.qualname}  ({c.filename}:{line})" if c else f"<code {e.code}>:{line}"
            where[(e.data["type"], loc)] += 1
        title = "exceptions raised" if kind == "raise" else "exceptions handled"
        print(f"\n{title} (by type and location)", file=out)
        print(f"{'count':>10}  {'type':<24} where", file=out)
        for (typ, loc), n in sorted(where.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]:
            print(f"{n:>10}  {typ:<24} {loc}", file=out)
