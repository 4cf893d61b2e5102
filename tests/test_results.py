"""`ciq_tune.results`: the Pareto front (pymoo's non-dominated sorting on minimised values),
deterministic ranking of ties and the evaluations table's failure columns."""

from __future__ import annotations

import numpy as np

from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import config_size
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


def _config_record(i: int, config: dict, value: float | None, status: str = "ok", error: str = ""):
    return EvaluationRecord(
        candidate_id=i,
        generation=0,
        config=config,
        genes=(),
        key=str(i),
        origin="random",
        status=status,
        values=None if value is None else {"spill": value},
        elapsed_s=0.0,
        info={"error": error} if error else {},
    )


THREE_FLAGS = {"controls": {"ptxas": {"opt_level": 1, "maxrregcount": 40, "fmad": True}}}
ONE_FLAG = {"controls": {"ptxas": {"opt_level": 1}}}
DEFAULTS: dict = {"controls": {}}


def test_ties_go_to_the_fewest_controls_whatever_the_evaluation_order() -> None:
    records = [_config_record(0, THREE_FLAGS, 1116.0), _config_record(1, ONE_FLAG, 1116.0)]
    objectives = [Objective(name="spill", mode="min")]
    forward = SearchResults(objectives, records).best(2)
    backward = SearchResults(objectives, records[::-1]).best(2)
    assert [r.config for r in forward] == [ONE_FLAG, THREE_FLAGS]
    assert [r.config for r in backward] == [ONE_FLAG, THREE_FLAGS]
    assert config_size(DEFAULTS) == 0 and config_size(THREE_FLAGS) == 3
    assert config_size({"x": 1, "y": {"z": 2}}) == 2


def test_table_has_status_and_a_one_line_error() -> None:
    records = [
        _config_record(0, ONE_FLAG, 1116.0),
        _config_record(
            1, THREE_FLAGS, None, "compile_error", "ptxas info\nptxas fatal: Missing .version"
        ),
    ]
    table = SearchResults([Objective(name="spill", mode="min")], records).table()
    assert list(table["status"]) == ["ok", "compile_error"]
    assert list(table["error"]) == ["", "ptxas fatal: Missing .version"]


def test_results_read_back_from_their_table(tmp_path) -> None:
    import pandas as pd
    import pytest

    from ciq_tune.errors import ReportError

    objectives = [Objective(name="t"), Objective(name="g", mode="max")]
    records = [
        _record(0, {"t": 2.0, "g": 5.0}),
        _record(1, None, status="compile_error"),
        _record(2, {"t": 1.0, "g": 9.0}),
    ]
    path = SearchResults(objectives, records).to_csv(tmp_path / "evaluations.csv")
    back = SearchResults.from_table(pd.read_csv(path), objectives, source=str(path))
    assert [(r.config, r.status, r.values) for r in back.records] == [
        (r.config, r.status, r.values) for r in records
    ]
    assert back.best_config == {"i": 2}
    # A value that is not a number cannot be "ok".
    table = pd.read_csv(path).assign(t=["x", "", "1.0"])
    assert [r.status for r in SearchResults.from_table(table, objectives).records] == [
        "invalid_result",
        "compile_error",
        "ok",
    ]
    with pytest.raises(ReportError, match=r"evaluations.csv: needs the columns \['g'\]"):
        SearchResults.from_table(pd.read_csv(path).drop(columns="g"), objectives, source=str(path))
    with pytest.raises(ReportError, match="row 2, column config_json must be a JSON"):
        SearchResults.from_table(
            pd.read_csv(path).assign(config_json=['{"i": 0}', "{oops", "{}"]), objectives
        )
