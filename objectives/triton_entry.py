"""A Triton kernel as its project ships it: the `@triton.jit` function under any
`@triton.autotune` and `@triton.heuristics` decorators, and a launch that binds arguments the
way the kernel declares them.

A kernel that carries its own ``@triton.autotune`` refuses meta-parameters given at launch
("Conflicting meta-parameters"), so the search launches the inner JIT function instead; the
autotuner's configurations are kept (`KernelEntry.configs`: the search evaluates them first,
`objectives.triton.autotune_points`) and its ``@triton.heuristics``
still fill the arguments a configuration does not set (a ``BLOCK_SIZE`` from ``n_cols``, say),
as at a normal launch. Tensors go by name when the kernel names every input of the
description (pointers interleaved with strides, as in most production kernels), else first and
in the description's order.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class KernelEntry:
    """A kernel entry point unwrapped.

    Attributes:
        jit: The innermost ``@triton.jit`` function (what the search launches).
        parameters: Its parameter names, in order.
        heuristics: ``(name, fn)`` of each ``@triton.heuristics`` value, outermost first (the
            order Triton computes them); ``fn`` takes the launch's named arguments.
        configs: The ``triton.Config`` list of an ``@triton.autotune`` around it (empty: none).
    """

    jit: Any
    parameters: tuple[str, ...]
    heuristics: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...] = ()
    configs: tuple[Any, ...] = ()

    def bind(
        self, tensors: Mapping[str, Any], kwargs: Mapping[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The positional and keyword arguments of one launch on `tensors` (by name when the
        kernel names all of them, else first, in order) with `kwargs`, plus the heuristics'
        values of the arguments neither gives."""
        if set(tensors) <= set(self.parameters):
            args: list[Any] = []
            named = {**tensors, **kwargs}
        else:
            args = list(tensors.values())
            named = dict(kwargs)
        if self.heuristics:
            scope = {**dict(zip(self.parameters, args, strict=False)), **named}
            for name, fn in self.heuristics:
                if name not in scope:
                    scope[name] = named[name] = fn(scope)
        return args, named

    def derived(self, named: Mapping[str, Any]) -> dict[str, Any]:
        """The heuristics' values that `named` (arguments without tensors) determines, for the
        compile key of a shape; a heuristic that needs a tensor is left out."""
        scope = dict(named)
        for name, fn in self.heuristics:
            if name not in scope:
                try:
                    scope[name] = fn(scope)
                except (KeyError, AttributeError, TypeError):
                    continue
        return {k: v for k, v in scope.items() if k not in named}


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
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.autotuner import Heuristics

    fn = getattr(load_module(source), entry)
    heuristics: list[tuple[str, Callable[[dict[str, Any]], Any]]] = []
    configs: tuple[Any, ...] = ()
    while isinstance(fn, Autotuner | Heuristics):
        if isinstance(fn, Heuristics):
            heuristics.extend(fn.values.items())
        else:
            configs = tuple(fn.configs)
        fn = fn.fn
    # Under the interpreter the JIT function's Python function is `fn` too.
    parameters = tuple(inspect.signature(getattr(fn, "fn", fn)).parameters)
    return KernelEntry(jit=fn, parameters=parameters, heuristics=tuple(heuristics), configs=configs)
