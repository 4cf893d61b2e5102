"""Simplify a winning configuration to what earns its place: drop the compiler controls that
change nothing, exactly for a metric a recompile reproduces (`simplify_controls`); for a timed
one, drop each control and reset each parameter to the baseline's value unless a paired
re-measurement shows it faster (`simplify_timed`)."""

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


PARAMS = "params"
"""The key of the kernel parameters in `simplify_timed`'s ``dropped`` and ``kept`` (beside the
catalogs of the controls, none of which has this name)."""

_ABSENT = object()


def simplify_timed(
    config: Any,
    measure: Callable[[Any], float],
    *,
    settings: ValidationConfig,
    baseline: Any = None,
) -> dict[str, Any]:
    """Take back a timed winner's choices one at a time unless a paired re-measurement shows
    the winner faster with it: each control is dropped (its compiler default), and each kernel
    parameter whose value differs from `baseline`'s is reset to the baseline's value. A control
    that is a set of options (Triton's ``ptx_options``) is judged option by option.

    For a timed metric no two measurements agree exactly, so each choice is judged by
    `ciq_tune.validation.validate`: the current configuration without it is the baseline, the
    current configuration the candidate; when the choice is not KEPT as a speedup (not faster
    beyond noise, by the same test and sequential looks as validation), it is taken back and
    the next one is judged against the simpler configuration. A re-measurement that fails (a
    reset tile can break the kernel: no compile, a crash, a wrong result) keeps the choice, with
    the error.

    Order: controls (catalog, then name order), then parameters (name order). Each control is
    judged with the tiles the search chose it for, and each parameter then with only the
    controls that earned their place.

    Args:
        config: The validated winner (`{"params": ..., "controls": {catalog: {name: value}}}`).
        measure: One fresh round of a configuration's metric (`objectives.make_measure`).
        settings: The validation settings (repetitions, looks, thresholds).
        baseline: The configuration the winner was validated against (the defaults); without
            it only controls are judged.

    When anything was taken back, the simplified configuration is checked against the winner
    the same way (``check``: the winner's speedup over it); where the winner is faster beyond
    noise, the small losses added up and the winner is returned unsimplified.

    Returns:
        ``config`` (the simplified configuration), ``dropped`` (catalog → name, or
        ``name.option`` for an option of a set → the winner's value, and under `PARAMS` each
        reset parameter → the winner's value, None when it had none), ``kept`` (the same keys
        → ``reason``, with the speedup it gave, its interval, p and rounds when it was KEPT)
        and, when anything was taken back, ``check``.
    """
    current = copy.deepcopy(config)
    dropped: dict[str, dict[str, Any]] = {}
    kept: dict[str, dict[str, Any]] = {}
    for group, name, value in _choices(config, baseline):
        without = _taken_back(current, group, name, baseline)
        try:
            result = validate(
                functools.partial(measure, without),
                functools.partial(measure, copy.deepcopy(current)),
                config=settings,
            )
        except (CiqTuneError, OSError) as exc:
            reason = f"the re-measurement without it failed: {exc}"
            kept.setdefault(group, {})[name] = {"reason": reason}
            continue
        if result.kept:
            kept.setdefault(group, {})[name] = {
                "reason": result.reason,
                "speedup": result.speedup,
                "speedup_ci": [result.speedup_ci_low, result.speedup_ci_high],
                "p_value": result.p_value,
                "rounds": result.baseline.n,
            }
        else:
            dropped.setdefault(group, {})[name] = value
            current = without
    simplified = {"config": current, "dropped": dropped, "kept": kept}
    if dropped:
        simplified["check"] = _check_simplified(config, current, measure, settings)
        if simplified["check"]["verdict"] == "KEPT":  # the losses added up: ship the winner
            simplified.update(config=copy.deepcopy(config), dropped={})
    return simplified


def _check_simplified(
    winner: Any, simplified: Any, measure: Callable[[Any], float], settings: ValidationConfig
) -> dict[str, Any]:
    """The winner against its simplified configuration, paired: each choice taken back lost
    less than noise, but their losses could add up. KEPT means the winner is faster beyond
    noise, and the simplification is not shipped."""
    try:
        result = validate(
            functools.partial(measure, copy.deepcopy(simplified)),
            functools.partial(measure, copy.deepcopy(winner)),
            config=settings,
        )
    except (CiqTuneError, OSError) as exc:
        return {"verdict": "KEPT", "reason": f"the re-measurement failed: {exc}"}
    return {
        "verdict": result.verdict,
        "reason": result.reason,
        "speedup": result.speedup,
        "speedup_ci": [result.speedup_ci_low, result.speedup_ci_high],
        "rounds": result.baseline.n,
    }


def _choices(config: Any, baseline: Any) -> list[tuple[str, str, Any]]:
    """(group, name, the winner's value) of each choice `simplify_timed` judges, in order: each
    control (catalog, then name order), each option of a control whose value is a set of
    options (Triton's ``ptx_options``: ``name.option``) on its own, then each changed
    parameter."""
    choices = []
    controls = config.get("controls") or {}
    for catalog in sorted(controls):
        for name, value in sorted(controls[catalog].items()):
            if isinstance(value, dict):
                choices += [(catalog, f"{name}.{o}", value[o]) for o in sorted(value)]
            else:
                choices.append((catalog, name, value))
    params = config.get(PARAMS) or {}
    choices += [(PARAMS, name, params.get(name)) for name in changed_params(config, baseline)]
    return choices


def _taken_back(config: Any, group: str, name: str, baseline: Any) -> Any:
    """`config` without one choice of `_choices`: a control (or one option of a set, the set
    dropped with its last option) left to the compiler's default, a parameter reset to the
    baseline's value (removed where the baseline has none)."""
    without = copy.deepcopy(config)
    if group == PARAMS:
        defaults = (baseline.get(PARAMS) if isinstance(baseline, dict) else None) or {}
        if name in defaults:
            without.setdefault(PARAMS, {})[name] = copy.deepcopy(defaults[name])
        else:
            del without[PARAMS][name]
        return without
    chosen = without["controls"][group]
    control, _, option = name.partition(".")
    if option and isinstance(chosen.get(control), dict):
        del chosen[control][option]
        if chosen[control]:
            return without
    del chosen[control]
    return without


def changed_params(config: Any, baseline: Any) -> list[str]:
    """The names of the kernel parameters whose value in `config` differs from `baseline`'s
    (either may lack one), in name order; none without a baseline."""
    if not isinstance(config, dict) or not isinstance(baseline, dict):
        return []
    mine, theirs = config.get(PARAMS) or {}, baseline.get(PARAMS) or {}
    return [
        name
        for name in sorted(set(mine) | set(theirs))
        if mine.get(name, _ABSENT) != theirs.get(name, _ABSENT)
    ]


def validate_and_simplify(
    results: SearchResults,
    measure: Callable[[Any], float],
    baseline: Any,
    *,
    k: int,
    config: ValidationConfig,
) -> SearchValidation:
    """`ciq_tune.validation.validate_search`, then the winner with only the controls that earn
    their place (and, with `config.simplify_params`, the parameter values: `simplify_timed`
    against `baseline`), recorded as the validation's `simplification`, when it has any to
    judge."""
    validation = validate_search(results, measure, baseline, k=k, config=config)
    winner = validation.winner
    against = baseline if config.simplify_params else None
    if winner is not None and (
        any((winner.config.get("controls") or {}).values())
        or changed_params(winner.config, against)
    ):
        simplified = simplify_timed(winner.config, measure, settings=config, baseline=against)
        validation = validation.model_copy(update={"simplification": simplified})
    return validation
