"""Generator expressions that C functions resume, in a hot loop: all(),
any(), sum(), min(), max(), sorted(), tuple() and str.join() each resume
a generator expression again and again (a new run of the interpreter from
C every time: 3.12+ its shim frame on the C stack, made anew at the same
addresses), called at several depths of the C stack (each level entered from C) so
that each run's C stack lands where another's lay before, and the generators (freed and
made again) at each other's addresses. Sampled with every sample parked
ahead of its walk by tests/py/tracer/test_sample_vs_trace.py: a sample
must hold the generator's callers, never the generator alone.

    python resumed_by_c.py ROUNDS
"""
import sys


def key(v):
    return -v


def consume(values, k):
    if k == 0:
        return all(v >= 0 for v in values)
    if k == 1:
        return any(v < 0 for v in values)
    if k == 2:
        return sum(abs(v) for v in values)
    if k == 3:
        return min(str(v) for v in values) < "z"
    if k == 4:
        return max(v * 2 for v in values)
    if k == 5:
        return sorted(values, key=key)[0]
    if k == 6:
        return len(tuple(hex(v) for v in values))
    return len(",".join(str(v) for v in values))


def down(values, depth, k):
    # each level called from C (map), a run of the interpreter of its own
    # deeper on the C stack
    if depth:
        return sum(map(down, (values,), (depth - 1,), (k,)))
    return consume(values, k)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    values = list(range(30))
    t = 0
    for i in range(rounds):
        for k in range(8):
            t += down(values, (i + k) % 4, k)
    return t


if __name__ == "__main__":
    main()
