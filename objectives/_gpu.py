"""GPU identity, the per-GPU benchmark lock, and NVML utilisation sampling.

Several trials may share a GPU (Ray's fractional GPUs, ``--trials-per-gpu``): they compile on
CPUs at the same time, but only one at a time may run anything on the GPU, or one trial's
check would be timed as part of another's kernel. `exclusive_gpu` is that rule: an ``fcntl``
lock on a file named after the GPU's PCI bus id, so processes that see the GPU under different
``CUDA_VISIBLE_DEVICES`` numbers still share one lock. The kernel releases the lock when its
holder dies, so a crashed or killed benchmark never blocks the others.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from objectives._arrays import TORCH
from objectives._arrays import ArrayLibrary

LOCK_DIR_ENV = "CIQ_TUNE_LOCK_DIR"
"""Folder of the lock files (default: the system's temporary folder). Processes that share a
GPU must see the same folder: set it to a shared path when they run in different containers."""
# Seconds between "still waiting" messages to the isolated worker's parent while the lock is
# taken: each one restarts the waiting trial's run deadline, so a queue of benchmarks is not
# mistaken for a hang (the holder's own deadline still bounds every wait).
HEARTBEAT_S = 5.0
# NVML sampling period (s); NVML itself averages utilisation over 1/6 s to 1 s.
NVML_PERIOD_S = 0.1


def pci_bus_id(index: int = 0, arrays: ArrayLibrary = TORCH) -> str:
    """PCI bus id (``"00000000:c1:00.0"``, NVML's form) of the visible CUDA device `index`.

    CUDA_VISIBLE_DEVICES renumbers devices; the PCI id names the physical GPU, the same through
    torch and through CuPy, so trials of both kinds that share a GPU share its lock.

    Raises:
        RuntimeError: `arrays` sees no CUDA device `index`.
    """
    return arrays.pci_bus_id(index)


def gpu_identity(index: int = 0, arrays: ArrayLibrary = TORCH) -> str:
    """A name of the physical GPU behind visible device `index`, the same in every process:
    its PCI bus id, else (a torch without the PCI fields) its UUID."""
    try:
        return pci_bus_id(index, arrays)
    except AttributeError:
        import torch

        return f"uuid-{torch.cuda.get_device_properties(index).uuid}"


def lock_path(index: int = 0, arrays: ArrayLibrary = TORCH) -> Path:
    """The lock file of the visible CUDA device `index` (see `LOCK_DIR_ENV`)."""
    folder = Path(os.environ.get(LOCK_DIR_ENV) or tempfile.gettempdir())
    name = re.sub(r"[^0-9a-zA-Z]", "-", gpu_identity(index, arrays))
    return folder / f"ciq-tune-gpu-{name}.lock"


@dataclass
class GpuLease:
    """Timings of one hold of the GPU lock, in seconds (filled in as the hold goes on).

    Attributes:
        wait_s: Time spent waiting for other holders.
        held_s: Time the lock was held (set when the hold ends); the GPU busy time of a trial.
        idle_ms: Milliseconds since any process last released the lock (the GPU's idle time
            before this hold), None when it was never released.
    """

    wait_s: float = 0.0
    held_s: float = 0.0
    idle_ms: float | None = None


@contextlib.contextmanager
def exclusive_gpu(
    index: int = 0,
    *,
    heartbeat: Callable[[str], None] | None = None,
    arrays: ArrayLibrary = TORCH,
) -> Iterator[GpuLease]:
    """Hold the GPU `index` alone: wait for its lock, yield, synchronise, release.

    Everything the body queues on the GPU has finished when the lock is released, so the next
    holder's timings never include this holder's kernels.

    Args:
        index: Visible CUDA device.
        heartbeat: Called with ``"waiting for the GPU"`` every `HEARTBEAT_S` seconds while the
            lock is taken (the isolated worker's ``progress``).
        arrays: The library that runs the body's kernels (torch; CuPy for CUDA C++).

    Yields:
        The hold's `GpuLease`; `GpuLease.held_s` is set on exit.
    """
    with held_lock(lock_path(index, arrays), heartbeat=heartbeat) as lease:
        try:
            yield lease
        finally:
            arrays.synchronize(index)


@contextlib.contextmanager
def held_lock(path: Path, *, heartbeat: Callable[[str], None] | None = None) -> Iterator[GpuLease]:
    """Hold an exclusive ``fcntl`` lock on `path` (created if missing) for the body.

    Args:
        path: The lock file.
        heartbeat: Called every `HEARTBEAT_S` seconds while another process holds the lock.

    Yields:
        A `GpuLease` with `GpuLease.wait_s` and `GpuLease.idle_ms` set; `GpuLease.held_s` is
        set on exit, when the file's modification time records the release.
    """
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)
    lease = GpuLease()
    t0 = time.perf_counter()
    try:
        _acquire(fd, heartbeat)
        acquired = time.perf_counter()
        lease.wait_s = acquired - t0
        # The file's mtime is its last release (a released file holds one byte).
        status = os.fstat(fd)
        if status.st_size:
            lease.idle_ms = max(0.0, 1e3 * (time.time() - status.st_mtime))
        try:
            yield lease
        finally:
            lease.held_s = time.perf_counter() - acquired
            os.pwrite(fd, b"r", 0)
            os.utime(fd)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, heartbeat: Callable[[str], None] | None) -> None:
    with contextlib.suppress(BlockingIOError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    if heartbeat is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    # Block in this thread (no polling delay when the lock frees); a helper thread reports.
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_S):
            heartbeat("waiting for the GPU")

    thread = threading.Thread(target=beat, name="ciq-gpu-lock-heartbeat", daemon=True)
    thread.start()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        done.set()
        # Joined before the caller sends anything else on the same pipe.
        thread.join()


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries for one worker each:
    that variable's entries when it is set, else every GPU NVML counts; asked of torch only
    without NVML and with an NVIDIA driver loaded (importing torch takes seconds, NVML
    milliseconds). Empty without a GPU."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [d.strip() for d in given.split(",") if d.strip() and not d.strip().startswith("-")]
    try:
        import pynvml

        pynvml.nvmlInit()
        return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception:  # no NVML library: torch knows, where an NVIDIA driver is loaded
        pass
    if not os.path.exists("/proc/driver/nvidia/version"):
        return []
    try:
        import torch
    except ImportError:
        return []
    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


class UtilizationSampler:
    """Samples NVML's GPU utilisation, SM clock and power of every GPU in a background thread.

    NVML's ``utilization.gpu`` is the share of the last sample period (1/6 s to 1 s) during
    which a kernel ran; the mean over a search is its GPU busy fraction as NVML sees it. The SM
    clock and the power draw say under which conditions the window's kernels ran (a
    power-limited GPU clocks down under sustained load). Without NVML (no `pynvml`, no driver)
    it records nothing and `summary` says so.

    Example:
        >>> with UtilizationSampler() as sampler:  # doctest: +SKIP
        ...     run_search()
        >>> sampler.summary()  # doctest: +SKIP
        {'available': True, 'gpus': {'00000000:c1:00.0': {'mean_pct': 71.5, ...}}}
    """

    def __init__(self, period_s: float = NVML_PERIOD_S) -> None:
        if period_s <= 0:
            raise ValueError(f"`period_s` must be > 0, got period_s={period_s}")
        self._period_s = period_s
        self._samples: dict[str, list[float]] = {}
        # Per GPU, (SM clock MHz, power W) of each tick, None where NVML gave none.
        self._conditions: dict[str, list[tuple[float | None, float | None]]] = {}
        # Wall-clock time (`time.time`, seconds) of each sampling tick, so that a window of the
        # run (e.g. after the first result) can be summarised on its own.
        self._times: list[float] = []
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self._stopped = 0.0

    def __enter__(self) -> UtilizationSampler:
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = {}
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                handles[_nvml_bus_id(pynvml.nvmlDeviceGetPciInfo(handle))] = handle
        except Exception as exc:  # NVML is optional: no library, no driver, no permission
            self._error = f"{type(exc).__name__}: {exc}"
            return self
        self._samples = {bus: [] for bus in handles}
        self._conditions = {bus: [] for bus in handles}
        self._started = time.perf_counter()
        self._thread = threading.Thread(
            target=self._run, args=(pynvml, handles), name="ciq-nvml-sampler", daemon=True
        )
        self._thread.start()
        return self

    def _run(self, pynvml: Any, handles: dict[str, Any]) -> None:
        while not self._stop.wait(self._period_s):
            self._times.append(time.time())
            for bus, handle in handles.items():
                try:
                    rate = pynvml.nvmlDeviceGetUtilizationRates(handle)
                except Exception as exc:  # a GPU that stops answering ends the sampling
                    self._error = f"{type(exc).__name__}: {exc}"
                    return
                self._conditions[bus].append(_conditions(pynvml, handle))
                self._samples[bus].append(float(rate.gpu))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._stopped = time.perf_counter()

    def summary(self, since: float | None = None, until: float | None = None) -> dict[str, Any]:
        """Mean utilisation (%), SM clock (MHz) and power (W) per GPU over the sampled window,
        or why there is none.

        Args:
            since: Only samples taken at or after this `time.time` (default: from the start).
            until: Only samples taken at or before this `time.time` (default: to the end).
        """
        lo, hi = -math.inf if since is None else since, math.inf if until is None else until
        gpus = {}
        for bus, values in self._samples.items():
            # A tick's time is stored before its values: at most the last time lacks them.
            kept = [v for t, v in zip(self._times, values, strict=False) if lo <= t <= hi]
            if kept:
                ticks = zip(self._times, self._conditions[bus], strict=False)
                clocks, powers = zip(*[c for t, c in ticks if lo <= t <= hi], strict=True)
                gpus[bus] = {
                    "mean_pct": sum(kept) / len(kept),
                    "samples": len(kept),
                    "mean_sm_clock_mhz": _mean(clocks),
                    "mean_power_w": _mean(powers),
                }
        whole = max(self._stopped - self._started, 0.0)
        return {
            "available": bool(gpus),
            "period_s": self._period_s,
            "window_s": whole if since is None and until is None else None,
            "since": since,
            "until": until,
            "gpus": gpus,
            "error": self._error,
        }


def _conditions(pynvml: Any, handle: Any) -> tuple[float | None, float | None]:
    """The SM clock (MHz) and power draw (W) now, None where NVML has none."""
    try:
        clock: float | None = float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:  # not every GPU or driver reports it
        clock = None
    try:
        power: float | None = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
    except Exception:
        power = None
    return clock, power


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _nvml_bus_id(info: Any) -> str:
    bus = info.busId.decode() if isinstance(info.busId, bytes) else str(info.busId)
    # NVML gives "00000000:C1:00.0"; torch-derived ids are lower case.
    return bus.lower()
