"""`Search`: CompileIQ's documented search API running on Ray Tune with `CompileIQSearcher`."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

import numpy as np
import pandas as pd

from ciq_tune.compat.config import BASELINE_DNA
from ciq_tune.compat.config import INVALID_SCORE
from ciq_tune.compat.config import SearchConfiguration
from ciq_tune.compat.config import WorkerTypes
from ciq_tune.compat.evaluate import Outcome
from ciq_tune.compat.evaluate import call_isolated
from ciq_tune.compat.evaluate import call_objective
from ciq_tune.compat.results import NORM_PREFIX
from ciq_tune.compat.results import SearchResult
from ciq_tune.compat.results import is_invalid
from ciq_tune.compat.results import score_columns
from ciq_tune.engine import Budget
from ciq_tune.engine import Candidate
from ciq_tune.engine import Engine
from ciq_tune.engine import create_engine
from ciq_tune.errors import EngineError
from ciq_tune.errors import ObjectiveError
from ciq_tune.errors import SpaceError
from ciq_tune.results import OK
from ciq_tune.results import Objective
from ciq_tune.space import SearchSpace
from ciq_tune.strict_io import FileKind
from ciq_tune.strict_io import load_data
from ciq_tune.strict_io import load_json
from ciq_tune.tracking import TrackingConfig

if TYPE_CHECKING:
    from ciq_tune.results import EvaluationRecord

logger = logging.getLogger(__name__)

# Task options of CompileIQ's Ray worker that become a trial's Ray Tune resources.
RESOURCE_OPTIONS = ("num_cpus", "num_gpus", "resources")


class Search:
    """A CompileIQ-style search: `Search(objective, space, config).start()` → `SearchResult`.

    Evaluations run as Ray Tune function trials proposed by `CompileIQSearcher`. A crashed,
    timed-out or invalid evaluation is recorded with `INVALID_SCORE` and the search goes on.

    Args:
        objective_function: takes a configuration dict, returns a score, a list/tuple of
            `num_objectives` scores, or `INVALID_SCORE`; may be `async def`.
        search_space: a dict of `ciq_tune.space` primitives, a `SearchSpace`, or the path of a
            JSON file written from `SearchSpace.to_dict()`.
        search_config: a `SearchConfiguration`, a dict of its fields, or a JSON/YAML file.
        worker_type: a `WorkerTypes` member or its name (see `WorkerTypes`).
        tracker_config: a `ciq_tune.tracking.TrackingConfig` (MLflow or log lines); default
            no tracking.
        cache_folder: where Ray Tune writes the experiment (default: a temporary folder,
            removed at the end).
        dump_results: write the results table as CSV there at the end.
        disable_progress_bar: no Ray Tune progress output.
        exit_on_failure: stop with `ObjectiveError` when every evaluation of the first pool
            fails (a broken objective); a failed baseline (`normalize=True`) always stops.
        objective_modes: one direction ("min"/"max") per objective, overriding
            `problem_type` (extension).
        seed: makes the proposals reproducible (extension; default unseeded).
        max_evaluations: stop after this many evaluations, whichever of this and
            `generations` comes first (extension).
        time_budget_s: stop proposing after this many seconds (extension).
        points_to_evaluate: configurations evaluated first, e.g. known good ones (extension).
        strategy: engine strategy ("auto", "ga", "nsga2", "nsga3", "random", "screened").
        address: Ray cluster address for `WorkerTypes.RAY` (default: `RAY_ADDRESS` or local).
        name: the Ray Tune experiment name.
    """

    def __init__(
        self,
        objective_function: Callable[[Any], Any],
        search_space: Mapping[str, Any] | SearchSpace | str | Path,
        search_config: SearchConfiguration | Mapping[str, Any] | str | Path,
        worker_type: WorkerTypes | str = WorkerTypes.NATIVE,
        tracker_config: TrackingConfig | None = None,
        cache_folder: str | Path | None = None,
        dump_results: str | Path | None = None,
        disable_progress_bar: bool = False,
        exit_on_failure: bool = True,
        *,
        objective_modes: Sequence[str] | None = None,
        seed: int | None = None,
        max_evaluations: int | None = None,
        time_budget_s: float | None = None,
        points_to_evaluate: Sequence[Mapping[str, Any]] = (),
        strategy: str = "auto",
        address: str | None = None,
        name: str = "ciq-search",
    ) -> None:
        if not callable(objective_function):
            raise EngineError(
                f"`objective_function` must be callable, got {type(objective_function).__name__}"
            )
        self.objective_function = objective_function
        self.search_space = _as_space(search_space)
        self.search_config = _as_config(search_config)
        self.worker_type = _as_worker_type(worker_type)
        self.tracker_config = tracker_config or TrackingConfig(backend="none")
        self.cache_folder = Path(cache_folder) if cache_folder is not None else None
        self.dump_results = Path(dump_results) if dump_results is not None else None
        self.disable_progress_bar = disable_progress_bar
        self.exit_on_failure = exit_on_failure
        n = self.search_config.num_objectives
        modes = list(objective_modes or [self.search_config.problem_type] * n)
        if len(modes) != n or any(m not in ("min", "max") for m in modes):
            raise EngineError(
                f"`objective_modes` needs one of 'min'/'max' per objective (num_objectives={n}), "
                f"got objective_modes={objective_modes!r}"
            )
        self.objective_modes = modes
        self.seed = seed
        self.max_evaluations = max_evaluations
        self.time_budget_s = time_budget_s
        self.points_to_evaluate = [dict(p) for p in points_to_evaluate]
        self.strategy = strategy
        self.address = address
        self.name = name

    @classmethod
    def single_objective(cls, **kwargs: Any) -> Search:
        """A search whose objective returns one score (CompileIQ's older constructor)."""
        return cls._with_objectives(1, kwargs)

    @classmethod
    def multi_objective(cls, num_objectives: int, **kwargs: Any) -> Search:
        """A search whose objective returns `num_objectives` scores (older constructor)."""
        return cls._with_objectives(num_objectives, kwargs)

    def sample(self, n: int, seed: int | None = None) -> list[Any]:
        """`n` distinct configurations as the objective would receive them (none evaluated)."""
        return self.search_space.sample(n, seed=self.seed if seed is None else seed)

    def start(
        self, num_workers: int | None = None, task_timeout: float | None = None, **options: Any
    ) -> SearchResult:
        """Run the search and return every evaluation.

        NATIVE, ASYNC and ISOLATED evaluate on local processes (no Ray); RAY runs Ray Tune
        trials on the cluster (see `WorkerTypes`).

        Args:
            num_workers: evaluations run at once (default: this machine's CPUs; with RAY, as
                many as the cluster's resources allow).
            task_timeout: seconds after which an evaluation is killed and counted as
                `INVALID_SCORE`; given, every evaluation runs in its own process.
            options: `num_cpus`, `num_gpus`, `resources` of one evaluation with RAY (others
                ignored, as CompileIQ's Ray worker does).
        """
        for value, what in ((num_workers, "num_workers"), (task_timeout, "task_timeout")):
            if value is not None and not value > 0:
                raise EngineError(f"`{what}` must be positive, got {what}={value}")
        config = self.search_config
        isolated = self.worker_type is WorkerTypes.ISOLATED or task_timeout is not None
        evaluate = _Evaluator(
            self.objective_function, config.num_objectives, isolated, task_timeout
        )
        baseline = self._baseline(evaluate) if config.normalize else None
        details: dict[str, Mapping[str, Any]]
        if self.worker_type is WorkerTypes.RAY:
            records, details, failed = self._start_on_ray(evaluate, num_workers, options)
        else:
            if options:
                logger.warning(
                    "start() ignores %s: task resources apply to WorkerTypes.RAY only",
                    sorted(options),
                )
            records, failed = self._start_local(evaluate, num_workers or os.cpu_count() or 1)
            details = {}
        result = self._result(records, details, baseline)
        if self.dump_results is not None:
            result.save(self.dump_results)
        if failed is not None:
            raise ObjectiveError(
                f"the first {config.pool_size} evaluations (pool_size) all failed, e.g. "
                f"{failed!r}; fix the objective or pass exit_on_failure=False"
            )
        return result

    def _engine(self) -> Engine:
        """The engine `CompileIQSearcher` would build from this search's settings."""
        config = self.search_config
        names = score_columns(config.num_objectives)
        weights = config.weights or [1.0] * len(names)
        objectives = [
            Objective(name=n, mode=m, weight=w)  # type: ignore[arg-type]
            for n, m, w in zip(names, self.objective_modes, weights, strict=True)
        ]
        return create_engine(
            self.strategy,
            self.search_space,
            objectives,
            config=config.engine_settings(),
            budget=Budget(
                max_generations=config.generations,
                max_evaluations=self.max_evaluations,
                max_time_s=self.time_budget_s,
            ),
            seed=self.seed,
            initial_points=[*self.points_to_evaluate, *self._true_random_points()],
        )

    def _start_local(
        self, evaluate: _Evaluator, workers: int
    ) -> tuple[list[EvaluationRecord], str | None]:
        """Evaluate on `workers` local processes; (records, first error if the first pool
        all failed and exit_on_failure)."""
        from ciq_tune.compat.local import local_run
        from ciq_tune.progress import Progress

        engine = self._engine()
        pool = self.search_config.pool_size
        first_pool: list[Outcome] = []
        progress = Progress(
            score_columns(1)[0],
            self.objective_modes[0],
            budget=self.search_config.generations * pool,
            quiet=self.disable_progress_bar,
        )
        tracker = _LocalTracker(self.tracker_config, self.cache_folder, self.name)

        def on_result(candidate: Candidate, outcome: Outcome) -> None:
            if len(first_pool) < pool:
                first_pool.append(outcome)
            score = outcome.scores[0] if outcome.status == OK else None
            progress.update(outcome.status, score, outcome.error)
            tracker.record(candidate, outcome)

        def first_pool_failed() -> bool:
            return (
                self.exit_on_failure
                and len(first_pool) == pool
                and all(o.status != OK for o in first_pool)
            )

        run = local_run(
            engine,
            evaluate.outcome,
            workers=workers,
            isolated=evaluate.isolated,
            on_result=on_result,
            stop=first_pool_failed,
        )
        try:
            run.run()
        finally:
            tracker.close()
        if not self.disable_progress_bar:
            print(progress.line() + f" in {run.wall_s:.1f} s", file=sys.stderr, flush=True)
            if progress.failure_summary():
                print(progress.failure_summary(), file=sys.stderr, flush=True)
        failed = None
        if first_pool_failed():
            failed = next((f"{o.status}: {o.error}" for o in first_pool), None)
        return list(engine.result().records), failed

    def _start_on_ray(
        self, evaluate: _Evaluator, num_workers: int | None, options: Mapping[str, Any]
    ) -> tuple[list[EvaluationRecord], dict[str, Mapping[str, Any]], str | None]:
        """Ray Tune trials proposed by `CompileIQSearcher` (WorkerTypes.RAY)."""
        import ray
        from ray import tune

        from searchers.compileiq_searcher import CompileIQSearcher
        from searchers.stoppers import FirstPoolFailed
        from searchers.tracking import tracking_callbacks

        config = self.search_config
        names = score_columns(config.num_objectives)
        searcher = CompileIQSearcher(
            space=self.search_space,
            metric=names[0] if len(names) == 1 else names,
            mode=self.objective_modes[0] if len(names) == 1 else self.objective_modes,
            strategy=self.strategy,
            generations=config.generations,
            max_evaluations=self.max_evaluations,
            time_budget_s=self.time_budget_s,
            engine_config=config.engine_settings(),
            points_to_evaluate=[*self.points_to_evaluate, *self._true_random_points()],
            weights=config.weights,
            seed=self.seed,
        )
        started = not ray.is_initialized()
        if started:
            ray.init(address=self.address, include_dashboard=False)
        storage = self.cache_folder or Path(tempfile.mkdtemp(prefix="ciq-search-"))
        stopper = FirstPoolFailed(config.pool_size, enabled=self.exit_on_failure)
        resources = _resources(options)
        trainable = tune.with_resources(evaluate, resources) if resources else evaluate
        try:
            grid = tune.Tuner(
                trainable,
                tune_config=tune.TuneConfig(
                    search_alg=searcher,
                    num_samples=-1,
                    max_concurrent_trials=num_workers
                    or max(int(ray.cluster_resources().get("CPU", 1)), 1),
                    # One Ray worker per slot, not per evaluation: starting one costs ~2 s of
                    # CPU, more than a typical objective call (docs/benchmarks.md,
                    # "Reliability and the test suite").
                    reuse_actors=True,
                ),
                run_config=tune.RunConfig(
                    name=self.name,
                    storage_path=str(Path(storage).resolve()),
                    stop=stopper,
                    verbose=0 if self.disable_progress_bar else 1,
                    callbacks=tracking_callbacks(
                        self.tracker_config, run_dir=storage, search_name=self.name
                    ),
                ),
            ).fit()
            trials = [grid[i].metrics or {} for i in range(len(grid))]
            details: dict[str, Mapping[str, Any]] = {str(m.get("trial_id")): m for m in trials}
        finally:
            if started:
                ray.shutdown()
            if self.cache_folder is None:
                shutil.rmtree(storage, ignore_errors=True)
        failed = stopper.first_error if stopper.tripped else None
        return list(searcher.results().records), details, failed

    # -- internals -----------------------------------------------------------------------------
    @classmethod
    def _with_objectives(cls, n: int, kwargs: dict[str, Any]) -> Search:
        config = _as_config(kwargs.pop("search_config"))
        kwargs["search_config"] = config.model_copy(update={"num_objectives": n})
        return cls(**kwargs)

    def _baseline(self, evaluate: _Evaluator) -> list[float]:
        outcome = evaluate.outcome(BASELINE_DNA)
        if outcome.status != OK:
            raise ObjectiveError(
                f"the baseline run (BASELINE_DNA, normalize=True) failed: {outcome.status} "
                f"{outcome.error or ''}".strip()
            )
        return [float(s) for s in outcome.scores]

    def _true_random_points(self) -> list[Any]:
        count = round(
            self.search_config.init_with_true_random_threshold * self.search_config.pool_size
        )
        if count == 0:
            return []
        rng = np.random.default_rng(self.seed)
        space = self.search_space
        return [space.decode(space.sample_genes(rng)) for _ in range(count)]

    def _result(
        self,
        records: Sequence[EvaluationRecord],
        details: Mapping[str, Mapping[str, Any]],
        baseline: list[float] | None,
    ) -> SearchResult:
        names = score_columns(self.search_config.num_objectives)
        rows = []
        for record in sorted(records, key=lambda r: r.candidate_id):
            trial_id = record.info.get("trial_id")
            metrics = details.get(str(trial_id), {})
            values = record.values
            scores: list[Any] = [values[n] if values else INVALID_SCORE for n in names]
            row: dict[str, Any] = {
                "metadata": json.dumps(
                    {
                        "trial_id": trial_id,
                        "candidate_id": record.candidate_id,
                        "origin": record.origin,
                        "status": record.status,
                        "error": metrics.get("error") or record.info.get("error") or None,
                    }
                ),
                "generation": record.generation,
                "params": record.config,
            }
            row.update(dict(zip(names, scores, strict=True)))
            if baseline is not None:
                for i, (score, base) in enumerate(zip(scores, baseline, strict=True), start=1):
                    valid = not is_invalid(score) and base != 0
                    row[f"{NORM_PREFIX}{i}"] = float(score) / base if valid else INVALID_SCORE
            rows.append(row)
        norms = [f"{NORM_PREFIX}{i}" for i in range(1, len(names) + 1)] if baseline else []
        frame = pd.DataFrame(rows, columns=["metadata", "generation", "params", *names, *norms])
        return SearchResult(frame, self.objective_modes, self.search_config.weights)


class _LocalTracker:
    """MLflow runs (through the background writer) or log lines for a local search."""

    def __init__(self, config: TrackingConfig, folder: Path | None, name: str) -> None:
        from ciq_tune.tracking import EvaluationTracker
        from ciq_tune.tracking import mlflow_writer

        self.writer = mlflow_writer(config, run_dir=folder or Path.cwd(), search_name=name)
        if self.writer is not None:
            self.writer.start()
        self.tracker = EvaluationTracker(config, self.writer, name)

    def record(self, candidate: Candidate, outcome: Outcome) -> None:
        self.tracker.record(
            candidate.id, candidate.config, outcome.metrics(), ok=outcome.status == OK
        )

    def close(self) -> None:
        from ciq_tune.tracking import TrackingUnavailable

        if self.writer is not None:
            try:
                self.writer.close()
            except TrackingUnavailable as exc:
                logger.warning("tracking is off for this search: %s", exc)


class _Evaluator:
    """The Ray Tune function trainable: evaluates one configuration, returns its metrics."""

    def __init__(
        self,
        objective: Callable[[Any], Any],
        num_objectives: int,
        isolated: bool,
        timeout_s: float | None,
    ) -> None:
        self.objective = objective
        self.num_objectives = num_objectives
        self.isolated = isolated
        self.timeout_s = timeout_s
        self.__name__ = getattr(objective, "__name__", "objective")

    def outcome(self, config: Any) -> Outcome:
        if self.isolated:
            return call_isolated(self.objective, config, self.num_objectives, self.timeout_s)
        return call_objective(self.objective, config, self.num_objectives)

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        return self.outcome(config).metrics()


def _resources(options: Mapping[str, Any]) -> dict[str, float]:
    ignored = sorted(set(options) - set(RESOURCE_OPTIONS))
    if ignored:
        logger.warning("start() ignores options %s (not task resources)", ignored)
    resources: dict[str, float] = {}
    if options.get("num_cpus") is not None:
        resources["cpu"] = options["num_cpus"]
    if options.get("num_gpus") is not None:
        resources["gpu"] = options["num_gpus"]
    resources.update(options.get("resources") or {})
    return resources


def _as_space(space: Mapping[str, Any] | SearchSpace | str | Path) -> SearchSpace:
    if isinstance(space, SearchSpace):
        return space
    if isinstance(space, (str, Path)):
        data = load_json(space, FileKind("saved search space", error=SpaceError))
        return SearchSpace.from_dict(data, source=space)
    if isinstance(space, Mapping):
        return SearchSpace(dict(space))
    raise SpaceError(
        f"`search_space` must be a dict of ciq_tune.space primitives, a SearchSpace or a JSON "
        f"file path, got {type(space).__name__} (compiler search-space providers and lists of "
        "spaces are not supported; use ciq_tune.controls catalogs)"
    )


def _as_config(config: SearchConfiguration | Mapping[str, Any] | str | Path) -> SearchConfiguration:
    if isinstance(config, SearchConfiguration):
        return config
    if isinstance(config, (str, Path)):
        config = load_data(config, FileKind("search configuration", error=EngineError))
    if not isinstance(config, Mapping):
        raise EngineError(
            f"`search_config` must be a SearchConfiguration, a dict or a JSON/YAML file, got "
            f"{type(config).__name__}"
        )
    return SearchConfiguration(**config)


def _as_worker_type(worker_type: WorkerTypes | str) -> WorkerTypes:
    if isinstance(worker_type, WorkerTypes):
        return worker_type
    if isinstance(worker_type, str) and worker_type.lower() in {w.value for w in WorkerTypes}:
        return WorkerTypes(worker_type.lower())
    raise EngineError(
        f"`worker_type` must be one of {[w.name for w in WorkerTypes]}, got "
        f"worker_type={worker_type!r} (custom Worker classes are not supported; wrap the "
        "objective instead)"
    )
