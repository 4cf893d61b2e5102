"""Handing a Ctrl+C to Tune: only to a run that listens, once per run, and at the first step of
a run that started listening after the Ctrl+C."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from searchers import interrupt
from searchers.interrupt import StopRequested
from searchers.interrupt import interrupt_tune_run


@pytest.fixture
def usr1() -> Iterator[list[int]]:
    """SIGUSR1 restored after the test; the list collects the signals a handler saw."""
    previous = signal.getsignal(signal.SIGUSR1)
    seen: list[int] = []
    yield seen
    signal.signal(signal.SIGUSR1, previous)


def _listening_run(seen: list[int]) -> Any:
    """A stand-in for the SIGUSR1 handler that Tune installs while its loop runs."""

    def handler(signum: int, frame: Any) -> None:
        seen.append(signum)

    signal.signal(signal.SIGUSR1, handler)
    return handler


def test_no_listening_run_is_not_signalled(usr1: list[int]) -> None:
    # SIGUSR1's default action ends the process: before Tune's loop nothing may send it.
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    assert interrupt_tune_run() is False


def test_each_run_is_asked_once(usr1: list[int]) -> None:
    _listening_run(usr1)
    assert interrupt_tune_run() and interrupt_tune_run()
    assert usr1 == [signal.SIGUSR1]
    _listening_run(usr1)  # the next Tune run installs its own handler
    assert interrupt_tune_run()
    assert usr1 == [signal.SIGUSR1, signal.SIGUSR1]


def test_a_stop_requested_before_tune_listens_reaches_its_first_step(usr1: list[int]) -> None:
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    requested = {"stop": False}
    callback = StopRequested(lambda: requested["stop"])
    callback.on_step_begin(0, [])
    requested["stop"] = True
    _listening_run(usr1)
    callback.on_step_begin(1, [])
    callback.on_step_begin(2, [])
    assert usr1 == [signal.SIGUSR1]


def test_stop_requested_asks_at_most_every_every_s(
    usr1: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = {"now": 100.0}
    monkeypatch.setattr(interrupt.time, "monotonic", lambda: clock["now"])
    asked: list[float] = []

    def requested() -> bool:
        asked.append(clock["now"])
        return False

    callback = StopRequested(requested, every_s=1.0)
    for now in (100.0, 100.5, 101.0, 101.2, 102.5):
        clock["now"] = now
        callback.on_step_begin(0, [])
    assert asked == [100.0, 101.0, 102.5]
