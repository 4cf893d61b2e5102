"""A Ray Tune callback that prints a search's progress line (`ciq_tune.progress.Progress`)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from ray.tune import Callback

from ciq_tune.progress import Progress
from ciq_tune.results import OK

if TYPE_CHECKING:
    from ray.tune.experiment import Trial


class ProgressCallback(Callback):
    """Counts each finished trial by its reported `status` (an exception: "error") and prints
    `done/budget evaluations, best <metric> …, evals/s, failed: <status> <count>` at most every
    `progress.interval_s`.

    Args:
        progress: the counter and printer (its metric and mode name the best-so-far value).
    """

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def on_trial_complete(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        result = trial.last_result or {}
        status = result.get("status", OK)
        status = status if isinstance(status, str) and status else "invalid_result"
        value = result.get(self.progress.metric)
        number = float(value) if isinstance(value, int | float) else None
        error = result.get("error") if isinstance(result.get("error"), str) else None
        self.progress.update(status, number, error)

    def on_trial_error(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        self.progress.update("error", None, f"trial {trial.trial_id} raised (see its error.txt)")
