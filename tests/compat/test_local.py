"""Search's local workers: forked processes, no Ray, CompileIQ's generations × pool_size."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import ciq_tune.space as ss
from ciq_tune import Search
from ciq_tune import SearchConfiguration
from ciq_tune import WorkerTypes

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


def test_a_dead_worker_is_a_crash_record_and_the_search_goes_on() -> None:
    result = Search(
        objective_function=_dies_on_big_x,
        search_space=SPACE,
        search_config=SearchConfiguration(pool_size=8, generations=3),
        disable_progress_bar=True,
        seed=1,
        points_to_evaluate=[{"x": 19.0, "y": 1}],
    ).start(num_workers=2)
    table = result.get_results()
    statuses = [json.loads(m)["status"] for m in table["metadata"]]
    assert statuses[0] == "crash" and "died" in json.loads(table["metadata"][0])["error"]
    assert statuses.count("ok") >= len(table) - 4  # only the dead worker's tasks are lost
    assert result.get_best_result() is not None


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
