"""Stopping a running Tune search as Ctrl+C does: Tune saves the experiment, the trials in
flight are neither told to the searcher nor counted (`Tuner.restore` re-runs them), and `fit()`
returns the evaluations that finished."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from ray import tune

# The SIGUSR1 handler of the Tune run last asked to stop: each run installs its own, and one
# request per run is enough (Tune logs a warning for each).
_asked: Any = None


def interrupt_tune_run() -> bool:
    """Ask the Tune run of this process to end gracefully (Tune's SIGUSR1 handler, installed
    while `fit()` runs on the main thread); False when no run has installed one yet (Tune's
    setup, before its loop), where a `StopRequested` callback hands the request over later."""
    global _asked
    handler = signal.getsignal(signal.SIGUSR1)
    if not callable(handler):
        return False
    if handler is not _asked:
        _asked = handler
        os.kill(os.getpid(), signal.SIGUSR1)
    return True


class StopRequested(tune.Callback):
    """A Tune callback that ends its run gracefully (`interrupt_tune_run`) at the first step
    where `requested()` is true, asking at most every `every_s` seconds (a remote query)."""

    def __init__(self, requested: Callable[[], bool], *, every_s: float = 0.0) -> None:
        self.requested = requested
        self.every_s = every_s
        self._checked = -float("inf")

    def on_step_begin(self, iteration: int, trials: list[Any], **info: Any) -> None:
        now = time.monotonic()
        if now - self._checked < self.every_s:
            return
        self._checked = now
        if self.requested():
            interrupt_tune_run()
