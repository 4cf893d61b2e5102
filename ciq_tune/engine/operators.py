"""Variation operators over gene vectors, as pymoo operators.

Genes are the per-parameter values of a `SearchSpace` (indices, floats or None for knocked out);
each operator asks the space's primitives to do the type-specific work, so no operator switches
on parameter types (pymoo's mixed-variable design, `pymoo/core/mixed.py`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pymoo.core.crossover import Crossover
from pymoo.core.mutation import Mutation
from pymoo.core.problem import Problem
from pymoo.core.repair import Repair
from pymoo.core.sampling import Sampling

from ciq_tune.space import SearchSpace

# Re-mutations tried to make an infeasible child feasible before drawing a random one instead.
REPAIR_TRIES = 20


class SpaceProblem(Problem):
    """The pymoo view of a search space: `n_var` genes of object type, evaluated outside pymoo."""

    def __init__(self, space: SearchSpace, n_obj: int) -> None:
        super().__init__(n_var=len(space), n_obj=n_obj, n_ieq_constr=0, vtype=object)
        self.space = space


class SpaceSampling(Sampling):
    """Random feasible genes, drawn within each parameter's seed range (first generation)."""

    def _do(self, problem: SpaceProblem, n_samples: int, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        X = np.empty((n_samples, problem.n_var), dtype=object)
        for i in range(n_samples):
            X[i] = problem.space.sample_genes(rng, seeded=True)
        return X


class UniformGeneCrossover(Crossover):
    """Uniform crossover (Syswerda 1989): each gene comes from either parent with probability
    1/2. Two parents give two complementary children."""

    def __init__(self, prob: float = 0.9) -> None:
        super().__init__(n_parents=2, n_offsprings=2, prob=prob)

    def _do(self, problem: SpaceProblem, X: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        _, n_matings, n_var = X.shape
        swap = rng.random((n_matings, n_var)) < 0.5
        children = X.copy()
        children[0][swap] = X[1][swap]
        children[1][swap] = X[0][swap]
        return children


class ParameterMutation(Mutation):
    """Each gene mutates with probability `gene_prob` through its primitive's `mutate`
    (neighbour steps for ordinal values, a different category, a knockout toggle, a Gaussian
    step for continuous values). At least one gene always mutates, so a child never equals the
    parent it was copied from."""

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


class FeasibilityRepair(Repair):
    """Makes every child satisfy the space's constraints: re-mutates an infeasible child a few
    times, then replaces it with a random feasible one (constraint-aware variation)."""

    def __init__(self, mutation: ParameterMutation) -> None:
        super().__init__()
        self.mutation = mutation

    def _do(self, problem: SpaceProblem, X: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        rng: np.random.Generator = kwargs["random_state"]
        space = problem.space
        for i in range(len(X)):
            row = X[i : i + 1]
            for _ in range(REPAIR_TRIES):
                if space.is_feasible(tuple(row[0])):
                    break
                row = self.mutation._do(problem, row, random_state=rng)
            else:
                row = np.array([space.sample_genes(rng)], dtype=object)
            if not space.is_feasible(tuple(row[0])):
                row = np.array([space.sample_genes(rng)], dtype=object)
            X[i] = row[0]
        return X
