"""Evaluations in two stages: compile in the trial's worker, benchmark in a GPU's warm worker.

A timed candidate spends ~0.4 s compiling on a CPU and ~0.07 s on the GPU (persistent matmul
on an H200). Run in one process per trial, each trial holds a CUDA context and takes turns on
the GPU through `objectives._gpu.exclusive_gpu`, and the GPU idles while trials compile. Split
in two, any number of trials compile at once (in their own isolated workers, on every CPU),
each writing the compiled kernel into the compiler's on-disk cache (Triton's
``TRITON_CACHE_DIR``), and one persistent benchmark worker per GPU (warm CUDA context, timing
inputs drawn once per shape) loads each kernel from that cache and runs the measurement
protocol (`objectives._bench.check_and_time`) on it, one candidate after the other.

The benchmark side is a `Benchmarker`: any callable taking a `BenchmarkRequest`. In one
process it is `benchmark_here`; `searchers.benchmark_pool` serves the same requests from one
Ray actor per GPU, so this layer never imports Ray. Both sides run their task in an
`objectives._isolate.IsolatedWorker`: a kernel that hangs or crashes kills only that worker,
which is replaced, and the outcome (``timeout``, ``crash``) is data.
"""

from __future__ import annotations

import atexit
import functools
import math
import time
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Protocol

from ciq_tune.errors import MeasurementError
from objectives._isolate import IsolatedWorker
from objectives._isolate import run_isolated

# Result keys the compile stage contributes to the evaluation's result.
_COMPILE_KEYS = ("compile_s", "compiles", "n_regs", "n_spills", "shared_bytes", "worker_spawn_s")


@dataclass(frozen=True)
class BenchmarkRequest:
    """One candidate to check and time in a GPU's benchmark worker.

    Attributes:
        target: ``"package.module:function"`` of the benchmark task (see `objectives._isolate`).
        payload: Its picklable argument (the description as JSON data, params, controls).
        compile_timeout_s: Seconds allowed to load the compiled kernel (a compile, if the
            on-disk cache misses, e.g. on another node).
        run_timeout_s: Seconds allowed for the check and the timing.
        cpu_env: Environment of the worker where the benchmark side has no GPU (Triton's
            interpreter: ``{"TRITON_INTERPRET": "1"}``).
        preload: Modules a new worker imports before it takes tasks.
    """

    target: str
    payload: dict[str, Any]
    compile_timeout_s: float
    run_timeout_s: float
    cpu_env: Mapping[str, str] = field(default_factory=dict)
    preload: tuple[str, ...] = ()


class Benchmarker(Protocol):
    """Runs a `BenchmarkRequest` and returns its result dict (``status`` and metrics)."""

    def __call__(self, request: BenchmarkRequest) -> dict[str, Any]: ...


@functools.cache
def has_gpu() -> bool:
    """Whether this process sees a CUDA device (`objectives._gpu.visible_gpus`)."""
    from objectives._gpu import visible_gpus

    return bool(visible_gpus())


def worker_env(cpu_env: Mapping[str, str]) -> dict[str, str]:
    """The isolated worker's extra environment in this process: none with a GPU, else
    `cpu_env`. A kind with no CPU environment (CUDA C++) never asks torch about GPUs."""
    return {} if not cpu_env or has_gpu() else dict(cpu_env)


COMPILE_NICE = 10
"""The niceness of the compile stage's workers (`objectives._isolate.NICE_ENV`): with every
CPU compiling, the loop that proposes candidates and the GPU's benchmark workers come first."""


def compile_env(cpu_env: Mapping[str, str]) -> dict[str, str]:
    """The compile stage's worker environment: `worker_env` at a lower priority."""
    from objectives._isolate import NICE_ENV

    return {**worker_env(cpu_env), NICE_ENV: str(COMPILE_NICE)}


GPU_WARM = "objectives._gpu_warm"
"""The module a benchmark worker imports after its kind's: its GPU's context made as it
starts."""


def benchmark_worker(env: Mapping[str, str], preload: tuple[str, ...]) -> IsolatedWorker:
    """A GPU's benchmark worker: `preload`, then `GPU_WARM`. Started by its first task or
    `IsolatedWorker.warm_up`. Replaced on memory only, never after a number of tasks: a run
    sends it thousands of short ones (a validation round each), and a replacement costs
    seconds of imports and a new CUDA context while the GPU waits."""
    return IsolatedWorker(env=env, preload=(*preload, GPU_WARM), max_tasks=None)


# This process's benchmark workers, apart from its compile workers (`run_isolated`'s), keyed by
# environment and preloaded modules.
_BENCH_WORKERS: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], IsolatedWorker] = {}


def benchmark_here(request: BenchmarkRequest) -> dict[str, Any]:
    """Serve `request` in this process's warm benchmark worker (started on first use; one per
    environment, separate from the compile stage's workers).

    Returns:
        The task's result with ``bench_spawn_s`` (seconds starting the worker, 0 when warm) and
        ``bench_wall_s``: seconds from receiving the request to the result (worker start,
        kernel load, check and timing).
    """
    t0 = time.perf_counter()
    env = worker_env(request.cpu_env)
    key = (tuple(sorted(env.items())), request.preload)
    worker = _BENCH_WORKERS.get(key)
    if worker is None:
        worker = _BENCH_WORKERS[key] = benchmark_worker(env, request.preload)
    result = worker.run(
        request.target,
        request.payload,
        compile_timeout_s=request.compile_timeout_s,
        run_timeout_s=request.run_timeout_s,
    )
    result["bench_spawn_s"] = result.pop("worker_spawn_s", 0.0)
    result.pop("wall_s", None)
    result["bench_wall_s"] = time.perf_counter() - t0
    return result


@atexit.register
def _close_bench_workers() -> None:
    for worker in _BENCH_WORKERS.values():
        worker.close()


def metric_value(name: str, metric: str, result: Mapping[str, Any], config: Any) -> float:
    """`result`'s finite `metric` for one re-measurement of `config` of kernel `name`.

    Raises:
        MeasurementError: the run failed (its status and the tail of its error) or its value is
            not a finite number.
    """
    value = result.get(metric)
    if result.get("status") != "ok" or not isinstance(value, int | float):
        raise MeasurementError(
            f"{name}: {result.get('status')} when re-measuring {config}: "
            f"{str(result.get('error', ''))[-500:]}"
        )
    if not math.isfinite(value):
        raise MeasurementError(f"{name}: {metric}={value} for {config}")
    return float(value)


def ready(payload: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    """A task that does nothing: sent once to start a worker before the first candidate."""
    progress("compiled")
    return {"status": "ok"}


def evaluate_in_stages(
    *,
    compile_target: str,
    benchmark_target: str,
    payload: dict[str, Any],
    compile_timeout_s: float,
    run_timeout_s: float,
    cpu_env: Mapping[str, str],
    preload: tuple[str, ...],
    benchmark: Benchmarker,
) -> dict[str, Any]:
    """Compile one candidate in this process's isolated worker, then have `benchmark` time it.

    Args:
        compile_target: Task that compiles the candidate into the on-disk cache and returns
            ``status`` and compile statistics.
        benchmark_target: Task that loads the compiled candidate, checks and times it.
        payload: Argument of both tasks.
        compile_timeout_s: Seconds allowed for compiling (and, on the benchmark side, loading).
        run_timeout_s: Seconds allowed for the check and the timing.
        cpu_env: Worker environment where a side has no GPU.
        preload: Modules the workers import when they start.
        benchmark: Where the benchmark runs (`benchmark_here`, or a GPU's server).

    Returns:
        The benchmark's result (or the compile stage's failure) with the compile stage's
        statistics, ``worker_spawn_s`` (starting either worker), ``gpu_wait_s`` (seconds
        queued for the GPU's benchmark worker: the round trip minus its own time) and
        ``wall_s``.
    """
    t0 = time.perf_counter()
    compiled = run_isolated(
        compile_target,
        payload,
        compile_timeout_s=compile_timeout_s,
        # The compile task reports "compiled" as its last act: nothing runs after it.
        run_timeout_s=compile_timeout_s,
        env=compile_env(cpu_env),
        preload=preload,
    )
    if compiled.get("status") != "ok":
        compiled.setdefault("compile_s", compiled.get("wall_s", math.nan))
        return compiled
    request = BenchmarkRequest(
        target=benchmark_target,
        payload=payload,
        compile_timeout_s=compile_timeout_s,
        run_timeout_s=run_timeout_s,
        cpu_env=dict(cpu_env),
        preload=preload,
    )
    sent = time.perf_counter()
    result = dict(benchmark(request))
    round_trip = time.perf_counter() - sent
    own = result.get("bench_wall_s")
    queued = round_trip - own if isinstance(own, int | float) else 0.0
    result["gpu_wait_s"] = max(queued, 0.0) + float(result.get("gpu_wait_s") or 0.0)
    spawn = float(compiled.get("worker_spawn_s") or 0.0)
    bench_spawn = result.get("bench_spawn_s")
    if isinstance(bench_spawn, int | float) and math.isfinite(bench_spawn):
        spawn += bench_spawn
    result.update({k: compiled[k] for k in _COMPILE_KEYS if k in compiled})
    result["worker_spawn_s"] = spawn
    result["wall_s"] = time.perf_counter() - t0
    return result
