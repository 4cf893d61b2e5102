"""Tuning a benchmark matrix: one search over the whole matrix, each evaluation a configuration
timed at every shape (`objectives.matrix`), then each bucket's winner chosen from everything
evaluated and re-measured against the baseline."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.errors import CiqTuneError
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.space import SearchSpace
from ciq_tune.validation import SearchValidation
from ciq_tune.validation import ValidationConfig
from objectives import make_search_space
from objectives import make_trainable
from objectives import starting_points
from objectives._stages import Benchmarker
from objectives.cutoffs import Cutoffs
from objectives.description import KernelDescription
from objectives.matrix import GUARD_STATUS
from objectives.matrix import ShapeGroup
from objectives.matrix import bucket_score
from objectives.matrix import group_shapes
from objectives.matrix import make_matrix_trainable
from objectives.matrix import matrix_metric
from objectives.matrix import shape_values
from searchers.matrix_validation import BucketRounds
from searchers.matrix_validation import config_key
from searchers.matrix_validation import validate_bucket
from searchers.plan import SearchPlan

if TYPE_CHECKING:
    from ray import tune

    from searchers.placement import Placement

Trainable = Callable[[dict[str, Any]], dict[str, Any]]
MatrixSearcher = Callable[
    [Trainable, SearchSpace, list[Any]], tuple[SearchResults, dict[str, dict[str, Any]]]
]
"""Runs a matrix's search: ``search(trainable, space, starting points) -> (results, rows)``,
`rows` each evaluation's result dict by `config_key` of its configuration (`on_ray`, or
`searchers.local_search` on this machine)."""

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

    def plan(self, desc: KernelDescription, space: SearchSpace, points: list[Any]) -> SearchPlan:
        """The search of `desc`'s matrix: its score (`matrix_metric`) over `space`."""
        return SearchPlan.of(
            desc,
            space,
            points,
            metric=matrix_metric(desc),
            max_evaluations=self.budget,
            seed=self.seed,
            strategy=self.strategy,
        )


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
    rounds = BucketRounds(desc, benchmark)
    outcomes = []
    started = time.perf_counter()
    for group in groups:
        # Validation re-measures on the GPU for minutes: a Ctrl+C skips what is left of it.
        if proceed is not None and not proceed():
            raise MatrixInterrupted(results, shapes)
        ranked = _bucket_results(desc, group, results, shapes, base_values)
        references = [base_values[i] for i in group.indices]
        validation = validate_bucket(
            desc,
            group,
            ranked,
            baseline,
            references,
            rounds,
            top_k=settings.validate_top,
            config=settings.validation,
        )
        winner = _winner(ranked, validation, baseline)
        # The search's values of the configuration it evaluated (before any simplification).
        evaluated = winner if validation.winner is None else validation.winner.config
        winner_values = _values_at(results, shapes, evaluated, n)
        outcomes.append(
            BucketOutcome(
                group=group,
                baseline=baseline,
                winner=winner,
                evaluations=len(ranked.records),
                baseline_values=references,
                winner_values=[winner_values[i] for i in group.indices],
                validation=validation,
                helion_config=_helion_config(rows.get(config_key(evaluated), {})),
            )
        )
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
            trainable, placement, settings.plan(desc, space, points), run_config
        )
        try:
            grid = tuner.fit()
        finally:
            if after is not None:
                after()
        return searcher.results(), trial_metrics(grid)

    return search


def trial_metrics(grid: tune.ResultGrid) -> dict[str, dict[str, Any]]:
    """Each trial's last result, by its configuration (`config_key`)."""
    return {config_key(grid[i].config or {}): grid[i].metrics or {} for i in range(len(grid))}


def per_shape_values(
    desc: KernelDescription, results: SearchResults, rows: dict[str, dict[str, Any]]
) -> list[list[float | None]]:
    """Per evaluation of `results`, its metric at each shape of the matrix (None where that
    shape failed), read from the trials' results (`trial_metrics`)."""
    n = len(desc.matrix())
    return [
        shape_values(rows.get(config_key(r.config), {}), desc.metric, n) for r in results.records
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
