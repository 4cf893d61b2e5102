"""CompileIQSearcher's handling of trial results, driven by hand: every outcome is data."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import ciq_tune.space as ss
from ciq_tune import CompileIQSearcher
from tests.engine.conftest import TOY_SPACE
from tests.engine.conftest import toy


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (None, "no_result"),
        ({}, "missing_metric"),
        ({"other": 1.0}, "missing_metric"),
        ({"score": "0.5"}, "invalid_result"),
        ({"score": True}, "invalid_result"),
        ({"score": np.bool_(False)}, "invalid_result"),
        ({"score": [1.0]}, "invalid_result"),
        ({"score": {"v": 1}}, "invalid_result"),
        ({"score": None}, "invalid_result"),
        ({"score": math.nan}, "invalid_result"),
        ({"score": -math.inf}, "invalid_result"),
        ({"score": 1.0, "status": 7}, "invalid_result"),
        ({"score": 1.0, "status": ""}, "invalid_result"),
        ({"score": 1.0, "status": "timeout", "error": "killed"}, "timeout"),
        ({"score": np.float32(2.5)}, "ok"),
        ({"score": 3}, "ok"),
    ],
)
def test_every_final_result_is_an_evaluation_with_a_status(result: object, status: str) -> None:
    searcher = CompileIQSearcher(space=TOY_SPACE, metric="score", mode="min", seed=0)
    searcher.suggest("t0")
    searcher.on_trial_complete("t0", result)  # type: ignore[arg-type]
    (record,) = searcher.results().records
    assert record.status == status
    if status == "ok":
        assert isinstance(record.values["score"], float)
    else:
        assert record.values is None
    if status not in ("ok", "timeout"):
        assert record.info["error"]


def test_a_wrong_value_never_becomes_the_best() -> None:
    searcher = CompileIQSearcher(
        space=TOY_SPACE, metric="score", mode="min", max_evaluations=12, seed=1
    )
    attractive = ["-1e9", True, False, [-1e9], -math.inf, math.nan, None]
    healthy = []
    for i in range(12):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict)
        if i % 2:
            searcher.on_trial_complete(f"t{i}", {"score": attractive[i % len(attractive)]})
        else:
            healthy.append(toy(config))
            searcher.on_trial_complete(f"t{i}", {"score": toy(config)})
    assert searcher.results().best(1)[0].values["score"] == min(healthy)


def test_multi_objective_needs_every_metric_as_a_number() -> None:
    searcher = CompileIQSearcher(
        space={"a": ss.range(0, 9)}, metric=["t", "e"], mode=["min", "min"], seed=0
    )
    for i, result in enumerate(
        [{"t": 1.0}, {"t": 1.0, "e": "2"}, {"t": 1.0, "e": math.inf}, {"t": 1.0, "e": 2.0}]
    ):
        searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", result)
    statuses = [r.status for r in searcher.results().records]
    assert statuses == ["missing_metric", "invalid_result", "invalid_result", "ok"]


def test_results_without_the_metric_reach_the_searcher_and_leave_the_environment_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TUNE_DISABLE_STRICT_METRIC_CHECKING", raising=False)
    searcher = CompileIQSearcher(space=TOY_SPACE, metric="score", mode="min", seed=0)
    searcher.suggest("t0")
    searcher.on_trial_complete("t0", {"status": "ok", "other": 1.0})
    assert "TUNE_DISABLE_STRICT_METRIC_CHECKING" not in os.environ
    # Tune's strict check raises for the searcher's `metric`: it reads None, the metrics stay.
    assert searcher.metric is None and searcher.metrics == ["score"]
    assert [r.status for r in searcher.results().records] == ["missing_metric"]


def test_several_trials_at_a_time_default_to_steady_state() -> None:
    searcher = CompileIQSearcher(space=TOY_SPACE, metric="score", mode="min", seed=0)
    searcher.set_max_concurrency(2)
    assert searcher.engine.config.steady_state
    told = CompileIQSearcher(
        space=TOY_SPACE, metric="score", mode="min", engine_config={"steady_state": False}
    )
    told.set_max_concurrency(2)
    assert not told.engine.config.steady_state
    one = CompileIQSearcher(space=TOY_SPACE, metric="score", mode="min", seed=0)
    one.set_max_concurrency(1)
    assert not one.engine.config.steady_state
