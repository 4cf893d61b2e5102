"""MLSL's rule: the critical distance, which explored point starts a descent, its state."""

from __future__ import annotations

import json
import math

import numpy as np

import ciq_tune.space as ss
from ciq_tune.engine.multistart import DESCENT_FINEST_STEP
from ciq_tune.engine.multistart import LocalDescent
from ciq_tune.engine.multistart import Restarts
from ciq_tune.engine.multistart import Samples
from ciq_tune.engine.multistart import critical_distance
from ciq_tune.engine.multistart import descent_start
from ciq_tune.engine.multistart import lowest_within
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.proposals import ProposalArchive
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes


def test_the_critical_distance_follows_the_formula_and_shrinks_with_the_samples() -> None:
    # Two dimensions: Gamma(2) = 1, so r_k = sqrt(sigma log k / (pi k)).
    assert math.isclose(
        critical_distance(100, 2, 2.0), math.sqrt(2 * math.log(100) / 100 / math.pi)
    )
    assert critical_distance(400, 2, 2.0) < critical_distance(100, 2, 2.0)
    assert critical_distance(100, 2, 4.0) > critical_distance(100, 2, 2.0)
    assert critical_distance(1, 2, 2.0) == math.inf


def test_a_descent_starts_from_the_lowest_eligible_point_without_a_lower_neighbour() -> None:
    X = np.array([[0.1, 0.1], [0.15, 0.1], [0.9, 0.9], [0.5, 0.5], [0.52, 0.5]])
    values = np.array([1.0, 0.5, 3.0, 2.0, 2.5])
    # Point 0 has the lower point 1 beside it; point 4 has point 3.
    assert not lowest_within(X, values, 0, 0.2) and lowest_within(X, values, 1, 0.2)
    assert descent_start(X, values, [True] * 5, 0.2) == 1
    # Point 1 (the best, already polished) may not start one: the next local minimum does.
    assert descent_start(X, values, [True, False, True, True, True], 0.2) == 3
    # Within a radius that spans the plane only the lowest point is a local minimum.
    assert descent_start(X, values, [True, False, True, True, True], 2.0) is None


def test_a_descent_round_trips_through_json_with_its_coarse_steps() -> None:
    space = SearchSpace({"a": ss.range(0, 800), "b": ss.range(0, 80)})
    descent = LocalDescent(space, 7)
    descent.ids += [9, 12]
    archive: set[Genes] = set()

    def is_new(rows: list[Genes]) -> list[Genes]:
        return [r for r in rows if r not in archive]

    for _ in range(20):
        archive.update(descent.compass.poll((400, 40), 4, is_new, np.random.default_rng(0)))
    # The coarse search stops at 1/32 of each range (25 and 2.5 values), not at one value.
    finest = [DESCENT_FINEST_STEP] * 2
    assert descent.compass.steps == finest and descent.compass.converged
    restored = LocalDescent.from_state(space, json.loads(json.dumps(descent.state())))
    assert restored.ids == [7, 9, 12] and restored.state() == descent.state()


def test_restarts_descend_from_the_lowest_free_sample_and_stop_at_a_lower_point() -> None:
    space = SearchSpace({"a": ss.range(0, 100), "b": ss.range(0, 100)})
    archive = ProposalArchive(space)
    archive.next_id = 100  # the samples' ids are below
    restarts = Restarts(space)

    def make(genes: Genes) -> Candidate | None:
        return archive.candidate(genes, "offspring", 0)

    def samples(points: list[tuple[tuple[int, int], float]]) -> Samples:
        genes: list[Genes] = [g for g, _ in points]
        X = np.array([[a / 100, b / 100] for (a, b), _ in points])
        values = np.array([v for _, v in points])
        return Samples(list(range(len(points))), genes, X, values, 0.2)

    rng = np.random.default_rng(0)
    points: list[tuple[tuple[int, int], float]] = [
        ((10, 10), 1.0),
        ((12, 10), 2.0),
        ((90, 90), 4.0),
        ((50, 50), 3.0),
    ]
    # Point 0 is the best (not eligible) and lies beside point 1: 3 is the lowest free one.
    eligible = [False, True, True, True]
    out = restarts.propose(samples(points), eligible, 4, archive.new_genes, make, rng)
    assert restarts.descent is not None and restarts.descent.ids == [3] + [c.id for c in out]
    # Its compass poll: the four coordinate moves around (50, 50), 1/8 of each range away.
    assert sorted(c.genes for c in out) == [(38, 50), (50, 38), (50, 62), (62, 50)]
    # A lower evaluation (a bred child, not eligible) within the critical distance of its
    # centre stops it; its start never starts another, and the next free sample (2) does.
    points.append(((52, 50), 2.5))
    out = restarts.propose(samples(points), [*eligible, False], 4, archive.new_genes, make, rng)
    assert 3 in restarts.descended and restarts.descent.ids[0] == 2 and len(out) == 4
    restored = Restarts(space)
    restored.load_state(json.loads(json.dumps(restarts.state())))
    assert restored.state() == restarts.state()
