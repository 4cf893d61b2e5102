"""Per-parameter mutation through each primitive's own `mutate`."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import numpy as np
from pymoo.core.mutation import Mutation

if TYPE_CHECKING:
    from ciq_tune.engine.operators.problem import SpaceProblem


class ParameterMutation(Mutation):
    """Each gene mutates with probability `gene_prob` through its primitive's `mutate`
    (neighbour steps and geometric jumps for ordered values, another category, a knockout
    toggle, a Gaussian step for continuous values): the mixed-variable mutation of pymoo's
    `core/mixed.py`, with the type-specific part in the primitives. At least one gene always
    mutates, so a child never equals the parent it was copied from.

    Args:
        gene_prob: probability that a gene mutates (1/n_var is the textbook choice).
    """

    def __init__(self, gene_prob: float) -> None:
        super().__init__(prob=1.0)
        self.gene_prob = gene_prob

    def _do(self, problem: SpaceProblem, X: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        params = problem.space.params
        Y = X.copy()
        for row in Y:
            mask = rng.random(len(params)) < self.gene_prob
            if not mask.any():
                mask[int(rng.integers(len(params)))] = True
            for j in np.flatnonzero(mask):
                row[j] = params[j].mutate(row[j], rng)
        return Y
