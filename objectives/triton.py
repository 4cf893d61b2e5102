"""Triton trainable: JIT a kernel with candidate parameters and options, check it, time it."""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from ciq_tune.runtime.triton_kernel import KernelEntry
from objectives import _trainable
from objectives._bench import check_and_time
from objectives._bench import split_config
from objectives._stages import Benchmarker
from objectives.description import KernelDescription
from objectives.matrix import compile_key
from objectives.matrix import constexpr_names
from objectives.matrix import evaluate_shapes
from objectives.matrix import first_of_each_key
from objectives.protocol import BACK_TO_BACK_PROTOCOL
from objectives.protocol import DEFAULT_PROTOCOL
from objectives.protocol import MeasurementProtocol
from objectives.triton_entry import kernel_entry

TARGET = "objectives.triton:evaluate"
# Name of the control catalog whose rendering gives Triton's compile-option keyword arguments.
_CATALOG = "triton"


def make_trainable(
    description: KernelDescription,
    *,
    energy: bool = False,
    benchmark: Benchmarker | None = None,
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
        benchmark: Where candidates are checked and timed (`objectives._stages`): given, the
            trial only compiles (into Triton's on-disk cache) and `benchmark` times, e.g. a
            GPU's persistent worker (`searchers.benchmark_pool`); None, the trial's own
            worker does both, taking turns on the GPU with the trials that share it.

    Returns:
        ``trainable(config) -> result``, picklable (no closure over live objects).
    """
    return _trainable.make_trainable(description, WORKER, energy=energy, benchmark=benchmark)


WORKER = _trainable.WorkerKind(
    kind="triton",
    target=TARGET,
    payload=_trainable.params_and_controls,
    # This module too: its imports would otherwise fall on the first candidate's compile.
    preload=("torch", "triton", "objectives.triton"),
    interpret_without_gpu=True,
    compile_target="objectives.triton:compile_candidate",
    benchmark_target="objectives.triton:benchmark_candidate",
)


def _prepare(
    desc: KernelDescription, params: Mapping[str, Any], controls: Mapping[str, Any]
) -> tuple[KernelEntry, tuple[int, ...], dict[str, Any]]:
    """The kernel entry, grid and keyword arguments of one configuration.

    Raises:
        Exception: a bad source, control or grid (the candidate's fault).
    """
    from ciq_tune.controls import detect_triton

    options = detect_triton(desc.arch).render(controls.get(_CATALOG, {}))
    entry = kernel_entry(str(desc.source), str(desc.entry))
    grid = desc.launch({**params})["grid"]
    # Sizes go by name: a description's key order is not part of its meaning.
    return entry, grid, {**desc.launch_arguments(), **desc.scalars, **params, **options}


# `triton.Config` launch options a description may search, as params or Triton controls.
_CONFIG_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def autotune_points(desc: KernelDescription) -> list[dict[str, Any]]:
    """The configurations of the `@triton.autotune` the kernel ships with, as partial
    configurations of this description: its kernel parameters by name, and the launch options
    (``num_warps`` …) as parameters or, where the description has none of that name, as the
    Triton controls it searches. None when the kernel has no autotuner or its source does not
    import here (the trials then report that)."""
    try:
        entry = kernel_entry(str(desc.source), str(desc.entry))
    except Exception:  # the source's own failure: every trial reports it
        return []
    from ciq_tune.controls import detect_triton

    selection = desc.controls.get(_CATALOG)
    searched = (
        set(
            detect_triton(desc.arch).space(
                selection.include, selection.exclude, selection.allow_numerics_changes
            )
        )
        if selection is not None
        else set()
    )
    points = []
    for config in entry.configs:
        options = {o: getattr(config, o, None) for o in _CONFIG_OPTIONS}
        values = {**config.kwargs, **{k: v for k, v in options.items() if v is not None}}
        params = {k: v for k, v in values.items() if k in desc.params}
        controls = {
            k: v for k, v in options.items() if v is not None and k in searched - set(params)
        }
        point: dict[str, Any] = {"params": params} if params else {}
        if controls:
            point["controls"] = {_CATALOG: controls}
        points.append(point)
    return points


def _launch(
    entry: KernelEntry, grid: tuple[int, ...], tensors: Mapping[str, Any], kwargs: dict[str, Any]
) -> None:
    args, named = entry.bind(tensors, kwargs)
    entry.jit[grid](*args, **named)


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
    entry, grid, kwargs = _prepare(desc, params, controls)
    return functools.partial(_launch, entry, grid, kwargs=kwargs)


_candidates = 0


def _compile(
    desc: KernelDescription,
    params: Mapping[str, Any],
    controls: Mapping[str, Any],
    *,
    device: str,
    load: bool,
) -> tuple[Any, tuple[int, ...], dict[str, Any], dict[str, Any]] | dict[str, Any]:
    """Compile one configuration ahead of its first launch (a hit in Triton's on-disk cache
    when another process compiled it), so compile time and failures are measured alone.

    Args:
        desc: The kernel description.
        params: Kernel parameters.
        controls: Controls per catalog.
        device: ``"cuda"``, or ``"cpu"`` for the interpreter (nothing to compile).
        load: Also load the module onto the GPU, which fails on too much shared memory; the
            compile stage of `objectives._stages` leaves that to the benchmark worker.

    Returns:
        ``(entry, grid, kwargs, info)``, or a ``compile_error`` result: a bad source, control,
        grid or resource use is this candidate's fault only.
    """
    import torch

    t0 = time.perf_counter()
    try:
        entry, grid, kwargs = _prepare(desc, params, controls)
    except Exception as exc:
        return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
    info: dict[str, Any] = {}
    if device == "cuda":
        probe = {
            s.name: torch.empty(0, dtype=getattr(torch, s.dtype), device=device)
            for s in desc.inputs
        }
        try:
            args, named = entry.bind(probe, kwargs)
            compiled = entry.jit.warmup(*args, grid=grid, **named)
            if load:
                compiled._init_handles()
        except Exception as exc:
            return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
        info = {"shared_bytes": compiled.metadata.shared}
        if load:
            # Loading the module sets the register and spill counts.
            info.update(n_regs=compiled.n_regs, n_spills=compiled.n_spills)
    info["compile_s"] = time.perf_counter() - t0
    return entry, grid, kwargs, info


def _device() -> str:
    return "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


def evaluate(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's task: compile, check and time one candidate (see `objectives._isolate`),
    at every shape of a description with a matrix (`objectives.matrix.evaluate_shapes`).

    Compile failures (including too many resources) are ``compile_error``; a wrong output is
    ``wrong_result``; an error while running (an illegal address, say) is left to escape, so the
    isolated worker reports ``crash`` and replaces itself.
    """
    return _run_matrix(payload, progress, protocol=DEFAULT_PROTOCOL, load_key="compile_s")


def compile_candidate(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The compile stage's task (`objectives._stages`): compile one candidate into Triton's
    on-disk cache, once per compile key of its matrix, with nothing launched, and return its
    compile statistics (``compiles``: the kernels compiled). It fails only when every key does:
    the benchmark stage then reports each shape's own failure."""
    desc = KernelDescription.model_validate(payload["description"])
    try:
        firsts = first_of_each_key(desc, _shape_keys(desc)) if desc.shapes else [desc]
    except Exception as exc:
        return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
    device = _device()
    outcomes = [
        _compile(at, payload["params"], payload["controls"], device=device, load=False)
        for at in firsts
    ]
    compiled = [c[3] for c in outcomes if not isinstance(c, dict)]
    if not compiled:
        return outcomes[0]  # type: ignore[return-value]
    progress("compiled")
    return {
        **compiled[0],
        "status": "ok",
        "compile_s": sum(info["compile_s"] for info in compiled),
        "compiles": len(firsts),
    }


def benchmark_candidate(payload: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The benchmark stage's task, in a GPU's persistent worker: load the candidate compiled
    by `compile_candidate` (from the on-disk cache), check it and time it at every shape (back
    to back with the server's previous candidate: `objectives.protocol.BACK_TO_BACK_PROTOCOL`).

    Returns:
        `evaluate`'s result, with ``load_s`` (seconds loading the compiled kernels) in place of
        ``compile_s``, which the compile stage reports.
    """
    return _run_matrix(payload, progress, protocol=BACK_TO_BACK_PROTOCOL, load_key="load_s")


def _run_matrix(
    payload: dict[str, Any],
    progress: Callable[[str], None],
    *,
    protocol: MeasurementProtocol,
    load_key: str,
) -> dict[str, Any]:
    """Check and time one candidate at its description's shape, or at every shape of its
    matrix, compiling (or loading) once per compile key; ``compile_s`` is reported as
    `load_key`. ``payload["cutoff_ms"]`` (optional, one entry per shape, None for none): the
    launch that ends a shape's round (`objectives.cutoffs`)."""
    desc = KernelDescription.model_validate(payload["description"])
    device = _device()
    install_allocator(device)
    params, controls = payload["params"], payload["controls"]
    cutoffs = payload.get("cutoff_ms") or [None] * len(desc.matrix())

    def run(index: int, at: KernelDescription, first: bool) -> dict[str, Any]:
        if first:
            compiled = _compile(at, params, controls, device=device, load=True)
            if isinstance(compiled, dict):
                return compiled
            info = compiled[3]
            info[load_key] = info.pop("compile_s")
        else:
            # A kernel of the same compile key is loaded already: Triton's launch finds it.
            try:
                compiled = (*_prepare(at, params, controls), {})
            except Exception as exc:
                return {"status": "compile_error", "time_ms": math.nan, "error": _short(exc)}
        progress("compiled")
        return _check_and_time(
            at,
            payload,
            compiled,
            device=device,
            progress=progress,
            protocol=protocol,
            cutoff_ms=cutoffs[index],
        )

    if not desc.shapes:
        return run(0, desc, True)
    return evaluate_shapes(desc, run, _shape_keys(desc))


def _shape_keys(desc: KernelDescription) -> Callable[[KernelDescription], Any]:
    """The compile key of the description at one shape: its integer arguments, scalars and the
    heuristics' values they determine, as the kernel's signature makes them compile-time values
    (`objectives.matrix.compile_key`)."""

    def key(at: KernelDescription) -> Any:
        entry = kernel_entry(str(at.source), str(at.entry))
        named = {**at.launch_arguments(), **at.scalars}
        return compile_key({**named, **entry.derived(named)}, constexpr_names(entry.jit))

    return key


def _check_and_time(
    desc: KernelDescription,
    payload: dict[str, Any],
    compiled: tuple[Any, tuple[int, ...], dict[str, Any], dict[str, Any]],
    *,
    device: str,
    progress: Callable[[str], None],
    protocol: MeasurementProtocol = DEFAULT_PROTOCOL,
    cutoff_ms: float | None = None,
) -> dict[str, Any]:
    global _candidates
    _candidates += 1
    entry, grid, kwargs, info = compiled
    launch = functools.partial(_launch, entry, grid, kwargs=kwargs)

    # A different seed per candidate in this worker: every check sees new data.
    seed = 1_000_003 * _candidates + os.getpid()
    result = check_and_time(
        desc,
        launch,
        seed=seed,
        device=device,
        energy=payload["energy"],
        progress=progress,
        protocol=protocol,
        cutoff_ms=cutoff_ms,
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
