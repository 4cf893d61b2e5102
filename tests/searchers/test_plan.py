"""A search's plan: one object that both search paths take."""

from __future__ import annotations

import inspect
from pathlib import Path

import ciq_tune.space as ss
from objectives import load_description
from searchers.compileiq_searcher import CompileIQSearcher
from searchers.plan import SearchPlan

MATMUL = Path(__file__).parents[2] / "examples/kernels/triton/matmul.yaml"


def test_every_field_of_a_plan_is_a_keyword_of_the_searcher() -> None:
    plan = SearchPlan(ss.SearchSpace({"x": ss.range(0, 9)}), "score", "min", 12, 3, [{"x": 4}])
    searcher = CompileIQSearcher(**vars(plan))
    assert searcher.metrics == ["score"] and searcher.mode == "min"
    keywords = inspect.signature(CompileIQSearcher).parameters
    assert set(vars(plan)) <= set(keywords)


def test_a_description_plan_takes_its_metric_and_mode_unless_told() -> None:
    desc = load_description(MATMUL)
    space = ss.SearchSpace({"x": ss.range(0, 9)})
    plan = SearchPlan.of(desc, space, [], max_evaluations=10, seed=0)
    assert (plan.metric, plan.mode) == (desc.metric, desc.mode)
    scored = SearchPlan.of(desc, space, [], max_evaluations=10, seed=0, metric="score")
    assert (scored.metric, scored.mode, scored.strategy) == ("score", desc.mode, "auto")
