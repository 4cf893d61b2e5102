"""Noise-aware bookkeeping of a search's best value: confirm before crowning, stop on convergence.

A search's best is the minimum of many noisy rounds, so a candidate that comes within noise of
the best is partly lucky; like Helion's autotuner, such a candidate is re-measured (a few more
rounds, its value becomes their median) before it can become the best. A search has converged
when nothing has beaten the best by more than the noise for `patience` evaluations.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from typing import Literal
from typing import Protocol

# Relative spread of one round's value between rounds (do_bench medians: ~1-2.5 % CV).
NOISE = 0.02
# Extra rounds of a candidate that comes within NOISE of the best; its value is their median.
CONFIRM_ROUNDS = 2
# Evaluations without an improvement beyond NOISE after which a search stops (0: never).
PATIENCE = 0


@dataclass
class NoiseAwareBest:
    """The best value so far, with the rules above.

    Attributes:
        mode: "min" (times) or "max".
        noise: relative noise of one round (`NOISE`).
        patience: evaluations without a beyond-noise improvement before `converged` (0: never).
        best: the best (confirmed) value so far, None before the first.
        since_improvement: evaluations since the best last improved by more than `noise`.
    """

    mode: Literal["min", "max"] = "min"
    noise: float = NOISE
    patience: int = PATIENCE
    best: float | None = None
    since_improvement: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.noise < 1) or self.patience < 0:
            raise ValueError(
                f"`noise` must be in [0, 1) and `patience` >= 0, got noise={self.noise}, "
                f"patience={self.patience}"
            )

    def _better(self, value: float, than: float) -> bool:
        return value < than if self.mode == "min" else value > than

    def near_best(self, value: float) -> bool:
        """Whether `value` (one round) is within noise of the best or better: re-measure it
        before it counts. The first value is confirmed too: it becomes the best at once."""
        if not math.isfinite(value):
            return False
        if self.best is None:
            return True
        margin = (
            self.best * (1 + self.noise) if self.mode == "min" else self.best / (1 + self.noise)
        )
        return not self._better(margin, value)

    def record(self, value: float) -> bool:
        """Count one evaluation's (confirmed) value; True when it beat the best by more than
        the noise (the convergence counter restarts)."""
        if not math.isfinite(value):
            self.since_improvement += 1
            return False
        if self.best is None:
            self.best = value
            return True
        clear = self.best / (1 + self.noise) if self.mode == "min" else self.best * (1 + self.noise)
        improved = self._better(value, clear)
        if self._better(value, self.best):
            self.best = value
        self.since_improvement = 0 if improved else self.since_improvement + 1
        return improved

    @property
    def converged(self) -> bool:
        """`patience` evaluations in a row have not beaten the best by more than the noise."""
        return self.patience > 0 and self.since_improvement >= self.patience


class Incumbent(Protocol):
    """Where a search's trials share their `NoiseAwareBest` (a lock in one process, a Ray
    actor across a cluster)."""

    def near_best(self, value: float) -> bool: ...

    def record(self, value: float) -> bool: ...


class LockedBest:
    """A `NoiseAwareBest` shared by the threads of one process."""

    def __init__(self, best: NoiseAwareBest) -> None:
        self.best = best
        self._lock = threading.Lock()

    def near_best(self, value: float) -> bool:
        with self._lock:
            return self.best.near_best(value)

    def record(self, value: float) -> bool:
        with self._lock:
            return self.best.record(value)


def confirmed(
    trainable: Callable[[dict[str, Any]], dict[str, Any]],
    metric: str,
    incumbent: Incumbent,
    confirm_rounds: int,
    config: dict[str, Any],
) -> dict[str, Any]:
    """`trainable(config)`, re-run `confirm_rounds` more times when its value is within noise
    of the best, and then reported as the median of its rounds (with ``first_round``, the first
    value, and ``search_rounds``); the value is recorded in `incumbent`."""
    result = trainable(config)
    value = result.get(metric)
    if not (
        result.get("status") == "ok" and isinstance(value, int | float) and math.isfinite(value)
    ):
        incumbent.record(math.nan)
        return result
    rounds = [float(value)]
    if confirm_rounds and incumbent.near_best(value):
        for _ in range(confirm_rounds):
            again = trainable(config)
            more = again.get(metric)
            if again.get("status") == "ok" and isinstance(more, int | float):
                rounds.append(float(more))
        result = {**result, metric: statistics.median(rounds), "first_round": float(value)}
    result["search_rounds"] = len(rounds)
    incumbent.record(result[metric])
    return result
