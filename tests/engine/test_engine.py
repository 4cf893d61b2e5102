"""Engine behaviour beyond the contract (tests/contract): budgets, warm start, refills,
constraints, objectives, state errors, configuration bounds."""

from __future__ import annotations

import json
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
from ciq_tune.strict_io import parse_json
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
def test_small_space_is_exhausted_then_finished(strategy: str) -> None:
    space = {"a": ss.range(1, 4), "b": ss.literal("x", knockout_prob=0.5)}
    objectives = ["s"] if _single(strategy) else ["s", "t"]
    engine = create_engine(strategy, space, objectives, budget=Budget(max_evaluations=50), seed=0)
    keys = drive(engine, lambda c: c["a"] if len(objectives) == 1 else [c["a"], -c["a"]])
    assert len(keys) == 8
    assert engine.stop_reason == "every feasible configuration has been evaluated"


def test_a_generation_with_too_few_passes_is_refilled() -> None:
    config = {"pool_size": 10, "min_pass_fraction": 0.5, "max_refills": 1}
    engine = _engine("ga", config=config, budget=Budget(max_generations=2), seed=2)
    drive(engine, lambda c: None)  # everything fails
    first = [r for r in engine.records if r.generation == 0]
    assert len(first) == 20  # the pool plus one refill of 10


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


def test_state_errors_are_clear() -> None:
    state = _engine("ga").get_state()
    with pytest.raises(StateError, match="schema"):
        Engine.from_state({**state, "schema": 99})
    with pytest.raises(StateError, match="unknown strategy"):
        Engine.from_state({**state, "strategy": "nope"})


def test_a_state_with_a_failed_shape_is_strict_json_and_resumes() -> None:
    # A matrix evaluation that failed at one shape carries NaN there; the state `ciq-tune
    # resume` reads back strictly must hold null instead, and resume from it.
    engine = _engine("ga")
    candidate = engine.ask()
    assert candidate is not None
    engine.tell(candidate.id, 1.0, info={"time_ms@0": 0.5, "time_ms@1": float("nan")})
    text = json.dumps(engine.get_state(), allow_nan=False)
    resumed = Engine.from_state(parse_json(text, source="state"))
    assert resumed.records[0].info == {"time_ms@0": 0.5, "time_ms@1": None}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_every_strategy_config_keeps_the_base_bounds(strategy: str) -> None:
    model = STRATEGIES[strategy].config_model
    with pytest.raises(ValueError, match="pool_size"):
        model(pool_size=0)
    with pytest.raises(ValueError, match="crossover_prob"):
        model(crossover_prob=1.5)
    assert model().pool_size >= 2


@pytest.mark.parametrize("strategy", ["ga", "nsga2", "screened"])
def test_a_strategys_published_defaults_are_its_configs_defaults(strategy: str) -> None:
    # `GA_DEFAULTS` and its peers are what the docs and tuning notes cite: a value set there
    # but not in the config model's field would be cited and never used.
    model = STRATEGIES[strategy].config_model
    defaults = vars(sys.modules[model.__module__])[f"{strategy.upper()}_DEFAULTS"]
    config = model().model_dump()
    assert {key: config[key] for key in defaults} == defaults


@pytest.mark.parametrize("strategy", ["ga", "nsga2"])
def test_local_share_breeds_pattern_moves_of_the_elite(strategy: str) -> None:
    space = {f"p{i}": ss.range(0, 99) for i in range(6)}

    def changed_from_elite(local_share: float) -> float:
        engine = create_engine(
            strategy,
            space,
            ["score"] if _single(strategy) else TWO_OBJECTIVES,
            # From the first bred generation on (the GA family's default recombines only there),
            # bred children only in the pre-selected pool (this space is wide).
            config={
                "pool_size": 8,
                "local_share": local_share,
                "local_after": 0,
                "preselection_draws": 0.0,
            },
            budget=Budget(max_evaluations=16),
            seed=5,
        )
        drive(engine, lambda c: {"score": sum(c.values()), "f1": sum(c.values()), "f2": 0.0})
        first, second = engine.records[:8], engine.records[8:]
        elite = sorted(first, key=lambda r: sum(r.config.values()))[:2]
        return float(
            np.mean(
                [
                    min(sum(a != b for a, b in zip(c.genes, e.genes, strict=True)) for e in elite)
                    for c in second
                ]
            )
        )

    # A pattern move changes one parameter, sometimes a few; a recombined child of random
    # parents differs from the two best in most of its six parameters.
    assert changed_from_elite(1.0) <= 2.0 < changed_from_elite(0.0)


def test_the_default_strategys_first_design_keeps_to_the_seed_ranges() -> None:
    from tests.engine.conftest import first_generation

    # A kernel-like listed space, 31**3 configurations, each parameter seeded to 10-20.
    space = {f"p{i}": ss.range(0, 30, seed_low=10, seed_high=20) for i in range(3)}
    engine = create_engine("auto", space, "t", budget=Budget(max_evaluations=200), seed=0)
    first = first_generation(engine)
    assert len(first) >= 4
    assert all(10 <= v <= 20 for c in first for v in c.config.values()), first
    # Outside the seed ranges only once every configuration inside them is in the design.
    small = {"a": ss.range(0, 9, seed_low=4, seed_high=5), "b": ss.range(0, 1)}
    engine = create_engine("auto", small, "t", budget=Budget(max_evaluations=15), seed=0)
    values = [c.config["a"] for c in first_generation(engine)]
    inside = [i for i, v in enumerate(values) if v in (4, 5)]
    assert len(inside) == 4 and inside == list(range(4)), values
