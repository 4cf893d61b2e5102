"""Tests of the search-efficiency metrics against direct computation and simulation."""

from __future__ import annotations

import numpy as np
import pytest

from bench.metrics import evals_to
from bench.metrics import mean_fraction
from bench.metrics import median_evals
from bench.metrics import methodology_score
from bench.metrics import random_expected_best_time
from bench.peers import run_random
from bench.replay import Problem
from bench.replay import best_fraction_trace


def test_evals_to_and_medians() -> None:
    trace = [0.0, 0.5, 0.91, 0.96, 0.96, 1.0]
    assert evals_to(trace, 0.90) == 3
    assert evals_to(trace, 0.95) == 4
    assert evals_to([0.5, 0.6], 0.95) is None
    assert median_evals([3, 5, None]) == 5
    assert median_evals([3, None, None]) is None
    assert median_evals([2, 4, 6, None]) == 5
    assert mean_fraction([[0.5, 1.0], [0.7, 0.8]], 2) == pytest.approx(0.9)
    assert mean_fraction([[0.5, 1.0]], 3) is None


def test_closed_form_random_baseline_matches_simulation(small: Problem) -> None:
    length = 20
    expected = random_expected_best_time(small, length)
    worst = max(t for t in small.times.values() if t is not None)
    runs = [best_fraction_trace(run_random(small, length, s), length) for s in range(600)]
    simulated = np.mean([[small.optimum / f if f else worst for f in r] for r in runs], axis=0)
    one_draw = np.mean([worst if t is None else t for t in small.times.values()])
    assert expected[0] == pytest.approx(one_draw)
    np.testing.assert_allclose(simulated[[4, 9, 19]], expected[[4, 9, 19]], rtol=0.05)


def test_methodology_score_is_zero_for_random_and_one_for_an_oracle(small: Problem) -> None:
    length = int(np.ceil(small.random_expected_evals(0.95)))
    runs = [best_fraction_trace(run_random(small, length, s), length) for s in range(200)]
    assert abs(methodology_score(small, runs)) < 0.1
    assert methodology_score(small, [[1.0] * length]) == pytest.approx(1.0)
    assert methodology_score(small, [[1.0] * (length - 1)]) is None
