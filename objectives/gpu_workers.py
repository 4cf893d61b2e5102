"""Warm benchmark workers on each GPU of this machine, without Ray: a local search's
`objectives._stages.Benchmarker`.

Each GPU gets `WORKERS_PER_GPU` `objectives._isolate.IsolatedWorker`s that see only that GPU
(``CUDA_VISIBLE_DEVICES``) and import the kind's modules when they start; the workers start at
once, in the background, so their imports and CUDA contexts overlap the first compiles. A
request takes whichever worker is free (waiting for one when all are busy). A request is host
work (loading the compiled kernel, building inputs) around the GPU work (the check and the
timed round), and only the GPU work holds the GPU's lock (`objectives._gpu.exclusive_gpu`): so
one worker loads the next candidate while another times, the GPU times back to back, and no two
timings overlap. A candidate that hangs or crashes kills only its worker, which the next request
replaces. Without a GPU one worker runs the kind's CPU environment (Triton's interpreter).

`searchers.benchmark_pool` is the same service for a Ray cluster (one actor per GPU).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from objectives._gpu import visible_gpus
from objectives._isolate import close_workers
from objectives._stages import BenchmarkRequest
from objectives._stages import benchmark_worker

WORKERS_PER_GPU = 2
"""Benchmark workers per GPU: one times while the other loads its candidate."""


class GpuWorkers:
    """The benchmark workers of this machine's GPUs (see module doc), called as a
    `objectives._stages.Benchmarker`.

    Args:
        preload: Modules each worker imports when it starts (``("torch", "triton")``).
        cpu_env: The worker's environment where there is no GPU.
        gpus: ``CUDA_VISIBLE_DEVICES`` entries, `per_gpu` workers each (default:
            `objectives._gpu.visible_gpus`); empty: one CPU worker.
        per_gpu: Workers per GPU.

    Example:
        >>> workers = GpuWorkers(preload=("torch", "triton"))  # doctest: +SKIP
        >>> trainable = make_trainable(desc, benchmark=workers)  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        preload: tuple[str, ...] = (),
        cpu_env: Mapping[str, str] | None = None,
        gpus: list[str] | None = None,
        per_gpu: int = WORKERS_PER_GPU,
    ) -> None:
        if per_gpu < 1:
            raise ValueError(f"`per_gpu` must be >= 1, got per_gpu={per_gpu}")
        self.gpus = visible_gpus() if gpus is None else list(gpus)
        envs = [{"CUDA_VISIBLE_DEVICES": g} for g in self.gpus for _ in range(per_gpu)]
        envs = envs or [dict(cpu_env or {})]
        self._workers = [benchmark_worker(env, preload) for env in envs]
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self.served = [0] * len(self._workers)
        self.busy_s = [0.0] * len(self._workers)
        self.ready_s: list[float | None] = [None] * len(self._workers)
        self._started = time.perf_counter()
        self._warm = [
            threading.Thread(target=self._warm_up, args=(i,), daemon=True, name=f"gpu-warm-{i}")
            for i in range(len(self._workers))
        ]
        for thread in self._warm:
            thread.start()

    def _warm_up(self, index: int) -> None:
        """Start worker `index` (imports), then offer it to requests."""
        self._workers[index].warm_up()
        self.ready_s[index] = time.perf_counter() - self._started
        self._free.put(index)

    def wait_warm(self) -> None:
        """Block until every worker has started (or failed to)."""
        for thread in self._warm:
            thread.join()

    def __call__(self, request: BenchmarkRequest) -> dict[str, Any]:
        """Serve `request` on the first free worker (see `objectives._stages`)."""
        index = self._free.get()
        t0 = time.perf_counter()
        try:
            result = self._workers[index].run(
                request.target,
                request.payload,
                compile_timeout_s=request.compile_timeout_s,
                run_timeout_s=request.run_timeout_s,
            )
        finally:
            with self._lock:
                self.served[index] += 1
                self.busy_s[index] += time.perf_counter() - t0
            self._free.put(index)
        result["bench_spawn_s"] = result.pop("worker_spawn_s", 0.0)
        result.pop("wall_s", None)
        result["bench_wall_s"] = time.perf_counter() - t0
        return result

    def stats(self) -> list[dict[str, float | None]]:
        """Per worker: requests served, seconds serving them (waiting for its GPU included),
        seconds from the workers' start until it was ready (None: not yet) and since then."""
        alive = time.perf_counter() - self._started
        with self._lock:
            return [
                {"served": n, "busy_s": busy, "ready_s": ready, "alive_s": alive}
                for n, busy, ready in zip(self.served, self.busy_s, self.ready_s, strict=True)
            ]

    def close(self) -> None:
        """Stop the workers (after their warm-ups end)."""
        self.wait_warm()
        close_workers(self._workers)
