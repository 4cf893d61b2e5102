"""A Triton kernel as its project ships it: the `@triton.jit` function under any
`@triton.autotune` and `@triton.heuristics` decorators, and a launch that binds arguments the
way the kernel declares them.

A kernel that carries its own ``@triton.autotune`` refuses meta-parameters given at launch
("Conflicting meta-parameters"), so a tuned configuration goes to the inner JIT function; the
autotuner's configurations are kept (`KernelEntry.configs`) and its ``@triton.heuristics`` still
fill the arguments a configuration does not set (a ``BLOCK_SIZE`` from ``n_cols``, say), as at a
normal launch. The search (`objectives.triton_entry`) and the launch-time decorator
(`ciq_tune.runtime.tuned`) both launch through it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KernelEntry:
    """A kernel entry point unwrapped.

    Attributes:
        jit: The innermost ``@triton.jit`` function (what a tuned launch calls).
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


def unwrap(fn: Any) -> KernelEntry:
    """`fn` (a ``@triton.jit`` function, possibly under ``@triton.autotune`` and
    ``@triton.heuristics``) unwrapped."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.autotuner import Heuristics

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
