"""SearchSpace: nesting, knockout in dicts and lists, constraints, conditions, sampling."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ciq_tune.space as ss
from ciq_tune.errors import ConstraintError
from ciq_tune.errors import SpaceError


def _space() -> ss.SearchSpace:
    return ss.SearchSpace(
        {
            "algo": ss.choice(["tiled", "split_k"]),
            "tile": {"BM": ss.ordinal([16, 32, 64, 128]), "BN": ss.ordinal([16, 32, 64, 128])},
            "split": ss.conditional(ss.range(2, 8), when="algo == 'split_k'"),
            "flags": [ss.literal("-a", knockout_prob=0.5), ss.literal("-b", knockout_prob=0.5)],
            "lr": ss.uniform(1e-3, 1.0, log=True),
            "name": "constant",
        },
        constraints=["BM * BN <= 2048"],
    )


def test_decode_nests_and_drops_absent_parameters() -> None:
    space = _space()
    rng = np.random.default_rng(0)
    for _ in range(200):
        config = space.decode(space.sample_genes(rng))
        assert config["name"] == "constant"
        assert config["tile"]["BM"] * config["tile"]["BN"] <= 2048
        assert ("split" in config) == (config["algo"] == "split_k")
        assert set(config["flags"]) <= {"-a", "-b"}


def test_encode_inverts_decode() -> None:
    space = _space()
    rng = np.random.default_rng(1)
    for _ in range(100):
        genes = space.sample_genes(rng)
        assert space.key(space.encode(space.decode(genes))) == space.key(genes)


def test_key_ignores_genes_of_inactive_parameters() -> None:
    space = _space()
    config = {"algo": "tiled", "tile": {"BM": 16, "BN": 16}, "flags": [], "lr": 0.1}
    genes = list(space.encode(config))
    other = list(genes)
    other[space.keys.index("split")] = 5
    assert space.key(tuple(genes)) == space.key(tuple(other))


def test_encode_names_the_missing_parameter() -> None:
    with pytest.raises(SpaceError, match="tile/BN"):
        _space().encode({"algo": "tiled", "tile": {"BM": 16}, "lr": 0.1})
    genes = _space().encode({"algo": "tiled"}, fill_defaults=True)
    assert _space().decode(genes)["tile"] == {"BM": 16, "BN": 16}


def test_constraint_names_are_checked_and_unsafe_expressions_rejected() -> None:
    with pytest.raises(ConstraintError, match="not parameters"):
        ss.SearchSpace({"a": ss.range(1, 3)}, constraints=["b < 2"])
    with pytest.raises(ConstraintError, match="not allowed"):
        ss.SearchSpace({"a": ss.range(1, 3)}, constraints=["a.__class__ == 1"])
    with pytest.raises(ConstraintError, match="calls"):
        ss.SearchSpace({"a": ss.range(1, 3)}, constraints=["__import__('os') == 1"])
    with pytest.raises(ConstraintError, match="before"):
        ss.SearchSpace({"x": ss.conditional(ss.range(1, 3), when="y == 1"), "y": ss.range(1, 2)})


def test_contradictory_constraints_fail_clearly() -> None:
    space = ss.SearchSpace({"a": ss.range(1, 3)}, constraints=["a > 5"])
    with pytest.raises(ConstraintError, match="contradictory"):
        space.sample_genes(np.random.default_rng(0))


def test_callable_constraints_and_sample() -> None:
    space = ss.SearchSpace({"a": ss.range(1, 10)}, constraints=[lambda c: c["a"] % 2 == 0])
    configs = space.sample(5, seed=0)
    assert len({json.dumps(c) for c in configs}) == 5
    assert all(c["a"] % 2 == 0 for c in configs)
    with pytest.raises(SpaceError, match="only 5"):
        space.sample(6, seed=0)


def test_iter_genes_enumerates_the_feasible_space() -> None:
    space = ss.SearchSpace(
        {"a": ss.range(1, 4), "b": ss.literal("x", knockout_prob=0.5)}, constraints=["a != 2"]
    )
    keys = {space.key(g) for g in space.iter_genes()}
    assert len(keys) == 6


def test_space_round_trips_through_json() -> None:
    space = _space()
    again = ss.SearchSpace.from_dict(json.loads(json.dumps(space.to_dict())))
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(20):
        assert space.decode(space.sample_genes(rng_a)) == again.decode(again.sample_genes(rng_b))
