"""Benchmark inputs: a description's random inputs (drawn by its array library,
`objectives._arrays`) with the outputs poisoned, the reference outputs, and the input sets every
candidate is timed on."""

from __future__ import annotations

import importlib
import json
import math
import sys
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

from objectives._arrays import TORCH
from objectives._arrays import ArrayLibrary
from objectives._arrays import evaluate_expression
from objectives.description import SHIPPED
from objectives.protocol import DEFAULT_PROTOCOL
from objectives.protocol import MeasurementProtocol

if TYPE_CHECKING:
    from objectives.description import KernelDescription

# Seed of the timing input sets: every candidate is timed on the same data (a kernel's power
# draw, hence its clock, depends on the bit patterns), while each check draws fresh inputs.
TIMING_SEED = 20_240_601


def make_inputs(
    desc: KernelDescription, *, seed: int, device: str, arrays: ArrayLibrary = TORCH
) -> dict[str, Any]:
    """A fresh random set of every input of `desc` (outputs included, then poisoned), drawn on
    `device` with `arrays` (torch tensors by default, CuPy arrays for CUDA C++)."""
    gen = arrays.generator(seed, device)
    tensors = {}
    for spec in desc.inputs:
        strides = desc.strides_of(spec)
        if strides is None:
            shape = desc.shape_of(spec)
            tensors[spec.name] = arrays.random_array(
                shape, spec.dtype, spec.init, generator=gen, device=device
            )
        else:  # a view of a buffer as long as its strides reach
            buffer = arrays.random_array(
                (desc.elements_of(spec),), spec.dtype, spec.init, generator=gen, device=device
            )
            tensors[spec.name] = arrays.as_strided(buffer, desc.shape_of(spec), strides)
    for name in desc.outputs:
        arrays.poison_(tensors[name])
    return tensors


def reference_outputs(
    desc: KernelDescription, tensors: Mapping[str, Any], arrays: ArrayLibrary = TORCH
) -> list[Any]:
    """Evaluate the description's reference on the non-output inputs, one tensor per output.

    ``shipped`` launches the kernel as its project ships it (`objectives.shipped.shipped_outputs`).
    A ``"module:function"`` reference (the module is looked up next to the kernel source) is
    called with the non-output inputs as keyword arguments; any other text is a Python
    expression over those inputs, the `sizes`, the `scalars`, ``math`` and the array library
    (``torch``; ``cupy`` for CUDA C++ kernels, whose inputs are CuPy arrays).

    Raises:
        ValueError: If the description has no reference or it gives the wrong number of tensors.
    """
    if desc.reference is None:
        raise ValueError(f"kernel {desc.name!r} has no `reference`; it cannot be checked")
    if desc.reference == SHIPPED:
        from objectives.shipped import shipped_outputs

        return shipped_outputs(desc, tensors)
    args = {k: v for k, v in tensors.items() if k not in desc.outputs}
    if desc.reference_is_callable:
        module, _, name = desc.reference.partition(":")
        source_dir = str(desc.source.parent)
        if source_dir not in sys.path:
            sys.path.insert(0, source_dir)
        value = getattr(importlib.import_module(module), name)(**args)
    else:
        scope = {**arrays.reference_names(), "math": math, **desc.sizes, **desc.scalars, **args}
        value = evaluate_expression(desc.reference, scope)
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(values) != len(desc.outputs):
        raise ValueError(
            f"`reference` {desc.reference!r} gave {len(values)} tensors for outputs {desc.outputs}"
        )
    return values


class _TimingSetCache:
    """The timing input sets of the descriptions this process timed last (a matrix's shapes
    alternate in every evaluation), the oldest freed first once they hold more than
    `KEPT_BYTES` or `KEPT_SHAPES`."""

    KEPT_BYTES = 8 * 2**30
    KEPT_SHAPES = 32

    def __init__(self) -> None:
        self._sets: OrderedDict[str, tuple[int, list[dict[str, Any]]]] = OrderedDict()

    def get(
        self,
        desc: KernelDescription,
        device: str,
        protocol: MeasurementProtocol,
        arrays: ArrayLibrary,
    ) -> list[dict[str, Any]]:
        shapes = [
            (s.name, desc.shape_of(s), desc.strides_of(s), s.dtype, s.init) for s in desc.inputs
        ]
        protocol = protocol.for_description(desc)
        rotation = [protocol.rotate_bytes, protocol.max_rotate, protocol.l2]
        key = json.dumps([desc.name, device, arrays.name, shapes, *rotation])
        if key not in self._sets:
            set_bytes = sum(desc.elements_of(s) * arrays.itemsize(s.dtype) for s in desc.inputs)
            n_rotate = protocol.n_rotate(set_bytes)
            while self._sets and (
                len(self._sets) >= self.KEPT_SHAPES
                or sum(b for b, _ in self._sets.values()) + set_bytes * n_rotate > self.KEPT_BYTES
            ):
                self._sets.popitem(last=False)  # freed before the new sets are drawn
            self._sets[key] = (
                set_bytes * n_rotate,
                [
                    make_inputs(desc, seed=TIMING_SEED + i, device=device, arrays=arrays)
                    for i in range(n_rotate)
                ],
            )
        self._sets.move_to_end(key)
        return self._sets[key][1]


_TIMING_SETS = _TimingSetCache()


def timing_sets(
    desc: KernelDescription,
    *,
    device: str,
    protocol: MeasurementProtocol = DEFAULT_PROTOCOL,
    arrays: ArrayLibrary = TORCH,
) -> list[dict[str, Any]]:
    """The input sets every candidate of `desc` is timed on, drawn once per process.

    Enough sets to rotate through `protocol.rotate_bytes` (at most `protocol.max_rotate`), so
    that a kernel does not find its inputs in L2 from the previous repetition. Drawn once, they
    cost nothing per candidate (drawn per candidate on the CPU, a 4096³ matmul's nine tensors
    took 1–3 s, most of an evaluation), and every candidate, in the search and in every
    re-measurement, is timed on the same data (seeds from `TIMING_SEED`).
    """
    return _TIMING_SETS.get(desc, device, protocol, arrays)
