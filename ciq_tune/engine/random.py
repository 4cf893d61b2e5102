"""Random search: feasible, never-repeated random configurations (a baseline for the others)."""

from __future__ import annotations

from typing import ClassVar

from ciq_tune.engine.base import Engine
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.operators.sampling import InitialSampling
from ciq_tune.results import EvaluationRecord


class RandomConfig(EngineConfig):
    """Settings of `RandomSearch`; only `pool_size` (the batch size) matters. Uniform draws
    throughout, the first generation included (the baseline the battery compares with)."""

    initial_sampling: InitialSampling = "random"


class RandomSearch(Engine):
    """Uniform sampling of the feasible space without repeats; any number of objectives."""

    name: ClassVar[str] = "random"
    config_model: ClassVar[type[EngineConfig]] = RandomConfig

    def _survive(self, records: list[EvaluationRecord], n: int) -> list[EvaluationRecord]:
        # No population: with fewer than two survivors the base always samples at random.
        return []
