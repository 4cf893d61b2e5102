"""Triton trainable: JIT a kernel with candidate parameters and options, check it, time it."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import time
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from objectives._bench import check_and_time
from objectives._bench import split_config
from objectives._isolate import run_isolated
from objectives.description import KernelDescription

TARGET = "objectives.triton:evaluate"
# Name of the control catalog whose rendering gives Triton's compile-option keyword arguments.
_CATALOG = "triton"


def make_trainable(
    description: KernelDescription, *, energy: bool = False
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A Ray Tune function trainable that evaluates one configuration of a Triton kernel.

    The trainable returns one result dict (Ray Tune records it as the trial's final result);
    failures are data (``status`` ≠ ``ok``, ``time_ms`` NaN), never exceptions. Each candidate
    runs in this process's isolated worker; without a GPU that worker runs Triton's
    interpreter (``TRITON_INTERPRET=1``), which checks correctness and times with the host
    clock.

    Args:
        description: The kernel description (``kind: triton``).
        energy: Also report NVML energy per call (``energy_mj``) and power (``power_w``).

    Returns:
        ``trainable(config) -> result``, picklable (no closure over live objects).
    """
    if description.kind != "triton":
        raise ValueError(f"`description.kind` must be 'triton', got kind={description.kind!r}")
    data = description.model_dump(mode="json")
    return functools.partial(_trainable, data, energy)


def _trainable(data: dict[str, Any], energy: bool, config: dict[str, Any]) -> dict[str, Any]:
    desc = KernelDescription.model_validate(data)
    return evaluate_isolated(desc, config, energy=energy)


def evaluate_isolated(
    desc: KernelDescription, config: dict[str, Any], *, energy: bool = False
) -> dict[str, Any]:
    """Evaluate one configuration in the isolated worker (see `make_trainable`).

    Returns:
        The result dict, with the configuration's ``params`` and ``controls`` echoed back.
    """
    try:
        params, controls = split_config(desc, config)
    except ValueError as exc:
        return {"status": "crash", "time_ms": math.nan, "error": str(exc)}
    payload = {
        "description": desc.model_dump(mode="json"),
        "params": params,
        "controls": controls,
        "energy": energy,
    }
    env = {} if _has_gpu() else {"TRITON_INTERPRET": "1"}
    result = run_isolated(
        TARGET,
        payload,
        compile_timeout_s=desc.timeouts.compile_s,
        run_timeout_s=desc.timeouts.run_s,
        env=env,
        preload=("torch", "triton"),
    )
    result.setdefault("time_ms", math.nan)
    return result


@functools.cache
def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


@functools.cache
def _load_kernel(source: str, entry: str) -> Any:
    """Import the kernel's module from its file (once per worker) and return the JIT function."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"ciq_kernel_{digest}", source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import kernel source {source!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, entry)


_candidates = 0


def evaluate(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's task: compile, check and time one candidate (see `objectives._isolate`).

    Compile failures (including too many resources) are ``compile_error``; a wrong output is
    ``wrong_result``; an error while running (an illegal address, say) is left to escape, so the
    isolated worker reports ``crash`` and replaces itself.
    """
    global _candidates
    import torch

    from ciq_tune.controls import detect_triton

    _candidates += 1
    desc = KernelDescription.model_validate(payload["description"])
    params = payload["params"]
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cpu" if interpret else "cuda"
    t0 = time.perf_counter()
    try:
        options = detect_triton(desc.arch).render(payload["controls"].get(_CATALOG, {}))
        kernel = _load_kernel(str(desc.source), desc.entry)
        grid = desc.launch({**params})["grid"]
    except Exception as exc:  # a bad source, control or grid is this candidate's fault only
        return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
    # Sizes go by name: a description's key order is not part of its meaning.
    kwargs = {**desc.sizes, **params, **options}
    info: dict[str, Any] = {}
    if not interpret:
        # Compile ahead of the first launch so that compile time and failures are measured alone.
        probe = [torch.empty(0, dtype=getattr(torch, s.dtype), device=device) for s in desc.inputs]
        try:
            compiled = kernel.warmup(*probe, grid=grid, **kwargs)
            compiled._init_handles()  # loads the module: fails here on too much shared memory
        except Exception as exc:
            return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
        info = {"n_regs": compiled.n_regs, "n_spills": compiled.n_spills}
        info["shared_bytes"] = compiled.metadata.shared
    info["compile_s"] = time.perf_counter() - t0
    progress("compiled")

    def launch(tensors: Mapping[str, Any]) -> None:
        kernel[grid](*tensors.values(), **kwargs)

    # A different seed per candidate in this worker: every check sees new data.
    seed = 1_000_003 * _candidates + os.getpid()
    result = check_and_time(desc, launch, seed=seed, device=device, energy=payload["energy"])
    result.update(info)
    return result


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    # Compiler errors carry whole MLIR dumps; the head says what went wrong.
    return text if len(text) <= 2000 else text[:2000] + " …"
