"""`ciq-tune tune`: search a kernel description and write the outputs folder (`resume` shares
the Ray start, top-k validation and outputs)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.cli._interrupt import graceful_interrupt
from ciq_tune.cli._interrupt import report_interrupted
from ciq_tune.cli._interrupt import write_evaluations
from ciq_tune.cli._options import add_verbose
from ciq_tune.cli._registry import Command
from ciq_tune.cli._registry import register
from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import SpaceError
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from ciq_tune.results import finite_number

if TYPE_CHECKING:
    from ciq_tune.tracking import MlflowWriter
    from ciq_tune.validation import SearchValidation
    from ciq_tune.validation import ValidationConfig
    from searchers.benchmark_pool import BenchmarkPool
    from searchers.local_search import LocalWorkers
    from searchers.placement import Placement


# Evaluations of a search without `--budget`; where each shape of a matrix keeps its own
# winner, this many per shape if that is more (bench.matrix_replay on the LLM GEMM matrix's
# sweep, docs/benchmarks.md).
DEFAULT_BUDGET = 50
BUDGET_PER_SHAPE = 8


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


def ray_init(address: str | None, num_cpus: int | None, verbose: bool) -> bool:
    """Start or join Ray for `tune`/`resume`; False when this process already runs Ray (`main`
    called from a program or notebook that has it), which the command then leaves running."""
    import ray

    if ray.is_initialized():
        return False
    # Forwarding worker output prints each trial's lines and, at shutdown, the tracebacks of
    # actors Ray ends with SIGTERM; only on request.
    ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=verbose)
    return True


VALIDATE_TOP = 3
"""Candidates `tune` re-measures against the baseline at the end, unless told otherwise."""


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

        require_gpu_for_cuda(desc.kind, _local_gpus())
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


def with_vendor_files(desc: Any, files: list[Path]) -> Any:
    """The description with `files` added to its ptxas catalog's vendor controls files.

    Raises:
        CiqTuneError: `files` are given and the description searches no ptxas controls, or one
            is not a file.
    """
    if not files:
        return desc
    if "ptxas" not in desc.controls:
        raise CiqTuneError(
            f"`--vendor-controls`: {desc.path} searches no ptxas controls (its `controls` hold "
            f"{sorted(desc.controls)}); vendor controls files go to ptxas"
        )
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CiqTuneError(f"`--vendor-controls`: {missing} are not files")
    selection = desc.controls["ptxas"]
    offered = [*selection.vendor_controls_files, *(str(f.resolve()) for f in files)]
    chosen = selection.model_copy(update={"vendor_controls_files": offered})
    return desc.model_copy(update={"controls": {**desc.controls, "ptxas": chosen}})


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
        _print_throughput(grid, time.perf_counter() - started, placement)
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


def run_local_search(
    out: Path,
    desc: Any,
    engine: Any,
    baseline: Any,
    local: LocalWorkers,
    args: argparse.Namespace,
    settings: ValidationConfig,
    writer: MlflowWriter | None,
) -> int:
    """A local search of one description to the end of `engine`'s budget (new, or restored by
    `resume`), its validation and `tune`'s outputs in `out`; a Ctrl+C keeps the evaluations and
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
        args.quiet,
        args.tracking,
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
            checkpoint=out / SEARCH_STATE,
        )
    write_evaluations(out, search.results)
    if interrupt.received:
        return report_interrupted(out, search.results)
    print_local_throughput(search, local.benchmark, started=getattr(args, "started", None))
    measure = None if local.benchmark is None else served_measure_of(desc, local.benchmark)
    validation = validate_best(
        desc, search.results, baseline, args.validate_top, settings, measure=measure
    )
    return write_outputs(out, desc, search.results, None, [baseline], validation)


SEARCH_STATE = "search_state.json"
"""A local `tune`'s engine state (JSON), from which `ciq-tune resume` continues it."""


def served_measure_of(desc: Any, benchmark: Any) -> Callable[[Any], float]:
    """One round of a configuration on `benchmark`'s worker, with the search's protocol."""
    from objectives import benchmark_worker_setup
    from objectives.served_rounds import served_measure

    preload, _ = benchmark_worker_setup(desc.kind)
    return served_measure(desc, benchmark, preload=preload)


def _local_gpus() -> int:
    from objectives._gpu import visible_gpus

    return len(visible_gpus())


def print_local_throughput(search: Any, benchmark: Any, *, started: float | None = None) -> None:
    """`search_throughput`'s line for a local search (the GPU busy share: the evaluations'
    time holding their GPU's lock), and where the first result's time went when the command's
    start (`started`, `time.time()`) is known."""
    from searchers.placement import format_first_result
    from searchers.placement import format_throughput
    from searchers.placement import search_throughput

    gpus = len(benchmark.gpus) if benchmark is not None else _local_gpus()
    # This process's evaluations: a resumed search's rows start with the earlier ones' records.
    ran = [row for row in search.rows.values() if "timestamp" in row]
    summary = search_throughput(
        ran,
        wall_s=max(search.wall_s, 1e-9),
        gpus=gpus,
        concurrency=search.workers,
    )
    cut = sum(row.get("shapes_cut") or 0 for row in ran)
    cut_text = f"; {cut} (configuration, shape) pairs cut off before a full round" if cut else ""
    print(
        f"{format_throughput(summary)}; engine {search.engine_s:.1f} s of the "
        f"{search.wall_s:.1f} s (asking and telling){cut_text}",
        flush=True,
    )
    if started is not None and ran:
        ready = [w["ready_s"] for w in benchmark.stats()] if benchmark is not None else []
        ready_text = ", ".join("-" if r is None else f"{r:.1f}" for r in ready)
        where = f"; benchmark workers ready {ready_text} s after they started" if ready else ""
        print(f"{format_first_result(ran, started)}{where}", flush=True)


def earlier_search(
    run: Path | None, desc: Any, space: Any, points: Sequence[Any]
) -> SearchResults | None:
    """The evaluations of the earlier run `--transfer-from` names, read with this
    description's metric; says how many of its best configurations this search starts from
    (after the description's starting `points`)."""
    if run is None:
        return None
    from ciq_tune.engine import EngineConfig
    from ciq_tune.engine.transfer import transfer_genes
    from ciq_tune.report.table import find_table
    from ciq_tune.report.table import read_results

    table = find_table(run)
    earlier = read_results(table, [Objective(name=desc.metric, mode=desc.mode)])
    given = [space.encode(p, fill_defaults=True) for p in points]
    starts = transfer_genes(earlier, space, EngineConfig().transfer_points, given)
    if not starts:
        raise CiqTuneError(
            f"`--transfer-from` {table}: none of its {len(earlier.ok_records)} successful "
            "configurations fits this description's space (other parameters or values) "
            "or is new after its starting points"
        )
    print(
        f"transfer: starting from the {len(starts)} best of {len(earlier.ok_records)} "
        f"successful evaluations in {table} that fit and are new",
        flush=True,
    )
    return earlier


def progress_callbacks(desc: Any, budget: int, quiet: bool) -> list[Any]:
    """The progress line's Tune callback, none with `--quiet`."""
    from ciq_tune.progress import Progress
    from searchers.progress import ProgressCallback

    if quiet:
        return []
    return [ProgressCallback(Progress(desc.metric, desc.mode, budget=budget))]


def require_gpu_for_cuda(kind: str, gpus: int) -> None:
    """A CUDA C++ search on a cluster without GPUs would fail every trial: say so first."""
    if kind == "cuda" and gpus < 1:
        raise CiqTuneError(
            "kind 'cuda' launches its kernel on a CUDA GPU and this Ray cluster has none "
            "(every trial would end 'no CUDA GPU visible'); run on a GPU machine (--address) "
            "or search the kernel's compile statistics as kind: ptx (docs/kernels.md)"
        )


def check_num_cpus(num_cpus: int | None) -> None:
    """`--num-cpus` is at least 1 (a local Ray without CPUs would wait forever)."""
    if num_cpus is not None and num_cpus < 1:
        raise CiqTuneError(
            f"`--num-cpus` must be at least 1 (a local Ray without CPUs runs no trial), got "
            f"{num_cpus}"
        )


def validation_config(repetitions: int, simplify_params: bool) -> ValidationConfig:
    from pydantic import ValidationError

    from ciq_tune.validation import ValidationConfig

    try:
        return ValidationConfig(repetitions=repetitions, simplify_params=simplify_params)
    except ValidationError as exc:
        raise CiqTuneError(
            f"`--validate-repetitions`={repetitions}: {exc.errors()[0]['msg']}"
        ) from exc


def validate_best(
    desc: Any,
    results: Any,
    baseline: Any,
    top_k: int | None,
    settings: ValidationConfig,
    *,
    measure: Callable[[Any], float] | None = None,
) -> SearchValidation:
    """Re-measure the search's top-k against the baseline, or say why not: with `measure`
    (one round on the search's benchmark worker) in this process, else with fresh evaluations
    in a Ray task holding a GPU (while Ray is up) or, without Ray, in this process."""
    from ciq_tune.controls.simplify import validate_and_simplify
    from ciq_tune.validation import RoundCounter
    from ciq_tune.validation import SearchValidation
    from objectives import make_measure
    from objectives import measurement_is_exact

    k = VALIDATE_TOP if top_k is None else top_k
    from searchers.placement import ray_is_up

    on_ray = ray_is_up()
    skip = None
    if desc.kind in ("triton", "helion") and not _gpus_here(on_ray):
        skip = NO_GPU_REASON
    elif measurement_is_exact(desc):
        skip = (
            f"{desc.metric} is a compile statistic that a fresh ptxas run reproduces exactly "
            "(same PTX, options and ptxas version, all recorded here): no noise to test"
        )
    elif k < 1:
        skip = f"switched off (--validate-top {k})"
    elif not any(r.ok and r.config == baseline for r in results.records):
        skip = "the baseline did not run successfully, so there is nothing to compare with"
    if skip is not None:
        return SearchValidation(outcome="skipped", reason=skip, top_k=k, baseline_config=baseline)
    rounds = measure or make_measure(desc)
    if measure is not None:
        from objectives.served_rounds import SERVED_WARMUP_ROUNDS

        settings = settings.model_copy(
            update={"warmup": min(settings.warmup, SERVED_WARMUP_ROUNDS)}
        )
    print(
        f"validating the top {k} against the baseline: {settings.warmup} warm-up and up to "
        f"{settings.repetitions} timed interleaved repetitions each, stopping at the first of "
        f"{len(settings.look_rounds())} looks that decides …",
        flush=True,
    )

    def validate_top(measure: Callable[[Any], float] = rounds) -> SearchValidation:
        # Only what earns its place: each control of the winner, re-measured without it.
        return validate_and_simplify(results, measure, baseline, k=k, config=settings)

    if measure is not None or not on_ray:
        counter, started = RoundCounter(), time.perf_counter()
        here = validate_top(counter.counted(rounds))
        print(f"validation: {counter.summary(time.perf_counter() - started)}", flush=True)
        return here
    import ray

    # A timed kind needs a GPU: on a cluster with GPUs the task asks for one, so it lands on a
    # GPU node and (the search being over) has that GPU to itself.
    gpus = 1 if desc.kind != "ptx" and ray.cluster_resources().get("GPU", 0) >= 1 else 0
    validation: SearchValidation = ray.get(
        ray.remote(num_cpus=1, num_gpus=gpus)(validate_top).remote()
    )
    return validation


def _gpus_here(on_ray: bool) -> bool:
    """Whether the search's cluster (Ray's, or this machine) has a GPU."""
    if on_ray:
        import ray

        return bool(ray.cluster_resources().get("GPU", 0))
    return _local_gpus() > 0


def write_outputs(
    out: Path,
    desc: Any,
    results: Any,
    grid: Any,
    points: Sequence[Any],
    validation: SearchValidation,
) -> int:
    """The outputs of `tune` (and `resume`): evaluations table, controls file of the validated
    winner (the search's best when validation was skipped), validation.json, summary."""
    from ciq_tune.controls import controls_file as cf
    from ciq_tune.controls.controls_file import installed_catalog
    from objectives import measurement_is_exact

    # Every evaluation, failures included, for `ciq-tune report` and for review.
    results.to_parquet(out / "evaluations.parquet")
    results.to_csv(out / "evaluations.csv")
    ok = [
        r
        for r in results.records
        if r.ok and finite_number((r.values or {}).get(desc.metric)) is not None
    ]
    if not ok:
        raise CiqTuneError(
            f"no candidate of {len(results.records)} compiled and ran: "
            f"{failure_summary(results.records)}; details in {out}/evaluations.csv"
        )
    sign = 1 if desc.mode == "min" else -1
    # One ranking everywhere: ties go to the fewest non-default controls (SearchResults.best).
    search_best = results.best(1)[0]
    best_config, best = search_best.config, search_best.values[desc.metric]
    search_value = best
    baseline = next((r.values[desc.metric] for r in ok if r.config == points[0]), None)
    if validation.winner is not None:
        best_config, best = validation.winner.config, validation.winner.search_values[desc.metric]
    elif validation.outcome == "baseline" and baseline is not None:
        best_config, best = points[0], baseline
    dropped: dict[str, dict[str, Any]] = {}
    reset: dict[str, Any] = {}  # parameters set back to the baseline's value
    if validation.simplification is not None:
        # A timed winner without the controls and parameter values its re-measurement showed
        # do nothing.
        from ciq_tune.controls.simplify import PARAMS

        best_config = validation.simplification["config"]
        dropped = dict(validation.simplification["dropped"])
        reset = dropped.pop(PARAMS, {})
    # An exact metric (validation skipped) is re-checked by recompiling without each control.
    if measurement_is_exact(desc) and validation.winner is None and best_config.get("controls"):
        from ciq_tune.controls.simplify import simplify_controls
        from objectives import make_measure

        best_config, dropped = simplify_controls(
            best_config, best, make_measure(desc), mode=desc.mode
        )
    baseline_claim = baseline if timings_are_claims(desc, validation) else None
    improvement = None
    if baseline_claim:
        improvement = round(100.0 * sign * (baseline_claim - best) / abs(baseline_claim), 3)
    # A Triton kernel's file records the Triton it was tuned under, controls or not.
    names = set(best_config.get("controls", {})) | ({"triton"} if desc.kind == "triton" else set())
    catalogs = {
        n: installed_catalog(n, desc.arch, desc.vendor_controls_files(n)) for n in sorted(names)
    }
    record = cf.build(
        kernel=cf.KernelInfo(
            name=desc.name,
            kind=desc.kind,
            source=relative_path(desc.source, out),
            source_sha256=desc.source_sha256(),
            entry=desc.entry,
            arch=desc.arch,
        ),
        catalogs=catalogs,
        controls=best_config.get("controls", {}),
        params=best_config.get("params", {}),
        benchmark=cf.Benchmark(
            metric=desc.metric,
            mode=desc.mode,
            sizes=desc.sizes,
            shapes={i.name: list(desc.shape_of(i)) for i in desc.inputs},
            dtypes={i.name: i.dtype for i in desc.inputs},
            dims={i.name: list(i.shape) for i in desc.inputs},
            arguments=dict(desc.arguments),
            l2=desc.l2,
        ),
        scores=cf.Scores(
            baseline=baseline,
            best=best,
            improvement_pct=improvement,
            remeasured=_remeasured(validation),
        ),
        gpu=cf.detect_gpu() if desc.kind != "ptx" else None,
        validation=validation.to_dict(),
        dropped_controls=dropped,
    )
    path = cf.write(out / f"{desc.name}.controls.yaml", record)
    (out / VALIDATION_FILE).write_text(json.dumps(validation.to_dict(), indent=2) + "\n")
    again = record.scores.remeasured
    remeasured = (
        ""
        if again is None
        else f"re-measured ({again.rounds} interleaved rounds, {100 * again.confidence:.4g} % CI): "
        f"baseline {again.baseline_median:.4g} [{again.baseline_ci[0]:.4g}, "
        f"{again.baseline_ci[1]:.4g}], best {again.best_median:.4g} [{again.best_ci[0]:.4g}, "
        f"{again.best_ci[1]:.4g}], speedup {again.speedup:.4f} [{again.speedup_ci[0]:.4f}, "
        f"{again.speedup_ci[1]:.4f}]\n"
    )
    simplified = ""
    if dropped or reset:
        names_dropped = sorted(f"{c}.{n}" for c, d in dropped.items() for n in d)
        what = " and ".join(
            ([f"dropped {len(names_dropped)} control(s)"] if dropped else [])
            + ([f"reset {len(reset)} parameter(s) to the baseline's value"] if reset else [])
        )
        how = (
            "a paired re-measurement showed not faster beyond noise"
            if validation.simplification is not None
            else "a fresh compile showed change nothing"
        )
        simplified = f"simplified: {what} that {how} ({', '.join(names_dropped + sorted(reset))})\n"
    check = (validation.simplification or {}).get("check")
    if check is not None and "speedup" in check:
        low, high = check["speedup_ci"]
        verdict = "not shipped" if check["verdict"] == "KEPT" else "shipped"
        simplified += (
            f"simplification {verdict}: the winner re-measured {check['speedup']:.4f} "
            f"[{low:.4f}, {high:.4f}] × its simplified configuration\n"
        )
    failures = failure_summary(results.records)
    timed = "" if measurement_is_exact(desc) else f", L2 {desc.l2}"
    print(
        f"{len(results.records)} evaluations ({len(ok)} ok"
        + (f"; {failures}" if failures else "")
        + f"); {desc.metric} in the search (one round each{timed}): "
        f"baseline {_short(baseline)}, best {_short(search_value)}\n{validation.summary()}\n"
        f"{remeasured}{simplified}wrote {path} ({desc.metric} {_short(best)} with "
        f"{json.dumps(best_config)})"
    )
    return 0


def _short(value: Any) -> str:
    """A metric as printed: five significant digits (the file keeps every digit)."""
    return f"{value:.5g}" if isinstance(value, float) else str(value)


def failure_summary(records: Sequence[Any]) -> str:
    """`3 of 40 failed: timeout 2 (first: …); compile_error 1 (first: …)`, or ""."""
    from ciq_tune.progress import Progress

    counts = Progress("-", "min", quiet=True)
    for record in records:
        counts.update(record.status, None, record.info.get("error"))
    return counts.failure_summary()


NO_GPU_REASON = (
    "no GPU: Triton and Helion run under their CPU interpreter here, so the search checked "
    "correctness only; its host-clock timings are not a speedup claim"
)
"""Why `tune` skips validation and claims no improvement for a timed kind without a GPU."""


def timings_are_claims(desc: Any, validation: SearchValidation) -> bool:
    """Whether the search's values may be reported as an improvement: not for the CPU
    interpreter's timings of a Triton/Helion kernel."""
    return not (validation.outcome == "skipped" and validation.reason == NO_GPU_REASON)


def _remeasured(validation: SearchValidation) -> Any:
    """The winner's re-measured medians and speedup with their CIs, for the controls file."""
    from ciq_tune.controls import controls_file as cf

    result = None if validation.winner is None else validation.winner.result
    if result is None:
        return None
    return cf.Remeasured(
        baseline_median=result.baseline.median,
        baseline_ci=(result.baseline.median_ci_low, result.baseline.median_ci_high),
        best_median=result.candidate.median,
        best_ci=(result.candidate.median_ci_low, result.candidate.median_ci_high),
        speedup=result.speedup,
        speedup_ci=(result.speedup_ci_low, result.speedup_ci_high),
        rounds=result.candidate.n,
        confidence=result.config.confidence,
    )


RUN_SETTINGS = "run.json"
"""The file of a `tune` output folder that lets `resume` rebuild the search."""
VALIDATION_FILE = "validation.json"
"""The end-of-search validation of a `tune` output folder (`ciq-tune report` shows it)."""


def default_budget(desc: Any) -> int:
    """`--budget`'s default for one description: `DEFAULT_BUDGET`, or `BUDGET_PER_SHAPE` per
    shape where each shape of its matrix keeps its own winner, if that is more (each shape's
    winner is searched for, by the per-shape descent among others)."""
    from objectives.matrix import descent_shapes

    return max(DEFAULT_BUDGET, BUDGET_PER_SHAPE * len(descent_shapes(desc)))


def search_budget(args: argparse.Namespace, space: Any) -> tuple[str, int]:
    """The engine strategy and evaluation budget of a search: every configuration of the
    listed space once with `--exhaustive`, else the default strategy with `--budget`.

    Raises:
        CiqTuneError: `--exhaustive` on a space that cannot be listed (a continuous
            parameter, or too many configurations).
    """
    if not args.exhaustive:
        return "auto", args.budget
    try:
        return "exhaustive", sum(1 for _ in space.enumerate_genes())
    except SpaceError as exc:
        raise CiqTuneError(f"`--exhaustive`: {exc}") from exc


def write_run_settings(args: argparse.Namespace) -> None:
    settings = {
        "description": str(args.description.resolve()),
        "budget": args.budget,
        "seed": args.seed,
        "address": args.address,
        "num_cpus": args.num_cpus,
        "tracking": args.tracking,
        "trials_per_gpu": args.trials_per_gpu,
        "benchmark": args.benchmark,
        "runtime": args.runtime,
        "validate_top": args.validate_top,
        "validate_repetitions": args.validate_repetitions,
        "simplify_params": args.simplify_params,
        "exhaustive": args.exhaustive,
        "transfer_from": None if args.transfer_from is None else str(args.transfer_from),
        "stages": args.stages,
        "vendor_controls": [str(f.resolve()) for f in args.vendor_controls],
    }
    (args.out / RUN_SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")


def benchmark_pool(kind: str, mode: str) -> BenchmarkPool | None:
    """The per-GPU benchmark servers of a search in benchmark `mode`, started, or None."""
    from searchers.kernel_search import start_benchmark_pool
    from searchers.kernel_search import uses_benchmark_pool

    try:
        staged = uses_benchmark_pool(kind, mode)
    except ValueError as exc:
        raise CiqTuneError(f"`--benchmark`: {exc}") from exc
    if not staged:
        return None
    pool = start_benchmark_pool(kind)
    print(
        f"benchmark servers: {len(pool.servers)}, warming up beside the first compiles", flush=True
    )
    return pool


def place_trials(kind: str, trials_per_gpu: int | None, *, staged: bool = False) -> Placement:
    """Trial resources on the Ray cluster that `ray.init` connected to, printed."""
    from searchers.kernel_search import placement_on_cluster

    placement = placement_on_cluster(kind, trials_per_gpu, staged=staged)
    print(f"placement: {placement.note}", flush=True)
    return placement


def _print_throughput(grid: Any, wall_s: float, placement: Placement) -> None:
    """Evaluations per second, GPU busy fraction and time per phase of the finished search."""
    from searchers.placement import format_throughput
    from searchers.placement import search_throughput

    trials = [grid[i].metrics or {} for i in range(len(grid))]
    summary = search_throughput(
        trials,
        wall_s=wall_s,
        gpus=placement.gpus,
        concurrency=placement.max_concurrent_trials,
    )
    print(format_throughput(summary), flush=True)


def relative_path(path: Path, start: Path) -> str:
    """`path` relative to `start` when possible (the controls file stays movable with it)."""
    return os.path.relpath(path.resolve(), start.resolve())


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
