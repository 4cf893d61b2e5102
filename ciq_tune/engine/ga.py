"""GA: a (μ + λ) genetic algorithm for one objective.

Binary tournament selection, uniform crossover, per-parameter mutation and constraint repair
(`engine/operators.py`); survivors are the best of parents and children by fitness
(pymoo `FitnessSurvival`, as in pymoo's `GA`); offspring pre-selected by a Gaussian
process's expected improvement, immigrants after stagnation (`engine/genetic.py`).
"""

from __future__ import annotations

from typing import Any
from typing import ClassVar

from pydantic import Field
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
    # Half the family's MLSL factor (8), as `screened`: a critical distance 2^(-1/n) as long
    # in n unit coordinates, so a point that fell into a narrow basin starts a descent although
    # a lower point lies a little farther off (battery `multi_basin`, seeds 0-399: the global
    # basin within 200 evaluations in 0.71 of seeds, 0.62 with 8; docs/benchmarks.md,
    # "Synthetic battery").
    "restart_sigma": 4.0,
    "local_share": 0.5,
    "steady_state": False,
    "min_pass_fraction": 0.25,
    "max_refills": 1,
}


class GAConfig(GeneticConfig):
    """Settings of `GA` (see `EngineConfig`); defaults in `GA_DEFAULTS`."""

    restart_sigma: float = Field(default=GA_DEFAULTS["restart_sigma"], gt=0)


class GA(GeneticEngine):
    """Genetic algorithm for a single objective."""

    name: ClassVar[str] = "ga"
    config_model: ClassVar[type[EngineConfig]] = GAConfig
    max_objectives: ClassVar[int | None] = 1

    def _survive(self, records: list[EvaluationRecord], n: int) -> list[EvaluationRecord]:
        pop = self.as_population(records)
        survivors = FitnessSurvival().do(self.problem, pop, n_survive=n, random_state=self.rng)
        return [records[i] for i in survivors.get("index")]
