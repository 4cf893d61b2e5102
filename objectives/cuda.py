"""CUDA C++ trainable: nvcc with candidate controls and -D parameters, CuPy launch, check, time.

The worker side needs no torch: inputs, the reference, the check and the CUDA-event timing run
on CuPy arrays (`objectives._arrays.CUPY`), so ``pip install 'ciq-tune[cuda]'`` is enough."""

from __future__ import annotations

import base64
import math
import os
import tempfile
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ciq_tune.errors import BenchmarkTimeout
from ciq_tune.errors import CompileError
from objectives import _trainable
from objectives._arrays import CUPY
from objectives._bench import check_and_time
from objectives._bench import split_config
from objectives._compile import CompileCache
from objectives._compile import cache_key
from objectives._compile import parse_ptxas_verbose
from objectives._compile import run_compiler
from objectives.description import KernelDescription

TARGET = "objectives.cuda:evaluate"
_CATALOG = "nvcc"


def make_trainable(
    description: KernelDescription, *, energy: bool = False
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A Ray Tune function trainable that evaluates one configuration of a CUDA C++ kernel.

    Kernel parameters become ``-DNAME=value`` macros, controls become nvcc/ptxas arguments
    (from the nvcc catalog), and the cubin is launched through CuPy on the trial's GPU (no
    torch: inputs, reference and timing are CuPy's) with the description's `grid` and
    `block`: pointers to the `inputs` in order, then the `sizes` as 32-bit ints in order,
    then the `scalars` as 32-bit floats (`kernel_arguments`).
    Failures are data (``status`` ≠ ``ok``, ``time_ms`` NaN).

    Args:
        description: The kernel description (``kind: cuda``).
        energy: Also report NVML energy per call (``energy_mj``) and power (``power_w``).

    Returns:
        ``trainable(config) -> result``, picklable.
    """
    return _trainable.make_trainable(description, WORKER, energy=energy)


WORKER = _trainable.WorkerKind(
    kind="cuda",
    target=TARGET,
    payload=_trainable.params_and_controls,
    # Nothing: CuPy is imported by the first launch, so that a compile error is reported as
    # such where CuPy is missing (the launch then names `pip install 'ciq-tune[cuda]'`).
    preload=(),
    interpret_without_gpu=False,
    # nvcc has its own limit (desc.timeouts.compile_s); the worker's also covers loading.
    compile_timeout_factor=2.0,
)


def nvcc_argv(
    desc: KernelDescription, params: Mapping[str, Any], controls: Mapping[str, Any]
) -> list[str]:
    """The nvcc command (without ``-o`` and the source) for one candidate.

    Raises:
        InvalidControl: A control is not in the installed nvcc's catalog.
    """
    from ciq_tune.controls import detect_nvcc

    catalog = detect_nvcc()
    number = desc.arch.removeprefix("sm_")
    defines = [f"-D{name}={value}" for name, value in params.items()]
    return [
        catalog.executable,
        "-cubin",
        # The -gencode form also assembles sm_90a-only instructions (HOPPER.md).
        f"-gencode=arch=compute_{number},code=sm_{number}",
        "-Xptxas=-v",
        *defines,
        *catalog.render(controls),
    ]


def compile_candidate(
    desc: KernelDescription,
    params: Mapping[str, Any],
    controls: Mapping[str, Any],
    *,
    cache: CompileCache | None = None,
) -> dict[str, Any]:
    """Compile one candidate to a cubin, through the compile cache.

    Returns:
        ``cubin`` (bytes), ``argv``, ``compile_s`` (0 on a cache hit), ``cached`` and the
        entry's ``registers``, ``spill_bytes`` and ``stack_bytes``.

    Raises:
        CompileError: nvcc failed (the message holds the head of its log).
        BenchmarkTimeout: nvcc ran past ``desc.timeouts.compile_s``.
        InvalidControl: A control is not in the installed nvcc's catalog.
    """
    from ciq_tune.controls import detect_nvcc

    argv = nvcc_argv(desc, params, controls)
    key = cache_key(desc.source_sha256(), argv[1:], detect_nvcc().describe())
    hit = cache.get(key) if cache is not None else None
    if hit is not None:
        return {**hit, "cubin": base64.b64decode(hit["cubin"]), "compile_s": 0.0, "cached": True}
    with tempfile.TemporaryDirectory(prefix="ciq-cuda-") as tmp:
        out = Path(tmp) / "kernel.cubin"
        run = run_compiler(
            [*argv, "-o", str(out), str(desc.source)], timeout_s=desc.timeouts.compile_s
        )
        if run.returncode != 0 or not out.is_file():
            raise CompileError(f"nvcc exited with {run.returncode}: {run.log[-3000:]}")
        cubin = out.read_bytes()
    stats = parse_ptxas_verbose(run.log)
    entry = stats.get(str(desc.entry))
    record: dict[str, Any] = {"argv": argv, "compile_s": run.elapsed_s}
    if entry is not None:
        record.update(
            registers=entry.registers, spill_bytes=entry.spill_bytes, stack_bytes=entry.stack_bytes
        )
    if cache is not None:
        cache.put(key, {**record, "cubin": base64.b64encode(cubin).decode()})
    return {**record, "cubin": cubin, "cached": False}


_candidates = 0


def evaluate(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's task: compile, load, check and time one candidate (`objectives._isolate`).

    A launch that faults (illegal address, say) raises out of here, so the isolated worker
    reports ``crash`` and replaces itself with one whose CUDA context is sound.
    """
    global _candidates
    _candidates += 1
    desc = KernelDescription.model_validate(payload["description"])
    params = payload["params"]
    try:
        built = compile_candidate(
            desc, params, payload["controls"].get(_CATALOG, {}), cache=CompileCache()
        )
        dims = desc.launch(params)
    except (CompileError, BenchmarkTimeout, ValueError) as exc:
        status = "timeout" if isinstance(exc, BenchmarkTimeout) else "compile_error"
        return {"status": status, "time_ms": math.nan, "error": f"{type(exc).__name__}: {exc}"}
    info = {k: v for k, v in built.items() if k not in ("cubin", "argv")}
    info["nvcc_args"] = " ".join(built["argv"][1:])
    progress("compiled")
    if not CUPY.is_available():
        return {**info, "status": "crash", "time_ms": math.nan, "error": "no CUDA GPU visible"}
    launch = _load(desc, built["cubin"], dims)
    seed = 1_000_003 * _candidates + os.getpid()
    result = check_and_time(
        desc,
        launch,
        seed=seed,
        device="cuda",
        energy=payload["energy"],
        progress=progress,
        arrays=CUPY,
    )
    return {**result, **info}


def make_launch(desc: KernelDescription, config: Mapping[str, Any]) -> Callable[[Any], None]:
    """Compile and load one configuration in this process, outside the isolated worker
    (re-measurement, comparisons with other tuners), through the compile cache.

    Args:
        desc: The kernel description (``kind: cuda``).
        config: ``{"params": {...}, "controls": {"nvcc": {...}}}`` as a trial receives it.

    Returns:
        ``launch(arrays)``: the kernel on a dict of named CuPy arrays (in `inputs` order).

    Raises:
        ValueError: `config` names something that is not in `desc`.
        CompileError: nvcc failed.
    """
    params, controls = split_config(desc, config)
    built = compile_candidate(desc, params, controls.get(_CATALOG, {}), cache=CompileCache())
    return _load(desc, built["cubin"], desc.launch(params))


def kernel_arguments(desc: KernelDescription, pointers: Sequence[int]) -> tuple[Any, ...]:
    """The CUDA calling convention: the `inputs`' device pointers in order, then the `sizes`
    passed to the kernel as 32-bit ints in order, then the `scalars` as 32-bit floats in
    order (`__global__ void saxpy(const float* x, float* y, int n, float a)`)."""
    import numpy as np

    return (
        *(np.uint64(p) for p in pointers),
        *(np.int32(v) for v in desc.launch_sizes().values()),
        *(np.float32(v) for v in desc.scalars.values()),
    )


def _load(
    desc: KernelDescription, cubin: bytes, dims: Mapping[str, tuple[int, ...]]
) -> Callable[[Mapping[str, Any]], None]:
    """Load a cubin with CuPy and return its launch function over named CuPy arrays."""
    cupy = CUPY.xp
    module = cupy.cuda.function.Module()
    module.load(cubin)
    kernel = module.get_function(str(desc.entry))
    grid = (*dims["grid"], 1, 1)[:3]
    block = (*dims.get("block", (1,)), 1, 1)[:3]
    args_by_ptrs: dict[tuple[int, ...], tuple[Any, ...]] = {}

    def launch(arrays: Mapping[str, Any]) -> None:
        # Kernel arguments are prepared once per input set: host work inside the timed region
        # could leave the GPU idle and be counted as kernel time.
        ptrs = tuple(CUPY.data_ptr(a) for a in arrays.values())
        args = args_by_ptrs.get(ptrs)
        if args is None:
            args = args_by_ptrs[ptrs] = kernel_arguments(desc, ptrs)
        # On CuPy's current stream, where the harness records its events and flushes L2.
        kernel(grid, block, args, stream=cupy.cuda.get_current_stream())

    return launch
