"""Compass search: coordinate poll points, step halving and doubling, pattern moves, state."""

from __future__ import annotations

import json

import numpy as np

import ciq_tune.space as ss
from ciq_tune.engine.coordinate_search import INITIAL_STEP
from ciq_tune.engine.coordinate_search import CompassSearch
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes

SPACE = SearchSpace({"a": ss.range(0, 800), "b": ss.range(0, 80), "c": ss.choice(["p", "q"])})


class Archive:
    """`is_new` over the genes proposed so far (the engine's duplicate check); `propose`
    records what the engine would hand out."""

    def __init__(self) -> None:
        self.seen: set[Genes] = set()

    def __call__(self, rows: list[Genes]) -> list[Genes]:
        out: list[Genes] = []
        for row in rows:
            if row not in self.seen and row not in out:
                out.append(row)
        return out

    def propose(self, rows: list[Genes]) -> list[Genes]:
        self.seen.update(rows)
        return rows


def test_the_poll_moves_one_parameter_by_its_step() -> None:
    search = CompassSearch(SPACE)
    points = search.poll((400, 40, 0), 10, Archive(), np.random.default_rng(0))
    assert sorted(points) == [(300, 40, 0), (400, 30, 0), (400, 40, 1), (400, 50, 0), (500, 40, 0)]


def test_steps_halve_once_both_moves_were_tried_down_to_one_value() -> None:
    search, archive, rng = CompassSearch(SPACE), Archive(), np.random.default_rng(0)
    archive.seen.add((400, 40, 0))
    polled = [archive.propose(search.poll((400, 40, 0), 2, archive, rng)) for _ in range(40)]
    assert search.steps[0] == 1 / 800 and search.steps[1] == 1 / 80  # one value each
    assert {(399, 40, 0), (401, 40, 0), (400, 39, 0), (400, 41, 0)} <= archive.seen
    assert polled[-1] == []  # converged: every neighbour tried, nothing left to propose
    assert len(archive.seen) == 1 + sum(len(p) for p in polled)  # never a repeat


def test_a_new_best_doubles_its_step_and_proposes_the_pattern_move_first() -> None:
    search, archive, rng = CompassSearch(SPACE), Archive(), np.random.default_rng(0)
    archive.propose(search.poll((400, 40, 0), 2, archive, rng))
    points = search.poll((500, 40, 0), 2, archive, rng)
    assert points[0] == (700, 40, 0)  # the move repeated twice as far
    assert search.steps[0] == 2 * INITIAL_STEP and search.steps[1] == INITIAL_STEP


def test_continuous_steps_follow_the_log_scale_and_state_round_trips() -> None:
    space = SearchSpace({"w": ss.uniform(0.01, 100.0, log=True)})
    search, archive, rng = CompassSearch(space), Archive(), np.random.default_rng(1)
    points = search.poll((1.0,), 2, archive, rng)
    assert sorted(round(float(p[0] or 0), 6) for p in points) == [0.316228, 3.162278]
    restored = CompassSearch(space)
    restored.load_state(json.loads(json.dumps(search.state())))
    assert restored.state() == search.state()
    again = restored.poll((1.0,), 2, Archive(), np.random.default_rng(2))
    assert again == search.poll((1.0,), 2, Archive(), np.random.default_rng(2))


def test_after_the_coordinate_moves_the_corners_of_parameter_pairs_are_tried() -> None:
    space = SearchSpace({"x": ss.range(0, 10), "y": ss.range(0, 10)})
    search, archive, rng = CompassSearch(space), Archive(), np.random.default_rng(0)
    archive.seen.add((5, 5))
    polled = [archive.propose(search.poll((5, 5), 2, archive, rng)) for _ in range(20)]
    corners = {(4, 4), (4, 6), (6, 4), (6, 6)}
    assert corners <= archive.seen
    first_corner = min(i for i, p in enumerate(polled) if corners & set(p))
    assert {(4, 5), (6, 5), (5, 4), (5, 6)} <= set().union(*polled[: first_corner + 1])


def test_a_used_up_poll_is_converged_until_the_centre_moves_and_the_flag_is_saved() -> None:
    space = SearchSpace({"x": ss.range(0, 10), "y": ss.range(0, 10)})
    search, archive, rng = CompassSearch(space), Archive(), np.random.default_rng(0)
    archive.seen.add((5, 5))
    polled = []
    while not search.converged_at((5, 5)):
        polled.append(archive.propose(search.poll((5, 5), 2, archive, rng)))
        assert len(polled) < 20
    # Converged once a poll came back short: the 4 coordinate and 4 corner neighbours.
    assert len(archive.seen) == 9 and len(polled[-1]) < 2
    restored = CompassSearch(space)
    restored.load_state(json.loads(json.dumps(search.state())))
    assert restored.converged_at((5, 5)) and not restored.converged_at((4, 5))
    assert search.poll((4, 5), 2, archive, rng) and not search.converged_at((4, 5))
