"""Kernel description files: what to compile, how to launch and check it, and what to search."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import ValidationError
from pydantic import field_validator
from pydantic import model_validator

import ciq_tune.space as ss
from ciq_tune.controls.controls_file import Benchmark
from ciq_tune.errors import ConstraintError
from ciq_tune.errors import DescriptionError
from ciq_tune.errors import SpaceError
from ciq_tune.space.constraints import SafeExpression
from ciq_tune.strict_io import KERNEL_SOURCE
from ciq_tune.strict_io import FileKind
from ciq_tune.strict_io import load_data
from ciq_tune.strict_io import sha256_file

KernelKind = Literal["ptx", "cuda", "triton", "helion"]
Mode = Literal["min", "max"]

# The metric a kind is tuned for when the description names none: PTX is compile-only (no GPU),
# so it minimises spilled bytes; everything that runs is timed.
DEFAULT_METRIC: dict[str, str] = {
    "ptx": "spill_bytes",
    "cuda": "time_ms",
    "triton": "time_ms",
    "helion": "time_ms",
}
# Metrics read from NVML's energy counter after the timing (objectives._nvml.measure_energy):
# a trainable measures them only when asked (they cost ~0.5 s of back-to-back launches).
ENERGY_METRICS = ("energy_mj", "power_w")
# The metrics each kind's trainable reports that a search can optimise (PTX: ptxas statistics;
# the timed kinds: `objectives._bench.TimingStats` in ms, plus compile seconds).
_TIMED_METRICS = (
    "time_ms",
    "median_ms",
    "mean_ms",
    "min_ms",
    "max_ms",
    "iqr_ms",
    "cv",
    "compile_s",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    *ENERGY_METRICS,
)
KIND_METRICS: dict[str, tuple[str, ...]] = {
    "ptx": (
        "spill_bytes",
        "spill_stores",
        "spill_loads",
        "registers",
        "stack_bytes",
        "sass_instructions",
        "compile_time_s",
    ),
    "cuda": (*_TIMED_METRICS, "registers", "spill_bytes", "stack_bytes"),
    "triton": _TIMED_METRICS,
    "helion": _TIMED_METRICS,
}
# The control catalogs searched when a description has no `controls` section.
DEFAULT_CONTROLS: dict[str, tuple[str, ...]] = {
    "ptx": ("ptxas",),
    "cuda": ("nvcc",),
    "triton": ("triton",),
    "helion": (),
}
KNOWN_CATALOGS = ("ptxas", "nvcc", "triton")
# Keyword → how its YAML value maps to a `ciq_tune.space` primitive.
PARAM_KINDS = ("range", "choice", "ordinal", "literal", "log_sampling", "uniform")
_PARAM_OPTIONS = ("knockout_prob", "when", "log", "seed_low", "seed_high", "default")
_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")
# `name` becomes file and folder names under `--out`: a file stem, never a path.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_REFERENCE_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
SHIPPED = "shipped"
"""`reference: shipped`: the kernel's own launch as its project ships it is the reference (a
Triton `entry` with its own `@triton.autotune`/`@triton.heuristics`, no tuned values)."""
_DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputSpec(_Strict):
    """One tensor argument of the kernel, created fresh for every check.

    `shape` items are integers or names of `sizes`. `strides` (elements per step of each
    dimension, integers or names of `sizes`; default: contiguous, row-major) lays the tensor
    out as a view of a larger buffer: a row stride larger than the row (a slice of a wider
    matrix), or 0 for a broadcast input (a weight shared by every row). `init` is never zeros,
    so that a kernel that does not write its output cannot pass the correctness check by
    accident.
    """

    name: str
    shape: list[int | str] = Field(default_factory=list)
    strides: list[int | str] | None = None
    dtype: str = "float32"
    init: Literal["randn", "rand", "randint", "ones"] = "randn"

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        if value not in _DTYPES:
            raise ValueError(f"dtype={value!r} is not one of {list(_DTYPES)}")
        return value


def _check_strides(spec: InputSpec, size_names: set[str], *, output: bool) -> None:
    """An input's `strides`: one per dimension, each a size's name or an integer >= 0 (> 0
    for an output: two elements written at one address would race).

    Raises:
        ValueError: a stride breaks that rule.
    """
    if spec.strides is None:
        return
    if len(spec.strides) != len(spec.shape):
        raise ValueError(
            f"input {spec.name!r} has {len(spec.strides)} strides for its {len(spec.shape)} "
            "dimensions; give one per dimension"
        )
    for step in spec.strides:
        if isinstance(step, str) and step not in size_names:
            raise ValueError(
                f"input {spec.name!r} has stride {step!r}, which is not in `sizes` "
                f"{sorted(size_names)}"
            )
        if isinstance(step, int) and (step < 0 or (output and step == 0)):
            raise ValueError(
                f"input {spec.name!r} has stride {step}: strides are >= 0"
                + (
                    ", and > 0 for an output (a stride of 0 writes one address twice)"
                    if output
                    else ""
                )
            )


class Tolerance(_Strict):
    """Bounds of `torch.testing.assert_close`-style comparison with the reference."""

    atol: float = Field(default=1e-2, ge=0, allow_inf_nan=False)
    rtol: float = Field(default=1e-2, ge=0, allow_inf_nan=False)


class Timeouts(_Strict):
    """Wall-clock limits (seconds) for one candidate's compile and for one benchmark run."""

    compile_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    run_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)


class ControlSelection(_Strict):
    """Which controls of one catalog to search (see `ciq_tune.controls.Catalog.space`).

    `vendor_controls_files` (ptxas only): a user's own vendor controls files, offered to the
    search as one opaque choice (``--apply-controls FILE``) against no file; paths relative to
    the description file. The installed ptxas must take ``--apply-controls`` (13.3 or later).
    """

    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)
    allow_numerics_changes: bool = False
    vendor_controls_files: list[str] = Field(default_factory=list)


SelectionMode = Literal["one", "per_shape", "per_key"]
# The mode a description with `shapes` gets when it names none: compiler controls of PTX and
# CUDA C++ apply to a whole compilation unit, so one configuration serves every shape; a Triton
# or Helion kernel is specialised per launch, so each shape gets its own.
DEFAULT_SELECTION: dict[str, SelectionMode] = {
    "ptx": "one",
    "cuda": "one",
    "triton": "per_shape",
    "helion": "per_shape",
}


class Shape(_Strict):
    """One entry of a benchmark matrix: complete sizes and the entry's share of the traffic."""

    sizes: dict[str, int]
    weight: float = Field(default=1.0, gt=0)

    def label(self) -> str:
        """``M=16,N=4096,K=4096``: the shape's sizes in the description's order."""
        return ",".join(f"{k}={v}" for k, v in self.sizes.items())


class Selection(_Strict):
    """How configurations map to the shapes of `shapes`.

    ``one``: one configuration for the whole matrix, scored by the weighted geometric mean of
    per-shape time relative to the baseline, a candidate slower than `worst_shape_limit` × the
    baseline on any shape being rejected. ``per_shape``: one configuration per shape.
    ``per_key``: one per bucket of the `key` sizes (as ``@triton.autotune(key=…)``); `bucket`
    ``exact`` groups equal values, ``pow2`` values with the same next power of two.
    """

    mode: SelectionMode
    key: list[str] = Field(default_factory=list)
    bucket: Literal["exact", "pow2"] = "exact"
    worst_shape_limit: float = Field(default=1.10, ge=1.0)

    @model_validator(mode="after")
    def _key_matches_mode(self) -> Selection:
        if self.mode == "per_key" and not self.key:
            raise ValueError("mode='per_key' needs `key`: the sizes whose values pick a config")
        if self.mode != "per_key" and self.key:
            raise ValueError(f"`key` applies to mode='per_key' only, got mode={self.mode!r}")
        return self


class Alternative(_Strict):
    """The vendor or library implementation a tuned kernel is compared with.

    Attributes:
        name: What it is called in reports (``"cuBLAS (torch.matmul)"``).
        expression: A Python expression over the non-output inputs, the `sizes`, ``math`` and
            the kind's array library (``torch``; ``cupy`` for CUDA C++) whose value is the
            output (``"torch.matmul(a, b)"``).
    """

    name: str
    expression: str


class KernelDescription(_Strict):
    """A kernel to tune, as read from a description file (YAML or JSON).

    Paths are resolved relative to the description file. See docs/kernel-description.md.
    """

    name: str
    kind: KernelKind
    source: Path
    entry: str | None = None
    arch: str = "sm_90"
    metric: str
    mode: Mode = "min"
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    constraints: list[str] = Field(default_factory=list)
    controls: dict[str, ControlSelection]
    inputs: list[InputSpec] = Field(default_factory=list)
    sizes: dict[str, int] = Field(default_factory=dict)
    # Floating-point scalar arguments (saxpy's `a`): passed after the sizes, in order, as 32-bit
    # floats to a CUDA kernel and by name to a Triton kernel; usable in the reference.
    scalars: dict[str, float] = Field(default_factory=dict)
    # A benchmark matrix: each entry overrides `sizes` (which then hold the defaults).
    shapes: list[Shape] = Field(default_factory=list)
    selection: Selection | None = None
    # Sizes used only by `grid`, `shapes`, input shapes or the reference: not launch arguments.
    sizes_not_passed: list[str] = Field(default_factory=list)
    # Integer arguments of a Triton kernel computed per shape from `sizes`, passed by name: the
    # strides and element counts a kernel takes as it is written (`X_row_stride: N`).
    arguments: dict[str, str] = Field(default_factory=dict)
    outputs: list[str] = Field(default_factory=list)
    grid: str | None = None
    block: str | None = None
    reference: str | None = None
    # The vendor or library implementation to compare with (`ciq-tune verify`, the GPU suite).
    alternative: Alternative | None = None
    tolerance: Tolerance = Field(default_factory=Tolerance)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    # How a candidate finds L2 when timed (`objectives.protocol.MeasurementProtocol.l2`): cold
    # (flushed, inputs rotated: from memory) or warm (as in a model right after the kernel that
    # wrote its inputs).
    l2: Literal["cold", "warm"] = "cold"
    # Known-good configurations evaluated right after the baseline (warm start), each
    # {"params": {...}, "controls": {...}}; missing values take their defaults.
    starting_points: list[dict[str, Any]] = Field(default_factory=list)
    path: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_kind_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        kind = data.get("kind")
        if kind in DEFAULT_METRIC:
            data.setdefault("metric", DEFAULT_METRIC[kind])
            data.setdefault("controls", {name: {} for name in DEFAULT_CONTROLS[kind]})
        if "name" not in data and isinstance(data.get("source"), str):
            data["name"] = Path(data["source"]).stem
        if isinstance(data.get("shapes"), list):
            data["shapes"] = [_shape_entry(i, e) for i, e in enumerate(data["shapes"])]
            if data["shapes"] and kind in DEFAULT_SELECTION:
                data.setdefault("selection", {"mode": DEFAULT_SELECTION[kind]})
        return data

    @field_validator("name")
    @classmethod
    def _stem(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f"name={value!r} must be a file stem (letters, digits, '_', '.', '-'; not starting "
                "with '.' or '-'; at most 100 characters), never a path: it names the files "
                "written under --out"
            )
        return value

    @field_validator("arch")
    @classmethod
    def _valid_arch(cls, value: str) -> str:
        if not _ARCH.match(value):
            raise ValueError(f"arch={value!r} is not a GPU name such as 'sm_90' or 'sm_90a'")
        return value

    @field_validator("controls")
    @classmethod
    def _known_catalogs(cls, value: dict[str, ControlSelection]) -> dict[str, ControlSelection]:
        unknown = sorted(set(value) - set(KNOWN_CATALOGS))
        if unknown:
            raise ValueError(f"unknown catalogs {unknown}; known: {list(KNOWN_CATALOGS)}")
        vendor = sorted(n for n, s in value.items() if s.vendor_controls_files and n != "ptxas")
        if vendor:
            raise ValueError(
                f"`controls.{vendor[0]}.vendor_controls_files`: only ptxas takes vendor controls "
                "files (--apply-controls)"
            )
        return value

    def vendor_controls_files(self, catalog: str) -> tuple[str, ...]:
        """The vendor controls files offered to `catalog`'s search (see `ControlSelection`)."""
        selection = self.controls.get(catalog)
        return tuple(selection.vendor_controls_files) if selection is not None else ()

    @field_validator("reference")
    @classmethod
    def _reference_form(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                "reference is empty; give 'module:function' or an expression over the inputs"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KernelDescription:
        # Controls of a compiler the kind does not run would be searched and silently ignored.
        foreign = sorted(set(self.controls) - set(DEFAULT_CONTROLS[self.kind]))
        if foreign:
            used = list(DEFAULT_CONTROLS[self.kind])
            raise ValueError(
                f"controls {foreign} do not apply to kind {self.kind!r}, which compiles with "
                + (f"{used} only" if used else "no control catalog (Helion: use `params`)")
            )
        clash = sorted(set(self.scalars) & (set(self.sizes) | {i.name for i in self.inputs}))
        if clash:
            raise ValueError(f"scalars {clash} also name a size or an input; names must differ")
        if self.metric not in KIND_METRICS[self.kind]:
            raise ValueError(
                f"metric={self.metric!r} is not a metric of kind {self.kind!r}; one of "
                f"{list(KIND_METRICS[self.kind])}"
            )
        names = {spec.name for spec in self.inputs}
        size_names = self.size_names()
        for spec in self.inputs:
            for dim in spec.shape:
                if isinstance(dim, str) and dim not in size_names:
                    raise ValueError(
                        f"input {spec.name!r} has shape item {dim!r}, which is not in `sizes` "
                        f"{sorted(size_names)}"
                    )
                if isinstance(dim, int) and dim < 0:
                    raise ValueError(f"input {spec.name!r} has a negative shape item {dim}")
            _check_strides(spec, size_names, output=spec.name in self.outputs)
        missing = [o for o in self.outputs if o not in names]
        if missing:
            raise ValueError(f"outputs {missing} are not names of `inputs` {sorted(names)}")
        if self.kind != "ptx" and self.entry is None:
            raise ValueError(f"kind={self.kind!r} needs `entry` (the kernel symbol or function)")
        if self.reference == SHIPPED and (self.kind != "triton" or not self.outputs):
            raise ValueError(
                "`reference: shipped` (the kernel's own launch) needs kind 'triton' and `outputs`"
            )
        if self.l2 == "warm" and self.kind == "ptx":
            raise ValueError("`l2: warm` is how a kernel is timed; kind 'ptx' is not timed")
        if self.kind == "helion" and not self.outputs:
            raise ValueError(
                "kind='helion' needs `outputs`: the kernel writes its results into tensors passed "
                "as arguments, which are poisoned before and checked after every run"
            )
        for field in ("grid", "block"):
            text = getattr(self, field)
            if text is not None:
                _check_expression(text, set(self.params) | size_names, field)
        self._check_arguments(size_names)
        self._check_matrix(size_names)
        self.param_space()  # raises on a malformed `params` entry
        return self

    def _check_arguments(self, size_names: set[str]) -> None:
        if self.arguments and self.kind != "triton":
            raise ValueError(f"`arguments` apply to kind 'triton', not {self.kind!r}")
        taken = size_names | set(self.scalars) | set(self.params) | {i.name for i in self.inputs}
        clash = sorted(set(self.arguments) & taken)
        if clash:
            raise ValueError(
                f"`arguments` {clash} also name a size, scalar, parameter or input; names must "
                "differ"
            )
        for name, text in self.arguments.items():
            _check_expression(text, size_names, f"arguments.{name}")

    def _check_matrix(self, size_names: set[str]) -> None:
        unknown = sorted(set(self.sizes_not_passed) - size_names)
        if unknown:
            raise ValueError(f"`sizes_not_passed` names {unknown}, which are not sizes")
        for index, shape in enumerate(self.shapes):
            missing = sorted(size_names - set(self.sizes) - set(shape.sizes))
            if missing:
                raise ValueError(
                    f"`shapes[{index}]` lacks {missing}: give them in the entry or in `sizes`"
                )
        labels = [self.at_shape(shape).sizes for shape in self.shapes]
        repeated = [i for i, sizes in enumerate(labels) if sizes in labels[:i]]
        if repeated:
            raise ValueError(f"`shapes[{repeated[0]}]` repeats an earlier shape")
        if self.selection is not None:
            if not self.shapes:
                raise ValueError("`selection` applies to a matrix: add `shapes`")
            wrong = sorted(set(self.selection.key) - size_names)
            if wrong:
                raise ValueError(f"`selection.key` names {wrong}, which are not sizes")

    def size_names(self) -> set[str]:
        """Every size name: the keys of `sizes` and of each `shapes` entry."""
        return set(self.sizes).union(*(s.sizes for s in self.shapes))

    def matrix(self) -> list[Shape]:
        """The benchmark matrix with complete sizes: `shapes` over the defaults of `sizes`, or
        the single shape `sizes` when there is no `shapes` list."""
        if not self.shapes:
            return [Shape(sizes=dict(self.sizes))]
        return [
            Shape(sizes=self.at_shape(shape).sizes, weight=shape.weight) for shape in self.shapes
        ]

    def at_shape(self, shape: Shape | Mapping[str, int]) -> KernelDescription:
        """This description at one shape: `sizes` replaced, no matrix (what one trial runs)."""
        given = shape.sizes if isinstance(shape, Shape) else shape
        sizes = {**self.sizes, **{k: int(v) for k, v in given.items()}}
        return self.model_copy(update={"sizes": sizes, "shapes": [], "selection": None})

    def launch_sizes(self) -> dict[str, int]:
        """The sizes passed to the kernel as arguments (all but `sizes_not_passed`)."""
        return {k: v for k, v in self.sizes.items() if k not in self.sizes_not_passed}

    def launch_arguments(self) -> dict[str, int]:
        """The integer arguments of a launch at this description's `sizes`: the sizes passed
        and each of `arguments` evaluated (a stride may be 0: a broadcast input).

        Raises:
            DescriptionError: an expression fails or gives no integer >= 0.
        """
        out = dict(self.launch_sizes())
        for name, text in self.arguments.items():
            field = f"arguments.{name}"
            try:
                value = SafeExpression(text).evaluate(dict(self.sizes))
            except ConstraintError as exc:
                raise DescriptionError(f"`{field}` {exc}") from None
            except (ArithmeticError, NameError, TypeError, ValueError) as exc:
                raise DescriptionError(f"`{field}` {text!r} failed on {self.sizes}: {exc}") from exc
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise DescriptionError(
                    f"`{field}` {text!r} gave {value!r} on {self.sizes}; it must give an int >= 0"
                )
            out[name] = value
        return out

    # -- derived views -------------------------------------------------------------------------
    @property
    def reference_is_callable(self) -> bool:
        """True when `reference` is a "module:function" path rather than an expression."""
        return self.reference is not None and bool(_REFERENCE_CALLABLE.match(self.reference))

    def param_space(self) -> dict[str, Any]:
        """The kernel-parameter search space as `ciq_tune.space` primitives (or conditionals)."""
        return {name: _param_from_yaml(name, spec) for name, spec in self.params.items()}

    def source_sha256(self) -> str:
        """Hex SHA-256 of the kernel source file's bytes (the controls file's provenance)."""
        return sha256_file(self.source, replace(KERNEL_SOURCE, error=DescriptionError))

    def benchmark_record(self) -> Benchmark:
        """What a controls file records of the benchmark a configuration was tuned on: the
        metric, the sizes and each input's shape, dtype and dimension names, the launch's
        argument expressions and how L2 was found."""
        return Benchmark(
            metric=self.metric,
            mode=self.mode,
            sizes=self.sizes,
            shapes={i.name: list(self.shape_of(i)) for i in self.inputs},
            dtypes={i.name: i.dtype for i in self.inputs},
            dims={i.name: list(i.shape) for i in self.inputs},
            arguments=dict(self.arguments),
            l2=self.l2,
        )

    def shape_of(self, spec: InputSpec) -> tuple[int, ...]:
        """Concrete shape of an input, with names of `sizes` replaced by their values."""
        return tuple(self.sizes[d] if isinstance(d, str) else d for d in spec.shape)

    def strides_of(self, spec: InputSpec) -> tuple[int, ...] | None:
        """Concrete strides of an input laid out as a view (`InputSpec.strides`), else None."""
        if spec.strides is None:
            return None
        return tuple(self.sizes[d] if isinstance(d, str) else d for d in spec.strides)

    def elements_of(self, spec: InputSpec) -> int:
        """Elements of the buffer behind an input: its shape's product, or for a view the
        extent its strides reach."""
        shape, strides = self.shape_of(spec), self.strides_of(spec)
        if strides is None:
            return math.prod(shape)
        if 0 in shape:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True))

    def launch(self, config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
        """Evaluate `grid` and `block` for a configuration of `params` (and `sizes`).

        Returns:
            ``{"grid": (x, y, z), "block": (…)}`` for the expressions that are set, each a tuple
            of ints.
        """
        scope = {**self.sizes, **config}
        out: dict[str, tuple[int, ...]] = {}
        for field in ("grid", "block"):
            text = getattr(self, field)
            if text is not None:
                out[field] = _evaluate(text, scope, field)
        return out


def _shape_entry(index: int, entry: Any) -> Any:
    """A YAML `shapes` entry ``{M: 16, N: 4096, weight: 3}`` as `Shape` data."""
    if not isinstance(entry, dict) or "sizes" in entry:
        return entry
    sizes = {k: v for k, v in entry.items() if k != "weight"}
    bad = {k: v for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool)}
    if bad:
        raise ValueError(f"`shapes[{index}]`: sizes are integers, got {bad}")
    return {"sizes": sizes, **({"weight": entry["weight"]} if "weight" in entry else {})}


def _check_expression(text: str, names: set[str], field: str) -> None:
    try:
        used = SafeExpression(text).names
    except ConstraintError as exc:
        raise ValueError(f"`{field}`: {exc}") from exc
    unknown = sorted(used - names)
    if unknown:
        raise ValueError(
            f"`{field}` expression {text!r} names {unknown}, which are neither `params` nor "
            f"`sizes` ({sorted(names)})"
        )


def _evaluate(text: str, scope: dict[str, Any], field: str) -> tuple[int, ...]:
    try:
        expression = SafeExpression(text)
        value = expression.evaluate(scope)
    except ConstraintError as exc:  # a bound of evaluation: the message names the rule
        raise DescriptionError(f"`{field}` {exc}") from None
    except (ArithmeticError, NameError, TypeError, ValueError) as exc:
        raise DescriptionError(f"`{field}` expression {text!r} failed on {scope!r}: {exc}") from exc
    items = value if isinstance(value, (tuple, list)) else (value,)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in items):
        raise DescriptionError(
            f"`{field}` expression {text!r} gave {value!r} on {scope!r}; it must give a positive "
            "int or a tuple of them (use // or ceil(a / b) for integer division)"
        )
    return tuple(items)


def _param_from_yaml(name: str, spec: Any) -> Any:
    """One `params` entry, e.g. ``{"ordinal": [64, 128]}``, as a space primitive."""
    if not isinstance(spec, dict):
        raise ValueError(f"params.{name}: expected a mapping like {{choice: [4, 8]}}, got {spec!r}")
    kinds = [k for k in spec if k in PARAM_KINDS]
    unknown = [k for k in spec if k not in PARAM_KINDS and k not in _PARAM_OPTIONS]
    if len(kinds) != 1 or unknown:
        raise ValueError(
            f"params.{name}: give exactly one of {list(PARAM_KINDS)} plus optional "
            f"{list(_PARAM_OPTIONS)}; got keys {sorted(spec)}"
        )
    kind, args = kinds[0], spec[kinds[0]]
    knockout = spec.get("knockout_prob")
    try:
        param = _build(kind, args, knockout, spec)
    except (SpaceError, TypeError) as exc:
        raise ValueError(f"params.{name}: {exc}") from exc
    if "when" in spec:
        return ss.conditional(param, when=spec["when"])
    return param


def _build(kind: str, args: Any, knockout: float | None, spec: dict[str, Any]) -> Any:
    if kind == "literal":
        return ss.literal(args, knockout_prob=knockout)
    if not isinstance(args, list):
        raise TypeError(f"`{kind}` takes a list, got {args!r}")
    # The baseline configuration's value (`space.default_genes()`); None: the first value.
    default = spec.get("default")
    if kind in ("choice", "ordinal"):
        return ss.Choice(args, knockout, ordered=kind == "ordinal", default=default)
    names = {
        "range": ("start", "end", "step"),
        "log_sampling": ("start", "end", "total"),
        "uniform": ("low", "high"),
    }[kind]
    if len(args) > len(names):
        raise TypeError(f"`{kind}` takes at most {len(names)} values {list(names)}, got {args!r}")
    named: dict[str, Any] = dict(zip(names, args, strict=False))
    if kind == "range":
        return ss.Range(
            **named,
            knockout_prob=knockout,
            seed_low=spec.get("seed_low"),
            seed_high=spec.get("seed_high"),
            default=default,
        )
    if kind == "log_sampling":
        return ss.LogSampling(**named, knockout_prob=knockout, default=default)
    return ss.Uniform(
        **named, knockout_prob=knockout, log=bool(spec.get("log", False)), default=default
    )


def _resolve_vendor_files(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`controls.ptxas.vendor_controls_files` resolved against the description's folder; each
    must be a regular file (it is hashed, never read further)."""
    controls = data.get("controls")
    if not isinstance(controls, dict) or not isinstance(controls.get("ptxas"), dict):
        return data
    ptxas = controls["ptxas"]
    files = ptxas.get("vendor_controls_files")
    if not isinstance(files, list):
        return data
    resolved = []
    for index, name in enumerate(files):
        field = f"controls.ptxas.vendor_controls_files[{index}]"
        if not isinstance(name, str):
            raise DescriptionError(f"{path}: field `{field}`: a path, got {name!r}")
        try:
            full = (path.parent / name).resolve()
        except (OSError, RuntimeError, ValueError) as exc:
            raise DescriptionError(f"{path}: field `{field}`: not a usable path: {exc}") from None
        if not full.is_file():
            raise DescriptionError(f"{path}: field `{field}`: {str(full)!r} is not a file")
        resolved.append(str(full))
    ptxas = {**ptxas, "vendor_controls_files": resolved}
    return {**data, "controls": {**controls, "ptxas": ptxas}}


def load_description(path: str | Path) -> KernelDescription:
    """Read and validate a kernel description file (``.yaml``, ``.yml`` or ``.json``).

    Args:
        path: the description file; `source` inside it is relative to this file.

    Raises:
        DescriptionError: the file is missing, unparsable, or a field is invalid (the message
            names the file and the field).
    """
    path = Path(path)
    data = load_data(path, FileKind("kernel description", error=DescriptionError))
    if not isinstance(data, dict):
        raise DescriptionError(
            f"{path}: a kernel description is a mapping of fields, got a {type(data).__name__}"
        )
    if isinstance(data.get("source"), str):
        try:
            data = {**data, "source": str((path.parent / data["source"]).resolve())}
        except (OSError, RuntimeError, ValueError) as exc:  # a NUL byte, a symlink loop
            raise DescriptionError(f"{path}: field `source`: not a usable path: {exc}") from None
    data = _resolve_vendor_files(path, data)
    try:
        desc = KernelDescription.model_validate({**data, "path": str(path.resolve())})
    except ValidationError as exc:
        problems = "; ".join(
            f"field `{'.'.join(str(p) for p in err['loc']) or '(top)'}`: {err['msg']}"
            for err in exc.errors()
        )
        raise DescriptionError(f"{path}: invalid kernel description: {problems}") from None
    if not desc.source.is_file():
        what = "does not exist" if not desc.source.exists() else "is not a regular file"
        raise DescriptionError(f"{path}: field `source`: {str(desc.source)!r} {what}")
    return desc
