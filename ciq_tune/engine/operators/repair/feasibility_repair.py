"""Constraint repair: every child satisfies the space's constraints."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

import numpy as np
from pymoo.core.population import Population
from pymoo.core.repair import Repair

if TYPE_CHECKING:
    from ciq_tune.engine.operators.mutation.parameter_mutation import ParameterMutation
    from ciq_tune.engine.operators.problem import SpaceProblem

# Re-mutations tried to make an infeasible child feasible before drawing a random one instead.
REPAIR_TRIES = 20


class FeasibilityRepair(Repair):
    """Re-mutates an infeasible child up to `REPAIR_TRIES` times (it stays close to its
    parents), then replaces it with a random feasible one: constraint handling by repair
    rather than penalty, so that no evaluation is spent on a configuration the user ruled out.

    Args:
        mutation: the mutation applied to an infeasible child.
    """

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
                pop = self.mutation.do(problem, Population.new("X", row), random_state=rng)
                row = pop.get("X")
            else:
                row = np.array([space.sample_genes(rng)], dtype=object)
            if not space.is_feasible(tuple(row[0])):
                row = np.array([space.sample_genes(rng)], dtype=object)
            X[i] = row[0]
        return X
