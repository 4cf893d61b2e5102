"""Ctrl+C for in-process tests of interrupted searches: SIGINT to this process at the first
finished trial of a Tune run of this process, or once a condition holds."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from ray import tune


class SigintAtFirstResult(tune.Callback):
    """Sends SIGINT to this process when the first trial of the run(s) it is a callback of
    completes (Tune's loop, on the main thread: as a Ctrl+C at that moment)."""

    def __init__(self) -> None:
        self.sent = False

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        if not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)


def sigint_when(condition: Callable[[], bool], *, timeout_s: float = 600.0) -> threading.Event:
    """Check `condition` from a thread every 0.2 s and send SIGINT to this process once it
    holds; the returned event is set once it was sent. Ray's start and the first evaluation take
    seconds on an idle machine, minutes on a loaded one."""
    sent = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if condition():
                os.kill(os.getpid(), signal.SIGINT)
                sent.set()
                return
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    return sent
