"""Property tests: random spaces, pool sizes 6–120, 1–5 generations, every strategy."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import ciq_tune.space as ss
from ciq_tune.engine import STRATEGIES
from ciq_tune.engine import Budget
from ciq_tune.engine import create_engine
from tests.engine.conftest import drive

PARAMETERS = st.one_of(
    st.builds(
        lambda lo, n, step: ss.range(lo, lo + n * step, step),
        st.integers(-5, 5),
        st.integers(0, 12),
        st.integers(1, 3),
    ),
    st.builds(lambda n: ss.choice([f"c{i}" for i in range(n)]), st.integers(1, 6)),
    st.builds(lambda n: ss.ordinal([2**i for i in range(n)]), st.integers(1, 8)),
    st.builds(lambda p: ss.literal("-flag", knockout_prob=p), st.floats(0.1, 0.9)),
    st.builds(
        lambda lo, n: ss.log_sampling(lo, lo * 2**n, n + 1), st.integers(1, 4), st.integers(1, 6)
    ),
    st.builds(lambda lo, w: ss.uniform(lo, lo + w), st.floats(-3, 3), st.floats(0.5, 4)),
)
SPACES = st.dictionaries(st.sampled_from("abcdefgh"), PARAMETERS, min_size=1, max_size=6)


def _objective(n_obj: int):
    def evaluate(config: dict):
        numbers = [float(v) for v in config.values() if isinstance(v, (int, float))]
        first = sum(numbers) + len(config)
        return first if n_obj == 1 else [first, -first + 0.5 * len(numbers)]

    return evaluate


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spec=SPACES,
    pool_size=st.integers(6, 120),
    generations=st.integers(1, 5),
    # Not `exhaustive`: it refuses continuous spaces (tests/engine/test_exhaustive.py).
    strategy=st.sampled_from(sorted(set(STRATEGIES) - {"exhaustive"})),
    workers=st.integers(1, 8),
    seed=st.integers(0, 2**31),
)
def test_any_space_runs_to_its_budget_without_repeats(
    spec: dict, pool_size: int, generations: int, strategy: str, workers: int, seed: int
) -> None:
    n_obj = 1 if STRATEGIES[strategy].min_objectives == 1 else 2
    objectives = ["o1"] if n_obj == 1 else ["o1", "o2"]
    space = ss.SearchSpace(spec)
    engine = create_engine(
        strategy,
        space,
        objectives,
        config={"pool_size": pool_size},
        budget=Budget(max_generations=generations),
        seed=seed,
    )
    keys = drive(engine, _objective(n_obj), workers=workers)
    assert len(keys) == len(set(keys))
    configs = {json.dumps(r.config, sort_keys=True) for r in engine.records}
    assert len(configs) == len(engine.records)
    cardinality = space.cardinality()
    if np.isfinite(cardinality) and cardinality < pool_size:
        assert engine.stop_reason == "every feasible configuration has been evaluated"
    else:
        assert len(engine.records) >= min(pool_size * generations, cardinality) * 0.99
    assert engine.finished


@settings(max_examples=30, deadline=None)
@given(spec=SPACES, seed=st.integers(0, 2**31))
def test_random_spaces_round_trip_and_respect_constraints(spec: dict, seed: int) -> None:
    first = next(iter(spec))
    numeric = isinstance(spec[first], ss.Range | ss.LogSampling)
    constraints = [f"{first} >= {spec[first].values[0]}"] if numeric else []
    space = ss.SearchSpace(spec, constraints=constraints)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        genes = space.sample_genes(rng)
        config = space.decode(genes)
        assert space.key(space.encode(config)) == space.key(genes)
        assert space.is_feasible(genes)
    again = ss.SearchSpace.from_dict(json.loads(json.dumps(space.to_dict())))
    assert again.keys == space.keys
