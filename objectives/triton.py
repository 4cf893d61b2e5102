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
from types import ModuleType
from typing import Any

from objectives import _trainable
from objectives._bench import check_and_time
from objectives._bench import split_config
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
    return _trainable.make_trainable(description, WORKER, energy=energy)


WORKER = _trainable.WorkerKind(
    kind="triton",
    target=TARGET,
    payload=_trainable.params_and_controls,
    preload=("torch", "triton"),
    interpret_without_gpu=True,
)


@functools.cache
def load_module(source: str) -> ModuleType:
    """Import a kernel's module from its file, once per process (the module of `entry`)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(f"ciq_kernel_{digest}", source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import kernel source {source!r}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_kernel(source: str, entry: str) -> Any:
    """The JIT function `entry` of the kernel source."""
    return getattr(load_module(source), entry)


def _prepare(
    desc: KernelDescription, params: Mapping[str, Any], controls: Mapping[str, Any]
) -> tuple[Any, tuple[int, ...], dict[str, Any]]:
    """The JIT kernel, grid and keyword arguments of one configuration.

    Raises:
        Exception: a bad source, control or grid (the candidate's fault).
    """
    from ciq_tune.controls import detect_triton

    options = detect_triton(desc.arch).render(controls.get(_CATALOG, {}))
    kernel = _load_kernel(str(desc.source), str(desc.entry))
    grid = desc.launch({**params})["grid"]
    # Sizes go by name: a description's key order is not part of its meaning.
    return kernel, grid, {**desc.launch_sizes(), **params, **options}


def make_launch(
    desc: KernelDescription, config: Mapping[str, Any], *, device: str = "cuda"
) -> Callable[[Mapping[str, Any]], None]:
    """Launch one configuration in this process, outside the isolated worker (re-measurement,
    comparisons with other tuners). The first call compiles.

    Args:
        desc: The kernel description (``kind: triton``).
        config: ``{"params": {...}, "controls": {...}}`` as a trial receives it.
        device: ``"cuda"``, or ``"cpu"`` under ``TRITON_INTERPRET=1``.

    Returns:
        ``launch(tensors)``: the kernel on a dict of named tensors (in `inputs` order).

    Raises:
        ValueError: `config` names something that is not in `desc`.
    """
    params, controls = split_config(desc, config)
    install_allocator(device)
    kernel, grid, kwargs = _prepare(desc, params, controls)

    def launch(tensors: Mapping[str, Any]) -> None:
        kernel[grid](*tensors.values(), **kwargs)

    return launch


_candidates = 0


def evaluate(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's task: compile, check and time one candidate (see `objectives._isolate`).

    Compile failures (including too many resources) are ``compile_error``; a wrong output is
    ``wrong_result``; an error while running (an illegal address, say) is left to escape, so the
    isolated worker reports ``crash`` and replaces itself.
    """
    global _candidates
    import torch

    _candidates += 1
    desc = KernelDescription.model_validate(payload["description"])
    params = payload["params"]
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cpu" if interpret else "cuda"
    install_allocator(device)
    t0 = time.perf_counter()
    try:
        kernel, grid, kwargs = _prepare(desc, params, payload["controls"])
    except Exception as exc:  # a bad source, control or grid is this candidate's fault only
        return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
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
    result = check_and_time(
        desc, launch, seed=seed, device=device, energy=payload["energy"], progress=progress
    )
    result.update(info)
    return result


@functools.cache
def install_allocator(device: str) -> None:
    """Give Triton the global scratch memory that some kernels need at launch, from torch.

    Kernels that make tensor descriptors on the device (`tl.make_tensor_descriptor`, TMA on
    Hopper) need 128 bytes per descriptor and program; without an allocator their launch fails.
    Installed once per process (a context variable of the calling thread).
    """
    import torch
    import triton

    def allocate(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        # torch's caching allocator aligns to at least 256 bytes, above TMA's 128.
        return torch.empty(size, device=device, dtype=torch.int8)

    triton.set_allocator(allocate)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    # Compiler errors carry whole MLIR dumps; the head says what went wrong.
    return text if len(text) <= 2000 else text[:2000] + " …"
