"""Each strategy converges: it reaches the optimum (one objective) or the Pareto front
(several) of a small problem within a modest budget, where random search does not."""

from __future__ import annotations

import numpy as np
import pytest
from pymoo.indicators.hv import HV

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import create_engine
from tests.engine.conftest import TOY_SPACE
from tests.engine.conftest import drive
from tests.engine.conftest import toy

WIDE_TOY = {
    "x": ss.range(1.0, 200.0, 0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal("flag", knockout_prob=0.5),
}
# Two objectives over 100 x 100 values: f1 = x, f2 = 99 - x + y; the front is y = 0.
FRONT_SPACE = {"x": ss.range(0, 99), "y": ss.range(0, 99)}
REFERENCE = np.array([100.0, 200.0])


def _front_objective(config: dict) -> list[float]:
    return [config["x"], 99 - config["x"] + config["y"]]


def _best(strategy: str, space: dict, evaluations: int, seed: int) -> float:
    engine = create_engine(
        strategy, space, "score", budget=Budget(max_evaluations=evaluations), seed=seed
    )
    drive(engine, toy)
    return engine.result().best(1)[0].values["score"]


def test_ga_reaches_the_toy_optimum() -> None:
    assert [_best("ga", TOY_SPACE, 200, seed) for seed in range(3)] == [2.0] * 3


def test_default_strategy_reaches_the_wide_toy_optimum() -> None:
    assert [_best("screened", WIDE_TOY, 200, seed) for seed in range(5)] == [2.0] * 5


def test_random_search_exhausts_a_small_space_so_finds_its_optimum() -> None:
    space = {"x": ss.range(1.0, 10.0, 0.5), "y": ss.choice([1, 2, 3])}  # 57 configurations
    assert _best("random", space, 57, seed=0) == 2.0


def _hypervolume(strategy: str, seed: int) -> float:
    engine = create_engine(
        strategy,
        FRONT_SPACE,
        ["f1", "f2"],
        config={"pool_size": 20},
        budget=Budget(max_evaluations=300),
        seed=seed,
    )
    drive(engine, _front_objective)
    F = np.array([[r.values["f1"], r.values["f2"]] for r in engine.result().pareto_front()])
    return float(HV(ref_point=REFERENCE)(F))


@pytest.mark.parametrize("strategy", ["nsga2", "nsga3"])
def test_multi_objective_strategies_approach_the_pareto_front(strategy: str) -> None:
    true_front = np.array([[x, 99.0 - x] for x in range(100)])
    optimum = float(HV(ref_point=REFERENCE)(true_front))
    found = [_hypervolume(strategy, seed) for seed in range(2)]
    random = [_hypervolume("random", seed) for seed in range(2)]
    assert min(found) >= 0.97 * optimum
    assert min(found) > max(random)
