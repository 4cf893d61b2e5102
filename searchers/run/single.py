"""One description's search to its outputs (`search_description`): on this machine's worker
processes (`run_local_search`, which `resume` goes on with) or on Ray Tune trials; each ends
with the top-k validation and the outputs folder."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING
from typing import Any

from searchers.plan import SearchPlan
from searchers.run.interrupt import graceful_interrupt
from searchers.run.interrupt import report_interrupted
from searchers.run.interrupt import write_evaluations
from searchers.run.outputs import write_outputs
from searchers.run.setup import SEARCH_STATE
from searchers.run.setup import print_local_throughput
from searchers.run.setup import print_throughput
from searchers.run.setup import progress_callbacks
from searchers.run.setup import ray_session
from searchers.run.setup import require_gpu_for_cuda
from searchers.run.setup import search_budget
from searchers.run.setup import trial_resources
from searchers.run.setup import write_run_settings
from searchers.run.validate import served_measure_of
from searchers.run.validate import validate_best

if TYPE_CHECKING:
    from ciq_tune.results import SearchResults
    from ciq_tune.tracking import MlflowWriter
    from ciq_tune.validation import ValidationConfig
    from searchers.local_search import LocalWorkers
    from searchers.run.options import TuneOptions


def search_description(
    options: TuneOptions,
    desc: Any,
    space: Any,
    points: list[Any],
    settings: ValidationConfig,
    writer: MlflowWriter | None,
    local: LocalWorkers | None,
    earlier: SearchResults | None = None,
) -> int:
    """One description's search (its options and files known to be good) on `local`'s worker
    processes, or on Ray Tune trials without them; then its validation and outputs.
    `earlier`: the run `transfer_from` names."""
    strategy, budget = search_budget(options, space)
    plan = SearchPlan.of(
        desc,
        space,
        points,
        max_evaluations=budget,
        seed=options.seed,
        strategy=strategy,
        transfer_from=earlier,
    )
    write_run_settings(options)
    if local is None:
        return _search_on_ray(options, desc, plan, settings, writer)
    from searchers.local_search import kernel_engine

    engine = kernel_engine(plan, workers=local.slots)
    return run_local_search(desc, engine, points[0], local, options, settings, writer)


def _search_on_ray(
    options: TuneOptions,
    desc: Any,
    plan: SearchPlan,
    settings: ValidationConfig,
    writer: MlflowWriter | None,
) -> int:
    """The search (`plan`) as Ray Tune trials."""
    # Ray is imported once the arguments and files are known to be good (it takes seconds).
    import ray
    from ray import tune

    from ciq_tune.tracking import TrackingConfig
    from searchers.interrupt import StopRequested
    from searchers.interrupt import interrupt_tune_run
    from searchers.kernel_search import kernel_trainable
    from searchers.kernel_search import kernel_tuner
    from searchers.tracking import tracking_callbacks

    with (
        ray_session(options.address, options.num_cpus, options.verbose),
        trial_resources(desc.kind, options.benchmark, options.trials_per_gpu) as (pool, placement),
    ):
        require_gpu_for_cuda(desc.kind, int(ray.cluster_resources().get("GPU", 0)))
        with graceful_interrupt(interrupt_tune_run) as interrupt:
            tuner, searcher = kernel_tuner(
                kernel_trainable(desc, benchmark=pool),
                placement,
                plan,
                run_config=tune.RunConfig(
                    name=desc.name,
                    storage_path=str(options.out.resolve() / "ray"),
                    verbose=0,
                    callbacks=[
                        *tracking_callbacks(
                            TrackingConfig(backend=options.tracking),
                            run_dir=options.out,
                            search_name=desc.name,
                            started_writer=writer,
                        ),
                        *progress_callbacks(desc, plan.max_evaluations, options.quiet),
                        # A Ctrl+C before Tune's loop listens for a stop is handed over here.
                        StopRequested(lambda: interrupt.received),
                    ],
                ),
            )
            started = time.perf_counter()
            grid = tuner.fit()
        write_evaluations(options.out, searcher.results())
        if interrupt.received:
            return report_interrupted(options.out, searcher.results())
        print_throughput(grid, time.perf_counter() - started, placement)
        # Re-measured on the servers that timed the search, with its protocol.
        measure = None if pool is None else served_measure_of(desc, pool)
        validation = validate_best(
            desc,
            searcher.results(),
            plan.points_to_evaluate[0],
            options.validate_top,
            settings,
            measure=measure,
        )
    return write_outputs(
        options.out, desc, searcher.results(), grid, plan.points_to_evaluate, validation
    )


def run_local_search(
    desc: Any,
    engine: Any,
    baseline: Any,
    local: LocalWorkers,
    options: TuneOptions,
    settings: ValidationConfig,
    writer: MlflowWriter | None,
) -> int:
    """A local search of one description to the end of `engine`'s budget (new, or restored by
    `resume`), its validation and the outputs in ``options.out``; a Ctrl+C keeps the evaluations and
    the engine's state (`resume` continues it)."""
    from searchers.local_search import local_callbacks
    from searchers.local_search import local_trainable
    from searchers.local_search import search_locally

    print(f"placement: {desc.kind}: {local.slots} evaluation(s) at a time on this machine")
    budget = int(engine.budget.max_evaluations or 0)
    on_result = local_callbacks(
        desc,
        desc.metric,
        budget,
        options.quiet,
        options.tracking,
        writer,
        done_before=len(engine.records),
    )
    with graceful_interrupt() as interrupt:
        search = search_locally(
            local_trainable(desc, local.benchmark),
            engine,
            metric=desc.metric,
            workers=local.slots,
            on_result=on_result,
            stop=lambda: interrupt.received,
            checkpoint=options.out / SEARCH_STATE,
        )
    write_evaluations(options.out, search.results)
    if interrupt.received:
        return report_interrupted(options.out, search.results)
    print_local_throughput(search, local.benchmark, started=options.started)
    measure = None if local.benchmark is None else served_measure_of(desc, local.benchmark)
    validation = validate_best(
        desc, search.results, baseline, options.validate_top, settings, measure=measure
    )
    return write_outputs(options.out, desc, search.results, None, [baseline], validation)
