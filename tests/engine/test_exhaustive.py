"""`SearchSpace.enumerate_genes`, the `exhaustive` strategy and `auto` choosing it."""

from __future__ import annotations

import itertools
import json
import math
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import Engine
from ciq_tune.engine import budget_covers_space
from ciq_tune.engine import create_engine
from ciq_tune.errors import SpaceError
from tests.engine.conftest import drive

ALGOS = ["tiled", "split_k", "stream"]
BMS = [16, 32, 64, 128]
BNS = [16, 32, 48, 64, 80, 96, 112, 128]
SPLITS = [2, 4, 6, 8]
STAGES = [1, 2, 3]


def _space() -> ss.SearchSpace:
    """A constrained space with a knockout literal and two conditional parameters (one of
    them knockout-able too): 3 * 4 * 8 * 4 * 2 * 4 = 3072 gene combinations."""
    return ss.SearchSpace(
        {
            "algo": ss.choice(ALGOS),
            "tile": {"BM": ss.ordinal(BMS), "BN": ss.range(16, 128, 16)},
            "split": ss.conditional(ss.range(2, 8, 2), when="algo == 'split_k'"),
            "flag": ss.literal("-O3", knockout_prob=0.5),
            "stages": ss.conditional(ss.choice(STAGES, knockout_prob=0.3), when="BM >= 64"),
        },
        constraints=["BM * BN <= 4096"],
    )


def _brute_force() -> list[dict[str, Any]]:
    """Every distinct feasible configuration of `_space()`, built from its definition."""
    configs = []
    for algo, bm, bn in itertools.product(ALGOS, BMS, BNS):
        if bm * bn > 4096:
            continue
        for split in SPLITS if algo == "split_k" else [None]:
            for flag in (True, False):
                for stages in [*STAGES, None] if bm >= 64 else [None]:
                    config: dict[str, Any] = {"algo": algo, "tile": {"BM": bm, "BN": bn}}
                    if split is not None:
                        config["split"] = split
                    if flag:
                        config["flag"] = "-O3"
                    if stages is not None:
                        config["stages"] = stages
                    configs.append(config)
    return configs


def _text(config: Any) -> str:
    return json.dumps(config, sort_keys=True)


# 22 feasible tiles (6 with BM >= 64) x 6 (algo, split) x 2 (flag) x 1 or 4 (stages): 480.
LISTED = [_text(c) for c in _brute_force()]


def _objective(config: dict[str, Any]) -> list[float]:
    return [config["tile"]["BM"] / config["tile"]["BN"], -config.get("split", 1)]


def _configs(engine: Engine) -> list[str]:
    return [_text(r.config) for r in engine.records]


# -- SearchSpace.enumerate_genes ----------------------------------------------------------------
def test_enumerate_genes_lists_each_feasible_configuration_once() -> None:
    space = _space()
    rows = list(space.enumerate_genes())
    configs = [_text(space.decode(genes)) for _, genes in rows]
    assert len(LISTED) == 480
    assert len(configs) == len(set(configs)) == len(LISTED)
    assert set(configs) == set(LISTED)
    keys = [space.key(genes) for _, genes in rows]
    assert len(set(keys)) == len(keys)
    assert all(space.is_feasible(genes) for _, genes in rows)
    numbers = [row for row, _ in rows]
    assert numbers == sorted(set(numbers)) and numbers[-1] < space.cardinality()
    assert list(space.enumerate_genes()) == rows  # a fixed order


def test_enumerate_genes_resumes_after_a_row() -> None:
    space = _space()
    rows = list(space.enumerate_genes())
    for i in (0, 1, 200, len(rows) - 1):
        assert list(space.enumerate_genes(start=rows[i][0] + 1)) == rows[i + 1 :]
    assert list(space.enumerate_genes(start=0)) == rows


def test_enumerate_genes_refuses_a_continuous_or_too_large_space_in_one_line() -> None:
    space = ss.SearchSpace({"BM": ss.ordinal(BMS), "lr": ss.uniform(1e-3, 1.0, log=True)})
    with pytest.raises(SpaceError, match=r"parameter `lr` is continuous \(uniform\)") as info:
        space.enumerate_genes()
    assert "\n" not in str(info.value)
    with pytest.raises(SpaceError, match=r"3072 gene combinations .* more than limit=3071"):
        _space().enumerate_genes(3071)
    assert len(list(_space().enumerate_genes(3072))) == 480


def _parameter(kind: int, n: int, knockout: bool) -> ss.Parameter:
    p = 0.5 if knockout else None
    if kind == 0:
        return ss.range(0, n - 1, knockout_prob=p)
    if kind == 1:
        return ss.choice([f"c{i}" for i in range(n)], knockout_prob=p)
    return ss.literal("-flag", knockout_prob=0.5)


PARAMETERS = st.builds(_parameter, st.integers(0, 2), st.integers(1, 4), st.booleans())


@settings(max_examples=40, deadline=None)
@given(
    first=st.integers(2, 4),
    params=st.lists(PARAMETERS, min_size=1, max_size=4),
    conditional=st.lists(st.booleans(), min_size=4, max_size=4),
    limit=st.integers(0, 6),
)
def test_enumerate_genes_matches_a_brute_force_on_random_spaces(
    first: int, params: list[ss.Parameter], conditional: list[bool], limit: int
) -> None:
    spec: dict[str, Any] = {"a": ss.range(0, first - 1)}
    for i, (param, when) in enumerate(zip(params, conditional, strict=False)):
        spec[f"p{i}"] = ss.conditional(param, when=f"a >= {i % first}") if when else param
    space = ss.SearchSpace(spec, constraints=[lambda flat: len(flat) <= limit])
    # Brute force over every parameter's genes: value indices, then None when knocked out.
    genes_of = []
    for p in space.params:
        knock = p.knockout_prob is not None
        genes_of.append([*range(int(p.cardinality()) - knock), *([None] if knock else [])])
    brute = {space.key(g) for g in itertools.product(*genes_of) if space.is_feasible(g)}
    listed = [space.key(g) for _, g in space.enumerate_genes()]
    assert len(listed) == len(set(listed)) == len(brute)
    assert set(listed) == brute


# -- the exhaustive strategy ---------------------------------------------------------------------
def test_exhaustive_proposes_every_feasible_configuration_once_then_finishes() -> None:
    engine = create_engine("exhaustive", _space(), ["ratio", "split"])
    assert engine.budget == Budget()  # no budget: until the space is exhausted
    keys = drive(engine, _objective, workers=5)
    assert engine.finished
    assert engine.stop_reason == "every feasible configuration has been evaluated"
    assert len(keys) == len(set(keys)) == 480
    assert sorted(_configs(engine)) == sorted(LISTED)
    front = engine.result().pareto_front()  # objective-agnostic: two objectives here
    assert front and all(r.ok for r in front)


def test_the_listing_follows_enumeration_order_and_ignores_the_seed() -> None:
    space = _space()
    order = [_text(space.decode(g)) for _, g in space.enumerate_genes()]
    for seed in (0, 1):
        engine = create_engine("exhaustive", space, "t", seed=seed, config={"pool_size": 7})
        drive(engine, lambda c: 1.0, workers=3)
        assert _configs(engine) == order


def test_warm_starts_come_first_then_the_rest_of_the_listing() -> None:
    space = _space()
    order = [_text(space.decode(g)) for _, g in space.enumerate_genes()]
    points = [
        {"algo": "stream", "tile": {"BM": 64, "BN": 32}, "flag": "-O3", "stages": 2},
        json.loads(order[0]),  # also the listing's first
    ]
    engine = create_engine(
        "exhaustive", space, "t", baseline="default", initial_points=points, config={"pool_size": 4}
    )
    drive(engine, lambda c: c["tile"]["BM"])
    configs = _configs(engine)
    baseline = _text(space.decode(space.default_genes()))
    assert [r.origin for r in engine.records[:3]] == ["baseline", "initial", "initial"]
    assert configs[:3] == [baseline, _text(points[0]), _text(points[1])]
    assert configs[3:] == [c for c in order if c not in configs[:3]]
    assert len(configs) == len(set(configs)) == 480


def test_a_budget_stops_the_listing_at_its_prefix() -> None:
    space = _space()
    order = [_text(space.decode(g)) for _, g in space.enumerate_genes()]
    engine = create_engine("exhaustive", space, "t", budget=Budget(max_evaluations=37))
    drive(engine, lambda c: 1.0, workers=4)
    assert engine.stop_reason == "max_evaluations=37 reached"
    assert _configs(engine) == order[:37]
    by_generations = create_engine(
        "exhaustive", space, "t", budget=Budget(max_generations=3), config={"pool_size": 10}
    )
    drive(by_generations, lambda c: 1.0, workers=10)
    assert _configs(by_generations) == order[:30]


@pytest.mark.parametrize("steady_state", [False, True])
def test_out_of_order_tells_with_failures_still_list_everything_once(steady_state: bool) -> None:
    space = _space()
    engine = create_engine(
        "exhaustive",
        space,
        ["ratio", "split"],
        config={"pool_size": 6, "steady_state": steady_state},
    )
    rng = np.random.default_rng(0)
    out: list[Any] = []
    most_out = 0
    for _ in range(100_000):
        if engine.finished:
            break
        while (candidate := engine.ask()) is not None:
            out.append(candidate)
            if steady_state and len(out) >= 6:
                break
        most_out = max(most_out, len(out))
        done = out.pop(int(rng.integers(len(out))))  # any of those out, not the oldest
        if done.config["tile"]["BN"] == 48:
            engine.tell(done.id, None, status="compile_error")
        elif done.config["tile"]["BM"] == 64:
            engine.tell(done.id, [math.nan, 1.0])
        else:
            engine.tell(done.id, _objective(done.config))
    assert engine.finished and not out
    assert most_out == 6
    assert sorted(_configs(engine)) == sorted(LISTED)
    statuses = {r.status for r in engine.records if not r.ok}
    assert statuses == {"compile_error", "invalid_result"}
    assert all(r.ok for r in engine.records if r.config["tile"] == {"BM": 32, "BN": 64})


def test_everything_failing_still_lists_the_space() -> None:
    engine = create_engine("exhaustive", _space(), "t", config={"pool_size": 8})
    drive(engine, lambda c: (None, "crash"), workers=3)
    assert engine.finished
    assert len(engine.records) == 480 and engine.result().ok_records == []


def test_a_restored_engine_resumes_the_listing_exactly() -> None:
    config = {"pool_size": 8}
    space = _space()
    a = create_engine("exhaustive", space, ["ratio", "split"], config=config, baseline="default")
    in_flight = [a.ask() for _ in range(5)]
    for _ in range(300):
        done = in_flight.pop(0)
        a.tell(done.id, _objective(done.config))
        while (nxt := a.ask()) is not None:
            in_flight.append(nxt)
    assert in_flight
    state = json.loads(json.dumps(a.get_state()))  # JSON-safe
    assert state["strategy"] == "exhaustive"
    assert set(state["strategy_state"]) == {"next_row"}  # a cursor, not the list
    row_of = {space.key(genes): row for row, genes in space.enumerate_genes()}
    last = max(row_of[c.key] for c in a.pending)  # the last one listed is out
    assert state["strategy_state"]["next_row"] == last + 1
    b = Engine.from_state(state)
    assert b.name == "exhaustive" and b.budget == a.budget
    assert [c.id for c in b.pending] == [c.id for c in a.pending]
    assert json.loads(json.dumps({**b.get_state(), "elapsed_s": 0})) == {**state, "elapsed_s": 0}
    for engine in (a, b):
        for candidate in reversed(in_flight):
            engine.tell(candidate.id, _objective(candidate.config))
    assert drive(a, _objective, workers=3) == drive(b, _objective, workers=3)
    assert _configs(a) == _configs(b)
    assert sorted(_configs(b)) == sorted(LISTED)


def test_reading_finished_changes_nothing() -> None:
    engine = create_engine("exhaustive", _space(), "t", config={"pool_size": 4})
    for candidate in [engine.ask() for _ in range(4)]:
        engine.tell(candidate.id, 1.0)
    before = json.dumps({**engine.get_state(), "elapsed_s": 0})
    assert not any(engine.finished for _ in range(5))
    assert json.dumps({**engine.get_state(), "elapsed_s": 0}) == before
    assert engine.ask() is not None


def test_exhaustive_refuses_a_continuous_or_too_large_space_at_construction() -> None:
    space = {"BM": ss.ordinal(BMS), "lr": ss.uniform(1e-3, 1.0)}
    with pytest.raises(SpaceError, match="parameter `lr` is continuous"):
        create_engine("exhaustive", space, "t")
    with pytest.raises(SpaceError, match="more than limit=100"):
        create_engine("exhaustive", _space(), "t", config={"max_combinations": 100})


# -- auto -----------------------------------------------------------------------------------------
def test_auto_lists_the_space_iff_the_budget_covers_its_feasible_configurations() -> None:
    space = _space()

    def picked(budget: Budget | None, objectives: Any = "t", **kwargs: Any) -> str:
        return create_engine("auto", space, objectives, budget=budget, **kwargs).name

    assert picked(Budget(max_evaluations=480)) == "exhaustive"
    assert picked(Budget(max_evaluations=5000)) == "exhaustive"
    assert picked(Budget(max_evaluations=479)) == "screened"
    assert picked(Budget(max_evaluations=480), ["a", "b"]) == "exhaustive"
    assert picked(Budget(max_evaluations=479), ["a", "b"]) == "nsga2"
    assert picked(None) == "screened"
    assert picked(Budget(max_generations=1000)) == "screened"  # no max_evaluations
    # Another limit that would stop the listing part way keeps the usual rule.
    assert picked(Budget(max_evaluations=2000, max_generations=30)) == "exhaustive"  # 30 x 16
    assert picked(Budget(max_evaluations=2000, max_generations=29)) == "screened"
    assert picked(Budget(max_evaluations=2000, stagnation_generations=5)) == "screened"
    assert picked(Budget(max_evaluations=480), config={"pool_size": 8}) == "exhaustive"
    # Settings of another strategy: the usual rule, not a config error.
    assert picked(Budget(max_evaluations=480), config={"ranking": "parzen"}) == "screened"
    spec = {"x": ss.range(1, 4), "lr": ss.uniform(0.0, 1.0)}
    assert create_engine("auto", spec, "t", budget=Budget(max_evaluations=10**6)).name == (
        "screened"
    )
    small = {"a": ss.range(1, 4), "b": ss.literal("x", knockout_prob=0.5)}  # a spec dict
    assert create_engine("auto", small, "t", budget=Budget(max_evaluations=8)).name == (
        "exhaustive"
    )


def test_auto_does_not_list_a_space_too_large_to_count_cheaply() -> None:
    # 10^7 combinations, 11 feasible: more than AUTO_LIST_LIMIT, so not counted (fast).
    wide = ss.SearchSpace(
        {f"p{i}": ss.range(0, 9) for i in range(7)}, constraints=["p0 + p1 + p2 + p3 <= 1"]
    )
    started = time.perf_counter()
    assert not budget_covers_space(wide, Budget(max_evaluations=50_000), None)
    # 10^4 combinations, 10 feasible, but more than 1000 per evaluation of a budget of 5.
    narrow = ss.SearchSpace(
        {f"p{i}": ss.range(0, 9) for i in range(4)}, constraints=["p0 + p1 + p2 <= 0"]
    )
    assert not budget_covers_space(narrow, Budget(max_evaluations=9), None)
    assert time.perf_counter() - started < 1.0
    assert budget_covers_space(narrow, Budget(max_evaluations=10), None)
    assert not budget_covers_space(narrow, Budget(max_evaluations=10), {"max_combinations": 99})
