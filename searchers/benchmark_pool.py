"""One persistent benchmark server per GPU of the Ray cluster, shared by every trial.

Trials compile on CPUs (`objectives._stages`) and send each compiled candidate to a
`BenchmarkServer`: a Ray actor that holds one GPU and keeps one isolated benchmark worker on it
(warm CUDA context, timing inputs drawn once per shape), serving requests one at a time from
the actor's queue, so the GPU never idles while trials compile and no two timings overlap. A
candidate that hangs or crashes kills only the server's worker, which the next request
replaces; the server itself, and every other trial, carries on.

`BenchmarkPool` is the picklable handle that trials call: it prefers a server on the trial's
own node (the compiled kernel is in that node's on-disk cache) and spreads requests over them
round robin. Without GPUs (tests, CPU-only clusters) one server runs Triton's interpreter.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any

import ray

from objectives._stages import BenchmarkRequest
from objectives._stages import benchmark_here

# Per process: each trial process starts its round robin at its own place.
_turn = itertools.count(os.getpid())


class BenchmarkServer:
    """Serves `BenchmarkRequest`s on one GPU, one at a time (a Ray actor; see module doc)."""

    def __init__(self) -> None:
        self._served = 0
        self._busy_s = 0.0
        self._started = time.perf_counter()

    def node_id(self) -> str:
        """The Ray node this server runs on."""
        return str(ray.get_runtime_context().get_node_id())

    def warm(self, request: BenchmarkRequest) -> float:
        """Start the benchmark worker with a no-op `request`; seconds it took (not counted in
        `stats`)."""
        t0 = time.perf_counter()
        benchmark_here(request)
        return time.perf_counter() - t0

    def run(self, request: BenchmarkRequest) -> dict[str, Any]:
        """Check and time one candidate in this server's warm worker (see `benchmark_here`)."""
        t0 = time.perf_counter()
        try:
            return benchmark_here(request)
        finally:
            self._served += 1
            self._busy_s += time.perf_counter() - t0

    def stats(self) -> dict[str, float]:
        """Requests served, seconds spent serving them and seconds alive."""
        return {
            "served": self._served,
            "busy_s": self._busy_s,
            "alive_s": time.perf_counter() - self._started,
        }


class BenchmarkPool:
    """The benchmark servers of a cluster, called as an `objectives._stages.Benchmarker`.

    Args:
        servers: `BenchmarkServer` actor handles.
        node_ids: The Ray node of each server.

    Example:
        >>> pool = BenchmarkPool.start(preload=("torch", "triton"))  # doctest: +SKIP
        >>> trainable = make_trainable(desc, benchmark=pool)  # doctest: +SKIP
    """

    def __init__(
        self, servers: Sequence[Any], node_ids: Sequence[str], warming: Sequence[Any] = ()
    ) -> None:
        if not servers or len(servers) != len(node_ids):
            raise ValueError(
                f"`servers` and `node_ids` must be non-empty and of equal length, got "
                f"{len(servers)} and {len(node_ids)}"
            )
        self.servers = list(servers)
        self.node_ids = list(node_ids)
        self._warming = list(warming)

    def __getstate__(self) -> dict[str, Any]:
        # Trials get the servers, not the warm-ups' object references (this process's).
        return {**self.__dict__, "_warming": []}

    def warming(self) -> bool:
        """Whether a server's benchmark worker is still starting (see `start`)."""
        ready, _ = ray.wait(self._warming, num_returns=len(self._warming), timeout=0)
        return len(ready) < len(self._warming)

    def wait_warm(self) -> list[float]:
        """Block until every server's benchmark worker is warm; the seconds each took."""
        return [float(s) for s in ray.get(self._warming)] if self._warming else []

    @classmethod
    def start(
        cls,
        *,
        gpus: int | None = None,
        preload: tuple[str, ...] = (),
        cpu_env: dict[str, str] | None = None,
        name: str = "ciq-bench",
    ) -> BenchmarkPool:
        """Start one server per GPU of the connected cluster (one CPU server without GPUs),
        each named ``{name}-gpu{i}-{id}`` in the Ray dashboard, and have each start its
        benchmark worker (CUDA context, imports: seconds) without waiting for it: the search's
        first trials compile meanwhile, and their requests queue behind the warm-up (an actor
        serves its calls in order). `wait_warm` waits for it.

        Args:
            gpus: Servers to start (default: every whole GPU of the cluster).
            preload: Modules the servers' workers import when they start.
            cpu_env: Worker environment on a server without a GPU.
            name: Prefix of the servers' actor names.
        """
        if gpus is None:
            gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus < 0:
            raise ValueError(f"`gpus` must be >= 0, got gpus={gpus}")
        tag = uuid.uuid4().hex[:6]
        remote: Any = ray.remote(BenchmarkServer)
        servers: list[Any] = [
            remote.options(
                name=f"{name}-{'gpu' if gpus else 'cpu'}{i}-{tag}",
                num_cpus=1,
                num_gpus=1 if gpus else 0,
                # A server that dies (its node lost) comes back; a request in flight then is a
                # crash for that candidate only.
                max_restarts=-1,
                max_task_retries=0,
            ).remote()
            for i in range(max(gpus, 1))
        ]
        warm = BenchmarkRequest(
            target="objectives._stages:ready",
            payload={},
            compile_timeout_s=300.0,
            run_timeout_s=60.0,
            cpu_env=dict(cpu_env or {}),
            preload=preload,
        )
        # An actor serves its calls in order: the node first, then the warm-up.
        node_ids = ray.get([s.node_id.remote() for s in servers])
        return cls(servers, node_ids, [s.warm.remote(warm) for s in servers])

    def __call__(self, request: BenchmarkRequest) -> dict[str, Any]:
        """Serve `request` on a server of this node if there is one, else of any node."""
        here = str(ray.get_runtime_context().get_node_id())
        local = [s for s, n in zip(self.servers, self.node_ids, strict=True) if n == here]
        choices = local or self.servers
        server = choices[next(_turn) % len(choices)]
        try:
            result: dict[str, Any] = dict(ray.get(server.run.remote(request)))
        except ray.exceptions.RayError as exc:
            return {"status": "crash", "error": f"benchmark server failed: {exc}"[:2000]}
        return result

    def stats(self) -> list[dict[str, float]]:
        """Each server's `BenchmarkServer.stats`."""
        return list(ray.get([s.stats.remote() for s in self.servers]))

    def shutdown(self) -> None:
        """Stop the servers (and with them their workers)."""
        for server in self.servers:
            ray.kill(server)
