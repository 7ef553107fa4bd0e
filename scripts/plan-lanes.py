#!/usr/bin/env python3
"""Plans make test's lanes: splits the jobs into LANES sequences whose
expected durations are as even as can be, so that the lanes end together.

    scripts/plan-lanes.py LANES JOB:SECONDS ...

prints one line per lane, its jobs longest first. A job's seconds are its
duration in the previous run (build/test-logs/JOB.secs), or an estimate.
Every assignment is tried when there are few (at most 100,000), else the
longest job goes to the least loaded lane, in turn."""
import itertools
import sys


def plan(lanes, jobs):
    """[[job, ...] per lane] minimising the longest lane's total."""
    names = sorted(jobs, key=lambda j: -jobs[j])
    lanes = max(1, min(lanes, len(names)))
    best = None
    if lanes ** len(names) <= 100_000:
        # (the first job is fixed to lane 0: lanes are interchangeable)
        for rest in itertools.product(range(lanes), repeat=len(names) - 1):
            totals = [0.0] * lanes
            for name, lane in zip(names, (0,) + rest):
                totals[lane] += jobs[name]
            if best is None or max(totals) < best[0]:
                best = (max(totals), (0,) + rest)
        choice = best[1]
    else:
        totals, choice = [0.0] * lanes, []
        for name in names:
            lane = totals.index(min(totals))
            totals[lane] += jobs[name]
            choice.append(lane)
    out = [[] for _ in range(lanes)]
    for name, lane in zip(names, choice):
        out[lane].append(name)
    return [lane for lane in out if lane]


def main(argv):
    lanes = int(argv[1])
    jobs = {}
    for arg in argv[2:]:
        name, _, secs = arg.rpartition(":")
        jobs[name] = float(secs)
    for lane in plan(lanes, jobs):
        print(" ".join(lane))


if __name__ == "__main__":
    main(sys.argv)
