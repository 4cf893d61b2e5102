"""Staged search and the search driver's bookkeeping, without starting Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from objectives import load_description
from searchers.kernel_search import SearchRun
from searchers.placement import plan_placement
from searchers.staged import _on_top
from searchers.staged import staged_search

SOFTMAX = Path(__file__).resolve().parents[2] / "examples/kernels/triton/softmax.yaml"


def _run(values: list[tuple[int, float | None, str]]) -> SearchRun:
    trials = [
        {"config": {"params": {"X": x}}, "time_ms": v, "status": status} for x, v, status in values
    ]
    placement = plan_placement("triton", cluster_gpus=0, cluster_cpus=1, trials_per_gpu=1)
    return SearchRun(trials=trials, best=None, wall_s=1.0, placement=placement)


def test_top_is_the_best_distinct_ok_configurations():
    run = _run([(1, 3.0, "ok"), (2, 1.0, "ok"), (2, 0.5, "ok"), (3, 0.1, "crash"), (4, 2.0, "ok")])
    top = run.top(3, "time_ms", "min")
    assert [t["config"]["params"]["X"] for t in top] == [2, 4, 1]
    assert top[0]["time_ms"] == 0.5
    assert [t["config"]["params"]["X"] for t in run.top(1, "time_ms", "max")] == [1]


def test_stage_two_trials_run_the_chosen_parameter_set_with_the_controls():
    seen = []

    def trainable(config):
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
def test_bad_stage_settings_are_refused_before_any_search(kwargs, fragment):
    desc = load_description(SOFTMAX)
    args = {"budget": 10, "seed": 0, "run_config": lambda stage: None, **kwargs}
    with pytest.raises(ValueError, match=fragment):
        staged_search(desc, **args)
