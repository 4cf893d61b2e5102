"""Screened GA: GA variation whose children are screened by a TPE-style density-ratio model.

Each generation draws many feasible, unseen candidates (children of the elite by crossover and
mutation, local moves around the elite, uniform random ones) and keeps the `pool_size` with the
highest ratio l(x)/g(x), where l and g are Parzen densities over the good (top `gamma`) and the
other evaluations, failures counted among the others (Bergstra et al., NeurIPS 2011, "Algorithms
for hyper-parameter optimization", eqs. 2-4; product of per-parameter kernels as in Optuna's
univariate TPE). Only screened candidates are evaluated, so evaluations go where the model
expects the optimum, while every proposal still respects the space's constraints.
"""

from __future__ import annotations

import math
from typing import Any
from typing import ClassVar

import numpy as np
from pydantic import Field
from pymoo.core.population import Population

from ciq_tune.engine.base import Candidate
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.ga import GA
from ciq_tune.space.space import Genes

SCREENED_DEFAULTS: dict[str, Any] = {
    "pool_size": 4,
    "gamma": 0.25,
    "max_good": 25,
    "screen_factor": 32,
    "random_share": 0.25,
    "local_share": 0.5,
    "explore_after": 8,
    "explore_share": 0.25,
}
# Weight of the uniform prior in each per-parameter density (in observations), so that values
# never seen keep a non-zero density (Optuna's `prior_weight`).
PRIOR_WEIGHT = 1.0
# Kernel width of an ordered parameter, in steps between neighbouring values.
ORDINAL_BANDWIDTH_STEPS = 1.0
# Kernel weight a categorical value gives to a different value.
CATEGORICAL_MISMATCH = 0.05


class ScreenedGAConfig(EngineConfig):
    """Settings of `ScreenedGA`; defaults in `SCREENED_DEFAULTS`.

    Args:
        gamma: share of successful evaluations that form the good density l(x).
        max_good: at most this many evaluations form l(x) (Optuna's gamma cap of 25).
        screen_factor: candidates drawn per candidate kept.
        random_share: share of drawn candidates that are uniform random (exploration).
        local_share: share of drawn candidates that are mutations of the elite (polish);
            the rest are crossover children.
        explore_after: generations without a new best after which part of each generation is
            evaluated unscreened (uniform random): the model stops proposing outside the basin
            it believes in, so only unscreened evaluations can find another one.
        explore_share: share of each generation drawn unscreened while stagnating.
    """

    pool_size: int = Field(default=SCREENED_DEFAULTS["pool_size"], ge=2)
    gamma: float = Field(default=SCREENED_DEFAULTS["gamma"], gt=0, lt=1)
    max_good: int = Field(default=SCREENED_DEFAULTS["max_good"], ge=1)
    screen_factor: int = Field(default=SCREENED_DEFAULTS["screen_factor"], ge=1)
    random_share: float = Field(default=SCREENED_DEFAULTS["random_share"], ge=0, le=1)
    local_share: float = Field(default=SCREENED_DEFAULTS["local_share"], ge=0, le=1)
    explore_after: int = Field(default=SCREENED_DEFAULTS["explore_after"], ge=1)
    explore_share: float = Field(default=SCREENED_DEFAULTS["explore_share"], ge=0, le=1)


class ScreenedGA(GA):
    """GA whose offspring are screened by a density-ratio model (see the module docstring)."""

    name: ClassVar[str] = "screened"
    config_model: ClassVar[type[EngineConfig]] = ScreenedGAConfig

    def _offspring(self, n: int) -> list[Candidate]:
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        explore = 0
        if self._stagnant >= config.explore_after:
            # Binomial, so a steady-state request for one candidate explores at the same rate.
            explore = int(self.rng.binomial(n, config.explore_share))
        n_screened = n - explore
        pool = self._draw(n_screened * config.screen_factor) if n_screened else []
        if not pool:
            return self._random_candidates(n)
        scores = self._density_ratio(pool)
        out: list[Candidate] = []
        for index in np.argsort(-scores, kind="stable"):
            candidate = self._make_candidate(pool[int(index)], "offspring")
            if candidate is not None:
                out.append(candidate)
            if len(out) == n_screened:
                break
        return out + self._random_candidates(n - len(out))

    def _draw(self, n: int) -> list[Genes]:
        """About `n` distinct feasible genes not evaluated yet, from the three sources."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        n_random = math.ceil(n * config.random_share)
        n_local = math.ceil(n * config.local_share)
        elite = self._elite()
        rows = [self.space.sample_genes(self.rng) for _ in range(n_random)]
        if elite:
            X = np.array(
                [list(elite[int(i)]) for i in self.rng.integers(len(elite), size=n_local)],
                dtype=object,
            )
            X = self.mutation._do(self.problem, X, random_state=self.rng)
            rows += [tuple(r) for r in X]
        if len(self._population) >= 2:
            n_cross = max(n - n_random - n_local, 0)
            ranks = self._parent_ranks(self._population)
            parents = np.array(
                [[self._tournament(ranks) for _ in range(2)] for _ in range(math.ceil(n_cross / 2))]
            )
            pop = Population.new(
                "X", np.array([list(r.genes) for r in self._population], dtype=object)
            )
            children = self.crossover.do(self.problem, pop, parents, random_state=self.rng)
            children = self.mutation.do(self.problem, children, random_state=self.rng)
            rows += [tuple(r) for r in children.get("X")]
        pool: dict[str, Genes] = {}
        for genes in rows:
            key = self.space.key(genes)
            if key not in self._seen and key not in pool and self.space.is_feasible(genes):
                pool[key] = genes
        return list(pool.values())

    def _elite(self) -> list[Genes]:
        good, _ = self._split()
        return [tuple(r.genes) for r in good]

    def _split(self) -> tuple[list[Any], list[Any]]:
        """Good (best `gamma` share of successes, at most `max_good`) and other records."""
        config: ScreenedGAConfig = self.config  # type: ignore[assignment]
        ok = [r for r in self._records if r.ok]
        ok.sort(key=lambda r: float(np.sum(r.minimised(self.objectives))))
        n_good = min(max(1, math.ceil(config.gamma * len(ok))), config.max_good) if ok else 0
        good = ok[:n_good]
        ids = {r.candidate_id for r in good}
        return good, [r for r in self._records if r.candidate_id not in ids]

    def _density_ratio(self, pool: list[Genes]) -> np.ndarray:
        """log l(x) - log g(x) of each candidate (product of per-parameter kernels)."""
        good, bad = self._split()
        if not good:
            return self.rng.random(len(pool))
        X = np.array([self.space.to_unit(g) for g in pool])
        return self._log_density(X, good) - self._log_density(X, bad)

    def _log_density(self, X: np.ndarray, records: list[Any]) -> np.ndarray:
        if not records:
            return np.zeros(len(X))
        obs = np.array([self.space.to_unit(tuple(r.genes)) for r in records])
        total = np.zeros(len(X))
        for j, param in enumerate(self.space.params):
            card = param.cardinality()
            if card <= 1:
                continue
            diff = X[:, j][:, None] - obs[:, j][None, :]
            if param.is_ordered:
                width = ORDINAL_BANDWIDTH_STEPS / (card - 1) if math.isfinite(card) else 0.1
                kernel = np.exp(-0.5 * (diff / width) ** 2)
            else:
                kernel = np.where(np.abs(diff) < 1e-9, 1.0, CATEGORICAL_MISMATCH)
            prior = PRIOR_WEIGHT / (card if math.isfinite(card) else 10.0)
            total += np.log((kernel.sum(axis=1) + prior) / (len(records) + PRIOR_WEIGHT))
        return total
