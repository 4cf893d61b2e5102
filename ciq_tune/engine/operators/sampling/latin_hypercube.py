"""Space-filling feasible genes for a first generation: a Latin hypercube."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import Literal

import numpy as np
from pymoo.core.sampling import Sampling

if TYPE_CHECKING:
    from ciq_tune.engine.operators.problem import SpaceProblem


class LatinHypercubeSampling(Sampling):
    """Rows of a Latin hypercube (`scipy.stats.qmc.LatinHypercube`, McKay et al. 1979) mapped
    through each parameter's `quantile`: every parameter's range, knocked-out state included,
    is cut into `n_samples` equal strata and each stratum is drawn once, so a small first
    generation covers every range evenly where uniform draws leave gaps and clumps. A row
    that breaks the space's constraints is replaced by a uniform feasible draw, or dropped.

    Args:
        optimization: scipy's post-processing of the hypercube ("random-cd": coordinate
            swaps lowering the centred discrepancy, Fang et al. 2002, so that pairs of
            parameters are covered evenly too); None for a plain hypercube.
        drop_infeasible: drop the rows that break the constraints instead of replacing them
            (fewer than `n_samples` rows come back; the caller fills the design).
    """

    def __init__(
        self, optimization: Literal["random-cd"] | None = None, drop_infeasible: bool = False
    ) -> None:
        super().__init__()
        self.optimization = optimization
        self.drop_infeasible = drop_infeasible

    def unit_points(self, d: int, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` points of the unit hypercube in `d` dimensions."""
        from scipy.stats import qmc  # scipy.stats takes ~1 s to import: only when drawn

        return qmc.LatinHypercube(d=d, optimization=self.optimization, rng=rng).random(n)

    def _do(self, problem: SpaceProblem, n_samples: int, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        space = problem.space
        U = self.unit_points(problem.n_var, n_samples, rng)
        rows: list[Any] = []
        for row in U:
            genes = tuple(
                p.quantile(u, seeded=True) for p, u in zip(space.params, row, strict=True)
            )
            if space.is_feasible(genes):
                rows.append(genes)
            elif not self.drop_infeasible:
                rows.append(space.sample_genes(rng, seeded=True))
        X = np.empty((len(rows), problem.n_var), dtype=object)
        for i, genes in enumerate(rows):
            X[i] = genes
        return X
