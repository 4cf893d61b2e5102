"""Where an engine's loop stands (`LoopState`: generations, refills, stagnation, the clock) and
when its `Budget` stops it (`LoopState.stop_reason`): plain data, saved with the engine's state
under the same keys."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from ciq_tune.engine.config import Budget

# Keys of the engine state that `LoopState` saves (the clock as `elapsed_s`).
_COUNTERS = (
    "generation",
    "generation_ok",
    "generation_created",
    "refills",
    "stagnant",
    "improved",
    "started",
    "exhausted",
)


@dataclass
class LoopState:
    """The loop's counters.

    Attributes:
        generation: the current generation (0 is the first design).
        generation_ok: candidates of this generation told ``ok``.
        generation_created: candidates this generation started with.
        refills: refills of this generation (too few passed).
        stagnant: generations closed in a row without an improvement.
        improved: whether this generation has improved on the best (or the front).
        started: whether the first generation was made.
        exhausted: whether nothing new can be proposed (every feasible configuration out).
        elapsed_before: seconds run before a restore; the clock goes on from there.
    """

    generation: int = 0
    generation_ok: int = 0
    generation_created: int = 0
    refills: int = 0
    stagnant: int = 0
    improved: bool = False
    started: bool = False
    exhausted: bool = False
    elapsed_before: float = 0.0
    clock_start: float = field(default_factory=time.monotonic)

    @property
    def elapsed_s(self) -> float:
        return self.elapsed_before + time.monotonic() - self.clock_start

    def close_generation(self) -> None:
        """The generation is over: count stagnation and start the next one's counters."""
        self.stagnant = 0 if self.improved else self.stagnant + 1
        self.improved = False
        self.generation += 1
        self.generation_ok = 0
        self.refills = 0

    def stop_reason(
        self, budget: Budget, *, asked: int, queued: int, steady_state: bool, pool_size: int
    ) -> str | None:
        """Why the engine proposes no more candidates, or None while it does.

        Args:
            budget: the engine's limits.
            asked: candidates handed out or told.
            queued: candidates made and not yet handed out.
            steady_state: whether a generation is `pool_size` evaluations of a steady state.
            pool_size: candidates per generation.
        """
        if self.exhausted and not queued:
            return "every feasible configuration has been evaluated"
        if budget.max_evaluations is not None and asked >= budget.max_evaluations:
            return f"max_evaluations={budget.max_evaluations} reached"
        if budget.max_generations is not None:
            done = asked // pool_size if steady_state else self.generation
            if done >= budget.max_generations:
                return f"max_generations={budget.max_generations} reached"
        if budget.max_time_s is not None and self.elapsed_s >= budget.max_time_s:
            return f"max_time_s={budget.max_time_s} reached"
        stagnation = budget.stagnation_generations
        if stagnation is not None and self.stagnant >= stagnation:
            return f"no improvement in {stagnation} generations"
        return None

    def to_json(self) -> dict[str, Any]:
        """The counters and the elapsed seconds, under the engine state's keys."""
        return {**{k: getattr(self, k) for k in _COUNTERS}, "elapsed_s": self.elapsed_s}

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> LoopState:
        """Inverse of `to_json`; the clock goes on from the saved elapsed seconds."""
        counters = {k: state[k] for k in _COUNTERS}
        return cls(**counters, elapsed_before=state["elapsed_s"])
