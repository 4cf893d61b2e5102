"""Simplify a winning configuration: drop the compiler controls that do not earn their place."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from ciq_tune.errors import CiqTuneError


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
