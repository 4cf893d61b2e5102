"""Re-measurement statistics: interleaved timing, Welch's t, Cohen's d, bootstrap CI, verdict."""

from __future__ import annotations

import argparse
import functools
import json
import math
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

import numpy as np
from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

from ciq_tune.errors import MeasurementError

if TYPE_CHECKING:
    from ciq_tune.results import EvaluationRecord
    from ciq_tune.results import SearchResults

KEPT: Literal["KEPT"] = "KEPT"
REJECTED: Literal["REJECTED"] = "REJECTED"

VALIDATION_DEFAULTS: dict[str, Any] = {
    # Untimed rounds of each side before measuring: first launches pay for JIT, caches, clocks.
    "warmup": 5,
    # Timed repetitions per side. bench/validation_power.py at CV 2.5 %: 50 rejects a real 3 %
    # speedup in 0.2 % of trials (30: 3.7 %) and keeps pure noise in <1 % (docs/validation.md).
    "repetitions": 50,
    # Welch's two-sided p-value must be below this.
    "alpha": 0.05,
    # The lower end of the speedup's confidence interval must be above this (1.0: "faster").
    "min_speedup": 1.0,
    "confidence": 0.95,
    "n_bootstrap": 5000,
    "statistic": "median",
    "mode": "min",
    "seed": 0,
}
"""One source of the defaults of `ValidationConfig` and the `validate` command line."""

Timer = Callable[[], float]
"""Runs one repetition and returns its time in milliseconds (or the metric's value)."""

Measure = Callable[[Any], float]
"""Measures one configuration once (a fresh run) and returns its metric's value; raises
`MeasurementError` when the run fails (`objectives.make_measure` builds one per kernel)."""


class ValidationConfig(BaseModel):
    """How to re-measure and when to keep a candidate.

    Attributes:
        warmup: untimed repetitions of each side before measuring (interleaved too).
        repetitions: timed repetitions per side.
        alpha: significance level of Welch's two-sided t-test.
        min_speedup: the bootstrap confidence interval's lower bound must exceed this.
        confidence: confidence level of the bootstrap interval (two-sided).
        n_bootstrap: bootstrap resamples.
        statistic: "median" (default, robust to the launch outliers GPU timings have) or
            "mean": the speedup is the ratio of this statistic of the two samples.
        mode: "min" when lower values are better (times), "max" when higher are (throughput).
        seed: seed of the bootstrap's random generator.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    warmup: int = Field(default=VALIDATION_DEFAULTS["warmup"], ge=0)
    repetitions: int = Field(default=VALIDATION_DEFAULTS["repetitions"], ge=5)
    alpha: float = Field(default=VALIDATION_DEFAULTS["alpha"], gt=0, lt=1)
    min_speedup: float = Field(default=VALIDATION_DEFAULTS["min_speedup"], gt=0)
    confidence: float = Field(default=VALIDATION_DEFAULTS["confidence"], gt=0, lt=1)
    n_bootstrap: int = Field(default=VALIDATION_DEFAULTS["n_bootstrap"], ge=100)
    statistic: Literal["median", "mean"] = VALIDATION_DEFAULTS["statistic"]
    mode: Literal["min", "max"] = VALIDATION_DEFAULTS["mode"]
    seed: int = VALIDATION_DEFAULTS["seed"]


class SampleSummary(BaseModel):
    """Summary of one side's repetitions (in the unit of the timings, usually ms)."""

    model_config = ConfigDict(frozen=True)

    n: int
    mean: float
    median: float
    std: float
    cv: float
    min: float
    max: float

    @classmethod
    def of(cls, values: np.ndarray) -> SampleSummary:
        mean = float(np.mean(values))
        std = float(np.std(values, ddof=1))
        return cls(
            n=int(values.size),
            mean=mean,
            median=float(np.median(values)),
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
        speedup: baseline / candidate of `statistic` for "min" (candidate / baseline for
            "max"); above 1 means the candidate is better.
        speedup_ci_low: lower end of the percentile-bootstrap confidence interval.
        speedup_ci_high: upper end.
        p_value: Welch's two-sided t-test on the raw values (unequal variances).
        t_statistic: Welch's t, signed so that positive means the candidate is better.
        cohens_d: mean difference over the root mean square of the two standard deviations,
            signed so that positive means the candidate is better.
        measurement: "interleaved" (measured by `validate`, ABAB…) or "samples" (given).
    """

    model_config = ConfigDict(frozen=True)

    verdict: Literal["KEPT", "REJECTED"]
    reason: str
    speedup: float
    speedup_ci_low: float
    speedup_ci_high: float
    p_value: float
    t_statistic: float
    cohens_d: float
    baseline: SampleSummary
    candidate: SampleSummary
    measurement: Literal["interleaved", "samples"]
    config: ValidationConfig

    @property
    def kept(self) -> bool:
        return self.verdict == KEPT

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe statistics, for the `validation` field of a controls file."""
        return _json_safe(self.model_dump(mode="python"))


class CandidateValidation(BaseModel):
    """One of a finished search's top-k candidates, re-measured against the baseline.

    Attributes:
        rank: the candidate's place in the search's order (1: the search's best).
        candidate_id: the engine's id of the evaluation.
        config: the candidate's configuration.
        search_values: the objective values the search recorded (optimistic, see
            `validate_top_k`).
        result: the re-measurement's statistics; None when it failed.
        error: why the re-measurement failed (a run that crashed, timed out or was wrong).
    """

    model_config = ConfigDict(frozen=True)

    rank: int
    candidate_id: int
    config: Any
    search_values: dict[str, float]
    result: ValidationResult | None
    error: str | None = None

    @property
    def kept(self) -> bool:
        return self.result is not None and self.result.kept

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the statistics of `ValidationResult.to_dict` (whose `config` holds the
        validation settings) plus the candidate's identity, `candidate_config` and values."""
        head = {
            "rank": self.rank,
            "candidate_id": self.candidate_id,
            "candidate_config": self.config,
            "search_values": _json_safe(self.search_values),
        }
        if self.result is None:
            return {**head, "verdict": REJECTED, "reason": f"re-measurement failed: {self.error}"}
        return {**head, **self.result.to_dict()}


class SearchValidation(BaseModel):
    """The end of a search: its top-k re-measured against the baseline, and what to ship.

    Attributes:
        outcome: "kept" (`winner` was KEPT and is the configuration to ship), "baseline" (no
            candidate was kept: ship the baseline) or "skipped" (nothing was re-measured; the
            search's best is shipped unvalidated, `reason` says why).
        reason: one sentence saying why.
        top_k: how many candidates were asked for.
        settings: the validation settings before the Bonferroni correction.
        baseline_config: the configuration every candidate was compared with.
        winner: the KEPT candidate with the highest re-measured speedup (outcome "kept").
        candidates: every re-measured candidate in the search's order.
    """

    model_config = ConfigDict(frozen=True)

    outcome: Literal["kept", "baseline", "skipped"]
    reason: str
    top_k: int
    settings: ValidationConfig | None = None
    baseline_config: Any = None
    winner: CandidateValidation | None = None
    candidates: list[CandidateValidation] = Field(default_factory=list)

    def summary(self) -> str:
        """The outcome and one line per re-measured candidate, for a terminal."""
        lines = [f"validation: {self.outcome}: {self.reason}"]
        for c in self.candidates:
            head = f"  #{c.rank} candidate {c.candidate_id}: "
            r = c.result
            if r is None:
                lines.append(f"{head}REJECTED, re-measurement failed: {c.error}")
                continue
            lines.append(
                f"{head}{r.verdict}, speedup {r.speedup:.4f} (CI {r.speedup_ci_low:.4f}–"
                f"{r.speedup_ci_high:.4f}), Welch p={r.p_value:.3g}, Cohen's d={r.cohens_d:.2f}, "
                f"n={r.baseline.n}+{r.candidate.n}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, for the controls file's `validation` field and `validation.json`."""
        return {
            "method": "search_top_k",
            "outcome": self.outcome,
            "reason": self.reason,
            "top_k": self.top_k,
            "settings": None if self.settings is None else self.settings.model_dump(mode="json"),
            "baseline_config": self.baseline_config,
            "winner": None if self.winner is None else self.winner.to_dict(),
            "candidates": [c.to_dict() for c in self.candidates],
        }


def compare_samples(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    config: ValidationConfig | None = None,
    measurement: Literal["interleaved", "samples"] = "samples",
) -> ValidationResult:
    """Compare already-collected repetitions of a baseline and a candidate.

    Args:
        baseline: one value per repetition of the baseline (e.g. ms).
        candidate: one value per repetition of the candidate, same unit.
        config: thresholds, statistic and direction (default: `VALIDATION_DEFAULTS`).
        measurement: how the samples were obtained, recorded in the result.

    Raises:
        MeasurementError: a sample has fewer than 3 values, or a non-finite or non-positive one.
    """
    from scipy import stats

    config = config or ValidationConfig()
    b = _checked("baseline", baseline)
    c = _checked("candidate", candidate)
    better = 1.0 if config.mode == "min" else -1.0
    center = np.median if config.statistic == "median" else np.mean

    def ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        # Speedup of y over x: >1 when y is better, for both directions.
        cx, cy = center(x, axis=axis), center(y, axis=axis)
        return np.asarray(cx / cy if config.mode == "min" else cy / cx)

    boot = stats.bootstrap(
        (b, c),
        ratio,
        n_resamples=config.n_bootstrap,
        vectorized=True,
        paired=False,
        confidence_level=config.confidence,
        method="percentile",
        rng=np.random.default_rng(config.seed),
    )
    welch = stats.ttest_ind(b, c, equal_var=False)
    spread = math.sqrt((np.var(b, ddof=1) + np.var(c, ddof=1)) / 2)
    mean_gain = better * (np.mean(b) - np.mean(c))
    cohens_d = mean_gain / spread if spread > 0 else math.copysign(math.inf, mean_gain)
    speedup = float(ratio(b, c))
    low, high = float(boot.confidence_interval.low), float(boot.confidence_interval.high)
    p_value = float(welch.pvalue)
    verdict, reason = _verdict(speedup, low, p_value, config)
    return ValidationResult(
        verdict=verdict,
        reason=reason,
        speedup=speedup,
        speedup_ci_low=low,
        speedup_ci_high=high,
        p_value=p_value,
        t_statistic=better * float(welch.statistic),
        cohens_d=float(cohens_d),
        baseline=SampleSummary.of(b),
        candidate=SampleSummary.of(c),
        measurement=measurement,
        config=config,
    )


def measure_interleaved(
    baseline: Timer, candidate: Timer, *, warmup: int, repetitions: int
) -> tuple[list[float], list[float]]:
    """Run baseline and candidate alternately (ABAB…): `warmup` untimed rounds, then
    `repetitions` timed rounds. Alternating puts slow drift (clocks, temperature, other
    tenants) on both sides equally instead of on whichever ran second.

    Returns:
        The baseline's and the candidate's values, one per timed round.
    """
    for _ in range(warmup):
        baseline()
        candidate()
    b: list[float] = []
    c: list[float] = []
    for _ in range(repetitions):
        b.append(float(baseline()))
        c.append(float(candidate()))
    return b, c


def validate(
    baseline: Timer, candidate: Timer, *, config: ValidationConfig | None = None
) -> ValidationResult:
    """Re-measure a baseline and a candidate interleaved and decide whether the candidate is
    really better.

    Args:
        baseline: runs one repetition of the baseline and returns its time (ms).
        candidate: runs one repetition of the candidate and returns its time (ms).
        config: repetitions, warm-up and thresholds (default: `VALIDATION_DEFAULTS`).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> result = validate(lambda: rng.normal(1.0, 0.025), lambda: rng.normal(0.97, 0.025))
        >>> result.verdict
        'KEPT'
    """
    config = config or ValidationConfig()
    b, c = measure_interleaved(
        baseline, candidate, warmup=config.warmup, repetitions=config.repetitions
    )
    return compare_samples(b, c, config=config, measurement="interleaved")


def validate_top_k(
    results: SearchResults,
    runner_for: Callable[[EvaluationRecord], Timer],
    baseline: Timer,
    *,
    k: int = 3,
    config: ValidationConfig | None = None,
) -> list[CandidateValidation]:
    """Re-measure the `k` best candidates of a finished search, each against the baseline.

    A search's best values are optimistic (the winner of many noisy measurements is partly
    the luckiest), so each candidate is measured afresh. With `k` tests the chance that at
    least one noise-only candidate passes grows up to `k` times, so the Bonferroni correction
    is applied: alpha / k and a (1 - (1 - confidence) / k) interval per candidate.

    Args:
        results: the finished search (`engine.result()`).
        runner_for: builds the timer of one candidate from its evaluation record.
        baseline: timer of the baseline (compiler defaults).
        k: how many of the best candidates to re-measure.
        config: per-test thresholds before the correction (default: `VALIDATION_DEFAULTS`).

    Returns:
        One entry per candidate in the search's order; a candidate whose re-measurement raised
        `MeasurementError` is REJECTED with the error (`validate_search` picks the winner).
    """
    _check_k(k)
    config = config or ValidationConfig()
    best = results.best(k)
    if not best:
        raise MeasurementError("`results` has no successful evaluation to validate")
    corrected = config.model_copy(
        update={
            "alpha": config.alpha / len(best),
            "confidence": 1 - (1 - config.confidence) / len(best),
        }
    )
    out = []
    for rank, record in enumerate(best, start=1):
        result, error = None, None
        try:
            result = validate(baseline, runner_for(record), config=corrected)
        except MeasurementError as exc:
            # One candidate that fails on re-measurement is not shipped; the others still count.
            error = str(exc)
        out.append(
            CandidateValidation(
                rank=rank,
                candidate_id=record.candidate_id,
                config=record.config,
                search_values=dict(record.values or {}),
                result=result,
                error=error,
            )
        )
    return out


def validate_search(
    results: SearchResults,
    measure: Measure,
    baseline_config: Any,
    *,
    k: int = 3,
    config: ValidationConfig | None = None,
) -> SearchValidation:
    """Re-measure the `k` best distinct configurations of a finished search against the
    baseline and choose the one to ship.

    The baseline is left out of the top-k (it is what each candidate is compared with). Each
    candidate is measured interleaved with the baseline, Bonferroni-corrected
    (`validate_top_k`). Of the KEPT candidates, the one with the highest re-measured speedup
    wins: fresh measurements are not biased by the selection the way the search's values are.
    When none is kept, the baseline is what to ship.

    Args:
        results: the finished search (one objective; its direction replaces `config.mode`).
        measure: runs one configuration once and returns the metric (injectable: a synthetic
            benchmark in tests, `objectives.make_measure(description)` for a real kernel).
        baseline_config: the configuration to beat (the compiler defaults).
        k: how many of the best candidates to re-measure.
        config: repetitions and per-test thresholds (default: `VALIDATION_DEFAULTS`).

    Raises:
        MeasurementError: `k` < 1, or the search has several objectives.
    """
    _check_k(k)
    if len(results.objectives) != 1:
        names = [o.name for o in results.objectives]
        raise MeasurementError(
            f"`results` must have one objective to validate against a baseline, got {names}"
        )
    config = (config or ValidationConfig()).model_copy(update={"mode": results.objectives[0].mode})
    others = [r for r in results.records if r.config != baseline_config]
    common = {"top_k": k, "settings": config, "baseline_config": baseline_config}
    if not any(r.ok for r in others):
        return SearchValidation(
            outcome="baseline",
            reason="no configuration other than the baseline ran successfully",
            **common,
        )
    checks = validate_top_k(
        type(results)(results.objectives, others),
        lambda record: functools.partial(measure, record.config),
        functools.partial(measure, baseline_config),
        k=k,
        config=config,
    )
    kept = [(c, c.result) for c in checks if c.result is not None and c.result.kept]
    if not kept:
        return SearchValidation(
            outcome="baseline",
            reason=f"none of the {len(checks)} best candidates was KEPT against the baseline",
            candidates=checks,
            **common,
        )
    winner, stats = max(kept, key=lambda pair: pair[1].speedup)
    return SearchValidation(
        outcome="kept",
        reason=f"candidate {winner.candidate_id} (search rank {winner.rank}) KEPT: {stats.reason}",
        winner=winner,
        candidates=checks,
        **common,
    )


def _check_k(k: int) -> None:
    if k < 1:
        raise MeasurementError(f"`k` must be a positive number of candidates, got k={k}")


def load_timings(path: str | Path) -> list[float]:
    """Read repetitions from a file: a JSON list (or an object with `times_ms`), or text with
    numbers separated by whitespace or commas (`#` starts a comment).

    Raises:
        MeasurementError: the file is unreadable or holds something other than numbers.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise MeasurementError(f"cannot read timings file {str(path)!r}: {exc}") from exc
    if path.suffix == ".json":
        data = json.loads(text)
        values = data.get("times_ms") if isinstance(data, dict) else data
        if not isinstance(values, list):
            raise MeasurementError(
                f"{path}: a JSON timings file is a list of numbers or {{'times_ms': [...]}}"
            )
        tokens = values
    else:
        lines = (line.split("#", 1)[0] for line in text.splitlines())
        tokens = [t for line in lines for t in line.replace(",", " ").split()]
    try:
        return [float(t) for t in tokens]
    except (TypeError, ValueError) as exc:
        raise MeasurementError(f"{path}: not a number in the timings: {exc}") from exc


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `ciq-tune validate` (statistics over two files of collected timings)."""
    parser.add_argument("baseline", type=Path, help="baseline timings (JSON list or text)")
    parser.add_argument("candidate", type=Path, help="candidate timings, same unit")
    d = VALIDATION_DEFAULTS
    parser.add_argument(
        "--alpha",
        type=float,
        default=d["alpha"],
        help="Welch's two-sided p must be below this (default %(default)s)",
    )
    parser.add_argument(
        "--min-speedup",
        type=float,
        default=d["min_speedup"],
        help="the CI's lower bound must exceed this (default %(default)s)",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=d["confidence"],
        help="level of the bootstrap CI (default %(default)s)",
    )
    parser.add_argument(
        "--bootstrap", type=int, default=d["n_bootstrap"], help="resamples (default %(default)s)"
    )
    parser.add_argument(
        "--statistic",
        choices=["median", "mean"],
        default=d["statistic"],
        help="the speedup is the ratio of this statistic (default %(default)s)",
    )
    parser.add_argument(
        "--mode", choices=["min", "max"], default=d["mode"], help="min: lower is better (times)"
    )
    parser.add_argument(
        "--seed", type=int, default=d["seed"], help="bootstrap seed (default %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.add_argument(
        "--controls",
        type=Path,
        metavar="FILE",
        help="store the statistics in this controls file's `validation` field",
    )


def validate_main(args: argparse.Namespace) -> int:
    """Run `ciq-tune validate`; exit status 0 when KEPT, 1 when REJECTED."""
    config = ValidationConfig(
        alpha=args.alpha,
        min_speedup=args.min_speedup,
        confidence=args.confidence,
        n_bootstrap=args.bootstrap,
        statistic=args.statistic,
        mode=args.mode,
        seed=args.seed,
    )
    result = compare_samples(
        load_timings(args.baseline), load_timings(args.candidate), config=config
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(format_result(result))
    if args.controls is not None:
        from ciq_tune.controls import controls_file as cf

        loaded = cf.load(args.controls)
        cf.write(args.controls, loaded.model_copy(update={"validation": result.to_dict()}))
    return 0 if result.kept else 1


def format_result(result: ValidationResult) -> str:
    """Two human-readable lines: the verdict and the statistics behind it."""
    cfg = result.config
    return (
        f"{result.verdict}: {result.reason}\n"
        f"speedup {result.speedup:.4f} (ratio of {cfg.statistic}s, "
        f"{100 * cfg.confidence:g}% CI {result.speedup_ci_low:.4f}–{result.speedup_ci_high:.4f}), "
        f"Welch p={result.p_value:.3g}, Cohen's d={result.cohens_d:.2f}, "
        f"n={result.baseline.n}+{result.candidate.n}, "
        f"CV {100 * result.baseline.cv:.2f}%/{100 * result.candidate.cv:.2f}%"
    )


def _verdict(
    speedup: float, ci_low: float, p_value: float, config: ValidationConfig
) -> tuple[Literal["KEPT", "REJECTED"], str]:
    if not p_value < config.alpha:
        return REJECTED, (
            f"the difference is not significant (Welch p={p_value:.3g} >= alpha={config.alpha:g})"
        )
    if not ci_low > config.min_speedup:
        where = "better" if speedup > 1 else "worse"
        return REJECTED, (
            f"the candidate is {where} (speedup {speedup:.4f}) but the CI lower bound "
            f"{ci_low:.4f} is not above min_speedup={config.min_speedup:g}"
        )
    return KEPT, (
        f"speedup {speedup:.4f} with CI lower bound {ci_low:.4f} > {config.min_speedup:g} and "
        f"Welch p={p_value:.3g} < {config.alpha:g}"
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


def _json_safe(value: Any) -> Any:
    # YAML and JSON readers disagree on inf/nan; a zero-variance sample gives Cohen's d = inf.
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
