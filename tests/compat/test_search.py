"""Search: sampling without Ray, and short searches on a local 2-CPU Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ciq_tune.space as ss
from ciq_tune import INVALID_SCORE
from ciq_tune import Search
from ciq_tune import SearchConfiguration
from ciq_tune import SearchResult
from ciq_tune.errors import EngineError
from ciq_tune.errors import ObjectiveError

SPACE = {
    "x": ss.range(start=1.0, end=20.0, step=0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal(const_value="constant", knockout_prob=0.5),
}


def _search(objective, **kwargs) -> Search:
    config = kwargs.pop("search_config", SearchConfiguration(pool_size=6, generations=2))
    return Search(
        objective_function=objective,
        search_space=SPACE,
        search_config=config,
        disable_progress_bar=True,
        **kwargs,
    )


def test_sample_gives_distinct_configurations_of_the_space() -> None:
    samples = _search(lambda c: 0.0, seed=3).sample(5)
    assert len({json.dumps(s, sort_keys=True) for s in samples}) == 5
    assert all(s["y"] in (1, 2, 3) and s.get("z", "constant") == "constant" for s in samples)
    assert samples == _search(lambda c: 0.0).sample(5, seed=3)


def test_arguments_are_validated() -> None:
    with pytest.raises(EngineError, match="objective_modes"):
        _search(lambda c: 0.0, objective_modes=["min", "max"])
    with pytest.raises(EngineError, match="objective_function"):
        _search(3)
    with pytest.raises(EngineError, match="num_workers=0"):
        _search(lambda c: 0.0).start(num_workers=0)


def _flaky(config: dict) -> tuple[float, float]:
    if config["x"] > 15:
        raise RuntimeError("crashed")
    if config["y"] == 3:
        return 1.0, float("nan")
    return config["x"] ** 2 + config["y"], config["y"] ** 2 + config["x"]


@pytest.mark.slow
def test_a_multi_objective_search_survives_crashes_and_dumps_its_table(
    ray_cluster: None, tmp_path: Path
) -> None:
    dump = tmp_path / "results.csv"
    config = SearchConfiguration(pool_size=6, generations=2, num_objectives=2, normalize=True)
    result = _search(
        lambda c: (1.0, 1.0) if c == {} else _flaky(c),
        search_config=config,
        dump_results=dump,
        seed=0,
        points_to_evaluate=[{"x": 16.0, "y": 1}],
    ).start(num_workers=2)
    table = result.get_results()
    assert len(table) == 12 and set(table["generation"]) == {0, 1}
    statuses = [json.loads(m)["status"] for m in table["metadata"]]
    assert statuses[0] == "error" and table["params"][0] == {"x": 16.0, "y": 1}
    assert "crashed" in json.loads(table["metadata"][0])["error"]
    assert table["score_1"][0] == INVALID_SCORE
    ok = table[[s == "ok" for s in statuses]]
    assert (ok["norm_score_1"] == ok["score_1"]).all()
    front = result.pareto_front()
    assert front and all(row["score_2"] != INVALID_SCORE for row in front)
    assert len(SearchResult.from_csv(dump)) == 12


@pytest.mark.slow
def test_exit_on_failure_stops_when_the_first_pool_all_fails(ray_cluster: None) -> None:
    def always_broken(config: dict) -> float:
        raise ValueError("bad objective")

    with pytest.raises(ObjectiveError, match="bad objective"):
        _search(always_broken, seed=0).start()
    result = _search(always_broken, seed=0, exit_on_failure=False).start()
    # Each generation of 6 is refilled once when too few pass (EngineConfig.max_refills=1).
    assert len(result) == 24 and result.get_best_result() is None
