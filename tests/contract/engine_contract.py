"""A reusable contract for engine strategies (Optuna's `testing/pytest_samplers.py` pattern).

A test module subclasses `EngineContract` and provides a `strategy` fixture; every test then
runs against that strategy: determinism (same seed → same sequence, also in a fresh process),
save/restore with candidates in flight, failure handling (NaN, ±inf, None, error statuses),
a side-effect-free `finished`, and no repeated proposals.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest

import ciq_tune.space as ss
from ciq_tune.engine import STRATEGIES
from ciq_tune.engine import Budget
from ciq_tune.engine import Engine
from ciq_tune.engine import create_engine
from tests.engine.conftest import drive

SPACE = {
    "x": ss.range(1.0, 60.0, 0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal("flag", knockout_prob=0.5),
    "u": ss.uniform(0.0, 1.0),
}


def n_objectives(strategy: str) -> int:
    return STRATEGIES[strategy].min_objectives


def objective_for(strategy: str) -> Any:
    """x² + y (+ u), repeated for every objective the strategy needs."""
    n = n_objectives(strategy)

    def evaluate(config: dict[str, Any]) -> float | list[float]:
        value = config["x"] ** 2 + config["y"] + config["u"]
        return value if n == 1 else [value, value + (0.0 if "z" in config else 1.0)]

    return evaluate


def engine_for(strategy: str, *, seed: int = 0, evaluations: int = 60, **kwargs: Any) -> Engine:
    objectives = [f"o{i}" for i in range(n_objectives(strategy))]
    return create_engine(
        strategy,
        SPACE,
        objectives,
        seed=seed,
        budget=Budget(max_evaluations=evaluations),
        **kwargs,
    )


class EngineContract:
    """Tests every strategy must pass; subclasses provide the `strategy` fixture."""

    def test_same_seed_gives_the_same_sequence(self, strategy: str) -> None:
        objective = objective_for(strategy)
        first = drive(engine_for(strategy, seed=5), objective, workers=3)
        again = drive(engine_for(strategy, seed=5), objective, workers=3)
        other = drive(engine_for(strategy, seed=6), objective, workers=3)
        assert first == again
        assert first != other

    def test_same_seed_gives_the_same_sequence_in_a_fresh_process(self, strategy: str) -> None:
        code = (
            "from tests.contract.engine_contract import engine_for, objective_for;"
            "from tests.engine.conftest import drive;"
            f"print(','.join(drive(engine_for({strategy!r}, seed=11), "
            f"objective_for({strategy!r}), workers=2)))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.strip()
        here = drive(engine_for(strategy, seed=11), objective_for(strategy), workers=2)
        assert out.split(",") == here

    def test_restore_with_candidates_in_flight_resumes_exactly(self, strategy: str) -> None:
        objective = objective_for(strategy)
        a = engine_for(strategy, seed=7, evaluations=70)
        in_flight = [a.ask() for _ in range(3)]
        for _ in range(25):
            done = in_flight.pop(0)
            a.tell(done.id, objective(done.config))
            nxt = a.ask()
            if nxt is not None:
                in_flight.append(nxt)
        assert in_flight
        state = json.loads(json.dumps(a.get_state()))  # JSON-safe
        b = Engine.from_state(state)
        assert [c.id for c in b.pending] == [c.id for c in a.pending]
        for engine in (a, b):
            for candidate in in_flight:
                engine.tell(candidate.id, objective(candidate.config))
        assert drive(a, objective, workers=2) == drive(b, objective, workers=2)
        assert len(b.records) == 70
        assert len({r.key for r in b.records}) == 70

    @pytest.mark.parametrize(
        ("value", "status", "expected"),
        [
            (math.nan, "ok", "invalid_result"),
            (math.inf, "ok", "invalid_result"),
            (-math.inf, "ok", "invalid_result"),
            (None, "ok", "invalid_result"),
            (None, "error", "error"),
            (None, "timeout", "timeout"),
            (None, "compile_error", "compile_error"),
        ],
    )
    def test_failures_are_recorded_and_the_search_goes_on(
        self, strategy: str, value: Any, status: str, expected: str
    ) -> None:
        objective = objective_for(strategy)
        n = n_objectives(strategy)

        def flaky(config: dict[str, Any]) -> Any:
            if config["y"] == 3:
                failed = value if n == 1 or value is None else [value] * n
                return failed, status
            return objective(config)

        engine = engine_for(strategy, evaluations=50)
        keys = drive(engine, flaky, workers=2)
        assert len(keys) == len(set(keys)) == 50
        failed = [r for r in engine.records if r.config["y"] == 3]
        assert failed
        assert {r.status for r in failed} == {expected}
        assert all(r.ok for r in engine.records if r.config["y"] != 3)
        assert all(r.config["y"] != 3 for r in engine.result().ok_records)

    def test_a_search_where_everything_fails_still_finishes(self, strategy: str) -> None:
        engine = engine_for(strategy, evaluations=40)
        drive(engine, lambda c: (None, "crash"))
        assert engine.finished
        assert len(engine.records) == 40
        assert engine.result().ok_records == []

    def test_reading_finished_changes_nothing(self, strategy: str) -> None:
        objective = objective_for(strategy)
        engine = engine_for(strategy, config={"pool_size": 4}, evaluations=30)
        batch = [engine.ask() for _ in range(4)]
        for candidate in batch:
            engine.tell(candidate.id, objective(candidate.config))
        before = json.dumps({**engine.get_state(), "elapsed_s": 0})
        assert not any(engine.finished for _ in range(5))
        assert json.dumps({**engine.get_state(), "elapsed_s": 0}) == before
        assert engine.ask() is not None  # a generation closed by `tell` has candidates ready

    def test_never_proposes_a_configuration_twice(self, strategy: str) -> None:
        engine = engine_for(strategy, evaluations=120)
        keys = drive(engine, objective_for(strategy), workers=4)
        assert len(keys) == len(set(keys)) == 120
        configs = {json.dumps(r.config, sort_keys=True) for r in engine.records}
        assert len(configs) == 120
