"""Sampling operators (pymoo `Sampling` subclasses)."""

from __future__ import annotations

from typing import Literal

from pymoo.core.sampling import Sampling

from ciq_tune.engine.operators.sampling.latin_hypercube import LatinHypercubeSampling
from ciq_tune.engine.operators.sampling.sobol import SobolSampling
from ciq_tune.engine.operators.sampling.space_sampling import SpaceSampling

InitialSampling = Literal["latin_hypercube", "optimized_latin_hypercube", "sobol", "random"]


def initial_sampling(name: InitialSampling) -> Sampling:
    """The sampling operator of a first generation, by `EngineConfig.initial_sampling`."""
    if name == "latin_hypercube":
        return LatinHypercubeSampling()
    if name == "optimized_latin_hypercube":
        return LatinHypercubeSampling(optimization="random-cd")
    if name == "sobol":
        return SobolSampling()
    return SpaceSampling()
