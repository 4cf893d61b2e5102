"""Search's local workers: forked processes, no Ray, CompileIQ's generations × pool_size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import Executor
from concurrent.futures import Future
from concurrent.futures import wait
from concurrent.futures.process import BrokenProcessPool

import pytest

import ciq_tune.space as ss
from ciq_tune import Search
from ciq_tune import SearchConfiguration
from ciq_tune import SearchResult
from ciq_tune import WorkerTypes
from ciq_tune.compat.local import LocalRun

SPACE = {
    "x": ss.range(start=1.0, end=20.0, step=0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal(const_value="constant", knockout_prob=0.5),
}


def test_native_search_runs_generations_times_pool_size_without_ray() -> None:
    code = """
import sys
import ciq_tune.space as ss
from ciq_tune import Search, SearchConfiguration
space = {"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3])}
result = Search(
    objective_function=lambda c: c["x"] ** 2 + c["y"],  # a lambda: inherited, never pickled
    search_space=space,
    search_config=SearchConfiguration(pool_size=12, generations=5),
    seed=0,
).start(num_workers=2)
print(len(result), sorted(set(result.get_results()["generation"])), "ray" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.split("\n")[-2] == "60 [0, 1, 2, 3, 4] False"
    assert "60/60 evaluations, best score_1" in out.stderr  # the progress line


def _dies_on_big_x(config: dict) -> float:
    if config["x"] > 18:
        os._exit(3)  # a native crash takes the worker process down
    return config["x"] ** 2 + config["y"]


def _search_losing_workers() -> SearchResult:
    """24 evaluations on two workers, the first (x = 19) and any other x > 18 killing theirs."""
    return Search(
        objective_function=_dies_on_big_x,
        search_space=SPACE,
        search_config=SearchConfiguration(pool_size=8, generations=3),
        disable_progress_bar=True,
        seed=1,
        points_to_evaluate=[{"x": 19.0, "y": 1}],
    ).start(num_workers=2)


def test_a_dead_worker_is_a_crash_record_and_the_search_goes_on() -> None:
    result = _search_losing_workers()
    table = result.get_results()
    records = [(row["params"], json.loads(row["metadata"])) for _, row in table.iterrows()]
    assert records[0][0]["x"] == 19.0  # the given point, evaluated first
    died = [meta for params, meta in records if params["x"] > 18]
    assert all(meta["status"] == "crash" and "died" in meta["error"] for meta in died)
    # The engine may propose more x > 18 points; with two workers each death takes at most the
    # one task running beside it, and every other evaluation is kept.
    lost = [meta for params, meta in records if params["x"] <= 18 and meta["status"] != "ok"]
    assert all("died" in meta["error"] for meta in lost)
    assert len(lost) <= len(died)
    assert len(table) == 24 and result.get_best_result() is not None


def test_a_task_the_broken_pool_refused_runs_in_the_next_one(monkeypatch) -> None:
    # Deterministic form of a race: a worker dies between two submits, so the second submit
    # meets the broken pool (before the fix, BrokenProcessPool ended the search).
    submit = LocalRun._submit
    dying: list[Future] = []
    refused: list[dict] = []

    def submit_after_the_break(self: LocalRun, executor: Executor, config: dict) -> Future:
        if dying:
            wait(dying)  # the pool is broken once the dying task's future is done
            dying.clear()
        try:
            future = submit(self, executor, config)
        except BrokenProcessPool:
            refused.append(dict(config))
            raise
        if config["x"] > 18:
            dying.append(future)
        return future

    monkeypatch.setattr(LocalRun, "_submit", submit_after_the_break)
    result = _search_losing_workers()
    table = result.get_results()
    assert len(table) == 24 and refused
    evaluated = [
        (row["params"], json.loads(row["metadata"])["status"]) for _, row in table.iterrows()
    ]
    for config in refused:  # each ran in the pool that replaced the broken one
        assert (config, "ok" if config["x"] <= 18 else "crash") in evaluated


def test_isolated_worker_kills_at_the_timeout(tmp_path) -> None:
    def hangs_on_the_first_point(config: dict) -> float:
        if config["x"] == 2.0 and config["y"] == 3:  # only the point given first: one timeout
            import time

            time.sleep(60)
        return config["x"]

    result = Search(
        objective_function=hangs_on_the_first_point,
        search_space=SPACE,
        search_config=SearchConfiguration(pool_size=6, generations=1),
        worker_type=WorkerTypes.ISOLATED,
        disable_progress_bar=True,
        seed=0,
        points_to_evaluate=[{"x": 2.0, "y": 3}],
    ).start(num_workers=2, task_timeout=5.0)  # a new worker's first task imports this module
    first = json.loads(result.get_results()["metadata"][0])
    assert first["status"] == "timeout" and "task_timeout=5.0" in first["error"]
    assert len(result) == 6


@pytest.mark.slow
def test_ray_worker_runs_on_ray_tune(ray_cluster: None) -> None:
    result = Search(
        objective_function=lambda c: c["x"] ** 2 + c["y"],
        search_space=SPACE,
        search_config=SearchConfiguration(pool_size=6, generations=2),
        worker_type=WorkerTypes.RAY,
        disable_progress_bar=True,
        seed=0,
    ).start()
    ids = [json.loads(m)["trial_id"] for m in result.get_results()["metadata"]]
    assert len(result) == 12 and all(isinstance(i, str) for i in ids)  # Tune trial ids
