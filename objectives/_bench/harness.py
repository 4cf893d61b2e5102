"""One trial's check and timing: fresh inputs checked against the reference, then one round of
the measurement protocol (`objectives.protocol`) on the timing input sets."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

from objectives._arrays import TORCH
from objectives._arrays import ArrayLibrary
from objectives._bench.checking import compare
from objectives._bench.inputs import make_inputs
from objectives._bench.inputs import reference_outputs
from objectives._bench.inputs import timing_sets
from objectives._nvml import measure_energy
from objectives.protocol import DEFAULT_PROTOCOL
from objectives.protocol import MeasurementProtocol
from objectives.protocol import measure_round

if TYPE_CHECKING:
    from objectives.description import KernelDescription


def check_and_time(
    desc: KernelDescription,
    launch: Callable[[Mapping[str, Any]], object],
    *,
    seed: int,
    device: str,
    energy: bool = False,
    progress: Callable[[str], None] | None = None,
    arrays: ArrayLibrary = TORCH,
    protocol: MeasurementProtocol = DEFAULT_PROTOCOL,
    cutoff_ms: float | None = None,
) -> dict[str, Any]:
    """Check a compiled kernel on fresh random inputs, then time it on rotating input sets.

    On a GPU everything here runs while this process holds the GPU alone
    (`objectives._gpu.exclusive_gpu`), so trials that share a GPU compile concurrently but
    never run a kernel during another trial's check or timing.

    Args:
        desc: The kernel description (inputs, outputs, reference, tolerance).
        launch: Launches the kernel on a dict of named arrays of `arrays`' library
            (asynchronously on a GPU).
        seed: Seed of the checked inputs (a new one per candidate: never the same data twice).
        device: ``"cuda"`` to time with CUDA events; ``"cpu"`` (interpreter) for the host clock.
        energy: Also measure energy per call and power through NVML (GPU only).
        progress: The isolated worker's ``progress``, told while waiting for the GPU so that
            a queue of benchmarks does not count against the run timeout.
        arrays: The kernel's array library: torch (Triton, Helion) or CuPy (CUDA C++).
        protocol: How the round is taken (`objectives.protocol`).
        cutoff_ms: End the round after a first launch at least this long
            (`objectives.protocol.time_cuda`).

    Returns:
        A result dict: ``status`` (``ok`` or ``wrong_result``), ``time_ms`` (median; NaN when
        wrong), the timing statistics, ``max_abs_err``, ``rel_err`` and, when wrong, ``error``;
        on a GPU also ``gpu_s`` (seconds holding the GPU: check, timing and energy) and
        ``gpu_wait_s`` (seconds waiting for other trials to release it).
    """
    measure = functools.partial(
        _check_and_time, desc, launch, seed=seed, device=device, arrays=arrays, protocol=protocol
    )
    if device != "cuda":
        return measure(energy=False, cutoff_ms=cutoff_ms)
    from objectives._gpu import exclusive_gpu

    index = arrays.current_device()
    with exclusive_gpu(index, heartbeat=progress, arrays=arrays) as lease:
        result = measure(energy=energy, idle_ms=lease.idle_ms, cutoff_ms=cutoff_ms)
    return {**result, "gpu_s": lease.held_s, "gpu_wait_s": lease.wait_s}


def _check_and_time(
    desc: KernelDescription,
    launch: Callable[[Mapping[str, Any]], object],
    *,
    seed: int,
    device: str,
    energy: bool,
    arrays: ArrayLibrary,
    protocol: MeasurementProtocol,
    idle_ms: float | None = None,
    cutoff_ms: float | None = None,
) -> dict[str, Any]:
    protocol = protocol.for_description(desc)
    tensors = make_inputs(desc, seed=seed, device=device, arrays=arrays)
    expected = reference_outputs(desc, tensors, arrays)
    launch(tensors)
    if device == "cuda":
        arrays.synchronize()
    checks = [
        compare(
            tensors[name],
            ref,
            rtol=desc.tolerance.rtol,
            atol=desc.tolerance.atol,
            arrays=arrays,
        )
        for name, ref in zip(desc.outputs, expected, strict=True)
    ]
    errors = {
        "max_abs_err": max(c.max_abs_err for c in checks),
        "rel_err": max(c.rel_err for c in checks),
    }
    failed = [(name, c) for name, c in zip(desc.outputs, checks, strict=True) if not c.ok]
    if failed:
        name, res = failed[0]
        return {
            "status": "wrong_result",
            "time_ms": math.nan,
            "error": f"output {name!r}: {res.message}",
            **errors,
        }
    del tensors, expected
    sets = timing_sets(desc, device=device, protocol=protocol, arrays=arrays)

    def run(i: int) -> None:
        launch(sets[i])

    stats = measure_round(
        run,
        len(sets),
        device=device,
        arrays=arrays,
        protocol=protocol,
        idle_ms=idle_ms,
        cutoff_ms=cutoff_ms,
    )
    out: dict[str, Any] = {"status": "ok", "time_ms": stats.median_ms, **stats.as_metrics()}
    out.update(errors, n_rotate=len(sets))
    if energy and device == "cuda":
        # An energy objective with no reading must fail loudly, not vanish from the result.
        measured = measure_energy(run, n_rotate=len(sets), arrays=arrays)
        out.update(measured)
        if not measured:
            out["energy_error"] = "NVML has no energy counter for this GPU"
    return out
