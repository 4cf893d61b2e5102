"""What every tuning command does around its search: Ray's start, the placement of trials
and the GPUs' benchmark pool, the budget, a local search to its end, the top-k validation
and the run's settings file (`tune`, `resume`, and the matrix, staged and campaign paths).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.cli._interrupt import graceful_interrupt
from ciq_tune.cli._interrupt import report_interrupted
from ciq_tune.cli._interrupt import write_evaluations
from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import SpaceError
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults

if TYPE_CHECKING:
    from ciq_tune.tracking import MlflowWriter
    from ciq_tune.validation import SearchValidation
    from ciq_tune.validation import ValidationConfig
    from searchers.benchmark_pool import BenchmarkPool
    from searchers.local_search import LocalWorkers
    from searchers.placement import Placement
from ciq_tune.cli._outputs import NO_GPU_REASON
from ciq_tune.cli._outputs import write_outputs

# Evaluations of a search without `--budget`; where each shape of a matrix keeps its own
# winner, this many per shape if that is more (bench.matrix_replay on the LLM GEMM matrix's
# sweep, docs/benchmarks.md).
DEFAULT_BUDGET = 50


BUDGET_PER_SHAPE = 8


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


def local_gpus() -> int:
    from objectives._gpu import visible_gpus

    return len(visible_gpus())


def print_local_throughput(search: Any, benchmark: Any, *, started: float | None = None) -> None:
    """`search_throughput`'s line for a local search (the GPU busy share: the evaluations'
    time holding their GPU's lock), and where the first result's time went when the command's
    start (`started`, `time.time()`) is known."""
    from searchers.placement import format_first_result
    from searchers.placement import format_throughput
    from searchers.placement import search_throughput

    gpus = len(benchmark.gpus) if benchmark is not None else local_gpus()
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
    return local_gpus() > 0


RUN_SETTINGS = "run.json"
"""The file of a `tune` output folder that lets `resume` rebuild the search."""


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


def print_throughput(grid: Any, wall_s: float, placement: Placement) -> None:
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
