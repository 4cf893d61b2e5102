"""Random feasible genes for a first generation."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import numpy as np
from pymoo.core.sampling import Sampling

if TYPE_CHECKING:
    from ciq_tune.engine.operators.problem import SpaceProblem


class SpaceSampling(Sampling):
    """Uniform feasible genes, each parameter drawn within its seed range when it has one
    (rejection sampling against the space's constraints, `SearchSpace.sample_genes`)."""

    def _do(self, problem: SpaceProblem, n_samples: int, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        X = np.empty((n_samples, problem.n_var), dtype=object)
        for i in range(n_samples):
            X[i] = problem.space.sample_genes(rng, seeded=True)
        return X
