"""Sampling operators (pymoo `Sampling` subclasses)."""

from __future__ import annotations

from typing import Literal

from pymoo.core.sampling import Sampling

from ciq_tune.engine.operators.sampling.latin_hypercube import LatinHypercubeSampling
from ciq_tune.engine.operators.sampling.sobol import SobolSampling
from ciq_tune.engine.operators.sampling.space_sampling import SpaceSampling

InitialSampling = Literal["latin_hypercube", "optimized_latin_hypercube", "sobol", "random"]


def initial_sampling(name: InitialSampling, *, drop_infeasible: bool = False) -> Sampling:
    """The sampling operator of a first generation, by `EngineConfig.initial_sampling`.
    `drop_infeasible`: a design's rows that break the constraints are dropped, not replaced
    by uniform draws (uniform draws are feasible already)."""
    if name == "latin_hypercube":
        return LatinHypercubeSampling(drop_infeasible=drop_infeasible)
    if name == "optimized_latin_hypercube":
        return LatinHypercubeSampling(optimization="random-cd", drop_infeasible=drop_infeasible)
    if name == "sobol":
        return SobolSampling(drop_infeasible=drop_infeasible)
    return SpaceSampling()
