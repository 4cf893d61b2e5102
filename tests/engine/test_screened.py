"""The screened GA's exploration while it stagnates."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import Objective
from ciq_tune.engine import create_engine
from ciq_tune.space import SearchSpace
from tests.engine.conftest import drive

LINE = {"x": ss.range(0, 399)}


def _origins(config: dict[str, Any], objective: Any, evaluations: int) -> list[str]:
    engine = create_engine(
        "screened",
        LINE,
        [Objective(name="score", mode="min")],
        config=config,
        budget=Budget(max_evaluations=evaluations),
        seed=3,
    )
    drive(engine, lambda c: {"score": objective(c)})
    return [r.origin for r in engine.records]


def test_a_stagnating_search_evaluates_unscreened_candidates() -> None:
    settings = {"pool_size": 4, "explore_after": 2}
    flat = _origins({**settings, "wide_explore_share": 1.0}, lambda c: 1.0, 40)
    # Generations 0-2 (the first design of 16, then 2 x 4 evaluations) precede the
    # stagnation; after it, all are unscreened.
    assert flat[:16] == ["random"] * 16
    assert flat[24:] == ["random"] * 16
    no_share = {"wide_explore_share": 0.0, "converged_explore_share": 0.0}
    never = _origins({**settings, **no_share}, lambda c: 1.0, 40)
    assert "random" not in never[16:]


def test_maximin_exploration_covers_the_range_more_evenly_than_uniform_draws() -> None:
    def largest_gap(sampling: str, seed: int) -> float:
        engine = create_engine(
            "screened",
            LINE,
            [Objective(name="score", mode="min")],
            config={"explore_after": 1, "wide_explore_share": 1.0, "explore_sampling": sampling},
            budget=Budget(max_evaluations=40),
            seed=seed,
        )
        drive(engine, lambda c: {"score": 1.0})
        xs = sorted([-1, *(r.config["x"] for r in engine.records), 400])
        return max(b - a for a, b in itertools.pairwise(xs))

    for seed in range(3):
        # 40 points on 400 values: an even design leaves gaps of about 10.
        assert largest_gap("maximin", seed) < 0.6 * largest_gap("uniform", seed)


def test_short_list_spaces_explore_uniformly_by_default() -> None:
    short = {
        "a": ss.ordinal([1, 2, 4, 8, 16]),
        "b": ss.choice(["p", "q", "r"]),
        "c": ss.range(0, 9),
    }

    def keys(config: dict[str, Any]) -> list[str]:
        engine = create_engine(
            "screened",
            short,
            [Objective(name="score", mode="min")],
            config={"explore_after": 1, **config},
            budget=Budget(max_evaluations=60),
            seed=2,
        )
        return drive(engine, lambda c: {"score": 1.0})

    assert keys({}) == keys({"explore_sampling": "uniform"})
    assert keys({}) != keys({"explore_sampling": "maximin"})


def test_once_the_polish_is_used_up_the_generations_explore() -> None:
    def valley(c: Any) -> float:
        return abs(c["x"] - 200)

    settings = {"explore_after": 1000}  # no exploration from stagnation
    after = _origins({**settings, "converged_explore_share": 1.0}, valley, 100)
    # The optimum's two neighbours are polled within 60 evaluations; then all is exploration.
    assert after[60:] == ["random"] * 40
    assert "random" not in _origins({**settings, "converged_explore_share": 0.0}, valley, 100)[16:]


def _first_design(space: Any, config: dict[str, Any], seed: int) -> list[Any]:
    engine = create_engine(
        "screened",
        space,
        [Objective(name="score", mode="min")],
        config=config,
        budget=Budget(max_evaluations=40),
        seed=seed,
    )
    candidates = [engine.ask() for _ in range(40)]
    return [c for c in candidates if c is not None and c.generation == 0]


def test_a_wide_space_starts_with_a_larger_sobol_design() -> None:
    wide = {"x": ss.range(0, 1599)}
    for seed in range(3):
        first = _first_design(wide, {}, seed)
        # 16 points of a scrambled Sobol' sequence on a line: one in each sixteenth.
        assert sorted(c.genes[0] // 100 for c in first) == list(range(16))
        assert len(_first_design(wide, {"wide_initial_points": 0}, seed)) == 4
    # A budget in generations keeps every generation at pool_size evaluations.
    by_generations = create_engine("screened", wide, ["t"], budget=Budget(max_generations=3))
    assert len(drive(by_generations, lambda c: {"t": 1.0})) == 12
    short = {"a": ss.ordinal([1, 2, 4, 8, 16]), "b": ss.range(0, 9)}
    assert len(_first_design(short, {}, 0)) == 4


def test_the_first_design_refills_infeasible_rows_far_from_the_others() -> None:
    # x + y <= 60 leaves 4.7 % of the square: most Sobol' rows break it.
    triangle = SearchSpace(
        {"x": ss.range(0, 199), "y": ss.range(0, 199)}, constraints=["x + y <= 60"]
    )

    def closest_pair(points: list[Any]) -> float:
        xy = np.array([c.genes for c in points], dtype=float)
        return float(min(np.linalg.norm(a - b) for a, b in itertools.combinations(xy, 2)))

    gaps = []
    for seed in range(5):
        first = _first_design(triangle, {}, seed)
        assert len(first) == 16
        assert all(triangle.is_feasible(c.genes) for c in first)
        gaps.append(closest_pair(first))
    # Replaced by uniform draws, the closest two of these seeds' designs are 1 to 3.6 values
    # apart; maximin draws keep at least 5 apart (16 points fit about 13 apart).
    assert min(gaps) >= 5
