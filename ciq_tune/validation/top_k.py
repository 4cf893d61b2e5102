"""The end of a search: its top-k candidates re-measured against the baseline, and the winner."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field

from ciq_tune.errors import MeasurementError
from ciq_tune.validation.interleaved import Timer
from ciq_tune.validation.interleaved import validate_each
from ciq_tune.validation.settings import REJECTED
from ciq_tune.validation.settings import ValidationConfig
from ciq_tune.validation.statistics import ValidationResult
from ciq_tune.validation.statistics import json_safe

if TYPE_CHECKING:
    from ciq_tune.results import EvaluationRecord
    from ciq_tune.results import SearchResults

Measure = Callable[[Any], float]
"""Measures one configuration once (one round of the measurement protocol) and returns its
metric's value; raises `MeasurementError` when the run fails (`objectives.make_measure` builds
one per kernel)."""


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
            "search_values": json_safe(self.search_values),
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
        simplification: the winner with only the controls and parameter values that earn
            their place (`ciq_tune.controls.simplify.simplify_timed`: ``config``, ``dropped``,
            ``kept``), when it was simplified; the file ships its ``config``.
    """

    model_config = ConfigDict(frozen=True)

    outcome: Literal["kept", "baseline", "skipped"]
    reason: str
    top_k: int
    settings: ValidationConfig | None = None
    baseline_config: Any = None
    winner: CandidateValidation | None = None
    candidates: list[CandidateValidation] = Field(default_factory=list)
    simplification: dict[str, Any] | None = None

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
                f"{r.speedup_ci_high:.4f}), {r.test} p={r.p_value:.3g}, effect d={r.cohens_d:.2f}, "
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
            "simplification": json_safe(self.simplification),
        }


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
    the luckiest), so each candidate is measured afresh, all in shared interleaved rounds with
    the baseline (`validate_each`). With `k` tests the chance that at
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
    measured = validate_each(
        baseline, [runner_for(record) for record in best], config=config.corrected(len(best))
    )
    out = []
    for rank, (record, result) in enumerate(zip(best, measured, strict=True), start=1):
        # One candidate that fails on re-measurement is not shipped; the others still count.
        error = result if isinstance(result, MeasurementError) else None
        out.append(
            CandidateValidation(
                rank=rank,
                candidate_id=record.candidate_id,
                config=record.config,
                search_values=dict(record.values or {}),
                result=None if isinstance(result, MeasurementError) else result,
                error=None if error is None else str(error),
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

    The baseline is left out of the top-k (it is what each candidate is compared with), and so
    is every configuration whose search value did not beat the baseline's. Each candidate is
    measured interleaved with the baseline, Bonferroni-corrected
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
    objective = results.objectives[0]
    base = next((r for r in results.records if r.ok and r.config == baseline_config), None)
    if base is not None and base.values is not None:
        reference = base.values[objective.name]
        sign = 1 if objective.mode == "min" else -1
        # Only a configuration the search saw faster can be shown faster: re-measuring the
        # others would spend rounds on comparisons that can only reject.
        others = [
            r
            for r in others
            if r.ok and r.values is not None and sign * r.values[objective.name] < sign * reference
        ]
        if not others:
            return SearchValidation(
                outcome="baseline",
                reason=f"no configuration beat the baseline's {objective.name} {reference:.5g} "
                "in the search",
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
