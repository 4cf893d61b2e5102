"""Exhaustive search: every feasible configuration of a listed space, each once, in order.

When the budget covers every feasible configuration of a space of listed values, a guided
search would spend it on much the same set, in another order and possibly missing some;
listing the space evaluates each configuration once, so the best one is found for certain
(Kernel Tuner's `brute_force` strategy). `create_engine("auto", …)` picks it then.
"""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Mapping
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import ClassVar

from pydantic import Field

from ciq_tune.engine.base import Engine
from ciq_tune.engine.config import Budget
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.operators.sampling import InitialSampling

if TYPE_CHECKING:
    from pymoo.core.sampling import Sampling

    from ciq_tune.engine.proposals import Candidate
    from ciq_tune.results import EvaluationRecord
    from ciq_tune.results import Objective
    from ciq_tune.space import SearchSpace
    from ciq_tune.space.space import Genes

# One million rows take a few seconds to list (about 3 µs a row, constraints checked).
EXHAUSTIVE_DEFAULTS: dict[str, Any] = {"max_combinations": 1_000_000}


class ExhaustiveConfig(EngineConfig):
    """Settings of `Exhaustive`: `pool_size` (the batch: candidates out at once),
    `steady_state` and the refill settings work as for every engine; the breeding ones are
    unused.

    Args:
        max_combinations: the most gene combinations (before constraints) a space may have
            to be listed; a larger one is refused at construction (`SpaceError`).
    """

    initial_sampling: InitialSampling = "random"
    max_combinations: int = Field(default=EXHAUSTIVE_DEFAULTS["max_combinations"], ge=1)


class Exhaustive(Engine):
    """Every distinct feasible configuration once: the warm starts first (baseline,
    `initial_points`, transfer), then the rest in `SearchSpace.enumerate_genes` order;
    finished when all were told or the budget is spent. Any number of objectives; the seed
    changes nothing. Without a `budget` it runs until the space is exhausted.

    The state holds a cursor (the next row of the listing), not the list: a restored engine
    resumes the listing where it stopped.
    """

    name: ClassVar[str] = "exhaustive"
    config_model: ClassVar[type[EngineConfig]] = ExhaustiveConfig

    def __init__(
        self,
        space: SearchSpace | Mapping[str, Any],
        objectives: Sequence[Objective | str],
        *,
        budget: Budget | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            space, objectives, budget=budget if budget is not None else Budget(), **kwargs
        )
        self._limit: int = self.config.max_combinations  # type: ignore[attr-defined]
        self.space.enumerate_genes(self._limit)  # a continuous or too large space fails now
        self._next_row = 0  # the first row of the listing not yet looked at
        self._rows: Iterator[tuple[int, Genes]] | None = None  # the listing from `_next_row`

    def _random_candidates(self, n: int, sampling: Sampling | None = None) -> list[Candidate]:
        """The next `n` never-proposed configurations of the listing (the warm starts, already
        proposed, are skipped), fewer once it ends; every proposal of the base loop comes from
        here (first generation, refills, next generations, steady state). `sampling` unused."""
        out: list[Candidate] = []
        if self._rows is None:
            self._rows = self.space.enumerate_genes(self._limit, start=self._next_row)
        while len(out) < n:
            row = next(self._rows, None)
            if row is None:
                self.loop.exhausted = True
                break
            self._next_row = row[0] + 1
            candidate = self._make_candidate(row[1], "random")
            if candidate is not None:
                out.append(candidate)
        return out

    def _survive(self, records: list[EvaluationRecord], n: int) -> list[EvaluationRecord]:
        # No population: with fewer than two survivors every generation comes from the listing.
        return []

    def _strategy_state(self) -> dict[str, Any]:
        return {"next_row": self._next_row}

    def _load_strategy_state(self, state: Mapping[str, Any]) -> None:
        self._next_row = int(state["next_row"])
        self._rows = None
