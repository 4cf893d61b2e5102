"""Running one evaluation of a CompileIQ-style objective: scores, status, isolation, timeout."""

from __future__ import annotations

import asyncio
import inspect
import logging
import multiprocessing
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ciq_tune.compat.config import INVALID_SCORE
from ciq_tune.compat.results import is_invalid
from ciq_tune.compat.results import score_columns
from ciq_tune.results import OK

logger = logging.getLogger(__name__)

# Seconds to wait for an isolated process to exit after it was killed.
KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class Outcome:
    """One evaluation: its scores (`INVALID_SCORE` where invalid), status and error text."""

    scores: list[Any]
    status: str
    error: str | None = None

    def metrics(self) -> dict[str, Any]:
        """What the Ray Tune trainable reports: `score_N` (NaN when invalid), status, error."""
        values = {
            name: float("nan") if is_invalid(s) else float(s)
            for name, s in zip(score_columns(len(self.scores)), self.scores, strict=True)
        }
        return {**values, "status": self.status, "error": self.error or ""}


def parse_scores(value: Any, num_objectives: int) -> Outcome:
    """An objective's return value → `Outcome` (a wrong count or any invalid score fails)."""
    raw = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(raw) != num_objectives:
        return Outcome(
            [INVALID_SCORE] * num_objectives,
            "invalid_result",
            f"expected {num_objectives} score(s) (num_objectives), got {value!r}",
        )
    scores = [INVALID_SCORE if is_invalid(s) else float(s) for s in raw]
    if any(s == INVALID_SCORE for s in scores):
        return Outcome(scores, "invalid_score", f"the objective returned {value!r}")
    return Outcome(scores, OK)


def call_objective(objective: Callable[[Any], Any], config: Any, num_objectives: int) -> Outcome:
    """Call the objective in this process; an exception becomes an "error" outcome."""
    try:
        value = objective(config)
        if inspect.isawaitable(value):
            value = asyncio.run(_await(value))
    except Exception as exc:  # any failure of user code is an outcome
        logger.warning("the objective raised %r on %r; counted as INVALID_SCORE", exc, config)
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return Outcome([INVALID_SCORE] * num_objectives, "error", error)
    return parse_scores(value, num_objectives)


def call_isolated(
    objective: Callable[[Any], Any],
    config: Any,
    num_objectives: int,
    timeout_s: float | None,
) -> Outcome:
    """Call the objective in a fresh forked process, killed after `timeout_s` seconds."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child, args=(objective, config, num_objectives, sender), daemon=True
    )
    process.start()
    sender.close()
    try:
        if receiver.poll(timeout_s):
            outcome: Outcome = receiver.recv()
            process.join(KILL_GRACE_S)
            return outcome
    except EOFError:
        process.join(KILL_GRACE_S)
        return Outcome(
            [INVALID_SCORE] * num_objectives,
            "crash",
            f"the evaluation process died with exit code {process.exitcode}",
        )
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
            process.join(KILL_GRACE_S)
    return Outcome(
        [INVALID_SCORE] * num_objectives,
        "timeout",
        f"killed after task_timeout={timeout_s} s",
    )


def _child(objective: Callable[[Any], Any], config: Any, num_objectives: int, sender: Any) -> None:
    sender.send(call_objective(objective, config, num_objectives))
    sender.close()


async def _await(value: Any) -> Any:
    return await value
