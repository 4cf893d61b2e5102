"""`CompileIQSearcher`: a Ray Tune `Searcher` that is a thin adapter over a ciq-tune engine."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from ray.tune.search import UNDEFINED_METRIC_MODE
from ray.tune.search import UNDEFINED_SEARCH_SPACE
from ray.tune.search import Searcher

import ciq_tune.space as ss
from ciq_tune.engine import Budget
from ciq_tune.engine import Engine
from ciq_tune.engine import EngineConfig
from ciq_tune.engine import Objective
from ciq_tune.engine import SearchResults
from ciq_tune.engine import create_engine
from ciq_tune.errors import ConstraintError
from ciq_tune.errors import StateError
from ciq_tune.report.table import find_table
from ciq_tune.report.table import read_results
from ciq_tune.results import result_outcome
from searchers.ray_domains import converted
from searchers.ray_domains import has_domains
from searchers.ray_domains import placeholder_keys
from searchers.searcher_budget import budget_note
from searchers.searcher_budget import effective_budget
from searchers.searcher_budget import warn_if_serial

logger = logging.getLogger(__name__)

SEARCHER_STATE_SCHEMA = 1


class CompileIQSearcher(Searcher):
    """Evolutionary search (screened GA / GA / NSGA-II / NSGA-III) for Ray Tune over a ciq-tune
    space.

    Args:
        space: a dict of `ciq_tune.space` primitives (nested dicts/lists allowed), a
            `SearchSpace`, or Ray Tune domains; or None to take the Ray Tune domains of
            Tune's `param_space`. Both may be given: the Ray Tune domains of `param_space`
            join the `space=` parameters (a name in both is an error). `ciq_tune.space`
            primitives go in `space=`: Tune replaces objects that are not Ray Tune domains
            by placeholders before a searcher sees `param_space`.
        metric: the metric to optimise, or a list of metrics for a multi-objective search
            (then leave TuneConfig's metric/mode unset).
        mode: "min"/"max", or a list with one direction per metric.
        strategy: "auto" (the screened GA for one objective, NSGA-II for 2–3, NSGA-III
            beyond), "screened", "ga", "nsga2", "nsga3" or "random".
        generations: generations to run; each is `pool_size` evaluations, so the search
            makes `generations × pool_size` evaluations (the default pool is 4 for the
            screened GA, 16 for "ga", 24 for NSGA-II/III: `generations=10` is 40 evaluations
            with the default strategy).
        max_evaluations, time_budget_s, stagnation_generations: further limits; the first
            limit reached ends the search (Tune then gets `Searcher.FINISHED`). With no limit
            given, the search runs until Tune's `num_samples` (as Ray's other searchers do);
            with `num_samples=-1`, or a `space=` Tune does not report `num_samples` for, it
            stops after 20 generations without improvement
            (`searcher_budget.CONVERGENCE_GENERATIONS`). The budget in force is logged in one
            line when the search starts.
        pool_size: candidates per generation (default: the strategy's).
        engine_config: further strategy settings (`EngineConfig` fields: survivors,
            mutation_prob, crossover_prob, steady_state, …).
        constraints: expressions such as "BM * BN <= 65536" that every proposal satisfies.
        points_to_evaluate: configurations evaluated first (warm start; may be partial).
        baseline: a configuration (or "default") evaluated first and marked as the baseline.
        transfer_from: an earlier search of the same kernel (on another GPU or shape): its
            `SearchResults`, or a run folder or evaluations table (.csv/.parquet) that
            `ciq-tune tune` wrote. Its best configurations that fit this space (4, the engine
            setting `transfer_points`) are evaluated first, after `points_to_evaluate`.
        weights: per-objective weights used to pick the best point of a Pareto front.
        seed: makes the sequence of proposals reproducible.

    Tune passes `TuneConfig`'s metric, mode and `num_samples` to a searcher only together
    with a non-empty `Tuner(param_space=...)` (`ray.tune.tune.run`: `if config and
    set_search_properties(...)`); with `space=` alone give `metric=`/`mode=` here (else
    `suggest` raises saying so). Tune still stops creating trials at `num_samples` then, but the
    searcher does not know that count: give `max_evaluations=` for a budget it plans with.

    Tune keeps one trial of a custom searcher pending (starting) at a time unless `TuneConfig`
    sets `max_concurrent_trials`: trials then start one after another, and several run at once
    only when each runs longer than a Ray worker takes to start (~2 s). The searcher cannot
    change that (Tune sizes its queue from the `ConcurrencyLimiter` wrapper alone); set
    `max_concurrent_trials` to the trials that fit at once (the searcher warns when it is unset
    on a cluster with more than one CPU).

    A trial whose result lacks the metric is a failed evaluation here, not an abort of
    `Tuner.fit()`: `metric` reads None, so Tune's strict metric check (which raises for the
    searcher's `metric`) leaves this searcher's metrics to it; a metric set in `TuneConfig` is
    still checked by Tune. The metrics searched are `metrics`.

    Example:
        >>> import ray
        >>> from ray import tune
        >>> import ciq_tune.space as ss
        >>> from ciq_tune import CompileIQSearcher
        >>> def objective(config):
        ...     return {"score": config["x"] ** 2 + config["y"]}
        >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        >>> grid = tune.Tuner(
        ...     objective,
        ...     param_space={"x": tune.quniform(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3])},
        ...     tune_config=tune.TuneConfig(
        ...         search_alg=CompileIQSearcher(seed=0), metric="score", mode="min",
        ...         num_samples=24, max_concurrent_trials=2),
        ... ).fit()
        >>> len(grid)
        24
        >>> searcher = CompileIQSearcher(
        ...     space={"x": ss.range(1.0, 20.0, 0.5), "y": ss.choice([1, 2, 3])},
        ...     metric="score", mode="min", max_evaluations=24, seed=0)
        >>> grid = tune.Tuner(objective, tune_config=tune.TuneConfig(
        ...     search_alg=searcher, num_samples=-1, max_concurrent_trials=2)).fit()
        >>> len(grid), len(searcher.results())
        (24, 24)
        >>> ray.shutdown()
    """

    def __init__(
        self,
        space: Mapping[str, Any] | ss.SearchSpace | None = None,
        metric: str | Sequence[str] | None = None,
        mode: str | Sequence[str] | None = None,
        *,
        strategy: str = "auto",
        generations: int | None = None,
        max_evaluations: int | None = None,
        time_budget_s: float | None = None,
        stagnation_generations: int | None = None,
        pool_size: int | None = None,
        engine_config: Mapping[str, Any] | EngineConfig | None = None,
        constraints: Sequence[str] = (),
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        baseline: Mapping[str, Any] | str | None = None,
        transfer_from: SearchResults | str | os.PathLike[str] | None = None,
        weights: Sequence[float] | None = None,
        seed: int | None = None,
    ) -> None:
        metric, mode = _normalise_metric_mode(metric, mode)
        super().__init__(metric=metric, mode=mode)  # type: ignore[arg-type]
        self._space: ss.SearchSpace | None = None
        self._constraints = list(constraints)
        self._given_space = space
        if space is not None:
            # A constraint may name param_space domains: checked once they join.
            with contextlib.suppress(ConstraintError):
                self._space = self._as_space(space)
        self._strategy = strategy
        self._budget = Budget(
            max_generations=generations,
            max_evaluations=max_evaluations,
            max_time_s=time_budget_s,
            stagnation_generations=stagnation_generations,
        )
        # None until Tune reports it (`set_search_properties`, only called with a param_space).
        self._num_samples: int | None = None
        config = (
            engine_config.model_dump(exclude_unset=True)
            if isinstance(engine_config, EngineConfig)
            else dict(engine_config or {})
        )
        if pool_size is not None:
            config["pool_size"] = pool_size
        self._engine_config = config
        self._points = list(points_to_evaluate or [])
        self._baseline = baseline
        if transfer_from is not None and not isinstance(transfer_from, SearchResults):
            transfer_from = str(find_table(os.fspath(transfer_from)))  # a missing table fails here
        self._transfer_from = transfer_from
        self._weights = list(weights) if weights is not None else None
        self._seed = seed
        self._engine: Engine | None = None
        self._live: dict[str, int] = {}
        self._completed: set[str] = set()
        self._last_results: dict[str, dict[str, Any]] = {}
        self._max_concurrent: int | None = None
        self._warned_serial = False
        self._told_by_tune = False  # whether Tune called `set_search_properties`

    @property
    def metric(self) -> str | None:  # type: ignore[override]  # Ray annotates str, means Optional
        """None: Tune reads this to check each result for the searcher's metric and aborts
        `Tuner.fit()` when one lacks it; this searcher counts such a result as a failed
        evaluation instead (`metrics` holds what it searches)."""
        return None

    @property
    def metrics(self) -> list[str]:
        """The metrics searched (one, or one per objective), from `metric=` or `TuneConfig`."""
        return self._metrics()

    # -- Tune's hooks --------------------------------------------------------------------------
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        self._told_by_tune = True
        hidden = placeholder_keys(config)
        if hidden and self._space is None and not has_domains(config):
            raise ValueError(
                f"CompileIQSearcher: Tuner(param_space=...) has no Ray Tune domains and "
                f"{hidden} reached the searcher as Tune placeholders (Tune hides objects that "
                "are not Ray Tune domains, ciq_tune.space primitives included). Pass "
                "ciq_tune.space primitives as CompileIQSearcher(space={...}); Ray Tune domains "
                "and constants may stay in param_space."
            )
        if hidden:
            logger.warning(
                "CompileIQSearcher: param_space values %s are objects Tune hides from "
                "searchers; a ciq_tune.space primitive there is not searched (the trainable "
                "gets the primitive itself): pass primitives as CompileIQSearcher(space={...})",
                hidden,
            )
        if has_domains(config):
            self._space = self._merged_space(config)
        num_samples = spec.get("num_samples")
        if isinstance(num_samples, int):
            self._num_samples = num_samples
        if metric and not self._metric:
            self._metric, self._mode = _normalise_metric_mode(metric, mode)
        elif mode and not self._mode:
            self._mode = mode
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self._max_concurrent = max_concurrent
        # With several trials at a time, a generation waiting for its slowest (or hung) trial
        # would idle every other slot: propose whenever a slot is free, unless told otherwise.
        if max_concurrent > 1 and self._engine is None:
            self._engine_config.setdefault("steady_state", True)
        return True

    # Ray annotates `Optional[Dict]` but documents (and its searchers return) Searcher.FINISHED.
    def suggest(self, trial_id: str) -> dict | str | None:  # type: ignore[override]
        if trial_id in self._live:  # Tune asked again for the same trial: same answer
            return self._engine_or_raise().pending_config(self._live[trial_id])
        engine = self._engine_or_raise()
        if self._max_concurrent is None and not self._warned_serial:
            self._warn_if_serial()
        if self._max_concurrent is not None and len(self._live) >= self._max_concurrent:
            return None
        candidate = engine.ask()
        if candidate is None:
            return Searcher.FINISHED if engine.finished else None
        self._live[trial_id] = candidate.id
        return json.loads(json.dumps(candidate.config))

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id in self._live:
            self._last_results[trial_id] = _metrics_only(result, self._metrics())

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        candidate_id = self._live.pop(trial_id, None)
        if candidate_id is None:
            if trial_id in self._completed:
                logger.warning("trial %s completed a second time; ignored", trial_id)
            else:
                logger.warning("trial %s was not suggested by this searcher; ignored", trial_id)
            return
        last = self._last_results.pop(trial_id, None)
        engine = self._engine_or_raise()
        self._completed.add(trial_id)
        if error:
            engine.tell(candidate_id, None, status="error", info={"trial_id": trial_id})
            return
        # A trial stopped early by a scheduler (ASHA) completes with its last reported result,
        # the value the scheduler compared; that value is what the engine learns from.
        result = result if result is not None else last
        values, status, message = result_outcome(result, self._metrics())
        if status in ("missing_metric", "invalid_result") and message:
            logger.warning("%s; counted as a failed evaluation", message)
        info: dict[str, Any] = {"trial_id": trial_id}
        if message:
            info["error"] = message
        if isinstance(result, Mapping):
            info.update(
                {k: result[k] for k in ("training_iteration", "time_total_s") if k in result}
            )
        engine.tell(candidate_id, values, status=status, info=info)

    # -- results and state ---------------------------------------------------------------------
    def results(self) -> SearchResults:
        """Every evaluation told so far (best configuration, Pareto front, table)."""
        return self._engine_or_raise().result()

    @property
    def engine(self) -> Engine:
        return self._engine_or_raise()

    def get_state(self) -> dict[str, Any]:
        return {
            "schema": SEARCHER_STATE_SCHEMA,
            "metric": self._metric,
            "mode": self._mode,
            "space": None if self._space is None else self._space.to_dict(),
            "settings": {
                "strategy": self._strategy,
                "budget": self._budget.model_dump(),
                "num_samples": self._num_samples,
                "engine_config": self._engine_config,
                "points_to_evaluate": self._points,
                "baseline": self._baseline,
                # Only a table's path: once the engine exists, its state holds what was taken.
                "transfer_from": (
                    self._transfer_from if isinstance(self._transfer_from, str) else None
                ),
                "weights": self._weights,
                "seed": self._seed,
            },
            "engine": None if self._engine is None else self._engine.get_state(),
            "live": self._live,
            "completed": sorted(self._completed),
            "last_results": self._last_results,
            "max_concurrent": self._max_concurrent,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state.get("schema") != SEARCHER_STATE_SCHEMA:
            raise StateError(
                f"searcher state has schema {state.get('schema')!r}; this version reads "
                f"{SEARCHER_STATE_SCHEMA}"
            )
        self._metric, self._mode = state["metric"], state["mode"]
        # The state lies in Tune's experiment folder next to the trainable Tune unpickles on
        # restore, so a pickled callable constraint in it is no less trusted than that.
        self._space = (
            None
            if state["space"] is None
            else ss.SearchSpace.from_dict(state["space"], allow_pickle=True)
        )
        settings = state["settings"]
        self._strategy = settings["strategy"]
        self._budget = Budget(**settings["budget"])
        self._num_samples = settings.get("num_samples")
        self._engine_config = settings["engine_config"]
        self._points = settings["points_to_evaluate"]
        self._baseline = settings["baseline"]
        self._transfer_from = settings.get("transfer_from")
        self._weights = settings["weights"]
        self._seed = settings["seed"]
        self._engine = None
        if state["engine"] is not None:
            self._engine = Engine.from_state(state["engine"], space=self._space)
        self._live = dict(state["live"])
        self._completed = set(state["completed"])
        self._last_results = dict(state["last_results"])
        self._max_concurrent = state["max_concurrent"]

    def save(self, checkpoint_path: str) -> None:
        """Write the state as JSON atomically (a temporary file, then `os.replace`)."""
        directory = os.path.dirname(os.path.abspath(checkpoint_path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ciq-searcher-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(self.get_state(), f)
        os.replace(tmp, checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        """Load state written by `save`; works on a bare `CompileIQSearcher()`."""
        with open(checkpoint_path) as f:
            self.set_state(json.load(f))

    # -- conversion ----------------------------------------------------------------------------
    @staticmethod
    def convert_search_space(spec: Mapping[str, Any]) -> dict[str, Any]:
        """Ray Tune domains → ciq-tune primitives (nested dicts kept; constants pass through).

        Raises `ValueError` for domains without a bounded, searchable equivalent and warns
        when a conversion discretises (log-integer domains, quantized log floats).
        """
        return {key: converted(value, key) for key, value in spec.items()}

    # -- internals -----------------------------------------------------------------------------
    def _merged_space(self, config: Mapping[str, Any]) -> ss.SearchSpace:
        """The `space=` parameters joined by the Ray Tune domains of `param_space`."""
        given = self._given_space
        if given is None:
            return self._as_space(config)
        spec = given.spec if isinstance(given, ss.SearchSpace) else given
        if not isinstance(spec, Mapping):
            raise ValueError(
                "CompileIQSearcher: a `space=` list cannot be joined with Tuner(param_space=...) "
                "domains; give every parameter in one place"
            )
        domains = {k: v for k, v in config.items() if has_domains(v)}
        both = sorted(set(domains) & set(spec))
        if both:
            raise ValueError(
                f"CompileIQSearcher: {both} are in both `space=` and Tuner(param_space=...); "
                "give each parameter in one place"
            )
        joined = {**self.convert_search_space(spec), **self.convert_search_space(domains)}
        return self._as_space(
            ss.SearchSpace(joined, constraints=given.constraints)
            if isinstance(given, ss.SearchSpace)
            else joined
        )

    def _as_space(self, space: Mapping[str, Any] | ss.SearchSpace) -> ss.SearchSpace:
        if isinstance(space, ss.SearchSpace):
            if self._constraints:
                return ss.SearchSpace(
                    space.spec, constraints=[*space.constraints, *self._constraints]
                )
            return space
        if not isinstance(space, Mapping):
            raise ValueError(
                f"`space` must be a dict of parameters (Ray Tune passes configs as dicts), got "
                f"{type(space).__name__}"
            )
        return ss.SearchSpace(self.convert_search_space(space), constraints=self._constraints)

    def _metrics(self) -> list[str]:
        if self._metric is None:
            return []
        return [self._metric] if isinstance(self._metric, str) else list(self._metric)

    def _engine_or_raise(self) -> Engine:
        if self._engine is not None:
            return self._engine
        if self._space is None and self._given_space is not None:
            self._space = self._as_space(self._given_space)  # raises the constraint's error
        if self._space is None:
            raise RuntimeError(
                UNDEFINED_SEARCH_SPACE.format(cls=type(self).__name__, space="space")
            )
        if (not self._metric or not self._mode) and not self._told_by_tune:
            raise RuntimeError(
                f"CompileIQSearcher has metric={self._metric!r}, mode={self._mode!r}: Tune "
                "passes TuneConfig(metric=..., mode=..., num_samples=...) to a searcher only "
                "with a non-empty Tuner(param_space=...), and there is none; with `space=` "
                "alone pass metric= and mode= to CompileIQSearcher (and max_evaluations= for "
                "its budget)"
            )
        if not self._metric or not self._mode:
            raise RuntimeError(
                UNDEFINED_METRIC_MODE.format(
                    cls=type(self).__name__, metric=self._metric, mode=self._mode
                )
            )
        metrics = self._metrics()
        modes = [self._mode] * len(metrics) if isinstance(self._mode, str) else list(self._mode)
        weights = self._weights or [1.0] * len(metrics)
        if len(weights) != len(metrics):
            raise ValueError(
                f"`weights` needs one value per metric {metrics}, got weights={self._weights}"
            )
        objectives = [
            Objective.model_validate({"name": m, "mode": d, "weight": w})
            for m, d, w in zip(metrics, modes, weights, strict=True)
        ]
        self._engine = create_engine(
            self._strategy,
            self._space,
            objectives,
            config=self._engine_config,
            budget=self._effective_budget(),
            seed=self._seed,
            initial_points=self._points,
            baseline=self._baseline,
            transfer_from=self._earlier_search(objectives),
        )
        logger.info("CompileIQSearcher: %s", self.budget_note())
        return self._engine

    def _earlier_search(self, objectives: list[Objective]) -> SearchResults | None:
        """`transfer_from` as results, a table read now with this search's objectives."""
        if self._transfer_from is None or isinstance(self._transfer_from, SearchResults):
            return self._transfer_from
        return read_results(self._transfer_from, objectives)

    def _effective_budget(self) -> Budget:
        return effective_budget(self._budget, self._num_samples)

    def budget_note(self) -> str:
        """One line saying when this search stops (after the engine exists: its pool size)."""
        pool = self._engine.config.pool_size if self._engine is not None else None
        return budget_note(self._budget, self._num_samples, pool)

    def _warn_if_serial(self) -> None:
        self._warned_serial = True
        warn_if_serial()


def _normalise_metric_mode(
    metric: str | Sequence[str] | None, mode: str | Sequence[str] | None
) -> tuple[Any, Any]:
    if isinstance(metric, (list, tuple)):
        metric = list(metric)
        if isinstance(mode, str):
            mode = [mode] * len(metric)
        elif mode is not None:
            mode = list(mode)
            if len(mode) != len(metric):
                raise ValueError(
                    f"`mode` needs one direction per metric: metric={metric}, mode={mode}"
                )
    for direction in [mode] if isinstance(mode, str) else mode or []:
        if direction not in ("min", "max"):
            raise ValueError(f"`mode` must be 'min' or 'max', got mode={mode!r}")
    return metric, mode


def _metrics_only(result: Mapping[str, Any], metrics: Sequence[str]) -> dict[str, Any]:
    keep = [*metrics, "status", "training_iteration", "time_total_s"]
    return {k: result[k] for k in keep if k in result}
