"""NSGA-II for several objectives (Deb et al., IEEE TEC 2002).

Survival by non-dominated rank and crowding distance (pymoo `RankAndCrowding`); parents by
binary tournament on (rank, larger crowding distance).
"""

from __future__ import annotations

from typing import Any
from typing import ClassVar

import numpy as np
from pydantic import Field
from pymoo.operators.survival.rank_and_crowding import RankAndCrowding

from ciq_tune.engine.config import GENETIC_DEFAULTS
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.config import GeneticConfig
from ciq_tune.engine.genetic import GeneticEngine
from ciq_tune.results import EvaluationRecord

# Immigrants after one bred generation without progress (ga: two of 16): with two of 24, a
# stalled search looked elsewhere only from its 89th evaluation, and on the battery's three
# continuous basins its median at 100 sat on the widest floor (0.993 and 1.0, random search
# 0.955 and 0.999; with one: 0.731 and 0.664). Seeds at the optimum within 200, of 1500, with
# two -> one: 946 -> 985 (seeds 100-199) and 969 -> 1009 (200-299), at the cost of slower
# medians at 50-100 on the wide bowls (`half_step` found 80 -> 63, 86 -> 69; docs/benchmarks.md,
# "NSGA-II/III immigrate after one generation").
# Immigrants are half of what the first stagnating generation's polls leave, not three quarters
# (then 0.75, 0.875, ... compounding): in evaluations, between `ga`'s three quarters of 16 after
# 32 without progress and three quarters of 24 after 24. Seeds at the optimum within 200, of
# 1500: 985 -> 1002 (seeds 100-199, chosen on), 1009 -> 1028 and 1003 -> 1010 (200-299,
# 300-399); medians at 100 better on 6 / 5 problems of 15, worse on 1 / 2 (`half_step` found
# 69 -> 83, 71 -> 83; `conditional` 88 -> 78, 86 -> 81; docs/benchmarks.md, "Synthetic battery").
NSGA2_DEFAULTS: dict[str, Any] = {
    **GENETIC_DEFAULTS,
    "pool_size": 24,
    "crossover_prob": 0.9,
    "immigrate_after": 1,
    "immigrant_share": 0.5,
}


class NSGA2Config(GeneticConfig):
    """Settings of `NSGA2` (see `EngineConfig`); defaults in `NSGA2_DEFAULTS`."""

    pool_size: int = Field(default=NSGA2_DEFAULTS["pool_size"], ge=2)
    immigrate_after: int | None = Field(default=NSGA2_DEFAULTS["immigrate_after"], ge=1)
    immigrant_share: float = Field(default=NSGA2_DEFAULTS["immigrant_share"], ge=0, le=1)


class NSGA2(GeneticEngine):
    """NSGA-II: Pareto-based search for two or three objectives."""

    name: ClassVar[str] = "nsga2"
    config_model: ClassVar[type[EngineConfig]] = NSGA2Config
    min_objectives: ClassVar[int] = 2

    def _survive(self, records: list[EvaluationRecord], n: int) -> list[EvaluationRecord]:
        pop = self.as_population(records)
        survivors = RankAndCrowding().do(self.problem, pop, n_survive=n, random_state=self.rng)
        self._rank_keys = {
            records[i].candidate_id: (rank, -crowding)
            for i, rank, crowding in zip(
                survivors.get("index"),
                survivors.get("rank"),
                survivors.get("crowding"),
                strict=True,
            )
        }
        return [records[i] for i in survivors.get("index")]

    def _parent_ranks(self, population: list[EvaluationRecord]) -> np.ndarray:
        keys = getattr(self, "_rank_keys", {})
        order = sorted(
            range(len(population)),
            key=lambda i: keys.get(population[i].candidate_id, (np.inf, 0.0)),
        )
        ranks = np.empty(len(population))
        ranks[order] = np.arange(len(population))
        return ranks
