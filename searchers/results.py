"""Search results from a finished Ray Tune run (a `ResultGrid`), without the searcher object."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ciq_tune.results import OK
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import parse_values

if TYPE_CHECKING:
    from ray.tune import ResultGrid


def results_from_result_grid(
    grid: ResultGrid, metric: str | Sequence[str], mode: str | Sequence[str] = "min"
) -> SearchResults:
    """Every trial of `grid` as `SearchResults` (best configuration, Pareto front, table).

    Trials are ordered by their start; an errored trial or a trial whose last result lacks a
    finite metric is a failure. Useful after `Tuner.restore`, when the searcher object that
    ran the search is not at hand (`CompileIQSearcher.results()` gives the same records).
    """
    metrics = [metric] if isinstance(metric, str) else list(metric)
    modes = [mode] * len(metrics) if isinstance(mode, str) else list(mode)
    objectives = [
        Objective.model_validate({"name": m, "mode": d})
        for m, d in zip(metrics, modes, strict=True)
    ]
    trials = [grid[i] for i in range(len(grid))]
    results = sorted(trials, key=lambda r: (r.metrics or {}).get("timestamp", math.inf))
    records = []
    for index, result in enumerate(results):
        last = result.metrics or {}
        if result.error is not None:
            values, status = None, "error"
        else:
            reported = last.get("status", OK)
            values, status = parse_values(objectives, last, reported if reported else OK)
        records.append(
            EvaluationRecord(
                candidate_id=index,
                generation=-1,
                config=result.config,
                genes=(),
                key=str(last.get("trial_id", index)),
                origin="tune",
                status=status,
                values=values,
                elapsed_s=float(last.get("time_total_s", math.nan)),
                info={"path": result.path},
            )
        )
    return SearchResults(objectives, records)
