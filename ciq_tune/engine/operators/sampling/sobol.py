"""Space-filling feasible genes for a first generation: a scrambled Sobol' sequence."""

from __future__ import annotations

import math

import numpy as np

from ciq_tune.engine.operators.sampling.latin_hypercube import LatinHypercubeSampling


class SobolSampling(LatinHypercubeSampling):
    """The first `n_samples` points of a scrambled Sobol' sequence (`scipy.stats.qmc.Sobol`;
    Sobol' 1967, Owen scrambling 1998) mapped through each parameter's `quantile`, like
    `LatinHypercubeSampling`: the first 2^m points are a (t, m, d)-net, evenly spread over
    every pair of parameters, not only over each one."""

    def unit_points(self, d: int, n: int, rng: np.random.Generator) -> np.ndarray:
        from scipy.stats import qmc  # scipy.stats takes ~1 s to import: only when drawn

        # Drawn as the next power of two and cut, which scipy's balance warning is about.
        m = max(math.ceil(math.log2(max(n, 1))), 0)
        return qmc.Sobol(d=d, scramble=True, rng=rng).random_base2(m)[:n]
