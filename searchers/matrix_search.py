"""Tuning a benchmark matrix: one search per bucket of shapes, scheduled so that each search
starts from the winners of its nearest tuned neighbours (cross-shape transfer)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

import ray
from ray import tune

from ciq_tune.controls import controls_file as cf
from ciq_tune.controls.matrix import Matrix
from ciq_tune.controls.matrix import MatrixEntry
from ciq_tune.controls.matrix import ShapeResult
from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import MeasurementError
from ciq_tune.errors import SpaceError
from ciq_tune.results import EvaluationRecord
from ciq_tune.results import SearchResults
from ciq_tune.space import SearchSpace
from ciq_tune.validation import SearchValidation
from ciq_tune.validation import ValidationConfig
from ciq_tune.validation import validate_search
from objectives import make_measure
from objectives import make_search_space
from objectives import make_trainable
from objectives import measurement_is_exact
from objectives import starting_points
from objectives.description import KernelDescription
from objectives.matrix import ShapeGroup
from objectives.matrix import group_metric
from objectives.matrix import group_shapes
from objectives.matrix import make_group_trainable
from objectives.matrix import relative
from objectives.matrix import schedule
from objectives.matrix import selection_rule
from objectives.matrix import shape_values
from objectives.matrix import transfer_points
from searchers.kernel_search import kernel_tuner
from searchers.placement import Placement

TRANSFER_POINTS = 3
"""Winners of the nearest tuned buckets a search starts from (nearest first)."""
TRANSFER_BACK = 2
"""Winners of the nearest other buckets evaluated at each bucket after all searches (a bucket
tuned early never saw the winners of the buckets tuned after it)."""


@dataclass(frozen=True)
class MatrixSettings:
    """Budgets of a matrix search.

    Attributes:
        budget: Evaluations of an independent search of one bucket (and of the first bucket
            when transferring).
        transfer: Fraction of `budget` that each later bucket gets when it starts from its
            neighbours' winners (after all searches, each bucket also evaluates the winners of
            its `TRANSFER_BACK` nearest other buckets that it has not evaluated); None: no
            transfer (every bucket an independent search).
        seed: Search seed (each bucket's search gets ``seed + its position``).
        validate_top: Candidates re-measured against the baseline per bucket (0: off).
        validation: How to re-measure.
    """

    budget: int
    transfer: float | None = 0.25
    seed: int = 0
    validate_top: int = 3
    validation: ValidationConfig = field(default_factory=ValidationConfig)

    def budget_for(self, position: int, n_points: int) -> int:
        """Evaluations of the bucket tuned `position`-th (0-based) with `n_points` starts."""
        if self.transfer is None or position == 0:
            return self.budget
        return max(n_points + 1, math.ceil(self.budget * self.transfer))


class MatrixInterrupted(Exception):
    """`tune_matrix` stopped early (its `proceed` said no): the evaluations of the buckets it
    searched, in tuning order, the last one possibly cut short; no transfer or validation ran.

    Attributes:
        searched: ``(bucket label, its evaluations)`` per searched bucket.
        buckets: Buckets of the matrix.
    """

    def __init__(self, searched: list[tuple[str, SearchResults]], buckets: int) -> None:
        super().__init__(f"stopped after {len(searched)} of {buckets} buckets")
        self.searched = searched
        self.buckets = buckets


@dataclass
class BucketOutcome:
    """What one bucket's search produced."""

    group: ShapeGroup
    baseline: dict[str, Any]
    winner: dict[str, Any]
    evaluations: int
    baseline_values: list[float | None]
    winner_values: list[float | None]
    results: SearchResults
    validation: SearchValidation
    helion_config: dict[str, Any] | None = None


def _quiet(desc: KernelDescription) -> Callable[[dict[str, Any]], dict[str, Any]]:
    # The objective itself prints nothing (kernel_search.logged_trainable adds the trial log).
    return make_trainable(desc)


def tune_matrix(
    desc: KernelDescription,
    settings: MatrixSettings,
    placement: Placement,
    run_config: Callable[[str], tune.RunConfig],
    *,
    log: Callable[[str], None] = print,
    proceed: Callable[[], bool] | None = None,
) -> list[BucketOutcome]:
    """Tune every bucket of the description's matrix on the connected Ray cluster.

    Args:
        desc: A description with `shapes`.
        settings: Budgets, transfer and validation.
        placement: Trial resources (`searchers.kernel_search.placement_on_cluster`).
        run_config: The Tuner's run configuration for a bucket's name.
        log: Where progress lines go.
        proceed: Asked after each bucket's search; False stops there (a Ctrl+C, which also
            ended that bucket's Tune run early).

    Returns:
        One outcome per bucket, in the order they were tuned.

    Raises:
        MatrixInterrupted: `proceed` said no; it holds the evaluations so far.
    """
    gpus = 1 if desc.kind != "ptx" and ray.cluster_resources().get("GPU", 0) >= 1 else 0
    order = schedule(group_shapes(desc))
    searched: list[_Searched] = []
    for position, group in enumerate(order):
        at_first = desc.at_shape(group.shapes[0])
        space = make_search_space(at_first)
        points = starting_points(at_first, space)
        baseline = points[0]
        if settings.transfer is not None:
            tuned = [(b.group, b.best()) for b in searched]
            extra = transfer_points(group, tuned, limit=TRANSFER_POINTS)
            points += [p for p in extra if p not in points]
        metric, mode = group_metric(desc, group)
        baselines = None
        if len(group.shapes) > 1:
            baselines = _remote(gpus, _baseline_values, desc, group, baseline)
        budget = settings.budget_for(position, len(points))
        log(f"bucket {position + 1}/{len(order)} ({group.label()}): {budget} evaluations")
        tuner, searcher = kernel_tuner(
            make_group_trainable(desc, group, baselines, make_trainable=_quiet),
            placement,
            space=space,
            metric=metric,
            mode=mode,
            max_evaluations=budget,
            seed=settings.seed + position,
            points_to_evaluate=points,
            run_config=run_config(f"{desc.name}-{position}"),
        )
        grid = tuner.fit()
        rows = [(grid[i].config or {}, grid[i].metrics or {}) for i in range(len(grid))]
        searched.append(
            _Searched(group, space, baseline, baselines, searcher.results(), rows, metric)
        )
        _stop_unless(proceed, searched, len(order))
    if settings.transfer is not None:
        _transfer_back(desc, searched, gpus, log)
    outcomes = []
    for bucket in searched:
        # Validation re-measures on the GPU for minutes: a Ctrl+C skips what is left of it.
        _stop_unless(proceed, searched, len(order))
        outcomes.append(_outcome(desc, bucket, settings, gpus))
    return outcomes


def _stop_unless(
    proceed: Callable[[], bool] | None, searched: list[_Searched], buckets: int
) -> None:
    """Raise `MatrixInterrupted` with the evaluations so far when `proceed` says no."""
    if proceed is not None and not proceed():
        raise MatrixInterrupted([(b.group.label(), b.results) for b in searched], buckets)


@dataclass
class _Searched:
    """A bucket after its search (and the backward transfer), before validation."""

    group: ShapeGroup
    space: SearchSpace
    baseline: dict[str, Any]
    baselines: list[float] | None
    results: SearchResults
    rows: list[tuple[dict[str, Any], dict[str, Any]]]
    metric: str

    def best(self) -> dict[str, Any]:
        best = self.results.best(1)
        if not best:
            raise CiqTuneError(f"no candidate of bucket {self.group.label()} compiled and ran")
        config: dict[str, Any] = best[0].config
        return config


def _transfer_back(
    desc: KernelDescription, searched: list[_Searched], gpus: int, log: Callable[[str], None]
) -> None:
    """Evaluate, at each bucket, the winners of its nearest buckets that it has not evaluated
    (those tuned after it, mostly): transfer in both directions, `TRANSFER_BACK` evaluations
    at most per bucket. Each evaluation joins the bucket's results (origin ``transfer``)."""
    winners = [(b.group, b.best()) for b in searched]
    planned = []
    for bucket in searched:
        seen = [r.config for r in bucket.results.records]
        others = [(g, c) for g, c in winners if g is not bucket.group and c not in seen]
        configs = [
            c
            for c in transfer_points(bucket.group, others, limit=len(others))
            if _in_space(bucket.space, c)
        ][:TRANSFER_BACK]
        if configs:
            trainable = make_group_trainable(
                desc, bucket.group, bucket.baselines, make_trainable=_quiet
            )
            planned.append((bucket, trainable, configs))
    if not planned:
        return
    # One task for all buckets: its isolated benchmark worker starts once (~5 s on a GPU).
    outcomes = _remote(gpus, _evaluate_all, [(t, c) for _, t, c in planned])
    log(f"transfer back: {sum(len(c) for _, _, c in planned)} winners of neighbours evaluated")
    for (bucket, _, configs), results in zip(planned, outcomes, strict=True):
        records = list(bucket.results.records)
        for config, result in zip(configs, results, strict=True):
            bucket.rows.append((config, result))
            value = result.get(bucket.metric)
            ok = result.get("status") == "ok" and isinstance(value, int | float)
            ok = ok and math.isfinite(float(value))
            genes = bucket.space.encode(config, fill_defaults=True)
            records.append(
                EvaluationRecord(
                    candidate_id=len(records),
                    generation=-1,
                    config=config,
                    genes=tuple(genes),
                    key=bucket.space.key(genes),
                    origin="transfer",
                    status="ok" if ok else str(result.get("status", "crash")),
                    values={bucket.metric: float(value)} if ok else None,
                    elapsed_s=0.0,
                )
            )
        bucket.results = SearchResults(bucket.results.objectives, records)


def _in_space(space: SearchSpace, config: dict[str, Any]) -> bool:
    """Whether `config` is a feasible point of `space` (Helion spaces differ between shapes)."""
    try:
        return space.is_feasible(space.encode(config, fill_defaults=True))
    except SpaceError:
        return False


def _evaluate_all(
    work: list[tuple[Callable[[dict[str, Any]], dict[str, Any]], list[dict[str, Any]]]],
) -> list[list[dict[str, Any]]]:
    """Each trainable's results on its configurations, in order."""
    return [[trainable(config) for config in configs] for trainable, configs in work]


def _outcome(
    desc: KernelDescription, bucket: _Searched, settings: MatrixSettings, gpus: int
) -> BucketOutcome:
    group, results, baseline, metric = bucket.group, bucket.results, bucket.baseline, bucket.metric
    validation = _validate(desc, group, results, baseline, bucket.baselines, settings, gpus)
    winner = _winner(results, validation, baseline)
    winner_metrics = next((m for c, m in bucket.rows if c == winner), {})
    baseline_metrics = next((m for c, m in bucket.rows if c == baseline), {})
    n = len(group.shapes)
    return BucketOutcome(
        group=group,
        baseline=baseline,
        winner=winner,
        evaluations=len(results.records),
        baseline_values=(
            list(bucket.baselines)
            if bucket.baselines is not None
            else shape_values({f"{desc.metric}@0": baseline_metrics.get(metric)}, metric, 1)
        ),
        winner_values=(
            shape_values(winner_metrics, desc.metric, n)
            if n > 1
            else shape_values({f"{desc.metric}@0": winner_metrics.get(metric)}, metric, 1)
        ),
        results=results,
        validation=validation,
        helion_config=_helion_config(winner_metrics),
    )


def _remote(gpus: int, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a Ray task holding a GPU (a timed kind on a GPU cluster)."""
    return ray.get(ray.remote(num_cpus=1, num_gpus=gpus)(_call).remote(fn, *args))


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    # ray.remote takes functions, not partials: the callable travels as an argument.
    return fn(*args)


def _baseline_values(
    desc: KernelDescription, group: ShapeGroup, baseline: dict[str, Any]
) -> list[float]:
    """The baseline configuration's metric at each shape of a bucket (the reference of the
    bucket's relative objective)."""
    values = []
    for shape in group.shapes:
        values.append(make_measure(desc.at_shape(shape))(baseline))
    return values


def _validate(
    desc: KernelDescription,
    group: ShapeGroup,
    results: SearchResults,
    baseline: dict[str, Any],
    baselines: list[float] | None,
    settings: MatrixSettings,
    gpus: int,
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
    measure = functools.partial(_measure_group, desc, group, baselines)
    validate = functools.partial(
        validate_search, k=settings.validate_top, config=settings.validation
    )
    validation: SearchValidation = _remote(gpus, validate, results, measure, baseline)
    return validation


def _measure_group(
    desc: KernelDescription, group: ShapeGroup, baselines: list[float] | None, config: Any
) -> float:
    """One fresh measurement of a configuration on a bucket: the shape's metric, or the
    weighted geometric mean of the shapes' metrics relative to the search's baseline values
    (a fixed scale, so ratios between configurations are those of the bucket's objective)."""
    if baselines is None:
        return make_measure(desc.at_shape(group.shapes[0]))(config)
    total = sum(s.weight for s in group.shapes)
    log_sum = 0.0
    for shape, base in zip(group.shapes, baselines, strict=True):
        value = make_measure(desc.at_shape(shape))(config)
        if value <= 0:
            raise MeasurementError(f"{desc.name}: non-positive {desc.metric}={value} at {shape}")
        log_sum += shape.weight * math.log(relative(value, base, desc.mode))
    return math.exp(log_sum / total)


def _winner(
    results: SearchResults, validation: SearchValidation, baseline: dict[str, Any]
) -> dict[str, Any]:
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
    import json

    text = metrics.get("helion_config")
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
    names = sorted({n for o in outcomes for n in o.winner.get("controls", {})})
    catalogs = {n: installed_catalog(n, desc.arch) for n in names}
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
        benchmark=cf.Benchmark(
            metric=desc.metric,
            mode=desc.mode,
            sizes=first.sizes,
            shapes={i.name: list(first.shape_of(i)) for i in first.inputs},
            dtypes={i.name: i.dtype for i in first.inputs},
        ),
        scores=cf.Scores(
            baseline=base, best=best if best is not None else math.nan, improvement_pct=improvement
        ),
        gpu=cf.detect_gpu() if desc.kind != "ptx" else None,
        validation=main.validation.to_dict(),
        matrix=matrix,
    )
