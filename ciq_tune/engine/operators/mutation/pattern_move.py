"""Pattern-search moves around a point at a random scale (local search around the elite)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import numpy as np
from pymoo.core.mutation import Mutation

if TYPE_CHECKING:
    from ciq_tune.engine.operators.problem import SpaceProblem

# Probability of moving one more parameter after each moved one: most moves change one or two
# parameters (a coordinate pattern), a few change several at once (diagonal moves).
EXTRA_PARAMETER_PROB = 0.35


class PatternMove(Mutation):
    """Moves one parameter, and with probability `EXTRA_PARAMETER_PROB` each one more, by its
    primitive's `local_move` (log-uniform step lengths for ordered values, so coarse and fine
    moves are both proposed every generation). Coordinate moves of pattern search (Hooke &
    Jeeves, J. ACM 1961) around the elite, as Helion's `PatternSearch` and `LFBOTreeSearch`
    propose them; the screening model decides which ones are evaluated.

    Args:
        reach: the longest step, as a fraction of each parameter's range (`local_move`).
    """

    def __init__(self, reach: float = 0.5) -> None:
        super().__init__(prob=1.0)
        self.reach = reach

    def _do(self, problem: SpaceProblem, X: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        params = problem.space.params
        movable = [j for j, p in enumerate(params) if p.cardinality() > 1]
        Y = X.copy()
        if not movable:
            return Y
        for row in Y:
            order = rng.permutation(movable)
            count = 1
            while count < len(order) and rng.random() < EXTRA_PARAMETER_PROB:
                count += 1
            for j in order[:count]:
                row[j] = params[j].local_move(row[j], rng, self.reach)
        return Y
