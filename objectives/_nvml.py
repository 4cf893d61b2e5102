"""NVML readings taken with a measurement: the GPU's clocks and temperature, and energy per call."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from objectives._arrays import TORCH
from objectives._arrays import ArrayLibrary

# NVML's handle of the current device, per array library (None: NVML unavailable).
_HANDLES: dict[str, Any] = {}


def _handle(arrays: ArrayLibrary) -> Any:
    """NVML's handle of the current CUDA device, or None when NVML is unavailable."""
    if arrays.name not in _HANDLES:
        try:
            import pynvml

            pynvml.nvmlInit()
            # NVML numbers GPUs physically; CUDA_VISIBLE_DEVICES renumbers them, the PCI id
            # does not.
            bus_id = arrays.pci_bus_id(arrays.current_device())
            _HANDLES[arrays.name] = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        except Exception:  # NVML is optional: no library, no driver, no permission
            _HANDLES[arrays.name] = None
    return _HANDLES[arrays.name]


def gpu_conditions(arrays: ArrayLibrary = TORCH) -> dict[str, float | None]:
    """The current GPU's SM clock (MHz) and temperature (°C), each None when NVML cannot tell.

    A round's value depends on them: a GPU that throttles (hot, power-capped) runs every kernel
    slower, so they are recorded with every sample to tell drift from a real difference.
    """
    handle = _handle(arrays)
    out: dict[str, float | None] = {"sm_clock_mhz": None, "temperature_c": None}
    if handle is None:
        return out
    import pynvml

    try:
        out["sm_clock_mhz"] = float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
        out["temperature_c"] = float(
            pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
        )
    except Exception:  # a reading NVML refuses is left out, never fails the measurement
        pass
    return out


def measure_energy(
    fn: Callable[[int], object],
    *,
    n_rotate: int,
    min_s: float = 0.5,
    arrays: ArrayLibrary = TORCH,
) -> dict[str, float]:
    """Energy per call and mean power of a GPU callable, read from NVML's energy counter.

    NVML updates the counter every few tens of milliseconds, so `fn` runs back to back for at
    least `min_s` seconds. Returns an empty dict when NVML or the counter is unavailable (it is
    optional: pre-Volta boards and some virtualised GPUs lack it).

    Args:
        fn: Launches the kernel on input set ``i``.
        n_rotate: Number of input sets to rotate through.
        min_s: Least measuring time, seconds.
        arrays: The kernel's array library (synchronises its device).

    Returns:
        ``{"energy_mj": mJ per call, "power_w": mean W}`` or ``{}``.
    """
    handle = _handle(arrays)
    if handle is None:
        return {}
    import pynvml

    try:
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception:  # the counter is missing on this board: energy is an optional metric
        return {}
    calls = 0
    arrays.synchronize()
    e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # millijoules since driver load
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < min_s:
        for i in range(16):
            fn((calls + i) % n_rotate)
        calls += 16
        arrays.synchronize()
    elapsed = time.perf_counter() - t0
    e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    de = float(e1 - e0)
    return {"energy_mj": de / calls, "power_w": de / 1e3 / elapsed}
