"""Staged search and the search driver's bookkeeping, without starting Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from objectives import load_description
from searchers.kernel_search import SearchRun
from searchers.placement import plan_placement
from searchers.staged import STAGE_ORIGINS
from searchers.staged import StagedRun
from searchers.staged import _on_top
from searchers.staged import staged_results
from searchers.staged import staged_search

SOFTMAX = Path(__file__).resolve().parents[2] / "examples/kernels/triton/softmax.yaml"


def _run(values: list[tuple[int, float | None, str]]) -> SearchRun:
    trials = [
        {"config": {"params": {"X": x}}, "time_ms": v, "status": status} for x, v, status in values
    ]
    placement = plan_placement("triton", cluster_gpus=0, cluster_cpus=1, trials_per_gpu=1)
    return SearchRun(trials=trials, best=None, wall_s=1.0, placement=placement)


def test_top_is_the_best_distinct_ok_configurations() -> None:
    run = _run([(1, 3.0, "ok"), (2, 1.0, "ok"), (2, 0.5, "ok"), (3, 0.1, "crash"), (4, 2.0, "ok")])
    top = run.top(3, "time_ms", "min")
    assert [t["config"]["params"]["X"] for t in top] == [2, 4, 1]
    assert top[0]["time_ms"] == 0.5
    assert [t["config"]["params"]["X"] for t in run.top(1, "time_ms", "max")] == [1]


def test_stage_two_trials_run_the_chosen_parameter_set_with_the_controls() -> None:
    seen: list[dict[str, Any]] = []

    def trainable(config: dict[str, Any]) -> dict[str, Any]:
        seen.append(config)
        return {"status": "ok", "time_ms": 1.0}

    tops = [{"ROWS": 1}, {"ROWS": 2}]
    _on_top(trainable, tops, {"top": 1, "controls": {"triton": {"maxnreg": 64}}})
    assert seen == [{"params": {"ROWS": 2}, "controls": {"triton": {"maxnreg": 64}}}]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"params_share": 0.0}, "params_share=0.0"),
        ({"top": 0}, "top=0"),
        ({"budget": 1}, "budget=1"),
    ],
)
def test_bad_stage_settings_are_refused_before_any_search(
    kwargs: dict[str, Any], fragment: str
) -> None:
    desc = load_description(SOFTMAX)
    args = {"budget": 10, "seed": 0, "run_config": lambda stage: None, **kwargs}
    with pytest.raises(ValueError, match=fragment):
        staged_search(desc, **args)


def test_staged_results_holds_both_stages_in_order_with_their_origin() -> None:
    params = _run([(1, 2.0, "ok"), (2, None, "timeout"), (3, 1.5, "ok")])
    params.trials.append({"config": {"params": {"X": 4}}, "error": "RayTaskError: boom"})
    controls = _run([(3, 1.2, "ok"), (1, float("nan"), "ok")])
    for t, c in zip(controls.trials, ({"ptxas": {"O": 2}}, {}), strict=True):
        t["config"] = {**t["config"], "controls": c}
    staged = StagedRun(params, controls, params.trials[2]["config"], controls.trials[0]["config"])
    results = staged_results(staged, "time_ms", "min")
    assert [r.candidate_id for r in results.records] == list(range(6))
    assert [r.origin for r in results.records] == [STAGE_ORIGINS["params"]] * 4 + [
        STAGE_ORIGINS["controls"]
    ] * 2
    # A timeout keeps its status; a Ray error without one is "error"; NaN is no result.
    assert [r.status for r in results.records] == [
        "ok",
        "timeout",
        "ok",
        "error",
        "ok",
        "invalid_result",
    ]
    assert results.records[3].info["error"] == "RayTaskError: boom"
    best = results.best(1)[0]
    assert best.config == {"params": {"X": 3}, "controls": {"ptxas": {"O": 2}}}
    assert best.values == {"time_ms": 1.2}
    table = results.table()
    assert list(table["origin"]) == [r.origin for r in results.records]


def test_staged_results_of_a_search_that_stopped_after_stage_one() -> None:
    params = _run([(1, 2.0, "ok")])
    results = staged_results(StagedRun(params, None, None, None), "time_ms", "min")
    assert [(r.origin, r.values) for r in results.records] == [
        (STAGE_ORIGINS["params"], {"time_ms": 2.0})
    ]
