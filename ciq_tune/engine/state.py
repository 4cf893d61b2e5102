"""An engine's state as versioned, JSON-safe data and an engine rebuilt from it, candidates in
flight included, so that a search goes on exactly where it stopped (Ray Tune's
`Searcher.save`/`restore`, `ciq-tune resume`).

`Resumable` is the base of `Engine` (`engine/base.py`) and holds nothing but this: the fields it
reads are declared below and set by `Engine.__init__`; a strategy adds its own state through the
`_strategy_state`/`_load_strategy_state` hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any
from typing import ClassVar
from typing import Self

import numpy as np

from ciq_tune.engine.config import Budget
from ciq_tune.engine.config import EngineConfig
from ciq_tune.engine.loop import LoopState
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.proposals import ProposalArchive
from ciq_tune.engine.shape_descent import ShapeDescent
from ciq_tune.errors import StateError
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import Objective
from ciq_tune.space import SearchSpace
from ciq_tune.space.space import Genes

STATE_SCHEMA = 1


class Resumable:
    """`get_state` and `from_state` of an engine (see the module docstring)."""

    name: ClassVar[str] = "base"
    config_model: ClassVar[type[EngineConfig]] = EngineConfig
    space: SearchSpace
    objectives: list[Objective]
    config: EngineConfig
    budget: Budget
    seed: int | None
    rng: np.random.Generator
    proposals: ProposalArchive
    loop: LoopState
    shape_descent: ShapeDescent | None
    _queue: list[Candidate]
    _pending: dict[int, Candidate]
    _records: list[EvaluationRecord]
    _population: list[EvaluationRecord]
    _front: list[np.ndarray]
    _warm_start: list[tuple[Genes, str]]

    if TYPE_CHECKING:  # what `Engine` provides

        def __init__(
            self,
            space: SearchSpace,
            objectives: list[Objective],
            *,
            config: EngineConfig,
            budget: Budget,
            seed: int | None,
        ) -> None: ...

        def _is_improvement(self, record: EvaluationRecord) -> bool: ...

        def _strategy_state(self) -> dict[str, Any]: ...

        def _load_strategy_state(self, state: Mapping[str, Any]) -> None: ...

    def get_state(self) -> dict[str, Any]:
        """JSON-safe state; `from_state` resumes exactly (pending candidates included)."""
        return {
            "schema": STATE_SCHEMA,
            "strategy": self.name,
            "space": self.space.to_dict(),
            "objectives": [o.model_dump() for o in self.objectives],
            "config": self.config.model_dump(),
            "budget": self.budget.model_dump(),
            "seed": self.seed,
            "rng": self.rng.bit_generator.state,
            "next_id": self.proposals.next_id,
            "queue": [c.to_json() for c in self._queue],
            "pending": [c.to_json() for c in self._pending.values()],
            "records": [r.to_json() for r in self._records],
            "population": [r.candidate_id for r in self._population],
            **self.loop.to_json(),
            "warm_start": [[list(g), origin] for g, origin in self._warm_start],
            "strategy_state": self._strategy_state(),
            "shape_descent": None
            if self.shape_descent is None
            else self.shape_descent.model_dump(),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], *, space: SearchSpace | None = None) -> Self:
        """Rebuild an engine from `get_state()` output (of any strategy whose module is
        imported: `ciq_tune.engine` imports them all; `Engine.from_state` reads them all, a
        strategy's own only its own).

        Raises:
            StateError: another schema, or a strategy no imported module defines.
        """
        if state.get("schema") != STATE_SCHEMA:
            raise StateError(
                f"engine state has schema {state.get('schema')!r}; this version reads "
                f"{STATE_SCHEMA}"
            )
        strategy = _strategies().get(state.get("strategy", ""))
        if strategy is None or not issubclass(strategy, cls):
            raise StateError(f"engine state names unknown strategy {state.get('strategy')!r}")
        engine = strategy(
            space if space is not None else SearchSpace.from_dict(state["space"]),
            [Objective(**o) for o in state["objectives"]],
            config=strategy.config_model(**state["config"]),
            budget=Budget(**state["budget"]),
            seed=state["seed"],
        )
        engine._load_state(state)
        return engine

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self._queue = [Candidate.from_json(c) for c in state["queue"]]
        self._pending = {c.id: c for c in map(Candidate.from_json, state["pending"])}
        self._records = [EvaluationRecord.from_json(r) for r in state["records"]]
        by_id = {r.candidate_id: r for r in self._records}
        self._population = [by_id[i] for i in state["population"]]
        proposed = [(r.genes, r.key) for r in self._records]
        proposed += [(c.genes, c.key) for c in [*self._queue, *self._pending.values()]]
        self.proposals.restore(proposed, state["next_id"])
        self._front = []
        for record in self._records:
            if record.ok:
                self._is_improvement(record)
        self.loop = LoopState.from_json(state)
        self._warm_start = [(tuple(g), origin) for g, origin in state["warm_start"]]
        descent = state.get("shape_descent")
        self.shape_descent = None if descent is None else ShapeDescent(**descent)
        self._load_strategy_state(state.get("strategy_state", {}))


def _strategies() -> dict[str, type[Resumable]]:
    """Every engine class that names its strategy (`name`), by that name."""
    found: dict[str, type[Resumable]] = {}
    stack: list[type[Resumable]] = [Resumable]
    while stack:
        for sub in stack.pop().__subclasses__():
            if "name" in vars(sub):
                found.setdefault(sub.name, sub)
            stack.append(sub)
    return found
