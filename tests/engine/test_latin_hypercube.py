"""The space-filling first generation: a Latin hypercube over the parameters."""

from __future__ import annotations

import numpy as np

import ciq_tune.space as ss
from ciq_tune.engine import STRATEGIES
from ciq_tune.engine import create_engine
from ciq_tune.engine.operators import LatinHypercubeSampling
from ciq_tune.engine.operators import SpaceProblem
from ciq_tune.space import SearchSpace


def test_every_stratum_of_every_parameter_is_drawn_once() -> None:
    space = SearchSpace(
        {
            "a": ss.range(0, 799),
            "c": ss.choice([f"v{k}" for k in range(8)]),
            "w": ss.uniform(0.01, 100.0, log=True),
            "f": ss.literal("-f", knockout_prob=0.5),
        }
    )
    X = (
        LatinHypercubeSampling()
        .do(SpaceProblem(space, n_obj=1), 8, random_state=np.random.default_rng(3))
        .get("X")
    )
    assert sorted(int(a) // 100 for a in X[:, 0]) == list(range(8))
    assert sorted(X[:, 1]) == list(range(8))  # each category once
    decades = sorted(int(np.floor((np.log10(w) + 2) * 2)) for w in X[:, 2])  # half decades
    assert decades == list(range(8))
    assert list(X[:, 3]).count(None) == 4


def test_rows_that_break_a_constraint_are_replaced_by_feasible_draws() -> None:
    space = SearchSpace({"x": ss.range(0, 199), "y": ss.range(0, 199)}, constraints=["x + y <= 60"])
    X = (
        LatinHypercubeSampling()
        .do(SpaceProblem(space, n_obj=1), 16, random_state=np.random.default_rng(0))
        .get("X")
    )
    assert all(space.is_feasible(tuple(row)) for row in X)
    assert len(X) == 16


def test_rows_that_break_a_constraint_can_be_dropped_instead() -> None:
    space = SearchSpace({"x": ss.range(0, 199), "y": ss.range(0, 199)}, constraints=["x + y <= 60"])
    problem = SpaceProblem(space, n_obj=1)
    plain = LatinHypercubeSampling().do(problem, 64, random_state=np.random.default_rng(0))
    kept = LatinHypercubeSampling(drop_infeasible=True).do(
        problem, 64, random_state=np.random.default_rng(0)
    )
    X = kept.get("X")
    assert 0 < len(X) < 16  # about 4.7 % of 64 rows hold
    assert all(space.is_feasible(tuple(row)) for row in X)
    # The kept rows are the hypercube's own feasible rows (the same unit points).
    assert {tuple(r) for r in X} <= {tuple(r) for r in plain.get("X")}


def test_first_generation_is_space_filling_for_every_strategy_but_random() -> None:
    # screened: a Latin hypercube; the GA family: a Sobol' sequence; random: the baseline.
    space = SearchSpace({"x": ss.range(0, 1599)})

    def first(strategy: str, seed: int) -> list[int]:
        objectives = ["t", "u"][: STRATEGIES[strategy].min_objectives]
        engine = create_engine(strategy, space, objectives, config={"pool_size": 16}, seed=seed)
        candidates = [engine.ask() for _ in range(16)]
        return sorted(int(c.genes[0] or 0) // 100 for c in candidates if c is not None)

    for strategy in ("ga", "nsga2", "nsga3", "screened"):
        assert all(first(strategy, seed) == list(range(16)) for seed in range(5))
    assert any(first("random", seed) != list(range(16)) for seed in range(5))
