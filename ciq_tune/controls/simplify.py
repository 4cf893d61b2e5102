"""Simplify a winning configuration: drop the compiler controls that do not earn their place,
exactly for a metric a recompile reproduces (`simplify_controls`), by a paired re-measurement for
a timed one (`simplify_timed`)."""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from typing import Any

from ciq_tune.errors import CiqTuneError
from ciq_tune.results import SearchResults
from ciq_tune.validation import SearchValidation
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import validate
from ciq_tune.validation import validate_search


def simplify_controls(
    config: Any,
    value: float,
    measure: Callable[[Any], float],
    *,
    mode: str,
    rel_tolerance: float = 0.0,
) -> tuple[Any, dict[str, dict[str, Any]]]:
    """Drop the winner's controls one at a time while a fresh measurement stays as good.

    Controls are tried in catalog, then name order; each is dropped (the compiler's default
    is used) when the configuration without it measures no worse than `value` — exactly, for
    a metric a recompile reproduces (`rel_tolerance=0`, e.g. PTX spill bytes), or within
    `rel_tolerance` of it. Every comparison is against the winner's own `value`, so small
    losses cannot add up. A measurement that fails keeps the control.

    Args:
        config: the winning configuration (`{"controls": {catalog: {name: value}}, ...}`).
        value: the winner's metric.
        measure: one fresh measurement of a configuration's metric (raises on failure).
        mode: "min" or "max".
        rel_tolerance: the relative change counted as no change (0: exact equality).

    Returns:
        The simplified configuration and the dropped controls by catalog.
    """
    if mode not in ("min", "max"):
        raise ValueError(f"`mode` must be 'min' or 'max', got mode={mode!r}")
    if not rel_tolerance >= 0:
        raise ValueError(f"`rel_tolerance` must be >= 0, got rel_tolerance={rel_tolerance}")
    controls = config.get("controls") if isinstance(config, dict) else None
    if not controls:
        return config, {}
    current = copy.deepcopy(config)
    dropped: dict[str, dict[str, Any]] = {}
    for catalog in sorted(controls):
        for name in sorted(controls[catalog]):
            candidate = copy.deepcopy(current)
            del candidate["controls"][catalog][name]
            try:
                measured = measure(candidate)
            except (CiqTuneError, OSError):
                continue
            if _no_worse(measured, value, mode, rel_tolerance):
                current = candidate
                dropped.setdefault(catalog, {})[name] = controls[catalog][name]
    return current, dropped


def _no_worse(measured: float, reference: float, mode: str, rel_tolerance: float) -> bool:
    if not math.isfinite(measured):
        return False
    slack = abs(reference) * rel_tolerance
    return measured <= reference + slack if mode == "min" else measured >= reference - slack


def simplify_timed(
    config: Any,
    measure: Callable[[Any], float],
    *,
    settings: ValidationConfig,
) -> dict[str, Any]:
    """Drop a timed winner's controls one at a time unless a paired re-measurement shows the
    winner faster with it.

    For a timed metric no two measurements agree exactly, so each control is judged by
    `ciq_tune.validation.validate`: the configuration without it (its compiler default) is
    the baseline, the current configuration the candidate; when the control's presence is not
    KEPT as a speedup (not faster beyond noise, by the same test and sequential looks as
    validation), it is dropped and the next control is judged against the simpler
    configuration. Controls are tried in catalog, then name order.

    Args:
        config: The validated winner (`{"params": ..., "controls": {catalog: {name: value}}}`).
        measure: One fresh round of a configuration's metric (`objectives.make_measure`).
        settings: The validation settings (repetitions, looks, thresholds).

    Returns:
        ``config`` (the simplified configuration), ``dropped`` (catalog → name → value) and
        ``kept`` (catalog → name → the speedup it gave, its interval, p, rounds).
    """
    current = copy.deepcopy(config)
    dropped: dict[str, dict[str, Any]] = {}
    kept: dict[str, dict[str, Any]] = {}
    controls = config.get("controls") or {}
    for catalog in sorted(controls):
        for name in sorted(controls[catalog]):
            without = copy.deepcopy(current)
            del without["controls"][catalog][name]
            with_it = copy.deepcopy(current)
            try:
                result = validate(
                    functools.partial(measure, without),
                    functools.partial(measure, with_it),
                    config=settings,
                )
            except (CiqTuneError, OSError):
                kept.setdefault(catalog, {})[name] = {"reason": "the re-measurement failed"}
                continue
            if result.kept:
                kept.setdefault(catalog, {})[name] = {
                    "speedup": result.speedup,
                    "speedup_ci": [result.speedup_ci_low, result.speedup_ci_high],
                    "p_value": result.p_value,
                    "rounds": result.baseline.n,
                }
            else:
                current = without
                dropped.setdefault(catalog, {})[name] = controls[catalog][name]
    return {"config": current, "dropped": dropped, "kept": kept}


def validate_and_simplify(
    results: SearchResults,
    measure: Callable[[Any], float],
    baseline: Any,
    *,
    k: int,
    config: ValidationConfig,
) -> SearchValidation:
    """`ciq_tune.validation.validate_search`, then the winner without the controls that do not
    earn their place (`simplify_timed`, recorded as the validation's `simplification`)."""
    validation = validate_search(results, measure, baseline, k=k, config=config)
    winner = validation.winner
    if winner is not None and any((winner.config.get("controls") or {}).values()):
        simplified = simplify_timed(winner.config, measure, settings=config)
        validation = validation.model_copy(update={"simplification": simplified})
    return validation
