"""Running one evaluation of a CompileIQ-style objective: scores, status, isolation, timeout."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ciq_tune.compat.config import INVALID_SCORE
from ciq_tune.compat.results import is_invalid
from ciq_tune.compat.results import score_columns
from ciq_tune.results import OK

logger = logging.getLogger(__name__)


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
    """Call the objective in this process's isolated worker (`objectives._isolate`: a spawned
    interpreter, never a fork, so a Ray worker's threads and CUDA state are not copied), killed
    with its whole process group after `timeout_s` seconds."""
    import cloudpickle

    from objectives._isolate import run_isolated

    limit = math.inf if timeout_s is None else timeout_s
    payload = {
        "call": cloudpickle.dumps((call_objective, (objective, config, num_objectives))),
        "sys_path": list(sys.path),
    }
    result = run_isolated(
        "objectives._isolate:call_pickled", payload, compile_timeout_s=limit, run_timeout_s=limit
    )
    failed = [INVALID_SCORE] * num_objectives
    if result["status"] == "ok":
        outcome: Outcome = cloudpickle.loads(result["value"])
        return outcome
    if result["status"] == "timeout":
        return Outcome(failed, "timeout", f"killed after task_timeout={timeout_s} s")
    return Outcome(failed, result["status"], f"the evaluation process failed: {result['error']}")


async def _await(value: Any) -> Any:
    return await value
