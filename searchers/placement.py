"""Where trials run: Ray resources per trial, trials sharing a GPU, and a search's throughput.

A GPU trial spends most of its time compiling on a CPU and a fraction of it on the GPU, so
several trials may share one GPU (a fractional Ray GPU each): they compile concurrently, and
the objectives serialise the GPU part with a per-GPU lock (`objectives._gpu.exclusive_gpu`),
so that no timing ever overlaps another trial's kernels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Kinds whose trials run kernels on a GPU; a PTX trial only compiles.
GPU_KINDS = ("cuda", "triton", "helion")

BENCHMARK_MODES = {
    "per-gpu": "one persistent benchmark server per GPU while trials only compile (Triton)",
    "in-trial": "each trial's own worker",
    "auto": "per-gpu for Triton on a cluster with GPUs",
}
"""Where a search's candidates are timed, and what each choice means: per-GPU benchmark
servers (`searchers.benchmark_pool`) or the trial's own worker, taking turns on a shared GPU."""


@dataclass(frozen=True)
class Placement:
    """Resources of one trial and how many trials run at a time.

    Attributes:
        resources: Ray resources per trial, for `ray.tune.with_resources`
            (``{"cpu": 1, "gpu": 0.25}`` for four trials per GPU).
        max_concurrent_trials: Trials at a time (`TuneConfig.max_concurrent_trials`). Always
            set: without it Tune keeps one trial pending for a custom searcher, so
            `CompileIQSearcher` trials would run one at a time whatever the CPUs.
        gpus: Whole GPUs the search uses (0 for compile-only or CPU-only searches).
        trials_per_gpu: Trials that share one GPU.
        note: One line saying where trials run, for the log.
    """

    resources: dict[str, float]
    max_concurrent_trials: int
    gpus: int
    trials_per_gpu: int
    note: str

    @property
    def steady_state(self) -> bool:
        """Whether the engine should propose a candidate whenever a trial finishes: with
        several GPU trials at a time, waiting for a generation's slowest compile would leave
        the others idle."""
        return self.gpus > 0 and self.max_concurrent_trials > 1


def plan_placement(
    kind: str,
    *,
    cluster_gpus: float,
    cluster_cpus: float,
    trials_per_gpu: int | None = None,
    cpus_per_trial: float = 1.0,
    staged: bool = False,
) -> Placement:
    """Resources and concurrency for a search over a kernel of `kind`.

    Staged (`objectives._stages`), trials only compile: each asks for CPUs alone, and one
    benchmark server per GPU (one CPU each, `searchers.benchmark_pool`) does all the GPU work,
    so trials fill every other CPU of the cluster.

    Args:
        kind: The description's kind (``ptx``, ``cuda``, ``triton``, ``helion``).
        cluster_gpus: GPUs of the Ray cluster (``ray.cluster_resources().get("GPU", 0)``).
        cluster_cpus: CPUs of the Ray cluster (``ray.cluster_resources().get("CPU", 0)``);
            without GPUs, as many trials run at a time as `cpus_per_trial` fit (at least 1).
        trials_per_gpu: Trials sharing each GPU (default: 1; staged, as many as the CPUs left
            by the benchmark servers hold).
        cpus_per_trial: CPUs reserved per trial (compilers are mostly single-threaded).
        staged: Trials compile and benchmark servers time (see above).

    Raises:
        ValueError: `trials_per_gpu` < 1 or `cpus_per_trial` <= 0.
    """
    if trials_per_gpu is not None and (not isinstance(trials_per_gpu, int) or trials_per_gpu < 1):
        raise ValueError(
            f"`trials_per_gpu` must be a positive integer, got trials_per_gpu={trials_per_gpu!r}"
        )
    if not cpus_per_trial > 0:
        raise ValueError(f"`cpus_per_trial` must be > 0, got cpus_per_trial={cpus_per_trial}")
    cpu_only = {"cpu": cpus_per_trial}
    cpu_slots = max(1, math.floor(cluster_cpus / cpus_per_trial))
    on_cpus = f"{cpu_slots} trial(s) at a time on {cluster_cpus:g} CPU(s)"
    per_gpu = trials_per_gpu or 1
    if kind not in GPU_KINDS:
        return Placement(cpu_only, cpu_slots, 0, per_gpu, f"{kind}: compile-only, {on_cpus}")
    gpus = math.floor(cluster_gpus)
    if staged:
        servers = max(gpus, 1)
        free = max(1, math.floor((cluster_cpus - servers) / cpus_per_trial))
        concurrent = min(free, gpus * trials_per_gpu) if trials_per_gpu and gpus else free
        where = f"{gpus} GPU(s)" if gpus else "a CPU (Triton's interpreter)"
        return Placement(
            cpu_only,
            concurrent,
            gpus,
            math.ceil(concurrent / servers),
            f"{kind}: {concurrent} trial(s) at a time compile on CPUs, {servers} benchmark "
            f"server(s) time them on {where}",
        )
    if gpus < 1:
        return Placement(
            cpu_only,
            cpu_slots,
            0,
            per_gpu,
            f"{kind}: no GPU in the Ray cluster, {on_cpus}; Triton runs its interpreter "
            "(correctness only), CUDA and Helion trials cannot run",
        )
    # Ray keeps four decimals of a fractional resource: 1/3 → 0.3333, three still fit in 1.
    share = round(1.0 / per_gpu, 4)
    concurrent = gpus * per_gpu
    return Placement(
        {"cpu": cpus_per_trial, "gpu": share},
        concurrent,
        gpus,
        per_gpu,
        f"{kind}: {concurrent} trial(s) at a time on {gpus} GPU(s), {per_gpu} per GPU "
        f"(GPU share {share}); benchmarks take turns on each GPU",
    )


def ray_is_up() -> bool:
    """Whether this process runs Ray (looked up, never imported here: it takes seconds)."""
    import sys

    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


def search_throughput(
    trials: Sequence[Mapping[str, Any]], *, wall_s: float, gpus: int, concurrency: int
) -> dict[str, Any]:
    """Evaluations per second, GPU busy fraction and where a search's time went.

    Args:
        trials: One result per trial (the metrics a trial reported: ``compile_s``,
            ``gpu_s``, ``gpu_wait_s``, ``worker_spawn_s``, ``wall_s`` and Ray's
            ``time_total_s``; missing or non-finite values count as 0).
        wall_s: Wall-clock seconds of the whole search (``Tuner.fit()``).
        gpus: GPUs the search used (the busy fraction is per GPU).
        concurrency: Trials that could run at a time.

    Returns:
        ``evaluations``, ``wall_s``, ``evals_per_s``, ``evals_per_s_after_first`` (from the
        first result to the last by Ray's whole-second ``timestamp``: the rate once workers
        have started; None when the trials have no timestamps or span under 2 s),
        ``gpu_busy_fraction`` (seconds the trials held a GPU over ``wall_s × gpus``; None
        without GPUs) and ``mean_s``: per evaluation, the mean of each phase plus
        ``outside_trials`` (trial slots not running a trial: starting actors, Ray scheduling
        and result handling, the searcher, idle slots).
    """
    if not wall_s > 0:
        raise ValueError(f"`wall_s` must be > 0, got wall_s={wall_s}")
    n = len(trials)

    def total(key: str) -> float:
        return sum(_finite(t.get(key)) for t in trials)

    phases = ("worker_spawn_s", "compile_s", "gpu_wait_s", "gpu_s", "wall_s", "time_total_s")
    mean = {key: total(key) / n if n else math.nan for key in phases}
    slots = max(concurrency, 1) * wall_s
    mean["outside_trials"] = (slots - total("time_total_s")) / n if n else math.nan
    stamps = [t.get("timestamp") for t in trials]
    after_first = None
    if n > 1 and all(isinstance(v, int | float) for v in stamps):
        span = max(stamps) - min(stamps)  # type: ignore[type-var,operator]
        after_first = (n - 1) / span if span >= 2 else None
    return {
        "evaluations": n,
        "wall_s": wall_s,
        "evals_per_s": n / wall_s,
        "evals_per_s_after_first": after_first,
        "concurrency": concurrency,
        "gpu_busy_fraction": total("gpu_s") / (wall_s * gpus) if gpus > 0 else None,
        "mean_s": mean,
    }


def format_throughput(summary: Mapping[str, Any]) -> str:
    """One line for a terminal from `search_throughput`'s summary."""
    mean = summary["mean_s"]
    busy = summary["gpu_busy_fraction"]
    busy_text = "no GPU" if busy is None else f"GPU busy {100 * busy:.0f} %"
    after = summary.get("evals_per_s_after_first")
    after_text = "" if after is None else f", {after:.2f} after the first result"
    return (
        f"{summary['evaluations']} evaluations in {summary['wall_s']:.1f} s = "
        f"{summary['evals_per_s']:.2f} evals/s{after_text} ({summary['concurrency']} at a time, "
        f"{busy_text}); per evaluation: compile {mean['compile_s']:.2f} s, GPU "
        f"{mean['gpu_s']:.2f} s, waiting for the GPU {mean['gpu_wait_s']:.2f} s, worker start "
        f"{mean['worker_spawn_s']:.2f} s, outside trials {mean['outside_trials']:.2f} s"
    )


def format_first_result(trials: Sequence[Mapping[str, Any]], started: float) -> str:
    """One line on where the first result's time went: when it came after the command started
    (`started`, `time.time()`), when its evaluation was handed out, and its phases (waiting for
    its worker's start, compiling, queued for the GPU's benchmark worker and that worker's
    start, on the GPU)."""
    first = min(trials, key=lambda t: _finite(t.get("timestamp")) or math.inf)
    at = _finite(first.get("timestamp")) - started
    handed_out = at - _finite(first.get("time_total_s"))
    return (
        f"first result at {at:.1f} s: handed out at {handed_out:.1f} s; worker start "
        f"{_finite(first.get('worker_spawn_s')):.2f} s, compile "
        f"{_finite(first.get('compile_s')):.2f} s, waiting for the GPU "
        f"{_finite(first.get('gpu_wait_s')):.2f} s (its worker's start "
        f"{_finite(first.get('bench_spawn_s')):.2f} s), GPU {_finite(first.get('gpu_s')):.2f} s"
    )


def _finite(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0
