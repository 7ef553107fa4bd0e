"""Bounds for the tests whose outcome depends on timing or sampling, each
derived from what the test observed so that a correct stackwatch fails it
at most once in 10,000 runs (FALSE_FAILURE), however busy the machine.

Shares of sampled time (time_shares): batch means over the profiler's cycles
---------------------------------------------------------------------------
A sampler's estimate of a function's share of time has an error whose size
depends on the machine: on a quiet one a sample stands for one interval and
the error comes only from the intervals that straddle a switch from one
function to the next; on a busy one (two cores shared by four builds) the
sampler misses up to half its ticks in bursts of several milliseconds, and a
sample then stands for the whole gap since the previous round. Neither the
number of samples nor the number of missed ticks tells the size of the error
(that would need the distribution of the gaps, which a profile does not
keep), so a fixed bound (0.03) is either loose on a quiet machine or flaky on
a busy one. The error is measured instead:

- the workload records every block it runs: the function (or line) it
  stands for, its start and end on CLOCK_MONOTONIC (the sampler's clock) and
  its thread CPU time (Blocks);
- the profiler keeps a tree per cycle (cycle=CYCLE, maxlen=None); for cycle
  k (from its start to the next one's) d_k = time the profile gives function
  x - time x really ran in that window (CPU time in CPU mode, spread over the
  block's wall time);
- for shares, e_k = d_k(x) - share_x * d_k(all): the error of x's share is
  sum(e_k) / (sampled time) exactly;
- a correct sampler's e_k have mean 0 (the sampler's rounds are not timed by
  the workload; a block that is descheduled is still running when its thread
  resumes because blocks are sized in CPU time, so the stall is charged to
  it); their spread is what this run's load made it. With K cycles, mean m
  and sample deviation s, m / (s / sqrt(K)) follows Student's t with K - 1
  degrees of freedom, so |sum(e_k)| <= t(1 - a/2, K-1) * s * sqrt(K) fails
  a correct sampler with probability a. A span that crosses a cycle's edge
  moves time from one cycle to the next: neighbouring e_k are negatively
  correlated, so the true variance of the sum is below K * s^2 and the bound
  errs on the safe side; a spell of load that lasts several cycles can
  correlate them positively instead, which sum_deviation allows for
  (Newey-West over 3 lags, when that is the larger estimate).
- a = FALSE_FAILURE / (number of functions checked) (Bonferroni) /
  TAIL_FACTOR: the e_k are not quite normal (a spell of load can put one
  cycle far out), and over 3,450 checks on a loaded 2-core machine the
  statistic went beyond 4 deviations 3 times as often as Student's t says
  (beyond 4.5: once, against 0.35 expected); taking the quantile 10 times
  further out covers that (t = 5.7 instead of 4.9 for 30 cycles, 3
  functions).

A burst that misattributes one whole gap lands in one cycle and widens s with
it (one outlier among K cycles gives t ~ 1): a busy machine loosens the bound
by what it really did to the run, a quiet one tightens it. A sampler bug that
charges one function too much or too little (a call-heavy function whose
failed reads are dropped, C time given to the wrong frame, CPU weights taken
from the wrong thread) shifts every cycle the same way and is caught as soon
as the shift is larger than the run's own noise.

Counts (at_least / at_most): the binomial distribution
------------------------------------------------------
For a property each sample has with probability p, independently (e.g. "this
sample's stack holds the C frame"), the count k of n samples is Binomial(n,
p); at_least(n, p) is the largest k0 with P(k < k0) <= FALSE_FAILURE, computed
exactly, so asserting k >= at_least(n, p) fails a sampler that meets p once
in 10,000 runs or less. The tests state p (the rate the design promises),
not a fixed fraction of n. Events that come in bursts (failed samples of a
stack that changes fast) are not binomial: expect_share_at_most bounds
their share by batch means over windows of the run instead.

With SW_BOUNDS_LOG=FILE set, every check appends a JSON line to FILE (the
test, the value, its bound): how close runs come to their bounds.
"""
import json
import math
import os
import time
from statistics import NormalDist

FALSE_FAILURE = 1e-4      # at most one false failure in 10,000 runs of a test
CYCLE = "50ms"            # the profiler's cycle for time_shares: ~30 cycles in 1.5 s
MIN_CYCLES = 8            # fewer cycles with data cannot judge a share
# The bound above is for the sampling noise; on top of it a share may be
# off by a systematic edge effect (a sample's interval is given to the
# stack at its instant, so a block that starts or ends between two samples
# gains or loses part of an interval): one percentage point is allowed for
# it. Measured: a 0.68-point error against a 0.6-point noise bound on a
# quiet run of 31 cycles; the bugs these tests catch are tens of points.
SYSTEMATIC = 0.01
LAGS = 3                  # neighbouring cycles whose errors may go together (sum_deviation)
TAIL_FACTOR = 10          # the batch errors' tails are heavier than normal (see the docstring)


def log(kind, detail):
    """Appends {test, kind, ...detail} to $SW_BOUNDS_LOG, if set."""
    path = os.environ.get("SW_BOUNDS_LOG")
    if path:
        row = {"test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" (")[0], "kind": kind, **detail}
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


# ---- distributions ----

def z(alpha=FALSE_FAILURE):
    """The two-sided standard normal quantile: P(|Z| > z) = alpha (3.89 for 1e-4)."""
    return NormalDist().inv_cdf(1 - alpha / 2)


def _betacf(a, b, x):
    """The continued fraction of the incomplete beta function (modified
    Lentz, as in Numerical Recipes 6.4)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                    -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1 - x) / b


def t_two_sided_p(t, dof):
    """P(|T| > t) for Student's t with `dof` degrees of freedom."""
    return _betainc(dof / 2, 0.5, dof / (dof + t * t))


def t_quantile(alpha, dof):
    """t with P(|T| > t) = alpha for Student's t with `dof` degrees of freedom."""
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, dof) > alpha:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, dof) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def _binomial_pmf(k, n, p):
    if p <= 0:
        return 1.0 if k == 0 else 0.0
    if p >= 1:
        return 1.0 if k == n else 0.0
    return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(p) + (n - k) * math.log1p(-p))


def at_least(n, p, alpha=FALSE_FAILURE):
    """The largest k0 with P(Binomial(n, p) < k0) <= alpha: a count of n
    samples, each with probability p, is below k0 at most `alpha` of the
    time."""
    total, k = 0.0, 0
    while k <= n:
        total += _binomial_pmf(k, n, p)
        if total > alpha:
            return k
        k += 1
    return n


def at_most(n, p, alpha=FALSE_FAILURE):
    """The smallest k1 with P(Binomial(n, p) > k1) <= alpha."""
    return n - at_least(n, 1 - p, alpha)


def expect_at_least(k, n, p, detail=""):
    """Asserts that k of n samples is not fewer than a rate of p allows
    (at_least) and logs how close it came."""
    k0 = at_least(n, p)
    log("at_least", {"k": k, "n": n, "p": p, "bound": k0})
    assert k >= k0, f"{k} of {n} is below {k0}, the least a rate of {p} gives (1 run in 10,000): {detail}"


def expect_at_most(k, n, p, detail=""):
    """Asserts that k of n samples is not more than a rate of p allows."""
    k1 = at_most(n, p)
    log("at_most", {"k": k, "n": n, "p": p, "bound": k1})
    assert k <= k1, f"{k} of {n} is above {k1}, the most a rate of {p} gives (1 run in 10,000): {detail}"


def expect_share_at_most(windows, p, detail="", alpha=FALSE_FAILURE):
    """Asserts that events (failed samples) are at most a share p of the
    samples, given [(samples, events)] counted in consecutive windows of
    one run, where the events need not be independent: a failed read of
    a stack that changes fast comes with others (a walk fails after
    several torn walks in a row, which happen in bursts, and at rates that
    differ from run to run with whether the target and the sampler run
    side by side), so the binomial bound (expect_at_most) fails a correct
    sampler far more often than it says. Batch means instead, as for
    time_shares: e_k = events_k - p * samples_k has mean <= 0 for a
    sampler that meets p, whatever the clustering within windows; with K
    windows, sum(e_k) <= t(1 - alpha, K - 1) * sum_deviation(e) fails such
    a sampler with probability alpha (one-sided), a burst widening the
    bound by what it really did to the run."""
    K = len(windows)
    assert K >= MIN_CYCLES, f"only {K} windows: too few to judge"
    e = [k - p * n for n, k in windows]
    bound = t_quantile(2 * alpha / TAIL_FACTOR, K - 1) * sum_deviation(e)
    n_all, k_all = sum(n for n, _ in windows), sum(k for _, k in windows)
    log("share_at_most", {"k": k_all, "n": n_all, "p": p, "excess": sum(e), "bound": bound, "windows": K})
    assert sum(e) <= bound, (f"{k_all} of {n_all} is above a share of {p} by {sum(e):.1f}, beyond the {bound:.1f} "
                             f"that {K} windows' spread allows (1 run in 10,000): {detail}")


# ---- shares of sampled time ----

class Blocks:
    """What a workload really ran: (name, start, end, cpu) per block, start
    and end on CLOCK_MONOTONIC (ns, the sampler's clock), cpu the thread CPU
    time the block used (ns)."""

    def __init__(self):
        self.rows = []
        # wall clock - CLOCK_MONOTONIC, to place the history's cycles (given
        # in wall-clock time) on the blocks' clock: the closest of a few
        # readings (a microsecond off moves a cycle's edge by as much).
        pairs = []
        for _ in range(5):
            a = time.monotonic_ns()
            w = time.time_ns()
            b = time.monotonic_ns()
            pairs.append((b - a, w - (a + b) // 2))
        self.wall_offset_ns = min(pairs)[1]

    def run(self, name, fn, *args):
        """Calls fn(*args) as a block of `name`; returns what it returns."""
        t0, c0 = time.monotonic_ns(), time.thread_time_ns()
        out = fn(*args)
        c1, t1 = time.thread_time_ns(), time.monotonic_ns()
        self.rows.append((name, t0, t1, c1 - c0))
        return out

    def add(self, name, t0, t1, cpu_ns):
        self.rows.append((name, t0, t1, cpu_ns))

    def totals(self, cpu=False):
        out = {}
        for name, t0, t1, c in self.rows:
            out[name] = out.get(name, 0) + (c if cpu else t1 - t0)
        return out

    def in_window(self, lo, hi, cpu=False):
        """{name: time in [lo, hi)}: wall time, or the CPU time of the
        blocks spread evenly over their wall time."""
        out = {}
        for name, t0, t1, c in self.rows:
            a, b = max(t0, lo), min(t1, hi)
            if b > a:
                part = (b - a) if not cpu else c * (b - a) / max(t1 - t0, 1)
                out[name] = out.get(name, 0) + part
        return out


def sum_deviation(e, lags=LAGS):
    """The standard deviation of sum(e) estimated from the e_k: sqrt(K) * s,
    or more where neighbouring cycles' errors go the same way (a spell of
    load can last several cycles): the Newey-West estimate with `lags`
    lags, whichever is larger (never less than the plain one, so the
    negative correlation that spans crossing a cycle's edge bring does not
    narrow the bound)."""
    K = len(e)
    m = sum(e) / K
    g = [sum((e[k] - m) * (e[k + l] - m) for k in range(K - l)) / (K - 1) for l in range(lags + 1)]
    nw = g[0] + 2 * sum((1 - l / (lags + 1)) * g[l] for l in range(1, lags + 1))
    return math.sqrt(K * max(g[0], nw))


def time_shares(profiler, blocks, measure, thread_id=None, alpha=FALSE_FAILURE):
    """Checks the shares of the functions in `blocks` in the profile of
    `profiler` (made with cycle=CYCLE, maxlen=None) against the truth in
    `blocks` (CPU time in CPU mode), with the batch-means bound of this
    module's docstring. measure(tree dict) -> {name: time_ns} reads a
    cycle's (and the whole run's) sampled time per name from a tree.

    Returns (bad, report): bad lists the names whose error is beyond its
    bound; report has, per name, (measured share, true share, error, bound),
    and the number of cycles."""
    cpu = profiler.mode == "cpu"
    names = sorted(blocks.totals())
    entries = list(profiler.history(thread_id))
    assert entries, "the profiler kept no history: make it with cycle=CYCLE, maxlen=None"
    edges = [round(start * 1e9) - blocks.wall_offset_ns for start, _, _ in entries]
    edges = [-(1 << 62)] + edges[1:] + [1 << 62]
    sampled, truth = [], []
    for k, (_, _, tree) in enumerate(entries):
        s = measure(tree.tree())
        t = blocks.in_window(edges[k], edges[k + 1], cpu)
        if any(s.get(n, 0) for n in names) or any(t.get(n, 0) for n in names):
            sampled.append([s.get(n, 0) for n in names])
            truth.append([t.get(n, 0) for n in names])
    K = len(sampled)
    assert K >= MIN_CYCLES, f"only {K} cycles with samples: too few to judge (run longer)"
    S = [sum(col) for col in zip(*sampled)]       # sampled time per name
    T = [sum(col) for col in zip(*truth)]         # true time per name
    s_all, t_all = sum(S), sum(T)
    assert s_all > 0 and t_all > 0, (S, T)
    tq = t_quantile(alpha / TAIL_FACTOR / len(names), K - 1)
    bad, report = [], {"cycles": K}
    for i, name in enumerate(names):
        share = T[i] / t_all
        e = [(sk[i] - tk[i]) - share * (sum(sk) - sum(tk)) for sk, tk in zip(sampled, truth)]
        bound = tq * sum_deviation(e) / s_all
        error = S[i] / s_all - share
        report[name] = (round(S[i] / s_all, 4), round(share, 4), round(error, 4), round(bound, 4))
        log("share", {"name": str(name), "error": error, "bound": bound, "cycles": K, "t": round(tq, 3),
                      "e": [round(x / s_all, 6) for x in e]})
        if abs(error) > bound + SYSTEMATIC:
            bad.append(name)
    return bad, report
