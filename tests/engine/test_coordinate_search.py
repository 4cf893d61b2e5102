"""Compass search: coordinate poll points, step halving and doubling, pattern moves, state,
and the quadratic-model step over continuous parameters."""

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


def test_a_step_whose_moves_failed_contracts_to_the_vertex_of_their_parabola() -> None:
    space = SearchSpace({"a": ss.range(0, 800)})

    def f(genes: Genes) -> float:
        return float((genes[0] - 437) ** 2)

    def second_poll(with_values: bool) -> list[Genes]:
        search, archive, rng = CompassSearch(space), Archive(), np.random.default_rng(0)
        archive.seen.add((400,))
        first = archive.propose(search.poll((400,), 2, archive, rng))
        assert sorted(first) == [(300,), (500,)]  # both worse than the centre
        values = {g: f(g) for g in [(400,), *first]} if with_values else None
        return sorted(search.poll((400,), 2, archive, rng, values))

    # The parabola through 300, 400 and 500 is the objective: its vertex, 437, is polled next,
    # where halving the step (without values) polls 350 and 450.
    assert second_poll(with_values=True) == [(363,), (437,)]
    assert second_poll(with_values=False) == [(350,), (450,)]


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


CONTINUOUS = SearchSpace(
    {"u": ss.uniform(-5.0, 5.0), "v": ss.uniform(-5.0, 5.0), "k": ss.choice(["a", "b"])}
)
# A rotated bowl (its axes are not the parameters') with its minimum at u = 1.3, v = -2.1.
MINIMUM = np.array([1.3, -2.1])


def bowl(genes: Genes) -> float:
    d = np.array(genes[:2], dtype=float) - MINIMUM
    return float((d[0] + d[1]) ** 2 + 5 * (d[0] - d[1]) ** 2)


def evaluated_near(centre: tuple[float, float], spread: float, n: int) -> dict[Genes, float]:
    """`n` configurations with k = "a" (gene 0) scattered around `centre`, the centre first."""
    rng = np.random.default_rng(3)
    points = [centre, *map(tuple, np.asarray(centre) + rng.uniform(-spread, spread, (n - 1, 2)))]
    return {(float(u), float(v), 0): bowl((u, v)) for u, v in points}


def first_poll_point(values: dict[Genes, float], centre: Genes) -> Genes:
    search = CompassSearch(CONTINUOUS)
    polled = search.poll(centre, 1, lambda rows: rows, np.random.default_rng(0), values)
    return polled[0]


def test_the_first_poll_point_is_the_minimum_of_the_quadratic_fitted_near_the_centre() -> None:
    values = evaluated_near((1.0, -1.8), 0.5, 12)  # 2 per coefficient of a 2-D quadratic
    point = first_poll_point(values, (1.0, -1.8, 0))
    # The bowl is quadratic: its fit is exact, and so is the step (the categorical stays).
    assert np.allclose(point[:2], MINIMUM, atol=1e-9) and point[2] == 0


def test_the_model_step_stays_within_the_points_it_was_fitted_to() -> None:
    values = evaluated_near((-3.0, 3.0), 0.2, 12)  # the minimum is ~ 7 away, the points 0.28
    point = first_poll_point(values, (-3.0, 3.0, 0))
    reach = max(np.hypot(u + 3.0, v - 3.0) for u, v, _ in values)
    step = np.hypot(point[0] + 3.0, point[1] - 3.0)
    assert np.isclose(step, reach, rtol=1e-6)  # the full step, cut back to the fitted radius
    assert bowl(point) < bowl((-3.0, 3.0))  # …in the downhill direction


def test_no_model_step_where_the_fit_does_not_curve_upwards_or_has_too_few_points() -> None:
    saddle = {
        g: (g[0] - 1.0) ** 2 - (g[1] + 1.8) ** 2 for g in evaluated_near((1.0, -1.8), 0.5, 12)
    }
    few = evaluated_near((1.0, -1.8), 0.5, 11)
    for values in (saddle, few):
        search = CompassSearch(CONTINUOUS)
        polled = search.poll((1.0, -1.8, 0), 8, lambda rows: rows, np.random.default_rng(0), values)
        # Only coordinate moves: one parameter differs from the centre.
        assert all(sum(a != b for a, b in zip(p, (1.0, -1.8, 0), strict=True)) == 1 for p in polled)


def test_evaluations_with_other_discrete_values_are_not_fitted() -> None:
    values = evaluated_near((1.0, -1.8), 0.5, 12)
    # Misleading values at k = "b" (a bowl elsewhere) next to the centre change nothing.
    rng = np.random.default_rng(5)
    for u, v in np.array([1.0, -1.8]) + rng.uniform(-0.1, 0.1, (30, 2)):
        values[(float(u), float(v), 1)] = (u + 4) ** 2 + v**2
    point = first_poll_point(values, (1.0, -1.8, 0))
    assert np.allclose(point[:2], MINIMUM, atol=1e-9)


def test_a_discrete_space_gets_no_model_step() -> None:
    space = SearchSpace({"a": ss.range(0, 999), "b": ss.range(-500, 499)})
    values = {(a, b): float(a * a + b * b) for a in range(0, 40, 3) for b in range(-20, 20, 3)}
    polled = [
        CompassSearch(space).poll((9, 1), 6, lambda rows: rows, np.random.default_rng(0), v)
        for v in (values, None)
    ]
    assert polled[0] == polled[1]


def test_an_inactive_continuous_parameter_is_left_out_of_the_model() -> None:
    space = SearchSpace(
        {
            "u": ss.uniform(-5.0, 5.0),
            "v": ss.uniform(-5.0, 5.0),
            "k": ss.choice(["a", "b"]),
            "t": ss.conditional(ss.uniform(0.0, 1.0), when="k == 'b'"),
        }
    )
    # k = "a": t is inactive, its genes are whatever they were drawn as, and nothing depends
    # on them. The model is the bowl's over u and v alone, and t stays where it was.
    rng = np.random.default_rng(4)
    values = {
        (u, v, 0, float(rng.uniform())): value
        for (u, v, _), value in evaluated_near((1.0, -1.8), 0.5, 12).items()
    }
    centre = next(g for g in values if g[:2] == (1.0, -1.8))
    polled = CompassSearch(space).poll(centre, 1, lambda rows: rows, rng, values)
    assert np.allclose(polled[0][:2], MINIMUM, atol=1e-9) and polled[0][2:] == centre[2:]


def test_a_model_step_that_did_not_move_the_centre_halves_the_next_ones_reach() -> None:
    centre: Genes = (-3.0, 3.0, 0)
    values = evaluated_near((-3.0, 3.0), 0.2, 12)  # the minimum is ~ 7 away: steps are cut

    def unit_length(point: Genes) -> float:
        return float(np.hypot((point[0] + 3.0) / 10, (point[1] - 3.0) / 10))  # 10 = the range

    search, rng = CompassSearch(CONTINUOUS), np.random.default_rng(0)
    first = search.poll(centre, 1, lambda rows: rows, rng, values)[0]
    saved = json.loads(json.dumps(search.state()))
    values[first] = bowl(centre) + 1.0  # it failed: the centre stays
    second = search.poll(centre, 1, lambda rows: rows, rng, values)[0]
    assert np.isclose(unit_length(second), unit_length(first) / 2)
    restored = CompassSearch(CONTINUOUS)
    restored.load_state(saved)  # the step still out is part of the state
    again = restored.poll(centre, 1, lambda rows: rows, np.random.default_rng(0), values)[0]
    assert again == second


def test_parameters_the_model_resolves_are_not_polled_and_the_poll_converges() -> None:
    centre: Genes = (*MINIMUM, 0)
    values = evaluated_near(tuple(MINIMUM), 0.5, 12)  # the fit's minimum is the centre
    search, archive = CompassSearch(CONTINUOUS), Archive()
    archive.seen.update(values)
    rng = np.random.default_rng(0)
    polled = archive.propose(search.poll(centre, 8, archive, rng, values))
    # Only the category's other value: u and v are resolved by the model, so nothing is left.
    assert polled == [(*MINIMUM, 1)]
    assert search.poll(centre, 8, archive, rng, values) == [] and search.converged_at(centre)
    # Without the values the same centre polls u and v.
    plain = CompassSearch(CONTINUOUS).poll(centre, 8, Archive(), np.random.default_rng(0))
    assert sum(p[2] == 0 for p in plain) == 4


def other_category_rows(centre: tuple[float, float], own: int) -> dict[Genes, float]:
    """`own` rows at the centre's k = "a" (the centre first), and 12 more at k = "b", where the
    same bowl is 5 higher: the continuous values add to the category."""
    near = evaluated_near(centre, 0.5, 12 + own)
    rows = list(near.items())
    values = dict(rows[:own])
    values.update({(u, v, 1): value + 5.0 for (u, v, _), value in rows[own:]})
    return values


def test_after_a_move_of_another_parameter_rows_of_its_other_values_are_fitted_too() -> None:
    values = other_category_rows((1.0, -1.8), own=3)  # 12 are needed at k = "a"
    point = first_poll_point(values, (1.0, -1.8, 0))
    # One constant per category, the shape shared: exact where they add up.
    assert np.allclose(point[:2], MINIMUM, atol=1e-9) and point[2] == 0


def test_a_fit_over_other_values_resolves_nothing() -> None:
    centre: Genes = (*MINIMUM, 0)
    values = other_category_rows(tuple(MINIMUM), own=3)  # its minimum is the centre
    polled = CompassSearch(CONTINUOUS).poll(centre, 8, Archive(), np.random.default_rng(0), values)
    assert sum(p[2] == 0 for p in polled) == 4  # u and v are still polled


def test_the_other_values_may_be_unhashable() -> None:
    # A category of tile shapes: its values are lists; the rows are grouped by their genes.
    space = SearchSpace(
        {"u": ss.uniform(-5.0, 5.0), "v": ss.uniform(-5.0, 5.0), "k": ss.choice([[16], [32]])}
    )
    values = other_category_rows((1.0, -1.8), own=3)
    polled = CompassSearch(space).poll(
        (1.0, -1.8, 0), 1, lambda rows: rows, np.random.default_rng(0), values
    )
    assert np.allclose(polled[0][:2], MINIMUM, atol=1e-9)
