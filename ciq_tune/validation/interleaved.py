"""Interleaved re-measurement of two timers: rounds that alternate, then the paired statistics."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ciq_tune.validation.settings import ValidationConfig
from ciq_tune.validation.statistics import ValidationResult
from ciq_tune.validation.statistics import compare_samples

Timer = Callable[[], float]
"""Runs one round and returns its value in milliseconds (or the metric's value)."""


def measure_interleaved(
    baseline: Timer,
    candidate: Timer,
    *,
    warmup: int,
    repetitions: int,
    rounds: tuple[list[float], list[float]] | None = None,
) -> tuple[list[float], list[float]]:
    """Run baseline and candidate in alternating rounds: `warmup` untimed rounds, then
    `repetitions` timed rounds. Alternating puts slow drift (clocks, temperature, other
    tenants) on both sides equally instead of on whichever ran second, and the order within a
    round flips every round (AB, BA, AB, …), so neither side always runs right after the other.

    Args:
        baseline: Runs one round of the baseline.
        candidate: Runs one round of the candidate.
        warmup: Untimed rounds first.
        repetitions: Timed rounds to add.
        rounds: Earlier timed rounds to continue (the order keeps flipping where it stopped).

    Returns:
        The baseline's and the candidate's values, one per timed round (pairs).
    """
    for _ in range(warmup):
        baseline()
        candidate()
    b, c = rounds if rounds is not None else ([], [])
    for _ in range(repetitions):
        if len(b) % 2 == 0:
            b.append(float(baseline()))
            c.append(float(candidate()))
        else:
            c.append(float(candidate()))
            b.append(float(baseline()))
    return b, c


def validate(
    baseline: Timer, candidate: Timer, *, config: ValidationConfig | None = None
) -> ValidationResult:
    """Re-measure a baseline and a candidate interleaved and decide whether the candidate is
    really better (paired statistics, `compare_samples`), looking at the rounds so far at each
    of `config.look_rounds()` and stopping at the first look that decides (see
    `ValidationConfig.looks`).

    Args:
        baseline: runs one round of the baseline and returns its time (ms).
        candidate: runs one round of the candidate and returns its time (ms).
        config: repetitions, looks, warm-up and thresholds (default: `VALIDATION_DEFAULTS`).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> result = validate(lambda: rng.normal(1.0, 0.025), lambda: rng.normal(0.97, 0.025))
        >>> result.verdict
        'KEPT'
    """
    config = config or ValidationConfig()
    looks = config.look_rounds()
    per_look = config.corrected(len(looks))
    rounds: tuple[list[float], list[float]] = ([], [])
    warmup = config.warmup
    for look in looks:
        rounds = measure_interleaved(
            baseline, candidate, warmup=warmup, repetitions=look - len(rounds[0]), rounds=rounds
        )
        warmup = 0
        result = compare_samples(*rounds, config=per_look, measurement="interleaved")
        futile = result.speedup_ci_high < config.min_speedup * (1 + config.futility_margin)
        if result.kept or futile:
            break
    return result


class RoundCounter:
    """Counts the rounds a validation runs and the seconds they take, for the line that says
    where its time went (the rest is statistics and building the timers)."""

    def __init__(self) -> None:
        self.rounds = 0
        self.seconds = 0.0

    def counted(self, run: Callable[..., float]) -> Callable[..., float]:
        """`run`, each call counted as a round."""

        def round_(*args: Any) -> float:
            t0 = time.perf_counter()
            try:
                return run(*args)
            finally:
                self.rounds += 1
                self.seconds += time.perf_counter() - t0

        return round_

    def summary(self, wall_s: float) -> str:
        """``N rounds in X s of the Y s``."""
        return f"{self.rounds} rounds in {self.seconds:.1f} s of the {wall_s:.1f} s"
