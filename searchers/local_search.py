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
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.errors import CiqTuneError
from ciq_tune.progress import Progress
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import result_outcome
from ciq_tune.tracking import EvaluationTracker
from ciq_tune.tracking import MlflowWriter
from ciq_tune.tracking import TrackingConfig
from ciq_tune.validation.noise_aware import CONFIRM_ROUNDS
from ciq_tune.validation.noise_aware import LockedBest
from ciq_tune.validation.noise_aware import NoiseAwareBest
from ciq_tune.validation.noise_aware import confirmed
from objectives import STAGED_KINDS
from objectives import benchmark_worker_setup
from objectives import compile_slots
from objectives import make_trainable
from objectives import measurement_is_exact
from objectives import prestart_workers
from objectives._isolate import close_idle
from objectives.gpu_workers import WORKERS_PER_GPU
from objectives.gpu_workers import GpuWorkers
from objectives.matrix import make_matrix_trainable

if TYPE_CHECKING:
    # The engine imports scipy and pymoo (seconds): a local search starts its workers first.
    from ciq_tune.engine import Candidate
    from ciq_tune.engine import Engine
    from searchers.plan import SearchPlan

Trainable = Callable[[dict[str, Any]], dict[str, Any]]
# Result keys the engine's records keep (its `info`), for the evaluations table.
_INFO_KEYS = (
    "compile_s",
    "gpu_s",
    "gpu_wait_s",
    "worker_spawn_s",
    "search_rounds",
    "compiles",
    "shapes_cut",
)


@dataclass
class LocalSearch:
    """A finished local search.

    Attributes:
        results: Every evaluation, as the engine recorded it.
        rows: Each evaluation's result dict (every metric the trainable reported, per-shape
            values of a matrix), by `config_key` of its configuration.
        wall_s: Seconds from the first proposal to the last result.
        workers: Evaluations that ran at a time.
        engine_s: Seconds of `wall_s` the loop's one thread spent asking the engine and
            telling it results (with their records and checkpoints): no evaluation starts
            meanwhile.
    """

    results: SearchResults
    rows: dict[str, dict[str, Any]]
    wall_s: float
    workers: int
    engine_s: float = 0.0


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
    plan: SearchPlan, *, workers: int, shapes: Mapping[str, float] | None = None
) -> Engine:
    """The engine of a local kernel search (`plan`), proposing whenever one of `workers` is
    free. `shapes`: in a matrix search whose shapes each keep their own best, the result key of
    each shape's value and its weight, for a per-shape descent beside the strategy
    (`ciq_tune.engine.shape_descent`; not beside a listing, which proposes every configuration
    anyway)."""
    from ciq_tune.engine import Budget
    from ciq_tune.engine import create_engine
    from ciq_tune.engine.shape_descent import ShapeDescent

    engine = create_engine(
        plan.strategy,
        plan.space,
        [Objective(name=plan.metric, mode=plan.mode)],  # type: ignore[arg-type]
        config={"steady_state": True} if workers > 1 else None,
        budget=Budget(max_evaluations=plan.max_evaluations, max_time_s=plan.time_budget_s),
        seed=plan.seed,
        initial_points=list(plan.points_to_evaluate),
        transfer_from=plan.transfer_from,
    )
    if shapes and engine.name != "exhaustive":
        engine.shape_descent = ShapeDescent(
            keys=list(shapes),
            weights=list(shapes.values()),
            mode="max" if plan.mode == "max" else "min",
        )
    return engine


def search_locally(
    trainable: Trainable,
    engine: Engine,
    *,
    metric: str,
    workers: int,
    on_result: Callable[[Candidate, dict[str, Any]], None] | None = None,
    stop: Callable[[], bool] = lambda: False,
    checkpoint: Path | None = None,
    keep: Sequence[str] = (),
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
        keep: Result keys kept in each evaluation's record (its `info`) beside the usual
            ones, so that a restored engine's `rows` have them (a matrix's per-shape values).

    Returns:
        The search, whose `rows` start with a restored engine's evaluations (their records'
        `info`).
    """
    from ciq_tune.engine.local_run import LocalRun

    rows = {config_key(r.config): dict(r.info) for r in engine.result().records}
    kept = (*_INFO_KEYS, *keep)
    written = time.monotonic()

    def tell(candidate: Candidate, result: dict[str, Any]) -> None:
        nonlocal written
        # When the result arrived and how long it took, as Ray Tune reports them.
        result.setdefault("timestamp", time.time())
        result.setdefault("time_total_s", result.get("wall_s"))
        values, status, error = result_outcome(result, [metric])
        info = {k: result[k] for k in kept if k in result}
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
    return LocalSearch(engine.result(), rows, run.wall_s, workers, run.engine_s)


CHECKPOINT_S = 5.0
"""Seconds between two writes of a local search's state (it grows with its records)."""


def write_state(path: Path, engine: Engine) -> None:
    """The engine's state as JSON at `path`, replaced whole (never a half-written file)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(engine.get_state()))
    os.replace(part, path)


def local_benchmark(kind: str, mode: str) -> Any:
    """The benchmark workers of a local search of `kind` in benchmark `mode`, started (their
    start overlaps the first compiles), or None where each evaluation times in its own worker.

    Raises:
        CiqTuneError: ``per-gpu`` for a kind that compiles and times in one step.
    """
    if mode == "per-gpu" and kind not in STAGED_KINDS:
        raise CiqTuneError(
            f"`--benchmark per-gpu` needs a kind of {STAGED_KINDS} (the others compile and "
            f"time in one step), got kind {kind!r}"
        )
    if kind not in STAGED_KINDS or mode == "in-trial":
        return None
    preload, cpu_env = benchmark_worker_setup(kind)
    workers = GpuWorkers(preload=preload, cpu_env=cpu_env)
    where = (
        f"{WORKERS_PER_GPU} per GPU ({len(workers.gpus)} GPU)"
        if workers.gpus
        else "one on the CPU (interpreted)"
    )
    print(f"benchmark workers: {where}, starting beside the first compiles", flush=True)
    return workers


@dataclass(frozen=True)
class LocalWorkers:
    """The started workers of a local search: its benchmark workers (None where each
    evaluation times in its own worker) and how many candidates it evaluates at a time."""

    benchmark: Any
    slots: int

    def close(self) -> None:
        """Stop the benchmark workers and the idle compile workers."""
        if self.benchmark is not None:
            self.benchmark.close()
        close_idle()


def start_local_workers(kind: str, mode: str, num_cpus: int | None) -> LocalWorkers:
    """Start a local search's workers before anything else (imports take seconds, and overlap
    the engine's start): its benchmark workers (`local_benchmark`) and one compile worker per
    evaluation at a time."""
    benchmark = local_benchmark(kind, mode)
    slots = compile_slots(num_cpus)
    prestart_workers(kind, slots, staged=benchmark is not None)
    return LocalWorkers(benchmark, slots)


def local_trainable(desc: Any, benchmark: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The trainable of a local search: the kind's, timed on `benchmark` when given, with a
    near-best value confirmed before it counts (unless a fresh run reproduces it exactly)."""

    def trainable_of(at: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
        return make_trainable(at, benchmark=benchmark)

    trainable = make_matrix_trainable(desc, make_trainable=trainable_of)
    if measurement_is_exact(desc) or desc.shapes:
        return trainable
    return confirm_near_best(trainable, desc.metric, desc.mode)


def local_callbacks(
    desc: Any,
    metric: str,
    budget: int,
    quiet: bool,
    tracking: str,
    writer: MlflowWriter | None,
    *,
    done_before: int = 0,
) -> Callable[[Any, dict[str, Any]], None]:
    """What a local search does with each result: the progress line (unless `quiet`), counted
    on from `done_before` evaluations (a resumed run's), and the tracking record."""
    progress = Progress(metric, desc.mode, budget=budget, quiet=quiet, done_before=done_before)
    config = TrackingConfig(backend=tracking)  # type: ignore[arg-type]
    tracker = EvaluationTracker(config, writer, desc.name)

    def on_result(candidate: Any, result: dict[str, Any]) -> None:
        values, status, error = result_outcome(result, [metric])
        progress.update(status, None if values is None else values[metric], error or None)
        tracker.record(candidate.id, candidate.config, result, ok=values is not None)

    return on_result
