"""The GA family's first generation: a scrambled Sobol' sequence over the parameters."""

from __future__ import annotations

import warnings

import numpy as np

import ciq_tune.space as ss
from ciq_tune.engine.operators import SpaceProblem
from ciq_tune.engine.operators.sampling.latin_hypercube import LatinHypercubeSampling
from ciq_tune.engine.operators.sampling.sobol import SobolSampling
from ciq_tune.space import SearchSpace

SQUARE = SearchSpace({"x": ss.range(0, 399), "y": ss.range(0, 399)})


def _cells(sampling: LatinHypercubeSampling, seed: int) -> list[tuple[int, int]]:
    X = sampling.do(SpaceProblem(SQUARE, n_obj=1), 16, random_state=np.random.default_rng(seed))
    return sorted((int(x) // 100, int(y) // 100) for x, y in X.get("X"))


def test_sixteen_points_fill_every_cell_of_a_four_by_four_grid() -> None:
    # A (0, 4, 2)-net: every 1/4 x 1/4 cell holds one point (and every 1/16 stratum of each
    # parameter, as a hypercube's); a Latin hypercube covers each parameter only.
    grid = [(i, j) for i in range(4) for j in range(4)]
    assert all(_cells(SobolSampling(), seed) == grid for seed in range(5))
    assert any(_cells(LatinHypercubeSampling(), seed) != grid for seed in range(5))


def test_a_pool_that_is_not_a_power_of_two_is_cut_from_the_next_one() -> None:
    space = SearchSpace({"x": ss.range(0, 2399)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy warns on a Sobol' draw of 24 points
        X = SobolSampling().do(
            SpaceProblem(space, n_obj=1), 24, random_state=np.random.default_rng(1)
        )
    x = [int(row[0]) for row in X.get("X")]
    assert len(set(x)) == 24
    assert sorted(v // 150 for v in x[:16]) == list(range(16))  # the first 16: one per 1/16
