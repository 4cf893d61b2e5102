"""Ctrl+C during `tune`/`resume`: stop the search gracefully, keep what finished, exit 130."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from ciq_tune.results import SearchResults

EXIT_INTERRUPTED = 130
"""Exit status of a run stopped by SIGINT (Ctrl+C), as shells report it (128 + 2)."""
# Tune's switch for its own SIGINT handler, which stops the run but leaves no trace of it.
_TUNE_SIGINT_SWITCH = "TUNE_DISABLE_SIGINT_HANDLER"


@dataclass
class Interrupt:
    """Whether a Ctrl+C arrived while the search ran."""

    received: bool = False
    in_search: bool = True


@contextlib.contextmanager
def graceful_interrupt(stop: Callable[[], object] | None = None) -> Iterator[Interrupt]:
    """Around a search: the first Ctrl+C is remembered and calls `stop` (for a Tune run in
    this process `searchers.interrupt.interrupt_tune_run`: Tune saves the experiment, so
    `ciq-tune resume` can finish it; the search also polls `Interrupt.received`); a second one
    stops at once (KeyboardInterrupt)."""
    state = Interrupt()
    previous_switch = os.environ.get(_TUNE_SIGINT_SWITCH)
    os.environ[_TUNE_SIGINT_SWITCH] = "1"

    def on_sigint(signum: int, frame: Any) -> None:
        if state.received or not state.in_search:
            raise KeyboardInterrupt
        state.received = True
        print("ciq-tune: interrupted; stopping the search (Ctrl+C again: at once)", flush=True)
        if stop is not None:
            stop()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield state
    finally:
        state.in_search = False
        signal.signal(signal.SIGINT, previous)
        if previous_switch is None:
            os.environ.pop(_TUNE_SIGINT_SWITCH, None)
        else:
            os.environ[_TUNE_SIGINT_SWITCH] = previous_switch


def write_evaluations(out: Path, results: SearchResults) -> None:
    """Every evaluation told to the searcher, failures included (`ciq-tune report` reads them)."""
    results.to_parquet(out / "evaluations.parquet")
    results.to_csv(out / "evaluations.csv")


def report_interrupted(out: Path, results: SearchResults, next_step: str | None = None) -> int:
    """Say what an interrupted run kept (the count is the table's) and what to do next (by
    default `ciq-tune resume`), and return 130."""
    ok = sum(1 for r in results.records if r.ok)
    next_step = next_step or f"finish the search with `ciq-tune resume {out}`"
    return report_kept(len(results.records), ok, str(out / "evaluations.csv"), next_step)


def report_kept(evaluations: int, ok: int, written: str, next_step: str) -> int:
    """The one line of an interrupted run: `interrupted: N evaluations (K ok) written to
    WHERE; NEXT STEP`; returns 130."""
    print(
        f"interrupted: {evaluations} evaluations ({ok} ok) written to {written}; {next_step}",
        flush=True,
    )
    return EXIT_INTERRUPTED
