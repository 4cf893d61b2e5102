"""GA: a (μ + λ) genetic algorithm for one objective.

Binary tournament selection, uniform crossover, per-parameter mutation and constraint repair
(`engine/operators.py`); survivors are the best of parents and children by fitness
(pymoo `FitnessSurvival`, as in pymoo's `GA`); offspring pre-selected by a Gaussian
process's expected improvement, immigrants after stagnation (`engine/genetic.py`).
"""

from __future__ import annotations

from typing import Any
from typing import ClassVar

from pymoo.algorithms.soo.nonconvex.ga import FitnessSurvival

from ciq_tune.engine.config import GENETIC_DEFAULTS
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.config import GeneticConfig
from ciq_tune.engine.genetic import GeneticEngine
from ciq_tune.results import EvaluationRecord

GA_DEFAULTS: dict[str, Any] = {
    "pool_size": 16,
    "survivors": None,
    "mutation_prob": None,
    "crossover_prob": 0.9,
    **GENETIC_DEFAULTS,
    "local_share": 0.5,
    "steady_state": False,
    "min_pass_fraction": 0.25,
    "max_refills": 1,
}


class GAConfig(GeneticConfig):
    """Settings of `GA` (see `EngineConfig`); defaults in `GA_DEFAULTS`."""


class GA(GeneticEngine):
    """Genetic algorithm for a single objective."""

    name: ClassVar[str] = "ga"
    config_model: ClassVar[type[EngineConfig]] = GAConfig
    max_objectives: ClassVar[int | None] = 1

    def _survive(self, records: list[EvaluationRecord], n: int) -> list[EvaluationRecord]:
        pop = self.as_population(records)
        survivors = FitnessSurvival().do(self.problem, pop, n_survive=n, random_state=self.rng)
        return [records[i] for i in survivors.get("index")]
