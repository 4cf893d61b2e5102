"""Parzen estimators over a search space's configurations, with geometry-aware kernels.

The density model of the `screened` strategy: a mixture of one kernel per observation plus a
uniform prior (Bergstra et al., NeurIPS 2011, "Algorithms for hyper-parameter optimization",
sec. 4; multivariate as in Falkner et al., ICML 2018, BOHB, and Optuna's `multivariate=True`).
Per parameter:

- ordered values (ranges, ordinals, log sampling, continuous): a Gaussian in the parameter's
  [0, 1] unit coordinate whose width scales with the range, `bandwidth * n**(-1/(d+4))`
  (Scott's rule), and never narrower than one step between neighbouring values, so that a
  kernel on a 400-value range covers its neighbourhood instead of one point;
- categories: the observed value with probability 1 - `CATEGORY_SMOOTHING` (+ its share of the
  rest), every other value equally (Aitchison & Aitken, Biometrika 1976);
- a parameter that is absent (knocked out or inactive) is its own state: matching absence with
  presence costs `ABSENT_MISMATCH`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from ciq_tune.space import SearchSpace

# Probability mass a categorical kernel spreads over the values it was not observed at.
CATEGORY_SMOOTHING = 0.2
# Probability a kernel gives to presence when its observation is absent (and vice versa).
ABSENT_MISMATCH = 0.1
# Narrowest kernel of a continuous parameter, as a fraction of its (log-)range.
MIN_CONTINUOUS_WIDTH = 1e-3
# Weight of the uniform prior, in observations (Optuna's `prior_weight`).
PRIOR_WEIGHT = 1.0


class ParzenEstimator:
    """Log densities of configurations (rows of `UnitFeatures`) under a Parzen mixture of
    observed configurations.

    Args:
        space: the search space.
        bandwidth: kernel width of ordered parameters at one observation, as a fraction of
            the range (shrinks as observations accumulate, Scott's rule).
        multivariate: one product kernel per observation (captures interactions between
            parameters) instead of a product of per-parameter mixtures.
    """

    def __init__(self, space: SearchSpace, *, bandwidth: float, multivariate: bool) -> None:
        self.space = space
        self.bandwidth = bandwidth
        self.multivariate = multivariate
        self._params = [leaf.param for leaf in space.leaves]
        self._active = [j for j, p in enumerate(self._params) if p.cardinality() > 1]

    def log_density(self, X: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """log p(x) of each row of `X` under the mixture of the rows of `observed`."""
        m, n = len(X), len(observed)
        if n == 0:
            return np.zeros(m)
        d = max(len(self._active), 1)
        shrink = n ** (-1.0 / (d + 4))
        joint = np.zeros((m, n))
        univariate = np.zeros(m)
        prior = np.zeros(m)
        for j in self._active:
            log_k, log_prior = self._log_kernel(j, X[:, j], observed[:, j], shrink)
            prior += log_prior
            if self.multivariate:
                joint += log_k
            else:
                both = np.concatenate([log_k, (math.log(PRIOR_WEIGHT) + log_prior)[:, None]], 1)
                univariate += logsumexp(both, axis=1) - math.log(n + PRIOR_WEIGHT)
        if not self.multivariate:
            return univariate
        both = np.concatenate([joint, (math.log(PRIOR_WEIGHT) + prior)[:, None]], axis=1)
        return logsumexp(both, axis=1) - math.log(n + PRIOR_WEIGHT)

    def _log_kernel(
        self, j: int, x: np.ndarray, o: np.ndarray, shrink: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """log k(x, o) for every pair (m × n) and the uniform prior's log density (m)."""
        param = self._params[j]
        card = param.cardinality()
        can_be_absent = param.knockout_prob is not None or bool(self.space.leaves[j].conditions)
        x_absent, o_absent = np.isnan(x), np.isnan(o)
        xs, os = np.nan_to_num(x), np.nan_to_num(o)
        if param.is_ordered:
            n_values = card - (1 if param.knockout_prob is not None else 0)
            step = 1.0 / (n_values - 1) if math.isfinite(n_values) and n_values > 1 else 0.0
            floor = step if step else MIN_CONTINUOUS_WIDTH
            sigma = max(self.bandwidth * shrink, floor)
            diff = (xs[:, None] - os[None, :]) / sigma
            present = (
                -0.5 * diff**2
                - math.log(sigma * math.sqrt(2 * math.pi))
                + math.log(max(step, 1e-12) if step else 1.0)
            )
            prior_present = np.full(len(x), math.log(step) if step else 0.0)
        else:
            n_values = card - (1 if param.knockout_prob is not None else 0)
            same = np.abs(xs[:, None] - os[None, :]) < 1e-9
            present = np.where(
                same,
                math.log(1 - CATEGORY_SMOOTHING + CATEGORY_SMOOTHING / n_values),
                math.log(CATEGORY_SMOOTHING / n_values),
            )
            prior_present = np.full(len(x), -math.log(n_values))
        if not can_be_absent:
            return present, prior_present
        keep = math.log(1 - ABSENT_MISMATCH)
        log_k = np.where(
            x_absent[:, None] & o_absent[None, :],
            keep,
            np.where(
                x_absent[:, None] | o_absent[None, :], math.log(ABSENT_MISMATCH), keep + present
            ),
        )
        log_prior = np.where(x_absent, math.log(0.5), math.log(0.5) + prior_present)
        return log_k, log_prior
