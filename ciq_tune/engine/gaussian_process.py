"""Gaussian-process regression over unit coordinates, and expected improvement.

The ranking model of the `screened` strategy in spaces of short lists whose feasible
configurations can be listed (`engine/screened.py`, `ranking`). A Matérn 5/2 covariance
(Rasmussen & Williams, "Gaussian processes for machine learning", 2006, eq. 4.17) with one
length scale for every coordinate, chosen from `LENGTH_SCALES` by the marginal likelihood, and a
fixed noise variance; the values (log times, failures at the worst value) are standardised.
Kernel Tuner's Bayesian optimisation ranks the whole listed space the same way (Willemsen et
al., "Bayesian optimization for auto-tuning GPU kernels", PMBS 2021). One length scale, not one
per parameter: fitted to 10-50 evaluations of a 10-15-parameter kernel space, per-parameter
scales chase noise (session 7's scikit-learn GP with them ranked worse than the Parzen ratio).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_solve
from scipy.linalg import cholesky
from scipy.linalg import solve_triangular
from scipy.special import ndtr

# Length scales tried, in unit coordinates (a parameter's whole range is 1), and the noise
# variance of the standardised values (kernel timings are noisy; a failure's stand-in value is
# no measurement). Chosen together on the replay choosing set, seeds 0-4 (docs/benchmarks.md,
# session 12): mean ln of evaluations to 95 % 4.177 with 0.1-0.8 and noise 0.001, 4.008 with
# 0.3-2, 3.897 with 0.3-2 and noise 0.05.
LENGTH_SCALES = (0.3, 0.5, 0.8, 1.2, 2.0)
NOISE = 0.05
# Covariance of a configuration with itself, for the Cholesky factor's stability.
_JITTER = 1e-9


def matern52(distance: np.ndarray) -> np.ndarray:
    """Matérn 5/2 covariance at scaled distances."""
    s = math.sqrt(5.0) * distance
    return (1.0 + s + s * s / 3.0) * np.exp(-s)


def pairwise_distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of `A` and of `B`."""
    squared = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.sqrt(np.maximum(squared, 0.0))


class GaussianProcess:
    """A Gaussian process fitted to rows of unit coordinates and their values.

    Args:
        X: one row per evaluated configuration.
        y: its value (lower is better).
        length_scale: a fixed length scale; None chooses one of `LENGTH_SCALES` by the
            marginal likelihood.
    """

    def __init__(self, X: np.ndarray, y: np.ndarray, length_scale: float | None = None) -> None:
        self.X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        self._mean, self._scale = float(y.mean()), float(y.std()) or 1.0
        self.y = (y - self._mean) / self._scale
        distances = pairwise_distances(self.X, self.X)
        scales = LENGTH_SCALES if length_scale is None else (length_scale,)
        best = -math.inf
        for scale in scales:
            factor = self._factor(distances, scale)
            alpha = cho_solve((factor, True), self.y)
            # log marginal likelihood up to a constant (R&W eq. 2.30)
            fit = -0.5 * float(self.y @ alpha) - float(np.log(np.diag(factor)).sum())
            if fit > best:
                best, self.length_scale, self._factor_l, self._alpha = fit, scale, factor, alpha

    @staticmethod
    def _factor(distances: np.ndarray, scale: float) -> np.ndarray:
        K = matern52(distances / scale)
        K[np.diag_indices_from(K)] += NOISE + _JITTER
        return cholesky(K, lower=True)

    @property
    def best(self) -> float:
        """The lowest standardised value fitted."""
        return float(self.y.min())

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the standardised value at rows `X`."""
        K = matern52(pairwise_distances(np.asarray(X, dtype=float), self.X) / self.length_scale)
        mean = K @ self._alpha
        v = solve_triangular(self._factor_l, K.T, lower=True)
        variance = np.maximum(1.0 - (v * v).sum(0), 1e-12)
        return mean, np.sqrt(variance)

    def to_value(self, standardised: np.ndarray) -> np.ndarray:
        """Standardised values back in the fitted values' units."""
        return standardised * self._scale + self._mean


def expected_improvement(
    mean: np.ndarray, sd: np.ndarray, best: float, margin: float = 0.01
) -> np.ndarray:
    """Expected improvement below `best - margin` (Jones et al., J. Global Optim. 1998)."""
    gain = best - mean - margin
    z = gain / sd
    return gain * ndtr(z) + sd * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
