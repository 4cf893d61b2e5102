"""Search-efficiency metrics over best-fraction traces (fraction = optimum / best time found)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import gammaln

from bench.replay import Problem

TARGETS = (0.90, 0.95, 0.98)
BUDGETS = (25, 50, 100, 200, 400, 800)
# The methodology's cutoff: scores cover the evaluations random search needs, in expectation,
# to reach this fraction of the optimum (Willemsen et al., FGCS 2024, "cutoff percentile").
SCORE_CUTOFF = 0.95


def evals_to(trace: Sequence[float], target: float) -> int | None:
    """Unique evaluations until the best fraction first reaches `target` (None if never)."""
    for i, fraction in enumerate(trace):
        if fraction >= target - 1e-12:
            return i + 1
    return None


def median_evals(counts: Sequence[int | None]) -> float | None:
    """Median over seeds, a run that never reached the target counting as infinitely long;
    None when the median itself is not reached (half or more of the runs failed)."""
    values = np.array([math.inf if c is None else c for c in counts], dtype=float)
    median = float(np.median(values))
    return None if math.isinf(median) or math.isnan(median) else median


def mean_fraction(traces: Sequence[Sequence[float]], budget: int) -> float | None:
    """Mean over seeds of the best fraction after `budget` unique evaluations (None when the
    runs were shorter than `budget`)."""
    if not traces or len(traces[0]) < budget:
        return None
    return float(np.mean([t[budget - 1] for t in traces]))


def random_expected_best_time(problem: Problem, length: int) -> np.ndarray:
    """Expected best time of uniform random search without replacement after k = 1..length
    unique draws (closed form). A failure counts as the worst valid time, so that the curve is
    finite before the first valid draw.

    With the N feasible times sorted ascending, the best of k draws is the i-th smallest with
    probability C(N-i, k-1) / C(N, k).
    """
    worst = max(t for t in problem.times.values() if t is not None)
    times = np.sort([worst if t is None else t for t in problem.times.values()])
    n = len(times)
    i = np.arange(1, n + 1)
    out = np.empty(length)
    for k in range(1, length + 1):
        if k > n:
            out[k - 1] = times[0]
            continue
        with np.errstate(invalid="ignore"):
            log_p = _log_comb(n - i, k - 1) - _log_comb(np.array(n), k)
        p = np.where(n - i >= k - 1, np.exp(log_p), 0.0)
        out[k - 1] = float(np.dot(p, times))
    return out


def _log_comb(n: np.ndarray, k: int) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def methodology_score(problem: Problem, traces: Sequence[Sequence[float]]) -> float | None:
    """Kernel Tuner methodology score relative to random search (Willemsen et al., FGCS 2024).

    Over k = 1..T unique evaluations, T being the closed-form expected evaluations of random
    search to reach `SCORE_CUTOFF` of the optimum, the mean of
    (B(k) - S(k)) / (B(k) - optimum), where B is random search's expected best time and S the
    tuner's best time averaged over seeds. 1: the optimum at once; 0: as good as random
    search; below 0: worse. None when the traces are shorter than T.
    """
    length = math.ceil(problem.random_expected_evals(SCORE_CUTOFF))
    if not traces or len(traces[0]) < length:
        return None
    baseline = random_expected_best_time(problem, length)
    worst = max(t for t in problem.times.values() if t is not None)
    best_times = np.array(
        [[problem.optimum / f if f > 0 else worst for f in t[:length]] for t in traces]
    )
    strategy = best_times.mean(axis=0)
    gap = baseline - problem.optimum
    usable = gap > 0
    if not usable.any():
        return None
    return float(np.mean((baseline[usable] - strategy[usable]) / gap[usable]))
