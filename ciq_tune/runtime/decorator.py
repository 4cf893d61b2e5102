"""`@tuned(file)`: a Triton kernel, unmodified, launched with its tuned configurations.

    @ciq_tune.runtime.tuned("rms_norm.controls.yaml")
    @triton.autotune(configs=[...], key=["n_cols"])     # left as the project ships it
    @triton.jit
    def rms_norm_forward(Y_ptr, Y_row_stride, X_ptr, X_row_stride, W_ptr, n_cols, eps, ...):
        ...

    rms_norm_forward[(M,)](y, y.stride(0), x, x.stride(0), w, n_cols, eps)

Each launch reads its sizes off its arguments, as the description named them when the kernel
was tuned (the controls file's `benchmark.dims` and `benchmark.arguments`: ``x`` of shape
``[M, N]`` gives M and N; an argument ``n_cols`` described as ``N`` gives N), picks the tuned
entry of those sizes with the file's selection rule (the nearest tuned shape, with one warning,
for sizes never tuned) and calls the inner ``@triton.jit`` function with that configuration. It
never times at launch, so every process and rank picks the same configuration; the choice per
size key is cached after the first launch, so a launch adds a key lookup. A file tuned on
another GPU architecture or under another Triton version is refused unless
``allow_mismatch=True``: its configurations were fast there, not necessarily here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ciq_tune.errors import ControlsFileError
from ciq_tune.runtime.triton_kernel import KernelEntry
from ciq_tune.runtime.triton_kernel import unwrap
from ciq_tune.runtime.tuned_file import load

_NAME = re.compile(r"^[A-Za-z_]\w*$")


def tuned(path: str | Path, *, allow_mismatch: bool = False) -> Callable[[Any], TunedLaunch]:
    """A decorator that launches a Triton kernel with the tuned configuration of each launch's
    sizes (see the module docstring).

    Args:
        path: The controls file `ciq-tune tune` wrote for this kernel.
        allow_mismatch: Use a file tuned on another GPU architecture or Triton version.

    Raises:
        ControlsFileError: the file is unreadable, does not verify, or (at the first launch)
            was tuned for another GPU architecture or Triton version.
    """
    kernel = load(path)

    def decorate(fn: Any) -> TunedLaunch:
        return TunedLaunch(kernel, unwrap(fn), allow_mismatch=allow_mismatch)

    return decorate


class TunedLaunch:
    """A kernel launched as ``kernel[grid](*args, **kwargs)`` with its tuned configurations.

    Args:
        tuned: The loaded controls file (`ciq_tune.runtime.TunedKernel`).
        entry: The unwrapped kernel (`ciq_tune.runtime.triton_kernel.unwrap`).
        allow_mismatch: Launch even when the file was tuned for another GPU or Triton.
    """

    def __init__(self, tuned: Any, entry: KernelEntry, *, allow_mismatch: bool = False) -> None:
        self.tuned = tuned
        self.entry = entry
        self._allow_mismatch = allow_mismatch
        self._checked = False
        bench = tuned.controls_file.benchmark
        self._dims = {name: list(dims) for name, dims in bench.dims.items()}
        # An argument described as a bare size name (``n_cols: N``) gives that size.
        self._argument_sizes = {
            arg: text.strip() for arg, text in bench.arguments.items() if _NAME.match(text.strip())
        }
        self._size_names = set(bench.sizes) | set().union(*self.tuned.tuned_shapes())
        self._chosen: dict[tuple[tuple[str, int], ...], dict[str, Any]] = {}
        # The fewest arguments whose values give the sizes the rule selects by, by position and
        # name: a launch's cache key is read off them without binding every argument.
        index = {name: i for i, name in enumerate(entry.parameters)}
        gives = {n: {d for d in dims if isinstance(d, str)} for n, dims in self._dims.items()}
        gives |= {n: {size} for n, size in self._argument_sizes.items()}
        gives |= {n: {n} for n in sorted(self._size_names)}
        needed = set(self.tuned.rule.key or self._size_names)
        deciding = []
        for name in sorted(gives, key=lambda n: -len(gives[n] & needed)):
            if name in index and gives[name] & needed:
                deciding.append((index[name], name, name in self._dims))
                needed -= gives[name]
        self._deciding = deciding
        self._plans: dict[tuple[Any, ...], tuple[dict[str, Any], bool]] = {}

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid)

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        """Launch on `grid` (a tuple, or a function of the launch's named arguments, as for a
        ``@triton.jit`` kernel) with the tuned configuration of the arguments' sizes."""
        key = self._launch_key(args, kwargs)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(args, kwargs)
        extra, rebind = plan
        if rebind or self.entry.heuristics:
            named = {**dict(zip(self.entry.parameters, args, strict=False)), **kwargs}
            _, launch = self.entry.bind({}, {**named, **extra})
            return self.entry.jit.run(grid=grid, warmup=False, **launch)
        launch = {**kwargs, **extra} if kwargs else extra
        return self.entry.jit.run(*args, grid=grid, warmup=False, **launch)

    def _launch_key(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
        key = []
        for position, name, is_tensor in self._deciding:
            value = args[position] if position < len(args) else kwargs.get(name)
            # A tensor's shape (torch.Size) is a tuple: hashed and compared as one.
            key.append(value.shape if is_tensor and value is not None else value)
        return tuple(key)

    def _plan(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[dict[str, Any], bool]:
        """The tuned keyword arguments of a launch key, and whether a positional argument
        carries one of them (the launch is then bound by name)."""
        named = {**dict(zip(self.entry.parameters, args, strict=False)), **kwargs}
        extra = self.configuration(named)
        rebind = any(name in extra for name in self.entry.parameters[: len(args)])
        return extra, rebind

    def configuration(self, named: Mapping[str, Any]) -> dict[str, Any]:
        """The tuned keyword arguments (parameters and Triton options) of a launch with these
        named arguments."""
        if not self._checked:
            self._check_target()
        sizes = self.sizes_of(named)
        names = self.tuned.rule.key or sorted(sizes)
        chosen = {k: sizes[k] for k in names if k in sizes}
        key = tuple(sorted(chosen.items()))
        if key not in self._chosen:
            self._chosen[key] = self.tuned.kwargs_for(chosen)
        return self._chosen[key]

    def sizes_of(self, named: Mapping[str, Any]) -> dict[str, int]:
        """The description's sizes read off a launch's named arguments: tensors' shapes by
        `benchmark.dims`, size-valued `arguments`, and integer arguments named as a size."""
        sizes: dict[str, int] = {}
        for name, dims in self._dims.items():
            shape = getattr(named.get(name), "shape", None)
            if shape is not None:
                for dim, value in zip(dims, shape, strict=False):
                    if isinstance(dim, str):
                        sizes[dim] = int(value)
        for arg, size in self._argument_sizes.items():
            if isinstance(named.get(arg), int):
                sizes[size] = int(named[arg])
        for name in self._size_names:
            value = named.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                sizes[name] = value
        return sizes

    def _check_target(self) -> None:
        """Refuse a file tuned for another GPU architecture or Triton version."""
        import triton

        record = self.tuned.controls_file
        problems = []
        tuned_triton = record.compilers.get("triton", {}).get("version")
        if tuned_triton is not None and tuned_triton != triton.__version__:
            problems.append(f"Triton {tuned_triton}, this is {triton.__version__}")
        here = _device_arch()
        # sm_90a and sm_90 are one GPU; the suffix only selects instructions.
        if here is not None and here != re.sub(r"[af]$", "", record.kernel.arch):
            problems.append(f"{record.kernel.arch}, this GPU is {here}")
        if problems and not self._allow_mismatch:
            raise ControlsFileError(
                f"{self.tuned.source}: tuned for {'; '.join(problems)}; re-tune here, or pass "
                "allow_mismatch=True to use it anyway"
            )
        self._checked = True


def _device_arch() -> str | None:
    """The current CUDA device as ``sm_NN``, or None without one (Triton's interpreter)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        major, minor = torch.cuda.get_device_capability()
    except Exception:  # no torch, no driver: nothing to compare with
        return None
    return f"sm_{major}{minor}"
