"""One persistent benchmark server per GPU of the Ray cluster, shared by every trial.

Trials compile on CPUs (`objectives._stages`) and send each compiled candidate to a
`BenchmarkServer`: a Ray actor that holds one GPU and keeps that GPU's benchmark workers warm
(`objectives.gpu_workers.GpuWorkers`, as a search on one machine does: `WORKERS_PER_GPU` isolated
workers, warm CUDA contexts, timing inputs drawn once per shape). The server serves that many
requests at once, and only their GPU work holds the GPU's lock, so one worker loads the next
candidate while the other checks and times its own, the GPU times back to back and no two
timings overlap. A candidate that hangs or crashes kills only its worker, which the next request
replaces; the server itself, and every other trial, carries on.

`BenchmarkPool` is the picklable handle that trials call: it prefers a server on the trial's
own node (the compiled kernel is in that node's on-disk cache) and spreads requests over them
round robin. Without GPUs (tests, CPU-only clusters) a server's one worker runs Triton's
interpreter; `BenchmarkPool.start`'s ``cpu_servers`` starts several such servers, standing in
for the GPUs of a node.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
import uuid
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import ray

from objectives._stages import BenchmarkRequest
from objectives.gpu_workers import WORKERS_PER_GPU
from objectives.gpu_workers import GpuWorkers

# Per process: each trial process starts its round robin at its own place.
_turn = itertools.count(os.getpid())
# The servers' calls that are not requests (`node_id`, `stats`, `close`; `warm`, which waits for
# the workers' start): threads of their own, so that they never wait behind the requests that
# fill the others.
_CONTROL = "control"
_WARM = "warm"


class BenchmarkServer:
    """Serves `BenchmarkRequest`s on one GPU, as many at once as it has workers (a threaded
    Ray actor; see module doc).

    Args:
        preload: Modules the workers import when they start (the kind's); every request this
            server serves runs in them, whatever its own ``preload``.
        cpu_env: The workers' environment without a GPU (Triton's interpreter).
        on_gpu: Whether the server holds a GPU (Ray's ``CUDA_VISIBLE_DEVICES``): its workers
            each see it; False, one worker on the CPU.
        per_gpu: Workers on the GPU.
    """

    def __init__(
        self,
        preload: tuple[str, ...] = (),
        cpu_env: Mapping[str, str] | None = None,
        on_gpu: bool = True,
        per_gpu: int = WORKERS_PER_GPU,
    ) -> None:
        self._started = time.perf_counter()
        # The workers start now, in the background: the search's first compiles overlap it.
        self._workers = GpuWorkers(
            preload=preload, cpu_env=cpu_env, gpus=None if on_gpu else [], per_gpu=per_gpu
        )
        self._lock = threading.Lock()
        self._in_flight = 0
        self._busy_since = 0.0
        self._busy_s = 0.0
        self._gpu_s = 0.0

    @ray.method(concurrency_group=_CONTROL)
    def node_id(self) -> str:
        """The Ray node this server runs on."""
        return str(ray.get_runtime_context().get_node_id())

    @ray.method(concurrency_group=_WARM)
    def warm(self) -> float:
        """Wait until the workers have started (imports, CUDA context); seconds from the
        server's start until then (not counted in `stats`)."""
        self._workers.wait_warm()
        return time.perf_counter() - self._started

    def run(self, request: BenchmarkRequest) -> dict[str, Any]:
        """Check and time one candidate in a free warm worker (waiting for one when all are
        busy; see `objectives.gpu_workers.GpuWorkers`)."""
        with self._lock:
            if self._in_flight == 0:
                self._busy_since = time.perf_counter()
            self._in_flight += 1
        result: dict[str, Any] = {}
        try:
            result = self._workers(request)
            return result
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._busy_s += time.perf_counter() - self._busy_since
                gpu_s = result.get("gpu_s")
                if isinstance(gpu_s, int | float) and math.isfinite(gpu_s):
                    self._gpu_s += gpu_s

    @ray.method(concurrency_group=_CONTROL)
    def stats(self) -> dict[str, Any]:
        """``served`` requests; ``busy_s``, seconds during which at least one request was in
        the server (waiting for a worker that starts included); ``gpu_s``, the requests' own
        seconds holding the GPU (their ``gpu_s``); ``alive_s``, seconds since the server
        started; ``workers``; ``ready_s``, seconds from the start until its last worker was
        ready (None: not yet)."""
        now = time.perf_counter()
        workers = self._workers.stats()
        ready = [w["ready_s"] for w in workers]
        with self._lock:
            busy = self._busy_s + (now - self._busy_since if self._in_flight else 0.0)
            gpu_s = self._gpu_s
        return {
            "served": sum(int(w["served"] or 0) for w in workers),
            "busy_s": busy,
            "gpu_s": gpu_s,
            "alive_s": now - self._started,
            "workers": len(workers),
            "ready_s": None if None in ready else max(r for r in ready if r is not None),
        }

    @ray.method(concurrency_group=_CONTROL)
    def close(self) -> None:
        """Stop the workers (their processes exit with the actor anyway)."""
        self._workers.close()


class BenchmarkPool:
    """The benchmark servers of a cluster, called as an `objectives._stages.Benchmarker`.

    Args:
        servers: `BenchmarkServer` actor handles.
        node_ids: The Ray node of each server, or object references to them (resolved when a
            request first needs them, so that starting the servers waits for nothing).
        warming: Object references of the servers' `BenchmarkServer.warm` calls.
        server_cpus: CPUs each server holds (`cpus`: theirs together).

    Example:
        >>> pool = BenchmarkPool.start(preload=("torch", "triton"))  # doctest: +SKIP
        >>> trainable = make_trainable(desc, benchmark=pool)  # doctest: +SKIP
    """

    def __init__(
        self,
        servers: Sequence[Any],
        node_ids: Sequence[Any],
        warming: Sequence[Any] = (),
        *,
        server_cpus: float = 1.0,
    ) -> None:
        if not servers or len(servers) != len(node_ids):
            raise ValueError(
                f"`servers` and `node_ids` must be non-empty and of equal length, got "
                f"{len(servers)} and {len(node_ids)}"
            )
        self.servers = list(servers)
        self.cpus = server_cpus * len(self.servers)
        self._node_ids = list(node_ids)
        self._warming = list(warming)

    def __getstate__(self) -> dict[str, Any]:
        # Trials get the servers, not the warm-ups' object references (this process's).
        return {**self.__dict__, "_warming": []}

    @property
    def node_ids(self) -> list[str]:
        """The Ray node of each server."""
        if any(isinstance(n, ray.ObjectRef) for n in self._node_ids):
            self._node_ids = [str(n) for n in ray.get(self._node_ids)]
        return list(self._node_ids)

    def warming(self) -> bool:
        """Whether a server's benchmark workers are still starting (see `start`)."""
        ready, _ = ray.wait(self._warming, num_returns=len(self._warming), timeout=0)
        return len(ready) < len(self._warming)

    def wait_warm(self) -> list[float]:
        """Block until every server's benchmark workers are warm; the seconds each took from
        the server's start."""
        return [float(s) for s in ray.get(self._warming)] if self._warming else []

    @classmethod
    def start(
        cls,
        *,
        gpus: int | None = None,
        cpu_servers: int = 1,
        preload: tuple[str, ...] = (),
        cpu_env: dict[str, str] | None = None,
        name: str = "ciq-bench",
        server_cpus: float = 1.0,
    ) -> BenchmarkPool:
        """Start one server per GPU of the connected cluster, each named
        ``{name}-gpu{i}-{id}`` in the Ray dashboard, without waiting for anything: each
        server's workers start in the background (imports, CUDA contexts: seconds) while the
        search's first trials start and compile, and requests that come before a worker is
        warm wait for it. `wait_warm` waits for them.

        Args:
            gpus: Servers holding a GPU each (default: every whole GPU of the cluster); 0:
                `cpu_servers` servers without a GPU.
            cpu_servers: Servers without a GPU where `gpus` is 0: one on a CPU-only cluster;
                several stand in for a node's GPUs (tests of how work spreads over them).
            preload: Modules the servers' workers import when they start.
            cpu_env: Worker environment on a server without a GPU.
            name: Prefix of the servers' actor names.
            server_cpus: CPUs each server holds (its workers' host work: loading, checking).

        Raises:
            ValueError: `gpus` < 0, `cpu_servers` < 1 or `server_cpus` < 0.
        """
        if gpus is None:
            gpus = int(ray.cluster_resources().get("GPU", 0))
        if gpus < 0 or cpu_servers < 1 or server_cpus < 0:
            raise ValueError(
                f"`gpus` must be >= 0, `cpu_servers` >= 1 and `server_cpus` >= 0, got "
                f"gpus={gpus}, cpu_servers={cpu_servers}, server_cpus={server_cpus}"
            )
        tag = uuid.uuid4().hex[:6]
        actor: Any = ray.remote
        remote = actor(concurrency_groups={_CONTROL: 1, _WARM: 1})(BenchmarkServer)
        on_gpu = gpus > 0
        per_server = WORKERS_PER_GPU if on_gpu else 1
        servers: list[Any] = [
            remote.options(
                name=f"{name}-{'gpu' if on_gpu else 'cpu'}{i}-{tag}",
                num_cpus=server_cpus,
                num_gpus=1 if on_gpu else 0,
                # As many requests at once as the server has workers.
                max_concurrency=per_server,
                # A server that dies (its node lost) comes back; a request in flight then is a
                # crash for that candidate only.
                max_restarts=-1,
                max_task_retries=0,
            ).remote(preload, dict(cpu_env or {}), on_gpu, per_server)
            for i in range(gpus if on_gpu else cpu_servers)
        ]
        return cls(
            servers,
            [s.node_id.remote() for s in servers],
            [s.warm.remote() for s in servers],
            server_cpus=server_cpus,
        )

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

    def stats(self) -> list[dict[str, Any]]:
        """Each server's `BenchmarkServer.stats`."""
        return list(ray.get([s.stats.remote() for s in self.servers]))

    def shutdown(self) -> None:
        """Stop the servers and their workers."""
        closing = [s.close.remote() for s in self.servers]
        # A server that does not answer (its worker stuck in a kernel) is killed all the same.
        ray.wait(closing, num_returns=len(closing), timeout=10.0)
        for server in self.servers:
            ray.kill(server)
