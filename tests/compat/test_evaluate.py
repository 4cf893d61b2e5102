"""One evaluation: score parsing, crashes, async objectives, isolation and timeouts."""

from __future__ import annotations

import asyncio
import os
import time

from ciq_tune.compat import INVALID_SCORE
from ciq_tune.compat.evaluate import call_isolated
from ciq_tune.compat.evaluate import call_objective
from ciq_tune.compat.evaluate import parse_scores


def test_scores_are_parsed_and_invalid_ones_fail_the_evaluation() -> None:
    assert parse_scores(3, 1).scores == [3.0]
    assert parse_scores((1, 2), 2).status == "ok"
    assert parse_scores(INVALID_SCORE, 1).status == "invalid_score"
    assert parse_scores([1.0, float("nan")], 2).scores == [1.0, INVALID_SCORE]
    assert parse_scores(float("-inf"), 1).status == "invalid_score"
    wrong = parse_scores((1, 2), 1)
    assert wrong.status == "invalid_result" and "expected 1 score" in (wrong.error or "")


def test_a_raising_objective_becomes_an_error_outcome_with_nan_metrics() -> None:
    def broken(config: dict) -> float:
        raise RuntimeError("segfault-like")

    outcome = call_objective(broken, {"x": 1}, 2)
    assert outcome.status == "error" and "segfault-like" in (outcome.error or "")
    metrics = outcome.metrics()
    assert metrics["status"] == "error"
    assert all(metrics[k] != metrics[k] for k in ("score_1", "score_2"))  # NaN


def test_async_objectives_are_awaited() -> None:
    async def objective(config: dict) -> float:
        await asyncio.sleep(0)
        return config["x"] * 2

    assert call_objective(objective, {"x": 2}, 1).scores == [4.0]


def test_isolated_evaluation_returns_scores_and_is_killed_on_timeout() -> None:
    assert call_isolated(lambda c: c["x"] + 1, {"x": 1}, 1, 30.0).scores == [2.0]
    start = time.monotonic()
    outcome = call_isolated(lambda c: time.sleep(60), {}, 1, 0.5)
    assert outcome.status == "timeout" and "task_timeout=0.5" in (outcome.error or "")
    assert time.monotonic() - start < 10


def test_a_process_that_dies_is_a_crash() -> None:
    outcome = call_isolated(lambda c: os._exit(3), {}, 1, 30.0)
    assert outcome.status == "crash" and "exit code 3" in (outcome.error or "")
