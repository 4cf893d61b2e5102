"""Ctrl+C for tests of interrupted searches: SIGINT to this process at the first finished trial
of a Tune run of this process, or once a condition holds; or to a `ciq-tune` command once its
progress line counts an evaluation."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray import tune

ROOT = Path(__file__).parents[2]


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


def interrupted_tune(arguments: list[str], budget: int, folder: Path) -> tuple[int, str, str]:
    """Run ``ciq-tune tune ARGUMENTS`` (a search of `budget` evaluations) in a subprocess and send
    it SIGINT once its progress line (printed at the first finished evaluation, then every 2 s)
    counts 1 to budget-1 evaluations; its exit status, stdout and stderr once it has ended."""
    command = [sys.executable, "-m", "ciq_tune.cli", "tune", *arguments]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    lines: list[str] = []
    counted = threading.Event()
    # stdout to a file: a pipe nobody reads until the end could fill and block the command.
    with open(folder / "stdout.txt", "w") as stdout_file:
        proc = subprocess.Popen(
            command, stdout=stdout_file, stderr=subprocess.PIPE, text=True, env=env
        )

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                lines.append(line)
                done = re.match(rf"(\d+)/{budget} evaluations", line)
                if done and 0 < int(done.group(1)) < budget:
                    counted.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        # Ray's start and the first compile take seconds on an idle machine, minutes on a
        # loaded one.
        assert counted.wait(timeout=600), "no evaluation finished:\n" + "".join(lines[-20:])
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=300)
        reader.join(timeout=60)
    return proc.returncode, (folder / "stdout.txt").read_text(), "".join(lines)
