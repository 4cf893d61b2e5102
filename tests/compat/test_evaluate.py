"""One evaluation: score parsing, crashes, async objectives, isolation and timeouts."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

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
    assert outcome.status == "crash" and "exited with code 3" in (outcome.error or "")


def _spawn_grandchild_then_hang(config: dict) -> float:
    import subprocess

    child = subprocess.Popen(["sleep", "120"])
    with open(config["pid_file"], "w") as f:
        f.write(str(child.pid))
    time.sleep(120)
    return 0.0


def test_isolation_is_a_fresh_interpreter_and_a_timeout_kills_its_process_group(
    tmp_path: Path,
) -> None:
    import multiprocessing

    # A fresh interpreter (spawned, not forked): the parent's start method is not inherited
    # and the evaluation runs in another process.
    pid = call_isolated(lambda c: os.getpid(), {}, 1, 30.0).scores[0]
    assert pid != os.getpid()
    pid_file = tmp_path / "grandchild.pid"
    outcome = call_isolated(_spawn_grandchild_then_hang, {"pid_file": str(pid_file)}, 1, 2.0)
    assert outcome.status == "timeout"
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.1)
    assert not _alive(grandchild), "the evaluation's own child outlived the timeout"
    assert multiprocessing.active_children() == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its reaper is dead
        return f.read().split()[2] != "Z"
