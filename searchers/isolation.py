"""`isolated_trainable`: run any function trainable in a killable worker with a hard time limit.

Tune can only stop a trial that reports; a trainable that hangs (a kernel that never returns, a
deadlocked library) holds its slot, and the experiment, forever. Wrapped, each call of the
trainable runs in a spawned worker process (`objectives._isolate`: a fresh interpreter, killed
with its whole process group at the limit, recycled after N trials or above an RSS limit), and
every outcome comes back as a result dict: a hang is ``status: timeout``, a crash ``crash``, an
exception ``error``, a value without the metric ``missing_metric``, a metric that is not a
finite number ``invalid_result``. The metric keys are always present (NaN on failure), so
Tune's strict metric check holds too.
"""

from __future__ import annotations

import inspect
import math
import sys
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from objectives._isolate import DEFAULT_MAX_RSS_MB
from objectives._isolate import DEFAULT_MAX_TASKS
from objectives._isolate import run_isolated

Trainable = Callable[[dict[str, Any]], Any]
# Seconds a worker may take to load the trainable (unpickle it, import its modules, Ray among
# them) before the trial's own limit starts.
LOAD_TIMEOUT_S = 120.0


def isolated_trainable(
    trainable: Trainable,
    *,
    trial_timeout_s: float,
    metric: str | Sequence[str] | None = None,
    time_budget_s: float | None = None,
    max_trials_per_worker: int | None = DEFAULT_MAX_TASKS,
    max_worker_rss_mb: float | None = DEFAULT_MAX_RSS_MB,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Wrap a function trainable ``config -> dict of metrics`` with a hard per-trial time limit.

    Args:
        trainable: a function taking the trial's config and returning its metrics (a dict, or
            a number when `metric` names one metric). It runs in another process, so it reports
            by returning, not by calling ``tune.report``.
        trial_timeout_s: seconds a trial's call may run (counted once its worker has loaded
            the trainable, which may take `LOAD_TIMEOUT_S` more); past them the worker and
            everything it started are killed and the trial reports ``status: timeout``.
        metric: the metric(s) the search optimises; present in every result (NaN on failure).
        time_budget_s: the search's wall-clock budget in seconds, counted from this call (give
            the searcher's `time_budget_s`): a trial still running when it ends is cut there,
            so a hung trial cannot hold the experiment past its budget.
        max_trials_per_worker: trials a worker runs before it is replaced (None: no limit).
        max_worker_rss_mb: resident memory (MiB) above which a worker is replaced after its
            trial (None: no limit).

    Returns:
        A function trainable for ``tune.Tuner``.

    Example:
        >>> def objective(config):
        ...     return {"score": config["x"] ** 2}
        >>> trainable = isolated_trainable(objective, trial_timeout_s=60, metric="score")
        >>> trainable({"x": 3})["score"]
        9
    """
    if inspect.isclass(trainable) or not callable(trainable):
        raise TypeError(
            f"`trainable` must be a function taking the config, got {trainable!r} (class "
            "trainables are stopped by Tune itself; wrap their work in a function)"
        )
    for name, value in (("trial_timeout_s", trial_timeout_s), ("time_budget_s", time_budget_s)):
        if value is not None and not (isinstance(value, (int, float)) and 0 < value < math.inf):
            raise ValueError(f"`{name}` must be a finite number of seconds > 0, got {value!r}")
    metrics = [metric] if isinstance(metric, str) else list(metric or [])
    deadline = None if time_budget_s is None else time.time() + time_budget_s

    def run(config: dict[str, Any]) -> dict[str, Any]:
        return _run_trial(
            trainable,
            config,
            metrics,
            trial_timeout_s=trial_timeout_s,
            deadline=deadline,
            max_tasks=max_trials_per_worker,
            max_rss_mb=max_worker_rss_mb,
        )

    run.__name__ = getattr(trainable, "__name__", "trainable")
    run.__qualname__ = run.__name__
    run.__doc__ = getattr(trainable, "__doc__", None)
    return run


def _run_trial(
    trainable: Trainable,
    config: dict[str, Any],
    metrics: list[str],
    *,
    trial_timeout_s: float,
    deadline: float | None,
    max_tasks: int | None,
    max_rss_mb: float | None,
) -> dict[str, Any]:
    import cloudpickle

    limit, cause = trial_timeout_s, f"trial_timeout_s={trial_timeout_s:g}"
    load_limit, load_cause = LOAD_TIMEOUT_S, f"over {LOAD_TIMEOUT_S:g} s"
    if deadline is not None:
        left = deadline - time.time()
        if left <= 0:
            return _failure(metrics, "timeout", "the search's time budget ran out before it ran")
        if left < limit:
            limit, cause = left, "the search's time budget"
        if left < load_limit:
            load_limit, load_cause = left, "the search's time budget"
    payload = {"call": cloudpickle.dumps((trainable, (config,))), "sys_path": list(sys.path)}
    outcome = run_isolated(
        "objectives._isolate:call_pickled",
        payload,
        compile_timeout_s=load_limit,
        run_timeout_s=limit,
        max_tasks=max_tasks,
        max_rss_mb=max_rss_mb,
    )
    status = outcome["status"]
    if status == "timeout":
        if str(outcome.get("error", "")).startswith("compile"):
            return _failure(metrics, "timeout", f"killed loading the trainable ({load_cause})")
        return _failure(metrics, "timeout", f"killed after {limit:.3g} s ({cause})")
    if status != "ok":
        return _failure(metrics, status, str(outcome.get("error", "")))
    return _as_result(cloudpickle.loads(outcome["value"]), metrics)


def _as_result(value: Any, metrics: list[str]) -> dict[str, Any]:
    """The trainable's return value as a Tune result carrying every metric."""
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        result = dict(value)
    elif len(metrics) == 1 and _is_number(value):
        result = {metrics[0]: value}
    elif value is None:
        return _failure(metrics, "missing_metric", "the trainable returned None")
    else:
        return _failure(
            metrics, "invalid_result", f"the trainable returned {_short(value)}, not a dict"
        )
    status = result.get("status", "ok")
    if not isinstance(status, str) or not status:
        return _failure(metrics, "invalid_result", f"`status` is {_short(status)}")
    if status != "ok":
        return {**result, **{m: math.nan for m in metrics if not _is_number(result.get(m))}}
    missing = [m for m in metrics if m not in result]
    if missing:
        return {
            **result,
            **_failure(metrics, "missing_metric", f"the result has no {missing}"),
        }
    wrong = {m: result[m] for m in metrics if not _is_finite(result[m])}
    if wrong:
        problem = ", ".join(f"{m}={_short(v)}" for m, v in wrong.items())
        return {
            **result,
            **_failure(metrics, "invalid_result", f"not finite numbers: {problem}"),
        }
    return result


def _failure(metrics: list[str], status: str, error: str) -> dict[str, Any]:
    return {**{m: math.nan for m in metrics}, "status": status, "error": error}


def _is_number(value: Any) -> bool:
    import numpy as np

    # bool is an int to Python, and "0.5" converts with float(): neither is a measured value.
    return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))


def _is_finite(value: Any) -> bool:
    return _is_number(value) and math.isfinite(float(value))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
