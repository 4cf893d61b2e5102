"""NSGA-III for many objectives (Deb & Jain, IEEE TEC 2014).

Reuses NSGA-II's variation and replaces survival with niching around reference directions
(pymoo `ReferenceDirectionSurvival`). Reference directions are Das-Dennis points with as many
partitions as fit in the pool, or the user's own `ref_dirs` (e.g. to emphasise a trade-off).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from typing import ClassVar

import numpy as np
from pydantic import Field
from pymoo.algorithms.moo.nsga3 import ReferenceDirectionSurvival
from pymoo.util.ref_dirs import get_reference_directions

from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.nsga2 import NSGA2
from ciq_tune.engine.nsga2 import NSGA2Config
from ciq_tune.errors import EngineError
from ciq_tune.results import EvaluationRecord

# pymoo's hyperplane normalisation, saved with the state.
_NORMALISATION = ("ideal_point", "worst_point", "nadir_point", "extreme_points")


class NSGA3Config(NSGA2Config):
    """Settings of `NSGA3`: NSGA-II's (`NSGA2_DEFAULTS`: generations of 24, immigrants, half
    of what the polls leave, after one without progress) and the reference directions.

    Args:
        ref_dirs: reference directions, one row per direction and one column per objective,
            each row summing to 1; None for Das-Dennis directions sized to `pool_size`.
    """

    ref_dirs: list[list[float]] | None = Field(default=None, min_length=1)


class NSGA3(NSGA2):
    """NSGA-III: reference-direction survival for three or more objectives (two work too)."""

    name: ClassVar[str] = "nsga3"
    config_model: ClassVar[type[EngineConfig]] = NSGA3Config

    def _reference_survival(self) -> ReferenceDirectionSurvival:
        if getattr(self, "_survival", None) is None:
            n_obj = len(self.objectives)
            ref_dirs = self.config.ref_dirs  # type: ignore[attr-defined]
            if ref_dirs is None:
                partitions = 1
                while _das_dennis_count(n_obj, partitions + 1) <= self.config.pool_size:
                    partitions += 1
                directions = get_reference_directions("das-dennis", n_obj, n_partitions=partitions)
            else:
                directions = np.asarray(ref_dirs, dtype=float)
                if directions.ndim != 2 or directions.shape[1] != n_obj:
                    raise EngineError(
                        f"`ref_dirs` must have one column per objective ({n_obj}), got shape "
                        f"{directions.shape}"
                    )
            self._survival = ReferenceDirectionSurvival(directions)
        return self._survival

    def _survive(self, records: list[EvaluationRecord], n: int) -> list[EvaluationRecord]:
        pop = self.as_population(records)
        survival = self._reference_survival()
        survivors = survival.do(self.problem, pop, n_survive=n, random_state=self.rng)
        self._rank_keys = {
            records[i].candidate_id: (rank, 0.0)
            for i, rank in zip(survivors.get("index"), survivors.get("rank"), strict=True)
        }
        return [records[i] for i in survivors.get("index")]

    def _strategy_state(self) -> dict[str, Any]:
        """The hyperplane normalisation (ideal, worst, nadir and extreme points) survives
        between generations in pymoo, so it is part of the state."""
        state = super()._strategy_state()
        survival = getattr(self, "_survival", None)
        if survival is None:
            return state
        norm = survival.norm
        return state | {
            name: None if getattr(norm, name) is None else getattr(norm, name).tolist()
            for name in _NORMALISATION
        }

    def _load_strategy_state(self, state: Mapping[str, Any]) -> None:
        super()._load_strategy_state(state)
        saved = {name: state[name] for name in _NORMALISATION if name in state}
        if not saved:
            return
        norm = self._reference_survival().norm
        for name, value in saved.items():
            setattr(norm, name, None if value is None else np.array(value, dtype=float))


def _das_dennis_count(n_obj: int, partitions: int) -> int:
    from math import comb

    return comb(n_obj + partitions - 1, partitions)
