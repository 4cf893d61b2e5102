"""A host-memory stand-in for CuPy (tests without a GPU): NumPy arrays that expose
``__cuda_array_interface__``, CUDA events on the host clock, and a "cubin" loader whose kernels
are Python functions on the arrays behind the pointers they receive.

Kernels: ``saxpy`` (examples/kernels/cuda/saxpy.cu's convention: x, y, out, n, a). With
``FAKE_CUPY_WRONG=1`` in the environment it leaves ``out`` unwritten.
"""

from __future__ import annotations

import ctypes
import os
import time
import types

import numpy

abs = numpy.abs
argmax = numpy.argmax
dtype = numpy.dtype
float16, float32, float64 = numpy.float16, numpy.float32, numpy.float64
int32, int64 = numpy.int32, numpy.int64
iinfo = numpy.iinfo
isnan = numpy.isnan
nan_to_num = numpy.nan_to_num
sum = numpy.sum
linalg = numpy.linalg
launches: list[tuple[tuple[int, ...], tuple[int, ...]]] = []


class ndarray(numpy.ndarray):
    @property
    def __cuda_array_interface__(self):
        return {"data": (self.ctypes.data, False), "shape": self.shape, "version": 3}


def _device(a):
    return numpy.asarray(a).view(ndarray)


def empty(shape, dtype=float32):
    return _device(numpy.empty(shape, dtype=dtype))


def ones(shape, dtype=float32):
    return _device(numpy.ones(shape, dtype=dtype))


def asarray(a, dtype=None):
    return _device(numpy.asarray(a, dtype=dtype))


class _Generator:
    def __init__(self, seed: int) -> None:
        self._rng = numpy.random.default_rng(seed)

    def standard_normal(self, size, dtype=float32):
        return _device(self._rng.standard_normal(size, dtype=dtype))

    def random(self, size, dtype=float32):
        return _device(self._rng.random(size, dtype=dtype))

    def integers(self, low, high, size, dtype=int64):
        return _device(self._rng.integers(low, high, size=size, dtype=dtype))


random = types.SimpleNamespace(default_rng=_Generator)


class _Event:
    def __init__(self) -> None:
        self.t = None

    def record(self, stream=None) -> None:
        self.t = time.perf_counter()


def _elapsed(start: _Event, end: _Event) -> float:
    return (end.t - start.t) * 1e3


class _Device:
    def __init__(self, index: int = 0) -> None:
        self.index = index

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _floats(ptr, n):
    return numpy.ctypeslib.as_array((ctypes.c_float * n).from_address(int(ptr)))


def _saxpy(grid, block, args, stream=None):
    x_ptr, y_ptr, out_ptr, n, a = args
    launches.append((grid, block))
    if os.environ.get("FAKE_CUPY_WRONG") == "1":
        return
    n = int(n)
    _floats(out_ptr, n)[:] = numpy.float32(a) * _floats(x_ptr, n) + _floats(y_ptr, n)


KERNELS = {"saxpy": _saxpy}


class _Module:
    def load(self, cubin: bytes) -> None:
        if cubin[:4] != b"\x7fELF":
            raise ValueError("not a cubin")

    def get_function(self, name: str):
        return KERNELS[name]


class CUDARuntimeError(RuntimeError):
    pass


cuda = types.SimpleNamespace(
    Event=_Event,
    Device=_Device,
    get_elapsed_time=_elapsed,
    get_current_stream=lambda: None,
    function=types.SimpleNamespace(Module=_Module),
    runtime=types.SimpleNamespace(
        CUDARuntimeError=CUDARuntimeError,
        getDeviceCount=lambda: 1,
        getDevice=lambda: 0,
        deviceSynchronize=lambda: None,
        deviceGetPCIBusId=lambda index: f"0000:{index + 0xC1:02X}:00.0",
    ),
)
