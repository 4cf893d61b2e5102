"""Primitives: values, encoding, mutation, knockout, seed ranges and validation at the edges."""

from __future__ import annotations

import numpy as np
import pytest

import ciq_tune.space as ss
from ciq_tune.errors import SpaceError


def test_range_is_end_inclusive_and_keeps_types() -> None:
    assert ss.range(1, 5).values == (1, 2, 3, 4, 5)
    assert ss.range(1.0, 2.0, 0.5).values == (1.0, 1.5, 2.0)
    assert ss.range(0, 1, 0.1).values[3] == 0.3  # no float drift


@pytest.mark.parametrize(
    ("args", "message"),
    [((5, 1), "swapped"), ((1, 5, 0), "step"), ((1, 5, 1, 1.5), "knockout_prob")],
)
def test_range_rejects_bad_arguments_with_the_argument_named(args: tuple, message: str) -> None:
    with pytest.raises(SpaceError, match=message):
        ss.range(*args)


def test_log_sampling_integers_are_rounded_and_distinct() -> None:
    assert ss.log_sampling(1, 1024, 11).values == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    assert ss.log_sampling(1, 4, 10).values == (1, 2, 3, 4)
    with pytest.raises(SpaceError, match="positive"):
        ss.log_sampling(0, 10)


def test_choice_rejects_duplicates_and_non_lists() -> None:
    with pytest.raises(SpaceError, match="twice"):
        ss.choice([1, 1])
    with pytest.raises(SpaceError, match="list"):
        ss.choice("abc")


def test_seed_range_limits_first_draws_only() -> None:
    param = ss.range(0, 100, 1, seed_low=10, seed_high=20)
    rng = np.random.default_rng(0)
    seeded = {param.decode(param.sample(rng, seeded=True)) for _ in range(200)}
    free = {param.decode(param.sample(rng)) for _ in range(200)}
    assert seeded <= set(range(10, 21))
    assert max(free) > 20
    with pytest.raises(SpaceError, match="seed range"):
        ss.range(0, 10, 1, seed_low=50)


def test_knockout_probability_is_respected() -> None:
    param = ss.literal("-flag", knockout_prob=0.3)
    rng = np.random.default_rng(1)
    knocked = sum(param.sample(rng) is ss.KNOCKED_OUT for _ in range(4000))
    assert 0.25 < knocked / 4000 < 0.35
    assert param.cardinality() == 2
    assert param.default() is ss.KNOCKED_OUT


@pytest.mark.parametrize(
    "param",
    [
        ss.range(1, 50),
        ss.choice(["a", "b", "c"]),
        ss.ordinal([16, 32, 64]),
        ss.literal(1, knockout_prob=0.5),
        ss.log_sampling(1, 4096, 13, knockout_prob=0.2),
        ss.uniform(0.5, 2.0),
        ss.uniform(1e-4, 1.0, log=True),
    ],
)
def test_mutation_changes_the_gene_and_stays_in_the_domain(param: ss.Parameter) -> None:
    rng = np.random.default_rng(2)
    for _ in range(300):
        gene = param.sample(rng)
        child = param.mutate(gene, rng)
        assert child != gene
        if child is not ss.KNOCKED_OUT:
            value = param.decode(child)
            assert param.decode(param.encode(value)) == value
            assert 0.0 <= param.to_unit(child) <= 1.0


def test_ordinal_mutation_prefers_neighbours() -> None:
    param = ss.range(0, 99)
    rng = np.random.default_rng(3)
    steps = [abs(param.mutate(50, rng) - 50) for _ in range(2000)]
    assert np.mean(np.array(steps) == 1) > 0.6


def test_encode_rejects_values_outside_the_domain() -> None:
    with pytest.raises(SpaceError, match="not one of"):
        ss.choice([1, 2]).encode(3)
    with pytest.raises(SpaceError, match="outside"):
        ss.uniform(0, 1).encode(2.0)


def test_parameters_round_trip_through_dicts() -> None:
    for param in (ss.range(1, 9, 2, 0.1, 3, 5), ss.choice([1, "a"]), ss.uniform(1, 2, log=True)):
        assert ss.parameter_from_dict(param.to_dict()) == param


def test_shift_moves_ordered_values_by_a_share_of_the_range() -> None:
    wide = ss.range(0, 100)
    assert wide.shift(50, 0.25) == 75
    assert wide.shift(50, -0.001) == 49  # at least one value
    assert wide.shift(95, 0.25) == 100  # clipped to the bound
    log = ss.uniform(0.01, 100.0, log=True)
    assert log.shift(1.0, 0.25) == pytest.approx(10.0)  # a quarter of four decades
    assert log.shift(50.0, 0.5) == 100.0
    assert ss.choice(["a", "b", "c"]).shift(1, 0.5) == 1  # unordered: unchanged
    assert ss.range(0, 9, knockout_prob=0.5).shift(None, 0.5) is None  # knocked out: unchanged


def test_quantile_spreads_values_as_sample_draws_them() -> None:
    wide = ss.range(0, 99)
    assert [wide.quantile(u) for u in (0.0, 0.005, 0.5, 0.999, 1.0)] == [0, 0, 50, 99, 99]
    seeded = ss.range(0, 99, seed_low=10, seed_high=19)
    assert {seeded.quantile(k / 10, seeded=True) for k in range(10)} == set(range(10, 20))
    assert ss.uniform(0.01, 100.0, log=True).quantile(0.5) == pytest.approx(1.0)
    flag = ss.range(0, 3, knockout_prob=0.2)
    assert flag.quantile(0.1) is None  # below knockout_prob: knocked out
    assert [flag.quantile(0.2 + 0.2 * k + 0.1) for k in range(4)] == [0, 1, 2, 3]
    # The quantile of a uniform draw has `sample`'s distribution.
    rng = np.random.default_rng(0)
    genes = [flag.quantile(u) for u in rng.random(4000)]
    assert genes.count(None) == pytest.approx(800, rel=0.1)
    assert np.bincount([g for g in genes if g is not None]) == pytest.approx([800] * 4, rel=0.1)
