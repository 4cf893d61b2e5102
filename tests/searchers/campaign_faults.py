"""Objectives that misbehave, for the campaign tests (`SearchSpec.objective`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any


def hanging(description: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A kernel that never returns, outside any isolated worker: only the campaign's search
    time limit ends it."""

    def trainable(config: dict[str, Any]) -> dict[str, Any]:
        time.sleep(3600)
        return {"status": "ok"}

    return trainable


def crashing(description: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A kernel that kills the trial's process on every evaluation."""

    def trainable(config: dict[str, Any]) -> dict[str, Any]:
        os._exit(1)

    return trainable


def broken(description: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An objective that cannot even be built: the search itself crashes."""
    raise RuntimeError("this objective cannot be built")
