"""Statistics of a re-measurement: the ratio of medians, its bootstrap CI, a rank test, a verdict.

One statistic throughout: the speedup is the ratio of the two sides' medians (baseline /
candidate for times), whose percentile-bootstrap interval decides together with a rank test.
Interleaved rounds are pairs (round i of the baseline ran next to round i of the candidate, on
the same clock and temperature), so they are compared as pairs: a paired bootstrap that resamples
whole rounds, and the Wilcoxon signed-rank test on the per-round log ratios. Samples collected
separately are compared as independent: an unpaired bootstrap and the Mann-Whitney U test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from typing import Literal

import numpy as np
from pydantic import BaseModel
from pydantic import ConfigDict

from ciq_tune.errors import MeasurementError
from ciq_tune.validation.settings import KEPT
from ciq_tune.validation.settings import REJECTED
from ciq_tune.validation.settings import ValidationConfig

Measurement = Literal["interleaved", "samples"]


class SampleSummary(BaseModel):
    """Summary of one side's repetitions (in the unit of the timings, usually ms); the median
    carries its percentile-bootstrap interval (`median_ci`)."""

    model_config = ConfigDict(frozen=True)

    n: int
    mean: float
    median: float
    std: float
    cv: float
    min: float
    max: float
    median_ci_low: float
    median_ci_high: float

    @classmethod
    def of(cls, values: np.ndarray, config: ValidationConfig) -> SampleSummary:
        mean = float(np.mean(values))
        std = float(np.std(values, ddof=1))
        low, high = median_ci(values.tolist(), config=config)
        return cls(
            n=int(values.size),
            mean=mean,
            median=float(np.median(values)),
            median_ci_low=low,
            median_ci_high=high,
            std=std,
            cv=std / mean,
            min=float(np.min(values)),
            max=float(np.max(values)),
        )


class ValidationResult(BaseModel):
    """The comparison of a candidate with the baseline, and the verdict.

    Attributes:
        verdict: "KEPT" when p < alpha and the speedup's CI lower bound > min_speedup.
        reason: one sentence saying why.
        speedup: ratio of medians, baseline / candidate for "min" (candidate / baseline for
            "max"); above 1 means the candidate is better.
        speedup_ci_low: lower end of the percentile-bootstrap confidence interval (paired
            bootstrap over rounds for interleaved measurements).
        speedup_ci_high: upper end.
        p_value: the two-sided p-value of `test`.
        test: "wilcoxon" (signed-rank test on the per-round log ratios: interleaved, paired)
            or "mann_whitney" (U test: independent samples).
        cohens_d: effect size, positive when the candidate is better: for pairs the mean of
            the per-round log ratios over their standard deviation (d_z); for independent
            samples the mean difference over the root mean square of the two standard
            deviations.
        measurement: "interleaved" (measured by `validate`, paired rounds) or "samples"
            (given, independent).
    """

    model_config = ConfigDict(frozen=True)

    verdict: Literal["KEPT", "REJECTED"]
    reason: str
    speedup: float
    speedup_ci_low: float
    speedup_ci_high: float
    p_value: float
    test: Literal["wilcoxon", "mann_whitney"]
    cohens_d: float
    baseline: SampleSummary
    candidate: SampleSummary
    measurement: Measurement
    config: ValidationConfig

    @property
    def kept(self) -> bool:
        return self.verdict == KEPT

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe statistics, for the `validation` field of a controls file."""
        return json_safe(self.model_dump(mode="python"))


def compare_samples(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    config: ValidationConfig | None = None,
    measurement: Measurement = "samples",
) -> ValidationResult:
    """Compare repetitions of a baseline and a candidate: ratio of medians, CI, test, verdict.

    Args:
        baseline: one value per repetition (round) of the baseline (e.g. ms).
        candidate: one value per repetition of the candidate, same unit.
        config: thresholds and direction (default: `VALIDATION_DEFAULTS`); pass
            `config.corrected(m)` when this is one of m comparisons.
        measurement: "interleaved" when round i of both sides ran together (paired: the two
            sequences must have the same length), "samples" when they were collected apart.

    Raises:
        MeasurementError: a sample has fewer than 3 values, or a non-finite or non-positive
            one, or interleaved samples differ in length.
    """
    from scipy import stats

    config = config or ValidationConfig()
    b = _checked("baseline", baseline)
    c = _checked("candidate", candidate)
    paired = measurement == "interleaved"
    if paired and b.size != c.size:
        raise MeasurementError(
            f"interleaved samples are pairs of rounds: `baseline` has {b.size} values, "
            f"`candidate` {c.size}"
        )

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        # Speedup of y over x: >1 when y is better, for both directions.
        mx, my = np.median(x, axis=axis), np.median(y, axis=axis)
        return np.asarray(mx / my if config.mode == "min" else my / mx)

    boot = stats.bootstrap(
        (b, c),
        ratio,
        n_resamples=config.n_bootstrap,
        vectorized=True,
        paired=paired,
        confidence_level=config.confidence,
        method="percentile",
        rng=np.random.default_rng(config.seed),
    )
    better = 1.0 if config.mode == "min" else -1.0
    test: Literal["wilcoxon", "mann_whitney"]
    if paired:
        gains = better * (np.log(b) - np.log(c))  # per-round log speedups
        p_value = _wilcoxon(gains)
        test = "wilcoxon"
        spread = float(np.std(gains, ddof=1))
        mean_gain = float(np.mean(gains))
    else:
        p_value = float(stats.mannwhitneyu(b, c, alternative="two-sided").pvalue)
        test = "mann_whitney"
        spread = math.sqrt((np.var(b, ddof=1) + np.var(c, ddof=1)) / 2)
        mean_gain = float(better * (np.mean(b) - np.mean(c)))
    if spread > 0:
        cohens_d = mean_gain / spread
    else:
        cohens_d = math.copysign(math.inf, mean_gain) if mean_gain else 0.0
    speedup = float(ratio(b, c))
    low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    verdict, reason = _verdict(speedup, low, p_value, test, config)
    return ValidationResult(
        verdict=verdict,
        reason=reason,
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
        p_value=p_value,
        test=test,
        cohens_d=float(cohens_d),
        baseline=SampleSummary.of(b, config),
        candidate=SampleSummary.of(c, config),
        measurement=measurement,
        config=config,
    )


def median_ci(
    values: Sequence[float], *, config: ValidationConfig | None = None
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the median of `values` (one side's rounds),
    at `config.confidence` with `config.n_bootstrap` resamples: the interval every published
    re-measured median carries.

    Raises:
        MeasurementError: fewer than 3 values, or a non-finite or non-positive one.
    """
    from scipy import stats

    config = config or ValidationConfig()
    array = _checked("values", values)
    boot = stats.bootstrap(
        (array,),
        np.median,
        n_resamples=config.n_bootstrap,
        vectorized=True,
        confidence_level=config.confidence,
        method="percentile",
        rng=np.random.default_rng(config.seed),
    )
    return float(boot.confidence_interval.low), float(boot.confidence_interval.high)


def _wilcoxon(gains: np.ndarray) -> float:
    from scipy import stats

    if not np.any(gains):
        return 1.0  # every pair identical: no evidence of any difference
    return float(stats.wilcoxon(gains, alternative="two-sided").pvalue)


_TEST_NAMES = {"wilcoxon": "Wilcoxon signed-rank", "mann_whitney": "Mann-Whitney U"}


def format_result(result: ValidationResult) -> str:
    """Two human-readable lines: the verdict and the statistics behind it."""
    cfg = result.config
    return (
        f"{result.verdict}: {result.reason}\n"
        f"speedup {result.speedup:.4f} (ratio of medians, "
        f"{100 * cfg.confidence:g}% CI {result.speedup_ci_low:.4f}–{result.speedup_ci_high:.4f}), "
        f"{_TEST_NAMES[result.test]} p={result.p_value:.3g}, effect d={result.cohens_d:.2f}, "
        f"n={result.baseline.n}+{result.candidate.n} ({result.measurement}), "
        f"CV {100 * result.baseline.cv:.2f}%/{100 * result.candidate.cv:.2f}%"
    )


def _verdict(
    speedup: float, ci_low: float, p_value: float, test: str, config: ValidationConfig
) -> tuple[Literal["KEPT", "REJECTED"], str]:
    name = _TEST_NAMES[test]
    if not p_value < config.alpha:
        return REJECTED, (
            f"the difference is not significant ({name} p={p_value:.3g} >= "
            f"alpha={config.alpha:.3g})"
        )
    if not ci_low > config.min_speedup:
        where = "better" if speedup > 1 else "worse"
        return REJECTED, (
            f"the candidate is {where} (speedup {speedup:.4f}) but the CI lower bound "
            f"{ci_low:.4f} is not above min_speedup={config.min_speedup:g}"
        )
    return KEPT, (
        f"speedup {speedup:.4f} with CI lower bound {ci_low:.4f} > {config.min_speedup:g} and "
        f"{name} p={p_value:.3g} < {config.alpha:.3g}"
    )


def _checked(name: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size < 3:
        raise MeasurementError(
            f"`{name}` needs at least 3 repetitions in a flat sequence, got shape {array.shape}"
        )
    bad = array[~np.isfinite(array) | (array <= 0)]
    if bad.size:
        raise MeasurementError(
            f"`{name}` must hold finite positive values, got {bad.size} bad ones "
            f"(first: {bad[0]!r})"
        )
    return array


def json_safe(value: Any) -> Any:
    """`value` with non-finite floats as strings: YAML and JSON readers disagree on inf/nan,
    and a zero-variance sample gives an infinite effect size."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
