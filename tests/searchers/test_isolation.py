"""`isolated_trainable` without Ray: every outcome of a trainable is a result with a status."""

from __future__ import annotations

import math
import os
import time

import pytest

from searchers.isolation import isolated_trainable


def _returns(value: object):
    def trainable(config: dict) -> object:
        return value

    return trainable


@pytest.mark.parametrize(
    ("value", "status"),
    [
        ({"score": 1.5}, "ok"),
        (2.0, "ok"),
        (None, "missing_metric"),
        ({"other": 1.0}, "missing_metric"),
        ({"score": "0.5"}, "invalid_result"),
        ({"score": True}, "invalid_result"),
        ({"score": [1.0]}, "invalid_result"),
        ({"score": math.nan}, "invalid_result"),
        ({"score": math.inf}, "invalid_result"),
        ("0.5", "invalid_result"),
        ({"score": 1.0, "status": 3}, "invalid_result"),
        ({"score": 1.0, "status": "compile_error"}, "compile_error"),
    ],
)
def test_every_return_value_is_a_result_with_the_metric(value: object, status: str) -> None:
    result = isolated_trainable(_returns(value), trial_timeout_s=30, metric="score")({})
    assert result.get("status", "ok") == status
    assert "score" in result
    if status == "ok":
        assert math.isfinite(result["score"])
    else:
        assert (math.isnan(result["score"]) and result["error"]) or status == "compile_error"


def _raises(config: dict) -> float:
    raise RuntimeError("kernel exploded")


def _dies(config: dict) -> float:
    os._exit(7)


def _hangs(config: dict) -> float:
    time.sleep(3600)
    return 0.0


def test_exceptions_crashes_and_hangs_are_failures_with_their_status() -> None:
    error = isolated_trainable(_raises, trial_timeout_s=30, metric="score")({})
    assert error["status"] == "error" and "kernel exploded" in error["error"]
    crash = isolated_trainable(_dies, trial_timeout_s=30, metric="score")({})
    assert crash["status"] == "crash" and "code 7" in crash["error"]
    start = time.monotonic()
    hung = isolated_trainable(_hangs, trial_timeout_s=1.0, metric="score")({})
    assert hung["status"] == "timeout" and "trial_timeout_s=1" in hung["error"]
    assert time.monotonic() - start < 30  # the limit plus starting a worker (slow when loaded)
    assert math.isnan(hung["score"])


def test_the_search_time_budget_cuts_a_hung_trial() -> None:
    trainable = isolated_trainable(_hangs, trial_timeout_s=600, time_budget_s=1.5, metric="s")
    start = time.monotonic()
    result = trainable({})
    assert result["status"] == "timeout" and "time budget" in result["error"]
    assert time.monotonic() - start < 30
    assert trainable({})["error"] == "the search's time budget ran out before it ran"


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, "10"])
def test_the_limit_is_a_finite_positive_number(bad: object) -> None:
    with pytest.raises(ValueError, match="trial_timeout_s"):
        isolated_trainable(_raises, trial_timeout_s=bad)  # type: ignore[arg-type]


def test_a_class_is_refused() -> None:
    with pytest.raises(TypeError, match="function"):
        isolated_trainable(dict, trial_timeout_s=1)  # type: ignore[arg-type]
