"""Interleaved re-measurement: rounds in which every side runs once, then paired statistics."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

from ciq_tune.errors import MeasurementError
from ciq_tune.validation.settings import ValidationConfig
from ciq_tune.validation.statistics import ValidationResult
from ciq_tune.validation.statistics import compare_samples

Timer = Callable[[], float]
"""Runs one round and returns its value in milliseconds (or the metric's value)."""


def measure_interleaved(
    timers: Sequence[Timer],
    *,
    warmup: int,
    repetitions: int,
    rounds: list[list[float]] | None = None,
) -> list[list[float]]:
    """Run `timers` in rounds, each once per round: `warmup` untimed rounds, then
    `repetitions` timed rounds. Interleaving puts slow drift (clocks, temperature, other
    tenants) on every side equally instead of on whichever ran last, and the order within a
    round rotates every round (AB, BA, … for two; ABC, BCA, CAB, … for three), so no side
    always runs right after another.

    Args:
        timers: Each runs one round of its side.
        warmup: Untimed rounds first.
        repetitions: Timed rounds to add.
        rounds: Earlier timed rounds to continue, one list per timer (the rotation goes on
            where it stopped); extended in place.

    Returns:
        Each timer's values, one per timed round (round i of every side ran together).
    """
    for _ in range(warmup):
        for run in timers:
            run()
    out = rounds if rounds is not None else [[] for _ in timers]
    for _ in range(repetitions):
        done = len(out[0])
        for j in range(len(timers)):
            i = (done + j) % len(timers)
            out[i].append(float(timers[i]()))
    return out


def validate(
    baseline: Timer, candidate: Timer, *, config: ValidationConfig | None = None
) -> ValidationResult:
    """Re-measure a baseline and a candidate interleaved and decide whether the candidate is
    really better (`validate_each` with one candidate).

    Raises:
        MeasurementError: a round of either side failed.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> result = validate(lambda: rng.normal(1.0, 0.025), lambda: rng.normal(0.97, 0.025))
        >>> result.verdict
        'KEPT'
    """
    (result,) = validate_each(baseline, [candidate], config=config)
    if isinstance(result, MeasurementError):
        raise result
    return result


def validate_each(
    baseline: Timer, candidates: Sequence[Timer], *, config: ValidationConfig | None = None
) -> list[ValidationResult | MeasurementError]:
    """Re-measure candidates against one baseline in shared interleaved rounds (the baseline
    once per round, not once per candidate) and decide for each whether it is really better
    (paired statistics on its rounds and the baseline's, `compare_samples`).

    Each candidate is looked at after each of `config.look_rounds()` and leaves the rounds at
    the first look that decides it (KEPT, or futile: its interval's upper end below
    `min_speedup` × (1 + `futility_margin`)); the rounds stop when none is left. The tests
    share the baseline's rounds, so they are dependent: a Bonferroni correction over them
    (`config.corrected`, the caller's) holds under any dependence.

    Args:
        baseline: Runs one round of the baseline and returns its value (ms).
        candidates: Each runs one round of a candidate.
        config: Repetitions, looks, warm-up and thresholds (default: `VALIDATION_DEFAULTS`).

    Returns:
        One entry per candidate, in order: its statistics, or the `MeasurementError` that
        failed one of its rounds (it then leaves the rounds; when the baseline's round fails,
        every candidate still in them gets that error).
    """
    config = config or ValidationConfig()
    looks = config.look_rounds()
    per_look = config.corrected(len(looks))
    errors: dict[int, MeasurementError] = {}

    def guarded(i: int, run: Timer) -> Timer:
        def round_() -> float:
            if i not in errors:
                try:
                    return run()
                except MeasurementError as exc:
                    errors[i] = exc
            return math.nan

        return round_

    timers = [guarded(i, run) for i, run in enumerate(candidates)]
    base: list[float] = []
    values: list[list[float]] = [[] for _ in candidates]
    outcome: dict[int, ValidationResult | MeasurementError] = {}
    warmup = config.warmup
    for look in looks:
        open_ = [i for i in range(len(candidates)) if i not in outcome]
        if not open_:
            break
        try:
            measure_interleaved(
                [baseline, *(timers[i] for i in open_)],
                warmup=warmup,
                repetitions=look - len(base),
                rounds=[base, *(values[i] for i in open_)],
            )
        except MeasurementError as exc:
            outcome.update({i: exc for i in open_})
            break
        warmup = 0
        for i in open_:
            if i in errors:
                outcome[i] = errors[i]
                continue
            result = compare_samples(
                list(base), list(values[i]), config=per_look, measurement="interleaved"
            )
            futile = result.speedup_ci_high < config.min_speedup * (1 + config.futility_margin)
            if result.kept or futile or look == looks[-1]:
                outcome[i] = result
    return [outcome[i] for i in range(len(candidates))]


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
