"""The array library a kernel's harness runs on: torch for Triton and Helion kernels (their
launchers take torch tensors), CuPy for CUDA C++ kernels, which then run without torch
installed.

The harness (`objectives._bench`), the measurement protocol (`objectives.protocol`), the GPU
lock (`objectives._gpu`) and the NVML readings (`objectives._nvml`) are written once; what they
need from a library is here: allocation of the random inputs, the reference's names, the
float64 view the check compares in, device synchronisation, CUDA events and the GPU's PCI
identity. `arrays_for(kind)` picks the library of a description's kind.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
from collections.abc import Callable
from collections.abc import Iterator
from collections.abc import Sequence
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol

if TYPE_CHECKING:
    import torch

# What a random input may be drawn as (`random_tensor`).
INIT_KINDS = ("randn", "rand", "randint", "ones")


def random_tensor(
    shape: Sequence[int],
    dtype: torch.dtype,
    init: str,
    *,
    generator: torch.Generator,
    device: str,
) -> torch.Tensor:
    """Draw a fresh random tensor (never zeros, which hide unwritten outputs and run faster).

    Args:
        shape: Tensor shape.
        dtype: Element type.
        init: ``"randn"`` (standard normal), ``"rand"`` (uniform on [-1, 1)), ``"randint"``
            (integers in [-8, 8), bools for ``torch.bool``; also what integer types get for
            ``"randn"`` and ``"rand"``) or ``"ones"`` (for masks).
        generator: Random generator; the tensor is drawn on its device (a CUDA generator
            draws a 4096² matrix in microseconds, a CPU one in tens of milliseconds) and then
            moved to `device`. The same seed gives the same data on the same kind of device.
        device: Target device (``"cuda"``, ``"cpu"``).

    Returns:
        The tensor on `device`.

    Raises:
        ValueError: If `init` is not one of `INIT_KINDS`.
    """
    import torch

    shape = tuple(int(s) for s in shape)
    if init not in INIT_KINDS:
        raise ValueError(f"`init` must be one of {INIT_KINDS}, got init={init!r}")
    # Truncating normal draws to integers would give mostly zeros: integers always use randint.
    if init in ("randn", "rand") and not dtype.is_floating_point:
        init = "randint"
    where = generator.device
    if init == "randn":
        t = torch.randn(shape, generator=generator, dtype=torch.float32, device=where)
    elif init == "rand":
        t = torch.rand(shape, generator=generator, dtype=torch.float32, device=where) * 2 - 1
    elif init == "randint":
        if dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=generator, dtype=torch.int64, device=where)
        else:
            t = torch.randint(-8, 8, shape, generator=generator, dtype=torch.int64, device=where)
            if not dtype.is_signed:
                t = t.abs()
    else:
        t = torch.ones(shape, dtype=torch.float32, device=where)
    return t.to(dtype=dtype).to(device)


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill `t` in place with a value a correct kernel never leaves behind.

    NaN for floating types; for integers, the type's maximum (inputs come from
    `random_tensor`, whose integers are small). Returns `t`.
    """
    import torch

    if t.dtype.is_floating_point:
        t.fill_(math.nan)
    elif t.dtype == torch.bool:
        # bool has no sentinel; True marks every element that the kernel must overwrite.
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)
    return t


# Packages a reference or alternative expression's array library may import while it runs:
# CuPy's compiled routines import their submodules lazily through the *calling* frame's
# builtins, which `evaluate_expression` otherwise leaves empty.
_LIBRARY_PACKAGES = frozenset({"cupy", "cupyx", "cupy_backends", "fastrlock", "numpy", "torch"})


def _library_import(
    name: str,
    globals: Any = None,
    locals: Any = None,
    fromlist: Sequence[str] = (),
    level: int = 0,
) -> Any:
    if level != 0 or name.partition(".")[0] not in _LIBRARY_PACKAGES:
        raise ImportError(f"an expression of a description may not import {name!r}")
    return importlib.__import__(name, globals, locals, fromlist, level)


def evaluate_expression(code: Any, names: dict[str, Any]) -> Any:
    """Evaluate a description's `reference` or `alternative` expression over `names` (inputs,
    sizes, ``math``, the array library) with no builtins but an import of the array libraries'
    own packages.

    Args:
        code: The expression's text or its compiled code (``compile(..., "eval")``).
        names: The names it may use.
    """
    return eval(code, {"__builtins__": {"__import__": _library_import}}, names)


class ArrayLibrary(Protocol):
    """What the harness needs from an array library (``torch`` or ``cupy``)."""

    name: str

    @property
    def xp(self) -> Any:
        """The library's module (``isnan``, ``abs``, ``nan_to_num``, ``argmax``)."""
        ...

    def is_available(self) -> bool:
        """Whether this process sees a CUDA device."""
        ...

    def current_device(self) -> int:
        """The visible CUDA device this process uses."""
        ...

    def synchronize(self, index: int | None = None) -> None:
        """Wait until everything queued on device `index` (default: the current one) is done."""
        ...

    def event(self) -> Any:
        """A CUDA event that records timestamps (has ``record()``)."""
        ...

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events (after a synchronisation)."""
        ...

    def empty_int32(self, n: int) -> Any:
        """An uninitialised device buffer of `n` int32 (the L2 flush buffer)."""
        ...

    def zero_(self, buffer: Any) -> None:
        """Fill `buffer` with zeros, asynchronously on the current stream."""
        ...

    def spin(self, cycles: int) -> None:
        """Keep the GPU busy for about `cycles` clock cycles without touching memory,
        asynchronously on the current stream (what separates warm-L2 launches)."""
        ...

    def side_stream(self) -> contextlib.AbstractContextManager[None]:
        """A context in which a new stream is current (ordered after the work queued before)."""
        ...

    def capture(self, body: Callable[[], None]) -> Callable[[], object]:
        """Capture what `body` queues into a CUDA graph; returns its replay (on the current
        stream).

        Raises:
            RuntimeError: the work cannot be captured.
        """
        ...

    def pci_bus_id(self, index: int) -> str:
        """PCI bus id of visible device `index` in NVML's form (``"00000000:c1:00.0"``).

        Raises:
            RuntimeError: there is no visible CUDA device `index`.
        """
        ...

    def itemsize(self, dtype: str) -> int:
        """Bytes per element of the dtype named `dtype` (``"float16"``)."""
        ...

    def generator(self, seed: int, device: str) -> Any:
        """A seeded random generator drawing on `device`."""
        ...

    def random_array(
        self, shape: Sequence[int], dtype: str, init: str, *, generator: Any, device: str
    ) -> Any:
        """A fresh random array (never zeros); `init` as in `random_tensor`."""
        ...

    def as_strided(self, array: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
        """A view of 1-d `array` with `shape` and `strides` (in elements)."""
        ...

    def poison_(self, array: Any) -> Any:
        """Fill `array` in place with a value a correct kernel never leaves behind."""
        ...

    def reference_names(self) -> dict[str, Any]:
        """Names a reference or alternative expression may use besides the inputs and sizes."""
        ...

    def float64(self, array: Any, like: Any = None) -> Any:
        """`array` as float64, on the device of `like` when given."""
        ...

    def norm(self, array: Any) -> float:
        """The Euclidean norm of all elements of `array`."""
        ...

    def data_ptr(self, array: Any) -> int:
        """The device address of `array`'s first element."""
        ...


def nvml_bus_id(domain: int, bus: int, device: int) -> str:
    """A PCI bus id in NVML's form (8 hex digits of domain, lower case, function 0)."""
    return f"{domain:08x}:{bus:02x}:{device:02x}.0"


def _no_device(index: int) -> RuntimeError:
    import os

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return RuntimeError(f"no visible CUDA device {index}; CUDA_VISIBLE_DEVICES={visible!r}")


class TorchArrays:
    """torch tensors: the library of Triton and Helion kernels (also on the CPU, for Triton's
    interpreter)."""

    name = "torch"

    @property
    def xp(self) -> Any:
        import torch

        return torch

    def is_available(self) -> bool:
        import torch

        return bool(torch.cuda.is_available())

    def current_device(self) -> int:
        import torch

        return int(torch.cuda.current_device())

    def synchronize(self, index: int | None = None) -> None:
        import torch

        torch.cuda.synchronize(index)

    def event(self) -> Any:
        import torch

        return torch.cuda.Event(enable_timing=True)

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end))

    def empty_int32(self, n: int) -> Any:
        import torch

        return torch.empty(n, dtype=torch.int32, device="cuda")

    def zero_(self, buffer: Any) -> None:
        buffer.zero_()

    def spin(self, cycles: int) -> None:
        import torch

        torch.cuda._sleep(cycles)

    @contextlib.contextmanager
    def side_stream(self) -> Iterator[None]:
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            yield
        torch.cuda.current_stream().wait_stream(side)

    def capture(self, body: Callable[[], None]) -> Callable[[], object]:
        import torch

        # `torch.cuda.graph` without what its context adds per capture (a device-wide
        # synchronisation, a garbage collection, emptying the allocator's cache): captured
        # on a side stream ordered after the current one, as it does.
        graph = torch.cuda.CUDAGraph()
        with self.side_stream():
            graph.capture_begin()
            try:
                body()
            finally:
                graph.capture_end()
        return graph.replay

    def pci_bus_id(self, index: int) -> str:
        import torch

        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise _no_device(index)
        props = torch.cuda.get_device_properties(index)
        # CUDA builds of torch have these fields; the CPU build's type stubs do not.
        domain, bus, dev = props.pci_domain_id, props.pci_bus_id, props.pci_device_id  # type: ignore[attr-defined]
        return nvml_bus_id(domain, bus, dev)

    def itemsize(self, dtype: str) -> int:
        return int(self._dtype(dtype).itemsize)

    def generator(self, seed: int, device: str) -> Any:
        import torch

        return torch.Generator(device=device).manual_seed(seed)

    def random_array(
        self, shape: Sequence[int], dtype: str, init: str, *, generator: Any, device: str
    ) -> Any:
        return random_tensor(shape, self._dtype(dtype), init, generator=generator, device=device)

    def as_strided(self, array: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
        import torch

        return torch.as_strided(array, tuple(shape), tuple(strides))

    def poison_(self, array: Any) -> Any:
        return poison_(array)

    def reference_names(self) -> dict[str, Any]:
        return {"torch": self.xp}

    def float64(self, array: Any, like: Any = None) -> Any:
        import torch

        device = array.device if like is None else like.device
        return array.detach().to(device, torch.float64)

    def norm(self, array: Any) -> float:
        import torch

        return float(torch.linalg.vector_norm(array))

    def data_ptr(self, array: Any) -> int:
        return int(array.data_ptr())

    @staticmethod
    def _dtype(name: str) -> Any:
        import torch

        return getattr(torch, name)


class CupyArrays:
    """CuPy arrays: the library of CUDA C++ kernels (``pip install 'ciq-tune[cuda]'``; no torch).

    Random inputs come from CuPy's generator, so they differ from torch's for the same seed;
    within the library the same seed gives the same data, which is what the harness relies on.
    """

    name = "cupy"

    @property
    def xp(self) -> Any:
        try:
            import cupy
        except ImportError as exc:
            raise ImportError(
                f"CuPy runs CUDA C++ kernels and is not installed ({exc}): "
                "pip install 'ciq-tune[cuda]'"
            ) from exc
        return cupy

    def is_available(self) -> bool:
        cupy = self.xp
        try:
            return int(cupy.cuda.runtime.getDeviceCount()) > 0
        except cupy.cuda.runtime.CUDARuntimeError:  # no driver, or no device
            return False

    def current_device(self) -> int:
        return int(self.xp.cuda.runtime.getDevice())

    def synchronize(self, index: int | None = None) -> None:
        cupy = self.xp
        if index is None:
            index = self.current_device()
        with cupy.cuda.Device(index):
            cupy.cuda.runtime.deviceSynchronize()

    def event(self) -> Any:
        return self.xp.cuda.Event()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self.xp.cuda.get_elapsed_time(start, end))

    def empty_int32(self, n: int) -> Any:
        cupy = self.xp
        return cupy.empty(n, dtype=cupy.int32)

    def zero_(self, buffer: Any) -> None:
        buffer.fill(0)

    def spin(self, cycles: int) -> None:
        import numpy

        _cupy_spin(self.xp)((1,), (1,), (numpy.int64(cycles),))

    @contextlib.contextmanager
    def side_stream(self) -> Iterator[None]:
        self.synchronize()
        with self.xp.cuda.Stream(non_blocking=True):
            yield
        self.synchronize()

    def capture(self, body: Callable[[], None]) -> Callable[[], object]:
        # Capture needs a stream other than the legacy default one; the launch and the flush
        # run on CuPy's current stream, which `with stream` sets.
        stream = self.xp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                body()
            finally:
                graph = stream.end_capture()
        replay: Callable[[], object] = graph.launch
        return replay

    def pci_bus_id(self, index: int) -> str:
        cupy = self.xp
        if not self.is_available() or index >= cupy.cuda.runtime.getDeviceCount():
            raise _no_device(index)
        # CUDA's form is "0000:C1:00.0" (4 hex digits of domain, upper case).
        text = str(cupy.cuda.runtime.deviceGetPCIBusId(index))
        domain, bus, rest = text.split(":")
        return nvml_bus_id(int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16))

    def itemsize(self, dtype: str) -> int:
        return int(self._dtype(dtype).itemsize)

    def generator(self, seed: int, device: str) -> Any:
        self._on_gpu(device)
        return self.xp.random.default_rng(seed)

    def random_array(
        self, shape: Sequence[int], dtype: str, init: str, *, generator: Any, device: str
    ) -> Any:
        cupy = self.xp
        self._on_gpu(device)
        shape = tuple(int(s) for s in shape)
        if init not in INIT_KINDS:
            raise ValueError(f"`init` must be one of {INIT_KINDS}, got init={init!r}")
        target = self._dtype(dtype)
        # Truncating normal draws to integers would give mostly zeros: integers use integers().
        if init in ("randn", "rand") and target.kind != "f":
            init = "randint"
        if init == "randn":
            array = generator.standard_normal(shape, dtype=cupy.float32)
        elif init == "rand":
            array = generator.random(shape, dtype=cupy.float32) * 2 - 1
        elif init == "randint":
            low = 0 if target.kind == "b" else -8
            high = 2 if target.kind == "b" else 8
            array = generator.integers(low, high, size=shape, dtype=cupy.int64)
            if target.kind == "u":
                array = cupy.abs(array)
        else:
            array = cupy.ones(shape, dtype=cupy.float32)
        return array.astype(target)

    def as_strided(self, array: Any, shape: Sequence[int], strides: Sequence[int]) -> Any:
        from cupy.lib.stride_tricks import as_strided

        steps = tuple(int(s) * array.itemsize for s in strides)
        return as_strided(array, shape=tuple(shape), strides=steps)

    def poison_(self, array: Any) -> Any:
        cupy = self.xp
        if array.dtype.kind == "f":
            array.fill(math.nan)
        elif array.dtype.kind == "b":
            array.fill(True)  # bool has no sentinel; True marks what the kernel must overwrite
        else:
            array.fill(cupy.iinfo(array.dtype).max)
        return array

    def reference_names(self) -> dict[str, Any]:
        return {"cupy": self.xp}

    def float64(self, array: Any, like: Any = None) -> Any:
        cupy = self.xp
        return cupy.asarray(array, dtype=cupy.float64)

    def norm(self, array: Any) -> float:
        return float(self.xp.linalg.norm(array.ravel()))

    def data_ptr(self, array: Any) -> int:
        return int(array.__cuda_array_interface__["data"][0])

    def _dtype(self, name: str) -> Any:
        try:
            return self.xp.dtype(name)
        except TypeError as exc:
            raise ValueError(
                f"dtype {name!r} is not a CuPy dtype (CUDA C++ inputs: float16/32/64, "
                "(u)int8-64, bool)"
            ) from exc

    @staticmethod
    def _on_gpu(device: str) -> None:
        if device != "cuda":
            raise ValueError(f"CuPy arrays live on the GPU; got device={device!r}")


TORCH = TorchArrays()
CUPY = CupyArrays()


def arrays_for(kind: str) -> ArrayLibrary:
    """The array library of a description's kind: CuPy for ``cuda``, else torch."""
    return CUPY if kind == "cuda" else TORCH


_SPIN_SOURCE = r"""
extern "C" __global__ void ciq_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
"""


@functools.cache
def _cupy_spin(cupy: Any) -> Any:
    """The spin kernel for CuPy (torch has `torch.cuda._sleep`), compiled once per process."""
    return cupy.RawKernel(_SPIN_SOURCE, "ciq_spin")
