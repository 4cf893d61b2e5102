"""`ciq-tune tune`: its arguments, and a run dispatched to the path it takes (one description
here or on Ray; a matrix, staged controls or a campaign in `_matrix`, `_staged`, `_campaign`).
What the paths share is in `_run` (Ray, placement, budget, validation) and `_outputs`."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.cli._interrupt import graceful_interrupt
from ciq_tune.cli._interrupt import report_interrupted
from ciq_tune.cli._interrupt import write_evaluations
from ciq_tune.cli._options import add_verbose
from ciq_tune.cli._outputs import write_outputs
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register
from ciq_tune.cli._run import BUDGET_PER_SHAPE
from ciq_tune.cli._run import DEFAULT_BUDGET
from ciq_tune.cli._run import VALIDATE_TOP
from ciq_tune.cli._run import benchmark_pool
from ciq_tune.cli._run import check_num_cpus
from ciq_tune.cli._run import default_budget
from ciq_tune.cli._run import earlier_search
from ciq_tune.cli._run import local_gpus
from ciq_tune.cli._run import place_trials
from ciq_tune.cli._run import print_throughput
from ciq_tune.cli._run import progress_callbacks
from ciq_tune.cli._run import ray_init
from ciq_tune.cli._run import require_gpu_for_cuda
from ciq_tune.cli._run import run_local_search
from ciq_tune.cli._run import search_budget
from ciq_tune.cli._run import served_measure_of
from ciq_tune.cli._run import validate_best
from ciq_tune.cli._run import validation_config
from ciq_tune.cli._run import with_vendor_files
from ciq_tune.cli._run import write_run_settings
from ciq_tune.errors import CiqTuneError

if TYPE_CHECKING:
    from ciq_tune.tracking import MlflowWriter
    from ciq_tune.validation import ValidationConfig
    from searchers.local_search import LocalWorkers


def _tune_args(parser: argparse.ArgumentParser) -> None:
    from ciq_tune.validation import VALIDATION_DEFAULTS

    parser.add_argument(
        "description",
        type=Path,
        nargs="+",
        help="kernel description file (YAML or JSON); several run as a campaign: all searches "
        "at once on the Ray cluster, OUT/campaign.csv lists them (docs/cluster.md)",
    )
    parser.add_argument(
        "--budget",
        type=int,
        help=f"evaluations (default {DEFAULT_BUDGET}; where each shape of a matrix keeps its own "
        f"winner, {BUDGET_PER_SHAPE} per shape if that is more)",
    )
    parser.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--num-cpus", type=int, help="CPUs of a local Ray (default: all)")
    parser.add_argument(
        "--trials-per-gpu",
        type=int,
        metavar="N",
        help="trials in flight per GPU (default: 1 with --benchmark in-trial, where they take "
        "turns on the GPU; with per-GPU benchmark servers, as many as the CPUs hold)",
    )
    parser.add_argument(
        "--benchmark",
        choices=["auto", "per-gpu", "in-trial"],
        default="auto",
        help="where candidates are timed: per-gpu, one persistent benchmark server per GPU while "
        "trials only compile (Triton); in-trial, each trial's own worker; auto (default): "
        "per-gpu for Triton on a cluster with GPUs",
    )
    parser.add_argument(
        "--runtime",
        choices=["auto", "local", "ray"],
        default="auto",
        help="where the search runs: local, worker processes on this machine (every CPU but "
        "one compiles, two benchmark workers per GPU time; no Ray to start); ray, Ray Tune "
        "trials on a Ray cluster (a local one without --address); auto (default): ray with "
        "--address, RAY_ADDRESS, --stages or several descriptions, else local",
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        metavar="SHAPE",
        help="campaign: one search per shape of each description's matrix, 'all' or labels "
        "such as M=16,N=4096,K=4096",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="staged search: the kernel parameters first with the compilers' defaults (70 %% "
        "of --budget), then the description's compiler controls on the 3 best parameter sets; "
        "prints what the controls added (search values, and re-measured with a CI when "
        "validation re-measured both stages' winners; docs/validation.md)",
    )
    parser.add_argument(
        "--search-timeout",
        type=float,
        metavar="S",
        help="campaign: stop a search's trials after S seconds, keeping its evaluations "
        "(default: no limit)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("ciq-tune-out"), help="output folder (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    parser.add_argument(
        "--tracking",
        choices=["mlflow", "log", "none"],
        default="mlflow",
        help="record trials in MLflow (an embedded sqlite store in OUT/mlflow.db; view it with "
        "`mlflow ui --backend-store-uri sqlite:///OUT/mlflow.db`), as log lines, or not at all",
    )
    parser.add_argument(
        "--validate-top",
        type=int,
        metavar="K",
        help="after the search, re-measure the K best distinct configurations interleaved with "
        f"the baseline and write the best KEPT one, or the baseline (default {VALIDATE_TOP}; "
        "skipped for PTX compile statistics, which a recompile reproduces exactly; 0: off)",
    )
    parser.add_argument(
        "--validate-repetitions",
        type=int,
        default=VALIDATION_DEFAULTS["repetitions"],
        metavar="N",
        help="timed repetitions of each side per candidate (default %(default)s)",
    )
    parser.add_argument(
        "--simplify-params",
        action="store_true",
        help="after validation, also reset each parameter of the winner that differs from the "
        "baseline's unless a paired re-measurement shows it faster (its controls are always "
        "judged so; each reset is one more comparison)",
    )
    parser.add_argument(
        "--transfer-from",
        type=Path,
        metavar="RUN",
        help="start from an earlier run of this kernel (on another GPU, or another compiler): "
        "its output folder or evaluations table; its 4 best configurations that fit this "
        "space are evaluated first (one description without `shapes`)",
    )
    parser.add_argument(
        "--exhaustive",
        action="store_true",
        help="evaluate every configuration of the listed space once, whatever --budget says "
        "(a search whose space holds no more configurations than --budget does so anyway)",
    )
    parser.add_argument(
        "--vendor-controls",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="offer your own vendor controls file to the search as one opaque ptxas choice "
        "(--apply-controls FILE, against no file; repeatable; needs ptxas >= 13.3 and a "
        "description whose controls hold ptxas; the same as its "
        "`controls.ptxas.vendor_controls_files`)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress line while the search runs (default: every 2 s on stderr, "
        "`done/budget evaluations, best <metric>, evals/s, failed: <status> <count>`)",
    )
    add_verbose(parser)


def _tune(args: argparse.Namespace) -> int:
    from ciq_tune.tracking import TrackingConfig
    from ciq_tune.tracking import background_writer
    from objectives import load_description
    from objectives import make_search_space
    from objectives import starting_points

    if args.budget is not None and args.budget < 1:
        raise CiqTuneError(f"`--budget` must be a positive evaluation count, got {args.budget}")
    if args.trials_per_gpu is not None and args.trials_per_gpu < 1:
        raise CiqTuneError(
            f"`--trials-per-gpu` must be a positive integer, got {args.trials_per_gpu}"
        )
    if args.validate_top is not None and args.validate_top < 0:
        raise CiqTuneError(
            f"`--validate-top` must be 0 (off) or a positive count, got {args.validate_top}"
        )
    check_num_cpus(args.num_cpus)
    if args.transfer_from is not None and (args.stages or len(args.description) > 1 or args.shapes):
        raise CiqTuneError(
            "`--transfer-from` starts one search of one description: not with --stages, "
            "several descriptions or --shapes"
        )
    if args.exhaustive and (args.stages or len(args.description) > 1 or args.shapes):
        raise CiqTuneError(
            "`--exhaustive` lists one description's space: not with --stages, several "
            "descriptions or --shapes"
        )
    if args.runtime == "local" and (args.stages or len(args.description) > 1 or args.shapes):
        raise CiqTuneError(
            "`--runtime local` runs one description's search (with or without `shapes`): "
            "--stages, several descriptions and --shapes run on Ray (--runtime ray)"
        )
    if args.runtime == "local" and args.address:
        raise CiqTuneError("`--runtime local` runs on this machine: not with --address")
    if args.stages or len(args.description) > 1 or args.shapes:
        args.budget = DEFAULT_BUDGET if args.budget is None else args.budget
    if args.stages:
        from ciq_tune.cli._staged import tune_staged_command

        return tune_staged_command(args)
    if len(args.description) > 1 or args.shapes:
        if args.vendor_controls:
            raise CiqTuneError(
                "`--vendor-controls` applies to one description; in a campaign name the file "
                "in each description's `controls.ptxas.vendor_controls_files`"
            )
        from ciq_tune.cli._campaign import tune_campaign_command

        return tune_campaign_command(args)
    args.description = args.description[0]
    settings = validation_config(args.validate_repetitions, args.simplify_params)
    desc = with_vendor_files(load_description(args.description), args.vendor_controls)
    args.budget = default_budget(desc) if args.budget is None else args.budget
    local = None
    if runtime_of(args) == "local":
        # The workers start first: their imports overlap everything until the first compile.
        from searchers.local_search import start_local_workers

        require_gpu_for_cuda(desc.kind, local_gpus())
        local = start_local_workers(desc.kind, args.benchmark, args.num_cpus)
    try:
        space = None if desc.shapes else make_search_space(desc)
        points = [] if space is None else starting_points(desc, space)
        args.earlier = (
            None if space is None else earlier_search(args.transfer_from, desc, space, points)
        )
        args.out.mkdir(parents=True, exist_ok=True)
        # The MLflow writer starts before Ray (or the engine) is imported and started
        # (seconds), which its own start (importing MLflow, opening the store) overlaps, and
        # finishes its backlog while the command validates and writes the results; it returns
        # once every record is written.
        with background_writer(
            TrackingConfig(backend=args.tracking), run_dir=args.out, search_name=desc.name
        ) as writer:
            if desc.shapes:
                from ciq_tune.cli._matrix import tune_matrix_command

                return tune_matrix_command(args, desc, settings, writer, local)
            if local is not None:
                return _search_locally(args, desc, space, points, settings, writer, local)
            return _search(args, desc, space, points, settings, writer)
    finally:
        if local is not None:
            local.close()


def _search(
    args: argparse.Namespace,
    desc: Any,
    space: Any,
    points: list[Any],
    settings: ValidationConfig,
    writer: MlflowWriter | None,
) -> int:
    """`tune` of one description on Ray once its arguments and files are known to be good."""
    # Ray is imported once the arguments and files are known to be good (it takes seconds).
    import ray
    from ray import tune

    from ciq_tune.tracking import TrackingConfig
    from searchers.interrupt import StopRequested
    from searchers.interrupt import interrupt_tune_run
    from searchers.kernel_search import kernel_trainable
    from searchers.kernel_search import kernel_tuner
    from searchers.tracking import tracking_callbacks

    strategy, budget = search_budget(args, space)
    write_run_settings(args)
    started_ray = ray_init(args.address, args.num_cpus, args.verbose)
    pool = None
    try:
        pool = benchmark_pool(desc.kind, args.benchmark)
        placement = place_trials(desc.kind, args.trials_per_gpu, staged=pool is not None)
        require_gpu_for_cuda(desc.kind, int(ray.cluster_resources().get("GPU", 0)))
        with graceful_interrupt(interrupt_tune_run) as interrupt:
            tuner, searcher = kernel_tuner(
                kernel_trainable(desc, benchmark=pool),
                placement,
                space=space,
                metric=desc.metric,
                mode=desc.mode,
                max_evaluations=budget,
                strategy=strategy,
                seed=args.seed,
                points_to_evaluate=points,
                transfer_from=args.earlier,
                run_config=tune.RunConfig(
                    name=desc.name,
                    storage_path=str(args.out.resolve() / "ray"),
                    verbose=0,
                    callbacks=[
                        *tracking_callbacks(
                            TrackingConfig(backend=args.tracking),
                            run_dir=args.out,
                            search_name=desc.name,
                            started_writer=writer,
                        ),
                        *progress_callbacks(desc, budget, args.quiet),
                        # A Ctrl+C before Tune's loop listens for a stop is handed over here.
                        StopRequested(lambda: interrupt.received),
                    ],
                ),
            )
            started = time.perf_counter()
            grid = tuner.fit()
        write_evaluations(args.out, searcher.results())
        if interrupt.received:
            return report_interrupted(args.out, searcher.results())
        print_throughput(grid, time.perf_counter() - started, placement)
        # Re-measured on the servers that timed the search, with its protocol.
        measure = None if pool is None else served_measure_of(desc, pool)
        validation = validate_best(
            desc, searcher.results(), points[0], args.validate_top, settings, measure=measure
        )
    finally:
        if pool is not None:
            pool.shutdown()
        if started_ray:
            ray.shutdown()
    return write_outputs(args.out, desc, searcher.results(), grid, points, validation)


def runtime_of(args: argparse.Namespace) -> str:
    """``local`` or ``ray``: `--runtime`, or for ``auto`` Ray when a cluster is named
    (`--address`, ``RAY_ADDRESS``), else this machine's worker processes."""
    if args.runtime != "auto":
        return str(args.runtime)
    return "ray" if args.address or os.environ.get("RAY_ADDRESS") else "local"


def _search_locally(
    args: argparse.Namespace,
    desc: Any,
    space: Any,
    points: list[Any],
    settings: ValidationConfig,
    writer: MlflowWriter | None,
    local: LocalWorkers,
) -> int:
    """`tune` of one description on this machine's worker processes (`--runtime local`)."""
    from searchers.local_search import kernel_engine

    strategy, budget = search_budget(args, space)
    write_run_settings(args)
    engine = kernel_engine(
        space=space,
        metric=desc.metric,
        mode=desc.mode,
        budget=budget,
        seed=args.seed,
        points_to_evaluate=points,
        workers=local.slots,
        strategy=strategy,
        transfer_from=args.earlier,
    )
    return run_local_search(args.out, desc, engine, points[0], local, args, settings, writer)


register(
    Command(
        "tune",
        "search kernel parameters and compiler controls; write the best controls file",
        "Run a Ray Tune search with CompileIQSearcher over the description's parameters and\n"
        "compiler controls. The compiler defaults and curated presets are evaluated first. At\n"
        "the end the K best configurations are re-measured interleaved with the defaults (the\n"
        "baseline; ratio of medians, paired bootstrap CI and Wilcoxon signed-rank test,\n"
        "KEPT/REJECTED, see docs/validation.md); the best\n"
        "KEPT one, or the baseline when none is kept, is written to OUT/<name>.controls.yaml\n"
        "with the statistics. OUT also gets evaluations.parquet/.csv and validation.json.\n"
        "--stages searches the parameters first, then the compiler controls on the 3 best\n"
        "parameter sets, and says what the controls added.\n\n"
        "  ciq-tune tune examples/kernels/ptx/spill.yaml --budget 40 --num-cpus 2\n"
        "  ciq-tune tune examples/kernels/triton/matmul.yaml --budget 200 --validate-top 5\n"
        "  ciq-tune tune examples/kernels/triton/matmul.yaml --budget 60 --stages\n"
        "  ciq-tune tune kernel.yaml --address ray://head:10001 --out results/",
        _tune_args,
        _tune,
    )
)
