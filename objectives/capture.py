"""Kernel descriptions captured from a real run: the launches of named Triton kernels, recorded
while the program runs, written as one description per kernel (named as the program launched
it: the module attribute bound to the decorated kernel).

    with ciq_tune.capture("rms_norm_forward", out="captured/"):
        model(batch)                          # the program as it is
    # captured/rms_norm_forward.yaml: its shapes (weights = launch counts), ready to tune

While the block runs, every ``kernel[grid](...)`` of a named kernel (a ``@triton.jit``
function, also under ``@triton.autotune``/``@triton.heuristics``) is recorded: each argument's
shape, dtype and strides (tensors) or value (numbers), and the grid. Only the first launch of
each distinct argument signature costs more than a dictionary update: its tensors are copied
before the launch to tell the outputs (the tensors the launch wrote) from the inputs. Results
never change: the launch itself is the program's own.

The description names each tensor dimension after its first appearance (``X_ptr_dim1``) and
reuses the name wherever the same values recur (a weight's length, a stride of a contiguous
tensor); integer arguments become `arguments` over those sizes (``X_row_stride: X_ptr_dim1``,
``n_elements: x_dim0 * x_dim1``), a constant, or a size of their own; floats become `scalars`.
A tensor launched as a view (a slice of a wider tensor, a weight broadcast with stride 0) keeps
its layout: its `strides`, each 0, 1 or a size (``x_stride0``).
The grid is written over the sizes when each axis is a constant or one term or the product of
two (a tiled matmul's ``ceil(M / BLOCK_SIZE_M) * ceil(N / BLOCK_SIZE_N)``), a term being a
size, ``ceil(size / c)`` or, for a grid of the autotuned meta-parameters (probed with each
configuration of the kernel's own autotuner), ``ceil(size / PARAM)``. The reference is the
kernel as shipped (``reference: shipped``), and the space its launch options (defaulting to
those the program passed) plus the values of its own `@triton.autotune` list.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
from collections.abc import Iterator
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

from ciq_tune.errors import DescriptionError
from ciq_tune.runtime.triton_kernel import KernelEntry
from ciq_tune.runtime.triton_kernel import unwrap
from objectives.description import SHIPPED

# The launch options every captured space searches (Triton's defaults first).
LAUNCH_SPACE = {
    "num_warps": {"ordinal": [1, 2, 4, 8, 16, 32], "default": 4},
    "num_stages": {"ordinal": [1, 2, 3, 4, 5], "default": 3},
}
# Block sizes `ceil(size / c)` a grid axis is tried against.
_GRID_DIVISORS = [2**k for k in range(1, 13)]


@dataclass(frozen=True)
class Tensor:
    """A tensor argument as launched: its shape, dtype and strides."""

    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...]


@dataclass
class KernelLaunches:
    """Every recorded launch of one kernel, by argument signature.

    Attributes:
        entry: The kernel unwrapped (`ciq_tune.runtime.triton_kernel.unwrap`).
        source: Its source file; `name` its symbol there.
        signatures: Per distinct signature, the arguments of its first launch (name → `Tensor`
            or value) and its grid (`Probes`).
        counts: Launches per signature.
        outputs: The tensors the first launch of any signature wrote.
    """

    entry: KernelEntry
    source: str
    name: str
    signatures: dict[tuple[Any, ...], tuple[dict[str, Any], Probes | None]] = field(
        default_factory=dict
    )
    counts: dict[tuple[Any, ...], int] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)


class Capture:
    """What `capture` recorded: `launches` by kernel name, and `descriptions()` of them."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.launches: dict[str, KernelLaunches] = {}
        self._lock = threading.Lock()
        self._inside = threading.local()
        self._entries: dict[int, tuple[KernelEntry, str]] = {}

    def record(self, kernel: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Launch `kernel` on `grid` as called, recording it first (see the module docstring)."""
        known = self._entries.get(id(kernel))
        if known is None:
            entry = unwrap(kernel)
            known = self._entries[id(kernel)] = (entry, _entry_name(kernel, entry))
        entry, name = known
        launch = _ORIGINAL_GETITEM(kernel, grid)
        wanted = name in self.names or "*" in self.names
        if not wanted or getattr(self._inside, "active", False):
            return launch(*args, **kwargs)
        signature = _signature(args, kwargs)
        with self._lock:
            launches = self.launches.get(name)
            if launches is None:
                source = inspect.getsourcefile(_python_fn(entry)) or ""
                launches = self.launches[name] = KernelLaunches(entry, source, name)
            first = signature not in launches.signatures
            launches.counts[signature] = launches.counts.get(signature, 0) + 1
        if not first:
            return launch(*args, **kwargs)
        named = {**dict(zip(entry.parameters, args, strict=False)), **kwargs}
        values = {k: _recorded(v) for k, v in named.items()}
        before = {k: v.clone() for k, v in named.items() if _is_tensor(v)}
        self._inside.active = True  # a launch from inside this one is not the program's
        try:
            result = launch(*args, **kwargs)
        finally:
            self._inside.active = False
        written = {k for k, v in before.items() if not _same(v, named[k])}
        with self._lock:
            launches.outputs |= written
            launches.signatures[signature] = (values, _grid_probes(grid, named, entry))
        return result

    def descriptions(self) -> dict[str, dict[str, Any]]:
        """One description (as YAML data) per recorded kernel."""
        return {name: describe(launches) for name, launches in self.launches.items()}

    def write(self, folder: str | Path) -> list[Path]:
        """Write ``<kernel>.yaml`` per recorded kernel into `folder`; the paths written."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for name, data in self.descriptions().items():
            path = folder / f"{name}.yaml"
            count = sum(self.launches[name].counts.values())
            header = f"# Captured by ciq_tune.capture from {count} launches.\n"
            path.write_text(header + yaml.safe_dump(data, sort_keys=False))
            written.append(path)
        return written


@contextlib.contextmanager
def capture(*names: str, out: str | Path | None = None) -> Iterator[Capture]:
    """Record the launches of the Triton kernels called `names` (``"*"``: every kernel) while
    the block runs; on exit write one description per kernel into `out` (when given). See the
    module docstring.

    Raises:
        ValueError: no kernel name is given.
    """
    if not names:
        raise ValueError("name at least one kernel to capture (its function name)")
    from triton.runtime.jit import KernelInterface

    recorder = Capture(tuple(names))

    def getitem(kernel: Any, grid: Any) -> Any:
        return lambda *args, **kwargs: recorder.record(kernel, grid, args, kwargs)

    KernelInterface.__getitem__ = getitem  # type: ignore[method-assign]
    try:
        yield recorder
    finally:
        KernelInterface.__getitem__ = _ORIGINAL_GETITEM  # type: ignore[method-assign]
    if out is not None:
        recorder.write(out)


def _original_getitem() -> Any:
    from triton.runtime.jit import KernelInterface

    return KernelInterface.__getitem__


_ORIGINAL_GETITEM = _original_getitem()


def describe(launches: KernelLaunches) -> dict[str, Any]:
    """The description of one kernel's recorded launches (see the module docstring).

    Raises:
        DescriptionError: a launch has no tensor argument, or its grid cannot be written over
            the sizes.
    """
    firsts = [values for values, _ in launches.signatures.values()]
    weights = [launches.counts[s] for s in launches.signatures]
    grids = [probes for _, probes in launches.signatures.values()]
    names = [n for n in launches.entry.parameters if n in firsts[0]]
    tensors = [n for n in names if isinstance(firsts[0][n], Tensor)]
    if not tensors:
        raise DescriptionError(f"{launches.name}: no tensor argument was launched; nothing to time")
    sizes: dict[str, list[int]] = {}  # size name → its value in each signature

    def size_for(values: list[int], fallback: str) -> str:
        for existing, seen in sizes.items():
            if seen == values:
                return existing
        sizes[fallback] = values
        return fallback

    inputs = []
    for name in tensors:
        spec = firsts[0][name]
        dims = [
            size_for([f[name].shape[d] for f in firsts], f"{name}_dim{d}")
            for d in range(len(spec.shape))
        ]
        init = "randn" if "float" in spec.dtype else "randint"
        entry: dict[str, Any] = {"name": name, "shape": dims, "dtype": spec.dtype, "init": init}
        if not all(_is_contiguous(f[name]) for f in firsts):
            # A view (a slice of a wider tensor, a broadcast weight): its strides, each a
            # constant or a size of its own.
            steps: list[int | str] = []
            for d in range(len(spec.shape)):
                seen = [f[name].strides[d] for f in firsts]
                if len(set(seen)) == 1 and seen[0] in (0, 1):
                    steps.append(seen[0])
                else:
                    steps.append(size_for(seen, f"{name}_stride{d}"))
            entry["strides"] = steps
        inputs.append(entry)
    dims_named = set(sizes)
    arguments: dict[str, str] = {}
    scalars: dict[str, float] = {}
    for name in names:
        if name in tensors:
            continue
        values = [f[name] for f in firsts]
        if all(isinstance(v, bool) for v in values):
            arguments[name] = str(int(values[0]))
        elif all(isinstance(v, int) for v in values):
            # 1 (a last dimension's stride) is a constant, whatever size happens to be 1.
            match = (
                None
                if set(values) == {1}
                else _over_sizes(values, {n: v for n, v in sizes.items() if n in dims_named})
            )
            if match is not None:
                arguments[name] = match
            elif len(set(values)) == 1:
                arguments[name] = str(values[0])
            else:
                sizes[name] = values  # passed by name, as a size of its own
        elif all(isinstance(v, float) for v in values):
            scalars[name] = float(values[0])
        else:
            raise DescriptionError(
                f"{launches.name}: argument `{name}` was launched as {values[0]!r}, which a "
                "description cannot give (tensors, integers and floats only)"
            )
    first_sizes = {name: seen[0] for name, seen in sizes.items()}
    data: dict[str, Any] = {
        "name": launches.name,
        "kind": "triton",
        "source": launches.source,
        "entry": launches.name,
        "sizes": first_sizes,
    }
    if len(firsts) > 1:
        data["shapes"] = [
            {**{name: seen[i] for name, seen in sizes.items()}, "weight": weights[i]}
            for i in range(len(firsts))
        ]
    data["sizes_not_passed"] = sorted(dims_named)
    if arguments:
        data["arguments"] = arguments
    if scalars:
        data["scalars"] = scalars
    data["inputs"] = inputs
    data["outputs"] = [n for n in tensors if n in launches.outputs]
    if not data["outputs"]:
        raise DescriptionError(f"{launches.name}: no launch wrote a tensor; nothing to check")
    # The grid may follow a product too (an element count over a block).
    terms = dict(sizes)
    for text in arguments.values():
        if "*" in text:
            terms[text] = [
                math.prod(sizes[f][k] for f in text.split(" * ")) for k in range(len(firsts))
            ]
    data["grid"] = _grid_expression(launches.name, grids, terms)
    data["reference"] = SHIPPED
    data["l2"] = "warm"  # as the kernel ran in the program: after the kernel that wrote its inputs
    data["params"] = _space(launches.entry, firsts[weights.index(max(weights))])
    data["controls"] = {}
    return data


def _is_contiguous(tensor: Tensor) -> bool:
    """Row-major without gaps (a dimension of length 1 may have any stride, as in torch)."""
    step = 1
    for length, stride in zip(reversed(tensor.shape), reversed(tensor.strides), strict=True):
        if length != 1 and stride != step:
            return False
        step *= length
    return True


def _over_sizes(values: list[int], sizes: Mapping[str, list[int]]) -> str | None:
    """An integer argument's values as an expression over the tensor sizes, when one fits every
    signature: a size (a length, a contiguous row's stride) or the product of two or three (an
    element count, the stride of a 3-d tensor's first dimension)."""
    names = list(sizes)
    products = [[n] for n in names]
    products += [[a, b] for i, a in enumerate(names) for b in names[i:]]
    products += [
        [a, b, c]
        for i, a in enumerate(names)
        for j, b in enumerate(names[i:], i)
        for c in names[j:]
    ]
    for factors in products:
        if all(math.prod(sizes[f][k] for f in factors) == v for k, v in enumerate(values)):
            return " * ".join(factors)
    return None


def _space(entry: KernelEntry, launched: Mapping[str, Any]) -> dict[str, Any]:
    """The launch options, plus each kernel parameter its own autotuner list varies. A launch
    option the program passed (`launched`: the most frequent signature's arguments) is its
    default, so that the baseline is the project's own setting."""
    space: dict[str, dict[str, Any]] = {k: dict(v) for k, v in LAUNCH_SPACE.items()}
    for option, spec in space.items():
        if launched.get(option) in spec["ordinal"]:
            spec["default"] = launched[option]
    values: dict[str, list[Any]] = {}
    for config in entry.configs:
        for key, value in config.kwargs.items():
            values.setdefault(key, [])
            if value not in values[key]:
                values[key].append(value)
    for key, listed in values.items():
        if all(isinstance(v, int) and not isinstance(v, bool) for v in listed):
            space[key] = {"ordinal": sorted(listed), "default": listed[0]}
    return space


Probes = list[tuple[dict[str, Any], tuple[int, ...]]]
"""A launch's grid evaluated: (the meta-parameters it was given, the grid) pairs."""


def _grid_probes(grid: Any, named: Mapping[str, Any], entry: KernelEntry) -> Probes | None:
    """The grid of a launch: as given, or a function of its arguments evaluated on them, or,
    when it needs the autotuned meta-parameters, on each configuration of the kernel's own
    autotuner (so that ``cdiv(n, meta["BLOCK"])`` can be written over the sizes and BLOCK).
    None when it cannot be evaluated."""
    if not callable(grid):
        items = _grid_tuple(grid)
        return None if items is None else [({}, items)]
    metas: list[dict[str, Any]] = [{}, *(dict(c.kwargs) for c in entry.configs)]
    probes = []
    for meta in metas:
        try:
            items = _grid_tuple(grid({**named, **meta}))
        except (KeyError, TypeError):  # needs meta-parameters this probe lacks
            continue
        if items is not None:
            probes.append((meta, items))
            if not meta:
                break  # a grid of the arguments alone
    return probes or None


def _grid_expression(name: str, grids: list[Probes | None], sizes: Mapping[str, list[int]]) -> str:
    known = [g for g in grids if g is not None]
    if len(known) < len(grids):
        raise DescriptionError(f"{name}: its grid could not be evaluated; write `grid` by hand")
    observed = [(i, meta, grid) for i, probes in enumerate(known) for meta, grid in probes]
    axes = [
        _axis(name, [(i, meta, grid[axis]) for i, meta, grid in observed], sizes)
        for axis in range(len(observed[0][2]))
    ]
    return "(" + ", ".join(axes) + ("," if len(axes) == 1 else "") + ")"


def _axis(
    name: str, observed: list[tuple[int, dict[str, Any], int]], sizes: Mapping[str, list[int]]
) -> str:
    """One grid axis over the sizes, from its values (signature, meta-parameters, value): a
    constant, or one term or the product of two (a tiled matmul's ``ceil(M / BLOCK_SIZE_M) *
    ceil(N / BLOCK_SIZE_N)``), each term a size, ``ceil(size / PARAM)`` for a meta-parameter
    the grid was probed with, or ``ceil(size / c)``. Meta-parameter terms come first: the search
    varies them, and the grid must follow."""
    values = {v for _, _, v in observed}
    if len(values) == 1 and not any(all(s[i] == v for i, _, v in observed) for s in sizes.values()):
        return str(values.pop())
    terms = _terms(observed, sizes)
    for text, term in terms:
        if all(term[k] == v for k, (_, _, v) in enumerate(observed)):
            return text
    for a, (text_a, term_a) in enumerate(terms):
        for text_b, term_b in terms[a:]:
            if all(term_a[k] * term_b[k] == v for k, (_, _, v) in enumerate(observed)):
                return f"{text_a} * {text_b}"
    raise DescriptionError(f"{name}: a grid axis is not over the sizes; write `grid` by hand")


def _terms(
    observed: list[tuple[int, dict[str, Any], int]], sizes: Mapping[str, list[int]]
) -> list[tuple[str, list[int]]]:
    """The candidate terms of a grid axis, each with its value at every observation."""
    params = sorted({k for _, meta, _ in observed for k, v in meta.items() if isinstance(v, int)})
    terms = []
    for size, seen in sizes.items():
        for param in params:
            if all(param in meta for _, meta, _ in observed):
                values = [math.ceil(seen[i] / meta[param]) for i, meta, _ in observed]
                terms.append((f"ceil({size} / {param})", values))
    for size, seen in sizes.items():
        terms.append((size, [seen[i] for i, _, _ in observed]))
    for size, seen in sizes.items():
        for c in _GRID_DIVISORS:
            terms.append((f"ceil({size} / {c})", [math.ceil(seen[i] / c) for i, _, _ in observed]))
    return terms


def _signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What tells two launches apart: each tensor's shape, dtype and strides, every other
    argument's value."""
    named = tuple((k, _identity(v)) for k, v in sorted(kwargs.items()))
    return tuple(_identity(v) for v in args) + named


def _identity(value: Any) -> Any:
    if _is_tensor(value):
        return (tuple(value.shape), value.dtype, value.stride())
    if isinstance(value, int | float | str | bool | type(None)):
        return value
    return repr(value)  # hashable whatever it is


def _recorded(value: Any) -> Any:
    if _is_tensor(value):
        dtype = str(value.dtype).removeprefix("torch.")
        return Tensor(tuple(value.shape), dtype, tuple(value.stride()))
    return value


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "stride") and hasattr(value, "clone")


def _same(before: Any, after: Any) -> bool:
    """Bit for bit (a NaN left in place is unchanged)."""
    import torch

    if before.shape != after.shape:
        return False
    as_bytes = [t.contiguous().view(torch.uint8) for t in (before, after)]
    return bool(torch.equal(*as_bytes))


def _grid_tuple(grid: Any) -> tuple[int, ...] | None:
    try:
        items = tuple(int(g) for g in grid)
    except (TypeError, ValueError):
        return None
    return items


def _python_fn(entry: KernelEntry) -> Any:
    return getattr(entry.jit, "fn", entry.jit)


def _entry_name(kernel: Any, entry: KernelEntry) -> str:
    """The name the program launched `kernel` by: its module's attribute bound to it (the
    decorated object), else its function's name."""
    fn = _python_fn(entry)
    for name, value in getattr(fn, "__globals__", {}).items():
        if value is kernel:
            return str(name)
    return str(fn.__name__)
