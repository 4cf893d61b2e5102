"""Engine contract: ask/tell, duplicates, failures, budgets, warm start, refills, state."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import ciq_tune.space as ss
from ciq_tune.engine import STRATEGIES
from ciq_tune.engine import Budget
from ciq_tune.engine import Engine
from ciq_tune.engine import Objective
from ciq_tune.engine import create_engine
from ciq_tune.errors import EngineError
from ciq_tune.errors import SpaceError
from ciq_tune.errors import StateError
from tests.engine.conftest import TOY_SPACE
from tests.engine.conftest import drive
from tests.engine.conftest import toy

TWO_OBJECTIVES = [Objective(name="f1"), Objective(name="f2", mode="max")]


def _two(config: dict) -> dict[str, float]:
    return {"f1": config["x"] + config["y"], "f2": config["x"] - 3 * config["y"]}


def _single(strategy: str) -> bool:
    return STRATEGIES[strategy].min_objectives == 1


def _engine(strategy: str, **kwargs) -> Engine:
    objectives = ["score"] if _single(strategy) else TWO_OBJECTIVES
    kwargs.setdefault("budget", Budget(max_evaluations=80))
    return create_engine(strategy, TOY_SPACE, objectives, seed=kwargs.pop("seed", 0), **kwargs)


def _objective(strategy: str):
    return toy if _single(strategy) else _two


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("workers", [1, 5])
def test_never_proposes_a_configuration_twice(strategy: str, workers: int) -> None:
    engine = _engine(strategy, budget=Budget(max_evaluations=150))
    keys = drive(engine, _objective(strategy), workers=workers)
    assert len(keys) == 150
    assert len(set(keys)) == 150
    configs = {json.dumps(r.config, sort_keys=True) for r in engine.records}
    assert len(configs) == 150


def test_toy_reaches_its_optimum() -> None:
    engine = _engine("ga", budget=Budget(max_evaluations=200), seed=4)
    drive(engine, toy)
    assert engine.result().best(1)[0].values == {"score": 2.0}
    assert engine.result().best_config["x"] == 1.0


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_small_space_is_exhausted_then_finished(strategy: str) -> None:
    space = {"a": ss.range(1, 4), "b": ss.literal("x", knockout_prob=0.5)}
    objectives = ["s"] if _single(strategy) else ["s", "t"]
    engine = create_engine(strategy, space, objectives, budget=Budget(max_evaluations=50), seed=0)
    keys = drive(engine, lambda c: c["a"] if len(objectives) == 1 else [c["a"], -c["a"]])
    assert len(keys) == 8
    assert engine.stop_reason == "every feasible configuration has been evaluated"


def test_failures_are_recorded_and_do_not_stop_the_search() -> None:
    def flaky(config: dict):
        if config["y"] == 3:
            return None, "timeout"
        if config["y"] == 2:
            return math.nan
        return toy(config)

    engine = _engine("ga", budget=Budget(max_evaluations=120), seed=1)
    drive(engine, flaky, workers=3)
    statuses = {r.status for r in engine.records}
    assert statuses == {"ok", "timeout", "invalid_result"}
    assert len(engine.records) == 120
    assert all(r.config["y"] == 1 for r in engine.result().ok_records)


def test_a_generation_with_too_few_passes_is_refilled() -> None:
    config = {"pool_size": 10, "min_pass_fraction": 0.5, "max_refills": 1}
    engine = _engine("ga", config=config, budget=Budget(max_generations=2), seed=2)
    drive(engine, lambda c: None)  # everything fails
    first = [r for r in engine.records if r.generation == 0]
    assert len(first) == 20  # the pool plus one refill of 10


def test_all_failing_search_still_finishes() -> None:
    engine = _engine("ga", budget=Budget(max_generations=3), seed=2)
    drive(engine, lambda c: None)
    assert engine.finished
    assert engine.result().best_config is None


def test_steady_state_always_has_a_candidate_for_a_free_worker() -> None:
    engine = _engine("ga", config={"steady_state": True, "pool_size": 8})
    out = [engine.ask() for _ in range(40)]
    assert all(c is not None for c in out)  # none answered, still candidates
    generational = _engine("ga", config={"pool_size": 8})
    batch = [generational.ask() for _ in range(9)]
    assert batch[8] is None  # waits for the generation's results


def test_budgets() -> None:
    engine = _engine("ga", budget=Budget(max_generations=3), config={"pool_size": 6})
    drive(engine, toy)
    assert len(engine.records) == 18
    assert engine.stop_reason == "max_generations=3 reached"

    engine = _engine("ga", budget=Budget(max_time_s=0.05))
    engine.ask()
    import time

    time.sleep(0.06)
    assert engine.ask() is None
    assert "max_time_s" in engine.stop_reason

    engine = _engine("ga", budget=Budget(stagnation_generations=2), config={"pool_size": 4})
    drive(engine, lambda c: 1.0)  # nothing ever improves on the first value
    assert engine.stop_reason == "no improvement in 2 generations"
    assert len(engine.records) == 12


def test_warm_start_evaluates_baseline_and_points_first() -> None:
    engine = create_engine(
        "ga",
        TOY_SPACE,
        "score",
        seed=0,
        baseline="default",
        initial_points=[{"x": 3.0, "y": 2}, {"x": 5.0}],
    )
    first = [engine.ask() for _ in range(3)]
    assert first[0].origin == "baseline"
    assert first[0].config == {"x": 1.0, "y": 1}  # defaults; the flag is not passed
    assert first[1].config == {"x": 3.0, "y": 2}
    assert first[2].config == {"x": 5.0, "y": 1}
    with pytest.raises(SpaceError, match="initial_points"):
        create_engine("ga", TOY_SPACE, "score", initial_points=[{"x": 0.25}])


def test_constraints_are_never_broken() -> None:
    space = ss.SearchSpace(
        {"BM": ss.ordinal([16, 32, 64, 128, 256]), "BN": ss.ordinal([16, 32, 64, 128, 256])},
        constraints=["BM * BN <= 4096"],
    )
    engine = create_engine("ga", space, "t", budget=Budget(max_evaluations=40), seed=0)
    drive(engine, lambda c: -c["BM"] * c["BN"])
    assert all(r.config["BM"] * r.config["BN"] <= 4096 for r in engine.records)
    assert engine.result().best(1)[0].values == {"t": -4096.0}


def test_tell_rejects_unknown_and_repeated_candidates() -> None:
    engine = _engine("ga")
    candidate = engine.ask()
    with pytest.raises(EngineError, match="never handed out"):
        engine.tell(999, 1.0)
    engine.tell(candidate.id, 1.0)
    with pytest.raises(EngineError, match="already told"):
        engine.tell(candidate.id, 1.0)
    with pytest.raises(EngineError, match="expected 1 objective"):
        engine.tell(engine.ask().id, [1.0, 2.0])


def test_strategies_check_the_number_of_objectives() -> None:
    with pytest.raises(EngineError, match="at most 1"):
        create_engine("ga", TOY_SPACE, TWO_OBJECTIVES)
    with pytest.raises(EngineError, match="at least 2"):
        create_engine("nsga2", TOY_SPACE, ["one"])
    with pytest.raises(EngineError, match="unknown strategy"):
        create_engine("cmaes", TOY_SPACE, ["one"])
    assert create_engine("auto", TOY_SPACE, TWO_OBJECTIVES).name == "nsga2"
    assert create_engine("auto", TOY_SPACE, [f"o{i}" for i in range(4)]).name == "nsga3"
    with pytest.raises(EngineError, match="one column per objective"):
        engine = create_engine(
            "nsga3", TOY_SPACE, TWO_OBJECTIVES, config={"ref_dirs": [[1.0, 0.0, 0.0]]}
        )
        drive(engine, _two)


@pytest.mark.parametrize("strategy", ["nsga2", "nsga3", "random"])
def test_multi_objective_results_have_a_pareto_front(strategy: str) -> None:
    engine = create_engine(
        strategy, TOY_SPACE, TWO_OBJECTIVES, budget=Budget(max_generations=4), seed=0
    )
    drive(engine, _two, workers=4)
    front = engine.result().pareto_front()
    F = np.array([[r.values["f1"], -r.values["f2"]] for r in front])
    for row in F:  # no point of the front dominates another
        assert not np.any(np.all(row >= F, axis=1) & np.any(row > F, axis=1))


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_state_round_trip_resumes_exactly_with_candidates_in_flight(strategy: str) -> None:
    objective = _objective(strategy)
    a = _engine(strategy, budget=Budget(max_evaluations=90), seed=7)
    in_flight = [a.ask() for _ in range(3)]
    for _ in range(30):
        done = in_flight.pop(0)
        a.tell(done.id, objective(done.config))
        nxt = a.ask()
        if nxt is not None:
            in_flight.append(nxt)
    state = json.loads(json.dumps(a.get_state()))
    b = Engine.from_state(state)
    for engine in (a, b):
        for candidate in in_flight:
            engine.tell(candidate.id, objective(candidate.config))
    keys_a, keys_b = drive(a, objective, workers=2), drive(b, objective, workers=2)
    assert keys_a == keys_b
    assert len(b.records) == 90
    assert len({r.key for r in b.records}) == 90


def test_state_errors_are_clear() -> None:
    state = _engine("ga").get_state()
    with pytest.raises(StateError, match="schema"):
        Engine.from_state({**state, "schema": 99})
    with pytest.raises(StateError, match="unknown strategy"):
        Engine.from_state({**state, "strategy": "nope"})


def test_same_seed_same_sequence_in_a_fresh_process() -> None:
    code = (
        "from tests.engine.conftest import TOY_SPACE, toy, drive;"
        "from ciq_tune.engine import create_engine, Budget;"
        "e = create_engine('ga', TOY_SPACE, 'score', seed=11, budget=Budget(max_evaluations=60));"
        "print(','.join(drive(e, toy, workers=3)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    engine = create_engine("ga", TOY_SPACE, "score", seed=11, budget=Budget(max_evaluations=60))
    assert out.split(",") == drive(engine, toy, workers=3)
    other = create_engine("ga", TOY_SPACE, "score", seed=12, budget=Budget(max_evaluations=60))
    assert drive(other, toy, workers=3) != out.split(",")
