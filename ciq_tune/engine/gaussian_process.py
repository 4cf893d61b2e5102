"""Gaussian-process regression over unit coordinates, and expected improvement.

The ranking model of the `screened` strategy in spaces of short lists whose feasible
configurations can be listed (`engine/screened.py`, `ranking`). A Matérn 5/2 covariance
(Rasmussen & Williams, "Gaussian processes for machine learning", 2006, eq. 4.17) and a fixed
noise variance; the values (log times, failures at the worst value) are standardised. Kernel
Tuner's Bayesian optimisation ranks the whole listed space the same way (Willemsen et al.,
"Bayesian optimization for auto-tuning GPU kernels", PMBS 2021).

Length scales: one for every coordinate, chosen from `LENGTH_SCALES` by the marginal
likelihood with the fixed noise `NOISE`, or one per coordinate (`per_coordinate`), fitted by
L-BFGS to the marginal likelihood together with the noise variance, under a log-normal prior
that keeps the scales near a parameter's whole range unless the evaluations say otherwise:
fitted freely to 10-50 evaluations, per-coordinate scales chase noise (session 7); under the
prior they rank the replay choosing set better than one scale (docs/benchmarks.md, session 17).
The fitted noise is as small as the values allow: replayed timings repeat exactly, and a fixed
0.05 (standard deviation 0.22 of the values' spread) blurred the few per cent that separate the
configurations near the optimum (kt_rtx GEMM, session 18).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_solve
from scipy.linalg import cholesky
from scipy.linalg import solve_triangular
from scipy.optimize import minimize
from scipy.special import ndtr

# Length scales tried, in unit coordinates (a parameter's whole range is 1), and the noise
# variance of the standardised values (kernel timings are noisy; a failure's stand-in value is
# no measurement). Chosen together on the replay choosing set, seeds 0-4 (docs/benchmarks.md,
# session 12): mean ln of evaluations to 95 % 4.177 with 0.1-0.8 and noise 0.001, 4.008 with
# 0.3-2, 3.897 with 0.3-2 and noise 0.05.
LENGTH_SCALES = (0.3, 0.5, 0.8, 1.2, 2.0)
NOISE = 0.05
# Per-coordinate scales: the prior's weight on (ln scale)^2 around 1, their bounds, and the
# L-BFGS steps of a fit (session 12's scratch values, kept in session 17); the bounds of the
# noise variance fitted with them, and its starting value, `NOISE`.
SCALE_PRIOR_WEIGHT = 0.5
SCALE_BOUNDS = (0.05, 10.0)
NOISE_BOUNDS = (1e-4, 0.5)
FIT_STEPS = 30
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


def _factor(K: np.ndarray, noise: float) -> np.ndarray:
    K[np.diag_indices_from(K)] += noise + _JITTER
    return cholesky(K, lower=True)


def _neg_log_likelihood(factor: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood up to a constant (R&W eq. 2.30), and alpha = K^-1 y."""
    alpha = cho_solve((factor, True), y)
    return 0.5 * float(y @ alpha) + float(np.log(np.diag(factor)).sum()), alpha


def hyperparameter_objective(
    theta: np.ndarray, squared_differences: np.ndarray, y: np.ndarray
) -> tuple[float, np.ndarray]:
    """The negative log posterior of per-column length scales and the noise variance, `theta`
    = their logs (the scales, then the noise), and its gradient (R&W eq. 5.9), from the rows'
    squared differences per column (n x n x columns)."""
    log_scales, noise = theta[:-1], math.exp(theta[-1])
    scaled2 = squared_differences / np.exp(2.0 * log_scales)
    s = math.sqrt(5.0) * np.sqrt(scaled2.sum(-1))
    decay = np.exp(-s)
    try:
        factor = _factor((1.0 + s + s * s / 3.0) * decay, noise)
    except np.linalg.LinAlgError:
        return math.inf, np.zeros_like(theta)
    value, alpha = _neg_log_likelihood(factor, y)
    inverse = cho_solve((factor, True), np.eye(len(y)))
    outer = inverse - np.outer(alpha, alpha)
    # dK/d(ln scale_j) = 5/3 (1 + s) e^-s x (scaled squared difference in column j);
    # dK/d(ln noise) = noise x I.
    slope = (5.0 / 3.0) * (1.0 + s) * decay
    scales_gradient = 0.5 * np.einsum("ab,abj->j", outer * slope, scaled2)
    noise_gradient = 0.5 * noise * float(np.trace(outer))
    prior = SCALE_PRIOR_WEIGHT * float(log_scales @ log_scales)
    return value + prior, np.append(
        scales_gradient + 2.0 * SCALE_PRIOR_WEIGHT * log_scales, noise_gradient
    )


def fit_hyperparameters(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """One length scale per column of `X` and the noise variance: the maximum a posteriori
    (`hyperparameter_objective`), by L-BFGS from a parameter's whole range and `NOISE`."""
    squared_differences = (X[:, None, :] - X[None, :, :]) ** 2
    bounds = [(math.log(SCALE_BOUNDS[0]), math.log(SCALE_BOUNDS[1]))] * X.shape[1]
    fitted = minimize(
        hyperparameter_objective,
        np.append(np.zeros(X.shape[1]), math.log(NOISE)),
        args=(squared_differences, y),
        jac=True,
        method="L-BFGS-B",
        bounds=[*bounds, (math.log(NOISE_BOUNDS[0]), math.log(NOISE_BOUNDS[1]))],
        options={"maxiter": FIT_STEPS},
    )
    return np.exp(fitted.x[:-1]), math.exp(fitted.x[-1])


class GaussianProcess:
    """A Gaussian process fitted to rows of unit coordinates and their values.

    Args:
        X: one row per evaluated configuration.
        y: its value (lower is better).
        length_scale: fixed length scale(s), one or one per column; None fits them.
        noise: the noise variance of the standardised values, where not fitted.
        per_coordinate: fit one length scale per column and the noise (`fit_hyperparameters`)
            instead of one of `LENGTH_SCALES` for all.
    """

    def __init__(
        self,
        X: np.ndarray,
        y: np.ndarray,
        length_scale: float | np.ndarray | None = None,
        *,
        noise: float = NOISE,
        per_coordinate: bool = False,
    ) -> None:
        self.X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        self._values = y
        self._mean, self._scale = float(y.mean()), float(y.std()) or 1.0
        self.y = (y - self._mean) / self._scale
        if length_scale is None and per_coordinate:
            length_scale, noise = fit_hyperparameters(self.X, self.y)
        self.noise = noise
        scales = LENGTH_SCALES if length_scale is None else (length_scale,)
        best = math.inf
        for scale in scales:
            scaled = self.X / scale
            factor = _factor(matern52(pairwise_distances(scaled, scaled)), noise)
            fit, alpha = _neg_log_likelihood(factor, self.y)
            if fit < best:
                best, self._factor_l, self._alpha = fit, factor, alpha
                self.length_scale: float | np.ndarray = scale

    @property
    def best(self) -> float:
        """The lowest standardised value fitted."""
        return float(self.y.min())

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the standardised value at rows `X`."""
        scale = self.length_scale
        K = matern52(pairwise_distances(np.asarray(X, dtype=float) / scale, self.X / scale))
        mean = K @ self._alpha
        v = solve_triangular(self._factor_l, K.T, lower=True)
        variance = np.maximum(1.0 - (v * v).sum(0), 1e-12)
        return mean, np.sqrt(variance)

    def believing(self, X: np.ndarray, mean: np.ndarray) -> GaussianProcess:
        """This process with rows `X` added at `mean`, their predicted standardised values (the
        kriging believer, Ginsbourger et al., "Kriging is well-suited to parallelize
        optimization", 2010), its length scales and noise kept: the next pick of a batch
        sees the earlier ones as evaluated, so a batch spreads."""
        values = np.concatenate([self._values, self.to_value(mean)])
        return GaussianProcess(np.vstack([self.X, X]), values, self.length_scale, noise=self.noise)

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
