"""Tuning a benchmark matrix: one search over the whole matrix, each evaluation a configuration
timed at every shape (`objectives.matrix`), then each bucket's winner chosen from everything
evaluated and re-measured against the baseline."""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.controls import controls_file as cf
from ciq_tune.controls.matrix import Matrix
from ciq_tune.controls.matrix import MatrixEntry
from ciq_tune.controls.matrix import ShapeResult
from ciq_tune.controls.simplify import validate_and_simplify
from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import MeasurementError
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.space import SearchSpace
from ciq_tune.validation import RoundCounter
from ciq_tune.validation import SearchValidation
from ciq_tune.validation import ValidationConfig
from objectives import make_measure
from objectives import make_search_space
from objectives import make_trainable
from objectives import measurement_is_exact
from objectives import starting_points
from objectives._arrays import arrays_for
from objectives._bench import timing_sets
from objectives._stages import Benchmarker
from objectives.cutoffs import Cutoffs
from objectives.description import KernelDescription
from objectives.matrix import GUARD_STATUS
from objectives.matrix import ShapeGroup
from objectives.matrix import bucket_score
from objectives.matrix import group_shapes
from objectives.matrix import make_matrix_trainable
from objectives.matrix import matrix_metric
from objectives.matrix import relative
from objectives.matrix import selection_rule
from objectives.matrix import shape_values
from objectives.protocol import DEFAULT_PROTOCOL
from objectives.remeasure import ConfigRounds
from objectives.served_rounds import SERVED_WARMUP_ROUNDS
from objectives.served_rounds import served_measure
from searchers.placement import ray_is_up

if TYPE_CHECKING:
    from ray import tune

    from searchers.placement import Placement

Trainable = Callable[[dict[str, Any]], dict[str, Any]]
MatrixSearcher = Callable[
    [Trainable, SearchSpace, list[Any]], tuple[SearchResults, dict[str, dict[str, Any]]]
]
"""Runs a matrix's search: ``search(trainable, space, starting points) -> (results, rows)``,
`rows` each evaluation's result dict by `_config_key` of its configuration (`on_ray`, or
`searchers.local_search` on this machine)."""
Timer = Callable[[], float]

BUCKET_SCORE = "bucket_score"
"""The objective of a bucket's ranking: its weighted geometric mean relative to the baseline."""


HELION_CONFIG = "helion_config"
"""The result key of a Helion evaluation's configuration (JSON), which the controls file's
entry records."""


@dataclass(frozen=True)
class MatrixSettings:
    """Budget and validation of a matrix search.

    Attributes:
        budget: Evaluations of the search (each one configuration at every shape).
        seed: Search seed.
        validate_top: Candidates re-measured against the baseline per bucket (0: off).
        validation: How to re-measure.
        strategy: The engine's strategy (``auto``: see `ciq_tune.engine.create_engine`).
    """

    budget: int
    seed: int = 0
    validate_top: int = 3
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    strategy: str = "auto"


class MatrixInterrupted(Exception):
    """`tune_matrix` stopped early (its `proceed` said no): the evaluations so far, no
    validation.

    Attributes:
        results: The search's evaluations.
        shapes: Per evaluation (in `results` order), its per-shape metric values.
    """

    def __init__(self, results: SearchResults, shapes: list[list[float | None]]) -> None:
        super().__init__(f"stopped after {len(results.records)} evaluations")
        self.results = results
        self.shapes = shapes


@dataclass
class BucketOutcome:
    """What the search produced for one bucket."""

    group: ShapeGroup
    baseline: dict[str, Any]
    winner: dict[str, Any]
    evaluations: int
    baseline_values: list[float | None]
    winner_values: list[float | None]
    validation: SearchValidation
    helion_config: dict[str, Any] | None = None


@dataclass
class MatrixSearch:
    """A finished matrix search: its evaluations with their per-shape values, and each bucket's
    outcome.

    Attributes:
        results: Every evaluation of the search (the matrix's geometric mean as objective).
        shapes: Per evaluation (in `results` order), its metric at each shape of the matrix
            (None where that shape failed).
        outcomes: One per bucket of the selection rule, in description order.
    """

    results: SearchResults
    shapes: list[list[float | None]]
    outcomes: list[BucketOutcome]


def tune_matrix(
    desc: KernelDescription,
    settings: MatrixSettings,
    search: MatrixSearcher,
    *,
    benchmark: Benchmarker | None = None,
    log: Callable[[str], None] = print,
    proceed: Callable[[], bool] | None = None,
) -> MatrixSearch:
    """Tune a description's matrix: one search whose every evaluation times a configuration
    at every shape, then per bucket the best configuration over all evaluations, re-measured
    against the baseline.

    Args:
        desc: A description with `shapes`.
        settings: Budget and validation.
        search: Runs the search (`on_ray`, or this machine's workers).
        benchmark: Where candidates are checked and timed (a GPU's benchmark worker, each
            shape's round cut short where the configuration is far from the best time seen
            there: `objectives.cutoffs`), and where the buckets' candidates are then
            re-measured, one full round per request with the search's protocol
            (`objectives.served_rounds`); None: each evaluation in its trial's own worker,
            re-measured in a Ray task holding a GPU when Ray is up.
        log: Where progress lines go.
        proceed: Asked after the search; False stops there (a Ctrl+C, which also ended the
            search early).

    Raises:
        MatrixInterrupted: `proceed` said no; it holds the evaluations so far.
    """
    at_first = desc.at_shape(desc.matrix()[0])
    space = make_search_space(at_first)
    points = starting_points(at_first, space)
    baseline = points[0]
    groups = group_shapes(desc)
    log(
        f"{desc.name}: {settings.budget} evaluations, each at {len(desc.matrix())} shapes "
        f"({len(groups)} buckets)"
    )
    timed_on = None if benchmark is None else Cutoffs(benchmark, desc)
    trainable = make_matrix_trainable(
        desc, make_trainable=functools.partial(make_trainable, benchmark=timed_on)
    )
    results, rows = search(trainable, space, points)
    n = len(desc.matrix())
    shapes = per_shape_values(desc, results, rows)
    if proceed is not None and not proceed():
        raise MatrixInterrupted(results, shapes)
    base_values = _values_at(results, shapes, baseline, n)
    rounds = _Rounds(desc, benchmark)
    outcomes = []
    started = time.perf_counter()
    for group in groups:
        # Validation re-measures on the GPU for minutes: a Ctrl+C skips what is left of it.
        if proceed is not None and not proceed():
            raise MatrixInterrupted(results, shapes)
        ranked = _bucket_results(desc, group, results, shapes, base_values)
        outcome = _outcome(desc, group, ranked, baseline, base_values, settings, rounds)
        # The search's values of the configuration it evaluated (before any simplification).
        searched = outcome.validation.winner
        evaluated = outcome.winner if searched is None else searched.config
        outcome.helion_config = _helion_config(rows.get(_config_key(evaluated), {}))
        winner_values = _values_at(results, shapes, evaluated, n)
        outcome.winner_values = [winner_values[i] for i in group.indices]
        outcomes.append(outcome)
    if rounds.counter.rounds:
        wall = time.perf_counter() - started
        log(f"validation of {len(groups)} buckets: {rounds.counter.summary(wall)}")
    return MatrixSearch(results, shapes, outcomes)


def on_ray(
    desc: KernelDescription,
    settings: MatrixSettings,
    placement: Placement,
    run_config: tune.RunConfig,
    *,
    after: Callable[[], None] | None = None,
) -> MatrixSearcher:
    """A matrix search as Ray Tune trials on the connected cluster (`kernel_tuner`);
    `after` is called once the Tune run has ended, however it ended."""
    from searchers.kernel_search import kernel_tuner

    def search(
        trainable: Trainable, space: SearchSpace, points: list[Any]
    ) -> tuple[SearchResults, dict[str, dict[str, Any]]]:
        tuner, searcher = kernel_tuner(
            trainable,
            placement,
            space=space,
            metric=matrix_metric(desc),
            mode=desc.mode,
            max_evaluations=settings.budget,
            seed=settings.seed,
            points_to_evaluate=points,
            run_config=run_config,
            strategy=settings.strategy,
        )
        try:
            grid = tuner.fit()
        finally:
            if after is not None:
                after()
        return searcher.results(), trial_metrics(grid)

    return search


def trial_metrics(grid: tune.ResultGrid) -> dict[str, dict[str, Any]]:
    """Each trial's last result, by its configuration (`_config_key`)."""
    return {_config_key(grid[i].config or {}): grid[i].metrics or {} for i in range(len(grid))}


def per_shape_values(
    desc: KernelDescription, results: SearchResults, rows: dict[str, dict[str, Any]]
) -> list[list[float | None]]:
    """Per evaluation of `results`, its metric at each shape of the matrix (None where that
    shape failed), read from the trials' results (`trial_metrics`)."""
    n = len(desc.matrix())
    return [
        shape_values(rows.get(_config_key(r.config), {}), desc.metric, n) for r in results.records
    ]


def write_matrix_table(
    path: Path, desc: KernelDescription, results: SearchResults, shapes: list[list[Any]]
) -> Path:
    """The search's evaluations table with each shape's metric in a column ``<metric>@<i>``
    (shapes in description order)."""
    table = results.table()
    for index in range(len(desc.matrix())):
        table[f"{desc.metric}@{index}"] = [row[index] for row in shapes]
    table.to_csv(path, index=False)
    return path


def _config_key(config: Any) -> str:
    return json.dumps(config, sort_keys=True)


def _bucket_results(
    desc: KernelDescription,
    group: ShapeGroup,
    results: SearchResults,
    shapes: list[list[float | None]],
    baseline: list[float | None],
) -> SearchResults:
    """The search's evaluations scored on one bucket (`objectives.matrix.bucket_score`): a
    configuration is ``ok`` for the bucket when it succeeded at each of the bucket's shapes
    (wherever else it failed) and passed the worst-shape guard (`GUARD_STATUS` when not)."""
    records = []
    for record, values in zip(results.records, shapes, strict=True):
        score = bucket_score(desc, group, values, baseline)
        if score is not None:
            records.append(replace(record, status="ok", values={BUCKET_SCORE: score}))
        else:
            # Successful at every shape, so only the guard can have refused it.
            status = GUARD_STATUS if record.ok else record.status
            records.append(replace(record, status=status, values=None))
    return SearchResults([Objective(name=BUCKET_SCORE, mode="min")], records)


def _values_at(
    results: SearchResults, shapes: list[list[float | None]], config: Any, n: int
) -> list[float | None]:
    """The per-shape values of `config`'s evaluation (None at every shape when it has none)."""
    return next(
        (v for r, v in zip(results.records, shapes, strict=True) if r.config == config), [None] * n
    )


def _outcome(
    desc: KernelDescription,
    group: ShapeGroup,
    results: SearchResults,
    baseline: dict[str, Any],
    base_values: list[float | None],
    settings: MatrixSettings,
    rounds: _Rounds,
) -> BucketOutcome:
    references = [base_values[i] for i in group.indices]
    validation = _validate(desc, group, results, baseline, references, settings, rounds)
    return BucketOutcome(
        group=group,
        baseline=baseline,
        winner=_winner(results, validation, baseline),
        evaluations=len(results.records),
        baseline_values=references,
        winner_values=[],
        validation=validation,
    )


def _validate(
    desc: KernelDescription,
    group: ShapeGroup,
    results: SearchResults,
    baseline: dict[str, Any],
    references: list[float | None],
    settings: MatrixSettings,
    rounds: _Rounds,
) -> SearchValidation:
    """Re-measure a bucket's top candidates against the baseline (as `tune` does for one
    shape), or say why not."""
    skip = None
    if measurement_is_exact(desc):
        skip = f"{desc.metric} is a compile statistic that a recompile reproduces exactly"
    elif settings.validate_top < 1:
        skip = f"switched off (validate_top={settings.validate_top})"
    elif not any(r.ok and r.config == baseline for r in results.records):
        skip = "the baseline did not run successfully, so there is nothing to compare with"
    if skip is not None:
        return SearchValidation(
            outcome="skipped", reason=skip, top_k=settings.validate_top, baseline_config=baseline
        )
    measure = _BucketMeasure(desc, group, references, rounds.timer)
    config = settings.validation
    if rounds.served:
        config = config.model_copy(update={"warmup": min(config.warmup, SERVED_WARMUP_ROUNDS)})
    validate = functools.partial(validate_and_simplify, k=settings.validate_top, config=config)
    return rounds.run(validate, results, measure, baseline)


class _Rounds:
    """Where a matrix's validation rounds run: one round per request on the search's benchmark
    worker (`objectives.served_rounds`) when it had one; else, on a GPU, rounds in a Ray task
    that holds it (`objectives.remeasure.ConfigRounds`, the in-trial protocol); else fresh
    evaluations in the isolated worker (`objectives.make_measure`)."""

    def __init__(self, desc: KernelDescription, benchmark: Benchmarker | None) -> None:
        self._benchmark = benchmark
        self.served = benchmark is not None
        self.counter = RoundCounter()  # the rounds run in this process
        self._preload = _preload(desc.kind) if benchmark is not None else ()
        self._gpus = 0
        if benchmark is None and ray_is_up() and desc.kind != "ptx":
            import ray

            self._gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0

    def timer(self, at: KernelDescription, config: Any) -> Timer:
        """The rounds of `config` at one shape (built where they run), counted."""
        timer: Timer
        if self._benchmark is not None:
            timer = functools.partial(
                served_measure(at, self._benchmark, preload=self._preload), config
            )
        elif self._gpus and at.metric == "time_ms":
            sets = timing_sets(
                at, device="cuda", protocol=DEFAULT_PROTOCOL, arrays=arrays_for(at.kind)
            )
            timer = ConfigRounds(at, config, sets, device="cuda", protocol=DEFAULT_PROTOCOL)
        else:
            timer = functools.partial(make_measure(at), config)
        return self.counter.counted(timer)

    def run(self, fn: Callable[..., SearchValidation], *args: Any) -> SearchValidation:
        """`fn(*args)`: here, or in a Ray task holding a GPU for rounds in this process."""
        if not self._gpus:
            return fn(*args)
        import ray

        task = ray.remote(num_cpus=1, num_gpus=self._gpus)(_call)
        validation: SearchValidation = ray.get(task.remote(fn, *args))
        return validation


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    # ray.remote takes functions, not partials: the callable travels as an argument.
    return fn(*args)


def _preload(kind: str) -> tuple[str, ...]:
    from objectives import benchmark_worker_setup

    return benchmark_worker_setup(kind)[0]


class _BucketMeasure:
    """One fresh measurement of a configuration on a bucket (`validate_search`'s measure): the
    shape's metric, or the weighted geometric mean of the shapes' metrics relative to the
    baseline's search values (a fixed scale, so ratios between configurations are those of
    `bucket_score`). Each shape's rounds come from `timer_for(shape description, config)`
    (`_Rounds.timer`), built on first use where the measure runs."""

    def __init__(
        self,
        desc: KernelDescription,
        group: ShapeGroup,
        references: list[float | None],
        timer_for: Callable[[KernelDescription, Any], Timer],
    ) -> None:
        self._shapes = [desc.at_shape(shape) for shape in group.shapes]
        self._weights = [shape.weight for shape in group.shapes]
        self._references = references
        self._timer_for = timer_for
        self._timers: dict[tuple[str, int], Timer] = {}
        self._mode = desc.mode

    def _timer(self, config: Any, i: int) -> Timer:
        key = (_config_key(config), i)
        if key not in self._timers:
            self._timers[key] = self._timer_for(self._shapes[i], config)
        return self._timers[key]

    def __call__(self, config: Any) -> float:
        values = [self._timer(config, i)() for i in range(len(self._shapes))]
        if len(values) == 1:
            return values[0]
        log_sum = 0.0
        for at, weight, value, base in zip(
            self._shapes, self._weights, values, self._references, strict=True
        ):
            if value <= 0:
                raise MeasurementError(f"{at.name}: non-positive {at.metric}={value} at {at.sizes}")
            log_sum += weight * math.log(relative(value, base or 1.0, self._mode))
        return math.exp(log_sum / sum(self._weights))


def _winner(
    results: SearchResults, validation: SearchValidation, baseline: dict[str, Any]
) -> dict[str, Any]:
    if validation.simplification is not None:  # the winner without the controls that do nothing
        simplified: dict[str, Any] = validation.simplification["config"]
        return simplified
    if validation.winner is not None:
        config: dict[str, Any] = validation.winner.config
        return config
    if validation.outcome == "baseline":
        return baseline
    best = results.best(1)
    if not best:
        raise CiqTuneError("no candidate of a bucket compiled and ran")
    winner: dict[str, Any] = best[0].config
    return winner


def _helion_config(metrics: dict[str, Any]) -> dict[str, Any] | None:
    text = metrics.get(HELION_CONFIG)
    return json.loads(text) if isinstance(text, str) else None


def matrix_record(desc: KernelDescription, outcomes: list[BucketOutcome]) -> Matrix:
    """The controls file's `matrix` section of a finished matrix search (entries in the
    description's shape order; `rendered` is filled in by `controls_file.build`)."""
    entries = []
    positions = {s.label(): i for i, s in enumerate(desc.matrix())}
    for outcome in sorted(outcomes, key=lambda o: positions[o.group.shapes[0].label()]):
        validation = outcome.validation.to_dict()
        shapes = [
            ShapeResult(
                sizes=shape.sizes,
                weight=shape.weight,
                baseline=base,
                best=best,
                remeasured=_remeasured(validation) if len(outcome.group.shapes) == 1 else None,
            )
            for shape, base, best in zip(
                outcome.group.shapes,
                outcome.baseline_values,
                outcome.winner_values,
                strict=True,
            )
        ]
        entries.append(
            MatrixEntry(
                key=outcome.group.key,
                params=outcome.winner.get("params", {}),
                controls=outcome.winner.get("controls", {}),
                helion_config=outcome.helion_config,
                shapes=shapes,
                evaluations=outcome.evaluations,
                validation=validation,
            )
        )
    return Matrix(selection=selection_rule(desc), metric=desc.metric, entries=entries)


def _remeasured(validation: dict[str, Any]) -> dict[str, Any] | None:
    """The re-measured comparison of the shipped configuration with the baseline, if any."""
    winner = validation.get("winner")
    if not isinstance(winner, dict):
        return None
    keep = ("verdict", "speedup", "speedup_ci_low", "speedup_ci_high", "p_value")
    out = {k: winner[k] for k in keep if k in winner}
    for side in ("baseline", "candidate"):
        if isinstance(winner.get(side), dict):
            out[f"{side}_median"] = winner[side].get("median")
    return out


def controls_record(
    desc: KernelDescription, outcomes: list[BucketOutcome], *, source: str
) -> cf.ControlsFile:
    """The controls file of a matrix search. Its top-level `params`/`controls` are those of the
    heaviest bucket (what `ciq-tune apply` prints without a shape); `matrix` holds them all."""
    from ciq_tune.controls.controls_file import installed_catalog

    matrix = matrix_record(desc, outcomes)
    main = max(outcomes, key=lambda o: o.group.weight)
    names = {n for o in outcomes for n in o.winner.get("controls", {})}
    # A Triton kernel's file records the Triton it was tuned under, controls or not.
    names |= {"triton"} if desc.kind == "triton" else set()
    catalogs = {
        n: installed_catalog(n, desc.arch, desc.vendor_controls_files(n)) for n in sorted(names)
    }
    first = desc.at_shape(main.group.shapes[0])
    base, best = main.baseline_values[0], main.winner_values[0]
    sign = 1 if desc.mode == "min" else -1
    improvement = None
    if base and best is not None:
        improvement = round(100.0 * sign * (base - best) / abs(base), 3)
    return cf.build(
        kernel=cf.KernelInfo(
            name=desc.name,
            kind=desc.kind,
            source=source,
            source_sha256=desc.source_sha256(),
            entry=desc.entry,
            arch=desc.arch,
        ),
        catalogs=catalogs,
        controls=main.winner.get("controls", {}),
        params=main.winner.get("params", {}),
        benchmark=first.benchmark_record(),
        scores=cf.Scores(
            baseline=base, best=best if best is not None else math.nan, improvement_pct=improvement
        ),
        gpu=cf.detect_gpu() if desc.kind != "ptx" else None,
        validation=main.validation.to_dict(),
        matrix=matrix,
    )
