"""Shared fixtures and drivers for engine tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ciq_tune.space as ss
from ciq_tune.engine import Engine

TOY_SPACE = {
    "x": ss.range(1.0, 20.0, 0.5),
    "y": ss.choice([1, 2, 3]),
    "z": ss.literal("flag", knockout_prob=0.5),
}


def toy(config: dict[str, Any]) -> float:
    return config["x"] ** 2 + config["y"]


def drive(
    engine: Engine, objective: Callable[[Any], Any], *, workers: int = 1, limit: int = 100_000
) -> list[str]:
    """Run the engine to the end with `workers` evaluations in flight; returns proposed keys."""
    pending = []
    keys = []
    for _ in range(limit):
        if engine.finished:
            return keys
        candidate = engine.ask()
        if candidate is not None:
            pending.append(candidate)
            keys.append(candidate.key)
        if pending and (candidate is None or len(pending) >= workers):
            done = pending.pop(0)
            result = objective(done.config)
            if isinstance(result, tuple):
                engine.tell(done.id, result[0], status=result[1])
            else:
                engine.tell(done.id, result)
    raise AssertionError("the engine did not finish")


def first_generation(engine: Engine) -> list[Any]:
    """Everything the engine asks before it waits for results: its first generation."""
    first = []
    while (candidate := engine.ask()) is not None:
        first.append(candidate)
    return first
