"""The trainable of the kinds that compile and run in the isolated worker (triton, cuda, helion).

Each kind describes itself with a `WorkerKind` (its worker function, how a configuration becomes
the worker's payload, what the worker preloads); `make_trainable` and `evaluate_isolated` are
the same for all of them: failures are data (``status`` ≠ ``ok``, ``time_ms`` NaN), never
exceptions, and the trainable is picklable (no closure over live objects).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from objectives._bench import split_config
from objectives._isolate import run_isolated
from objectives._stages import Benchmarker
from objectives._stages import evaluate_in_stages
from objectives._stages import worker_env
from objectives.description import KernelDescription

Trainable = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class WorkerKind:
    """How one kernel kind evaluates a configuration in the isolated worker.

    Attributes:
        kind: the description's ``kind`` this applies to.
        target: ``"module:function"`` the worker runs with the payload.
        payload: the configuration's part of the payload (``params``, ``controls``…); raises
            ValueError for a configuration the kind cannot take (reported as a crash).
        preload: modules the worker imports once, before the first task.
        interpret_without_gpu: without a GPU, run Triton's interpreter (``TRITON_INTERPRET=1``).
        compile_timeout_factor: the worker's compile limit in units of the description's
            ``timeouts.compile_s`` (above 1 when the compiler has that limit itself and the
            worker also loads the result).
        compile_target: a staged kind's compile task (`objectives._stages`): compiles the
            candidate into the compiler's on-disk cache and returns its statistics.
        benchmark_target: a staged kind's benchmark task: loads, checks and times it.
    """

    kind: str
    target: str
    payload: Callable[[KernelDescription, Mapping[str, Any]], dict[str, Any]]
    preload: tuple[str, ...]
    interpret_without_gpu: bool
    compile_timeout_factor: float = 1.0
    compile_target: str | None = None
    benchmark_target: str | None = None

    @property
    def cpu_env(self) -> dict[str, str]:
        """The worker's environment where it has no GPU."""
        return {"TRITON_INTERPRET": "1"} if self.interpret_without_gpu else {}


def params_and_controls(desc: KernelDescription, config: Mapping[str, Any]) -> dict[str, Any]:
    """The payload part of a kind with kernel parameters and control catalogs."""
    params, controls = split_config(desc, config)
    return {"params": params, "controls": controls}


def make_trainable(
    description: KernelDescription,
    worker: WorkerKind,
    *,
    energy: bool = False,
    benchmark: Benchmarker | None = None,
) -> Trainable:
    """``trainable(config) -> result`` evaluating configurations of `description` in the
    isolated worker of `worker`'s kind, or (with `benchmark`, for a staged kind) compiling them
    there and having `benchmark` check and time them (`objectives._stages`).

    Raises:
        ValueError: `description` is of another kind, or `benchmark` is given for a kind with
            no compile and benchmark targets.
    """
    if description.kind != worker.kind:
        raise ValueError(
            f"`description.kind` must be {worker.kind!r}, got kind={description.kind!r}"
        )
    if benchmark is not None and (worker.compile_target is None or worker.benchmark_target is None):
        raise ValueError(f"kind {worker.kind!r} has no compile and benchmark stages")
    data = description.model_dump(mode="json")
    return functools.partial(_trainable, worker, data, energy, benchmark)


def _trainable(
    worker: WorkerKind,
    data: dict[str, Any],
    energy: bool,
    benchmark: Benchmarker | None,
    config: dict[str, Any],
) -> dict[str, Any]:
    desc = KernelDescription.model_validate(data)
    return evaluate_isolated(desc, config, worker, energy=energy, benchmark=benchmark)


def evaluate_isolated(
    desc: KernelDescription,
    config: Mapping[str, Any],
    worker: WorkerKind,
    *,
    energy: bool = False,
    benchmark: Benchmarker | None = None,
) -> dict[str, Any]:
    """Evaluate one configuration in this process's warm isolated worker, or compile it there
    and have `benchmark` time it (see `make_trainable`)."""
    try:
        fields = worker.payload(desc, config)
    except ValueError as exc:
        return {"status": "crash", "time_ms": math.nan, "error": str(exc)}
    payload = {"description": desc.model_dump(mode="json"), **fields, "energy": energy}
    if benchmark is not None and worker.compile_target and worker.benchmark_target:
        result = evaluate_in_stages(
            compile_target=worker.compile_target,
            benchmark_target=worker.benchmark_target,
            payload=payload,
            compile_timeout_s=worker.compile_timeout_factor * desc.timeouts.compile_s,
            run_timeout_s=desc.timeouts.run_s,
            cpu_env=worker.cpu_env,
            preload=worker.preload,
            benchmark=benchmark,
        )
    else:
        result = run_in_worker(worker, desc, worker.target, payload)
    result.setdefault("time_ms", math.nan)
    return result


def run_in_worker(
    worker: WorkerKind, desc: KernelDescription, target: str, payload: dict[str, Any]
) -> dict[str, Any]:
    """Run `target` with `payload` in the worker of `worker`'s kind, with `desc`'s limits."""
    env = worker_env(worker.cpu_env)
    return run_isolated(
        target,
        payload,
        compile_timeout_s=worker.compile_timeout_factor * desc.timeouts.compile_s,
        run_timeout_s=desc.timeouts.run_s,
        env=env,
        preload=worker.preload,
    )
