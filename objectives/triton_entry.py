"""Kernels of a description's source file, imported once per process and unwrapped
(`ciq_tune.runtime.triton_kernel`): the search launches the inner `@triton.jit` function, binds
tensors by name when the kernel names every input of the description (pointers interleaved with
strides, as in most production kernels), else first and in the description's order, and
evaluates the kernel's own `@triton.autotune` list first (`objectives.triton.autotune_points`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from types import ModuleType

from ciq_tune.runtime.triton_kernel import KernelEntry
from ciq_tune.runtime.triton_kernel import unwrap

__all__ = ["kernel_entry", "load_module"]


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


@functools.cache
def kernel_entry(source: str, entry: str) -> KernelEntry:
    """The kernel `entry` of the source file, its decorators unwrapped (once per process)."""
    return unwrap(getattr(load_module(source), entry))
