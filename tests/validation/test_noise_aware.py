"""The noise-aware best: confirmation within noise, improvement beyond noise, convergence."""

from __future__ import annotations

import math

import pytest

from ciq_tune.validation.noise_aware import NoiseAwareBest


def test_the_first_value_is_confirmed_then_becomes_the_best():
    best = NoiseAwareBest(noise=0.02)
    assert best.near_best(1.0)
    assert best.record(1.0) and best.best == 1.0


def test_values_within_noise_or_better_need_confirmation_worse_ones_do_not():
    best = NoiseAwareBest(noise=0.02)
    best.record(1.0)
    assert best.near_best(0.9)  # a big improvement is confirmed too: it may be one lucky round
    assert best.near_best(1.019)
    assert not best.near_best(1.03)
    assert not best.near_best(math.nan)


def test_only_an_improvement_beyond_noise_restarts_the_convergence_count():
    best = NoiseAwareBest(noise=0.02, patience=3)
    best.record(1.0)
    assert not best.record(0.99)  # better, but within noise
    assert best.best == 0.99 and best.since_improvement == 1
    assert not best.record(1.5)
    assert not best.record(math.nan)  # a failed evaluation counts as one without improvement
    assert best.converged
    assert best.record(0.9)
    assert best.since_improvement == 0 and not best.converged


def test_max_mode_mirrors_min_mode():
    best = NoiseAwareBest(mode="max", noise=0.02, patience=1)
    best.record(100.0)
    assert best.near_best(99.0) and not best.near_best(97.0)
    assert best.record(103.0) and best.best == 103.0
    assert not best.record(104.0)
    assert best.best == 104.0 and best.converged


def test_patience_zero_never_converges():
    best = NoiseAwareBest(patience=0)
    for _ in range(100):
        best.record(1.0)
    assert not best.converged


@pytest.mark.parametrize("kwargs", [{"noise": -0.1}, {"noise": 1.0}, {"patience": -1}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        NoiseAwareBest(**kwargs)
