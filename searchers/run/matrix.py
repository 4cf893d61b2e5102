"""A run of a description with `shapes`: one search over the whole matrix, each evaluation a
configuration at every shape, then each bucket's winner re-measured; on Ray Tune trials or on
this machine's worker processes."""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any

from searchers.run.interrupt import graceful_interrupt
from searchers.run.interrupt import report_kept
from searchers.run.options import VALIDATE_TOP
from searchers.run.outputs import relative_path
from searchers.run.setup import SEARCH_STATE
from searchers.run.setup import print_local_throughput
from searchers.run.setup import ray_session
from searchers.run.setup import search_budget
from searchers.run.setup import trial_resources
from searchers.run.setup import write_run_settings

if TYPE_CHECKING:
    from ray import tune

    from ciq_tune.engine import Engine
    from ciq_tune.tracking import MlflowWriter
    from ciq_tune.validation import ValidationConfig
    from objectives.description import KernelDescription
    from searchers.local_search import LocalWorkers
    from searchers.matrix_search import MatrixSearch
    from searchers.matrix_search import MatrixSettings
    from searchers.run.options import TuneOptions

EVALUATIONS = "evaluations.csv"
"""The matrix search's evaluations table: one row per configuration, its metric at each shape
in columns ``<metric>@<i>`` (shapes in description order)."""


def tune_matrix_description(
    options: TuneOptions,
    desc: KernelDescription,
    settings: ValidationConfig,
    writer: MlflowWriter | None = None,
    local: LocalWorkers | None = None,
    restored: Engine | None = None,
) -> int:
    """Tune the matrix and write OUT/<name>.controls.yaml (schema 2, with the matrix) and
    OUT/evaluations.csv; `restored`: go on with the engine of an interrupted local run of
    OUT (`ciq-tune resume`) instead of starting one."""
    from ciq_tune.controls import controls_file as cf
    from objectives import make_search_space
    from searchers.matrix_record import controls_record
    from searchers.matrix_search import MatrixInterrupted
    from searchers.matrix_search import MatrixSettings
    from searchers.matrix_search import matrix_metric
    from searchers.matrix_search import write_matrix_table

    if restored is None:
        first_shape = desc.at_shape(desc.matrix()[0])
        strategy, budget = search_budget(options, make_search_space(first_shape))
        options.out.mkdir(parents=True, exist_ok=True)
        write_run_settings(options)
    else:
        strategy, budget = "auto", int(restored.budget.max_evaluations or 0)
    matrix_settings = MatrixSettings(
        budget=budget,
        seed=options.seed,
        validate_top=VALIDATE_TOP if options.validate_top is None else options.validate_top,
        validation=settings,
        strategy=strategy,
    )
    try:
        if local is not None:
            search = _tune_locally(options, desc, matrix_settings, writer, local, restored)
        else:
            search = _tune_on_ray(options, desc, matrix_settings, writer)
    except MatrixInterrupted as stopped:
        write_matrix_table(options.out / EVALUATIONS, desc, stopped.results, stopped.shapes)
        records = stopped.results.records
        return report_kept(
            len(records),
            sum(1 for r in records if r.ok),
            f"{options.out / EVALUATIONS} (no controls file)",
            f"continue with `ciq-tune resume {options.out}`"
            if local is not None
            else "a multi-shape search on Ray does not resume: run `ciq-tune tune` again",
        )
    write_matrix_table(options.out / EVALUATIONS, desc, search.results, search.shapes)
    for outcome in search.outcomes:
        print(
            f"{outcome.group.label()}: {desc.metric} baseline {_fmt(outcome.baseline_values)} "
            f"-> {_fmt(outcome.winner_values)} (search values); validation "
            f"{outcome.validation.outcome}"
        )
    record = controls_record(desc, search.outcomes, source=relative_path(desc.source, options.out))
    path = cf.write(options.out / f"{desc.name}.controls.yaml", record)
    print(
        f"{len(search.results.records)} evaluations of {matrix_metric(desc)}, each at "
        f"{len(desc.matrix())} shapes (L2 {desc.l2}), {len(search.outcomes)} buckets; wrote {path}"
    )
    return 0


def _tune_on_ray(
    options: TuneOptions,
    desc: KernelDescription,
    settings: MatrixSettings,
    writer: MlflowWriter | None,
) -> MatrixSearch:
    """The matrix search as Ray Tune trials, each bucket then re-measured on the benchmark
    servers (or in a Ray task holding a GPU without them)."""

    from searchers.interrupt import StopRequested
    from searchers.interrupt import interrupt_tune_run
    from searchers.matrix_search import on_ray
    from searchers.matrix_search import tune_matrix

    with (
        ray_session(options.address, options.num_cpus, options.verbose),
        trial_resources(desc.kind, options.benchmark, options.trials_per_gpu) as (pool, placement),
        graceful_interrupt(interrupt_tune_run) as interrupt,
    ):
        stop = StopRequested(lambda: interrupt.received)
        run_config = _run_config(options, desc.name, stop, writer)
        search = on_ray(desc, settings, placement, run_config)
        return tune_matrix(
            desc, settings, search, benchmark=pool, proceed=lambda: not interrupt.received
        )


def _tune_locally(
    options: TuneOptions,
    desc: KernelDescription,
    settings: MatrixSettings,
    writer: MlflowWriter | None,
    local: LocalWorkers,
    restored: Engine | None,
) -> MatrixSearch:
    """The matrix search on this machine's worker processes (`restored`'s, or a new engine's),
    each bucket then re-measured on its benchmark workers. The engine's state, each
    evaluation's per-shape values with it, is kept in OUT/search_state.json as it goes."""
    from objectives.matrix import descent_shapes
    from searchers.local_search import kernel_engine
    from searchers.local_search import local_callbacks
    from searchers.local_search import search_locally
    from searchers.matrix_search import HELION_CONFIG
    from searchers.matrix_search import matrix_metric
    from searchers.matrix_search import tune_matrix

    print(f"placement: {desc.kind}: {local.slots} evaluation(s) at a time on this machine")
    metric = matrix_metric(desc)
    on_result = local_callbacks(
        desc,
        metric,
        settings.budget,
        options.quiet,
        options.tracking,
        writer,
        done_before=0 if restored is None else len(restored.records),
    )
    with graceful_interrupt() as interrupt:

        def search(
            trainable: Any, space: Any, points: list[Any]
        ) -> tuple[Any, dict[str, dict[str, Any]]]:
            engine = restored or kernel_engine(
                settings.plan(desc, space, points),
                workers=local.slots,
                shapes=descent_shapes(desc),
            )
            done = search_locally(
                trainable,
                engine,
                metric=metric,
                workers=local.slots,
                on_result=on_result,
                stop=lambda: interrupt.received,
                checkpoint=options.out / SEARCH_STATE,
                keep=[*(f"{desc.metric}@{i}" for i in range(len(desc.matrix()))), HELION_CONFIG],
            )
            print_local_throughput(done, local.benchmark, started=options.started)
            return done.results, done.rows

        return tune_matrix(
            desc,
            settings,
            search,
            benchmark=local.benchmark,
            proceed=lambda: not interrupt.received,
        )


def _run_config(
    options: TuneOptions, name: str, stop: tune.Callback, writer: MlflowWriter | None
) -> tune.RunConfig:
    """The search's RunConfig: `tune`'s tracking (through the command's started `writer`) and
    the Ctrl+C hand-over (`stop`)."""
    from ray import tune

    from ciq_tune.tracking import TrackingConfig
    from searchers.tracking import tracking_callbacks

    callbacks = tracking_callbacks(
        TrackingConfig(backend=options.tracking),
        run_dir=options.out,
        search_name=name,
        started_writer=writer,
    )
    storage = str(options.out.resolve() / "ray")
    return tune.RunConfig(name=name, storage_path=storage, verbose=0, callbacks=[*callbacks, stop])


def _fmt(values: list[Any]) -> str:
    return "[" + ", ".join("-" if v is None else f"{v:.4g}" for v in values) + "]"
