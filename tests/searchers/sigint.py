"""Ctrl+C for tests of interrupted searches: SIGINT to this process at the first finished trial
of a Tune run of this process, or once a condition holds; or to a `ciq-tune` command once its
progress line counts an evaluation."""

from __future__ import annotations

import os
import re
import signal
import subprocess
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


def sigint_after_first_evaluation(proc: subprocess.Popen[str], budget: int) -> list[str]:
    """Read the command's stderr until its progress line (printed at the first finished
    evaluation, then every 2 s) shows 1 to budget-1 evaluations, send SIGINT, and return every
    stderr line once the process has ended."""
    lines: list[str] = []
    counted = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            done = re.match(rf"(\d+)/{budget} evaluations", line)
            if done and 0 < int(done.group(1)) < budget:
                counted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # Ray's start and the first compile take seconds on an idle machine, minutes on a loaded one.
    assert counted.wait(timeout=600), "no evaluation finished:\n" + "".join(lines[-20:])
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=300)
    reader.join(timeout=60)
    return lines
