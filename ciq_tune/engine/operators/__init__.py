"""Variation, selection and duplicate elimination as pymoo operators, one per file.

Genes are the per-parameter values of a `SearchSpace` (indices, floats or None for knocked
out); each operator asks the space's primitives to do the type-specific work, so no operator
switches on parameter types (pymoo's mixed-variable design, `pymoo/core/mixed.py`). Crossover
is pymoo's own `UniformCrossover`.
"""

from __future__ import annotations

from ciq_tune.engine.operators.duplicates.config_duplicates import duplicate_elimination
from ciq_tune.engine.operators.mutation.parameter_mutation import ParameterMutation
from ciq_tune.engine.operators.problem import SpaceProblem
from ciq_tune.engine.operators.repair.feasibility_repair import FeasibilityRepair
from ciq_tune.engine.operators.sampling.latin_hypercube import LatinHypercubeSampling
from ciq_tune.engine.operators.sampling.space_sampling import SpaceSampling
from ciq_tune.engine.operators.selection.rank_tournament import rank_tournament

__all__ = [
    "FeasibilityRepair",
    "LatinHypercubeSampling",
    "ParameterMutation",
    "SpaceProblem",
    "SpaceSampling",
    "duplicate_elimination",
    "rank_tournament",
]
