"""A kernel search on this machine without Ray: the engine's ask/tell loop over local workers.

Ray Tune's trials cost a Ray start (seconds), a trial actor per slot and a round trip through
Tune's event loop per evaluation; on one machine none of that is needed. Here every CPU but one
compiles: each of `workers` threads evaluates a candidate with the kind's trainable, which
compiles in that thread's warm isolated worker (`objectives._isolate`) and, for a staged kind,
sends the compiled candidate to a GPU's benchmark worker (`objectives.gpu_workers.GpuWorkers`,
started at once so that its start overlaps the first compiles). The engine proposes whenever a
thread is free (steady state), so compiles run ahead of the GPU, which times back to back.

The results are those of a Ray Tune search of the same description (`searchers.kernel_search`):
the engine's records, and each evaluation's result dict, so the CLI writes the same outputs from
either.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ciq_tune.engine import Budget
from ciq_tune.engine import Candidate
from ciq_tune.engine import Engine
from ciq_tune.engine import create_engine
from ciq_tune.engine.local_run import LocalRun
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import result_outcome
from ciq_tune.space import SearchSpace
from ciq_tune.validation.noise_aware import CONFIRM_ROUNDS
from ciq_tune.validation.noise_aware import LockedBest
from ciq_tune.validation.noise_aware import NoiseAwareBest
from ciq_tune.validation.noise_aware import confirmed

Trainable = Callable[[dict[str, Any]], dict[str, Any]]
# Result keys the engine's records keep (its `info`), for the evaluations table.
_INFO_KEYS = ("compile_s", "gpu_s", "gpu_wait_s", "worker_spawn_s", "search_rounds", "compiles")


@dataclass
class LocalSearch:
    """A finished local search.

    Attributes:
        results: Every evaluation, as the engine recorded it.
        rows: Each evaluation's result dict (every metric the trainable reported, per-shape
            values of a matrix), by `config_key` of its configuration.
        wall_s: Seconds from the first proposal to the last result.
        workers: Evaluations that ran at a time.
    """

    results: SearchResults
    rows: dict[str, dict[str, Any]]
    wall_s: float
    workers: int


def config_key(config: Any) -> str:
    """The identity of a configuration in `LocalSearch.rows`."""
    return json.dumps(config, sort_keys=True)


def confirm_near_best(trainable: Trainable, metric: str, mode: str) -> Trainable:
    """`trainable` with a near-best value re-measured before it counts
    (`ciq_tune.validation.noise_aware.confirmed`), the best shared by this process's threads."""
    incumbent = LockedBest(NoiseAwareBest(mode=mode))  # type: ignore[arg-type]

    def wrapped(config: dict[str, Any]) -> dict[str, Any]:
        return confirmed(trainable, metric, incumbent, CONFIRM_ROUNDS, config)

    return wrapped


def kernel_engine(
    *,
    space: SearchSpace,
    metric: str,
    mode: str,
    budget: int,
    seed: int,
    points_to_evaluate: Sequence[Mapping[str, Any]],
    workers: int,
    strategy: str = "auto",
    transfer_from: SearchResults | None = None,
) -> Engine:
    """The engine of a local kernel search: `budget` evaluations of `strategy`
    (`ciq_tune.engine.create_engine`), `points_to_evaluate` first, proposing whenever one of
    `workers` is free."""
    return create_engine(
        strategy,
        space,
        [Objective(name=metric, mode=mode)],  # type: ignore[arg-type]
        config={"steady_state": True} if workers > 1 else None,
        budget=Budget(max_evaluations=budget),
        seed=seed,
        initial_points=list(points_to_evaluate),
        transfer_from=transfer_from,
    )


def search_locally(
    trainable: Trainable,
    engine: Engine,
    *,
    metric: str,
    workers: int,
    on_result: Callable[[Candidate, dict[str, Any]], None] | None = None,
    stop: Callable[[], bool] = lambda: False,
    checkpoint: Path | None = None,
) -> LocalSearch:
    """Run a kernel search on this machine: the `engine`'s candidates (`kernel_engine`, or one
    restored from its state) evaluated by `trainable`, `workers` at a time, to the end of its
    budget.

    Args:
        trainable: ``trainable(config) -> result`` (`objectives.make_trainable`, whose
            evaluations isolate themselves); called from `workers` threads.
        engine: Proposes the candidates; its budget ends the search.
        metric: The result key searched.
        workers: Evaluations at a time (`objectives.compile_slots`).
        on_result: Called with each candidate and its result dict once the engine knows it.
        stop: Asked after each result; True ends the search (those running are waited for
            and recorded).
        checkpoint: A JSON file the engine's state is written to (`Engine.get_state`) every
            `CHECKPOINT_S` seconds and at the end, from which `ciq-tune resume` continues.
    """
    rows: dict[str, dict[str, Any]] = {}
    written = time.monotonic()

    def tell(candidate: Candidate, result: dict[str, Any]) -> None:
        nonlocal written
        # When the result arrived and how long it took, as Ray Tune reports them.
        result.setdefault("timestamp", time.time())
        result.setdefault("time_total_s", result.get("wall_s"))
        values, status, error = result_outcome(result, [metric])
        info = {k: result[k] for k in _INFO_KEYS if k in result}
        if error:
            info["error"] = error
        engine.tell(candidate.id, values, status=status, info=info)
        rows[config_key(candidate.config)] = result
        if on_result is not None:
            on_result(candidate, result)
        if checkpoint is not None and time.monotonic() - written >= CHECKPOINT_S:
            write_state(checkpoint, engine)
            written = time.monotonic()

    run: LocalRun[dict[str, Any]] = LocalRun(
        engine,
        trainable,
        workers=workers,
        isolated=True,
        tell=tell,
        crash=lambda why: {"status": "crash", "error": why},
        stop=stop,
    )
    try:
        run.run()
    finally:
        if checkpoint is not None:
            write_state(checkpoint, engine)
    return LocalSearch(engine.result(), rows, run.wall_s, workers)


CHECKPOINT_S = 5.0
"""Seconds between two writes of a local search's state (it grows with its records)."""


def write_state(path: Path, engine: Engine) -> None:
    """The engine's state as JSON at `path`, replaced whole (never a half-written file)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(engine.get_state()))
    os.replace(part, path)
