"""The per-shape descent of a matrix search (`ciq_tune.engine.shape_descent`): its moves, its
schedule by weight, its state, and what it buys where shapes want different configurations."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import Engine
from ciq_tune.engine import create_engine
from ciq_tune.engine.shape_descent import ShapeDescent
from ciq_tune.engine.shape_descent import neighbours
from ciq_tune.engine.shape_descent import pair_moves
from ciq_tune.results import EvaluationRecord
from ciq_tune.space import SearchSpace
from ciq_tune.strict_io import parse_json

# Four parameters of ten values: 10,000 configurations, too many to stumble on an optimum.
SPACE = {name: ss.range(0, 9) for name in ("a", "b", "c", "d")}
# Each shape is fastest at its own point, the weighted mean at neither; shape 0 counts 4 times.
OPTIMA = ((2, 7, 2, 7), (7, 2, 6, 3))
WEIGHTS = (4.0, 1.0)
KEYS = ["time_ms@0", "time_ms@1"]


class _Always:
    """A random generator whose draws always fall below the chance of a move."""

    def random(self) -> float:
        return 0.0


ALWAYS: Any = _Always()


def _times(config: dict) -> list[float]:
    return [1.0 + sum((config[p] - c) ** 2 for p, c in zip("abcd", o, strict=True)) for o in OPTIMA]


def _search(seed: int, descent: bool, budget: int = 60) -> tuple[Engine, list[float]]:
    """A matrix search told the weighted geometric mean, each shape's time in `info`; the best
    time each shape saw."""
    engine = create_engine(
        "screened", SPACE, ["time_ms_geomean"], budget=Budget(max_evaluations=budget), seed=seed
    )
    if descent:
        engine.shape_descent = ShapeDescent(keys=KEYS, weights=list(WEIGHTS))
    best = [math.inf, math.inf]
    while (candidate := engine.ask()) is not None:
        times = _times(candidate.config)
        mean = math.exp(
            sum(w * math.log(t) for w, t in zip(WEIGHTS, times, strict=True)) / sum(WEIGHTS)
        )
        engine.tell(candidate.id, mean, info=dict(zip(KEYS, times, strict=True)))
        best = [min(b, t) for b, t in zip(best, times, strict=True)]
    return engine, best


def test_moves_start_after_the_first_evaluations_and_leave_a_shapes_best() -> None:
    engine, _ = _search(seed=0, descent=True)
    records = engine.records
    moves = [i for i, r in enumerate(records) if r.origin == "descent"]
    assert moves and moves[0] >= ShapeDescent(keys=KEYS, weights=[1, 1]).after
    space = SearchSpace(SPACE)
    for i in moves:
        bests = {min(records[:i], key=lambda r: r.info[key]).genes for key in KEYS}
        near = {m for best in bests for m in neighbours(space, best) + pair_moves(space, best)}
        assert records[i].genes in near
    assert len({r.key for r in records}) == len(records)  # nothing proposed twice


def test_of_a_turns_moves_the_one_the_model_ranks_best_is_proposed() -> None:
    # `b` of 2 or 3 is fast, any other slow; `a` costs a little away from 5. From the best at
    # b = 2 (or 3), the move to the other fast `b` beats every move of `a` and to a slow `b`.
    space = SearchSpace({"a": ss.range(0, 9), "b": ss.range(0, 9)})

    def time(config: dict) -> float:
        return 1.0 + 0.1 * abs(config["a"] - 5) + (0.0 if config["b"] in (2, 3) else 1.0)

    engine = create_engine("random", space, ["t"], budget=Budget(max_evaluations=30), seed=0)
    while (candidate := engine.ask()) is not None:
        engine.tell(candidate.id, time(candidate.config), info={"t@0": time(candidate.config)})
    best = min(engine.records, key=lambda r: r.info["t@0"]).config
    assert best["b"] in (2, 3)
    descent = ShapeDescent(keys=["t@0"], weights=[1.0], after=0)
    move = descent.propose(space, engine.records, lambda rows: rows, ALWAYS)
    assert move is not None and space.decode(move) == {**best, "b": 5 - best["b"]}


def test_turns_follow_the_weights() -> None:
    descent = ShapeDescent(keys=KEYS, weights=[1.0, 8.0], after=0)
    space = SearchSpace(SPACE)
    engine, _ = _search(seed=1, descent=False, budget=5)
    for _ in range(18):
        assert descent.propose(space, engine.records, lambda rows: rows, ALWAYS) is not None
    assert descent.turns == [2, 16]


def test_the_descent_finds_each_shapes_optimum_the_mean_alone_misses() -> None:
    # Seeds declared before the run; 150 evaluations of 10,000 configurations.
    with_descent = [_search(seed, descent=True, budget=150)[1] for seed in range(3)]
    without = [_search(seed, descent=False, budget=150)[1] for seed in range(3)]
    assert all(best == [1.0, 1.0] for best in with_descent), with_descent
    assert all(best != [1.0, 1.0] for best in without), without


def test_the_descent_and_its_turns_are_kept_in_the_engines_state() -> None:
    engine, _ = _search(seed=2, descent=True, budget=40)
    state = parse_json(json.dumps(engine.get_state(), allow_nan=False), source="state")
    resumed = Engine.from_state(state)
    assert resumed.shape_descent == engine.shape_descent
    assert sum(engine.shape_descent.turns) > 0  # type: ignore[union-attr]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="one positive weight per key"):
        ShapeDescent(keys=KEYS, weights=[1.0])
    with pytest.raises(ValueError, match="one positive weight per key"):
        ShapeDescent(keys=KEYS, weights=[1.0, 0.0])


def _record(i: int, origin: str, value: float) -> EvaluationRecord:
    return EvaluationRecord(
        candidate_id=i,
        generation=0,
        config={},
        genes=(i,),
        key=str(i),
        origin=origin,  # type: ignore[arg-type]
        status="ok",
        values={"t": value},
        elapsed_s=0.0,
        info={"t@0": value},
    )


def test_the_chance_of_a_move_follows_the_new_bests_the_moves_find() -> None:
    descent = ShapeDescent(keys=["t@0"], weights=[1.0], after=5)
    start = [_record(i, "random", 10.0 + i) for i in range(5)]
    assert descent.move_share(start) == 0.5  # no evidence yet
    # Every move a new best, no proposal of the engine one: up to `share`.
    moves_find = [
        _record(5 + i, "descent" if i % 2 else "offspring", 9.0 - i if i % 2 else 20.0)
        for i in range(20)
    ]
    assert descent.move_share(start + moves_find) == descent.share
    # The other way round: down to 1 - share.
    engine_finds = [
        _record(5 + i, "offspring" if i % 2 else "descent", 9.0 - i if i % 2 else 20.0)
        for i in range(20)
    ]
    assert descent.move_share(start + engine_finds) == 1.0 - descent.share
