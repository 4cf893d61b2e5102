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
fitted freely to 10-50 evaluations, per-coordinate scales chase noise; under the prior they
rank the replay choosing set better than one scale. The fitted noise is as small as the values
allow: replayed timings repeat exactly, and a fixed 0.05 (standard deviation 0.22 of the
values' spread) blurs the few per cent that separate the configurations near the optimum
(kt_rtx GEMM; docs/benchmarks.md, "Replays of recorded spaces").

`ListedProcess` is the same process over every row of a listed space, kept from one generation
to the next (its factor and its covariances with the rows grown by a row per evaluation): the
ranking `screened` uses, O(n N) per pick where `GaussianProcess` rebuilt for each pick costs
O(n^2 N) (N listed rows, n evaluations).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.linalg import cho_solve
from scipy.linalg import cholesky
from scipy.linalg import lapack
from scipy.linalg import solve_triangular
from scipy.optimize import minimize
from scipy.special import ndtr

# Length scales tried, in unit coordinates (a parameter's whole range is 1), and the noise
# variance of the standardised values (kernel timings are noisy; a failure's stand-in value is
# no measurement). Chosen together on the replay choosing set, seeds 0-4: mean ln of
# evaluations to 95 % 4.177 with 0.1-0.8 and noise 0.001, 4.008 with 0.3-2, 3.897 with 0.3-2
# and noise 0.05 (docs/benchmarks.md, "Synthetic battery").
LENGTH_SCALES = (0.3, 0.5, 0.8, 1.2, 2.0)
NOISE = 0.05
# Per-coordinate scales: the prior's weight on (ln scale)^2 around 1, their bounds, and the
# L-BFGS steps of a fit (set by hand, not tuned); the bounds of the noise variance fitted with
# them, and its starting value, `NOISE`.
SCALE_PRIOR_WEIGHT = 0.5
SCALE_BOUNDS = (0.05, 10.0)
NOISE_BOUNDS = (1e-4, 0.5)
FIT_STEPS = 30
# Covariance of a configuration with itself, for the Cholesky factor's stability.
_JITTER = 1e-9
# Listed configurations per block of a factorisation's solve (bounds its temporaries).
_COLUMNS = 2048


def matern52(distance: np.ndarray) -> np.ndarray:
    """Matérn 5/2 covariance at scaled distances."""
    s = math.sqrt(5.0) * distance
    return (1.0 + s + s * s / 3.0) * np.exp(-s)


def pairwise_distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Euclidean distances between the rows of `A` and of `B`."""
    squared = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.sqrt(np.maximum(squared, 0.0))


def standardise(values: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The values less their mean over their standard deviation (1 if they are all equal),
    the mean and that scale: what a process is fitted to."""
    mean, scale = float(values.mean()), float(values.std()) or 1.0
    return (values - mean) / scale, mean, scale


def fitted_hyperparameters(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """The length scales and noise of `GaussianProcess(X, y, per_coordinate=True)`, without
    its factorisation."""
    return fit_hyperparameters(np.asarray(X, dtype=float), standardise(np.asarray(y, float))[0])


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
    squared differences per column (n x n x columns). Every n x n x columns product is one
    matrix-vector product over the differences as given: no scaled copy of them is made."""
    n, columns = len(y), squared_differences.shape[-1]
    log_scales, noise = theta[:-1], math.exp(theta[-1])
    inverse_squares = np.exp(-2.0 * log_scales)
    differences = squared_differences.reshape(n * n, columns)
    s = math.sqrt(5.0) * np.sqrt(differences @ inverse_squares).reshape(n, n)
    decay = np.exp(-s)
    try:
        factor = _factor((1.0 + s + s * s / 3.0) * decay, noise)
    except np.linalg.LinAlgError:
        return math.inf, np.zeros_like(theta)
    value, alpha = _neg_log_likelihood(factor, y)
    outer = _inverse(factor) - np.outer(alpha, alpha)
    # dK/d(ln scale_j) = 5/3 (1 + s) e^-s x (scaled squared difference in column j);
    # dK/d(ln noise) = noise x I.
    slope = (5.0 / 3.0) * (1.0 + s) * decay
    scales_gradient = 0.5 * ((outer * slope).reshape(-1) @ differences) * inverse_squares
    noise_gradient = 0.5 * noise * float(np.trace(outer))
    prior = SCALE_PRIOR_WEIGHT * float(log_scales @ log_scales)
    return value + prior, np.append(
        scales_gradient + 2.0 * SCALE_PRIOR_WEIGHT * log_scales, noise_gradient
    )


def _inverse(factor: np.ndarray) -> np.ndarray:
    """K^-1 from K's lower Cholesky factor (LAPACK potri: a third of the work of solving for
    the identity)."""
    lower, info = lapack.dpotri(factor, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"potri failed: info {info}")
    lower = np.tril(lower)
    return lower + np.tril(lower, -1).T


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
        self.y, self._mean, self._scale = standardise(y)
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


class ListedProcess:
    """The `GaussianProcess` of evaluations in a listed space (fixed length scales and noise),
    for ranking every listed configuration again and again (`screened`'s `ranking`).

    Its mean and standard deviation at the N listed configurations come from V = L^-1 K(T, Z)
    (L the Cholesky factor of the n training points' covariance, Z the listed rows) and sums of
    V's rows weighted by the values: ranking all N costs O(N) once they are there, and a point
    believed at its predicted value (the kriging believer) O(n N) for its row, where a new
    `GaussianProcess` costs O(n^3) and each of its predictions O(n^2 N). Equal to
    `GaussianProcess` up to floating-point rounding: the same covariance, noise, standardised
    values, best value and predictions.

    The rows of the evaluations are kept from one `update` to the next. Each is the same
    number however and whenever it was computed: the first `batch` rows (the evaluations when
    the length scales were fitted) come from one factorisation, each later row from the rows
    before it only, by the same update as a believed point's (whose row is taken over when
    that point is evaluated next), and the weighted sums are added up row by row in the
    evaluations' order. So a search restored from its state ranks exactly as the search it
    was saved from.

    Args:
        Z: the listed rows (process coordinates).
        length_scale: the length scale(s), one or one per column.
        noise: the noise variance of the standardised values.
    """

    def __init__(self, Z: np.ndarray, length_scale: float | np.ndarray, noise: float) -> None:
        self.length_scale = length_scale
        self.noise = float(noise)
        self._Z = np.asarray(Z, dtype=float) / length_scale
        self._clear()

    def fits(self, length_scale: float | np.ndarray, noise: float) -> bool:
        """Whether this process has these length scales and noise."""
        return bool(np.array_equal(self.length_scale, length_scale)) and self.noise == noise

    def _clear(self) -> None:
        N = len(self._Z)
        self._keys: list[str] = []  # the evaluations whose rows are kept, in order
        self._batch = 0
        self._cap = 0
        self._reserve(64)
        # Sums over the evaluations' rows: of V_j^2, of e_j V_j (e = L^-1 1), of a_j V_j (a =
        # L^-1 of the successes' values less `_ref`, 0 for failures) and of f_j V_j (f = L^-1
        # of the failures' indicator: their stand-in value, the worst success's, changes).
        self._Q, self._R, self._A, self._F = (np.zeros(N) for _ in range(4))
        self._ref = 0.0
        self._same_values: tuple[float, np.ndarray, np.ndarray] | None = None
        self._believed: list[tuple[str, bool]] = []  # rows after the evaluations': key, full
        self._n = 0
        self._cols: np.ndarray | None = None  # where predictions are kept up to date, if not all
        self._restricted: tuple[Any, ...] | None = None

    # -- the evaluations -------------------------------------------------------------------
    def update(
        self,
        keys: list[str],
        points: Callable[[int, int], tuple[np.ndarray, list[int]]],
        values: np.ndarray,
        failed: np.ndarray,
        fit_values: np.ndarray,
        batch: int,
    ) -> None:
        """Condition on the evaluations (only), dropping the points believed since the last
        update.

        Args:
            keys: every evaluation's key, in the order told (only ever appended to).
            points: `points(i, j)`: the process coordinates of evaluations i to j - 1 and
                their listed rows (-1 for a configuration that is not listed).
            values: each evaluation's value (log where all successes are positive); failures'
                entries are not read.
            failed: whether each evaluation failed (its value is the worst success's).
            fit_values: the same values in `GaussianProcess`'s order (successes, then
                failures): the process's mean, spread and best value are theirs.
            batch: the first `batch` rows come from one factorisation.
        """
        n = len(keys)
        kept = len(self._keys)
        if kept and (self._batch != min(batch, n) or self._keys != keys[:kept]):
            self._clear()
            kept = 0
        self._reserve(n)
        if kept == 0:
            self._batch = min(batch, n)
            self._T[: self._batch] = points(0, self._batch)[0] / self.length_scale
            self._factorise(self._batch)
        start = max(kept, self._batch)
        # Rows believed since the last update, in the order of the evaluations: taken over.
        taken = 0
        believed = self._believed[: n - start]
        while taken < len(believed) and believed[taken] == (keys[start + taken], True):
            taken += 1
        if start + taken < n:
            X, listed = points(start + taken, n)
            for j, x, r in zip(range(start + taken, n), X, listed, strict=True):
                self._row(j, x / self.length_scale, r)
        for j in range(start, n):
            self._Q += self._V[j] ** 2
            self._R += self._e[j] * self._V[j]
        self._keys = list(keys)
        self._believed = []
        self._values_sums(values, failed, kept)
        # This ranking's state, which believed points add to.
        worst = float(np.max(values[~failed]))
        self._n = n
        self._now[:n] = self._a[:n] + (worst - self._ref) * self._f[:n]
        self._P = self._A + (worst - self._ref) * self._F
        self._Rc, self._Qc = self._R.copy(), self._Q.copy()
        self._set_values(np.asarray(fit_values, dtype=float))
        self._cols = self._restricted = None

    def _values_sums(self, values: np.ndarray, failed: np.ndarray, kept: int) -> None:
        """a, f and their sums over V's rows for the evaluations' values; the first `kept`
        rows' are kept when their values are the same as before."""
        n = len(values)
        ok = np.where(failed, 0.0, values)
        ref = float(ok[int(np.argmin(failed))])  # the first success's value
        fail = failed.astype(float)
        before = self._same_values
        if not (
            before is not None
            and before[0] == ref
            and np.array_equal(before[1], ok[: len(before[1])])
            and np.array_equal(before[2], fail[: len(before[2])])
        ):
            kept = 0
        self._same_values = (ref, ok, fail)
        self._ref = ref
        shifted = np.where(failed, 0.0, values - ref)
        b = self._batch
        if kept == 0:
            self._a[:b] = solve_triangular(self._L[:b, :b], shifted[:b], lower=True)
            self._f[:b] = solve_triangular(self._L[:b, :b], fail[:b], lower=True)
            self._A = self._a[:b] @ self._V[:b]
            self._F = self._f[:b] @ self._V[:b]
        for j in range(max(kept, b), n):
            d, lj = self._L[j, j], self._L[j, :j]
            self._a[j] = (shifted[j] - lj @ self._a[:j]) / d
            self._f[j] = (fail[j] - lj @ self._f[:j]) / d
            self._A += self._a[j] * self._V[j]
            self._F += self._f[j] * self._V[j]

    def _factorise(self, b: int) -> None:
        """Rows 0 to b - 1 from one factorisation (`_factor`, as `GaussianProcess`'s)."""
        if b == 0:
            return
        T = self._T[:b]
        L = _factor(matern52(pairwise_distances(T, T)), self.noise)
        self._L[:b, :b] = L
        for c in range(0, len(self._Z), _COLUMNS):
            Kz = matern52(pairwise_distances(T, self._Z[c : c + _COLUMNS]))
            self._V[:b, c : c + _COLUMNS] = solve_triangular(L, Kz, lower=True)
        self._e[:b] = solve_triangular(L, np.ones(b), lower=True)
        self._Q = (self._V[:b] ** 2).sum(0)
        self._R = self._e[:b] @ self._V[:b]

    def _row(
        self, j: int, x: np.ndarray, listed: int, cols: np.ndarray | None = None
    ) -> np.ndarray:
        """Row j of L, e and V (only at `cols`, if given) for the scaled point `x`, from the
        rows before it; V's row is returned. L's row is L^-1 of the point's covariances with
        the rows before it: V's column of a listed point (`listed` >= 0), found by the same
        forward substitution, else solved for."""
        X = x[None, :]
        if listed >= 0:
            lj = self._V[:j, listed].copy()
        elif j:
            c = matern52(pairwise_distances(X, self._T[:j]))[0]
            lj = solve_triangular(self._L[:j, :j], c, lower=True)
        else:
            lj = np.zeros(0)
        own = float(matern52(pairwise_distances(X, X))[0, 0]) + self.noise + _JITTER
        d2 = own - float(lj @ lj)
        if not d2 > 0:
            raise np.linalg.LinAlgError("the covariance is not positive definite")
        d = math.sqrt(d2)
        self._T[j], self._L[j, :j], self._L[j, j] = x, lj, d
        self._e[j] = (1.0 - lj @ self._e[:j]) / d
        if cols is None:
            row = (matern52(pairwise_distances(X, self._Z))[0] - lj @ self._V[:j]) / d
            self._V[j] = row
        else:
            k = matern52(pairwise_distances(X, self._Z[cols]))[0]
            row = (k - lj @ self._V[:j, cols]) / d
            self._V[j, cols] = row
        return row

    def _reserve(self, n: int) -> None:
        """Room for `n` rows (grown by a quarter: V has a row of N per evaluation)."""
        if n <= self._cap:
            return
        cap = max(n + 32, self._cap + self._cap // 4)
        old = self._cap if self._cap else 0

        def grown(name: str, shape: tuple[int, ...]) -> np.ndarray:
            out = np.zeros(shape)
            if old:
                before = getattr(self, name)
                out[tuple(slice(0, s) for s in before.shape)] = before
            return out

        d, N = self._Z.shape[1], len(self._Z)
        self._T = grown("_T", (cap, d))
        self._L = grown("_L", (cap, cap))
        self._V = grown("_V", (cap, N))
        self._e = grown("_e", (cap,))  # L^-1 1
        self._a = grown("_a", (cap,))  # L^-1 of the successes' values less `_ref`
        self._f = grown("_f", (cap,))  # L^-1 of the failures' indicator
        self._now = grown("_now", (cap,))  # L^-1 of this ranking's values less `_ref`
        self._cap = cap

    # -- this ranking ----------------------------------------------------------------------
    def _set_values(self, values: np.ndarray) -> None:
        self._values = values
        y, self._mean, self._scale = standardise(values)
        self.best = float(y.min())

    def to_value(self, standardised: np.ndarray) -> np.ndarray:
        """Standardised values back in the fitted values' units."""
        return standardised * self._scale + self._mean

    def predict(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the standardised value at listed `rows`."""
        if self._cols is not None and not self._cols[rows].all():
            self._widen()
        shift = self._mean - self._ref
        mean = (self._P[rows] - shift * self._Rc[rows]) / self._scale
        variance = np.maximum(1.0 - self._Qc[rows], 1e-12)
        return mean, np.sqrt(variance)

    def predict_points(self, X: np.ndarray) -> np.ndarray:
        """Posterior mean of the standardised value at rows `X` (any configurations)."""
        n = self._n
        scaled = np.asarray(X, dtype=float) / self.length_scale
        W = solve_triangular(
            self._L[:n, :n], matern52(pairwise_distances(scaled, self._T[:n])).T, lower=True
        )
        shift = self._mean - self._ref
        return (self._now[:n] @ W - shift * (self._e[:n] @ W)) / self._scale

    def believe(
        self,
        key: str,
        X: np.ndarray,
        mean: np.ndarray,
        listed: int = -1,
        cols: np.ndarray | None = None,
    ) -> None:
        """Add the configuration of row `X` (its key, its listed row or -1) at `mean`, its
        predicted standardised value, in place (`GaussianProcess.believing` of one row). With
        `cols` (listed rows, `listed` among them), predictions are kept up to date there only,
        until one elsewhere is asked for."""
        if cols is None and self._restricted is not None:
            self._widen()
        if cols is not None and self._restricted is None:
            self._restricted = (self._n, self._P.copy(), self._Rc.copy(), self._Qc.copy(), [])
            self._restricted_values = self._values
            self._cols = np.zeros(len(self._Z), dtype=bool)
            self._cols[cols] = True
        if self._restricted is not None:
            self._restricted[-1].append((key, X, mean, listed))
        value = self.to_value(np.asarray(mean, dtype=float))
        self._append(key, np.asarray(X, dtype=float)[0], float(value[0]), listed)
        self._set_values(np.concatenate([self._values, value]))

    def believe_all(
        self, keys: list[str], X: np.ndarray, mean: np.ndarray, listed: list[int]
    ) -> None:
        """Add the configurations of rows `X` (their keys and listed rows, -1 where not
        listed) at `mean`, their predicted standardised values, all at once
        (`GaussianProcess.believing`)."""
        if self._restricted is not None:
            self._widen()
        values = self.to_value(np.asarray(mean, dtype=float))
        for key, x, value, r in zip(keys, np.asarray(X, dtype=float), values, listed, strict=True):
            self._append(key, x, float(value), r)
        self._set_values(np.concatenate([self._values, values]))

    def _append(self, key: str, x: np.ndarray, value: float, listed: int) -> None:
        at = None if self._cols is None else np.flatnonzero(self._cols)
        j = self._n
        self._reserve(j + 1)
        row = self._row(j, x / self.length_scale, listed, at)
        d, lj = self._L[j, j], self._L[j, :j]
        self._now[j] = (value - self._ref - lj @ self._now[:j]) / d
        where = slice(None) if at is None else at
        self._P[where] += self._now[j] * row
        self._Rc[where] += self._e[j] * row
        self._Qc[where] += row**2
        self._believed.append((key, at is None))
        self._n = j + 1

    def _widen(self) -> None:
        """Predictions everywhere again: the points believed since `believe` was given `cols`
        are believed again, everywhere."""
        assert self._restricted is not None
        n, P, R, Q, points = self._restricted
        self._n, self._P, self._Rc, self._Qc = n, P, R, Q
        self._believed = self._believed[: n - len(self._keys)]
        self._set_values(self._restricted_values)
        self._cols = self._restricted = None
        for key, X, mean, listed in points:
            self.believe(key, X, mean, listed)


def expected_improvement(
    mean: np.ndarray, sd: np.ndarray, best: float, margin: float = 0.01
) -> np.ndarray:
    """Expected improvement below `best - margin` (Jones et al., J. Global Optim. 1998)."""
    gain = best - mean - margin
    z = gain / sd
    return gain * ndtr(z) + sd * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
