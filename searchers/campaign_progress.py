"""A running campaign's progress: the board that collects each search's finished trials and
answers whether the campaign is stopping (`ProgressBoard`, a Ray actor), the Tune callback that
reports to it (`TrialProgress`), and the stop poll that never blocks a Tune loop
(`StoppingPoll`)."""

from __future__ import annotations

import math
import time
from typing import Any

import ray
from ray import tune


class TrialProgress(tune.Callback):
    """Tells the campaign's progress actor about each finished trial of one search."""

    def __init__(self, progress: Any, name: str, metric: str) -> None:
        self._progress = progress
        self._name = name
        self._metric = metric

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        result = trial.last_result or {}
        self._progress.update.remote(self._name, result.get("status"), result.get(self._metric))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._progress.update.remote(self._name, "crash", None)


class StoppingPoll:
    """Whether the campaign is being stopped (`ProgressBoard.stopping`), without blocking the
    Tune loop that asks: each call takes the answer to the previous query if it has arrived
    (False until then) and sends the next. A blocking query can wait for the board under load
    (68 s measured), Tune's loop with it, so a search's time limit stops nothing and the
    campaign cancels the search, whose trials' placement groups then hold every CPU
    (docs/benchmarks.md, "Reliability and the test suite")."""

    def __init__(self, progress: Any) -> None:
        self._progress = progress
        self._asked: Any = None

    def __call__(self) -> bool:
        if self._asked is not None:
            ready, _ = ray.wait([self._asked], timeout=0)
            if not ready:
                return False
            answer, self._asked = bool(ray.get(self._asked)), None
            if answer:
                return True
        self._asked = self._progress.stopping.remote()
        return False


class ProgressBoard:
    """Evaluations done, failures and best value so far per search, and whether the campaign
    is being stopped (a Ray actor)."""

    def __init__(self, modes: dict[str, str]) -> None:
        self._modes = modes
        self._rows: dict[str, dict[str, Any]] = {
            name: {"done": 0, "failed": 0, "best": None} for name in modes
        }
        self._first: float | None = None
        self._last: float | None = None
        self._stopping = False

    def stop(self) -> None:
        """Ask every search to stop (each one's `StopRequested` callback polls `stopping`)."""
        self._stopping = True

    def stopping(self) -> bool:
        return self._stopping

    def update(self, name: str, status: str | None, value: float | None) -> None:
        now = time.time()
        self._first = now if self._first is None else self._first
        self._last = now
        row = self._rows[name]
        row["done"] += 1
        if status != "ok" or not isinstance(value, int | float) or not math.isfinite(value):
            row["failed"] += 1
            return
        sign = 1 if self._modes[name] == "min" else -1
        if row["best"] is None or sign * value < sign * row["best"]:
            row["best"] = value

    def snapshot(self) -> dict[str, dict[str, Any]]:
        return {name: dict(row) for name, row in self._rows.items()}

    def rate_after_first(self) -> float | None:
        """Evaluations per second from the campaign's first finished evaluation to its last
        (the steady rate, without starting Ray workers, servers and drivers); None before two
        evaluations a second apart."""
        done = sum(row["done"] for row in self._rows.values())
        if self._first is None or self._last is None or self._last - self._first < 1:
            return None
        return (done - 1) / (self._last - self._first)

    def result_window(self) -> tuple[float | None, float | None]:
        """`time.time` of the campaign's first and last finished evaluation (None before one)."""
        return self._first, self._last
