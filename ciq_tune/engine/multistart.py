"""Restarts of a local descent from explored configurations in basins nobody has descended.

Once the polish around the best has used up its poll, the exploration points are the only news
of other basins, and one of them rarely lands low enough to beat the best: a basin narrower
than the exploration's spacing is found only by descending from the point that fell into it.
Multi-level single linkage (Rinnooy Kan & Timmer, Math. Prog. 39, 1987, sec. 3) starts a
local descent from a sample point that is lower than every other sample within a critical
distance r_k, which shrinks as the samples k grow (`critical_distance`); each point starts at
most one descent, and every point a descent proposed is marked, so a basin already descended
is not descended again from inside it; a descent that comes within r_k of a lower point than its
own best has run into a basin already known, and stops. The descent is a compass search of its own
(`LocalDescent`), started at the default steps, so that it resolves its basin as the polish
does the best's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ciq_tune.engine.coordinate_search import CompassSearch
from ciq_tune.engine.proposals import Candidate
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes

# Finest step of a descent, as a fraction of each range: a descent only has to find a value
# below the best, and once it has, the polish resolves the basin down to one value (on the
# battery's four-basin space 1/16 and 1/64 entered the global basin in fewer seeds).
DESCENT_FINEST_STEP = 1 / 32


def critical_distance(n_points: int, n_dims: int, sigma: float) -> float:
    """MLSL's critical distance r_k in unit coordinates (the unit cube has volume 1):
    r_k = pi^(-1/2) (Gamma(1 + n/2) sigma log(k) / k)^(1/n) (Rinnooy Kan & Timmer, eq. 6).

    Args:
        n_points: k, the evaluated configurations so far (at least 2 for a finite distance).
        n_dims: n, the number of unit coordinates.
        sigma: the factor of the rule (> 0; larger is more cautious: fewer descents).
    """
    if n_points < 2:
        return math.inf
    volume = math.gamma(1 + n_dims / 2) * sigma * math.log(n_points) / n_points
    return float(volume ** (1 / n_dims) / math.sqrt(math.pi))


def lowest_within(X: np.ndarray, values: np.ndarray, i: int, radius: float) -> bool:
    """Whether point `i` has no other point as low or lower within `radius` (rows of unit
    coordinates, absent parameters at -1; a tie counts, so that two equal points beside the
    best, on a grid symmetric about it, start nothing)."""
    return bool(_lowest_within(X, values, [i], radius)[0])


def descent_start(
    X: np.ndarray, values: np.ndarray, eligible: Sequence[bool], radius: float
) -> int | None:
    """Index of the lowest eligible point with no other point as low (eligible or not) within
    `radius`, or None.

    Args:
        X: one row of unit coordinates per point (absent parameters at -1).
        values: the value of each point (lower is better).
        eligible: whether each point may start a descent.
        radius: the critical distance.
    """
    candidates = [int(i) for i in np.argsort(values, kind="stable") if eligible[i]]
    if not candidates:
        return None
    free = np.flatnonzero(_lowest_within(X, values, candidates, radius))
    return candidates[int(free[0])] if free.size else None


def _lowest_within(
    X: np.ndarray, values: np.ndarray, rows: Sequence[int], radius: float
) -> np.ndarray:
    """`lowest_within` for each of `rows` at once (one array operation: the rule runs over
    every evaluation in every generation)."""
    dist = np.linalg.norm(X[rows][:, None, :] - X[None, :, :], axis=2)
    blocked = (dist <= radius) & (values[None, :] <= values[rows][:, None])
    blocked[np.arange(len(rows)), rows] = False  # a point does not block itself
    return ~blocked.any(axis=1)


class LocalDescent:
    """A compass search of its own from one start (see the module docstring).

    Args:
        space: the search space.
        start_id: candidate id of the configuration it starts from.
    """

    def __init__(self, space: SearchSpace, start_id: int) -> None:
        self.compass = CompassSearch(space, DESCENT_FINEST_STEP)
        # The start and every candidate the descent proposed (its best is among them).
        self.ids = [start_id]

    def state(self) -> dict[str, Any]:
        return {"compass": self.compass.state(), "ids": list(self.ids)}

    @classmethod
    def from_state(cls, space: SearchSpace, state: Mapping[str, Any]) -> LocalDescent:
        descent = cls(space, int(state["ids"][0]))
        descent.ids = [int(i) for i in state["ids"]]
        descent.compass.load_state(state["compass"])
        return descent


class Restarts:
    """MLSL's restarts over a search's evaluations: the descent under way and the candidate
    ids of every finished one (each configuration starts at most one descent; see the module
    docstring). `screened` runs them from its exploring share, the GA family from its
    stagnating generations.

    Args:
        space: the search space.
    """

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.descent: LocalDescent | None = None
        self.descended: set[int] = set()

    def state(self) -> dict[str, Any]:
        return {
            "descent": None if self.descent is None else self.descent.state(),
            "descended": sorted(self.descended),
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        descent = state.get("descent")
        self.descent = None if descent is None else LocalDescent.from_state(self.space, descent)
        self.descended = {int(i) for i in state.get("descended", [])}

    def propose(
        self,
        samples: Samples,
        eligible: Sequence[bool],
        n: int,
        is_new: Callable[[list[Genes]], list[Genes]],
        make: Callable[[Genes], Candidate | None],
        rng: np.random.Generator,
    ) -> list[Candidate]:
        """Up to `n` poll points of the descent under way, or of a new one from the lowest
        eligible sample that MLSL's rule lets start one (none when no sample does).

        Args:
            samples: the evaluated configurations, their coordinates, values and r_k.
            eligible: whether each sample may start a descent (those of finished descents
                may not, whatever this says).
            n: how many points to propose.
            is_new: the feasible, never-proposed genes among its argument, in order.
            make: the candidate of new genes, or None if they were already proposed.
            rng: the engine's generator (the order of the poll).
        """
        if n <= 0 or not samples.ids:
            return []
        ids, X, values, radius = samples.ids, samples.X, samples.values, samples.radius
        while True:
            descent = self.descent
            if descent is None:
                free = [e and i not in self.descended for e, i in zip(eligible, ids, strict=True)]
                start = descent_start(X, values, free, radius)
                if start is None:
                    return []
                descent = self.descent = LocalDescent(self.space, ids[start])
            mine = set(descent.ids)
            centre = min((i for i, c in enumerate(ids) if c in mine), key=values.item)
            out: list[Candidate] = []
            # A descent that runs within the critical distance of a lower point has reached a
            # basin already known: it stops there.
            if lowest_within(X, values, centre, radius):
                genes = descent.compass.poll(samples.genes[centre], n, is_new, rng)
                out = [c for g in genes if (c := make(g)) is not None]
                descent.ids += [c.id for c in out]
            if out:
                return out
            # Used up or merged: the next start (or none).
            self.descended |= mine
            self.descent = None


@dataclass(frozen=True)
class Samples:
    """The evaluated configurations MLSL's rule runs over.

    Args:
        ids: candidate id of each.
        genes: genes of each.
        X: one row of unit coordinates each (absent parameters at -1).
        values: the value of each (lower is better).
        radius: the critical distance for them.
    """

    ids: list[int]
    genes: list[Genes]
    X: np.ndarray
    values: np.ndarray
    radius: float
