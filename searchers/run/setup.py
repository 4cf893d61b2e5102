"""What every run does around its search: Ray's start, the placement of trials and the GPUs'
benchmark pool, the budget, the starting points of an earlier run, the run's settings file and
the throughput lines (one description, a matrix, staged controls, `resume`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from ciq_tune.errors import CiqTuneError
from ciq_tune.errors import SpaceError
from ciq_tune.results import Objective
from ciq_tune.results import SearchResults
from searchers.run.options import BUDGET_PER_SHAPE
from searchers.run.options import DEFAULT_BUDGET

if TYPE_CHECKING:
    from searchers.benchmark_pool import BenchmarkPool
    from searchers.placement import Placement
    from searchers.run.options import TuneOptions


@contextmanager
def ray_session(address: str | None, num_cpus: int | None, verbose: bool) -> Iterator[None]:
    """Ray started or joined for `tune`/`resume`, and shut down at the end unless this process
    already ran Ray (`main` called from a program or notebook that has it)."""
    import ray

    started = not ray.is_initialized()
    if started:
        # Forwarding worker output prints each trial's lines and, at shutdown, the tracebacks
        # of actors Ray ends with SIGTERM; only on request.
        ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=verbose)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def with_vendor_files(desc: Any, files: Sequence[Path]) -> Any:
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


SEARCH_STATE = "search_state.json"
"""A local `tune`'s engine state (JSON), from which `ciq-tune resume` continues it."""


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


RUN_SETTINGS = "run.json"
"""The file of a `tune` output folder that lets `resume` rebuild the search."""


def default_budget(desc: Any) -> int:
    """`--budget`'s default for one description: `DEFAULT_BUDGET`, or `BUDGET_PER_SHAPE` per
    shape where each shape of its matrix keeps its own winner, if that is more (each shape's
    winner is searched for, by the per-shape descent among others)."""
    from objectives.matrix import descent_shapes

    return max(DEFAULT_BUDGET, BUDGET_PER_SHAPE * len(descent_shapes(desc)))


def search_budget(options: TuneOptions, space: Any) -> tuple[str, int]:
    """The engine strategy and evaluation budget of a search: every configuration of the
    listed space once with `--exhaustive`, else the default strategy with `--budget`.

    Raises:
        CiqTuneError: `--exhaustive` on a space that cannot be listed (a continuous
            parameter, or too many configurations).
    """
    if not options.exhaustive:
        return "auto", options.evaluations
    try:
        return "exhaustive", sum(1 for _ in space.enumerate_genes())
    except SpaceError as exc:
        raise CiqTuneError(f"`--exhaustive`: {exc}") from exc


def write_run_settings(options: TuneOptions) -> None:
    """`RUN_SETTINGS` in the output folder: what `resume` needs to rebuild the search."""
    settings = {
        "description": str(options.description.resolve()),
        "budget": options.budget,
        "seed": options.seed,
        "address": options.address,
        "num_cpus": options.num_cpus,
        "tracking": options.tracking,
        "trials_per_gpu": options.trials_per_gpu,
        "benchmark": options.benchmark,
        "runtime": options.runtime,
        "validate_top": options.validate_top,
        "validate_repetitions": options.validate_repetitions,
        "simplify_params": options.simplify_params,
        "exhaustive": options.exhaustive,
        "transfer_from": None if options.transfer_from is None else str(options.transfer_from),
        "stages": options.stages,
        "vendor_controls": [str(f.resolve()) for f in options.vendor_controls],
    }
    (options.out / RUN_SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")


@contextmanager
def trial_resources(
    kind: str, mode: str, trials_per_gpu: int | None
) -> Iterator[tuple[BenchmarkPool | None, Placement]]:
    """The per-GPU benchmark servers of a search in benchmark `mode` (started, or None) and the
    trials' resources on the Ray cluster that `ray_session` connected to, printed; the servers
    shut down at the end."""
    from searchers.kernel_search import placement_on_cluster

    pool = _benchmark_pool(kind, mode)
    try:
        placement = placement_on_cluster(kind, trials_per_gpu, staged=pool is not None)
        print(f"placement: {placement.note}", flush=True)
        yield pool, placement
    finally:
        if pool is not None:
            pool.shutdown()


def _benchmark_pool(kind: str, mode: str) -> BenchmarkPool | None:
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
