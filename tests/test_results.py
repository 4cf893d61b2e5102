"""The Pareto front of `ciq_tune.results`: pymoo's non-dominated sorting on minimised values."""

from __future__ import annotations

import numpy as np

from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import non_dominated


def _record(i: int, values: dict[str, float] | None, status: str = "ok") -> EvaluationRecord:
    return EvaluationRecord(
        candidate_id=i,
        generation=0,
        config={"i": i},
        genes=(i,),
        key=str(i),
        origin="random",
        status=status,
        values=values,
        elapsed_s=0.0,
    )


def test_non_dominated_keeps_the_front_and_equal_points() -> None:
    F = np.array([[1.0, 4.0], [2.0, 2.0], [3.0, 3.0], [4.0, 1.0], [2.0, 2.0], [5.0, 5.0]])
    # [3, 3] is dominated by [2, 2], [5, 5] by everything; the two [2, 2] tie.
    assert non_dominated(F).tolist() == [True, True, False, True, True, False]
    assert non_dominated(np.empty((0, 2))).tolist() == []


def test_the_front_follows_each_objectives_direction() -> None:
    records = [
        _record(0, {"time": 1.0, "accuracy": 0.5}),
        _record(1, {"time": 2.0, "accuracy": 0.9}),
        _record(2, {"time": 2.0, "accuracy": 0.4}),  # slower and less accurate than 0
        _record(3, None, status="crash"),
    ]
    objectives = [Objective(name="time", mode="min"), Objective(name="accuracy", mode="max")]
    front = SearchResults(objectives, records).pareto_front()
    assert [r.candidate_id for r in front] == [0, 1]
    both_min = [Objective(name="time"), Objective(name="accuracy")]
    assert [r.candidate_id for r in SearchResults(both_min, records).pareto_front()] == [0, 2]
