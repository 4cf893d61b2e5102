"""MLSL's rule: the critical distance, which explored point starts a descent, its state."""

from __future__ import annotations

import json
import math

import numpy as np

import ciq_tune.space as ss
from ciq_tune.engine.multistart import DESCENT_FINEST_STEP
from ciq_tune.engine.multistart import LocalDescent
from ciq_tune.engine.multistart import critical_distance
from ciq_tune.engine.multistart import descent_start
from ciq_tune.engine.multistart import lowest_within
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes


def test_the_critical_distance_follows_the_formula_and_shrinks_with_the_samples() -> None:
    # Two dimensions: Gamma(2) = 1, so r_k = sqrt(sigma log k / (pi k)).
    assert math.isclose(
        critical_distance(100, 2, 2.0), math.sqrt(2 * math.log(100) / 100 / math.pi)
    )
    assert critical_distance(400, 2, 2.0) < critical_distance(100, 2, 2.0)
    assert critical_distance(100, 2, 4.0) > critical_distance(100, 2, 2.0)
    assert critical_distance(1, 2, 2.0) == math.inf


def test_a_descent_starts_from_the_lowest_eligible_point_without_a_lower_neighbour() -> None:
    X = np.array([[0.1, 0.1], [0.15, 0.1], [0.9, 0.9], [0.5, 0.5], [0.52, 0.5]])
    values = np.array([1.0, 0.5, 3.0, 2.0, 2.5])
    # Point 0 has the lower point 1 beside it; point 4 has point 3.
    assert not lowest_within(X, values, 0, 0.2) and lowest_within(X, values, 1, 0.2)
    assert descent_start(X, values, [True] * 5, 0.2) == 1
    # Point 1 (the best, already polished) may not start one: the next local minimum does.
    assert descent_start(X, values, [True, False, True, True, True], 0.2) == 3
    # Within a radius that spans the plane only the lowest point is a local minimum.
    assert descent_start(X, values, [True, False, True, True, True], 2.0) is None


def test_a_descent_round_trips_through_json_with_its_coarse_steps() -> None:
    space = SearchSpace({"a": ss.range(0, 800), "b": ss.range(0, 80)})
    descent = LocalDescent(space, 7)
    descent.ids += [9, 12]
    archive: set[Genes] = set()

    def is_new(rows: list[Genes]) -> list[Genes]:
        return [r for r in rows if r not in archive]

    for _ in range(20):
        archive.update(descent.compass.poll((400, 40), 4, is_new, np.random.default_rng(0)))
    # The coarse search stops at 1/32 of each range (25 and 2.5 values), not at one value.
    finest = [DESCENT_FINEST_STEP] * 2
    assert descent.compass.steps == finest and descent.compass.converged
    restored = LocalDescent.from_state(space, json.loads(json.dumps(descent.state())))
    assert restored.ids == [7, 9, 12] and restored.state() == descent.state()
