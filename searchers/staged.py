"""Staged kernel search: kernel parameters first, then compiler controls polished on the best few.

Kernel parameters are the big lever and public compiler controls a second-order one, so a
search over both at once spends most of a fixed budget on controls that change nothing beyond
noise. Stage 1 searches the parameters alone (the compilers' defaults) with `params_share` of
the budget; stage 2 searches the controls (a user's vendor controls files among them, as opaque
choices of the ptxas catalog) on the `top` best parameter sets of stage 1 with the rest. The
caller re-measures stage 2's best against stage 1's best to say what the controls added
(`objectives.remeasure`); "nothing beyond noise" is a valid answer.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ray import tune

from ciq_tune.results import OK
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import parse_values
from ciq_tune.space import Choice
from ciq_tune.space import SearchSpace
from objectives import make_search_space
from objectives import starting_points
from objectives.description import ControlSelection
from objectives.description import KernelDescription
from searchers.kernel_search import NoiseSettings
from searchers.kernel_search import SearchRun
from searchers.kernel_search import logged_trainable
from searchers.kernel_search import run_search

# Share of the evaluations that go to the kernel parameters (stage 1).
PARAMS_SHARE = 0.7
# Parameter sets of stage 1 that stage 2 polishes.
TOP = 3
# `origin` of each stage's evaluations in `staged_results` (the evaluations table's column).
STAGE_ORIGINS = {"params": "stage1_params", "controls": "stage2_controls"}


@dataclass
class StagedRun:
    """Both stages of a staged search.

    Attributes:
        params: stage 1 (parameters, compiler defaults).
        controls: stage 2 (controls on the top parameter sets); None when there is nothing to
            search (no controls selected) or no budget left.
        best_params: stage 1's best configuration (``{"params": ..., "controls": {}}``).
        best: the best configuration of both stages by the search's own values.
    """

    params: SearchRun
    controls: SearchRun | None
    best_params: dict[str, Any] | None
    best: dict[str, Any] | None


def staged_results(run: StagedRun, metric: str, mode: str) -> SearchResults:
    """Both stages' evaluations as one `SearchResults`, stage 1 first, each by its results'
    timestamps (as `searchers.results.results_from_result_grid`).

    `origin` says the stage (`STAGE_ORIGINS`); stage 2's configurations are the full ones
    (``{"params": …, "controls": …}``). A trial without a finite `metric` is a failure; one
    that reported no status failed in Ray ("error").
    """
    objectives = [Objective.model_validate({"name": metric, "mode": mode})]
    stages = [("params", run.params), ("controls", run.controls)]
    records: list[EvaluationRecord] = []
    for stage, search in stages:
        trials = [] if search is None else search.trials
        ordered = sorted(trials, key=lambda t: t.get("timestamp", math.inf))
        for index, trial in enumerate(ordered):
            reported = trial.get("status") or ("error" if trial.get("error") else OK)
            values, status = parse_values(objectives, trial.get(metric), reported)
            info = {"error": trial["error"]} if trial.get("error") else {}
            records.append(
                EvaluationRecord(
                    candidate_id=len(records),
                    generation=-1,
                    config=trial["config"],
                    genes=(),
                    key=f"{stage}-{index}",
                    origin=STAGE_ORIGINS[stage],
                    status=status,
                    values=values,
                    elapsed_s=float(trial.get("time_total_s", math.nan)),
                    info=info,
                )
            )
    return SearchResults(objectives, records)


def _on_top(
    trainable: Callable[[dict[str, Any]], dict[str, Any]],
    tops: list[dict[str, Any]],
    config: dict[str, Any],
) -> dict[str, Any]:
    """Stage 2's trial: ``{"top": i, "controls": …}`` run as parameter set i with the controls."""
    return trainable({"params": tops[config["top"]], "controls": config.get("controls", {})})


def staged_search(
    desc: KernelDescription,
    *,
    budget: int,
    seed: int,
    run_config: Callable[[str], tune.RunConfig],
    controls: Mapping[str, ControlSelection | Mapping[str, Any]] | None = None,
    params_share: float = PARAMS_SHARE,
    top: int = TOP,
    trials_per_gpu: int = 1,
    time_budget_s: float | None = None,
    noise: NoiseSettings | None = None,
    proceed: Callable[[], bool] | None = None,
) -> StagedRun:
    """Search the parameters, then the controls on the `top` best parameter sets.

    Args:
        desc: The kernel description (its `params`; its `controls` unless `controls` is given).
        budget: Evaluations of both stages together.
        seed: The engines' seed.
        run_config: Builds each stage's RunConfig from the stage's name ("params", "controls").
        controls: The controls to polish (default: the description's selection).
        params_share: Share of `budget` for stage 1, in (0, 1].
        top: Parameter sets of stage 1 polished in stage 2.
        trials_per_gpu, time_budget_s, noise: as `run_search` (the time budget per stage).
        proceed: Asked after stage 1; False ends the search there (a Ctrl+C in stage 1).

    Raises:
        ValueError: `params_share` outside (0, 1], `top` < 1 or `budget` < 2.
    """
    if not (0 < params_share <= 1) or top < 1 or budget < 2:
        raise ValueError(
            f"`params_share` must be in (0, 1], `top` >= 1 and `budget` >= 2, got "
            f"params_share={params_share}, top={top}, budget={budget}"
        )
    selection = {
        name: ControlSelection.model_validate(dict(s) if isinstance(s, Mapping) else s.model_dump())
        for name, s in (desc.controls if controls is None else controls).items()
    }
    params_desc = desc.model_copy(update={"controls": {}})
    params_space = make_search_space(params_desc)
    params_budget = max(1, math.floor(budget * params_share))
    common: dict[str, Any] = {
        "metric": desc.metric,
        "mode": desc.mode,
        "kind": desc.kind,
        "seed": seed,
        "trials_per_gpu": trials_per_gpu,
        "time_budget_s": time_budget_s,
        "noise": noise,
    }
    stage1 = run_search(
        logged_trainable(params_desc),
        space=params_space,
        budget=params_budget,
        points_to_evaluate=starting_points(params_desc, params_space),
        run_config=run_config("params"),
        **common,
    )
    tops = [t["config"] for t in stage1.top(top, desc.metric, desc.mode)]
    best_params = tops[0] if tops else None
    controls_desc = desc.model_copy(update={"controls": selection})
    controls_space = None
    if selection:
        spec = make_search_space(controls_desc).spec
        controls_space = spec.get("controls") if isinstance(spec, dict) else None
    left = budget - len(stage1.trials)
    if not tops or not controls_space or left < 1 or (proceed is not None and not proceed()):
        return StagedRun(stage1, None, best_params, best_params)
    param_sets = [dict(c.get("params", {})) for c in tops]
    space = SearchSpace({"top": Choice(list(range(len(param_sets)))), "controls": controls_space})
    trainable = functools.partial(_on_top, logged_trainable(controls_desc), param_sets)
    trainable.__name__ = f"{desc.name}_controls"  # type: ignore[attr-defined]
    stage2 = run_search(
        trainable,
        space=space,
        budget=left,
        points_to_evaluate=[],
        run_config=run_config("controls"),
        **common,
    )
    for t in stage2.trials:
        cfg = t["config"]
        t["config"] = {"params": param_sets[cfg["top"]], "controls": cfg.get("controls", {})}
    best2 = stage2.top(1, desc.metric, desc.mode)
    stage2.best = best2[0] if best2 else None
    candidates = [t for t in (stage1.best, stage2.best) if t is not None]
    sign = 1 if desc.mode == "min" else -1
    winner = min(candidates, key=lambda t: sign * float(t[desc.metric]))
    return StagedRun(stage1, stage2, best_params, winner["config"])
