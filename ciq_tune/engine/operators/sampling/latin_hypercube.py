"""Space-filling feasible genes for a first generation: a Latin hypercube."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

import numpy as np
from pymoo.core.sampling import Sampling
from scipy.stats import qmc

if TYPE_CHECKING:
    from ciq_tune.engine.operators.problem import SpaceProblem


class LatinHypercubeSampling(Sampling):
    """Rows of a Latin hypercube (`scipy.stats.qmc.LatinHypercube`, McKay et al. 1979) mapped
    through each parameter's `quantile`: every parameter's range, knocked-out state included,
    is cut into `n_samples` equal strata and each stratum is drawn once, so a small first
    generation covers every range evenly where uniform draws leave gaps and clumps. A row
    that breaks the space's constraints is replaced by a uniform feasible draw.

    Args:
        optimization: scipy's post-processing of the hypercube ("random-cd": coordinate
            swaps lowering the centred discrepancy, Fang et al. 2002, so that pairs of
            parameters are covered evenly too); None for a plain hypercube.
    """

    def __init__(self, optimization: Literal["random-cd"] | None = None) -> None:
        super().__init__()
        self.optimization = optimization

    def unit_points(self, d: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` points of the unit hypercube in `d` dimensions."""
        return qmc.LatinHypercube(d=d, optimization=self.optimization, rng=rng).random(n)

    def _do(self, problem: SpaceProblem, n_samples: int, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        space = problem.space
        U = self.unit_points(problem.n_var, n_samples, rng)
        X = np.empty((n_samples, problem.n_var), dtype=object)
        for i, row in enumerate(U):
            genes = tuple(
                p.quantile(u, seeded=True) for p, u in zip(space.params, row, strict=True)
            )
            X[i] = genes if space.is_feasible(genes) else space.sample_genes(rng, seeded=True)
        return X
